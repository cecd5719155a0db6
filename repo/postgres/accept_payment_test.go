package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// acceptWorld is an order, the apply path and the review over one test database.
type acceptWorld struct {
	db      *repotest.DB
	applier *reconcile.Applier
	rv      *postgres.Review
	orderID int64
}

func newAcceptWorld(t *testing.T, otn string, amount int64, status string) acceptWorld {
	t.Helper()
	db := repotest.NewDB(t)
	w := acceptWorld{db: db, rv: postgres.NewReview(db.DB),
		applier: reconcile.NewApplier(postgres.NewStore(db.DB), nil, reconcile.ApplierSettings{}, zerolog.Nop())}
	w.orderID = insertOrder(t, db, "alipay", "2021000000000001", otn, amount, status)
	return w
}

// pay feeds a paid result for the order through the apply path.
func (w acceptWorld) pay(t *testing.T, otn, tradeNo string, amount int64) reconcile.Applied {
	t.Helper()
	a, err := w.applier.ApplyResult(context.Background(), reconcile.Result{Platform: reconcile.Alipay,
		MerchantID: "2021000000000001", OutTradeNo: otn, PlatformTradeNo: tradeNo, State: reconcile.StatePaid,
		RawState: "TRADE_SUCCESS", AmountMinor: amount, PaidAt: reviewBase.Add(90 * time.Minute),
		Source: reconcile.SourceReconcile}, reconcile.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (w acceptWorld) finding(t *testing.T, otn string, kind reconcile.MismatchKind) reconcile.Finding {
	t.Helper()
	var id int64
	if err := w.db.Get(&id, `SELECT id FROM reconcile_mismatches WHERE out_trade_no = $1 AND kind = $2`, otn, string(kind)); err != nil {
		t.Fatalf("the %s finding of %s: %v", kind, otn, err)
	}
	f, err := w.rv.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// books is what the order's books say: its row, its PAID events by source, its outbox rows.
type books struct {
	Status, TradeNo     string
	Paid                int64
	PaidAt              *time.Time
	PaidEvents, Reviews int
	Outbox              []json.RawMessage
}

func (w acceptWorld) books(t *testing.T) books {
	t.Helper()
	var b books
	err := w.db.QueryRow(`SELECT status, COALESCE(platform_trade_no, ''), COALESCE(paid_amount_minor, 0), paid_at,
		(SELECT count(*) FROM payment_events WHERE order_id = o.id AND event_type = 'PAID'),
		(SELECT count(*) FROM payment_events WHERE order_id = o.id AND event_type = 'PAID' AND source = 'review')
		FROM payment_orders o WHERE id = $1`, w.orderID).Scan(&b.Status, &b.TradeNo, &b.Paid, &b.PaidAt, &b.PaidEvents, &b.Reviews)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.db.Select(&b.Outbox, `SELECT payload FROM fulfillment_outbox WHERE order_id = $1 AND kind = 'order.paid'`, w.orderID); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAcceptPaymentTakesALatePaymentInOnce: a payment the platform took after we closed the
// order is, once finance proposes accept_payment and a second person approves it, the
// order's payment: PAID with one event of source review and one fulfilment row, however many
// approvers race, and its repeats afterwards are the order's own payment, not new findings.
func TestAcceptPaymentTakesALatePaymentInOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newAcceptWorld(t, "late-1", 8800, "CLOSED")
	if a := w.pay(t, "late-1", "2026112822001400000000000001", 8800); a.Mismatch != reconcile.MismatchPaidAfterClose {
		t.Fatalf("a payment of a closed order: %+v, want PAID_AFTER_CLOSE", a)
	}
	f := w.finding(t, "late-1", reconcile.MismatchPaidAfterClose)

	if _, err := w.rv.Resolve(ctx, f.ID, reconcile.ReviewInput{By: "ann@example.com", Resolution: reconcile.ResolutionAcceptPayment,
		Version: f.EvidenceVersion}); err != nil {
		t.Fatal(err)
	}
	if b := w.books(t); b.Status != "CLOSED" || b.PaidEvents != 0 || len(b.Outbox) != 0 {
		t.Fatalf("a proposal alone changed the books: %+v", b)
	}

	const approvers = 24
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, approvers)
	for i := range approvers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = w.rv.Approve(ctx, f.ID, reconcile.ReviewInput{By: fmt.Sprintf("approver-%02d@example.com", i)})
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, reconcile.ErrIllegalReview):
			t.Errorf("approver %d: %v, want success or the finding already RESOLVED", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d approvals succeeded, want exactly one", won)
	}

	b := w.books(t)
	if b.Status != "PAID" || b.TradeNo != "2026112822001400000000000001" || b.Paid != 8800 || b.PaidEvents != 1 || b.Reviews != 1 || len(b.Outbox) != 1 {
		t.Fatalf("after the approval: %+v, want PAID by the trade with one review event and one outbox row", b)
	}
	if b.PaidAt == nil || !b.PaidAt.Equal(reviewBase.Add(90*time.Minute)) {
		t.Errorf("paid_at %v, want the platform's paid time %v", b.PaidAt, reviewBase.Add(90*time.Minute))
	}
	var payload map[string]any
	if err := json.Unmarshal(b.Outbox[0], &payload); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"order_id": float64(w.orderID), "platform": "alipay", "merchant_id": "2021000000000001",
		"out_trade_no": "late-1", "platform_trade_no": "2026112822001400000000000001", "amount_minor": float64(8800),
		"currency": "CNY", "source": "review", "paid_at": "2026-11-27T17:30:00Z", "finding_id": float64(f.ID)}
	for k, v := range want {
		if payload[k] != v {
			t.Errorf("outbox payload %s = %v, want %v (payload %v)", k, payload[k], v, payload)
		}
	}

	// The platform's repeats of the payment are the order's own now.
	if a := w.pay(t, "late-1", "2026112822001400000000000001", 8800); a.Outcome != reconcile.OutcomeUnchanged {
		t.Errorf("the payment seen again: %+v, want unchanged", a)
	}
	if f := w.finding(t, "late-1", reconcile.MismatchPaidAfterClose); f.ReviewStatus != reconcile.ReviewResolved ||
		f.Resolution != string(reconcile.ResolutionAcceptPayment) || f.ApprovedBy == "" {
		t.Errorf("the finding after the repeat: %+v, want it RESOLVED as accept_payment", f)
	}
}

