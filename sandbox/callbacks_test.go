package sandbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// receiver is a callback endpoint built on the real parsers: it acknowledges only what
// verifies, and can be told to refuse the first deliveries.
type receiver struct {
	t       *testing.T
	sb      *sandbox.Sandbox
	wechat  *wechatpay.NotifyVerifier
	mu      sync.Mutex
	refuse  int // deliveries to refuse before acknowledging
	ack     string
	results []reconcile.Result
	refunds []reconcile.RefundResult
	ignored []string
	bodies  [][]byte
	rejects int
}

func newReceiver(t *testing.T, sb *sandbox.Sandbox) (*receiver, string) {
	nv, err := wechatpay.NewNotifyVerifier(&sb.Keys().WechatPlatformKey.PublicKey, sb.Keys().WechatPublicKeyID, sb.Keys().WechatAPIv3Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, sb: sb, wechat: nv, ack: alipay.NotifySuccess}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notify/alipay", rc.serveAlipay)
	mux.HandleFunc("POST /notify/wechatpay", rc.serveWechat)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

func (rc *receiver) serveAlipay(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n, err := alipay.ParseNotify(body, &rc.sb.Keys().AlipayPlatformKey.PublicKey)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.rejects++
		_, _ = io.WriteString(w, "fail")
		return
	}
	if rc.refuse > 0 {
		rc.refuse--
		_, _ = io.WriteString(w, "fail")
		return
	}
	rc.keep(n, body)
	_, _ = io.WriteString(w, rc.ack)
}

// keep records an acknowledged notification (rc.mu held).
func (rc *receiver) keep(n reconcile.Notification, body []byte) {
	switch {
	case n.Payment != nil:
		rc.results = append(rc.results, *n.Payment)
		rc.bodies = append(rc.bodies, body)
	case n.Refund != nil:
		rc.refunds = append(rc.refunds, *n.Refund)
	default:
		rc.ignored = append(rc.ignored, n.Ignored)
	}
}

