package statementrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/statement"
)

var shanghai = mustZone("Asia/Shanghai")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

const (
	alipayMerchant = "2021000000000001"
	wechatMerchant = "1900000001"
)

func merchantOf(p reconcile.Platform) string {
	if p == reconcile.Alipay {
		return alipayMerchant
	}
	return wechatMerchant
}

// env is one test's database, store and runner.
type env struct {
	t      testing.TB
	db     *repotest.DB
	store  *postgres.Store
	runner *Runner
}

func setup(t testing.TB) *env {
	t.Helper()
	db := repotest.NewDB(t)
	store := postgres.NewStore(db.DB)
	applier := reconcile.NewApplier(store, nil, reconcile.ApplierSettings{}, zerolog.Nop())
	return &env{t: t, db: db, store: store, runner: NewRunner(testStore{store}, store.Locker().WithWait(0), applier, store.Runs(), nil, 8, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel))}
}

// order is a local order to seed.
type order struct {
	platform   reconcile.Platform
	merchant   string
	outTradeNo string
	amount     int64
	currency   string
	status     reconcile.Status
	tradeNo    string
	paidAt     time.Time
}

func (e *env) insert(o order) int64 {
	e.t.Helper()
	if o.currency == "" {
		o.currency = "CNY"
	}
	row := repotest.Order{Platform: string(o.platform), MerchantID: o.merchant, OutTradeNo: o.outTradeNo, AmountMinor: o.amount,
		Currency: o.currency, Status: string(o.status), PlatformTradeNo: o.tradeNo, PaidAt: o.paidAt, CreatedAgo: 3 * 24 * time.Hour}
	if o.tradeNo != "" {
		row.PaidAmountMinor = o.amount
	}
	return repotest.InsertOrder(e.t, e.db, row)
}

