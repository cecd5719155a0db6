package statementrun

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// refundCase is one row of the refund matching table: a local order (or none), its refund of
// the line's number (or none), the bill's refund line, and what the run must leave behind.
type refundCase struct {
	name  string
	order *order  // nil: no order of ours
	local *refund // nil: no refund of that number (orderID is filled in)
	line  statement.Line
	// wantStatus is the local refund's status after the run ("" when there is none).
	wantStatus reconcile.RefundStatus
	wantKind   reconcile.MismatchKind
	// wantOutcome is what statement_lines remembers of the line: "" when the classification
	// matched it and it is of the bill's own day (nothing to remember).
	wantOutcome reconcile.LineResult
}

func refundCases(p reconcile.Platform) []refundCase {
	m := merchantOf(p)
	at := testDay.Start.Add(14 * time.Hour)
	earlier := testDay.Start.Add(-30 * time.Hour)
	paid := func(otn, trade string, amount int64) *order {
		return &order{platform: p, merchant: m, outTradeNo: otn, amount: amount, status: reconcile.StatusPaid, tradeNo: trade, paidAt: earlier}
	}
	local := func(no string, amount int64, st reconcile.RefundStatus, succeeded time.Time) *refund {
		return &refund{outRefundNo: no, amount: amount, status: st, succeededAt: succeeded}
	}
	line := func(otn, trade, no string, amount int64) statement.Line {
		l := statement.Line{Kind: reconcile.BillRefund, OutTradeNo: otn, PlatformTradeNo: trade, RefundNo: no, Currency: "CNY",
			AmountMinor: amount, ReceivedMinor: amount, FeeMilliFen: -amount * 6, At: at}
		if p == reconcile.WechatPay {
			l.PlatformRefundNo = "50300" + no
		}
		return l
	}
	cases := []refundCase{
		{"PROCESSING, same amount: applied", paid("R-PROC", "RT-1", 1000), local("RF-PROC", 1000, reconcile.RefundProcessing, time.Time{}),
			line("R-PROC", "RT-1", "RF-PROC", 1000), reconcile.RefundSuccess, "", reconcile.LineRepaired},
		{"ABNORMAL, same amount: applied", paid("R-ABN", "RT-2", 800), local("RF-ABN", 300, reconcile.RefundAbnormal, time.Time{}),
			line("R-ABN", "RT-2", "RF-ABN", 300), reconcile.RefundSuccess, "", reconcile.LineRepaired},
		{"SUCCESS, same amount: matched", paid("R-SUCC", "RT-3", 900), local("RF-SUCC", 900, reconcile.RefundSuccess, at),
			line("R-SUCC", "RT-3", "RF-SUCC", 900), reconcile.RefundSuccess, "", ""},
		{"SUCCESS on the day before: matched, remembered", paid("R-PREV", "RT-4", 500), local("RF-PREV", 500, reconcile.RefundSuccess, earlier.Add(time.Hour)),
			line("R-PREV", "RT-4", "RF-PREV", 500), reconcile.RefundSuccess, "", "other_day"},
		{"amount differs", paid("R-AMT", "RT-5", 700), local("RF-AMT", 700, reconcile.RefundProcessing, time.Time{}),
			line("R-AMT", "RT-5", "RF-AMT", 650), reconcile.RefundProcessing, reconcile.MismatchRefundAmount, reconcile.LineMismatch},
		{"none with that out_refund_no, order known", paid("R-UNK", "RT-6", 600), nil,
			line("R-UNK", "RT-6", "RF-UNK", 200), "", reconcile.MismatchUnknownRefund, reconcile.LineMismatch},
		{"order unknown", nil, nil, line("R-NONE", "RT-7", "RF-NONE", 500), "", reconcile.MismatchUnknownOrder, reconcile.LineMismatch},
	}
	if p == reconcile.WechatPay {
		// WeChat Pay lists a refund on the day it was made, finished or not: PROCESSING is no
		// success, and moves nothing.
		wait := line("R-WAIT", "RT-8", "RF-WAIT", 400)
		wait.RefundStatus, wait.Pending, wait.FeeMilliFen = "PROCESSING", true, 0
		cases = append(cases, refundCase{"the bill says PROCESSING: nothing moves", paid("R-WAIT", "RT-8", 400),
			local("RF-WAIT", 400, reconcile.RefundProcessing, time.Time{}), wait, reconcile.RefundProcessing, "", reconcile.LineUnchanged})
	}
	return cases
}

