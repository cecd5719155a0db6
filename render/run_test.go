package render_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

func TestDryRunPrinterOneLinePerMoveOrFinding(t *testing.T) {
	order := reconcile.Order{Platform: reconcile.Alipay, OutTradeNo: "A-1", AmountMinor: 8801, Status: reconcile.StatusPending}
	refund := &reconcile.Refund{Platform: reconcile.Alipay, OutTradeNo: "A-1", OutRefundNo: "A-1-r1", AmountMinor: 3000,
		Status: reconcile.RefundProcessing}
	cases := []struct {
		name  string
		check reconcile.Check
		want  string // "" when nothing is printed
	}{
		{"repair", reconcile.Check{Order: order, Result: reconcile.Result{PlatformTradeNo: "T-1", AmountMinor: 8801},
			Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, From: reconcile.StatusPending, To: reconcile.StatusPaid}},
			"would repair alipay A-1: PENDING -> PAID (T-1, 88.01 yuan)\n"},
		{"close at the platform", reconcile.Check{Order: order, Result: reconcile.Result{State: reconcile.StateOpen},
			Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, From: reconcile.StatusPending, To: reconcile.StatusClosed}},
			"would close alipay A-1: PENDING -> CLOSED at the platform, then locally\n"},
		{"finding", reconcile.Check{Order: order, Result: reconcile.Result{RawState: "TRADE_SUCCESS", AmountMinor: 8701},
			Applied: reconcile.Applied{Outcome: reconcile.OutcomeMismatch, Mismatch: reconcile.MismatchAmount}},
			"finding   alipay A-1: AMOUNT_MISMATCH (local PENDING 88.01 yuan, platform TRADE_SUCCESS 87.01 yuan)\n"},
		{"error", reconcile.Check{Order: order, Err: errors.New("timeout")}, "error     alipay A-1: timeout\n"},
		{"still pending", reconcile.Check{Order: order, Applied: reconcile.Applied{Outcome: reconcile.OutcomeStillPending}}, ""},
		{"unchanged", reconcile.Check{Order: order, Applied: reconcile.Applied{Outcome: reconcile.OutcomeUnchanged}}, ""},
		{"refund moved", reconcile.Check{Order: order, Refund: refund,
			Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, RefundFrom: reconcile.RefundProcessing, RefundTo: reconcile.RefundSuccess}},
			"would move alipay refund A-1-r1 of A-1: PROCESSING -> SUCCESS (30.00 yuan)\n"},
		{"refund finding", reconcile.Check{Order: order, Refund: refund,
			RefundResult: reconcile.RefundResult{RawState: "REFUND_SUCCESS", AmountMinor: 2900},
			Applied:      reconcile.Applied{Outcome: reconcile.OutcomeMismatch, Mismatch: reconcile.MismatchRefundAmount}},
			"finding   alipay refund A-1-r1 of A-1: REFUND_AMOUNT_MISMATCH (local PROCESSING 30.00 yuan, platform REFUND_SUCCESS 29.00 yuan)\n"},
		{"refund error", reconcile.Check{Order: order, Refund: refund, Err: errors.New("timeout")}, "error     alipay refund A-1-r1 of A-1: timeout\n"},
		{"refund still processing", reconcile.Check{Order: order, Refund: refund, Applied: reconcile.Applied{Outcome: reconcile.OutcomeStillPending}}, ""},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		render.NewDryRunPrinter(&buf).Checked(tc.check)
		if buf.String() != tc.want {
			t.Errorf("%s: printed %q, want %q", tc.name, buf.String(), tc.want)
		}
	}
}

func TestRunSummaryNamesEveryCounter(t *testing.T) {
	var buf bytes.Buffer
	render.RunSummary(&buf, reconcile.Run{ID: 7, Mode: reconcile.ModeOnce, Status: reconcile.RunSucceeded, DryRun: true,
		Shard:  reconcile.Shard{Index: 1, Count: 4},
		Counts: reconcile.CounterValues{Scanned: 8, Repaired: 1, Closed: 2, Unchanged: 3, StillPending: 4, Mismatches: 5, ClaimedElsewhere: 6, Errors: 7, RefundsRepaired: 9}})
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "run 7 once succeeded, shard 1/4 (dry run") {
		t.Fatalf("summary:\n%s", buf.String())
	}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != "scanned repaired closed unchanged still_pending mismatches claimed_elsewhere errors refunds_repaired" {
		t.Errorf("header %q", lines[1])
	}
	if got := strings.Fields(lines[2]); strings.Join(got, " ") != "8 1 2 3 4 5 6 7 9" {
		t.Errorf("values %q", lines[2])
	}
}
