package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// terminateOthers kills every session of db's database but the caller's.
func terminateOthers(t *testing.T, db *repotest.DB) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	return n
}

// Regression: after the sessions of idle pooled connections are killed (a failover, an
// operator's pg_terminate_backend), the lock is asked again on a fresh connection instead of
// failing the pass on the dead one.
func TestLockerSurvivesKilledIdleSessions(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	other, err := postgres.Open(context.Background(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// More idle sessions than the lock's own attempts: a long-running serve's pool after a
	// failover, every idle session dead.
	const idle = 6
	other.SetMaxOpenConns(idle)
	other.SetMaxIdleConns(idle)
	locker := postgres.NewStore(other).Locker().WithWait(0)
	ctx := context.Background()
	// Fill the pool with idle sessions, then kill them.
	var conns []*sql.Conn
	for range idle {
		c, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	if n := terminateOthers(t, db); n < idle {
		t.Fatalf("killed %d sessions, want the pool's %d", n, idle)
	}
	lock, ok, err := locker.TryLock(ctx, "payrecon:run:0/1")
	if err != nil || !ok {
		t.Fatalf("TryLock after killed sessions: ok=%v err=%v", ok, err)
	}
	if lock.Session.PID == 0 || lock.Session.Start.IsZero() {
		t.Fatalf("session not reported: %+v", lock.Session)
	}
	lock.Unlock()
	// Released: another store takes it at once.
	lock2, ok, err := postgres.NewStore(db.DB).Locker().WithWait(0).TryLock(ctx, "payrecon:run:0/1")
	if err != nil || !ok {
		t.Fatalf("lock not released: ok=%v err=%v", ok, err)
	}
	lock2.Unlock()
}

// Regression: an unlock that fails leaves the lock on its session; that session must be
// closed, not pooled, or the next user of the connection would hold the lock unknowingly.
func TestFailedUnlockClosesTheSession(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	pool, err := sqlx.Open("postgres", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.SetMaxOpenConns(1)
	ctx := context.Background()
	const name = "payrecon:run:0/1"
	conn, err := pool.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	var pid int
	if err := conn.QueryRowxContext(ctx, `SELECT pg_try_advisory_lock($1), pg_backend_pid()`, postgres.LockKey(name)).Scan(&ok, &pid); err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	// An error that leaves the session usable and the lock held (a lib/pq context error
	// marks the connection bad by itself, so the test needs a statement error).
	postgres.UnlockOn(ctx, conn, `SELECT pg_advisory_unlock($1) FROM no_such_table`, postgres.LockKey(name))
	var next int
	if err := pool.Get(&next, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if next == pid {
		t.Fatalf("the session that may still hold the lock went back to the pool (pid %d)", pid)
	}
	lock, ok, err := postgres.NewStore(db.DB).Locker().TryLock(ctx, name)
	if err != nil || !ok {
		t.Fatalf("lock leaked after a failed unlock: ok=%v err=%v", ok, err)
	}
	lock.Unlock()
}

// A lock whose holder was killed a moment ago is taken once the server drops the session;
// one held by a live session is refused after the wait.
func TestLockerWaitsForADyingHolder(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	ctx := context.Background()
	holder, ok, err := postgres.NewStore(db.DB).Locker().TryLock(ctx, "payrecon:backfill:0/1")
	if err != nil || !ok {
		t.Fatal(err)
	}
	start := time.Now()
	if _, ok, err := postgres.NewStore(db.DB).Locker().WithWait(100*time.Millisecond).TryLock(ctx, "payrecon:backfill:0/1"); err != nil || ok {
		t.Fatalf("a live holder's lock was taken: ok=%v err=%v", ok, err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("did not wait for the holder")
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		db.Exec(`SELECT pg_terminate_backend($1)`, holder.Session.PID) //nolint:errcheck
	}()
	lock, ok, err := postgres.NewStore(db.DB).Locker().WithWait(10*time.Second).TryLock(ctx, "payrecon:backfill:0/1")
	if err != nil || !ok {
		t.Fatalf("lock of a killed holder not taken: ok=%v err=%v", ok, err)
	}
	lock.Unlock()
	holder.Unlock() // its session is gone: the unlock fails and discards it
}

// TakeOver (called by the lock's holder) marks interrupted exactly the other running runs of
// the same lock, whatever their session (a pooled session outlives its pass), and frees
// their leases and the leftover leases of finished runs; another lock's running run is left
// alone.
func TestTakeOverOnlyDeadRunsOfTheSameLock(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	ctx := context.Background()
	store := postgres.NewStore(db.DB)
	live, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var livePID int
	var liveStart time.Time
	if err := live.QueryRowxContext(ctx, `SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&livePID, &liveStart); err != nil {
		t.Fatal(err)
	}
	const lock = "payrecon:run:0/1"
	mk := func(lockName, status string, s reconcile.Session) int64 {
		r := reconcile.Run{Mode: reconcile.ModeOnce, Status: reconcile.RunStatus(status), StartedAt: time.Now(),
			Shard: reconcile.Shard{Index: 0, Count: 1}, LockName: lockName, Session: s}
		if err := store.Runs().StartRun(ctx, &r); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	gone := reconcile.Session{PID: 999999, Start: time.Now().Add(-time.Hour)}
	reused := reconcile.Session{PID: livePID, Start: liveStart.Add(-time.Hour)} // same pid, older backend
	dead := mk(lock, "running", gone)
	deadReused := mk(lock, "running", reused)
	// Its session lives on in a pool, but it does not hold the lock the caller holds: its
	// pass stopped without recording its end (seed 52 of the simulation).
	pooled := mk(lock, "running", reconcile.Session{PID: livePID, Start: liveStart})
	otherLock := mk("payrecon:run:1/2", "running", gone)
	finished := mk(lock, "succeeded", gone)
	me := mk(lock, "running", reconcile.Session{PID: livePID, Start: liveStart})
	// finished holds a lease its release failed to clear (found by the simulation, seed 8:
	// a statement timeout on the release left the order invisible for the whole lease).
	for i, owner := range []int64{dead, dead, deadReused, pooled, otherLock, finished} {
		repotest.InsertOrder(t, db, repotest.Order{Platform: "alipay", MerchantID: "m", OutTradeNo: fmt.Sprintf("T-%d", i), AmountMinor: 100,
			Status: "PENDING", CreatedAgo: time.Hour, LeaseOwner: fmt.Sprintf("run-%d", owner), LeaseUntil: time.Now().Add(time.Hour)})
	}
	got, err := store.Runs().TakeOver(ctx, reconcile.Run{ID: me, LockName: lock})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].RunID != dead || len(got[0].Orders) != 2 || got[1].RunID != deadReused || len(got[1].Orders) != 1 ||
		got[2].RunID != pooled || len(got[2].Orders) != 1 || got[3].RunID != finished || !got[3].Finished || len(got[3].Orders) != 1 ||
		got[0].Finished || got[1].Finished || got[2].Finished {
		t.Fatalf("taken over %+v, want runs %d (2 orders), %d (1), %d (1) and finished run %d (1)", got, dead, deadReused, pooled, finished)
	}
	for id, status := range map[int64]string{dead: "interrupted", deadReused: "interrupted", pooled: "interrupted", otherLock: "running", finished: "succeeded", me: "running"} {
		var s string
		if err := db.Get(&s, `SELECT status FROM reconcile_runs WHERE id = $1`, id); err != nil || s != status {
			t.Errorf("run %d: status %q (%v), want %q", id, s, err, status)
		}
	}
	var leased int
	db.Get(&leased, `SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL`) //nolint:errcheck
	if leased != 1 {
		t.Fatalf("%d orders still leased, want the other lock's 1", leased)
	}
}
