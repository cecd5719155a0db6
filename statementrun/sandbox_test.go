package statementrun

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
	"github.com/payrecon/payrecon/statement"
)

var (
	sandboxKeysOnce sync.Once
	sandboxKeys     *sandbox.Keys
	sandboxKeysErr  error
)

// keysForSandbox are the sandbox keys the statement tests share (RSA keys are slow to make).
func keysForSandbox(t testing.TB) *sandbox.Keys {
	t.Helper()
	sandboxKeysOnce.Do(func() { sandboxKeys, sandboxKeysErr = sandbox.GenerateKeys(2048) })
	if sandboxKeysErr != nil {
		t.Fatal(sandboxKeysErr)
	}
	return sandboxKeys
}

// sandboxNow is the morning after testDay, once both platforms have published its bill.
var sandboxNow = testDay.End.Add(11 * time.Hour)

// newSandboxAccount starts the sandbox with a day of trades on platform p and returns the
// account's bill client: E-MISSED paid (its callback and query both failed here, so it is
// PENDING locally), E-PAID paid and already PAID locally, E-UNKNOWN paid but not ours.
func newSandboxAccount(t *testing.T, e *env, p reconcile.Platform) (*sandbox.Sandbox, reconcile.AccountKey, BillDownloader) {
	t.Helper()
	sb, err := sandbox.New(sandbox.Options{Keys: keysForSandbox(t), Now: func() time.Time { return sandboxNow }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(func() { sb.Close(); srv.Close() })
	at := testDay.Start.Add(10 * time.Hour)
	for _, no := range []string{"E-MISSED", "E-PAID", "E-UNKNOWN"} {
		sb.SetScenario(p, no, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 880, PaidAt: at})
	}
	var client BillDownloader
	var merchant string
	tuning := platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}
	if p == reconcile.Alipay {
		cfg := sb.AlipayConfig(srv.URL)
		cfg.Now, cfg.Tuning, merchant = func() time.Time { return sandboxNow }, tuning, sb.Identity().AlipayAppID
		c, err := alipay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		client = c
	} else {
		cfg := sb.WechatPayConfig(srv.URL)
		cfg.Now, cfg.Tuning, merchant = func() time.Time { return sandboxNow }, tuning, sb.Identity().WechatMchID
		c, err := wechatpay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		client = c
	}
	e.insert(order{platform: p, merchant: merchant, outTradeNo: "E-MISSED", amount: 880, status: reconcile.StatusPending})
	e.insert(order{platform: p, merchant: merchant, outTradeNo: "E-PAID", amount: 880, status: reconcile.StatusPaid,
		tradeNo: sb.Scenario(p, "E-PAID").TradeNo, paidAt: at})
	return sb, reconcile.AccountKey{Platform: p, MerchantID: merchant}, client
}

// TestStatementFromThePlatform downloads each platform's bill from the sandbox: the repair
// only the bill could find, the unknown payment, the day's figures; then the spoiled bills
// (not ready, wrong hash, totals that disagree, a cut file) apply nothing.
func TestStatementFromThePlatform(t *testing.T) {
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			sb, key, client := newSandboxAccount(t, e, p)
			acct := Account{Key: key, Source: PlatformSource{Platform: p, Merchant: key.MerchantID, Client: client, Keep: t.TempDir()}}
			spec := Spec{Day: testDay, Accounts: []Account{acct}}

			for _, sp := range []sandbox.BillSpoil{{NotReady: true}, {SkewTotalsMinor: 1}, {Truncate: true}, {WrongHash: p == reconcile.WechatPay}} {
				if sp == (sandbox.BillSpoil{}) {
					continue
				}
				sb.SetBillSpoil(p, key.MerchantID, sp)
				before := e.snapshot()
				_, err := e.runner.Run(context.Background(), spec)
				wantNotReady := sp.NotReady
				if wantNotReady != errors.Is(err, platformclient.ErrBillNotReady) || !wantNotReady && !errors.Is(err, statement.ErrRejected) {
					t.Fatalf("spoil %+v: error %v", sp, err)
				}
				after := e.snapshot()
				before.Runs++
				if before != after {
					t.Errorf("spoil %+v changed something:\nbefore %+v\nafter  %+v", sp, before, after)
				}
			}
			sb.SetBillSpoil(p, key.MerchantID, sandbox.BillSpoil{})

			res, err := e.runner.Run(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if f := e.findings(p); len(f) != 1 || f["E-UNKNOWN"] != string(reconcile.MismatchUnknownOrder) {
				t.Errorf("findings %v; want E-UNKNOWN UNKNOWN_ORDER only", f)
			}
			var status string
			e.db.DB.Get(&status, `SELECT status FROM payment_orders WHERE out_trade_no = 'E-MISSED'`) //nolint:errcheck // compared below
			d := res.Days[0].Figures
			if status != "PAID" || d.Lines != 3 || d.Matched != 1 || d.Repaired != 1 || d.Found != 1 || d.PaymentsMinor != 3*880 ||
				d.FeeMilliFen != 3*880*6 || d.BillLocation == "" || len(d.BillSHA256) != 64 {
				t.Errorf("E-MISSED %s, figures %+v", status, d)
			}
		})
	}
}

