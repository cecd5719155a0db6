package redis_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/redis"
	"github.com/payrecon/payrecon/repo/repotest"
)

func TestRedisClaimerLifecycle(t *testing.T) {
	t.Parallel()
	r := repotest.NewRedis(t)
	rc, err := redis.NewClient(r.URL, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	c := redis.NewClaimer(rc, redis.ClaimerOptions{}, zerolog.Nop())
	ctx, key := context.Background(), r.Prefix+"alipay:T1"
	steps := []struct {
		name string
		do   func() reconcile.ClaimState
		want reconcile.ClaimState
	}{
		{"peek free", func() reconcile.ClaimState { return c.Peek(ctx, key) }, reconcile.ClaimFree},
		{"claim", func() reconcile.ClaimState { return c.Claim(ctx, key, time.Minute) }, reconcile.ClaimAcquired},
		{"claim again", func() reconcile.ClaimState { return c.Claim(ctx, key, time.Minute) }, reconcile.ClaimHeld},
		{"peek held", func() reconcile.ClaimState { return c.Peek(ctx, key) }, reconcile.ClaimHeld},
		{"release, then claim", func() reconcile.ClaimState { c.Release(ctx, key); return c.Claim(ctx, key, time.Minute) }, reconcile.ClaimAcquired},
		{"done", func() reconcile.ClaimState { c.MarkDone(ctx, key, time.Hour); return c.Claim(ctx, key, time.Minute) }, reconcile.ClaimDone},
		{"release never removes DONE", func() reconcile.ClaimState { c.Release(ctx, key); return c.Peek(ctx, key) }, reconcile.ClaimDone},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: %s, want %s", s.name, got, s.want)
		}
	}
	if v, _ := r.Client.Get(ctx, key).Result(); v != "DONE" {
		t.Fatalf("value %q, want the contract's DONE", v)
	}
	if ttl := r.Client.TTL(ctx, key).Val(); ttl <= 59*time.Minute {
		t.Fatalf("DONE ttl %s, want the retry window", ttl)
	}
	c.Release(ctx, key)
	c2 := r.Prefix + "alipay:T2"
	c.Claim(ctx, c2, time.Minute)
	if v, _ := r.Client.Get(ctx, c2).Result(); v != "PROCESSING" {
		t.Fatalf("claim value %q, want PROCESSING", v)
	}
	if ttl := r.Client.TTL(ctx, c2).Val(); ttl > time.Minute || ttl < 50*time.Second {
		t.Fatalf("lease ttl %s, want about a minute", ttl)
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRedisOutageIsCountedAndLoggedOncePerInterval(t *testing.T) {
	t.Parallel()
	// A server that accepts connections and never answers: the worst kind of outage.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()

	for _, target := range []struct{ name, url string }{
		{"refused", "redis://127.0.0.1:1/0"},
		{"hung", "redis://" + hung.Addr().String() + "/0"},
	} {
		t.Run(target.name, func(t *testing.T) {
			rc, err := redis.NewClient(target.url, 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var logs syncBuffer
			c := redis.NewClaimer(rc, redis.ClaimerOptions{CallTimeout: 50 * time.Millisecond, LogEvery: time.Hour}, zerolog.New(&logs))
			start := time.Now()
			const calls = 20
			for i := 0; i < calls; i++ {
				if got := c.Claim(context.Background(), "k", time.Minute); got != reconcile.ClaimUnavailable {
					t.Fatalf("claim on a dead Redis: %s, want unavailable", got)
				}
			}
			// Each call is bounded by its deadline: 20 calls at 50 ms are ~1 s; a Redis
			// client waiting on its default 3 s timeouts would take a minute.
			if took := time.Since(start); took > 15*time.Second {
				t.Fatalf("%d calls took %s: the per-call deadline is not enforced", calls, took)
			}
			if c.Failures() != calls {
				t.Fatalf("failures counted %d, want %d", c.Failures(), calls)
			}
			if n := strings.Count(logs.String(), "redis unavailable"); n != 1 {
				t.Fatalf("%d log lines for %d failures, want 1:\n%s", n, calls, logs.String())
			}
		})
	}
}
