package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
)

type refundRow struct {
	ID               int64          `db:"id"`
	OrderID          int64          `db:"order_id"`
	Platform         string         `db:"platform"`
	MerchantID       string         `db:"merchant_id"`
	OutTradeNo       string         `db:"out_trade_no"`
	OutRefundNo      string         `db:"out_refund_no"`
	PlatformRefundNo sql.NullString `db:"platform_refund_no"`
	AmountMinor      int64          `db:"amount_minor"`
	Currency         string         `db:"currency"`
	Status           string         `db:"status"`
	SucceededAt      sql.NullTime   `db:"succeeded_at"`
	CreatedAt        time.Time      `db:"created_at"`
	CheckCount       int            `db:"check_count"`
	OrderCreatedAt   time.Time      `db:"order_created_at"`
}

// refundColumns matches refundRow.
const refundColumns = `id, order_id, platform, merchant_id, out_trade_no, out_refund_no, platform_refund_no,
	amount_minor, currency, status, succeeded_at, created_at, check_count, order_created_at`

func (r refundRow) refund() reconcile.Refund {
	return reconcile.Refund{ID: r.ID, OrderID: r.OrderID, Platform: reconcile.Platform(r.Platform),
		MerchantID: r.MerchantID, OutTradeNo: r.OutTradeNo, OutRefundNo: r.OutRefundNo,
		PlatformRefundNo: r.PlatformRefundNo.String, AmountMinor: r.AmountMinor, Currency: r.Currency,
		Status: reconcile.RefundStatus(r.Status), SucceededAt: r.SucceededAt.Time, CreatedAt: r.CreatedAt,
		CheckCount: r.CheckCount, OrderCreatedAt: r.OrderCreatedAt}
}

// FindRefund implements reconcile.RefundStore.
func (s *Store) FindRefund(ctx context.Context, p reconcile.Platform, merchantID, outRefundNo string) (reconcile.Refund, error) {
	var row refundRow
	err := s.getPrepared(ctx, &row, `SELECT `+refundColumns+` FROM payment_refunds
		WHERE platform = $1 AND merchant_id = $2 AND out_refund_no = $3`, string(p), merchantID, outRefundNo)
	if errors.Is(err, sql.ErrNoRows) {
		return reconcile.Refund{}, reconcile.ErrNotFound
	}
	if err != nil {
		return reconcile.Refund{}, fmt.Errorf("find refund %s/%s/%s: %w", p, merchantID, outRefundNo, err)
	}
	return row.refund(), nil
}

// OrderRefunds lists an order's refunds, oldest first.
func (s *Store) OrderRefunds(ctx context.Context, orderID int64) ([]reconcile.Refund, error) {
	var rows []refundRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+refundColumns+` FROM payment_refunds
		WHERE order_id = $1 ORDER BY created_at, id`, orderID); err != nil {
		return nil, fmt.Errorf("list refunds of order %d: %w", orderID, err)
	}
	out := make([]reconcile.Refund, len(rows))
	for i, r := range rows {
		out[i] = r.refund()
	}
	return out, nil
}

// NewRefund is a refund the merchant's app asked the platform for, as it records it.
type NewRefund struct {
	OrderID     int64
	OutRefundNo string
	AmountMinor int64
	CreatedAt   time.Time // zero: now
}

// InsertRefund records a PROCESSING refund (what the merchant's app does when it calls the
// platform's refund API) and returns its id. The order's identity and currency are filled
// in by the database.
func (s *Store) InsertRefund(ctx context.Context, r NewRefund) (int64, error) {
	var created any
	if !r.CreatedAt.IsZero() {
		created = r.CreatedAt
	}
	var id int64
	err := s.db.GetContext(ctx, &id, `INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, created_at)
		VALUES ($1, $2, $3, 'PROCESSING', COALESCE($4::timestamptz, now())) RETURNING id`,
		r.OrderID, r.OutRefundNo, r.AmountMinor, created)
	if err != nil {
		return 0, fmt.Errorf("insert refund %s of order %d: %w", r.OutRefundNo, r.OrderID, err)
	}
	return id, nil
}

