package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/sandbox"
)

// The refund half of the story: four paid orders, each refunded at the platform.
const (
	// storyRefundLost: the app recorded the refund, the platform paid it back, and its
	// callback never came: run's refund query lands it.
	storyRefundLost = "refund lost callback"
	// storyRefundPartial: 30.00 of 100.00 back, announced by callback; the order stays PAID.
	storyRefundPartial = "partial refund"
	// storyRefundPortal: someone refunded in the merchant portal, so the app never recorded
	// it and no callback tells of it: the day's bill turns it up as an UNKNOWN_REFUND finding.
	storyRefundPortal = "portal refund"
	// storyRefundAbnormal: WeChat Pay could not pay the buyer back (REFUND.ABNORMAL): the
	// merchant must act, so it is a REFUND_ABNORMAL finding.
	storyRefundAbnormal = "abnormal refund"
)

// demoRefund is one refund of the mix: what the platform made of it, whether the merchant's
// app recorded it, and whether its callback reaches payrecon.
type demoRefund struct {
	story       string // the refunded order's story
	outRefundNo string
	amount      int64
	outcome     sandbox.RefundOutcome
	recorded    bool // a payment_refunds row, PROCESSING, as the app writes it
	callback    bool // the platform's refund callback arrives (the others are lost)
}

func demoRefunds() []demoRefund {
	return []demoRefund{
		{story: storyRefundLost, outRefundNo: "RF-A-lost-1", amount: 5800, outcome: sandbox.RefundSuccess, recorded: true},
		{story: storyRefundPartial, outRefundNo: "RF-W-partial-1", amount: 3000, outcome: sandbox.RefundSuccess, recorded: true, callback: true},
		{story: storyRefundPortal, outRefundNo: "PORTAL-W-1", amount: 1200, outcome: sandbox.RefundSuccess},
		{story: storyRefundAbnormal, outRefundNo: "RF-W-abnormal-1", amount: 6600, outcome: sandbox.RefundAbnormal, recorded: true, callback: true},
	}
}

// refundOrders are the paid orders the refunds give money back for: paid in full at the
// platform and in our books, round amounts so the partial refund reads as what it is.
func refundOrders() []demoOrder {
	paid := sandbox.Scenario{State: sandbox.StatePaid}
	order := func(story string, p reconcile.Platform, otn string, amount int64, second bool) demoOrder {
		return demoOrder{story: story, platform: p, otn: otn, amount: amount, local: reconcile.StatusPaid,
			createdAgo: 2 * time.Hour, platformSc: paid, second: second}
	}
	return []demoOrder{
		order(storyRefundLost, reconcile.Alipay, "A-refund-lost-callback-1", 5800, false),
		order(storyRefundPartial, reconcile.WechatPay, "W-partial-refund-1", 10000, false),
		order(storyRefundPortal, reconcile.WechatPay, "W-portal-refund-1", 4500, true),
		order(storyRefundAbnormal, reconcile.WechatPay, "W-abnormal-refund-1", 6600, false),
	}
}

// orderOf is the order a refund gives money back for.
func (r demoRefund) orderOf(orders []demoOrder) demoOrder {
	i := slices.IndexFunc(orders, func(o demoOrder) bool { return o.story == r.story })
	return orders[i]
}

// refundAge is how long ago the refunds were asked for: just past the pass's grace (GRACE,
// 2m), so run takes the ones still PROCESSING, and recent enough to be on today's bill.
const refundAge = 3 * time.Minute