// TestAcceptPaymentOfAnotherAmount: the merchant keeps a payment of another amount. The
// order is paid what the platform took; the payment seen again does not reopen the
// settled finding; a second approval after a reopen takes nothing in twice.
func TestAcceptPaymentOfAnotherAmount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newAcceptWorld(t, "short-1", 10000, "PENDING")
	if a := w.pay(t, "short-1", "2026112822001400000000000002", 9900); a.Mismatch != reconcile.MismatchAmount {
		t.Fatalf("a short payment: %+v, want AMOUNT_MISMATCH", a)
	}
	f := w.finding(t, "short-1", reconcile.MismatchAmount)
	accept := func() {
		t.Helper()
		if _, err := w.rv.Resolve(ctx, f.ID, reconcile.ReviewInput{By: "ann@example.com", Resolution: "ACCEPT-PAYMENT",
			Note: "the buyer had a coupon we did not record"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.rv.Approve(ctx, f.ID, reconcile.ReviewInput{By: "bob@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	accept()
	if b := w.books(t); b.Status != "PAID" || b.Paid != 9900 || b.Reviews != 1 || len(b.Outbox) != 1 {
		t.Fatalf("after accepting 99.00 of 100.00: %+v", b)
	}
	if a := w.pay(t, "short-1", "2026112822001400000000000002", 9900); a.Outcome != reconcile.OutcomeUnchanged {
		t.Errorf("the accepted payment seen again: %+v, want unchanged", a)
	}
	if got := w.finding(t, "short-1", reconcile.MismatchAmount); got.ReviewStatus != reconcile.ReviewResolved || got.SeenCount != 1 {
		t.Fatalf("the finding after the repeat: %+v, want it RESOLVED and not sighted again", got)
	}

	// New evidence reopens it (the platform now reports another state); accepting again
	// is allowed, and the order, already paid by this trade, is left as it is.
	w.db.MustExec(`UPDATE reconcile_mismatches SET platform_status = 'TRADE_FINISHED' WHERE id = $1`, f.ID)
	if got := w.finding(t, "short-1", reconcile.MismatchAmount); got.ReviewStatus != reconcile.ReviewOpen {
		t.Fatalf("after new evidence: %s, want OPEN", got.ReviewStatus)
	}
	accept()
	if b := w.books(t); b.PaidEvents != 1 || b.Reviews != 1 || len(b.Outbox) != 1 {
		t.Fatalf("a second acceptance wrote again: %+v", b)
	}
}

// TestAcceptPaymentRefusals: accept_payment settles only a payment that fits, in the domain
// and in the database (a reviewer calling the function directly), and an approval that
// would pay an order twice is refused whole: nothing moves, the proposal still waits.
func TestAcceptPaymentRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newAcceptWorld(t, "twice-1", 5000, "CLOSED")
	setupRoles(t, w.db)
	reviewer := onePool(t, w.db, postgres.RoleReviewer)

	unknown := insertFinding(t, w.db, seedFinding{otn: "nobody-1", kind: reconcile.MismatchUnknownOrder, plat: 100, ptn: "T-unknown"})
	if _, err := w.rv.Resolve(ctx, unknown, reconcile.ReviewInput{By: "ann@example.com", Resolution: reconcile.ResolutionAcceptPayment}); !errors.Is(err, reconcile.ErrBadReview) {
		t.Errorf("accept_payment of an UNKNOWN_ORDER: %v, want a refusal", err)
	}
	var audit int64
	err := reviewer.Get(&audit, `SELECT payrecon_review_resolve($1, 'ann@example.com', '', 0, 'accept_payment', '')`, unknown)
	if sqlState(err) != "PR004" {
		t.Errorf("the database asked to accept an UNKNOWN_ORDER: %v, want PR004", err)
	}
	refund := insertFinding(t, w.db, seedFinding{otn: "refund-1", kind: reconcile.MismatchAmount, local: 100, plat: 90, ptn: "T-refund"})
	w.db.MustExec(`UPDATE reconcile_mismatches SET out_refund_no = 'R-1' WHERE id = $1`, refund)
	err = reviewer.Get(&audit, `SELECT payrecon_review_resolve($1, 'ann@example.com', '', 0, 'accept_payment', '')`, refund)
	if sqlState(err) != "PR004" {
		t.Errorf("the database asked to accept a refund's AMOUNT_MISMATCH: %v, want PR004", err)
	}

	// The closed order was paid after all by another trade before the approval.
	w.pay(t, "twice-1", "T-first", 5000)
	f := w.finding(t, "twice-1", reconcile.MismatchPaidAfterClose)
	if _, err := w.rv.Resolve(ctx, f.ID, reconcile.ReviewInput{By: "ann@example.com", Resolution: reconcile.ResolutionAcceptPayment}); err != nil {
		t.Fatal(err)
	}
	w.db.MustExec(`UPDATE payment_orders SET status = 'PAID', platform_trade_no = 'T-other', paid_amount_minor = 5000 WHERE id = $1`, w.orderID)
	if _, err := w.rv.Approve(ctx, f.ID, reconcile.ReviewInput{By: "bob@example.com"}); !errors.Is(err, reconcile.ErrIllegalReview) {
		t.Fatalf("approving a payment of an order paid by another trade: %v, want a refusal", err)
	}
	if b := w.books(t); b.TradeNo != "T-other" || b.Reviews != 0 || len(b.Outbox) != 0 {
		t.Errorf("the refused approval moved the books: %+v", b)
	}
	if got := w.finding(t, "twice-1", reconcile.MismatchPaidAfterClose); got.ReviewStatus != reconcile.ReviewPendingApproval {
		t.Errorf("after the refused approval the finding is %s, want PENDING_APPROVAL", got.ReviewStatus)
	}
}
