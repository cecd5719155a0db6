package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payrecon/payrecon/reconcile"
)

// Locker implements reconcile.Locker with session-level PostgreSQL advisory locks, held on
// a dedicated connection: if the process dies, the server drops the lock with the session.
type Locker struct {
	store *Store
	// wait is how long a lock held by another session is asked for again: the session of
	// a process killed a moment ago lives on until its server process notices.
	wait time.Duration
}

// lockWait is the default Locker wait: a killed client's backend exits within milliseconds.
const lockWait = time.Second

// Locker returns the advisory locker over the same pool.
func (s *Store) Locker() *Locker { return &Locker{store: s, wait: lockWait} }

// WithWait returns a locker that asks a held lock again for up to d (0: once).
func (l *Locker) WithWait(d time.Duration) *Locker { return &Locker{store: l.store, wait: d} }

// lockAttempts is how many connections one TryLock may find dead beyond the pool's idle
// ones: after pg_terminate_backend or a failover every idle connection of the pool may be
// dead (each failed attempt discards one), and a fresh one may still meet a server that is
// not yet back.
const lockAttempts = 4

// TryLock implements reconcile.Locker. A connection whose session was killed is discarded
// and the lock asked again on a fresh one: a killed idle session must not fail the pass.
func (l *Locker) TryLock(ctx context.Context, name string) (reconcile.HeldLock, bool, error) {
	key := lockKey(name)
	deadline := time.Now().Add(l.wait)
	var lastErr error
	attempts := lockAttempts + l.store.db.Stats().Idle
	for attempt := 0; attempt < attempts; {
		conn, err := l.store.db.Connx(ctx)
		if err != nil {
			return reconcile.HeldLock{}, false, fmt.Errorf("lock %s: connect: %w", name, err)
		}
		var got struct {
			OK    bool         `db:"ok"`
			PID   int          `db:"pid"`
			Start sql.NullTime `db:"start"`
		}
		// The session's start (for the run row, to diagnose by) is read only once the lock is
		// granted: a pass waiting for a dying holder asks every 25 ms.
		err = conn.GetContext(ctx, &got, `SELECT l.ok, pg_backend_pid() AS pid,
			CASE WHEN l.ok THEN (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()) END AS start
			FROM (SELECT pg_try_advisory_lock($1) AS ok) l`, key)
		if err != nil {
			discardConn(conn)
			if ctx.Err() != nil {
				return reconcile.HeldLock{}, false, fmt.Errorf("lock %s: %w", name, err)
			}
			lastErr, attempt = err, attempt+1
			continue
		}
		if got.OK {
			unlock := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				unlockOn(ctx, conn, unlockSQL, key)
			}
			return reconcile.HeldLock{Unlock: unlock, Session: reconcile.Session{PID: got.PID, Start: got.Start.Time}}, true, nil
		}
		conn.Close()
		if !time.Now().Before(deadline) {
			return reconcile.HeldLock{}, false, nil
		}
		select {
		case <-ctx.Done():
			return reconcile.HeldLock{}, false, fmt.Errorf("lock %s: %w", name, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
	return reconcile.HeldLock{}, false, fmt.Errorf("lock %s: %d connections failed: %w", name, attempts, lastErr)
}

// lockKey is the advisory lock key of a lock name.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

const unlockSQL = `SELECT pg_advisory_unlock($1)`

// unlockOn releases the advisory lock and returns the session to the pool. When the unlock
// fails (a timeout, a broken connection), the session may still hold the lock: it is closed,
// never pooled, or the lock would leak to whoever gets that connection next.
func unlockOn(ctx context.Context, conn *sqlx.Conn, query string, key int64) {
	var released bool
	if err := conn.GetContext(ctx, &released, query, key); err != nil || !released {
		discardConn(conn)
		return
	}
	conn.Close()
}

// discardConn closes a connection's session instead of returning it to the pool.
func discardConn(conn *sqlx.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // the error is the point
	conn.Close()
}