// seedRefunds makes each refund at the platform and, where the merchant's app recorded it,
// in our books as the app does (PROCESSING, through Store.InsertRefund).
func seedRefunds(ctx context.Context, store *postgres.Store, sb *sandbox.Sandbox, orders []demoOrder, refunds []demoRefund) error {
	asked := time.Now().Add(-refundAge)
	for _, r := range refunds {
		o := r.orderOf(orders)
		spec := sandbox.RefundSpec{Platform: o.platform, OutTradeNo: o.otn, OutRefundNo: r.outRefundNo, AmountMinor: r.amount,
			Outcome: r.outcome, CreatedAt: asked, SucceededAt: asked.Add(30 * time.Second)}
		if _, err := sb.AddRefund(spec); err != nil {
			return fmt.Errorf("seed refund %s: %w", r.outRefundNo, err)
		}
		if !r.recorded {
			continue
		}
		order, err := store.FindOrder(ctx, o.platform, o.merchant(sb), o.otn)
		if err != nil {
			return fmt.Errorf("seed refund %s: %w", r.outRefundNo, err)
		}
		if _, err := store.InsertRefund(ctx, postgres.NewRefund{OrderID: order.ID, OutRefundNo: r.outRefundNo, AmountMinor: r.amount, CreatedAt: asked}); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

// refundCallbacks sends the refund callbacks there are (not the lost one's, nor the portal
// refund's) through the reconciler's callback endpoints, one copy each, and waits for them:
// what the platform reports lands before the pass, so the pass has only the lost one left
// to repair.
func refundCallbacks(ctx context.Context, sb *sandbox.Sandbox, orders []demoOrder, refunds []demoRefund, notifyURL string) (sent, acked int, err error) {
	var deliveries []*sandbox.Delivery
	for _, p := range reconcile.Platforms() {
		var cbs []sandbox.Callback
		for _, r := range refunds {
			if r.callback && r.orderOf(orders).platform == p {
				cbs = append(cbs, sandbox.Callback{Platform: p, OutRefundNo: r.outRefundNo})
			}
		}
		if len(cbs) == 0 {
			continue
		}
		d, err := sb.Deliver(ctx, sandbox.DeliveryOptions{URL: notifyURL + "/notify/" + string(p), TimeScale: 1000}, cbs...)
		if err != nil {
			return 0, 0, fmt.Errorf("refund callbacks: %w", err)
		}
		sent += len(cbs)
		deliveries = append(deliveries, d)
	}
	acked, err = countAcked(ctx, deliveries)
	return sent, acked, err
}

// refundStatuses is each refund's local status ("-" when we have none): the before of the
// refunds table.
func refundStatuses(ctx context.Context, store *postgres.Store, sb *sandbox.Sandbox, orders []demoOrder, refunds []demoRefund) (map[string]string, error) {
	out := map[string]string{}
	for _, r := range refunds {
		o := r.orderOf(orders)
		ref, err := store.FindRefund(ctx, o.platform, o.merchant(sb), r.outRefundNo)
		switch {
		case errors.Is(err, reconcile.ErrNotFound):
			out[r.outRefundNo] = "-"
		case err != nil:
			return nil, err
		default:
			out[r.outRefundNo] = string(ref.Status)
		}
	}
	return out, nil
}

// refundRow is one refund of the mix as the refunds table shows it.
type refundRow struct {
	r       demoRefund
	order   demoOrder
	history reconcile.OrderHistory
	platRef sandbox.Refund
	finding string // its open finding ("KIND #id"), or "-"
}

// local is our record of the refund (nil: we have none).
func (row refundRow) local() *reconcile.RefundRecord {
	i := slices.IndexFunc(row.history.Refunds, func(s reconcile.RefundRecord) bool { return s.OutRefundNo == row.r.outRefundNo })
	if i < 0 {
		return nil
	}
	return &row.history.Refunds[i]
}

// events are the refund's own events and who landed them (callback, run, ...).
func (row refundRow) events() (types, sources []string) {
	by := map[string]string{string(reconcile.SourceNotify): "callback", string(reconcile.SourceReconcile): "run",
		string(reconcile.SourceBackfill): "backfill", string(reconcile.SourceStatement): "statement"}
	for _, e := range row.history.Events {
		if e.OutRefundNo == row.r.outRefundNo {
			types, sources = append(types, e.EventType), append(sources, by[e.Source])
		}
	}
	return types, sources
}

// loadRefundRows reads each refund's order as it now stands and the open refund findings.
func loadRefundRows(ctx context.Context, store *postgres.Store, review *postgres.Review, sb *sandbox.Sandbox, orders []demoOrder, refunds []demoRefund) ([]refundRow, error) {
	findings, err := review.List(ctx, reconcile.FindingFilter{
		Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewAcknowledged}, Limit: 1000})
	if err != nil {
		return nil, err
	}
	var rows []refundRow
	for _, r := range refunds {
		o := r.orderOf(orders)
		order, err := store.FindOrder(ctx, o.platform, o.merchant(sb), o.otn)
		if err != nil {
			return nil, err
		}
		row := refundRow{r: r, order: o, finding: "-"}
		if row.history, err = review.OrderHistory(ctx, order.ID); err != nil {
			return nil, err
		}
		row.platRef, _ = sb.RefundOf(o.platform, r.outRefundNo)
		for _, f := range findings {
			if f.OutRefundNo == r.outRefundNo {
				row.finding = fmt.Sprintf("%s #%d", f.Kind, f.ID)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// printRefunds is the refund step: each refund before and after, who landed it, where its
// order stands, its finding, and the line finance reads.
func printRefunds(ctx context.Context, w io.Writer, store *postgres.Store, sb *sandbox.Sandbox, orders []demoOrder, refunds []demoRefund, before map[string]string) error {
	rows, err := loadRefundRows(ctx, store, postgres.NewReview(store.DB()), sb, orders, refunds)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\n11. refunds: the app records each refund it asks for; every outcome the platform reports lands once, whichever way it comes")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  order\trefund no\tamount\tplatform says\tbefore\tafter\tlanded by\tevents\torder now\tfinding")
	for _, row := range rows {
		after, amount := "-", reconcile.FormatYuan(row.platRef.AmountMinor)
		if l := row.local(); l != nil {
			after = l.Status
		}
		types, sources := row.events()
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.order.otn, row.r.outRefundNo, amount, row.platRef.Outcome,
			before[row.r.outRefundNo], after, dashIfNone(sources), dashIfNone(types), orderNow(row.history.Order), row.finding)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "   %s\n", refundSummary(rows))
	return nil
}

// orderNow is where a refunded order stands: its status, and what came back of a PAID one.
func orderNow(o reconcile.OrderState) string {
	if o.Status == string(reconcile.StatusPaid) && o.RefundedMinor > 0 && o.PaidAmountMinor != nil {
		return fmt.Sprintf("PAID, %s of %s back", reconcile.FormatYuan(o.RefundedMinor), reconcile.FormatYuan(*o.PaidAmountMinor))
	}
	return o.Status
}

// refundSummary is the refund story in one line for finance, counted from the database:
// refunds whose outcome the pass's query landed, orders still PAID with part of their money
// back, refunds the platform has and we do not (UNKNOWN_REFUND), refunds stuck ABNORMAL.
func refundSummary(rows []refundRow) string {
	var byRun, unknown, abnormal int
	var partial []string
	for _, row := range rows {
		if _, sources := row.events(); slices.Contains(sources, "run") {
			byRun++
		}
		if strings.HasPrefix(row.finding, string(reconcile.MismatchUnknownRefund)+" ") {
			unknown++
		}
		if l := row.local(); l != nil && l.Status == string(reconcile.RefundAbnormal) {
			abnormal++
		}
		if o := row.history.Order; o.Status == string(reconcile.StatusPaid) && o.RefundedMinor > 0 && o.PaidAmountMinor != nil &&
			o.RefundedMinor < *o.PaidAmountMinor {
			partial = append(partial, fmt.Sprintf("%s of %s yuan", reconcile.FormatYuan(o.RefundedMinor), reconcile.FormatYuan(*o.PaidAmountMinor)))
		}
	}
	return fmt.Sprintf("Refunds: %d repaired by run, %d partial (%s), %d unknown to us (portal), %d abnormal",
		byRun, len(partial), strings.Join(partial, "; "), unknown, abnormal)
}

func dashIfNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

// startRefunds is the refund half of step 4: the refunds made at the platforms (and, where
// the app recorded them, in our books), then the refund callbacks there are, sent through
// the callback endpoints before the pass. It returns each refund's local status
// before any callback or pass.
func startRefunds(ctx context.Context, w io.Writer, store *postgres.Store, sb *sandbox.Sandbox, orders []demoOrder, refunds []demoRefund, notifyURL string) (map[string]string, error) {
	if err := seedRefunds(ctx, store, sb, orders, refunds); err != nil {
		return nil, err
	}
	before, err := refundStatuses(ctx, store, sb, orders, refunds)
	if err != nil {
		return nil, err
	}
	recorded := 0
	for _, r := range refunds {
		if r.recorded {
			recorded++
		}
	}
	sent, acked, err := refundCallbacks(ctx, sb, orders, refunds, notifyURL)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "   and %d refunds at the platforms, %d of them recorded by the merchant's app (PROCESSING), %d made in the merchant portal;\n"+
		"   refund callbacks: %d sent to /notify/{platform}, %d acknowledged; none for the other %d (one lost, one the app never asked for)\n\n",
		len(refunds), recorded, len(refunds)-recorded, sent, acked, len(refunds)-sent)
	return before, nil
}
