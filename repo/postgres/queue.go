package postgres

import (
	"context"
	"database/sql"
	"fmt"
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

// dueAccountsSQL are the accounts with orders or refunds a take may return, and of which
// kinds, by mode: the take's filters without the cursor, the leases and the next checks,
// read from the due indexes (payment_orders_due, payment_refunds_due) for a run and from
// the window's orders for a backfill. $1/$2 the window, $3/$4 the shard.
var dueAccountsSQL = map[reconcile.RunMode]string{
	reconcile.ModeBackfill: dueKindsSQL(
		`created_at >= $1 AND created_at < $2`,
		`order_created_at >= $1 AND order_created_at < $2`),
	reconcile.ModeOnce: dueKindsSQL(
		`status = 'PENDING' AND created_at >= $1 AND created_at <= $2`,
		`status IN ('PROCESSING', 'ABNORMAL') AND created_at >= $1 AND created_at <= $2`),
}

// dueKindsSQL lists the accounts with orders matching ordersDue or refunds matching
// refundsDue (both in the shard $3/$4), each once, with which of the two it has.
func dueKindsSQL(ordersDue, refundsDue string) string {
	return `
		SELECT platform, merchant_id, bool_or(orders) AS orders, bool_or(refunds) AS refunds FROM (
			SELECT platform, merchant_id, true AS orders, false AS refunds FROM payment_orders
			WHERE ` + ordersDue + ` AND shard_hash % $3 = $4 GROUP BY platform, merchant_id
			UNION ALL
			SELECT platform, merchant_id, false, true FROM payment_refunds
			WHERE ` + refundsDue + ` AND shard_hash % $3 = $4 GROUP BY platform, merchant_id
		) due GROUP BY platform, merchant_id`
}

// DueAccounts implements reconcile.WorkQueue.
func (s *Store) DueAccounts(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.DueAccount, error) {
	query, from, to := dueAccountsSQL[reconcile.ModeOnce], q.Now.Add(-q.Lookback), q.Now.Add(-q.Grace)
	if q.Mode == reconcile.ModeBackfill {
		query, from, to = dueAccountsSQL[reconcile.ModeBackfill], q.From, q.To
	}
	shard := q.Shard
	if shard.Count == 0 {
		shard = reconcile.Shard{Index: 0, Count: 1}
	}
	var rows []struct {
		Platform   string `db:"platform"`
		MerchantID string `db:"merchant_id"`
		Orders     bool   `db:"orders"`
		Refunds    bool   `db:"refunds"`
	}
	if err := s.db.SelectContext(ctx, &rows, query, from, to, shard.Count, shard.Index); err != nil {
		return nil, fmt.Errorf("list the accounts with due work: %w", err)
	}
	out := make([]reconcile.DueAccount, len(rows))
	for i, r := range rows {
		out[i] = reconcile.DueAccount{AccountKey: reconcile.AccountKey{Platform: reconcile.Platform(r.Platform), MerchantID: r.MerchantID},
			Orders: r.Orders, Refunds: r.Refunds}
	}
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
