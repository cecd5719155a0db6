package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/sandbox"
	"github.com/payrecon/payrecon/worker"
)

// serveFixture is serve's HTTP surface in-process, wired exactly as the binary wires it, over
// a private database and Redis prefix, with the sandbox's keys.
type serveFixture struct {
	t    *testing.T
	app  *worker.App
	srv  *httptest.Server
	keys *sandbox.Keys
	id   sandbox.Identity
	db   *repotest.DB
}

func newServeFixture(t *testing.T) *serveFixture {
	t.Helper()
	keys := e2eKeys(t)
	sb, err := sandbox.New(sandbox.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	files, err := sb.WriteKeyFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db, rd := repotest.NewDB(t), repotest.NewRedis(t)
	env := map[string]string{"RECONCILER_DATABASE_URL": db.URL, "RECONCILER_REDIS_URL": rd.URL,
		"RECONCILER_CLAIM_PREFIX": rd.Prefix, "RECONCILER_NOTIFY_WAIT": "200ms"}
	for _, kv := range sb.Env("http://127.0.0.1:1", files) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	a, err := worker.New(context.Background(), loadSettings(t, serveGroups, env), zerolog.Nop(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	srv := httptest.NewServer(a.CallbackMux())
	t.Cleanup(srv.Close)
	return &serveFixture{t: t, app: a, srv: srv, keys: keys, id: sb.Identity(), db: db}
}

// loadSettings is the configuration a command taking groups reads from env.
func loadSettings(t *testing.T, groups config.Group, env map[string]string) config.Config {
	t.Helper()
	fs := flag.NewFlagSet("settings-test", flag.ContinueOnError)
	loader := config.Register(fs, groups, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fs.Parse(nil) //nolint:errcheck
	cfg, err := loader.Load()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (f *serveFixture) order(p reconcile.Platform, merchant, otn string, amount int64) int64 {
	f.t.Helper()
	return repotest.InsertOrder(f.t, f.db, repotest.Order{Platform: string(p), MerchantID: merchant, OutTradeNo: otn, AmountMinor: amount,
		Status: "PENDING", CreatedAgo: 5 * time.Minute})
}

func (f *serveFixture) post(path, contentType string, body []byte, h http.Header) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", contentType)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// alipayNotify is a trade_status_sync form signed by signer (the Alipay platform key for a
// genuine one).
func (f *serveFixture) alipayNotify(otn, tradeNo, amount string, sign bool, wrongKey bool) []byte {
	v := url.Values{"notify_time": {"2026-11-29 12:00:00"}, "notify_type": {"trade_status_sync"}, "notify_id": {"n-" + otn},
		"app_id": {f.id.AlipayAppID}, "charset": {"utf-8"}, "version": {"1.0"}, "sign_type": {"RSA2"},
		"trade_no": {tradeNo}, "out_trade_no": {otn}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {amount},
		"receipt_amount": {amount}, "seller_id": {f.id.AlipaySellerID}, "gmt_payment": {"2026-11-29 11:59:58"}}
	if sign {
		key := f.keys.AlipayPlatformKey
		if wrongKey {
			key = f.keys.AlipayAppKey
		}
		if err := alipay.SignNotify(key, v); err != nil {
			f.t.Fatal(err)
		}
	}
	return []byte(v.Encode())
}

// wechatNotify is an encrypted TRANSACTION.SUCCESS callback with its signature headers.
func (f *serveFixture) wechatNotify(otn, txID string, total int64, wrongKey, garbleCiphertext bool) ([]byte, http.Header) {
	tx, _ := json.Marshal(wechatpay.Transaction{AppID: f.id.WechatAppID, MchID: f.id.WechatMchID, OutTradeNo: otn,
		TransactionID: txID, TradeType: "JSAPI", TradeState: "SUCCESS", SuccessTime: "2026-11-29T11:59:58+08:00",
		Amount: &wechatpay.Amount{Total: &total, Currency: "CNY"}})
	nonce, ad := "0123456789ab", "transaction"
	ct, err := wechatpay.EncryptResource(f.keys.WechatAPIv3Key, ad, nonce, tx)
	if err != nil {
		f.t.Fatal(err)
	}
	if garbleCiphertext {
		ct = base64.StdEncoding.EncodeToString([]byte("not what was encrypted, not at all"))
	}
	body, _ := json.Marshal(wechatpay.Notification{ID: "EV-" + otn, CreateTime: "2026-11-29T12:00:00+08:00",
		ResourceType: "encrypt-resource", EventType: "TRANSACTION.SUCCESS", Summary: "支付成功",
		Resource: wechatpay.Resource{OriginalType: "transaction", Algorithm: wechatpay.AlgorithmAESGCM, Ciphertext: ct, AssociatedData: ad, Nonce: nonce}})
	h := http.Header{}
	key := f.keys.WechatPlatformKey
	if wrongKey {
		key = f.keys.WechatMerchantKey
	}
	if err := wechatpay.SignResponse(h, key, f.keys.WechatPublicKeyID, time.Now(), body); err != nil {
		f.t.Fatal(err)
	}
	return body, h
}

func (f *serveFixture) state(id int64) (status string, events, outbox int) {
	f.t.Helper()
	f.db.QueryRow(`SELECT status, (SELECT count(*) FROM payment_events WHERE order_id = $1),
		(SELECT count(*) FROM fulfillment_outbox WHERE order_id = $1) FROM payment_orders WHERE id = $1`, id).Scan(&status, &events, &outbox) //nolint:errcheck
	return
}

const formType = "application/x-www-form-urlencoded; charset=utf-8"

func TestAlipayCallbackAnswers(t *testing.T) {
	t.Parallel()
	f := newServeFixture(t)
	id := f.order(reconcile.Alipay, f.id.AlipayAppID, "CA-1", 8880)
	cases := []struct {
		name       string
		body       []byte
		wantBody   string
		wantStatus string
	}{
		{"unsigned", f.alipayNotify("CA-1", "T-CA-1", "88.80", false, false), "fail", "PENDING"},
		{"signed by another key", f.alipayNotify("CA-1", "T-CA-1", "88.80", true, true), "fail", "PENDING"},
		{"malformed form", []byte("%zz=%%%"), "fail", "PENDING"},
		{"amount over two decimals", f.alipayNotify("CA-1", "T-CA-1", "88.801", true, false), "fail", "PENDING"},
		{"genuine", f.alipayNotify("CA-1", "T-CA-1", "88.80", true, false), "success", "PAID"},
		{"genuine repeat", f.alipayNotify("CA-1", "T-CA-1", "88.80", true, false), "success", "PAID"},
	}
	for _, tc := range cases {
		code, body := f.post("/notify/alipay", formType, tc.body, nil)
		if code != http.StatusOK || body != tc.wantBody {
			t.Fatalf("%s: %d %q, want 200 %q (exactly, no newline)", tc.name, code, body, tc.wantBody)
		}
		if st, ev, ob := f.state(id); st != tc.wantStatus || (st == "PAID" && (ev != 1 || ob != 1)) {
			t.Fatalf("%s: order %s with %d events, %d outbox rows", tc.name, st, ev, ob)
		}
	}
	// A wrong amount is a durable finding: acknowledged, recorded, not applied.
	id2 := f.order(reconcile.Alipay, f.id.AlipayAppID, "CA-2", 8880)
	if _, body := f.post("/notify/alipay", formType, f.alipayNotify("CA-2", "T-CA-2", "0.01", true, false), nil); body != "success" {
		t.Fatalf("wrong amount: %q, want success (retrying would not change it)", body)
	}
	var kind string
	f.db.Get(&kind, `SELECT kind FROM reconcile_mismatches WHERE out_trade_no = 'CA-2'`) //nolint:errcheck
	if st, _, _ := f.state(id2); st != "PENDING" || kind != "AMOUNT_MISMATCH" {
		t.Fatalf("wrong amount: order %s, finding %q", st, kind)
	}
}

func TestWechatPayCallbackAnswers(t *testing.T) {
	t.Parallel()
	f := newServeFixture(t)
	id := f.order(reconcile.WechatPay, f.id.WechatMchID, "CW-1", 4900)
	type call struct {
		name     string
		body     []byte
		h        http.Header
		wantCode int
		status   string
	}
	body, h := f.wechatNotify("CW-1", "TX-1", 4900, false, false)
	badSig, badSigH := f.wechatNotify("CW-1", "TX-1", 4900, true, false)
	garbled, garbledH := f.wechatNotify("CW-1", "TX-1", 4900, false, true)
	tampered := []byte(strings.Replace(string(body), "TRANSACTION.SUCCESS", "TRANSACTION.SUCCESZ", 1))
	cases := []call{
		{"no signature headers", body, nil, http.StatusUnauthorized, "PENDING"},
		{"signed by another key", badSig, badSigH, http.StatusUnauthorized, "PENDING"},
		{"body changed after signing", tampered, h, http.StatusUnauthorized, "PENDING"},
		{"signed but undecryptable", garbled, garbledH, http.StatusBadRequest, "PENDING"},
		{"genuine", body, h, http.StatusNoContent, "PAID"},
		{"genuine repeat", body, h, http.StatusNoContent, "PAID"},
	}
	for _, tc := range cases {
		code, resp := f.post("/notify/wechatpay", "application/json", tc.body, tc.h)
		if code != tc.wantCode {
			t.Fatalf("%s: %d %s, want %d", tc.name, code, resp, tc.wantCode)
		}
		if code != http.StatusNoContent {
			var e struct{ Code, Message string }
			if json.Unmarshal([]byte(resp), &e) != nil || e.Code != "FAIL" || e.Message == "" {
				t.Fatalf("%s: body %q, want {\"code\":\"FAIL\",\"message\":...}", tc.name, resp)
			}
		} else if resp != "" {
			t.Fatalf("%s: 204 with a body %q", tc.name, resp)
		}
		if st, ev, ob := f.state(id); st != tc.status || (st == "PAID" && (ev != 1 || ob != 1)) {
			t.Fatalf("%s: order %s with %d events, %d outbox rows", tc.name, st, ev, ob)
		}
	}
}

func TestCallbacksRefusedWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	f := newServeFixture(t)
	f.order(reconcile.Alipay, f.id.AlipayAppID, "DB-1", 100)
	f.order(reconcile.WechatPay, f.id.WechatMchID, "DB-2", 100)
	aliBody := f.alipayNotify("DB-1", "T-DB-1", "1.00", true, false)
	wxBody, wxH := f.wechatNotify("DB-2", "TX-DB-2", 100, false, false)
	f.app.Store().DB().Close() // the database is gone for this process

	if _, body := f.post("/notify/alipay", formType, aliBody, nil); body != "fail" {
		t.Fatalf("alipay with the database down: %q, want fail (the platform retries)", body)
	}
	code, body := f.post("/notify/wechatpay", "application/json", wxBody, wxH)
	if code != http.StatusInternalServerError || !strings.Contains(body, `"FAIL"`) {
		t.Fatalf("wechat with the database down: %d %s, want 500 FAIL", code, body)
	}
	resp, err := http.Get(f.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the database down: %d", resp.StatusCode)
	}
	// Nothing was applied behind the refusals.
	var n int
	if err := f.db.Get(&n, `SELECT count(*) FROM payment_orders WHERE status <> 'PENDING'`); err != nil || n != 0 {
		t.Fatalf("%d orders changed (%v)", n, err)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	f := newServeFixture(t)
	f.post("/notify/alipay", formType, []byte("sign=bogus"), nil)
	// Metrics are on the admin port; the callback port has the probes only.
	admin := httptest.NewServer(f.app.AdminMux())
	defer admin.Close()
	if resp, err := http.Get(f.srv.URL + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the callback port: %v %v, want 404", resp, err)
	}
	for url, want := range map[string]string{
		f.srv.URL + "/healthz": "ok",
		f.srv.URL + "/readyz":  "ready",
		admin.URL + "/healthz": "ok",
		admin.URL + "/readyz":  "ready",
		admin.URL + "/metrics": `payrecon_callbacks_total{platform="alipay",result="refused_signature"} 1`,
	} {
		path := url
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
}

// TestReviewConsoleOnlyOnTheConsolePort: serve's ports answer 404 for /review/ whoever asks (the
// callback pods hold no reviewer's credential); the console's port, wired as `reconciler
// console` wires it, serves the console (401 without a person, 403 for one on neither list,
// the page for a listed reviewer named by a loopback peer) beside /metrics and the probes.
func TestReviewConsoleOnlyOnTheConsolePort(t *testing.T) {
	t.Parallel()
	f := newServeFixture(t)
	admin := httptest.NewServer(f.app.AdminMux())
	defer admin.Close()
	cfg := loadSettings(t, consoleGroups, map[string]string{"RECONCILER_DATABASE_URL": f.db.URL, "RECONCILER_REVIEWERS": "ann@example.com"})
	c, err := worker.OpenConsole(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cons := httptest.NewServer(c.Handler())
	defer cons.Close()
	get := func(url, who string) (int, string) { return getAs(t, url, who) }
	for _, c := range []struct {
		url, who string
		want     int
		body     string
	}{
		{admin.URL + "/review/", "ann@example.com", http.StatusNotFound, ""},
		{f.srv.URL + "/review/", "ann@example.com", http.StatusNotFound, ""},
		{cons.URL + "/review/", "", http.StatusUnauthorized, ""},
		{cons.URL + "/review/", "eve@example.com", http.StatusForbidden, ""},
		{cons.URL + "/review/", "ann@example.com", http.StatusOK, "ann@example.com"},
		{cons.URL + "/metrics", "", http.StatusOK, "go_goroutines"},
		{cons.URL + "/readyz", "", http.StatusOK, "ready"},
		{cons.URL + "/notify/alipay", "", http.StatusNotFound, ""},
	} {
		if code, body := get(c.url, c.who); code != c.want || !strings.Contains(body, c.body) {
			t.Errorf("GET %s as %q: %d, want %d with %q\n%s", c.url, c.who, code, c.want, c.body, body)
		}
	}
	// The console exports no worker instrument: its zeros would sit beside serve's figures.
	if _, body := get(cons.URL+"/metrics", ""); strings.Contains(body, "payrecon_") {
		t.Errorf("the console's /metrics exports worker instruments")
	}
}
