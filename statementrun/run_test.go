package statementrun

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

var testDay, _ = reconcile.ParseBusinessDay("2026-11-28", shanghai)

// tableCase is one row of the matching table: a local order (or none), the bill line, and
// what the run must leave behind.
type tableCase struct {
	name       string
	local      *order // nil: no order of ours
	line       statement.Line
	wantStatus reconcile.Status // "" when there is no order of this merchant
	wantKind   reconcile.MismatchKind
}

func tableCases(p reconcile.Platform) []tableCase {
	m := merchantOf(p)
	at := testDay.Start.Add(10 * time.Hour)
	pay := func(otn, trade string, amount int64) statement.Line {
		return statement.Line{Kind: reconcile.BillPayment, OutTradeNo: otn, PlatformTradeNo: trade, Currency: "CNY",
			AmountMinor: amount, FeeMilliFen: amount * 6, At: at}
	}
	refund := func(otn, trade string, amount int64) statement.Line {
		return statement.Line{Kind: reconcile.BillRefund, OutTradeNo: otn, PlatformTradeNo: trade, RefundNo: "re_" + otn,
			Currency: "CNY", AmountMinor: amount, FeeMilliFen: -amount * 6, At: at.Add(time.Hour)}
	}
	o := func(otn string, amount int64, st reconcile.Status, trade string, paid time.Time) *order {
		return &order{platform: p, merchant: m, outTradeNo: otn, amount: amount, status: st, tradeNo: trade, paidAt: paid}
	}
	return []tableCase{
		{"payment, PENDING: repaired", o("T-PEND", 1000, reconcile.StatusPending, "", time.Time{}),
			pay("T-PEND", "TR-1", 1000), reconcile.StatusPaid, ""},
		{"payment, PAID same trade and amount: matched", o("T-PAID", 1500, reconcile.StatusPaid, "TR-2", at),
			pay("T-PAID", "TR-2", 1500), reconcile.StatusPaid, ""},
		{"payment, amount differs", o("T-AMT", 1000, reconcile.StatusPending, "", time.Time{}),
			pay("T-AMT", "TR-3", 1200), reconcile.StatusPending, reconcile.MismatchAmount},
		{"payment, currency differs", &order{platform: p, merchant: m, outTradeNo: "T-CUR", amount: 1000, currency: "USD", status: reconcile.StatusPending},
			pay("T-CUR", "TR-4", 1000), reconcile.StatusPending, reconcile.MismatchCurrency},
		{"payment, no order", nil, pay("T-NONE", "TR-5", 700), "", reconcile.MismatchUnknownOrder},
		{"payment, order under another merchant", &order{platform: p, merchant: "other-merchant", outTradeNo: "T-OTHER", amount: 700, status: reconcile.StatusPending},
			pay("T-OTHER", "TR-6", 700), "", reconcile.MismatchMerchant},
		{"payment, CLOSED", o("T-CLOSED", 900, reconcile.StatusClosed, "", time.Time{}),
			pay("T-CLOSED", "TR-7", 900), reconcile.StatusClosed, reconcile.MismatchPaidAfterClose},
		{"payment, FAILED", o("T-FAILED", 900, reconcile.StatusFailed, "", time.Time{}),
			pay("T-FAILED", "TR-8", 900), reconcile.StatusFailed, reconcile.MismatchPaidAfterClose},
		{"payment, PAID under another trade number", o("T-DUP", 800, reconcile.StatusPaid, "TR-9", at),
			pay("T-DUP", "TR-10", 800), reconcile.StatusPaid, reconcile.MismatchDuplicatePayment},
		// The refund rows of the table, matched to local refunds, are TestStatementRefundTable's;
		// this one has no order to look a refund up under.
		{"refund, no order", nil, refund("T-RNONE", "TR-13", 500), "", reconcile.MismatchUnknownOrder},
	}
}