// TestStatementRefundTable runs every row of the refund matching table through each
// platform's real bill file: refund lines are matched to local refunds by (order,
// out_refund_no), the rest go through the refund apply path with source statement. The day's
// figures count the refunds repaired and unknown; a re-run of the day changes nothing.
func TestStatementRefundTable(t *testing.T) {
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			cases := refundCases(p)
			var lines []statement.Line
			for _, c := range cases {
				e.seed(c)
				lines = append(lines, c.line)
			}
			path := writeBill(t, p, testDay, lines)
			res, err := e.runFile(p, testDay, path, false)
			if err != nil {
				t.Fatalf("statement: %v", err)
			}
			checkRefundRows(t, e, p, cases)
			checkRefundMoves(t, e, p)
			checkRefundFigures(t, e, res, len(cases))

			before := e.snapshot()
			again, err := e.runFile(p, testDay, path, false)
			if err != nil {
				t.Fatalf("re-run: %v", err)
			}
			after := e.snapshot()
			before.Runs++ // the re-run's own row is the only new thing
			if before != after {
				t.Errorf("a re-run of the day changed something:\nbefore %+v\nafter  %+v", before, after)
			}
			if again.Days[0].Tally != res.Days[0].Tally {
				t.Errorf("the re-run counted %+v, the run %+v", again.Days[0].Tally, res.Days[0].Tally)
			}
		})
	}
}

// checkRefundRows checks each row's refund status, finding and remembered line outcome.
func checkRefundRows(t *testing.T, e *env, p reconcile.Platform, cases []refundCase) {
	t.Helper()
	found := e.refundFindings(p)
	for _, c := range cases {
		no := c.line.RefundNo
		if k := found[no]; k != string(c.wantKind) {
			t.Errorf("%s: finding %q, want %q", c.name, k, c.wantKind)
		}
		var st string
		e.db.DB.Get(&st, `SELECT status FROM payment_refunds WHERE platform = $1 AND out_refund_no = $2`, string(p), no) //nolint:errcheck // compared below
		if st != string(c.wantStatus) {
			t.Errorf("%s: refund status %q, want %q", c.name, st, c.wantStatus)
		}
		var outcome, mkind string
		e.db.DB.QueryRow(`SELECT outcome, COALESCE(mismatch_kind, '') FROM statement_lines WHERE platform = $1 AND kind = 'refund'
			AND refund_no = $2`, string(p), no).Scan(&outcome, &mkind) //nolint:errcheck // compared below
		if outcome != string(c.wantOutcome) || mkind != string(c.wantKind) {
			t.Errorf("%s: remembered as %q %q, want %q %q", c.name, outcome, mkind, c.wantOutcome, c.wantKind)
		}
	}
	if n := len(e.findings(p)); n != 3 {
		t.Errorf("%d findings in all, want the table's 3", n)
	}
}

