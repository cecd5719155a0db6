package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/payrecon/payrecon/reconcile"
)

// InsertOrder writes a new order the way the order service would, and returns its id. The
// currency is the column's default (o.Currency is not written); a PAID order records
// PaidAmountMinor and PlatformTradeNo as given (empty and zero are NULL). It exists for the
// demo and for fixtures; the reconciler itself never creates orders.
func (s *Store) InsertOrder(ctx context.Context, o reconcile.Order) (int64, error) {
	var tradeNo sql.NullString
	if o.PlatformTradeNo != "" {
		tradeNo = sql.NullString{String: o.PlatformTradeNo, Valid: true}
	}
	var paid sql.NullInt64
	if o.Status == reconcile.StatusPaid {
		paid = sql.NullInt64{Int64: o.PaidAmountMinor, Valid: true}
	}
	var id int64
	err := s.db.GetContext(ctx, &id, `INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor,
			status, platform_trade_no, paid_amount_minor, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		string(o.Platform), o.MerchantID, o.OutTradeNo, o.AmountMinor, string(o.Status), tradeNo, paid, o.CreatedAt)
	if err != nil {
		return 0, fmt.Errorf("insert order %s/%s: %w", o.Platform, o.OutTradeNo, err)
	}
	return id, nil
}

// OrderTrail is where an order stands and what the apply path wrote for it.
type OrderTrail struct {
	OutTradeNo string `db:"out_trade_no"`
	Status     string `db:"status"`
	Events     int64  `db:"events"` // payment_events rows
	Outbox     int64  `db:"outbox"` // fulfillment_outbox rows
}

// OrderTrails returns every order's trail keyed by out_trade_no: the demo's before and after.
func (s *Store) OrderTrails(ctx context.Context) (map[string]OrderTrail, error) {
	var rows []OrderTrail
	err := s.db.SelectContext(ctx, &rows, `SELECT out_trade_no, status,
		(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id) AS events,
		(SELECT count(*) FROM fulfillment_outbox f WHERE f.order_id = o.id) AS outbox
		FROM payment_orders o`)
	if err != nil {
		return nil, fmt.Errorf("read order trails: %w", err)
	}
	out := make(map[string]OrderTrail, len(rows))
	for _, r := range rows {
		out[r.OutTradeNo] = r
	}
	return out, nil
}
