package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestReviewDetailsShowRefunds: a refund finding names its refund (out_refund_no) in Get,
// List and Search; Details of it returns the order's refunded amount, its refunds oldest
// first and its events, each refund's event naming its refund. OrderHistory reads the same
// for an order without any finding, and a missing order is ErrNotFound.
func TestReviewDetailsShowRefunds(t *testing.T) {
	db := repotest.NewDB(t)
	ctx := context.Background()
	st := postgres.NewStore(db.DB)
	orderID, err := st.InsertOrder(ctx, reconcile.Order{Platform: reconcile.WechatPay, MerchantID: "1900000001", OutTradeNo: "ORD-R1",
		AmountMinor: 10000, Status: reconcile.StatusPaid, PlatformTradeNo: "4200000001", PaidAmountMinor: 10000, CreatedAt: reviewBase})
	must(t, err)
	first, err := st.InsertRefund(ctx, postgres.NewRefund{OrderID: orderID, OutRefundNo: "RF-1", AmountMinor: 3000, CreatedAt: reviewBase.Add(time.Minute)})
	must(t, err)
	_, err = st.InsertRefund(ctx, postgres.NewRefund{OrderID: orderID, OutRefundNo: "RF-2", AmountMinor: 2000, CreatedAt: reviewBase.Add(2 * time.Minute)})
	must(t, err)
	mv, err := st.ApplyRefundTransition(ctx, reconcile.RefundTransition{RefundID: first, OrderID: orderID, To: reconcile.RefundSuccess,
		Platform: reconcile.WechatPay, PlatformTradeNo: "4200000001", PlatformRefundNo: "503000001", AmountMinor: 3000,
		SucceededAt: reviewBase.Add(3 * time.Minute), Source: reconcile.SourceNotify,
		Outbox: &reconcile.OutboxMessage{Kind: reconcile.OutboxKindRefundSucceeded, Payload: map[string]any{"refund_id": first}}})
	if err != nil || !mv.Changed {
		t.Fatalf("land RF-1: %+v %v", mv, err)
	}
	must(t, st.RecordMismatch(ctx, reconcile.Mismatch{OrderID: orderID, Platform: reconcile.WechatPay, MerchantID: "1900000001",
		OutTradeNo: "ORD-R1", PlatformTradeNo: "4200000001", OutRefundNo: "PORTAL-9", Kind: reconcile.MismatchUnknownRefund,
		PlatformAmountMinor: 1200, PlatformStatus: "SUCCESS"}))

	rv := postgres.NewReview(db.DB)
	list, err := rv.List(ctx, reconcile.FindingFilter{})
	if err != nil || len(list) != 1 || list[0].OutRefundNo != "PORTAL-9" {
		t.Fatalf("List: %+v %v, want the finding of refund PORTAL-9", list, err)
	}
	found, err := rv.Search(ctx, reconcile.FindingFilter{Limit: 10})
	if err != nil || len(found.Findings) != 1 || found.Findings[0].OutRefundNo != "PORTAL-9" {
		t.Fatalf("Search: %+v %v, want the finding of refund PORTAL-9", found.Findings, err)
	}
	d, err := rv.Details(ctx, list[0].ID)
	must(t, err)
	if d.Finding.OutRefundNo != "PORTAL-9" || d.Order == nil || d.Order.RefundedMinor != 3000 || d.Order.Status != "PAID" {
		t.Fatalf("Details: finding %q, order %+v: want PORTAL-9 on a PAID order with 30.00 back", d.Finding.OutRefundNo, d.Order)
	}
	if len(d.Refunds) != 2 || d.Refunds[0].OutRefundNo != "RF-1" || d.Refunds[0].Status != "SUCCESS" || d.Refunds[0].PlatformRefundNo != "503000001" ||
		d.Refunds[0].SucceededAt == nil || !d.Refunds[0].SucceededAt.Equal(reviewBase.Add(3*time.Minute)) || d.Refunds[0].AmountMinor != 3000 ||
		d.Refunds[0].Currency != "CNY" || d.Refunds[1].OutRefundNo != "RF-2" || d.Refunds[1].Status != "PROCESSING" ||
		d.Refunds[1].PlatformRefundNo != "" || d.Refunds[1].SucceededAt != nil {
		t.Errorf("Details refunds %+v", d.Refunds)
	}
	if len(d.Events) != 1 || d.Events[0].EventType != "REFUND_SUCCESS" || d.Events[0].OutRefundNo != "RF-1" ||
		d.Events[0].RefundID == nil || *d.Events[0].RefundID != first {
		t.Errorf("Details events %+v: want RF-1's REFUND_SUCCESS naming it", d.Events)
	}
	h, err := rv.OrderHistory(ctx, orderID)
	if err != nil || h.Order.OutTradeNo != "ORD-R1" || len(h.Refunds) != 2 || len(h.Events) != 1 {
		t.Errorf("OrderHistory: %+v %v", h, err)
	}
	if _, err := rv.OrderHistory(ctx, orderID+1000); !errors.Is(err, reconcile.ErrNotFound) {
		t.Errorf("OrderHistory of no order: %v, want ErrNotFound", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