// applyRefundTransitionSQL is a refund transition in ONE statement. The order row is locked
// first (ord), so two refunds of one order landing at once are serialised on it and the
// second sees the first's refunded_minor: a SUCCESS moves the refund only while the order
// is PAID and can take the amount back. The order's refunded_minor, its move to REFUNDED
// (with its REFUNDED event), the refund's event and a SUCCESS's outbox row are all fed from
// the refund update's RETURNING, so they happen only when the refund really moved.
const applyRefundTransitionSQL = `
WITH ord AS (
	SELECT id, status, paid_amount_minor, refunded_minor FROM payment_orders WHERE id = $2 FOR UPDATE
), moved AS (
	UPDATE payment_refunds r SET
		status             = $3::text,
		platform_refund_no = COALESCE(NULLIF($4::text, ''), r.platform_refund_no),
		succeeded_at       = CASE WHEN $3::text = 'SUCCESS' THEN COALESCE($5::timestamptz, now()) ELSE r.succeeded_at END,
		updated_at         = now(),
		next_check_at      = NULL,
		check_count        = 0,
		lease_until        = NULL,
		lease_owner        = NULL
	FROM ord
	WHERE r.id = $1 AND r.order_id = ord.id AND r.status = ANY($6::text[])
	  AND ($3::text <> 'SUCCESS' OR (ord.status = 'PAID' AND ord.refunded_minor + r.amount_minor <= ord.paid_amount_minor))
	RETURNING r.id, r.order_id, r.platform, r.amount_minor
), paid_back AS (
	UPDATE payment_orders o SET
		refunded_minor = o.refunded_minor + moved.amount_minor,
		status         = CASE WHEN o.refunded_minor + moved.amount_minor = o.paid_amount_minor THEN 'REFUNDED' ELSE o.status END,
		updated_at     = now(),
		version        = o.version + 1
	FROM moved
	WHERE o.id = moved.order_id AND $3::text = 'SUCCESS'
	RETURNING o.id, o.status, o.refunded_minor
), refund_event AS (
	INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor, raw_digest, refund_id)
	SELECT order_id, platform, NULLIF($7::text, ''), $8::text, $9::text, amount_minor, NULLIF($10::text, ''), id FROM moved
), order_event AS (
	INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor, raw_digest)
	SELECT p.id, m.platform, NULLIF($7::text, ''), 'REFUNDED', $9::text, p.refunded_minor, NULLIF($10::text, '')
	FROM paid_back p JOIN moved m ON m.order_id = p.id WHERE p.status = 'REFUNDED'
), outbox AS (
	INSERT INTO fulfillment_outbox (order_id, kind, payload, refund_id)
	SELECT order_id, $11::text, $12::jsonb, id FROM moved, ` + quietOutbox + ` WHERE $11::text <> ''
)
SELECT (SELECT count(*) FROM moved) AS moved,
	COALESCE((SELECT status = 'REFUNDED' FROM paid_back), false) AS order_refunded`

// ApplyRefundTransition implements reconcile.RefundStore.
func (s *Store) ApplyRefundTransition(ctx context.Context, t reconcile.RefundTransition) (reconcile.RefundMove, error) {
	from := reconcile.RefundPredecessors(t.To)
	if len(from) == 0 {
		return reconcile.RefundMove{}, fmt.Errorf("refund %d: no transition leads to %s", t.RefundID, t.To)
	}
	froms := make([]string, len(from))
	for i, f := range from {
		froms[i] = string(f)
	}
	var succeededAt any
	if !t.SucceededAt.IsZero() {
		succeededAt = t.SucceededAt
	}
	kind, payload := "", []byte("{}")
	if t.Outbox != nil {
		b, err := json.Marshal(t.Outbox.Payload)
		if err != nil {
			return reconcile.RefundMove{}, fmt.Errorf("encode outbox payload of refund %d: %w", t.RefundID, err)
		}
		kind, payload = t.Outbox.Kind, b
	}
	var out struct {
		Moved         int  `db:"moved"`
		OrderRefunded bool `db:"order_refunded"`
	}
	err := s.getPrepared(ctx, &out, applyRefundTransitionSQL, t.RefundID, t.OrderID, string(t.To),
		t.PlatformRefundNo, succeededAt, pq.Array(froms), t.PlatformTradeNo, string(reconcile.RefundEvent(t.To)),
		string(t.Source), t.RawDigest, kind, string(payload))
	if err != nil {
		return reconcile.RefundMove{}, fmt.Errorf("transition refund %d -> %s: %w", t.RefundID, t.To, err)
	}
	if out.Moved == 1 && kind != "" {
		s.wakeOutbox(ctx)
	}
	return reconcile.RefundMove{Changed: out.Moved == 1, OrderRefunded: out.OrderRefunded}, nil
}