// checkRefundMoves: the two applied refunds moved through the shared path with source
// statement: one event each (the full one also its order's REFUNDED), one outbox row each,
// and the orders' refunded amounts.
func checkRefundMoves(t *testing.T, e *env, p reconcile.Platform) {
	t.Helper()
	var got string
	err := e.db.DB.Get(&got, `SELECT string_agg(o.out_trade_no || ' ' || ev.event_type || ' ' || ev.source, ', '
		ORDER BY o.out_trade_no, ev.event_type) FROM payment_events ev JOIN payment_orders o ON o.id = ev.order_id WHERE o.platform = $1`, string(p))
	want := "R-ABN REFUND_SUCCESS statement, R-PROC REFUNDED statement, R-PROC REFUND_SUCCESS statement"
	if err != nil || got != want {
		t.Errorf("events: %q (%v), want %q", got, err, want)
	}
	err = e.db.DB.Get(&got, `SELECT string_agg(o.out_trade_no || ' ' || f.kind || ' ' || (f.payload->>'source') || ' ' || (f.refund_id IS NOT NULL), ', '
		ORDER BY o.out_trade_no) FROM fulfillment_outbox f JOIN payment_orders o ON o.id = f.order_id WHERE o.platform = $1`, string(p))
	want = "R-ABN refund.succeeded statement true, R-PROC refund.succeeded statement true"
	if err != nil || got != want {
		t.Errorf("outbox: %q (%v), want %q", got, err, want)
	}
	err = e.db.DB.Get(&got, `SELECT string_agg(out_trade_no || ' ' || status || ' ' || refunded_minor, ', ' ORDER BY out_trade_no)
		FROM payment_orders WHERE platform = $1 AND out_trade_no IN ('R-PROC', 'R-ABN')`, string(p))
	want = "R-ABN PAID 300, R-PROC REFUNDED 1000"
	if err != nil || got != want {
		t.Errorf("orders: %q (%v), want %q", got, err, want)
	}
}

// checkRefundFigures: the day's figures and the run's counters count the refund lines.
func checkRefundFigures(t *testing.T, e *env, res Result, lines int) {
	t.Helper()
	days, err := e.store.StatementDays(context.Background(), "2026-11-28", "2026-11-29")
	if err != nil || len(days) != 1 {
		t.Fatalf("statement days: %v %d", err, len(days))
	}
	d := days[0]
	got := fmt.Sprintf("lines %d matched %d repaired %d found %d held %d refunds %d refunds repaired %d refunds unknown %d",
		d.Lines, d.Matched, d.Repaired, d.Found, d.Held, d.Refunds, d.RefundsRepaired, d.RefundsUnknown)
	want := fmt.Sprintf("lines %d matched %d repaired 2 found 3 held 0 refunds %d refunds repaired 2 refunds unknown 1",
		lines, lines-5, lines)
	if got != want {
		t.Errorf("figures: %s\n          want %s", got, want)
	}
	if f := res.Days[0].Figures; f.RefundsRepaired != 2 || f.RefundsUnknown != 1 {
		t.Errorf("the run's figures %+v: want 2 refunds repaired, 1 unknown", f)
	}
	if c := res.Run.Counts; c.Scanned != int64(lines) || c.Repaired != 2 || c.Mismatches != 3 || c.Errors != 0 {
		t.Errorf("run counters: %+v", c)
	}
}

