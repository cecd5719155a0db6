package repo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestMigrationsAreNumberedOnceInOrder: each migration's number is its place in the order,
// 0001 up with none left out and none twice (two migrations were once both 0005, and which
// ran first depended on the rest of their names), and each renamed version names a
// migration that exists, under a name no migration has any more.
func TestMigrationsAreNumberedOnceInOrder(t *testing.T) {
	migs, err := repo.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for i, m := range migs {
		names[m.Version] = true
		num, rest, ok := strings.Cut(m.Version, "_")
		if want := fmt.Sprintf("%04d", i+1); !ok || num != want || rest == "" {
			t.Errorf("migration %d is %q: want %s_<what it does>", i+1, m.Version, want)
		}
	}
	for _, r := range repo.RenamedMigrations {
		if names[r[0]] || !names[r[1]] {
			t.Errorf("rename %s -> %s: the old name must be gone and the new one a migration", r[0], r[1])
		}
	}
}

func TestMigrateIsRepeatableAndSerialised(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t) // already migrated from the template
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([][]string, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = repo.Migrate(context.Background(), db.DB)
		}()
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil || len(applied[i]) != 0 {
			t.Fatalf("migrate #%d on a migrated database: applied %v, err %v", i, applied[i], errs[i])
		}
	}
	migs, err := repo.Migrations()
	if err != nil || len(migs) == 0 {
		t.Fatalf("migrations: %v %v", migs, err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM schema_migrations`); err != nil || n != len(migs) {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, len(migs))
	}
}

func TestMigrateFreshDatabaseConcurrently(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	// Empty the database again, then let four migrations race on it.
	db.MustExec(`DROP SCHEMA public CASCADE; CREATE SCHEMA public`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := repo.Migrate(context.Background(), db.DB)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += len(v)
			mu.Unlock()
		}()
	}
	wg.Wait()
	migs, _ := repo.Migrations()
	if total != len(migs) {
		t.Fatalf("%d migrations applied across 4 racing runs, want each of %d exactly once", total, len(migs))
	}
}

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	ins := `INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at) VALUES ($1, 'm', $2, $3, 'PENDING', now())`
	db.MustExec(ins, "alipay", "o-1", 100)
	cases := []struct {
		name string
		sql  string
		args []any
	}{
		{"duplicate order identity", ins, []any{"alipay", "o-1", 100}},
		{"zero amount", ins, []any{"alipay", "o-2", 0}},
		{"unknown platform", ins, []any{"paypal", "o-3", 100}},
		{"unknown status", `UPDATE payment_orders SET status = 'LOST'`, nil},
	}
	for _, tc := range cases {
		if _, err := db.Exec(tc.sql, tc.args...); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	// The minimal insert of the contract is due at once: every other column defaulted.
	var due bool
	if err := db.Get(&due, `SELECT next_check_at IS NULL AND currency = 'CNY' AND version = 0 FROM payment_orders WHERE out_trade_no = 'o-1'`); err != nil || !due {
		t.Fatalf("defaults: %v %v", due, err)
	}
}

func TestStoreTranslatesNotFound(t *testing.T) {
	t.Parallel()
	s := repo.NewStore(repotest.NewDB(t).DB)
	_, err := s.FindOrder(context.Background(), reconcile.Alipay, "m", "nope")
	if !errors.Is(err, reconcile.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if _, err := s.ApplyTransition(context.Background(), reconcile.Transition{OrderID: 1, From: reconcile.StatusPaid, To: reconcile.StatusPending}); err == nil || !strings.Contains(err.Error(), "illegal transition") {
		t.Fatalf("illegal transition accepted: %v", err)
	}
}

func TestRedisClaimerLifecycle(t *testing.T) {
	t.Parallel()
	r := repotest.NewRedis(t)
	rc, err := repo.NewRedisClient(r.URL, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	c := repo.NewRedisClaimer(rc, repo.RedisOptions{}, zerolog.Nop())
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
			rc, err := repo.NewRedisClient(target.url, 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var logs syncBuffer
			c := repo.NewRedisClaimer(rc, repo.RedisOptions{CallTimeout: 50 * time.Millisecond, LogEvery: time.Hour}, zerolog.New(&logs))
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
