package platformclient

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

func fastPolicy(mod func(*PolicyConfig)) *Policy {
	cfg := PolicyConfig{
		Platform:   reconcile.Alipay,
		Timeout:    200 * time.Millisecond,
		MaxRetries: 2,
		Tuning: Tuning{
			BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond,
			RateLimitRetries: 2, BreakerFailures: 3, BreakerCooldown: 100 * time.Millisecond,
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	return NewPolicy(cfg)
}

func kindErr(k reconcile.PlatformErrorKind) error {
	return NewError(reconcile.Alipay, k, "TEST", "", nil)
}

// script returns an attempt func answering errs in order, then nil; it counts calls.
func script(calls *atomic.Int32, errs ...error) func(context.Context) error {
	return func(context.Context) error {
		n := int(calls.Add(1)) - 1
		if n < len(errs) {
			return errs[n]
		}
		return nil
	}
}

func TestPolicyRetriesRetryableThenSucceeds(t *testing.T) {
	p := fastPolicy(nil)
	var calls atomic.Int32
	err := p.Do(context.Background(), "op", script(&calls, kindErr(reconcile.KindRetryable), kindErr(reconcile.KindRetryable)))
	if err != nil || calls.Load() != 3 {
		t.Fatalf("err=%v calls=%d, want nil after 3 calls", err, calls.Load())
	}
}

func TestPolicyGivesUpAfterMaxRetries(t *testing.T) {
	p := fastPolicy(func(c *PolicyConfig) { c.Tuning.BreakerFailures = 100 })
	var calls atomic.Int32
	always := func(context.Context) error { calls.Add(1); return kindErr(reconcile.KindRetryable) }
	err := p.Do(context.Background(), "op", always)
	if reconcile.PlatformErrorKindOf(err) != reconcile.KindRetryable || calls.Load() != 3 {
		t.Fatalf("err=%v calls=%d, want retryable after 1+2 calls", err, calls.Load())
	}
	p = fastPolicy(func(c *PolicyConfig) { c.MaxRetries = -1 })
	calls.Store(0)
	_ = p.Do(context.Background(), "op", always)
	if calls.Load() != 1 {
		t.Fatalf("negative MaxRetries: %d calls, want 1", calls.Load())
	}
}

func TestPolicyDoesNotRetryDefiniteAnswers(t *testing.T) {
	for _, k := range []reconcile.PlatformErrorKind{reconcile.KindConfig, reconcile.KindPermanent,
		reconcile.KindBadSignature, reconcile.KindAlreadyPaid} {
		p := fastPolicy(nil)
		var calls atomic.Int32
		err := p.Do(context.Background(), "op", script(&calls, kindErr(k), kindErr(k)))
		if reconcile.PlatformErrorKindOf(err) != k || calls.Load() != 1 {
			t.Errorf("%s: err=%v calls=%d, want the error after one call", k, err, calls.Load())
		}
	}
}

func TestPolicyWaitsOnThrottleBoundedTimes(t *testing.T) {
	p := fastPolicy(nil)
	var calls atomic.Int32
	err := p.Do(context.Background(), "op", script(&calls, kindErr(reconcile.KindRateLimited)))
	if err != nil || calls.Load() != 2 {
		t.Fatalf("one throttle: err=%v calls=%d, want success on the second call", err, calls.Load())
	}
	calls.Store(0)
	always := func(context.Context) error { calls.Add(1); return kindErr(reconcile.KindRateLimited) }
	err = p.Do(context.Background(), "op", always)
	if reconcile.PlatformErrorKindOf(err) != reconcile.KindRateLimited || calls.Load() != 3 {
		t.Fatalf("persistent throttle: err=%v calls=%d, want rate_limited after 1+2 calls", err, calls.Load())
	}
	if p.BreakerState() != "closed" {
		t.Fatalf("throttles opened the breaker: %s", p.BreakerState())
	}
}

func TestPolicyBreakerOpensOnRetryableOnlyAndRecovers(t *testing.T) {
	p := fastPolicy(func(c *PolicyConfig) { c.MaxRetries = -1 })
	var calls atomic.Int32
	// Definite answers never open it, however many.
	for i := 0; i < 10; i++ {
		_ = p.Do(context.Background(), "op", func(context.Context) error {
			calls.Add(1)
			return kindErr([]reconcile.PlatformErrorKind{reconcile.KindConfig, reconcile.KindPermanent,
				reconcile.KindBadSignature, reconcile.KindRateLimited}[i%4])
		})
	}
	if p.BreakerState() != "closed" {
		t.Fatalf("definite answers opened the breaker")
	}
	failing := func(context.Context) error { calls.Add(1); return kindErr(reconcile.KindRetryable) }
	for i := 0; i < 3; i++ {
		if err := p.Do(context.Background(), "op", failing); reconcile.PlatformErrorKindOf(err) != reconcile.KindRetryable {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if p.BreakerState() != "open" {
		t.Fatalf("state %s after 3 consecutive failures, want open", p.BreakerState())
	}
	calls.Store(0)
	start := time.Now()
	err := p.Do(context.Background(), "op", failing)
	if reconcile.PlatformErrorKindOf(err) != reconcile.KindUnavailable || calls.Load() != 0 {
		t.Fatalf("open breaker: err=%v calls=%d, want unavailable without calling", err, calls.Load())
	}
	if time.Since(start) > time.Second { // fails without calling: no timeout, no backoff
		t.Fatalf("open breaker took %s to fail", time.Since(start))
	}
	time.Sleep(120 * time.Millisecond) // cooldown
	if err := p.Do(context.Background(), "op", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("half-open probe: %v", err)
	}
	if p.BreakerState() != "closed" {
		t.Fatalf("state %s after a good probe, want closed", p.BreakerState())
	}
}

func TestPolicyPerAttemptTimeoutAndCallerCancel(t *testing.T) {
	p := fastPolicy(func(c *PolicyConfig) { c.Timeout = 30 * time.Millisecond; c.MaxRetries = 1 })
	var calls atomic.Int32
	hang := func(ctx context.Context) error {
		calls.Add(1)
		<-ctx.Done()
		return NewError(reconcile.Alipay, reconcile.KindRetryable, "TIMEOUT", "", ctx.Err())
	}
	start := time.Now()
	err := p.Do(context.Background(), "op", hang)
	if reconcile.PlatformErrorKindOf(err) != reconcile.KindRetryable || calls.Load() != 2 {
		t.Fatalf("err=%v calls=%d", err, calls.Load())
	}
	if el := time.Since(start); el < 60*time.Millisecond || el > 3*time.Second {
		t.Fatalf("two 30ms attempts took %s", el)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls.Store(0)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	err = p.Do(ctx, "op", hang)
	if !errors.Is(err, context.Canceled) || calls.Load() != 1 {
		t.Fatalf("cancelled caller: err=%v calls=%d, want context.Canceled after one call", err, calls.Load())
	}
	if p.BreakerState() != "closed" {
		t.Fatal("a caller's cancel counted against the platform")
	}
}

func TestPolicyTokenBucketIsShared(t *testing.T) {
	p := fastPolicy(func(c *PolicyConfig) { c.QPS = 40 })
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				_ = p.Do(context.Background(), "op", func(context.Context) error { return nil })
			}
		}()
	}
	wg.Wait()
	// 24 calls at 40/s: the burst goes at once, and the 24th token comes (24-burst)/40 s
	// after the first.
	want := time.Duration(24-reconcile.BudgetBurst(40)) * time.Second / 40
	if el := time.Since(start); el < want-25*time.Millisecond || el > 5*time.Second {
		t.Fatalf("24 calls at 40 QPS took %s, want about %s", el, want)
	}
}

func TestPolicyBackoffIsBoundedFullJitter(t *testing.T) {
	p := fastPolicy(func(c *PolicyConfig) {
		c.Tuning.BackoffBase = 10 * time.Millisecond
		c.Tuning.BackoffMax = 50 * time.Millisecond
	})
	for retry, ceiling := range []time.Duration{10, 20, 40, 50, 50, 50} {
		ceiling *= time.Millisecond
		var maxSeen time.Duration
		for i := 0; i < 300; i++ {
			d := p.backoff(retry)
			if d < 0 || d > ceiling {
				t.Fatalf("retry %d: backoff %s outside [0, %s]", retry, d, ceiling)
			}
			maxSeen = max(maxSeen, d)
		}
		if maxSeen < ceiling/2 {
			t.Fatalf("retry %d: backoff never above %s of %s: not jittered over the full range", retry, maxSeen, ceiling)
		}
	}
}

func TestPolicyWrapsForeignErrorsAsRetryable(t *testing.T) {
	p := fastPolicy(func(c *PolicyConfig) { c.MaxRetries = -1 })
	err := p.Do(context.Background(), "op", func(context.Context) error { return errors.New("boom") })
	if reconcile.PlatformErrorKindOf(err) != reconcile.KindRetryable {
		t.Fatalf("got %v", err)
	}
}

// DoTimeout gives each attempt its own timeout (a download's), Do the policy's.
func TestPolicyDoTimeout(t *testing.T) {
	p := NewPolicy(PolicyConfig{Platform: reconcile.Alipay, Timeout: time.Second})
	for _, c := range []struct {
		name     string
		run      func(func(context.Context) error) error
		min, max time.Duration
	}{
		{"Do", func(f func(context.Context) error) error { return p.Do(context.Background(), "q", f) }, 0, time.Second},
		{"DoTimeout", func(f func(context.Context) error) error {
			return p.DoTimeout(context.Background(), "download", time.Hour, f)
		}, 30 * time.Minute, time.Hour},
	} {
		var left time.Duration
		if err := c.run(func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			left = time.Until(d)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if left <= c.min || left > c.max {
			t.Errorf("%s: attempt deadline %v away, want in (%v, %v]", c.name, left, c.min, c.max)
		}
	}
}

// The policy logs through the client's logger, which names the platform and account on
// every line: its own lines (a retry, the breaker changing state) must not name the
// platform again, or strict log stores refuse them.
func TestPolicyLogLinesNameThePlatformOnce(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf).Level(zerolog.DebugLevel).With().Str("platform", "alipay").Str("app_id", "2021000000000001").Logger()
	p := fastPolicy(func(c *PolicyConfig) { c.MaxRetries = 1; c.Logger = log })
	for range 3 {
		_ = p.Do(context.Background(), "query", func(context.Context) error { return kindErr(reconcile.KindRetryable) })
	}
	var retries, changes int
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if n := strings.Count(line, `"platform":`); n != 1 {
			t.Errorf("a policy line names the platform %d times:\n%s", n, line)
		}
		retries += strings.Count(line, "retrying")
		changes += strings.Count(line, "circuit breaker changed state")
	}
	if retries == 0 || changes == 0 {
		t.Fatalf("%d retry lines and %d breaker lines; the test needs both:\n%s", retries, changes, buf.String())
	}
}
