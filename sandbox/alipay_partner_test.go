package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

const (
	isvAppID = "2021000122609009"
	subA     = "2021000122609101"
	subB     = "2021000122609102"
)

// newPartnerSandbox plays a third-party app (a service provider's) with two sub-merchants,
// and returns the provider's client for it.
func newPartnerSandbox(t *testing.T) (*sandbox.Sandbox, string, *alipay.Client) {
	t.Helper()
	isv, err := sandbox.GenerateAlipayAccount(isvAppID, "2088621000009009", false, 1024)
	if err != nil {
		t.Fatal(err)
	}
	isv.SubMerchants = []string{subA, subB}
	sb, url := serveSandbox(t, sandbox.Options{Accounts: sandbox.Accounts{Alipay: []sandbox.AlipayAccount{isv}}})
	cfg, err := sb.AlipayAccountConfig(isvAppID, url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxRetries = -1
	c, err := alipay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sb, url, c
}

// TestAlipayPartnerMode: the provider's client, calling for a sub-merchant with its
// app_auth_token, sees that merchant's trades and no other's; a token the app was never
// granted is refused by the gateway; the trade's notification comes from the provider's
// app naming the merchant in auth_app_id, signed so that the provider's client reads it;
// the bill is the sub-merchant's own.
func TestAlipayPartnerMode(t *testing.T) {
	sb, _, isv := newPartnerSandbox(t)
	ctx := context.Background()
	paidAt := time.Now().Add(-time.Hour).Truncate(time.Second)
	sb.SetScenario(reconcile.Alipay, "SUB-A-1", sandbox.Scenario{MerchantID: subA, State: sandbox.StatePaid, AmountMinor: 4200, PaidAt: paidAt})

	forA, err := isv.ForSubMerchant(subA, sandbox.AlipayAppAuthToken(isvAppID, subA), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := forA.Query(ctx, "SUB-A-1")
	if err != nil || res.State != reconcile.StatePaid || res.MerchantID != subA || res.AmountMinor != 4200 {
		t.Fatalf("sub-merchant A's own trade: %+v, %v", res, err)
	}
	forB, err := isv.ForSubMerchant(subB, sandbox.AlipayAppAuthToken(isvAppID, subB), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := forB.Query(ctx, "SUB-A-1"); err != nil || res.State != reconcile.StateNotFound {
		t.Errorf("sub-merchant B asking for A's trade: %+v, %v; want not found", res, err)
	}
	if res, err := isv.Query(ctx, "SUB-A-1"); err != nil || res.State != reconcile.StateNotFound {
		t.Errorf("the provider asking for itself: %+v, %v; want not found", res, err)
	}
	forged, err := isv.ForSubMerchant(subA, sandbox.AlipayAppAuthToken(isvAppID, "2021000122609999"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := forged.Query(ctx, "SUB-A-1"); err == nil || reconcile.PlatformErrorKindOf(err) == reconcile.KindRetryable {
		t.Errorf("a token never granted: %v, want the gateway's refusal", err)
	}
	// A call is counted (and capped) as the merchant a valid token names; a forged token's
	// is the provider's own.
	if a, p := sb.AccountQueryCount(reconcile.Alipay, subA), sb.AccountQueryCount(reconcile.Alipay, isvAppID); a != 1 || p != 2 {
		t.Errorf("queries counted: sub-merchant A %d, provider %d; want 1 and 2", a, p)
	}

	// The notification: app_id the provider's, auth_app_id the merchant's.
	_, body := deliverOne(t, sb, sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "SUB-A-1"})
	isv.AcceptSubMerchants(map[string]bool{subB: true})
	if _, err := isv.ParseNotify(body); !errors.Is(err, alipay.ErrBadSignature) {
		t.Errorf("read by a provider that does not accept the merchant: %v, want refused", err)
	}
	isv.AcceptSubMerchants(map[string]bool{subA: true})
	n, err := isv.ParseNotify(body)
	if err != nil || n.Payment == nil || n.Payment.MerchantID != subA || !bytes.Contains(body, []byte("app_id="+isvAppID)) {
		t.Fatalf("the sub-merchant's notification: %+v, %v\n%s", n, err, body)
	}

	// The accounts file's entry lists the sub-merchants with their tokens' files.
	entries, err := sb.WriteAlipayAccountFiles(t.TempDir(), "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var subs []map[string]any
	for _, e := range entries {
		if e["app_id"] == isvAppID {
			subs, _ = e["sub_merchants"].([]map[string]any)
		}
	}
	if len(subs) != 2 || subs[0]["auth_app_id"] != subA {
		t.Fatalf("the provider's accounts-file entry lists %v", subs)
	}
	if b, err := os.ReadFile(subs[0]["app_auth_token_file"].(string)); err != nil ||
		strings.TrimSpace(string(b)) != sandbox.AlipayAppAuthToken(isvAppID, subA) {
		t.Fatalf("sub-merchant A's token file: %q, %v", b, err)
	}

	// The bill asked with A's token lists A's trade.
	sb.PublishBillsEarly(true)
	info, err := forA.DownloadBill(ctx, paidAt, t.TempDir())
	if err != nil || info.MerchantID != subA || info.Path == "" {
		t.Fatalf("sub-merchant A's bill: %+v, %v", info, err)
	}
}
