package repo

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
)

// takeColumns is orderColumns plus the backoff counter a pass needs.
const takeColumns = orderColumns + `, check_count`

type takenRow struct {
	orderRow
	CheckCount int `db:"check_count"`
}

// beginningOfTime is the keyset cursor's start.
var beginningOfTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

// Take implements reconcile.WorkQueue: ONE statement selects the next orders in keyset order
// with FOR UPDATE SKIP LOCKED and leases them, so overlapping passes, a backfill and several
// pods never check the same order at once. A dry run only reads.
func (s *Store) Take(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.Order, error) {
	after := q.After.CreatedAt
	if q.After.IsZero() {
		after = beginningOfTime
	}
	args := []any{after, q.After.ID, q.Now, q.Limit, q.Shard.Count, q.Shard.Index}
	var filter string
	switch q.Mode {
	case reconcile.ModeBackfill:
		filter = `created_at >= $7 AND created_at < $8`
		args = append(args, q.From, q.To)
	default:
		// Due: pending, past the grace period, inside the lookback, next check reached, and
		// not checked yet in this pass (RECHECK_MIN 0s would otherwise loop forever).
		filter = `status = 'PENDING' AND created_at <= $7 AND created_at >= $8
			AND (next_check_at IS NULL OR next_check_at <= $3)
			AND (last_checked_at IS NULL OR last_checked_at < $9)`
		args = append(args, q.Now.Add(-q.Grace), q.Now.Add(-q.Lookback), q.PassStart)
	}
	if q.Account.MerchantID != "" {
		args = append(args, string(q.Account.Platform), q.Account.MerchantID)
		filter += fmt.Sprintf(` AND platform = $%d AND merchant_id = $%d`, len(args)-1, len(args))
	}
	// Free: never leased, or the lease ran out. A pass also takes back its own leases past
	// the cursor: every order it still has in flight lies at or before the cursor, so a row
	// leased to it beyond the cursor is one a take leased but whose answer was lost (a
	// connection cut after the commit), which would otherwise wait out the whole lease.
	free := `(lease_until IS NULL OR lease_until < $3)`
	n := len(args)
	if !q.DryRun {
		args = append(args, q.Now.Add(q.Lease), q.Owner)
		free = fmt.Sprintf(`(lease_until IS NULL OR lease_until < $3 OR lease_owner = $%d)`, n+2)
	}
	selectDue := `SELECT id FROM payment_orders
		WHERE ` + filter + `
		  AND (created_at, id) > ($1, $2)
		  AND ` + free + `
		  AND shard_hash % $5 = $6
		ORDER BY created_at, id
		LIMIT $4`
	var query string
	if q.DryRun {
		query = `SELECT ` + takeColumns + ` FROM payment_orders WHERE id IN (` + selectDue + `)`
	} else {
		query = fmt.Sprintf(`WITH picked AS (%s FOR UPDATE SKIP LOCKED)
			UPDATE payment_orders o SET lease_until = $%d, lease_owner = $%d
			FROM picked WHERE o.id = picked.id
			RETURNING %s`, selectDue, n+1, n+2, prefixed("o.", takeColumns))
	}
	// Retried on a broken connection: if the lost attempt did lease orders, the retry (same
	// owner, same cursor) takes them back.
	var rows []takenRow
	if err := retryConn(ctx, func() error {
		rows = rows[:0]
		return s.selectPrepared(ctx, &rows, query, args...)
	}); err != nil {
		return nil, fmt.Errorf("take orders after %s: %w", q.After, err)
	}
	out := make([]reconcile.Order, len(rows))
	for i, r := range rows {
		out[i] = r.order()
		out[i].CheckCount = r.CheckCount
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Unconfigured implements reconcile.WorkQueue: one grouped count over the pending orders of
// the window and shard, leaving out the configured accounts.
func (s *Store) Unconfigured(ctx context.Context, from, to time.Time, shard reconcile.Shard, configured []reconcile.AccountKey) ([]reconcile.AccountCount, error) {
	platforms, merchants := make([]string, len(configured)), make([]string, len(configured))
	for i, k := range configured {
		platforms[i], merchants[i] = string(k.Platform), k.MerchantID
	}
	if shard.Count == 0 {
		shard = reconcile.Shard{Index: 0, Count: 1}
	}
	var rows []struct {
		Platform   string `db:"platform"`
		MerchantID string `db:"merchant_id"`
		Orders     int64  `db:"orders"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT platform, merchant_id, count(*) AS orders FROM payment_orders
		WHERE status = 'PENDING' AND created_at >= $1 AND created_at < $2 AND shard_hash % $3 = $4
		  AND (platform, merchant_id) NOT IN (SELECT * FROM unnest($5::text[], $6::text[]))
		GROUP BY platform, merchant_id ORDER BY platform, merchant_id`,
		from, to, shard.Count, shard.Index, pq.Array(platforms), pq.Array(merchants))
	if err != nil {
		return nil, fmt.Errorf("count orders of unconfigured accounts: %w", err)
	}
	out := make([]reconcile.AccountCount, len(rows))
	for i, r := range rows {
		out[i] = reconcile.AccountCount{Account: reconcile.AccountKey{Platform: reconcile.Platform(r.Platform), MerchantID: r.MerchantID}, Orders: r.Orders}
	}
	return out, nil
}

// prefixed qualifies a comma-separated column list with a table alias.
// aliased qualifies each column with table (such as "o.") and names it so too, `o.id AS
// "o.id"`: how sqlx fills a nested struct tagged `db:"o"` beside another table's columns of
// the same names.
func aliased(table, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		c := table + strings.TrimSpace(p)
		parts[i] = c + ` AS "` + c + `"`
	}
	return strings.Join(parts, ", ")
}

func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = prefix + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// Checked implements reconcile.WorkQueue. A lease taken over by another pass (ours expired)
// is left to that pass. Retried on a broken connection.
func (s *Store) Checked(ctx context.Context, c reconcile.CheckRecord) error {
	err := retryConn(ctx, func() error {
		return s.execPrepared(ctx, `UPDATE payment_orders SET
			lease_until = NULL, lease_owner = NULL, last_checked_at = $3,
			next_check_at = CASE WHEN status = 'PENDING' THEN $4 ELSE next_check_at END,
			check_count = CASE WHEN status = 'PENDING' AND $5 THEN check_count + 1 ELSE check_count END
		WHERE id = $1 AND (lease_owner = $2 OR lease_owner IS NULL)
		  AND last_checked_at IS DISTINCT FROM $3 -- a retry after a lost answer counts the check once`,
			c.OrderID, c.Owner, c.Now, c.NextCheck, c.Backoff)
	})
	if err != nil {
		return fmt.Errorf("schedule next check of order %d: %w", c.OrderID, err)
	}
	return nil
}

// Runs implements reconcile.RunLog on reconcile_runs.
type Runs struct{ store *Store }

// Runs returns the run log over the same pool.
func (s *Store) Runs() *Runs { return &Runs{store: s} }

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// StartRun implements reconcile.RunLog.
func (r *Runs) StartRun(ctx context.Context, run *reconcile.Run) error {
	pid, start := sessionArgs(run.Session)
	err := r.store.db.GetContext(ctx, &run.ID, `INSERT INTO reconcile_runs (mode, started_at, status, window_from, window_to, shard, cursor, dry_run,
			lock_name, lock_pid, lock_backend_start)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), $8, NULLIF($9, ''), $10, $11) RETURNING id`,
		string(run.Mode), run.StartedAt, string(run.Status), nullTime(run.WindowFrom), nullTime(run.WindowTo),
		run.Shard.String(), run.Cursor.String(), run.DryRun, run.LockName, pid, start)
	if err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	return nil
}

// saveRunSQL writes a run's state: its counters from $5 in reconcile.RunCounters order, then
// the rest, numbered after them, so a counter added to the table shifts nothing by hand.
var saveRunSQL = func() string {
	sets := make([]string, len(reconcile.RunCounters))
	for i, rc := range reconcile.RunCounters {
		sets[i] = fmt.Sprintf("%s = $%d", rc.Name, 5+i)
	}
	n := 5 + len(reconcile.RunCounters)
	return `UPDATE reconcile_runs SET status = $2, cursor = NULLIF($3, ''), error = NULLIF($4, ''), ` +
		strings.Join(sets, ", ") + fmt.Sprintf(`, dry_run = $%d, finished_at = $%d,
	lock_name = COALESCE(NULLIF($%d, ''), lock_name), lock_pid = COALESCE($%d, lock_pid),
	lock_backend_start = COALESCE($%d, lock_backend_start), refund_cursor = NULLIF($%d, '') WHERE id = $1`,
		n, n+1, n+2, n+3, n+4, n+5)
}()

func (r *Runs) save(ctx context.Context, run reconcile.Run) error {
	c := run.Counts
	pid, start := sessionArgs(run.Session)
	args := []any{run.ID, string(run.Status), run.Cursor.String(), run.Error}
	for _, rc := range reconcile.RunCounters {
		args = append(args, rc.Value(c))
	}
	args = append(args, run.DryRun, nullTime(run.FinishedAt), run.LockName, pid, start, run.RefundCursor.String())
	err := retryConn(ctx, func() error {
		_, err := r.store.db.ExecContext(ctx, saveRunSQL, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("save run %d: %w", run.ID, err)
	}
	return nil
}

// TakeOverStatementRuns marks interrupted every other statement run still "running" whose
// liveness lock nobody holds. A statement run holds an advisory lock of its own name (the
// row's lock_name) from before its row exists until after it recorded its end, so a row
// whose lock can be taken belongs to a run that stopped without finishing: its process died
// (SIGKILL, OOM, a lost node) or its last write failed. Statement runs of different accounts
// may run at once, so, unlike a pass's shard lock, the lock says only whether that one run
// is alive. It returns the ids taken over; a run whose lock is held lives, and is left.
func (s *Store) TakeOverStatementRuns(ctx context.Context, by int64) ([]int64, error) {
	var open []struct {
		ID   int64  `db:"id"`
		Lock string `db:"lock_name"`
	}
	if err := s.db.SelectContext(ctx, &open, `SELECT id, lock_name FROM reconcile_runs
		WHERE mode = 'statement' AND status = 'running' AND id <> $1 AND lock_name IS NOT NULL ORDER BY id`, by); err != nil {
		return nil, fmt.Errorf("find unfinished statement runs: %w", err)
	}
	locker := s.Locker().WithWait(0) // a live run's lock is held: asking again would only wait
	var dead []int64
	for _, r := range open {
		lock, ok, err := locker.TryLock(ctx, r.Lock)
		if err != nil {
			return dead, err
		}
		if !ok {
			continue
		}
		res, err := s.db.ExecContext(ctx, `UPDATE reconcile_runs SET status = 'interrupted', finished_at = now(),
			error = 'stopped without finishing (process died or could not record its end); taken over by run ' || $2::bigint
			WHERE id = $1 AND status = 'running'`, r.ID, by)
		lock.Unlock()
		if err != nil {
			return dead, fmt.Errorf("mark statement run %d interrupted: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			dead = append(dead, r.ID)
		}
	}
	return dead, nil
}

func sessionArgs(s reconcile.Session) (pid, start any) {
	if s.PID == 0 {
		return nil, nil
	}
	return s.PID, nullTime(s.Start)
}

// takeOverSQL is run by a pass that holds its shard lock. No other pass can hold that lock
// now, so every other run still "running" under it has stopped without finishing its row:
// its process died, or it could not write its end (a killed session, a statement timeout)
// and its lock session went back to its pool. Each such run is marked interrupted and the
// leases it (and an earlier life of the caller's own run, resumed) still holds, on orders
// and on refunds, are freed, in one statement. It also frees the leases left by runs that
// have finished (any lock): a finished pass has no check in flight, so a lease it still
// holds is one whose release failed. Whether the run's session is still alive is not asked:
// a pooled session outlives the pass that used it (found by the simulation, seed 52).
const takeOverSQL = `WITH dead AS (
		UPDATE reconcile_runs r SET status = 'interrupted', finished_at = now(),
			error = 'stopped without finishing (process died or lost its lock); taken over by run ' || $2::bigint
		WHERE r.lock_name = $1 AND r.status = 'running' AND r.id <> $2
		RETURNING r.id
	), finished AS (
		-- From the few leased orders and refunds (partial indexes), not from every run ever
		-- recorded.
		SELECT r.id FROM (SELECT lease_owner FROM payment_orders
				WHERE lease_owner IS NOT NULL AND lease_owner ~ '^run-[0-9]{1,18}$'
				UNION SELECT lease_owner FROM payment_refunds
				WHERE lease_owner IS NOT NULL AND lease_owner ~ '^run-[0-9]{1,18}$') l
			JOIN reconcile_runs r ON r.id = substr(l.lease_owner, 5)::bigint
		WHERE r.status <> 'running' AND r.id <> $2
	), owners AS (
		SELECT id, 'run-' || id AS owner, false AS finished FROM dead
		UNION ALL SELECT id, 'run-' || id, true FROM finished
		UNION ALL SELECT $2::bigint, 'run-' || $2::bigint, false
	), freed AS (
		UPDATE payment_orders o SET lease_until = NULL, lease_owner = NULL
		FROM owners WHERE o.lease_owner = owners.owner
		RETURNING owners.id, o.id AS order_id
	), freed_refunds AS (
		UPDATE payment_refunds rf SET lease_until = NULL, lease_owner = NULL
		FROM owners WHERE rf.lease_owner = owners.owner
		RETURNING owners.id, rf.id AS refund_id
	)
	SELECT w.id, w.finished,
		COALESCE((SELECT array_agg(f.order_id ORDER BY f.order_id) FROM freed f WHERE f.id = w.id), '{}') AS orders,
		COALESCE((SELECT array_agg(f.refund_id ORDER BY f.refund_id) FROM freed_refunds f WHERE f.id = w.id), '{}') AS refunds
	FROM owners w WHERE w.id <> $2 ORDER BY w.id`

// TakeOver implements reconcile.RunLog.
func (r *Runs) TakeOver(ctx context.Context, by reconcile.Run) ([]reconcile.TakenOver, error) {
	if by.LockName == "" {
		return nil, nil
	}
	var rows []struct {
		ID       int64         `db:"id"`
		Finished bool          `db:"finished"`
		Orders   pq.Int64Array `db:"orders"`
		Refunds  pq.Int64Array `db:"refunds"`
	}
	if err := r.store.db.SelectContext(ctx, &rows, takeOverSQL, by.LockName, by.ID); err != nil {
		return nil, fmt.Errorf("take over dead runs of %s: %w", by.LockName, err)
	}
	out := make([]reconcile.TakenOver, len(rows))
	for i, row := range rows {
		out[i] = reconcile.TakenOver{RunID: row.ID, Orders: row.Orders, Refunds: row.Refunds, Finished: row.Finished}
	}
	return out, nil
}

// SaveProgress implements reconcile.RunLog.
func (r *Runs) SaveProgress(ctx context.Context, run reconcile.Run) error { return r.save(ctx, run) }

// FinishRun implements reconcile.RunLog.
func (r *Runs) FinishRun(ctx context.Context, run reconcile.Run) error { return r.save(ctx, run) }

// LoadRun implements reconcile.RunLog.
func (r *Runs) LoadRun(ctx context.Context, id int64) (reconcile.Run, error) {
	var row struct {
		ID         int64          `db:"id"`
		Mode       string         `db:"mode"`
		Status     string         `db:"status"`
		StartedAt  time.Time      `db:"started_at"`
		WindowFrom sql.NullTime   `db:"window_from"`
		WindowTo   sql.NullTime   `db:"window_to"`
		Shard      string         `db:"shard"`
		Cursor     sql.NullString `db:"cursor"`
		Refunds    sql.NullString `db:"refund_cursor"`
		DryRun     bool           `db:"dry_run"`
		reconcile.CounterValues
	}
	err := r.store.db.GetContext(ctx, &row, `SELECT id, mode, status, started_at, window_from, window_to, shard, cursor,
		refund_cursor, dry_run, `+runCountersSQL+` FROM reconcile_runs WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return reconcile.Run{}, fmt.Errorf("run %d: %w", id, reconcile.ErrNotFound)
	}
	if err != nil {
		return reconcile.Run{}, fmt.Errorf("load run %d: %w", id, err)
	}
	cur, err := reconcile.ParseCursors(row.Cursor.String)
	if err != nil {
		return reconcile.Run{}, fmt.Errorf("run %d: %w", id, err)
	}
	refundCur, err := reconcile.ParseCursors(row.Refunds.String)
	if err != nil {
		return reconcile.Run{}, fmt.Errorf("run %d refund cursor: %w", id, err)
	}
	var shard reconcile.Shard // a pass over every order is stored as the zero shard, "0/0"
	if row.Shard != shard.String() {
		if shard, err = reconcile.ParseShard(row.Shard); err != nil {
			return reconcile.Run{}, fmt.Errorf("run %d: %w", id, err)
		}
	}
	return reconcile.Run{ID: row.ID, Mode: reconcile.RunMode(row.Mode), Status: reconcile.RunStatus(row.Status),
		StartedAt: row.StartedAt, WindowFrom: row.WindowFrom.Time, WindowTo: row.WindowTo.Time, Shard: shard,
		Cursor: cur, RefundCursor: refundCur, DryRun: row.DryRun, Counts: row.CounterValues}, nil
}

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

// OldestPendingAge is the age of the oldest PENDING order created within lookback (zero when
// there is none): the alarm for a reconciler that has stopped keeping up.
func (s *Store) OldestPendingAge(ctx context.Context, now time.Time, lookback time.Duration) (time.Duration, error) {
	var oldest sql.NullTime
	err := s.db.GetContext(ctx, &oldest, `SELECT min(created_at) FROM payment_orders WHERE status = 'PENDING' AND created_at >= $1`, now.Add(-lookback))
	if err != nil {
		return 0, fmt.Errorf("oldest pending order: %w", err)
	}
	if !oldest.Valid {
		return 0, nil
	}
	return now.Sub(oldest.Time), nil
}

// CountWindow counts the checks (orders and their refunds) a backfill of [from, to) on
// shard will make after cursor.
func (s *Store) CountWindow(ctx context.Context, from, to time.Time, shard reconcile.Shard, after reconcile.Cursor) (int64, error) {
	at := after.CreatedAt
	if after.IsZero() {
		at = beginningOfTime
	}
	var n int64
	// The orders and their refunds: a backfill checks both. Refunds resume on a cursor of
	// their own; past the orders' cursor is close enough for a progress bar.
	err := s.db.GetContext(ctx, &n, `SELECT
		(SELECT count(*) FROM payment_orders WHERE created_at >= $1 AND created_at < $2
			AND shard_hash % $3 = $4 AND (created_at, id) > ($5, $6)) +
		(SELECT count(*) FROM payment_refunds WHERE order_created_at >= $1 AND order_created_at < $2
			AND shard_hash % $3 = $4 AND order_created_at > $5)`, from, to, shard.Count, shard.Index, at, after.ID)
	if err != nil {
		return 0, fmt.Errorf("count backfill window: %w", err)
	}
	return n, nil
}
