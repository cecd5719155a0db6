package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the PostgreSQL driver behind sqlx

	"github.com/payrecon/payrecon/reconcile"
)

// Open connects to PostgreSQL and checks the connection.
func Open(ctx context.Context, url string) (*sqlx.DB, error) {
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return ping(ctx, db)
}

// ping sizes the pool and checks the connection.
func ping(ctx context.Context, db *sqlx.DB) (*sqlx.DB, error) {
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return db, nil
}

// Store is the PostgreSQL implementation of reconcile.Store.
type Store struct {
	db    *sqlx.DB
	waker *outboxWaker
	stmts *statements
}

// NewStore wraps a connection pool.
func NewStore(db *sqlx.DB) *Store {
	s := &Store{db: db, waker: &outboxWaker{}, stmts: newStatements(db)}
	runtime.AddCleanup(s, (*statements).close, s.stmts)
	return s
}

// DB exposes the pool to the other adapters of this package's callers (runs, reports).
func (s *Store) DB() *sqlx.DB { return s.db }

type orderRow struct {
	ID              int64          `db:"id"`
	Platform        string         `db:"platform"`
	MerchantID      string         `db:"merchant_id"`
	OutTradeNo      string         `db:"out_trade_no"`
	AmountMinor     int64          `db:"amount_minor"`
	Currency        string         `db:"currency"`
	Status          string         `db:"status"`
	PlatformTradeNo sql.NullString `db:"platform_trade_no"`
	PaidAmountMinor sql.NullInt64  `db:"paid_amount_minor"`
	RefundedMinor   int64          `db:"refunded_minor"`
	PaidAt          sql.NullTime   `db:"paid_at"`
	CreatedAt       time.Time      `db:"created_at"`
	ExpiresAt       sql.NullTime   `db:"expires_at"`
	Version         int64          `db:"version"`
}

// orderColumns matches orderRow.
const orderColumns = `id, platform, merchant_id, out_trade_no, amount_minor, currency, status,
	platform_trade_no, paid_amount_minor, refunded_minor, paid_at, created_at, expires_at, version`

func (r orderRow) order() reconcile.Order {
	return reconcile.Order{
		ID: r.ID, Platform: reconcile.Platform(r.Platform), MerchantID: r.MerchantID,
		OutTradeNo: r.OutTradeNo, AmountMinor: r.AmountMinor, Currency: r.Currency,
		Status: reconcile.Status(r.Status), PlatformTradeNo: r.PlatformTradeNo.String,
		PaidAmountMinor: r.PaidAmountMinor.Int64, RefundedMinor: r.RefundedMinor, PaidAt: r.PaidAt.Time, CreatedAt: r.CreatedAt,
		ExpiresAt: r.ExpiresAt.Time, Version: r.Version,
	}
}

// FindOrder implements reconcile.Store.
func (s *Store) FindOrder(ctx context.Context, p reconcile.Platform, merchantID, outTradeNo string) (reconcile.Order, error) {
	var row orderRow
	err := s.getPrepared(ctx, &row, `SELECT `+orderColumns+` FROM payment_orders
		WHERE platform = $1 AND merchant_id = $2 AND out_trade_no = $3`, string(p), merchantID, outTradeNo)
	if errors.Is(err, sql.ErrNoRows) {
		return reconcile.Order{}, reconcile.ErrNotFound
	}
	if err != nil {
		return reconcile.Order{}, fmt.Errorf("find order %s/%s/%s: %w", p, merchantID, outTradeNo, err)
	}
	return row.order(), nil
}