// TestStatementTable runs every row of the matching table through the real file format of
// each platform, then runs the day again: the second run must change nothing.
func TestStatementTable(t *testing.T) {
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			cases := tableCases(p)
			var lines []statement.Line
			for _, c := range cases {
				if c.local != nil {
					e.insert(*c.local)
				}
				lines = append(lines, c.line)
			}
			path := writeBill(t, p, testDay, lines)
			res, err := e.runFile(p, testDay, path, false)
			if err != nil {
				t.Fatalf("statement: %v", err)
			}
			got := e.findings(p)
			for _, c := range cases {
				if k := got[c.line.OutTradeNo]; k != string(c.wantKind) {
					t.Errorf("%s: finding %q, want %q", c.name, k, c.wantKind)
				}
				if c.wantStatus != "" {
					var st string
					e.db.DB.Get(&st, `SELECT status FROM payment_orders WHERE platform = $1 AND merchant_id = $2 AND out_trade_no = $3`,
						string(p), merchantOf(p), c.line.OutTradeNo) //nolint:errcheck // compared below
					if st != string(c.wantStatus) {
						t.Errorf("%s: status %s, want %s", c.name, st, c.wantStatus)
					}
				}
			}
			// The PENDING orders' lines are applied ahead of the classification, which returns
			// the mismatched ones again: each is still seen once.
			var twice int
			e.db.DB.Get(&twice, `SELECT count(*) FROM reconcile_mismatches WHERE seen_count <> 1`) //nolint:errcheck // compared below
			if twice != 0 {
				t.Errorf("%d findings seen more than once by one run", twice)
			}
			checkRepairEvent(t, e, p)
			checkFigures(t, e, res, p, len(cases))
			checkLinePointers(t, e, p)

			before := e.snapshot()
			if _, err := e.runFile(p, testDay, path, false); err != nil {
				t.Fatalf("re-run: %v", err)
			}
			after := e.snapshot()
			before.Runs++ // the re-run's own row is the only new thing
			if before != after {
				t.Errorf("a re-run of the day changed something:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func checkRepairEvent(t *testing.T, e *env, p reconcile.Platform) {
	t.Helper()
	var source, trade string
	var outbox int
	err := e.db.DB.QueryRow(`SELECT ev.source, ev.platform_trade_no, (SELECT count(*) FROM fulfillment_outbox f WHERE f.order_id = o.id)
		FROM payment_orders o JOIN payment_events ev ON ev.order_id = o.id AND ev.event_type = 'PAID'
		WHERE o.platform = $1 AND o.out_trade_no = 'T-PEND'`, string(p)).Scan(&source, &trade, &outbox)
	if err != nil || source != "statement" || trade != "TR-1" || outbox != 1 {
		t.Errorf("repair event: source %q trade %q outbox rows %d (%v); want statement, TR-1, 1", source, trade, outbox, err)
	}
	var events int
	e.db.DB.Get(&events, `SELECT count(*) FROM payment_events`) //nolint:errcheck // compared below
	if events != 1 {
		t.Errorf("%d payment events, want only the repair's", events)
	}
}

func checkFigures(t *testing.T, e *env, res Result, p reconcile.Platform, lines int) {
	t.Helper()
	days, err := e.store.StatementDays(context.Background(), "2026-11-28", "2026-11-29")
	if err != nil || len(days) != 1 {
		t.Fatalf("statement days: %v %d", err, len(days))
	}
	d := days[0]
	want := fmt.Sprintf("lines %d matched 1 repaired 1 found 8 payments 9 refunds 1", lines)
	got := fmt.Sprintf("lines %d matched %d repaired %d found %d payments %d refunds %d", d.Lines, d.Matched, d.Repaired, d.Found, d.Payments, d.Refunds)
	if got != want {
		t.Errorf("figures: %s, want %s", got, want)
	}
	// 1000+1500+1200+1000+700+700+900+900+800 paid in, 500 back, fees 0.6% both ways.
	if d.PaymentsMinor != 8700 || d.RefundsMinor != 500 || d.ReceivedMinor != 8200 || d.FeeMilliFen != 8200*6 || d.NetMilliFen != 8200*1000-8200*6 {
		t.Errorf("money: %+v", d)
	}
	c := res.Run.Counts
	if c.Scanned != int64(lines) || c.Repaired != 1 || c.Unchanged != 1 || c.Mismatches != 8 || c.Errors != 0 || res.Run.Mode != reconcile.ModeStatement {
		t.Errorf("run counters: %+v", res.Run)
	}
}

// checkLinePointers: each finding of the bill points at its line in statement_lines.
func checkLinePointers(t *testing.T, e *env, p reconcile.Platform) {
	t.Helper()
	var n, pointed int
	err := e.db.DB.QueryRow(`SELECT count(*), count(*) FILTER (WHERE l.mismatch_id = m.id AND l.line_no > 0)
		FROM statement_lines l JOIN reconcile_mismatches m ON m.platform = l.platform AND m.out_trade_no = l.out_trade_no
		WHERE l.platform = $1 AND l.outcome = 'mismatch'`, string(p)).Scan(&n, &pointed)
	if err != nil || n != 8 || pointed != 8 {
		t.Errorf("finding lines: %d, pointing at their finding %d (%v); want 8", n, pointed, err)
	}
	var line float64
	e.db.DB.Get(&line, `SELECT (detail->>'bill_line')::float FROM reconcile_mismatches WHERE out_trade_no = 'T-AMT'`) //nolint:errcheck // compared below
	if line <= 0 {
		t.Errorf("the AMOUNT_MISMATCH detail names no bill line")
	}
}
