package postgres_test

import (
	"cmp"
	"context"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/statement"
)

var stmtZone = time.FixedZone("CST", 8*3600)

// stmtDay is one business day of the test account.
func stmtDay(date string) reconcile.StatementDay {
	d, err := reconcile.ParseBusinessDay(date, stmtZone)
	if err != nil {
		panic(err)
	}
	return reconcile.StatementDay{Account: reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: "1900000001"}, BusinessDay: d}
}

// insertPaidOrder seeds a PAID order of the statement days' account: 1000 paid at `at`, its
// trade number the out_trade_no with a T after the first letter (C-1: CT-1).
func insertPaidOrder(t *testing.T, db *repotest.DB, otn string, at time.Time) int64 {
	t.Helper()
	return repotest.InsertOrder(t, db, repotest.Order{Platform: "wechatpay", MerchantID: "1900000001", OutTradeNo: otn,
		AmountMinor: 1000, Status: "PAID", PlatformTradeNo: otn[:1] + "T" + otn[1:], PaidAmountMinor: 1000, PaidAt: at, CreatedAt: at})
}

// sliceReader is a bill of the given lines (numbered from 1) that adds up.
type sliceReader struct {
	lines []statement.Line
	i     int
}

func (r *sliceReader) Next() (statement.Line, error) {
	if r.i == len(r.lines) {
		return statement.Line{}, io.EOF
	}
	r.i++
	l := r.lines[r.i-1]
	l.No = r.i
	return l, nil
}

func (r *sliceReader) Totals() statement.Totals { return statement.Totals{} }

