package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// TakeRefunds implements reconcile.RefundQueue: ONE statement selects the next refunds in
// keyset order with FOR UPDATE SKIP LOCKED and leases them, as Take does for orders. A run
// takes the unsettled refunds that are due by their own (created_at, id), along
// payment_refunds_due; a backfill takes every refund of its window's orders by (the order's
// created_at, refund id), along payment_refunds_by_order_created. Either walks one index in
// keyset order, so a take reads about as many rows as it returns. A dry run only reads.
func (s *Store) TakeRefunds(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.DueRefund, error) {
	after := q.After.CreatedAt
	if q.After.IsZero() {
		after = beginningOfTime
	}
	args := []any{after, q.After.ID, q.Now, q.Limit, q.Shard.Count, q.Shard.Index}
	pos, filter := refundTakeFilter(q)
	switch q.Mode {
	case reconcile.ModeBackfill:
		args = append(args, q.From, q.To)
	default:
		args = append(args, q.Now.Add(-q.Grace), q.Now.Add(-q.Lookback), q.PassStart)
	}
	if q.Account.MerchantID != "" {
		args = append(args, string(q.Account.Platform), q.Account.MerchantID)
		filter += fmt.Sprintf(` AND platform = $%d AND merchant_id = $%d`, len(args)-1, len(args))
	}
	// Free, or leased to this very pass past its cursor: a take whose answer was lost (see
	// Take).
	free := `(lease_until IS NULL OR lease_until < $3)`
	n := len(args)
	if !q.DryRun {
		args = append(args, q.Now.Add(q.Lease), q.Owner)
		free = fmt.Sprintf(`(lease_until IS NULL OR lease_until < $3 OR lease_owner = $%d)`, n+2)
	}
	selectDue := `SELECT id FROM payment_refunds
		WHERE ` + filter + `
		  AND (` + pos + `, id) > ($1, $2)
		  AND ` + free + `
		  AND shard_hash % $5 = $6
		ORDER BY ` + pos + `, id
		LIMIT $4`
	// The order comes with its refund (the check needs both): one index probe per row here
	// costs less than a lookup statement per check. The order is read, not locked.
	returning := prefixed("r.", refundColumns) + ", " + aliased("o.", orderColumns)
	query := `SELECT ` + returning + ` FROM payment_refunds r JOIN payment_orders o ON o.id = r.order_id
		WHERE r.id IN (` + selectDue + `)`
	if !q.DryRun {
		query = fmt.Sprintf(`WITH picked AS (%s FOR UPDATE SKIP LOCKED)
			UPDATE payment_refunds r SET lease_until = $%d, lease_owner = $%d
			FROM picked, payment_orders o WHERE r.id = picked.id AND o.id = r.order_id
			RETURNING %s`, selectDue, n+1, n+2, returning)
	}
	// Retried on a broken connection: if the lost attempt did lease refunds, the retry
	// (same owner, same cursor) takes them back.
	var rows []dueRefundRow
	if err := retryConn(ctx, func() error {
		rows = rows[:0]
		return s.selectPrepared(ctx, &rows, query, args...)
	}); err != nil {
		return nil, fmt.Errorf("take refunds of %s after %s: %w", q.Account, q.After, err)
	}
	return sortedRefunds(rows, pos), nil
}

// refundTakeFilter is a refund take's keyset column and its selection, from $7 on.
func refundTakeFilter(q reconcile.TakeQuery) (pos, filter string) {
	if q.Mode == reconcile.ModeBackfill {
		return `order_created_at`, `order_created_at >= $7 AND order_created_at < $8`
	}
	// Due, as an order is: unsettled (the literal list of payment_refunds_due's predicate,
	// so the planner may use it), past the grace period, inside the lookback, next check
	// reached, and not checked yet in this pass (RECHECK_MIN 0s would otherwise loop).
	return `created_at`, `status IN ('PROCESSING', 'ABNORMAL') AND created_at <= $7 AND created_at >= $8
			AND (next_check_at IS NULL OR next_check_at <= $3)
			AND (last_checked_at IS NULL OR last_checked_at < $9)`
}

// dueRefundRow is a taken refund and its order, the order's columns named "o.<column>".
type dueRefundRow struct {
	refundRow
	Order orderRow `db:"o"`
}

// sortedRefunds returns the taken refunds in their take's keyset order (RETURNING keeps none).
func sortedRefunds(rows []dueRefundRow, pos string) []reconcile.DueRefund {
	out := make([]reconcile.DueRefund, len(rows))
	for i, r := range rows {
		out[i] = reconcile.DueRefund{Refund: r.refund(), Order: r.Order.order()}
	}
	at := func(r reconcile.Refund) time.Time {
		if pos == `order_created_at` {
			return r.OrderCreatedAt
		}
		return r.CreatedAt
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Refund, out[j].Refund
		if x, y := at(a), at(b); !x.Equal(y) {
			return x.Before(y)
		}
		return a.ID < b.ID
	})
	return out
}

// RefundChecked implements reconcile.RefundQueue, as Checked does for orders: the lease is
// released, and an unsettled refund gets its next check (a settled one, re-checked by a
// backfill, keeps its schedule). A lease taken over by another pass is left to that pass.
// Retried on a broken connection.
func (s *Store) RefundChecked(ctx context.Context, c reconcile.RefundCheckRecord) error {
	err := retryConn(ctx, func() error {
		return s.execPrepared(ctx, `UPDATE payment_refunds SET
			lease_until = NULL, lease_owner = NULL, last_checked_at = $3,
			next_check_at = CASE WHEN status IN ('PROCESSING', 'ABNORMAL') THEN $4 ELSE next_check_at END,
			check_count = CASE WHEN status IN ('PROCESSING', 'ABNORMAL') AND $5 THEN check_count + 1 ELSE check_count END
		WHERE id = $1 AND (lease_owner = $2 OR lease_owner IS NULL)
		  AND last_checked_at IS DISTINCT FROM $3 -- a retry after a lost answer counts the check once`,
			c.RefundID, c.Owner, c.Now, c.NextCheck, c.Backoff)
	})
	if err != nil {
		return fmt.Errorf("schedule next check of refund %d: %w", c.RefundID, err)
	}
	return nil
}