// TestStatementRefundsFromThePlatform: the sandbox's bill lists the refunds the platform
// really made, under their own numbers: a refund our books still have PROCESSING is repaired
// from it, a refund made in the merchant portal is UNKNOWN_REFUND, and a WeChat Pay refund the
// bill gives as PROCESSING moves nothing.
func TestStatementRefundsFromThePlatform(t *testing.T) {
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			sb, key, client := newSandboxAccount(t, e, p)
			made := testDay.Start.Add(12 * time.Hour)
			for _, r := range []sandbox.RefundSpec{
				{OutTradeNo: "E-PAID", OutRefundNo: "E-RF-LOST", AmountMinor: 300, CreatedAt: made},
				{OutTradeNo: "E-PAID", OutRefundNo: "E-RF-PORTAL", AmountMinor: 100, CreatedAt: made},
				{OutTradeNo: "E-PAID", OutRefundNo: "E-RF-WAIT", AmountMinor: 50, CreatedAt: made, Outcome: sandbox.RefundProcessing},
			} {
				r.Platform = p
				if _, err := sb.AddRefund(r); err != nil {
					t.Fatal(err)
				}
			}
			var orderID int64
			e.db.DB.Get(&orderID, `SELECT id FROM payment_orders WHERE out_trade_no = 'E-PAID'`) //nolint:errcheck // the inserts fail without it
			e.insertRefund(refund{orderID: orderID, outRefundNo: "E-RF-LOST", amount: 300, status: reconcile.RefundProcessing})
			e.insertRefund(refund{orderID: orderID, outRefundNo: "E-RF-WAIT", amount: 50, status: reconcile.RefundProcessing})
			acct := Account{Key: key, Source: PlatformSource{Platform: p, Merchant: key.MerchantID, Client: client}}
			res, err := e.runner.Run(context.Background(), Spec{Day: testDay, Accounts: []Account{acct}})
			if err != nil {
				t.Fatal(err)
			}
			var got string
			e.db.DB.Get(&got, `SELECT string_agg(out_refund_no || ' ' || status, ', ' ORDER BY out_refund_no) FROM payment_refunds`) //nolint:errcheck // compared below
			if want := "E-RF-LOST SUCCESS, E-RF-WAIT PROCESSING"; got != want {
				t.Errorf("refunds after the bill: %q, want %q", got, want)
			}
			if f := e.refundFindings(p); len(f) != 1 || f["E-RF-PORTAL"] != string(reconcile.MismatchUnknownRefund) {
				t.Errorf("refund findings %v; want E-RF-PORTAL UNKNOWN_REFUND only", f)
			}
			refundLines := int64(2) // Alipay lists finished refunds only
			if p == reconcile.WechatPay {
				refundLines = 3
			}
			if d := res.Days[0].Figures; d.Refunds != refundLines || d.RefundsRepaired != 1 || d.RefundsUnknown != 1 {
				t.Errorf("figures %+v: want %d refund lines, 1 repaired, 1 unknown", d, refundLines)
			}
		})
	}
}
