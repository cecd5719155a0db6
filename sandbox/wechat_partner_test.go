package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

const (
	spMchID = "1900009109"
	subMchA = "1900009201"
	subMchB = "1900009202"
)

// TestWechatPartnerMode: a service provider's client, through the partner APIs for a
// sub-merchant, sees that sub-merchant's orders and no other's, closes one, reads its refund
// and gets its bill; the sub-merchant's callbacks come sealed and signed as the provider's,
// naming sp_mchid and sub_mchid.
func TestWechatPartnerMode(t *testing.T) {
	sp, err := sandbox.GenerateWechatAccount(spMchID, "wx9999999999999991", sandbox.WechatModePublicKey, 1024)
	if err != nil {
		t.Fatal(err)
	}
	sp.SubMerchants = []string{subMchA, subMchB}
	sb, url := serveSandbox(t, sandbox.Options{Accounts: sandbox.Accounts{WechatPay: []sandbox.WechatAccount{sp}}})
	cfg, err := sb.WechatAccountConfig(spMchID, url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxRetries = -1
	provider, err := wechatpay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	forA, _ := provider.ForSubMerchant(subMchA, "", nil)
	forB, _ := provider.ForSubMerchant(subMchB, "", nil)
	ctx := context.Background()
	paidAt := time.Now().Add(-time.Hour).Truncate(time.Second)
	sb.SetScenario(reconcile.WechatPay, "SUB-WA-1", sandbox.Scenario{MerchantID: subMchA, State: sandbox.StatePaid, AmountMinor: 3100, PaidAt: paidAt})
	sb.SetScenario(reconcile.WechatPay, "SUB-WA-2", sandbox.Scenario{MerchantID: subMchA, State: sandbox.StateOpen, AmountMinor: 500})

	if res, err := forA.Query(ctx, "SUB-WA-1"); err != nil || res.State != reconcile.StatePaid || res.MerchantID != subMchA || res.AmountMinor != 3100 {
		t.Fatalf("sub-merchant A's paid order: %+v, %v", res, err)
	}
	if res, err := forB.Query(ctx, "SUB-WA-1"); err != nil || res.State != reconcile.StateNotFound {
		t.Errorf("sub-merchant B asking for A's order: %+v, %v; want not found", res, err)
	}
	if res, err := provider.Query(ctx, "SUB-WA-1"); err != nil || res.State != reconcile.StateNotFound {
		t.Errorf("the provider's own query of A's order: %+v, %v; want not found", res, err)
	}
	if err := forA.Close(ctx, "SUB-WA-2"); err != nil {
		t.Fatal(err)
	}
	if sc := sb.Scenario(reconcile.WechatPay, "SUB-WA-2"); sc.State != sandbox.StateClosed {
		t.Errorf("after the partner close the order is %s", sc.State)
	}
	if a := sb.AccountQueryCount(reconcile.WechatPay, subMchA); a != 1 {
		t.Errorf("%d queries counted as sub-merchant A, want 1", a)
	}
	stranger, _ := provider.ForSubMerchant("1900009999", "", nil)
	if _, err := stranger.Query(ctx, "SUB-WA-1"); err == nil {
		t.Error("a sub-merchant the provider was never granted: answered")
	}

	// The callback: sealed and signed as the provider's, naming the sub-merchant.
	header, body := deliverOne(t, sb, sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "SUB-WA-1"})
	provider.AcceptSubMerchants(map[string]bool{subMchB: true})
	if _, err := provider.ParseNotify(header, body); !errors.Is(err, wechatpay.ErrBadSignature) {
		t.Errorf("read by a provider that does not accept the sub-merchant: %v, want refused", err)
	}
	provider.AcceptSubMerchants(map[string]bool{subMchA: true})
	if n, err := provider.ParseNotify(header, body); err != nil || n.Payment == nil || n.Payment.MerchantID != subMchA {
		t.Fatalf("the sub-merchant's callback: %+v, %v", n, err)
	}

	entries, err := sb.WriteWechatAccountFiles(t.TempDir(), url)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e["sp_mchid"] == spMchID {
			subs, _ := e["sub_merchants"].([]map[string]any)
			found = len(subs) == 2 && subs[1]["sub_mchid"] == subMchB && e["mchid"] == nil
		}
	}
	if !found {
		t.Errorf("the accounts-file entries %v do not name the provider by sp_mchid with its sub-merchants", entries)
	}

	sb.PublishBillsEarly(true)
	info, err := forA.DownloadBill(ctx, paidAt, t.TempDir())
	if err != nil || info.MerchantID != subMchA || info.Path == "" {
		t.Fatalf("sub-merchant A's bill: %+v, %v", info, err)
	}
}