// TestHeldRefundBecomesFindingOneDayLater: a local SUCCESS refund whose succeeded_at falls
// in the bill's day but which the bill does not list is held, not reported (beside its order,
// held the same day); the next day's bill settles it: listed there (the platform booked it
// after midnight) it is dropped, absent there too it is REFUND_NOT_AT_PLATFORM, exactly once.
// A refund line names its order too: the held order is listed by it.
func TestHeldRefundBecomesFindingOneDayLater(t *testing.T) {
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			nextDay, _ := reconcile.ParseBusinessDay("2026-11-29", shanghai)
			late := testDay.End.Add(-time.Second)
			// HR-1 was paid late on the day and the day's bill lists nothing of it; HR-2 was
			// paid the day before.
			id1 := e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: "HR-1", amount: 1000, status: reconcile.StatusPaid,
				tradeNo: "HRT-1", paidAt: late.Add(-time.Minute)})
			id2 := e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: "HR-2", amount: 1000, status: reconcile.StatusPaid,
				tradeNo: "HRT-2", paidAt: testDay.Start.Add(-time.Hour)})
			for _, r := range []refund{{id1, "HR-MISSING", 300, reconcile.RefundSuccess, late}, {id1, "HR-LATE", 200, reconcile.RefundSuccess, late},
				{id2, "HR-LISTED", 100, reconcile.RefundSuccess, late}} {
				e.insertRefund(r)
			}
			refundLine := func(otn, trade, no string, amount int64, at time.Time) statement.Line {
				return statement.Line{Kind: reconcile.BillRefund, OutTradeNo: otn, PlatformTradeNo: trade, RefundNo: no, Currency: "CNY",
					AmountMinor: amount, ReceivedMinor: amount, At: at}
			}
			day1 := writeBill(t, p, testDay, []statement.Line{refundLine("HR-2", "HRT-2", "HR-LISTED", 100, late)})
			if _, err := e.runFile(p, testDay, day1, false); err != nil {
				t.Fatal(err)
			}
			if f := e.findings(p); len(f) != 0 {
				t.Fatalf("findings on the day itself: %v; want none (held)", f)
			}
			days, _ := e.store.StatementDays(context.Background(), "2026-11-28", "2026-11-29")
			if len(days) != 1 || days[0].Held != 3 {
				t.Fatalf("held on day 1: %+v; want 3 (HR-1 and two of its refunds)", days)
			}

			// The platform booked HR-LATE on the next day (its line lists HR-1 too); HR-MISSING
			// it never had.
			day2 := writeBill(t, p, nextDay, []statement.Line{refundLine("HR-1", "HRT-1", "HR-LATE", 200, nextDay.Start.Add(time.Minute))})
			res, err := e.runFile(p, nextDay, day2, false)
			if err != nil {
				t.Fatal(err)
			}
			var kinds string
			e.db.DB.Get(&kinds, `SELECT string_agg(out_refund_no || ' ' || kind, ',') FROM reconcile_mismatches`) //nolint:errcheck // compared below
			if kinds != "HR-MISSING REFUND_NOT_AT_PLATFORM" || res.Days[0].Tally.Reported != 1 {
				t.Errorf("findings after day 2: %q, %d reported; want HR-MISSING REFUND_NOT_AT_PLATFORM only", kinds, res.Days[0].Tally.Reported)
			}
			checkHeldRefundFinding(t, e)
			before := e.snapshot()
			for _, run := range []struct {
				day  reconcile.BusinessDay
				path string
			}{{testDay, day1}, {nextDay, day2}} {
				if _, err := e.runFile(p, run.day, run.path, false); err != nil {
					t.Fatal(err)
				}
			}
			after := e.snapshot()
			before.Runs += 2
			if before != after {
				t.Errorf("re-running the days changed something:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// checkHeldRefundFinding: the held refund's finding says where it came from, was seen once,
// and the held list says what became of each row.
func checkHeldRefundFinding(t *testing.T, e *env) {
	t.Helper()
	var source, heldSince string
	var seen int
	e.db.DB.QueryRow(`SELECT detail->>'source', detail->>'held_since', seen_count FROM reconcile_mismatches
		WHERE out_refund_no = 'HR-MISSING'`).Scan(&source, &heldSince, &seen) //nolint:errcheck // compared below
	if source != "statement" || heldSince != "2026-11-28" || seen != 1 {
		t.Errorf("finding source %q held since %q seen %d; want statement, 2026-11-28, 1", source, heldSince, seen)
	}
	var got string
	e.db.DB.Get(&got, `SELECT string_agg(COALESCE(NULLIF(out_refund_no, ''), out_trade_no) || ' ' || state, ', '
		ORDER BY refund_id NULLS FIRST) FROM statement_held`) //nolint:errcheck // compared below
	if want := "HR-1 LISTED_NEXT_DAY, HR-MISSING REPORTED, HR-LATE LISTED_NEXT_DAY"; got != want {
		t.Errorf("held list %q, want %q", got, want)
	}
}

// TestRefundAndItsPaymentOnOneDay: payments whose callbacks were lost and their refunds, all
// on the day's bill: each payment repairs its order first, then its refund lands on it (an
// order's lines go through one worker, payments first), whichever of the two the bill lists
// first, and a re-run changes nothing. There are more orders than one read of the lines'
// books takes (booksChunk), so the lines reach the workers in several chunks.
func TestRefundAndItsPaymentOnOneDay(t *testing.T) {
	const orders = booksChunk*2 + 3
	for _, c := range []struct {
		p         reconcile.Platform
		pickLimit int
	}{{reconcile.Alipay, maxPendingPicked}, {reconcile.WechatPay, maxPendingPicked}, {reconcile.Alipay, 0}, {reconcile.WechatPay, 0}} {
		p := c.p
		// pickLimit 0: no payment line is picked out while staging, so the classification
		// alone hands every line over, in no particular order.
		t.Run(fmt.Sprintf("%s/pick%d", p, c.pickLimit), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.runner.pickLimit = c.pickLimit
			at := testDay.Start.Add(10 * time.Hour)
			var lines []statement.Line
			for i := range orders {
				no := fmt.Sprintf("SD-%d", i)
				id := e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: no, amount: 1000, status: reconcile.StatusPending})
				e.insertRefund(refund{orderID: id, outRefundNo: "SDR-" + no, amount: 1000, status: reconcile.RefundProcessing})
				pay := payLine(no, "SDT-"+no, 1000, at)
				ref := statement.Line{Kind: reconcile.BillRefund, OutTradeNo: no, PlatformTradeNo: "SDT-" + no, RefundNo: "SDR-" + no,
					Currency: "CNY", AmountMinor: 1000, ReceivedMinor: 1000, At: at.Add(time.Hour)}
				if i%2 == 0 {
					lines = append(lines, pay, ref)
				} else { // the refund listed before the payment it refunds
					lines = append(lines, ref, pay)
				}
			}
			path := writeBill(t, p, testDay, lines)
			res, err := e.runFile(p, testDay, path, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			e.db.DB.Select(&got, `SELECT o.out_trade_no || ': ' || o.status || ' ' || o.refunded_minor || ' ' || r.status || ' ' ||
				(SELECT string_agg(event_type || '/' || source, ',' ORDER BY event_type) FROM payment_events WHERE order_id = o.id) || ' ' ||
				(SELECT string_agg(kind, ',' ORDER BY id) FROM fulfillment_outbox WHERE order_id = o.id)
				FROM payment_orders o JOIN payment_refunds r ON r.order_id = o.id ORDER BY o.id`) //nolint:errcheck // compared below
			if len(got) != orders {
				t.Fatalf("%d orders with refunds, want %d", len(got), orders)
			}
			for i, g := range got {
				want := fmt.Sprintf("SD-%d: REFUNDED 1000 SUCCESS PAID/statement,REFUNDED/statement,REFUND_SUCCESS/statement order.paid,refund.succeeded", i)
				if g != want {
					t.Errorf("after the day: %q\nwant %q", g, want)
				}
			}
			if f := res.Days[0].Figures; f.Repaired != 2*orders || f.RefundsRepaired != orders || f.Found != 0 || f.Held != 0 {
				t.Errorf("figures %+v: want %d repaired (%d refunds), nothing found or held", f, 2*orders, orders)
			}
			before := e.snapshot()
			if _, err := e.runFile(p, testDay, path, false); err != nil {
				t.Fatal(err)
			}
			after := e.snapshot()
			before.Runs++
			if before != after {
				t.Errorf("a re-run of the day changed something:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// seed records a refund case's order and local refund, where it has them.
func (e *env) seed(c refundCase) {
	e.t.Helper()
	if c.order == nil {
		return
	}
	id := e.insert(*c.order)
	if c.local != nil {
		c.local.orderID = id
		e.insertRefund(*c.local)
	}
}