// writeBill writes lines as the platform's real file (an Alipay zip, a gzipped WeChat Pay
// CSV) and returns its path.
func writeBill(t testing.TB, p reconcile.Platform, day reconcile.BusinessDay, lines []statement.Line) string {
	t.Helper()
	var b bytes.Buffer
	var err error
	name := "bill.zip"
	if p == reconcile.Alipay {
		_, err = statement.WriteAlipayZip(&b, statement.AlipayFile{UserID: "20880211096256330156", Day: day.Start}, slices.Values(lines))
	} else {
		name = "bill.csv.gz"
		_, _, err = statement.WriteWeChatCSV(&b, statement.WeChatFile{AppID: "wx0000000000000001", MchID: wechatMerchant, Gzip: true}, slices.Values(lines))
	}
	if err != nil {
		t.Fatalf("write bill: %v", err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (e *env) runFile(p reconcile.Platform, day reconcile.BusinessDay, path string, dry bool) (Result, error) {
	e.t.Helper()
	acct := Account{Key: reconcile.AccountKey{Platform: p, MerchantID: merchantOf(p)}, Source: FileSource{Platform: p, Path: path}}
	return e.runner.Run(context.Background(), Spec{Day: day, Accounts: []Account{acct}, DryRun: dry})
}

// memSource is an in-memory bill whose reader fails with failErr after failAfter lines.
type memSource struct {
	lines     []statement.Line
	failAfter int
	failErr   error
}

func (m memSource) Bill(context.Context, reconcile.BusinessDay) (Bill, error) {
	return Bill{Reader: &memReader{src: m}, SHA256: "mem"}, nil
}

type memReader struct {
	src memSource
	i   int
	tot statement.Totals
}

func (r *memReader) Next() (statement.Line, error) {
	if r.src.failErr != nil && r.i == r.src.failAfter {
		return statement.Line{}, r.src.failErr
	}
	if r.i == len(r.src.lines) {
		return statement.Line{}, io.EOF
	}
	l := r.src.lines[r.i]
	r.i++
	l.No = r.i + 5
	if l.Kind == reconcile.BillRefund {
		r.tot.Refunds++
		r.tot.RefundsMinor += l.AmountMinor
	} else {
		r.tot.Payments++
		r.tot.PaymentsMinor += l.AmountMinor
	}
	return l, nil
}

func (r *memReader) Totals() statement.Totals { return r.tot }

// snapshot is everything a statement run may write, for "nothing changed" assertions.
type snapshot struct {
	Orders, Events, Outbox, Findings, Sightings, Days, Lines, Held, Runs int64
	DaysDigest, OrdersDigest, HeldDigest, RefundsDigest, LinesDigest     string
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	var s snapshot
	err := e.db.DB.QueryRow(`SELECT
		(SELECT count(*) FROM payment_orders), (SELECT count(*) FROM payment_events), (SELECT count(*) FROM fulfillment_outbox),
		(SELECT count(*) FROM reconcile_mismatches), (SELECT COALESCE(sum(seen_count), 0) FROM reconcile_mismatches),
		(SELECT count(*) FROM statement_days), (SELECT count(*) FROM statement_lines), (SELECT count(*) FROM statement_held),
		(SELECT count(*) FROM reconcile_runs),
		(SELECT COALESCE(md5(string_agg(d::text, ',' ORDER BY platform, merchant_id, bill_date)), '') FROM statement_days d),
		(SELECT COALESCE(md5(string_agg(o::text, ',' ORDER BY id)), '') FROM payment_orders o),
		(SELECT COALESCE(md5(string_agg(h::text, ',' ORDER BY order_id, refund_id NULLS FIRST)), '') FROM statement_held h),
		(SELECT COALESCE(md5(string_agg(r::text, ',' ORDER BY id)), '') FROM payment_refunds r),
		(SELECT COALESCE(md5(string_agg(l::text, ',' ORDER BY platform, merchant_id, bill_date, line_no)), '') FROM statement_lines l)`).Scan(
		&s.Orders, &s.Events, &s.Outbox, &s.Findings, &s.Sightings, &s.Days, &s.Lines, &s.Held, &s.Runs,
		&s.DaysDigest, &s.OrdersDigest, &s.HeldDigest, &s.RefundsDigest, &s.LinesDigest)
	if err != nil {
		e.t.Fatalf("snapshot: %v", err)
	}
	return s
}

// findings maps each finding's order number to its kind.
func (e *env) findings(p reconcile.Platform) map[string]string {
	return e.kinds(`SELECT out_trade_no, kind FROM reconcile_mismatches WHERE platform = $1`, p)
}

// kinds maps the first column of query's rows (about platform p) to the second.
func (e *env) kinds(query string, p reconcile.Platform) map[string]string {
	e.t.Helper()
	rows, err := e.db.DB.Query(query, string(p))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var key, kind string
		if err := rows.Scan(&key, &kind); err != nil {
			e.t.Fatal(err)
		}
		out[key] = kind
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// refund is a local refund to seed: what the merchant's app recorded, in some state.
type refund struct {
	orderID     int64
	outRefundNo string
	amount      int64
	status      reconcile.RefundStatus
	succeededAt time.Time // SUCCESS only
}

// insertRefund records a refund; a SUCCESS one is added to its order's refunded_minor (and
// moves the order to REFUNDED when it takes back all that was paid), as the apply path would.
func (e *env) insertRefund(r refund) int64 {
	e.t.Helper()
	var succeeded any
	if !r.succeededAt.IsZero() {
		succeeded = r.succeededAt
	}
	var id int64
	err := e.db.DB.Get(&id, `INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, succeeded_at, created_at)
		VALUES ($1, $2, $3, $4, $5::timestamptz, now() - interval '2 days') RETURNING id`,
		r.orderID, r.outRefundNo, r.amount, string(r.status), succeeded)
	if err != nil {
		e.t.Fatalf("insert refund %s: %v", r.outRefundNo, err)
	}
	if r.status == reconcile.RefundSuccess {
		e.db.DB.MustExec(`UPDATE payment_orders SET refunded_minor = refunded_minor + $2,
			status = CASE WHEN refunded_minor + $2 = paid_amount_minor THEN 'REFUNDED' ELSE status END WHERE id = $1`, r.orderID, r.amount)
	}
	return id
}

// refundFindings maps each refund finding's refund number to its kind.
func (e *env) refundFindings(p reconcile.Platform) map[string]string {
	return e.kinds(`SELECT out_refund_no, kind FROM reconcile_mismatches WHERE platform = $1 AND out_refund_no <> ''`, p)
}

func isRejected(err error) bool { return errors.Is(err, statement.ErrRejected) }

// testStore is the PostgreSQL store as a run needs it (worker.StatementStore, which these
// tests cannot import: worker imports this package).
type testStore struct{ *postgres.Store }

func (s testStore) BeginStatement(ctx context.Context, day reconcile.StatementDay, runID int64) (DayTx, error) {
	tx, err := s.Store.BeginStatement(ctx, day, runID)
	if err != nil {
		return nil, err
	}
	return tx, nil
}
