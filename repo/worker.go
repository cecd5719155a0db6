package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

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
	selectDue := `SELECT id FROM payment_orders
		WHERE ` + filter + `
		  AND (created_at, id) > ($1, $2)
		  AND (lease_until IS NULL OR lease_until < $3)
		  AND shard_hash % $5 = $6
		ORDER BY created_at, id
		LIMIT $4`
	var query string
	if q.DryRun {
		query = `SELECT ` + takeColumns + ` FROM payment_orders WHERE id IN (` + selectDue + `)`
	} else {
		n := len(args)
		args = append(args, q.Now.Add(q.Lease), q.Owner)
		query = fmt.Sprintf(`WITH picked AS (%s FOR UPDATE SKIP LOCKED)
			UPDATE payment_orders o SET lease_until = $%d, lease_owner = $%d
			FROM picked WHERE o.id = picked.id
			RETURNING %s`, selectDue, n+1, n+2, prefixed("o.", takeColumns))
	}
	// Retried on a broken connection: if the lost attempt did lease orders, they are the
	// ones an expired lease frees, the retry takes the next ones.
	var rows []takenRow
	if err := retryConn(ctx, func() error {
		rows = rows[:0]
		return s.db.SelectContext(ctx, &rows, query, args...)
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
		_, err := s.db.ExecContext(ctx, `UPDATE payment_orders SET
			lease_until = NULL, lease_owner = NULL, last_checked_at = $3,
			next_check_at = CASE WHEN status = 'PENDING' THEN $4 ELSE next_check_at END,
			check_count = CASE WHEN status = 'PENDING' AND $5 THEN check_count + 1 ELSE check_count END
		WHERE id = $1 AND (lease_owner = $2 OR lease_owner IS NULL)
		  AND last_checked_at IS DISTINCT FROM $3 -- a retry after a lost answer counts the check once`,
			c.OrderID, c.Owner, c.Now, c.NextCheck, c.Backoff)
		return err
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
	err := r.store.db.GetContext(ctx, &run.ID, `INSERT INTO reconcile_runs (mode, started_at, status, window_from, window_to, shard, cursor, dry_run)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), $8) RETURNING id`,
		string(run.Mode), run.StartedAt, string(run.Status), nullTime(run.WindowFrom), nullTime(run.WindowTo),
		run.Shard.String(), run.Cursor.String(), run.DryRun)
	if err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	return nil
}

const saveRunSQL = `UPDATE reconcile_runs SET status = $2, cursor = NULLIF($3, ''), error = NULLIF($4, ''),
	scanned = $5, repaired = $6, closed = $7, unchanged = $8, still_pending = $9, mismatches = $10,
	claimed_elsewhere = $11, errors = $12, dry_run = $13, finished_at = $14 WHERE id = $1`

func (r *Runs) save(ctx context.Context, run reconcile.Run) error {
	c := run.Counts
	err := retryConn(ctx, func() error {
		_, err := r.store.db.ExecContext(ctx, saveRunSQL, run.ID, string(run.Status), run.Cursor.String(), run.Error,
			c.Scanned, c.Repaired, c.Closed, c.Unchanged, c.StillPending, c.Mismatches, c.ClaimedElsewhere, c.Errors,
			run.DryRun, nullTime(run.FinishedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("save run %d: %w", run.ID, err)
	}
	return nil
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
		DryRun     bool           `db:"dry_run"`
		reconcile.CounterValues
	}
	err := r.store.db.GetContext(ctx, &row, `SELECT id, mode, status, started_at, window_from, window_to, shard, cursor, dry_run,
		scanned AS "scanned", repaired AS "repaired", closed AS "closed", unchanged AS "unchanged",
		still_pending AS "stillpending", mismatches AS "mismatches", claimed_elsewhere AS "claimedelsewhere", errors AS "errors"
		FROM reconcile_runs WHERE id = $1`, id)
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
	var shard reconcile.Shard // a pass over every order is stored as the zero shard, "0/0"
	if row.Shard != shard.String() {
		if shard, err = reconcile.ParseShard(row.Shard); err != nil {
			return reconcile.Run{}, fmt.Errorf("run %d: %w", id, err)
		}
	}
	return reconcile.Run{ID: row.ID, Mode: reconcile.RunMode(row.Mode), Status: reconcile.RunStatus(row.Status),
		StartedAt: row.StartedAt, WindowFrom: row.WindowFrom.Time, WindowTo: row.WindowTo.Time, Shard: shard,
		Cursor: cur, DryRun: row.DryRun, Counts: row.CounterValues}, nil
}

// Locker implements reconcile.Locker with session-level PostgreSQL advisory locks, held on
// a dedicated connection: if the process dies, the server drops the lock with the session.
type Locker struct{ store *Store }

// Locker returns the advisory locker over the same pool.
func (s *Store) Locker() *Locker { return &Locker{store: s} }

// TryLock implements reconcile.Locker.
func (l *Locker) TryLock(ctx context.Context, name string) (func(), bool, error) {
	h := fnv.New64a()
	h.Write([]byte(name))
	key := int64(h.Sum64())
	conn, err := l.store.db.Connx(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: connect: %w", name, err)
	}
	var ok bool
	if err := conn.GetContext(ctx, &ok, `SELECT pg_try_advisory_lock($1)`, key); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("lock %s: %w", name, err)
	}
	if !ok {
		conn.Close()
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key) //nolint:errcheck // closing the session releases it anyway
		conn.Close()
	}, true, nil
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

// CountWindow counts the orders a backfill of [from, to) on shard will check after cursor.
func (s *Store) CountWindow(ctx context.Context, from, to time.Time, shard reconcile.Shard, after reconcile.Cursor) (int64, error) {
	at := after.CreatedAt
	if after.IsZero() {
		at = beginningOfTime
	}
	var n int64
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM payment_orders WHERE created_at >= $1 AND created_at < $2
		AND shard_hash % $3 = $4 AND (created_at, id) > ($5, $6)`, from, to, shard.Count, shard.Index, at, after.ID)
	if err != nil {
		return 0, fmt.Errorf("count backfill window: %w", err)
	}
	return n, nil
}
