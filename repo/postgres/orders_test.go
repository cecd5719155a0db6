package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

func TestInsertOrderAndOrderTrails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := postgres.NewStore(repotest.NewDB(t).DB)
	created := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	pending := reconcile.Order{Platform: reconcile.Alipay, MerchantID: "m1", OutTradeNo: "P-1", AmountMinor: 1234,
		Status: reconcile.StatusPending, CreatedAt: created}
	paid := reconcile.Order{Platform: reconcile.WechatPay, MerchantID: "m2", OutTradeNo: "D-1", AmountMinor: 500,
		Status: reconcile.StatusPaid, PlatformTradeNo: "T-9", PaidAmountMinor: 500, CreatedAt: created}
	for _, o := range []reconcile.Order{pending, paid} {
		if _, err := s.InsertOrder(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.FindOrder(ctx, pending.Platform, pending.MerchantID, pending.OutTradeNo)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != reconcile.StatusPending || got.AmountMinor != 1234 || got.Currency != "CNY" || got.PlatformTradeNo != "" ||
		got.PaidAmountMinor != 0 || !got.CreatedAt.Equal(created) {
		t.Errorf("pending order read back as %+v", got)
	}
	got, err = s.FindOrder(ctx, paid.Platform, paid.MerchantID, paid.OutTradeNo)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != reconcile.StatusPaid || got.PlatformTradeNo != "T-9" || got.PaidAmountMinor != 500 {
		t.Errorf("paid order read back as %+v", got)
	}
	if _, err := s.InsertOrder(ctx, pending); err == nil {
		t.Error("a second order with the same identity was accepted")
	}

	trails, err := s.OrderTrails(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]postgres.OrderTrail{
		"P-1": {OutTradeNo: "P-1", Status: "PENDING"},
		"D-1": {OutTradeNo: "D-1", Status: "PAID"},
	}
	if len(trails) != len(want) || trails["P-1"] != want["P-1"] || trails["D-1"] != want["D-1"] {
		t.Errorf("OrderTrails = %+v, want %+v", trails, want)
	}
}