// stageDay opens day's statement transaction and stages lines.
func stageDay(t *testing.T, s *postgres.Store, day reconcile.StatementDay, lines ...statement.Line) *postgres.StatementTx {
	t.Helper()
	tx, err := s.BeginStatement(context.Background(), day, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tx.Rollback)
	if _, err := tx.Stage(context.Background(), &sliceReader{lines: lines}); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestStatementClassifiesRefundLines: a refund line is a plain match only when the order's
// refund of that number is SUCCESS with the same amount and the bill gives it as finished;
// the others come back with what the apply path needs, text fields exactly as the bill had
// them (a tab, a backslash or a line break survives the COPY).
func TestStatementClassifiesRefundLines(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	s := postgres.NewStore(db.DB)
	day := stmtDay("2026-11-28")
	at := day.Start.Add(10*time.Hour + 123456*time.Microsecond)
	orderID := insertPaidOrder(t, db, "C-1", at.Add(-time.Hour))
	db.MustExec(`INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, succeeded_at)
		VALUES ($1, 'CR-DONE', 100, 'SUCCESS', $2), ($1, 'CR-WAIT', 200, 'PROCESSING', NULL), ($1, 'CR-SHORT', 300, 'SUCCESS', $2)`,
		orderID, at)
	db.MustExec(`UPDATE payment_orders SET refunded_minor = 400 WHERE id = $1`, orderID)
	refund := func(no, status string, amount int64) statement.Line {
		return statement.Line{Kind: reconcile.BillRefund, OutTradeNo: "C-1", PlatformTradeNo: "CT-1", RefundNo: no,
			PlatformRefundNo: "50" + no, RefundStatus: status, Currency: "CNY", AmountMinor: amount, At: at}
	}
	odd := refund("CR\tA\\B\nC", "SUCCESS", 50)
	stranger := refund("CR-X", "SUCCESS", 10)
	stranger.OutTradeNo = "C-NONE"
	tx := stageDay(t, s, day, refund("CR-DONE", "SUCCESS", 100), refund("CR-WAIT", "SUCCESS", 200),
		refund("CR-SHORT", "SUCCESS", 250), refund("CR-DONE", "PROCESSING", 100), odd, stranger)
	lines := classify(t, tx)
	var got []string
	for _, l := range lines {
		got = append(got, l.RefundNo+" "+l.RefundStatus+" "+l.PlatformRefundNo+" "+string(l.OrderStatus))
		if !l.At.Equal(at) {
			t.Errorf("line %d comes back at %s, staged at %s", l.No, l.At, at)
		}
	}
	// The order's state comes with each line ("" where there is no order): the apply path
	// holds back only the refunds of orders a payment line could still move.
	want := []string{"CR-WAIT SUCCESS 50CR-WAIT PAID", "CR-SHORT SUCCESS 50CR-SHORT PAID", "CR-DONE PROCESSING 50CR-DONE PAID",
		odd.RefundNo + " SUCCESS 50" + odd.RefundNo + " PAID", "CR-X SUCCESS 50CR-X "}
	if !slices.Equal(got, want) {
		t.Errorf("classified %q,\nwant %q", got, want)
	}
}

// TestStatementHoldsRefunds: a day's SUCCESS refunds the bill does not list are held beside
// their order, each once however often the day runs; the next day settles them (a line
// naming the order lists the order; a refund is listed by its own number) and marks the
// reported ones by refund.
func TestStatementHoldsRefunds(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	s := postgres.NewStore(db.DB)
	ctx := context.Background()
	day, next := stmtDay("2026-11-28"), stmtDay("2026-11-29")
	late := day.End.Add(-time.Minute)
	orderID := insertPaidOrder(t, db, "H-1", late)
	db.MustExec(`INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, succeeded_at)
		VALUES ($1, 'HR-A', 100, 'SUCCESS', $2), ($1, 'HR-B', 200, 'SUCCESS', $2), ($1, 'HR-C', 300, 'SUCCESS', $2)`, orderID, late)
	refundLine := func(no string, amount int64) statement.Line {
		return statement.Line{Kind: reconcile.BillRefund, OutTradeNo: "H-OTHER", RefundNo: no, Currency: "CNY", AmountMinor: amount, At: late}
	}
	for range 2 { // the day twice: held once
		tx := stageDay(t, s, day, refundLine("HR-C", 300))
		classify(t, tx) // holds the order
		n, err := tx.HoldUnlisted(ctx)
		if err != nil || n != 4 {
			t.Fatalf("held %d (%v), want 4: the order and its refunds HR-A, HR-B, HR-C (its line names another order)", n, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	tx := stageDay(t, s, next, statement.Line{Kind: reconcile.BillRefund, OutTradeNo: "H-1", RefundNo: "HR-B", Currency: "CNY",
		AmountMinor: 200, At: next.Start.Add(time.Minute)})
	held, err := tx.SettleHeld(ctx, day.Date)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || !held[0].IsRefund() || held[0].OutRefundNo != "HR-A" || held[0].Currency != "CNY" || held[1].OutRefundNo != "HR-C" {
		t.Fatalf("still held after the next day's bill: %+v; want refunds HR-A and HR-C (HR-B and the order are listed)", held)
	}
	if err := tx.MarkReported(ctx, day.Date, held[:1]); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var states string
	db.Get(&states, `SELECT string_agg(COALESCE(NULLIF(out_refund_no, ''), out_trade_no) || ' ' || state, ', '
		ORDER BY refund_id NULLS FIRST) FROM statement_held`) //nolint:errcheck // compared below
	if want := "H-1 LISTED_NEXT_DAY, HR-A REPORTED, HR-B LISTED_NEXT_DAY, HR-C HELD"; states != want {
		t.Errorf("held list %q, want %q", states, want)
	}
}

// killingReader is a long bill that, once kill lines have been read, has the statement's
// session terminated from another one (the operator's pg_terminate_backend, a failover)
// while the COPY is still streaming.
type killingReader struct {
	sliceReader
	n, kill int
	killed  func()
}

func (r *killingReader) Next() (statement.Line, error) {
	if r.i == r.n {
		return statement.Line{}, io.EOF
	}
	r.i++
	if r.i == r.kill {
		r.killed()
	}
	return statement.Line{No: r.i, Kind: reconcile.BillPayment, OutTradeNo: "K-" + strconv.Itoa(r.i), AmountMinor: 100,
		Currency: "CNY", At: time.Date(2026, 11, 28, 10, 0, 0, 0, stmtZone)}, nil
}

// TestStageReturnsWhenItsSessionDies: a session killed before or during the COPY ends Stage
// with an error (and the day with nothing kept); it must not hang. database/sql closes a
// connection whose driver says ErrBadConn, and that close waits for the transaction on it,
// which only the caller's Rollback after Stage ends: Stage once waited on itself for ever.
func TestStageReturnsWhenItsSessionDies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		kill int // the line read when the session is killed; 0: before Stage
	}{{"before the COPY", 0}, {"during the COPY", 50_000}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := repotest.NewDB(t)
			s := postgres.NewStore(db.DB)
			tx, err := s.BeginStatement(context.Background(), stmtDay("2026-11-28"), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			kill := func() {
				var n int
				if err := db.Get(&n, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
					  AND (query LIKE 'COPY%' OR query LIKE 'CREATE TEMP TABLE statement_stage%')`); err != nil || n != 1 {
					t.Errorf("terminate the statement's session: %d terminated, %v", n, err)
				}
			}
			if c.kill == 0 {
				kill()
				time.Sleep(100 * time.Millisecond) // the server closes the socket
			}
			done := make(chan error, 1)
			go func() {
				_, err := tx.Stage(context.Background(), &killingReader{n: 200_000, kill: c.kill, killed: kill})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Stage succeeded on a session that was terminated")
				}
				t.Logf("Stage: %v", err)
			case <-time.After(2 * time.Minute):
				t.Fatal("Stage still running two minutes after its session was terminated")
			}
		})
	}
}

// TestStatementBooksReadWhatTheLinesName: the orders and refunds of the account that the
// lines for the apply path name come back in two statements, keyed as the lines name them;
// another merchant's order of the same number, and the lines an earlier run settled, do not.
func TestStatementBooksReadWhatTheLinesName(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	s := postgres.NewStore(db.DB)
	day := stmtDay("2026-11-28")
	at := day.Start.Add(10 * time.Hour)
	orderID := insertPaidOrder(t, db, "B-1", at)
	repotest.InsertOrder(t, db, repotest.Order{Platform: "wechatpay", MerchantID: "1900000002", OutTradeNo: "B-2", AmountMinor: 500, Status: "PENDING", CreatedAt: at})
	repotest.InsertOrder(t, db, repotest.Order{Platform: "wechatpay", MerchantID: "1900000001", OutTradeNo: "B-3", AmountMinor: 700, Status: "PENDING", CreatedAt: at})
	db.MustExec(`INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status) VALUES ($1, 'BR-1', 300, 'PROCESSING')`, orderID)
	tx := stageDay(t, s, day)
	books, err := tx.Books(context.Background(), []reconcile.ClassifiedLine{
		{Kind: reconcile.BillPayment, OutTradeNo: "B-1"},
		{Kind: reconcile.BillRefund, OutTradeNo: "B-1", RefundNo: "BR-1"},
		{Kind: reconcile.BillPayment, OutTradeNo: "B-2"},                    // another merchant's
		{Kind: reconcile.BillPayment, OutTradeNo: "B-3", Prior: "repaired"}, // settled by an earlier run
	})
	if err != nil {
		t.Fatal(err)
	}
	o, ok := books.Orders["B-1"]
	if len(books.Orders) != 1 || !ok || o.ID != orderID || o.Status != reconcile.StatusPaid || o.PlatformTradeNo != "BT-1" {
		t.Errorf("orders %+v, want B-1 alone, PAID under BT-1", books.Orders)
	}
	r, ok := books.Refunds["BR-1"]
	if len(books.Refunds) != 1 || !ok || r.OrderID != orderID || r.AmountMinor != 300 || r.Status != reconcile.RefundProcessing {
		t.Errorf("refunds %+v, want BR-1 of B-1, 300, PROCESSING", books.Refunds)
	}
}

// classify runs the classification and returns its lines, payments before refunds, each in
// bill order (the statement streams them in no particular order).
func classify(t *testing.T, tx *postgres.StatementTx) []reconcile.ClassifiedLine {
	t.Helper()
	var out []reconcile.ClassifiedLine
	if err := tx.ClassifyEach(context.Background(), func(l reconcile.ClassifiedLine) { out = append(out, l) }); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b reconcile.ClassifiedLine) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.No, b.No))
	})
	return out
}
