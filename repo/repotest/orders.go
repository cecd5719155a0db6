package repotest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Order is an order fixture: the payment_orders columns a test sets. A zero field leaves its
// column out of the INSERT, so the column keeps its default (NULL, or the schema's default:
// currency CNY, status PENDING, created_at now(), check_count 0, refunded_minor 0).
//
// Tests create orders only through InsertOrder, so that the column list of payment_orders is
// spelled in one place for tests: a schema change touches this file, not every test.
type Order struct {
	Platform        string // "alipay", "wechatpay"
	MerchantID      string
	OutTradeNo      string
	AmountMinor     int64
	Currency        string
	Status          string // "PENDING", "PAID", ...
	PlatformTradeNo string
	PaidAmountMinor int64
	PaidAt          time.Time
	RefundedMinor   int64
	ExpiresAt       time.Time
	CreatedAt       time.Time
	// CreatedAgo, instead of CreatedAt, sets created_at to now() - CreatedAgo on the
	// database's clock (microsecond precision).
	CreatedAgo    time.Duration
	NextCheckAt   time.Time
	CheckCount    int
	LastCheckedAt time.Time
	LeaseOwner    string
	LeaseUntil    time.Time
}

// RowQuerier is what InsertOrder writes through: *sql.DB, *sql.Tx, *sql.Conn, *sqlx.DB,
// *sqlx.Tx and *repotest.DB all have it.
type RowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// InsertOrder inserts o and returns its id; it fails the test on error.
func InsertOrder(t testing.TB, db RowQuerier, o Order) int64 {
	t.Helper()
	id, err := TryInsertOrder(context.Background(), db, o)
	if err != nil {
		t.Fatalf("insert order %s: %v", o.OutTradeNo, err)
	}
	return id
}

// TryInsertOrder is InsertOrder for callers that handle the error themselves (code off the
// test's goroutine, a retried seed).
func TryInsertOrder(ctx context.Context, db RowQuerier, o Order) (int64, error) {
	if !o.CreatedAt.IsZero() && o.CreatedAgo != 0 {
		return 0, errors.New("repotest.Order: set CreatedAt or CreatedAgo, not both")
	}
	var cols, vals []string
	var args []any
	set := func(col string, v any) {
		args = append(args, v)
		cols = append(cols, col)
		vals = append(vals, fmt.Sprintf("$%d", len(args)))
	}
	str := func(col, v string) {
		if v != "" {
			set(col, v)
		}
	}
	num := func(col string, v int64) {
		if v != 0 {
			set(col, v)
		}
	}
	at := func(col string, v time.Time) {
		if !v.IsZero() {
			set(col, v)
		}
	}
	str("platform", o.Platform)
	str("merchant_id", o.MerchantID)
	str("out_trade_no", o.OutTradeNo)
	num("amount_minor", o.AmountMinor)
	str("currency", o.Currency)
	str("status", o.Status)
	str("platform_trade_no", o.PlatformTradeNo)
	num("paid_amount_minor", o.PaidAmountMinor)
	at("paid_at", o.PaidAt)
	num("refunded_minor", o.RefundedMinor)
	at("expires_at", o.ExpiresAt)
	at("created_at", o.CreatedAt)
	if o.CreatedAgo != 0 {
		set("created_at", fmt.Sprintf("%d microseconds", o.CreatedAgo.Microseconds()))
		vals[len(vals)-1] = "now() - " + vals[len(vals)-1] + "::interval"
	}
	at("next_check_at", o.NextCheckAt)
	num("check_count", int64(o.CheckCount))
	at("last_checked_at", o.LastCheckedAt)
	str("lease_owner", o.LeaseOwner)
	at("lease_until", o.LeaseUntil)

	q := `INSERT INTO payment_orders (` + strings.Join(cols, ", ") + `) VALUES (` + strings.Join(vals, ", ") + `) RETURNING id`
	var id int64
	if err := db.QueryRowContext(ctx, q, args...).Scan(&id); err != nil {
		return 0, err
	}
	return id, nil
}
