package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestControlAPI(t *testing.T) {
	sb, base := newSandbox(t)
	ctx := context.Background()
	ac := alipayHarness.newClient(t, sb, base, clientOpts{maxRetries: -1})
	wc := wechatHarness.newClient(t, sb, base, clientOpts{maxRetries: -1})

	code, body := call(t, "GET", base+"/sandbox/", "")
	if code != 200 || !strings.Contains(body, sb.Keys().WechatPublicKeyID) || strings.Contains(body, "PRIVATE") || strings.Contains(body, string(sb.Keys().WechatAPIv3Key)) {
		t.Fatalf("info %d %s", code, body)
	}

	code, body = call(t, "PUT", base+"/sandbox/scenarios/alipay/C1", `{"state":"paid","amount_minor":8880,"trade_no":"2024T1","paid_at":"2024-03-01T10:20:30+08:00"}`)
	if code != 204 {
		t.Fatalf("put scenario %d %s", code, body)
	}
	res, err := ac.Query(ctx, "C1")
	if err != nil || res.State != reconcile.StatePaid || res.AmountMinor != 8880 || res.PlatformTradeNo != "2024T1" || !res.PaidAt.Equal(paidAt) {
		t.Fatalf("after PUT: %+v, %v", res, err)
	}
	code, body = call(t, "GET", base+"/sandbox/scenarios/alipay/C1", "")
	if code != 200 || !strings.Contains(body, `"state": "paid"`) {
		t.Fatalf("get scenario %d %s", code, body)
	}

	code, body = call(t, "POST", base+"/sandbox/scenarios", `[{"platform":"wechatpay","out_trade_no":"W1","state":"open","amount_minor":100},{"platform":"wechatpay","out_trade_no":"W2","state":"refunded","amount_minor":100}]`)
	if code != 200 {
		t.Fatalf("bulk %d %s", code, body)
	}
	if res, err := wc.Query(ctx, "W2"); err != nil || res.State != reconcile.StateRefunded {
		t.Fatalf("bulk W2: %+v, %v", res, err)
	}

	if code, _ := call(t, "PUT", base+"/sandbox/faults/wechatpay", `{"http_status":502}`); code != 204 {
		t.Fatal("put fault")
	}
	if _, err := wc.Query(ctx, "W1"); reconcile.PlatformErrorKindOf(err) != reconcile.KindRetryable {
		t.Fatalf("with a 502 fault: %v", err)
	}
	call(t, "DELETE", base+"/sandbox/faults/wechatpay", "")
	if res, err := wc.Query(ctx, "W1"); err != nil || res.State != reconcile.StateOpen {
		t.Fatalf("fault cleared: %+v, %v", res, err)
	}

	code, body = call(t, "GET", base+"/sandbox/counts", "")
	var counts map[string]struct {
		Queries int `json:"queries"`
		Orders  map[string]struct {
			Queries int `json:"queries"`
		} `json:"orders"`
	}
	if err := json.Unmarshal([]byte(body), &counts); err != nil || code != 200 {
		t.Fatalf("counts %d %s", code, body)
	}
	if counts["wechatpay"].Orders["W1"].Queries != 2 || counts["wechatpay"].Queries != 3 || counts["alipay"].Orders["C1"].Queries != 1 {
		t.Fatalf("counts %s", body)
	}
	code, body = call(t, "GET", base+"/sandbox/counts/alipay/C1", "")
	if code != 200 || !strings.Contains(body, `"queries": 1`) || !strings.Contains(body, res.RawDigest) {
		t.Fatalf("order counts %d %s (digest %s)", code, body, res.RawDigest)
	}

	if code, _ := call(t, "PUT", base+"/sandbox/qps/alipay", `{"qps":1}`); code != 204 {
		t.Fatal("put qps")
	}
	_, _ = ac.Query(ctx, "C1")
	if _, err := ac.Query(ctx, "C1"); reconcile.PlatformErrorKindOf(err) != reconcile.KindRateLimited {
		t.Fatalf("over the cap: %v", err)
	}

	rc, rurl := newReceiver(t, sb)
	code, body = call(t, "POST", base+"/sandbox/callbacks", `{"url":"`+rurl+`/notify/alipay","copies":2,"wait":true,"callbacks":[{"platform":"alipay","out_trade_no":"C1"}]}`)
	if code != 200 || strings.Count(body, `"acked": true`) != 2 {
		t.Fatalf("callbacks %d %s", code, body)
	}
	if results, _, _ := rc.snapshot(); len(results) != 2 || results[0].AmountMinor != 8880 {
		t.Fatalf("receiver got %+v", results)
	}

	if code, _ := call(t, "POST", base+"/sandbox/reset", ""); code != 204 {
		t.Fatal("reset")
	}
	if sb.PlatformQueryCount(reconcile.Alipay) != 0 || sb.Scenario(reconcile.Alipay, "C1").State != "not_found" {
		t.Fatal("reset kept state")
	}

	for _, bad := range []struct{ method, path, body string }{
		{"PUT", "/sandbox/scenarios/paypal/X", `{"state":"paid"}`},
		{"PUT", "/sandbox/scenarios/alipay/X", `{"state":"lost"}`},
		{"PUT", "/sandbox/scenarios/alipay/X", `{"state":"paid","surprise":1}`},
		{"POST", "/sandbox/callbacks", `{"url":"` + rurl + `","callbacks":[{"platform":"alipay","out_trade_no":"nobody"}]}`},
		{"PUT", "/sandbox/faults/alipay", `{"latency":"soon"}`},
	} {
		code, body := call(t, bad.method, base+bad.path, bad.body)
		if code != 400 || !json.Valid([]byte(body)) || !bytes.Contains([]byte(body), []byte(`"error"`)) {
			t.Errorf("%s %s %s: %d %s", bad.method, bad.path, bad.body, code, body)
		}
	}
}

// The gateway takes the common parameters from the query string too, as the official SDKs
// send them, with only biz_content in the form.
func TestAlipayGatewayAcceptsQueryStringParameters(t *testing.T) {
	sb, base := newSandbox(t)
	sb.SetScenario(reconcile.Alipay, "QS", sandboxPaid(4200))
	p := url.Values{"app_id": {sb.Identity().AlipayAppID}, "method": {"alipay.trade.query"}, "format": {"JSON"}, "charset": {"utf-8"},
		"sign_type": {"RSA2"}, "timestamp": {time.Now().In(platformclient.ChinaTime).Format(platformclient.ChinaTimeLayout)},
		"version": {"1.0"}, "biz_content": {`{"out_trade_no":"QS"}`}}
	if err := alipay.SignRequest(sb.Keys().AlipayAppKey, p); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"biz_content": p["biz_content"]}
	p.Del("biz_content")
	resp, err := http.Post(base+"/gateway.do?"+p.Encode(), "application/x-www-form-urlencoded;charset=utf-8", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	env, err := alipay.ExtractResponse(raw, "alipay.trade.query")
	if err != nil {
		t.Fatal(err)
	}
	if err := alipay.VerifyNode(&sb.Keys().AlipayPlatformKey.PublicKey, env.Node, env.Sign); err != nil {
		t.Fatalf("answer does not verify: %v", err)
	}
	if !bytes.Contains(env.Node, []byte(`"code":"10000"`)) || !bytes.Contains(env.Node, []byte(`"total_amount":"42.00"`)) {
		t.Fatalf("answer %s", raw)
	}
}

func sandboxPaid(fen int64) sandbox.Scenario {
	return sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: fen, PaidAt: paidAt}
}
