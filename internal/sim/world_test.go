package sim_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/internal/sim"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/redis"
	"github.com/payrecon/payrecon/repo/repotest"
)

const (
	aliMerchant = "2021000000000001"
	wxMerchant  = "1900000001"
	claimLease  = 500 * time.Millisecond
	orderTTL    = time.Hour
	// refundTTL is how long a refund the platform does not know may stay unknown: shorter
	// than the default hour, so that the clock's jumps age some lost refunds past it.
	refundTTL = 15 * time.Minute
)

// world is one worker goroutine's database and Redis prefix, reused by every seed it runs
// (emptied with TRUNCATE and a prefix delete, never recreated).
type world struct {
	t     testing.TB
	db    *repotest.DB
	admin *sqlx.DB // the server's maintenance database: ALTER DATABASE, pg_terminate_backend
	// pool is the simulated processes' connections: a process is its wrappers (a crash
	// mutes them), so they can share one pool and not pay for new sessions every seed.
	pool *sqlx.DB
	// cleanPool serves the statement runs of the clean phase, one at a time. A statement
	// run of the schedule gets a pool of its own (statementRun).
	cleanPool *sqlx.DB
	redis     *repotest.Redis
	rc        *goredis.Client
	up        reconcile.Claimer
	down      reconcile.Claimer
	closed    []func()
}

