package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
)

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
