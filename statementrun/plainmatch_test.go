package statementrun

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// seenApplier is the apply path, noting every line handed to it.
type seenApplier struct {
	Applier
	mu   sync.Mutex
	seen map[string]bool
}

func lineKey(kind reconcile.BillLineKind, outTradeNo, refundNo string) string {
	return string(kind) + "|" + outTradeNo + "|" + refundNo
}

func (s *seenApplier) ApplyResult(ctx context.Context, r reconcile.Result, opt reconcile.ApplyOptions) (reconcile.Applied, error) {
	s.mu.Lock()
	s.seen[lineKey(reconcile.BillPayment, r.OutTradeNo, "")] = true
	s.mu.Unlock()
	return s.Applier.ApplyResult(ctx, r, opt)
}

func (s *seenApplier) ApplyRefundResult(ctx context.Context, r reconcile.RefundResult, opt reconcile.ApplyOptions) (reconcile.Applied, error) {
	s.mu.Lock()
	s.seen[lineKey(reconcile.BillRefund, r.OutTradeNo, r.OutRefundNo)] = true
	s.mu.Unlock()
	return s.Applier.ApplyRefundResult(ctx, r, opt)
}

// TestAPlainMatchIsWhatTheApplyPathLeavesAlone holds the two sides of "does a line match our
// books" to one answer. The classification's plain match (SQL, set-based) keeps a line away
// from the apply path; the apply path's own checks decide every line that reaches it. A line
// the classification keeps away must be one the apply path, given it, would leave as it is
// (unchanged or a duplicate, no finding); and the lines that need something (a repair, a
// finding) must all reach it.
func TestAPlainMatchIsWhatTheApplyPathLeavesAlone(t *testing.T) {
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			m := merchantOf(p)
			at := testDay.Start.Add(10 * time.Hour)
			type payCase struct {
				name  string
				order *order
				line  statement.Line
				plain bool
			}
			ord := func(no, trade string, amount int64, st reconcile.Status) *order {
				o := &order{platform: p, merchant: m, outTradeNo: no, amount: amount, status: st}
				if st == reconcile.StatusPaid || st == reconcile.StatusRefunded {
					o.tradeNo, o.paidAt = trade, at
				}
				return o
			}
			pay := func(no, trade string, amount int64, currency string) statement.Line {
				return statement.Line{Kind: reconcile.BillPayment, OutTradeNo: no, PlatformTradeNo: trade, Currency: currency,
					AmountMinor: amount, ReceivedMinor: amount, FeeMilliFen: amount * 6, At: at}
			}
			payments := []payCase{
				{"PAID, the same figures", ord("P-SAME", "T-1", 1000, reconcile.StatusPaid), pay("P-SAME", "T-1", 1000, "CNY"), true},
				{"REFUNDED, the same figures", ord("P-REF", "T-2", 900, reconcile.StatusRefunded), pay("P-REF", "T-2", 900, "CNY"), true},
				{"PAID, another amount", ord("P-AMT", "T-3", 800, reconcile.StatusPaid), pay("P-AMT", "T-3", 700, "CNY"), false},
				{"PAID, another trade number", ord("P-TWICE", "T-4", 600, reconcile.StatusPaid), pay("P-TWICE", "T-4b", 600, "CNY"), false},
				{"PENDING", ord("P-PEND", "", 400, reconcile.StatusPending), pay("P-PEND", "T-6", 400, "CNY"), false},
				{"CLOSED", ord("P-CLOSED", "", 300, reconcile.StatusClosed), pay("P-CLOSED", "T-7", 300, "CNY"), false},
				{"no order", nil, pay("P-NONE", "T-8", 200, "CNY"), false},
			}
			if p == reconcile.WechatPay { // an Alipay bill names no currency: every line is CNY
				payments = append(payments, payCase{"PAID, another currency", ord("P-CUR", "T-5", 500, reconcile.StatusPaid),
					pay("P-CUR", "T-5", 500, "USD"), false})
			}
			var lines []statement.Line
			plain := map[string]bool{}
			for _, c := range payments {
				if c.order != nil {
					e.insert(*c.order)
				}
				lines = append(lines, c.line)
				plain[lineKey(reconcile.BillPayment, c.line.OutTradeNo, "")] = c.plain
			}
			for _, c := range refundCases(p) {
				e.seed(c)
				lines = append(lines, c.line)
				plain[lineKey(reconcile.BillRefund, c.line.OutTradeNo, c.line.RefundNo)] = c.wantOutcome == "" || c.wantOutcome == reconcile.LineOtherDay
			}

			applier := reconcile.NewApplier(e.store, nil, reconcile.ApplierSettings{}, zerolog.Nop())
			seen := &seenApplier{Applier: applier, seen: map[string]bool{}}
			e.runner = NewRunner(testStore{e.store}, e.store.Locker().WithWait(0), seen, e.store.Runs(), nil, 4, zerolog.Nop())
			if _, err := e.runFile(p, testDay, writeBill(t, p, testDay, lines), false); err != nil {
				t.Fatalf("statement: %v", err)
			}

			acct := reconcile.AccountKey{Platform: p, MerchantID: m}
			for _, l := range lines {
				key := lineKey(l.Kind, l.OutTradeNo, l.RefundNo)
				reached := seen.seen[key]
				if reached == plain[key] {
					t.Errorf("%s: reached the apply path %v, want %v", key, reached, !plain[key])
				}
				if reached {
					continue
				}
				// Kept away: the apply path, given the line now, must leave everything as it is.
				cl := pendingLine(l)
				cl.OrderStatus = ""
				var got reconcile.Applied
				var err error
				if l.Kind == reconcile.BillRefund {
					got, err = applier.ApplyRefundResult(context.Background(), refundLineResult(acct, cl, "d"), reconcile.ApplyOptions{DryRun: true})
				} else {
					got, err = applier.ApplyResult(context.Background(), lineResult(acct, cl, "d"), reconcile.ApplyOptions{DryRun: true})
				}
				if err != nil || got.Mismatch != "" || (got.Outcome != reconcile.OutcomeUnchanged && got.Outcome != reconcile.OutcomeDuplicate) {
					t.Errorf("%s: a plain match, yet the apply path answers %s %s (%v)", key, got.Outcome, got.Mismatch, err)
				}
			}
		})
	}
}