func newWorld(t testing.TB) *world {
	w := &world{t: t, db: repotest.NewDB(t), redis: repotest.NewRedis(t)}
	var err error
	if w.admin, err = sqlx.Open("postgres", repotest.AdminURL()); err != nil {
		t.Fatal(err)
	}
	w.admin.SetMaxOpenConns(1)
	// The audit trail refuses DELETE and TRUNCATE, for good reason; this throwaway database
	// empties it between seeds, so its owner drops those two triggers here.
	if _, err := w.db.Exec(`ALTER TABLE reconcile_mismatch_audit DISABLE TRIGGER reconcile_mismatch_audit_no_truncate;
		ALTER TABLE reconcile_mismatch_audit DISABLE TRIGGER reconcile_mismatch_audit_no_change`); err != nil {
		t.Fatal(err)
	}
	// This database is thrown away: commits need not wait for the disk, which on a shared
	// machine is most of what a seed would cost. Crash safety of the server is not what the
	// simulation tests; sessions killed, statement timeouts and process crashes still are.
	if _, err := w.admin.Exec(`ALTER DATABASE ` + pq.QuoteIdentifier(w.db.Name) + ` SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	if w.pool, err = sqlx.Open("postgres", w.db.URL); err != nil {
		t.Fatal(err)
	}
	// The server's connections are shared with every other test running meanwhile: a
	// worker holds at most 6 + 4 + 3 + 1 of them, and 4 more for each statement run of its
	// schedule (runs wait for a connection, never fail).
	w.pool.SetMaxOpenConns(6)
	w.pool.SetMaxIdleConns(6)
	w.db.SetMaxOpenConns(3)
	w.db.SetMaxIdleConns(3)
	t.Cleanup(func() { w.pool.Close() })
	if w.cleanPool, err = sqlx.Open("postgres", w.db.URL); err != nil {
		t.Fatal(err)
	}
	w.cleanPool.SetMaxOpenConns(4)
	w.cleanPool.SetMaxIdleConns(4)
	t.Cleanup(func() { w.cleanPool.Close() })
	t.Cleanup(func() {
		w.admin.Exec(`ALTER DATABASE ` + pq.QuoteIdentifier(w.db.Name) + ` RESET statement_timeout`) //nolint:errcheck
		w.admin.Close()
	})
	if w.rc, err = redis.NewClient(w.redis.URL, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	dead, err := redis.NewClient("redis://127.0.0.1:1/0", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.rc.Close(); dead.Close() })
	w.up = redis.NewClaimer(w.rc, redis.ClaimerOptions{}, zerolog.Nop())
	w.down = redis.NewClaimer(dead, redis.ClaimerOptions{}, zerolog.Nop())
	return w
}

// reset empties the database and the Redis prefix for the next seed.
func (w *world) reset(ctx context.Context) error {
	if _, err := w.admin.ExecContext(ctx, `ALTER DATABASE `+pq.QuoteIdentifier(w.db.Name)+` RESET statement_timeout`); err != nil {
		return err
	}
	// DELETE, not TRUNCATE: a seed leaves a few dozen rows, and TRUNCATE's new files for
	// every table and index cost about 300 ms a seed on the loaded shared machine, DELETE 4.
	// Children first, for the foreign keys.
	if _, err := w.db.ExecContext(ctx, `DELETE FROM statement_lines; DELETE FROM statement_held; DELETE FROM statement_days;
		DELETE FROM reconcile_mismatch_audit; DELETE FROM reconcile_mismatches; DELETE FROM payment_events;
		DELETE FROM fulfillment_outbox; DELETE FROM payment_refunds; DELETE FROM payment_orders; DELETE FROM reconcile_runs`); err != nil {
		return fmt.Errorf("empty the tables: %w", err)
	}
	return w.flush(ctx)
}

// keys lists the claim keys. The harness uses its own client (w.redis.Client, no 100 ms
// deadline): a loaded machine must not fail the check itself.
func (w *world) keys(ctx context.Context) ([]string, error) {
	return w.redis.Client.Keys(ctx, w.redis.Prefix+"*").Result()
}

func (w *world) flush(ctx context.Context) error {
	keys, err := w.keys(ctx)
	if err != nil || len(keys) == 0 {
		return err
	}
	return w.redis.Client.Del(ctx, keys...).Err()
}

// terminate kills every session of the world's database (the kernel closing a dead
// process's sockets, a failover, an operator), or only pid when given.
func (w *world) terminate(ctx context.Context, pid int) {
	if pid != 0 {
		w.admin.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid) //nolint:errcheck
		// The server drops the session (and its advisory lock) a moment later: wait, as the
		// next pass would find it gone.
		for i := 0; i < 100; i++ {
			var n int
			if w.admin.GetContext(ctx, &n, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) == nil && n == 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		return
	}
	w.admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, w.db.Name) //nolint:errcheck
}

// statementTimeout sets (or with "" resets) the database's statement_timeout, then ends its
// sessions so the pools reconnect under it.
//
// A reset must leave no session that read the 1 ms: the clean phase would fail on it for
// good, as a timed-out statement does not retire its connection. A session can begin while
// the setting changes (database/sql opens connections in the background for requests a
// cancelled pass gave up on) and be too young for pg_stat_activity to name its database
// when the kill is sent. So the reset is read back until it holds, and every session that
// began before it committed is ended, again and again, until none is left.
func (w *world) statementTimeout(ctx context.Context, v string) {
	q := `ALTER DATABASE ` + pq.QuoteIdentifier(w.db.Name) + ` RESET statement_timeout`
	if v != "" {
		q = `ALTER DATABASE ` + pq.QuoteIdentifier(w.db.Name) + ` SET statement_timeout = ` + pq.QuoteLiteral(v)
	}
	for i := 0; i < 3; i++ { // the admin session may be the one a kill or the load failed
		if _, err := w.admin.ExecContext(ctx, q); err == nil {
			break
		}
	}
	if v != "" {
		w.terminate(ctx, 0)
		return
	}
	var committed time.Time
	for i := 0; i < 100 && committed.IsZero(); i++ {
		var set int
		err := w.admin.GetContext(ctx, &set, `SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
			WHERE d.datname = $1 AND s.setrole = 0 AND EXISTS (SELECT 1 FROM unnest(s.setconfig) c WHERE c LIKE 'statement_timeout=%')`, w.db.Name)
		switch {
		case err != nil:
			time.Sleep(5 * time.Millisecond)
		case set > 0:
			w.admin.ExecContext(ctx, q) //nolint:errcheck // read back on the next turn
		default:
			w.admin.GetContext(ctx, &committed, `SELECT clock_timestamp()`) //nolint:errcheck // zero: asked again
		}
	}
	// A backend shows in pg_stat_activity only once it has read its settings: a clean sweep
	// counts when three checks 50 ms apart, each after the kills, find none older.
	for i, clean := 0, 0; i < 400 && !committed.IsZero(); i++ {
		var older int
		err := w.admin.GetContext(ctx, &older, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = $1 AND backend_start < $2`, w.db.Name, committed)
		if err != nil || older > 0 {
			clean = 0
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if clean++; clean == 3 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.t.Errorf("statement_timeout of %s: sessions from before its reset would not end", w.db.Name)
}

// freshSessions drops the idle sessions of every pool of the world, after statementTimeout
// ended them: a session that was starting while the timeout was switched off may have read
// the old 1 ms and missed the kill, and would fail every statement of the clean phase and of
// the seeds after.
func (w *world) freshSessions() {
	for _, db := range []*sqlx.DB{w.db.DB, w.pool, w.cleanPool} {
		db.SetMaxIdleConns(0)
	}
	w.db.SetMaxIdleConns(3)
	w.pool.SetMaxIdleConns(6)
	w.cleanPool.SetMaxIdleConns(4)
}

// callback is one copy of a payment or refund notification the platform sends until
// acknowledged.
type callback struct {
	pl      *sim.Platform
	otn     string
	trade   string
	amount  int64
	paidAt  time.Time
	spoiled bool
	// refund, when set, makes this a refund notification, delivered through
	// ApplyRefundCallback (trade, amount and paidAt are then unused).
	refund *reconcile.RefundResult
}

// ack is an acknowledged callback: what it was and what the apply path answered.
type ack struct {
	cb       callback
	outcome  reconcile.Outcome
	mismatch reconcile.MismatchKind
}

// order is what the seed created.
type order struct {
	pl        *sim.Platform
	otn       string
	amount    int64
	createdAt time.Time
	expiresAt time.Time // zero: created + orderTTL
}

func (o order) expiry() time.Time {
	if o.expiresAt.IsZero() {
		return o.createdAt.Add(orderTTL)
	}
	return o.expiresAt
}

// seedRun is one seed's schedule in progress.
type seedRun struct {
	w      *world
	seed   int64
	start  time.Time // when the seed began, on the simulated clock: its bills' business day
	rng    *rand.Rand
	faults *sim.Faults
	seen   *sim.Faults  // what became of the refunds: evidence the refund invariants had work
	offset atomic.Int64 // the simulated clock's lead over the wall clock
	ali    *sim.Platform
	wx     *sim.Platform
	claims *sim.Switch
	serve  *reconcile.Applier
	orders []order
	wg     sync.WaitGroup

	mu       sync.Mutex
	pending  []callback
	acks     []ack
	snapshot map[string]time.Duration // DONE keys and their remaining TTL
	trades   int

	// refunds are every refund the merchant's app recorded or the portal made, in the order
	// they were made (refunds_test.go); asked is what the app has asked back per order.
	refunds []*simRefund
	asked   map[string]int64
	// lastClean is when (simulated clock) the last clean round began: a refund older than
	// refundTTL then must have been found missing at the platform by its backfill.
	lastClean time.Time
}

func (s *seedRun) now() time.Time { return time.Now().Add(time.Duration(s.offset.Load())) }

func (s *seedRun) applierSettings() reconcile.ApplierSettings {
	return reconcile.ApplierSettings{ClaimPrefix: s.w.redis.Prefix, ClaimLease: claimLease, ClaimTTL: 25 * time.Hour,
		OrderTTL: orderTTL, RefundTTL: refundTTL, Now: s.now}
}

// runner builds a pass runner inside a process of its own.
func (s *seedRun) runner(p *sim.Process, concurrency int) *reconcile.Runner {
	st := p.Store()
	applier := reconcile.NewApplier(st, p.Claimer(), s.applierSettings(), zerolog.Nop())
	return reconcile.NewRunner(applier, st, st, p.Locker(), []reconcile.PlatformClient{s.ali, s.wx}, reconcile.RunnerSettings{
		Concurrency: concurrency, Grace: time.Minute, Lookback: 72 * time.Hour, OrderTTL: orderTTL,
		RecheckMin: 0, RecheckMax: 0, CloseAtPlatform: true, DrainTimeout: 20 * time.Millisecond,
		Lease: reconcile.DefaultOrderLease(0), Now: s.now,
	}, nil, zerolog.Nop())
}

// process starts a simulated process over the world's shared pool.
func (s *seedRun) process() *sim.Process {
	return sim.NewProcess(postgres.NewStore(s.w.pool), s.claims)
}

func (s *seedRun) spec(mode reconcile.RunMode) reconcile.PassSpec {
	spec := reconcile.PassSpec{Mode: mode}
	if mode == reconcile.ModeBackfill {
		spec.From, spec.To = time.Now().Add(-3*time.Hour), time.Now().Add(time.Hour)
	}
	return spec
}