func (rc *receiver) serveWechat(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n, err := rc.wechat.ParseNotify(r.Header, body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.rejects++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if rc.refuse > 0 {
		rc.refuse--
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"code":"FAIL","message":"busy"}`)
		return
	}
	rc.keep(n, body)
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) snapshot() ([]reconcile.Result, [][]byte, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]reconcile.Result(nil), rc.results...), append([][]byte(nil), rc.bodies...), rc.rejects
}

func waitDelivery(t *testing.T, d *sandbox.Delivery) []sandbox.DeliveryResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := d.Wait(ctx)
	if err != nil {
		t.Fatalf("delivery did not finish: %v", err)
	}
	return res
}

func TestCallbacksDuplicatesShuffledAllVerify(t *testing.T) {
	sb, _ := newSandbox(t)
	rc, url := newReceiver(t, sb)
	for i, no := range []string{"A1", "A2", "A3"} {
		sb.SetScenario(reconcile.Alipay, no, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: int64(100 * (i + 1)), PaidAt: paidAt})
	}
	for _, no := range []string{"W1", "W2"} {
		sb.SetScenario(reconcile.WechatPay, no, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 990, PaidAt: paidAt})
	}
	da, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url + "/notify/alipay", Copies: 2, Shuffle: true},
		sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "A1"}, sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "A2"},
		sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "A3"})
	if err != nil {
		t.Fatal(err)
	}
	dw, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url + "/notify/wechatpay", Copies: 2},
		sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "W1"}, sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "W2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(waitDelivery(t, da), waitDelivery(t, dw)...) {
		if !r.Acked || r.Attempts != 1 {
			t.Errorf("%+v: want acknowledged at the first attempt", r)
		}
	}
	results, bodies, rejects := rc.snapshot()
	if len(results) != 10 || rejects != 0 {
		t.Fatalf("%d results, %d rejected; want 10 verified deliveries (5 callbacks x 2 copies)", len(results), rejects)
	}
	seen := map[string]int{}
	for i, res := range results {
		seen[res.OutTradeNo]++
		if res.Source != reconcile.SourceNotify || res.State != reconcile.StatePaid || res.RawDigest != platformclient.Digest(bodies[i]) {
			t.Errorf("result %+v", res)
		}
		if !res.PaidAt.Equal(paidAt) {
			t.Errorf("%s: PaidAt %v", res.OutTradeNo, res.PaidAt)
		}
		switch res.Platform {
		case reconcile.Alipay:
			want := map[string]int64{"A1": 100, "A2": 200, "A3": 300}[res.OutTradeNo]
			if res.AmountMinor != want || res.MerchantID != sb.Identity().AlipayAppID || res.SellerID != sb.Identity().AlipaySellerID {
				t.Errorf("alipay result %+v", res)
			}
		case reconcile.WechatPay:
			if res.AmountMinor != 990 || res.MerchantID != sb.Identity().WechatMchID || res.SellerID != sb.Identity().WechatAppID || res.Currency != "CNY" {
				t.Errorf("wechat result %+v", res)
			}
		}
	}
	for _, no := range []string{"A1", "A2", "A3", "W1", "W2"} {
		if seen[no] != 2 {
			t.Errorf("%s delivered %d times, want 2 (duplicates)", no, seen[no])
		}
	}
}

func TestCallbacksRetryOnScheduleUntilAcknowledged(t *testing.T) {
	sb, _ := newSandbox(t)
	rc, url := newReceiver(t, sb)
	sb.SetScenario(reconcile.WechatPay, "W", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})
	sb.SetScenario(reconcile.Alipay, "A", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})

	rc.refuse = 2
	start := time.Now()
	d, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url + "/notify/wechatpay", TimeScale: 1000},
		sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "W"})
	if err != nil {
		t.Fatal(err)
	}
	r := waitDelivery(t, d)
	// WeChat waits 15 s and 15 s: 30 ms at a thousandth.
	if len(r) != 1 || !r[0].Acked || r[0].Attempts != 3 || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("wechat: %+v after %s; want acked at attempt 3, after at least 30ms", r, time.Since(start))
	}

	rc.refuse = 2
	start = time.Now()
	d, err = sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url + "/notify/alipay", TimeScale: 10000},
		sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "A"})
	if err != nil {
		t.Fatal(err)
	}
	r = waitDelivery(t, d)
	// Alipay waits 4 min then 10 min: 84 ms at a ten-thousandth.
	if len(r) != 1 || !r[0].Acked || r[0].Attempts != 3 || time.Since(start) < 84*time.Millisecond {
		t.Fatalf("alipay: %+v after %s; want acked at attempt 3, after at least 84ms", r, time.Since(start))
	}
}

func TestCallbacksAlipayNeedsExactlySuccess(t *testing.T) {
	sb, _ := newSandbox(t)
	rc, url := newReceiver(t, sb)
	rc.ack = "success\n"
	sb.SetScenario(reconcile.Alipay, "A", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})
	d, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url + "/notify/alipay", TimeScale: 100000, MaxAttempts: 3},
		sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "A"})
	if err != nil {
		t.Fatal(err)
	}
	r := waitDelivery(t, d)
	if r[0].Acked || r[0].Attempts != 3 || r[0].LastStatus != 200 {
		t.Fatalf("%+v: \"success\\n\" is not an acknowledgement", r[0])
	}
}

func TestCallbacksOutOfOrderStateOverride(t *testing.T) {
	sb, _ := newSandbox(t)
	rc, url := newReceiver(t, sb)
	// Refunded at Alipay (TRADE_CLOSED); a late TRADE_SUCCESS arrives after the close.
	sb.SetScenario(reconcile.Alipay, "OOO", sandbox.Scenario{State: sandbox.StateRefunded, AmountMinor: 500, PaidAt: paidAt})
	d, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url + "/notify/alipay", Stagger: sandbox.Duration(20 * time.Millisecond)},
		sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "OOO"},
		sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "OOO", RawState: alipay.StatusTradeSuccess})
	if err != nil {
		t.Fatal(err)
	}
	waitDelivery(t, d)
	results, _, _ := rc.snapshot()
	if len(results) != 2 || results[0].State != reconcile.StateClosed || results[1].State != reconcile.StatePaid {
		t.Fatalf("got %+v; want CLOSED then a late PAID", results)
	}
}

func TestCallbacksRefusals(t *testing.T) {
	sb, _ := newSandbox(t)
	if _, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: "http://127.0.0.1:1/x"},
		sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "unknown"}); err == nil {
		t.Fatal("a callback for an order the platform never saw was built")
	}
	if _, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{}); err == nil {
		t.Fatal("a delivery without url was accepted")
	}
	// Close stops a delivery that would otherwise retry for a day.
	rc, url := newReceiver(t, sb)
	rc.refuse = 1 << 30
	sb.SetScenario(reconcile.WechatPay, "W", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})
	d, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url + "/notify/wechatpay"},
		sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "W"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	sb.Close()
	r := waitDelivery(t, d)
	if time.Since(start) > 5*time.Second || r[0].Acked || r[0].Attempts != 1 {
		t.Fatalf("%+v, close took %s", r, time.Since(start))
	}
}

// The WeChat callback envelope is the documented shape.
func TestWechatCallbackEnvelopeShape(t *testing.T) {
	sb, _ := newSandbox(t)
	var got struct {
		body   []byte
		header http.Header
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.body, _ = io.ReadAll(r.Body)
		got.header = r.Header.Clone()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	sb.SetScenario(reconcile.WechatPay, "W", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})
	d, _ := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: srv.URL}, sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "W"})
	waitDelivery(t, d)
	var n wechatpay.Notification
	if err := json.Unmarshal(got.body, &n); err != nil {
		t.Fatal(err)
	}
	if n.ResourceType != "encrypt-resource" || n.EventType != "TRANSACTION.SUCCESS" || n.Resource.Algorithm != "AEAD_AES_256_GCM" ||
		n.Resource.OriginalType != "transaction" || len(n.Resource.Nonce) != 12 || n.ID == "" {
		t.Fatalf("envelope %s", got.body)
	}
	if got.header.Get(wechatpay.HeaderSerial) != sb.Keys().WechatPublicKeyID || got.header.Get(wechatpay.HeaderSignature) == "" {
		t.Fatalf("headers %v", got.header)
	}
}