// OutTradeNoExists implements reconcile.Store.
func (s *Store) OutTradeNoExists(ctx context.Context, p reconcile.Platform, outTradeNo string) (bool, error) {
	var exists bool
	err := s.db.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM payment_orders
		WHERE platform = $1 AND out_trade_no = $2)`, string(p), outTradeNo)
	if err != nil {
		return false, fmt.Errorf("look up out_trade_no %s/%s: %w", p, outTradeNo, err)
	}
	return exists, nil
}

// applyTransitionSQL is the whole transition in ONE statement, and so one transaction: the
// conditional update, its payment event and (when given) its outbox row commit together or
// not at all, in a single round trip. The event and outbox inserts read the update's
// RETURNING, so they happen only when the order really moved.
const applyTransitionSQL = `
WITH moved AS (
	UPDATE payment_orders SET
		status            = $3::text,
		platform_trade_no = COALESCE(NULLIF($4::text, ''), platform_trade_no),
		paid_amount_minor = CASE WHEN $3::text = 'PAID' THEN $5::bigint ELSE paid_amount_minor END,
		paid_at           = CASE WHEN $3::text = 'PAID' THEN $6::timestamptz ELSE paid_at END,
		updated_at        = now(),
		version           = version + 1,
		next_check_at     = NULL,
		lease_until       = NULL,
		lease_owner       = NULL
	WHERE id = $1 AND status = $2::text
	RETURNING id, platform
), event AS (
	INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor, raw_digest)
	SELECT id, platform, NULLIF($4::text, ''), $3::text, $7::text, $5::bigint, NULLIF($8::text, '') FROM moved
), outbox AS (
	INSERT INTO fulfillment_outbox (order_id, kind, payload)
	SELECT id, $9::text, $10::jsonb FROM moved, ` + quietOutbox + ` WHERE $9::text <> ''
)
SELECT count(*) FROM moved`

// ApplyTransition implements reconcile.Store.
func (s *Store) ApplyTransition(ctx context.Context, t reconcile.Transition) (bool, error) {
	if !reconcile.CanTransition(t.From, t.To) {
		return false, fmt.Errorf("illegal transition %s -> %s for order %d", t.From, t.To, t.OrderID)
	}
	var paidAt any
	if !t.PaidAt.IsZero() {
		paidAt = t.PaidAt
	}
	kind, payload := "", []byte("{}")
	if t.Outbox != nil {
		kind = t.Outbox.Kind
		b, err := json.Marshal(t.Outbox.Payload)
		if err != nil {
			return false, fmt.Errorf("encode outbox payload for order %d: %w", t.OrderID, err)
		}
		payload = b
	}
	var n int
	err := s.getPrepared(ctx, &n, applyTransitionSQL, t.OrderID, string(t.From), string(t.To),
		t.PlatformTradeNo, t.AmountMinor, paidAt, string(t.Source), t.RawDigest, kind, string(payload))
	if err != nil {
		return false, fmt.Errorf("transition order %d %s -> %s: %w", t.OrderID, t.From, t.To, err)
	}
	if n == 1 && kind != "" {
		s.wakeOutbox(ctx)
	}
	return n == 1, nil
}

// recordMismatchSQL upserts a finding. A repeat bumps seen_count and last_seen_at. It names
// evidence columns only (the worker's role may not write review columns): the database's
// trigger (migration 0008) bumps the evidence version when the figures differ and reopens a
// RESOLVED finding then (finance resolved what they saw, not whatever may come later).
const recordMismatchSQL = `
INSERT INTO reconcile_mismatches AS m (order_id, platform, merchant_id, out_trade_no, platform_trade_no, kind,
	local_amount_minor, platform_amount_minor, local_status, platform_status, detail, out_refund_no)
VALUES (NULLIF($1::bigint, 0), $2, $3, $4, NULLIF($5::text, ''), $6, NULLIF($7::bigint, 0), NULLIF($8::bigint, 0),
	NULLIF($9::text, ''), NULLIF($10::text, ''), $11::jsonb, $12::text)
ON CONFLICT (platform, merchant_id, out_trade_no, kind, out_refund_no) DO UPDATE SET
	seen_count   = m.seen_count + 1,
	last_seen_at = now(),
	order_id     = COALESCE(EXCLUDED.order_id, m.order_id),
	platform_trade_no     = EXCLUDED.platform_trade_no,
	local_amount_minor    = EXCLUDED.local_amount_minor,
	platform_amount_minor = EXCLUDED.platform_amount_minor,
	local_status          = EXCLUDED.local_status,
	platform_status       = EXCLUDED.platform_status,
	detail                = EXCLUDED.detail`

// RecordMismatch implements reconcile.Store.
func (s *Store) RecordMismatch(ctx context.Context, m reconcile.Mismatch) error {
	detail, err := json.Marshal(m.Detail)
	if err != nil {
		return fmt.Errorf("encode mismatch detail: %w", err)
	}
	if m.Detail == nil {
		detail = []byte("{}")
	}
	err = s.execPrepared(ctx, recordMismatchSQL, m.OrderID, string(m.Platform), m.MerchantID, m.OutTradeNo,
		m.PlatformTradeNo, string(m.Kind), m.LocalAmountMinor, m.PlatformAmountMinor, string(m.LocalStatus),
		m.PlatformStatus, string(detail), m.OutRefundNo)
	if err != nil {
		return fmt.Errorf("record mismatch %s %s/%s: %w", m.Kind, m.Platform, m.OutTradeNo, err)
	}
	return nil
}
