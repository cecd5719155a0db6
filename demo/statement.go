package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/sandbox"
	"github.com/payrecon/payrecon/statementrun"
	"github.com/payrecon/payrecon/worker"
)

// storyBillOnly is the order only the bill can repair: the platform dropped its callback and
// answers every query about it with a system error, so no pass or backfill can settle it.
const storyBillOnly = "bill only"

// billOnlyFault is what the sandbox answers every query about the bill-only order with.
var billOnlyFault = sandbox.Fault{ErrorCode: "ACQ.SYSTEM_ERROR"}

// unknownBillTrade is a payment the WeChat Pay bill lists for an order this merchant never
// created, and that no callback ever announced: only the bill tells of it.
const unknownBillTrade = "W-bill-unknown-1"

// demoStatement is the morning after: the platforms' bills of the demo's day go through the
// statement run (reconciler statement --day), which repairs the order whose callback and
// queries both failed, finds the payment for an order this merchant never had and the refund
// made in the merchant portal, and prints the day's settlement figures.
func demoStatement(ctx context.Context, stdout io.Writer, a *worker.App, cfg config.Config, sb *sandbox.Sandbox, orders []demoOrder) error {
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	var billOnly demoOrder
	for _, o := range orders {
		if o.story == storyBillOnly {
			billOnly = o
		}
	}
	// The bill day is the day the demo's trades were paid on, in the zone bill days are read in
	// (Asia/Shanghai unless RECONCILER_TIMEZONE says otherwise): today, not yesterday.
	paidAt := sb.Scenario(billOnly.platform, billOnly.otn).PaidAt
	day, err := reconcile.ParseBusinessDay(paidAt.In(cfg.Timezone).Format(time.DateOnly), cfg.Timezone)
	if err != nil {
		return err
	}
	sb.SetScenario(reconcile.WechatPay, unknownBillTrade, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 3600,
		MerchantID: sb.Identity().WechatMchID, PaidAt: paidAt})
	// The platforms publish a day's bill the next morning; the sandbox publishes today's now.
	sb.PublishBillsEarly(true)
	accounts, err := a.BillAccounts("")
	if err != nil {
		return err
	}
	before, err := a.Store().OrderTrails(ctx)
	if err != nil {
		return err
	}
	started := time.Now()
	say("\n10. the next morning: the statement run over %d accounts' bills of %s (reconciler statement --date %s)", len(accounts), day.Date, day.Date)
	res, err := a.StatementRunner(prometheus.NewRegistry()).Run(ctx, statementrun.Spec{Day: day, Accounts: accounts})
	var summary strings.Builder
	statementrun.WriteSummary(&summary, res)
	fmt.Fprint(stdout, indented(summary.String()))
	say("   %s", dayTotals(res))
	if err != nil {
		return fmt.Errorf("demo statement: %w", err)
	}
	after, err := a.Store().OrderTrails(ctx)
	if err != nil {
		return err
	}
	b, f := before[billOnly.otn], after[billOnly.otn]
	say("   repaired from the bill only: %s (%s, callback dropped, every query answered %s): %s -> %s, %d event(s), %d outbox row(s)",
		billOnly.otn, billOnly.merchant(sb), billOnlyFault.ErrorCode, b.Status, f.Status, f.Events, f.Outbox)
	return printBillFindings(ctx, stdout, postgres.NewReview(a.Store().DB()), started)
}

// dayTotals adds up every account's figures of the day: what finance books.
func dayTotals(res statementrun.Result) string {
	var t reconcile.StatementFigures
	for _, d := range res.Days {
		f := d.Figures
		t.Payments, t.PaymentsMinor, t.Refunds, t.RefundsMinor = t.Payments+f.Payments, t.PaymentsMinor+f.PaymentsMinor, t.Refunds+f.Refunds, t.RefundsMinor+f.RefundsMinor
		t.FeeMilliFen, t.NetMilliFen = t.FeeMilliFen+f.FeeMilliFen, t.NetMilliFen+f.NetMilliFen
		t.Lines, t.Matched, t.Repaired, t.Found = t.Lines+f.Lines, t.Matched+f.Matched, t.Repaired+f.Repaired, t.Found+f.Found
	}
	return fmt.Sprintf("the day in all: %d payments %s yuan, %d refund(s) %s yuan, fees %s, net %s yuan; %d lines: %d matched, %d repaired, %d found",
		t.Payments, reconcile.FormatYuan(t.PaymentsMinor), t.Refunds, reconcile.FormatYuan(t.RefundsMinor),
		reconcile.FormatYuanMilliFen(t.FeeMilliFen), reconcile.FormatYuanMilliFen(t.NetMilliFen), t.Lines, t.Matched, t.Repaired, t.Found)
}

// printBillFindings lists the payments for orders this merchant never had, and the refunds
// it never recorded (made in the merchant portal), that the statement run saw.
func printBillFindings(ctx context.Context, w io.Writer, review *postgres.Review, since time.Time) error {
	findings, err := review.List(ctx, reconcile.FindingFilter{Kind: reconcile.MismatchUnknownOrder, Since: since, Limit: 1000})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   payments for orders we never had, seen on the bills (%d %s findings):\n", len(findings), reconcile.MismatchUnknownOrder)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "   id\tplatform\torder\tplatform says\tseen")
	for _, f := range findings {
		fmt.Fprintf(tw, "   %d\t%s\t%s\t%s\t%d\n", f.ID, f.Platform, f.OutTradeNo,
			strings.TrimSpace(reconcile.FormatYuanOr(f.PlatformAmountMinor, "-")+" "+f.PlatformStatus), f.SeenCount)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if findings, err = review.List(ctx, reconcile.FindingFilter{Kind: reconcile.MismatchUnknownRefund, Since: since, Limit: 1000}); err != nil {
		return err
	}
	fmt.Fprintf(w, "   refunds we never recorded, seen on the bills (%d %s findings):\n", len(findings), reconcile.MismatchUnknownRefund)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "   id\tplatform\torder\trefund\tplatform says\tseen")
	for _, f := range findings {
		fmt.Fprintf(tw, "   %d\t%s\t%s\t%s\t%s\t%d\n", f.ID, f.Platform, f.OutTradeNo, f.OutRefundNo,
			strings.TrimSpace(reconcile.FormatYuanOr(f.PlatformAmountMinor, "-")+" "+f.PlatformStatus), f.SeenCount)
	}
	return tw.Flush()
}

// indented is text with every line three spaces in, as the demo's steps are.
func indented(text string) string {
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString("   " + l)
		}
	}
	return b.String()
}
