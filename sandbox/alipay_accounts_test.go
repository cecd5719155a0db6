package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

const (
	certAppID    = "2021000122600101"
	certSellerID = "2088621000000101"
	pkAppID      = "2021000122600102"
	pkSellerID   = "2088621000000102"
)

var (
	acctOnce           sync.Once
	certAcct, pkAcct   sandbox.AlipayAccount
	acctErr            error
	defaultAlipayAppID = "2021000122600001" // Identity's default
)

// testAlipayAccounts generates one app per mode per test binary (1024-bit keys: these
// tests are about which key signs, not key strength).
func testAlipayAccounts(t testing.TB) (cert, pk sandbox.AlipayAccount) {
	t.Helper()
	acctOnce.Do(func() {
		if certAcct, acctErr = sandbox.GenerateAlipayAccount(certAppID, certSellerID, true, 1024); acctErr != nil {
			return
		}
		pkAcct, acctErr = sandbox.GenerateAlipayAccount(pkAppID, pkSellerID, false, 1024)
	})
	if acctErr != nil {
		t.Fatal(acctErr)
	}
	return certAcct, pkAcct
}

// newAccountsSandbox plays the default app plus one app in each mode.
func newAccountsSandbox(t testing.TB) (*sandbox.Sandbox, string) {
	t.Helper()
	cert, pk := testAlipayAccounts(t)
	return serveSandbox(t, sandbox.Options{Accounts: sandbox.Accounts{Alipay: []sandbox.AlipayAccount{cert, pk}}})
}

// formRecorder keeps the forms a client sent.
type formRecorder struct {
	mu    sync.Mutex
	forms []url.Values
	next  http.RoundTripper
}

func (fr *formRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	form, _ := url.ParseQuery(string(body))
	fr.mu.Lock()
	fr.forms = append(fr.forms, form)
	fr.mu.Unlock()
	return fr.next.RoundTrip(r)
}

func (fr *formRecorder) last() url.Values {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.forms[len(fr.forms)-1]
}

func accountClient(t *testing.T, sb *sandbox.Sandbox, base, appID string, mod func(*alipay.Config)) (*alipay.Client, *formRecorder) {
	t.Helper()
	cfg, err := sb.AlipayAccountConfig(appID, base)
	if err != nil {
		t.Fatal(err)
	}
	rec := &formRecorder{next: http.DefaultTransport}
	cfg.HTTPClient = &http.Client{Transport: rec, Timeout: 5 * time.Second}
	cfg.MaxRetries = -1
	cfg.Tuning = platformclient.Tuning{BreakerFailures: 1000, RateLimitRetries: -1}
	if mod != nil {
		mod(&cfg)
	}
	c, err := alipay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// TestAlipayAccountsQueryCloseAndCallbacks runs every app, each in its own mode, through a
// query, a close and a callback.
func TestAlipayAccountsQueryCloseAndCallbacks(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	ctx := context.Background()
	for _, tc := range []struct {
		appID, sellerID string
		certMode        bool
	}{{defaultAlipayAppID, sb.Identity().AlipaySellerID, false}, {pkAppID, pkSellerID, false}, {certAppID, certSellerID, true}} {
		t.Run(tc.appID, func(t *testing.T) {
			c, rec := accountClient(t, sb, base, tc.appID, nil)
			paid, open := "PAID-"+tc.appID, "OPEN-"+tc.appID
			sb.SetScenario(reconcile.Alipay, paid, sandbox.Scenario{MerchantID: tc.appID, State: sandbox.StatePaid, AmountMinor: 1234})
			sb.SetScenario(reconcile.Alipay, open, sandbox.Scenario{MerchantID: tc.appID, State: sandbox.StateOpen, AmountMinor: 500})

			res, err := c.Query(ctx, paid)
			if err != nil {
				t.Fatal(err)
			}
			if res.State != reconcile.StatePaid || res.AmountMinor != 1234 || res.MerchantID != tc.appID || res.RawDigest != sb.LastAnswerDigest(reconcile.Alipay, paid) {
				t.Fatalf("result %+v", res)
			}
			// Certificate mode sends both SNs, signed; public-key mode sends neither.
			sent := rec.last()
			if tc.certMode != (sent.Get("app_cert_sn") != "") || tc.certMode != (sent.Get("alipay_root_cert_sn") != "") {
				t.Fatalf("cert mode %v, sent app_cert_sn %q alipay_root_cert_sn %q", tc.certMode, sent.Get("app_cert_sn"), sent.Get("alipay_root_cert_sn"))
			}
			if !strings.Contains(alipay.SignContent(sent, "sign"), "app_cert_sn=") == tc.certMode {
				t.Fatal("app_cert_sn is not part of the signed content")
			}

			if err := c.Close(ctx, open); err != nil {
				t.Fatal(err)
			}
			if sb.Scenario(reconcile.Alipay, open).State != sandbox.StateClosed {
				t.Fatal("close did not close the trade")
			}
			if sb.AccountQueryCount(reconcile.Alipay, tc.appID) != 1 {
				t.Fatalf("queries counted for %s: %d", tc.appID, sb.AccountQueryCount(reconcile.Alipay, tc.appID))
			}

			// The callback comes as this app, signed with this app's Alipay key.
			got := make(chan reconcile.Result, 4)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				n, err := c.ParseNotify(body)
				if err != nil || n.Payment == nil {
					_, _ = io.WriteString(w, "fail")
					return
				}
				got <- *n.Payment
				_, _ = io.WriteString(w, alipay.NotifySuccess)
			}))
			defer srv.Close()
			d, err := sb.Deliver(ctx, sandbox.DeliveryOptions{URL: srv.URL, MaxAttempts: 1}, sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: paid})
			if err != nil {
				t.Fatal(err)
			}
			results, _ := d.Wait(ctx)
			if len(results) != 1 || !results[0].Acked {
				t.Fatalf("callback not acknowledged: %+v", results)
			}
			cb := <-got
			if cb.MerchantID != tc.appID || cb.SellerID != tc.sellerID || cb.AmountMinor != 1234 || cb.State != reconcile.StatePaid {
				t.Fatalf("callback result %+v", cb)
			}
		})
	}
}

func TestAlipayAccountsCannotSeeEachOthersTrades(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	ctx := context.Background()
	sb.SetScenario(reconcile.Alipay, "MINE", sandbox.Scenario{MerchantID: certAppID, State: sandbox.StateOpen, AmountMinor: 100})
	sb.SetScenario(reconcile.Alipay, "DEFAULTS", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 100})
	other, _ := accountClient(t, sb, base, pkAppID, nil)
	for _, no := range []string{"MINE", "DEFAULTS"} {
		res, err := other.Query(ctx, no)
		if err != nil || res.State != reconcile.StateNotFound {
			t.Fatalf("%s asked by another app: %+v, %v", no, res, err)
		}
	}
	tradeNo := sb.Scenario(reconcile.Alipay, "MINE").TradeNo
	if res, err := other.QueryByTradeNo(ctx, tradeNo); err != nil || res.State != reconcile.StateNotFound {
		t.Fatalf("by trade_no from another app: %+v, %v", res, err)
	}
	if err := other.Close(ctx, "MINE"); err != nil {
		t.Fatal(err)
	}
	if sb.Scenario(reconcile.Alipay, "MINE").State != sandbox.StateOpen {
		t.Fatal("another app closed the trade")
	}
}

// An answer signed with another app's Alipay key is a bad signature, never a Result, in
// either mode.
func TestAlipayAnswerSignedForAnotherAppIsBadSignature(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	cert, pk := testAlipayAccounts(t)
	ctx := context.Background()
	for _, no := range []string{"X-PK", "X-CERT"} {
		sb.SetScenario(reconcile.Alipay, no, sandbox.Scenario{MerchantID: map[string]string{"X-PK": pkAppID, "X-CERT": certAppID}[no], State: sandbox.StatePaid, AmountMinor: 1})
	}
	pkWrong, _ := accountClient(t, sb, base, pkAppID, func(c *alipay.Config) { c.AlipayPublicKey = &cert.PlatformKey.PublicKey })
	certWrong, _ := accountClient(t, sb, base, certAppID, func(c *alipay.Config) {
		// The right SN, another app's key under it.
		c.Cert.AlipayCerts[c.Cert.AlipayCertSN] = &pk.PlatformKey.PublicKey
	})
	for no, c := range map[string]*alipay.Client{"X-PK": pkWrong, "X-CERT": certWrong} {
		res, err := c.Query(ctx, no)
		wantKind(t, err, reconcile.KindBadSignature)
		wantNoResult(t, res)
		if !errors.Is(err, platformclient.ErrBadSignature) {
			t.Fatalf("%s: %v lacks ErrBadSignature", no, err)
		}
	}
}

func TestAlipayCertRotation(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	ctx := context.Background()
	sb.SetScenario(reconcile.Alipay, "R1", sandbox.Scenario{MerchantID: certAppID, State: sandbox.StatePaid, AmountMinor: 7})
	old, _ := accountClient(t, sb, base, certAppID, nil)
	if _, err := old.Query(ctx, "R1"); err != nil {
		t.Fatal(err)
	}
	before, _ := sb.AlipayAccount(certAppID)
	if err := sb.RotateAlipayCert(certAppID); err != nil {
		t.Fatal(err)
	}
	cfg, err := sb.AlipayAccountConfig(certAppID, base)
	if err != nil {
		t.Fatal(err)
	}
	newSN := cfg.Cert.AlipayCertSN
	after, _ := sb.AlipayAccount(certAppID)
	if after.PlatformKey.Equal(before.PlatformKey) || string(after.Cert.AlipayCertPEM) == string(before.Cert.AlipayCertPEM) {
		t.Fatal("rotation kept the key or the certificate")
	}

	res, err := old.Query(ctx, "R1")
	wantKind(t, err, reconcile.KindConfig)
	wantNoResult(t, res)
	if !strings.Contains(err.Error(), newSN) || !strings.Contains(err.Error(), "rotated") || !strings.Contains(err.Error(), "alipayCertPublicKey_RSA2.crt") {
		t.Fatalf("error does not name the new SN and say what to do: %v", err)
	}

	// A client given the new certificate works again.
	renewed, _ := accountClient(t, sb, base, certAppID, nil)
	if res, err := renewed.Query(ctx, "R1"); err != nil || res.State != reconcile.StatePaid {
		t.Fatalf("after re-download: %+v, %v", res, err)
	}
	// Notifications are signed with the new key: the old client refuses them as a bad
	// signature, the renewed one accepts them.
	oldErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, err := old.ParseNotify(body)
		oldErr <- err
		if _, err := renewed.ParseNotify(body); err != nil {
			_, _ = io.WriteString(w, "fail")
			return
		}
		_, _ = io.WriteString(w, alipay.NotifySuccess)
	}))
	defer srv.Close()
	d, err := sb.Deliver(ctx, sandbox.DeliveryOptions{URL: srv.URL, MaxAttempts: 1}, sandbox.Callback{Platform: reconcile.Alipay, OutTradeNo: "R1"})
	if err != nil {
		t.Fatal(err)
	}
	if results, _ := d.Wait(ctx); len(results) != 1 || !results[0].Acked {
		t.Fatalf("the renewed client refused the notification: %+v", results)
	}
	if err := <-oldErr; !errors.Is(err, alipay.ErrBadSignature) {
		t.Fatalf("the old client's verdict on a notification signed after rotation: %v", err)
	}

	if err := sb.RotateAlipayCert(pkAppID); err == nil {
		t.Fatal("rotated an app in public-key mode")
	}
	if err := sb.RotateAlipayCert("2021000000000000"); err == nil {
		t.Fatal("rotated an unknown app")
	}
}

// The gateway refuses a certificate-mode request whose SNs are missing or wrong, as Alipay
// does, and the client reads that as a configuration error naming the certificate files.
func TestAlipayGatewayChecksCertSNs(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	cert, _ := testAlipayAccounts(t)
	cfg, err := sb.AlipayAccountConfig(certAppID, base)
	if err != nil {
		t.Fatal(err)
	}
	sb.SetScenario(reconcile.Alipay, "SN-1", sandbox.Scenario{MerchantID: certAppID, State: sandbox.StatePaid, AmountMinor: 1})
	good := url.Values{"app_id": {certAppID}, "method": {alipay.MethodTradeQuery}, "format": {"JSON"}, "charset": {"utf-8"},
		"sign_type": {"RSA2"}, "timestamp": {"2024-03-01 10:20:30"}, "version": {"1.0"}, "biz_content": {`{"out_trade_no":"SN-1"}`},
		"app_cert_sn": {cfg.Cert.AppCertSN}, "alipay_root_cert_sn": {cfg.Cert.RootCertSN}}
	post := func(p url.Values) (code, sub string) {
		t.Helper()
		if err := alipay.SignRequest(cert.AppKey, p); err != nil {
			t.Fatal(err)
		}
		resp, err := http.PostForm(base+"/gateway.do", p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&body)
		var n struct {
			Code    string `json:"code"`
			SubCode string `json:"sub_code"`
		}
		_ = json.Unmarshal(body["alipay_trade_query_response"], &n)
		if _, ok := body["alipay_cert_sn"]; !ok {
			t.Fatalf("answer without alipay_cert_sn: %v", body)
		}
		return n.Code, n.SubCode
	}
	if code, _ := post(clone(good)); code != "10000" {
		t.Fatalf("a correct request: code %s", code)
	}
	for _, c := range []struct {
		name, param, value, sub string
	}{
		{"missing app_cert_sn", "app_cert_sn", "", "isv.app-cert-sn-invalid"},
		{"wrong app_cert_sn", "app_cert_sn", "0123456789abcdef0123456789abcdef", "isv.app-cert-sn-invalid"},
		{"missing alipay_root_cert_sn", "alipay_root_cert_sn", "", "isv.alipay-root-cert-sn-invalid"},
		{"wrong alipay_root_cert_sn", "alipay_root_cert_sn", "687b59193f3f462dd5336e5abf83c5d8_02941eef3187dddf3d3b83462e1dfcf6", "isv.alipay-root-cert-sn-invalid"},
	} {
		p := clone(good)
		p.Set(c.param, c.value)
		if code, sub := post(p); code != "40002" || sub != c.sub {
			t.Errorf("%s: %s/%s, want 40002/%s", c.name, code, sub, c.sub)
		}
	}

	// Through the client: a wrong SN is KindConfig naming the certificate settings.
	wrong, _ := accountClient(t, sb, base, certAppID, func(c *alipay.Config) { c.Cert.AppCertSN = "0123456789abcdef0123456789abcdef" })
	res, err := wrong.Query(context.Background(), "SN-1")
	wantKind(t, err, reconcile.KindConfig)
	wantNoResult(t, res)
	if !strings.Contains(err.Error(), alipay.SettingAppCert) {
		t.Fatalf("error does not name %s: %v", alipay.SettingAppCert, err)
	}
	// A public-key-mode client of a certificate-mode app sends no SNs: refused the same way.
	pkClient, _ := accountClient(t, sb, base, certAppID, func(c *alipay.Config) {
		c.AlipayPublicKey, c.Cert = &cert.PlatformKey.PublicKey, nil
	})
	_, err = pkClient.Query(context.Background(), "SN-1")
	wantKind(t, err, reconcile.KindConfig)
}

func clone(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Caps and faults set for one app hit that app only.
func TestAlipayPerAccountFaultsAndCaps(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	ctx := context.Background()
	for _, id := range []string{certAppID, pkAppID} {
		sb.SetScenario(reconcile.Alipay, "F-"+id, sandbox.Scenario{MerchantID: id, State: sandbox.StatePaid, AmountMinor: 1})
	}
	certC, _ := accountClient(t, sb, base, certAppID, nil)
	pkC, _ := accountClient(t, sb, base, pkAppID, nil)
	sb.SetAccountFault(reconcile.Alipay, certAppID, sandbox.Fault{ErrorCode: "ACQ.SYSTEM_ERROR"})
	_, err := certC.Query(ctx, "F-"+certAppID)
	wantKind(t, err, reconcile.KindRetryable)
	if _, err := pkC.Query(ctx, "F-"+pkAppID); err != nil {
		t.Fatalf("the other app suffered the fault: %v", err)
	}
	sb.SetAccountFault(reconcile.Alipay, certAppID, sandbox.Fault{})
	sb.SetAccountQPSCap(reconcile.Alipay, pkAppID, 1)
	var limited int
	for i := 0; i < 4; i++ {
		if _, err := pkC.Query(ctx, "F-"+pkAppID); kindOf(err) == reconcile.KindRateLimited {
			limited++
		}
		if _, err := certC.Query(ctx, "F-"+certAppID); err != nil {
			t.Fatalf("the uncapped app was throttled: %v", err)
		}
	}
	if limited == 0 {
		t.Fatal("the capped app was never throttled")
	}
}

func TestWriteAlipayAccountFiles(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	dir := t.TempDir()
	entries, err := sb.WriteAlipayAccountFiles(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[0]["app_id"] != defaultAlipayAppID {
		t.Fatalf("entries %v", entries)
	}
	read := func(e map[string]any, field string) []byte {
		t.Helper()
		path, _ := e[field].(string)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", field, err)
		}
		return b
	}
	for _, e := range entries {
		appID := e["app_id"].(string)
		if e["gateway"] != base+"/gateway.do" || e["seller_id"] == "" {
			t.Errorf("%s: entry %v", appID, e)
		}
		st, err := os.Stat(e["private_key_file"].(string))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: private key file mode %v (%v)", appID, st.Mode(), err)
		}
		key, err := platformclient.LoadPrivateKey(read(e, "private_key_file"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := sb.AlipayAccountConfig(appID, base)
		if err != nil {
			t.Fatal(err)
		}
		if !key.Equal(want.PrivateKey) {
			t.Errorf("%s: private key file holds another key", appID)
		}
		_, hasPub := e["public_key_file"]
		_, hasCert := e["app_cert_file"]
		if hasPub == hasCert || hasCert != (appID == certAppID) {
			t.Errorf("%s: entry mixes the modes: %v", appID, e)
		}
		if hasCert {
			m, err := alipay.NewCertMode(read(e, "app_cert_file"), read(e, "alipay_cert_file"), read(e, "alipay_root_cert_file"))
			if err != nil {
				t.Fatal(err)
			}
			if m.AppCertSN != want.Cert.AppCertSN || m.RootCertSN != want.Cert.RootCertSN || m.AlipayCertSN != want.Cert.AlipayCertSN {
				t.Errorf("%s: files give other SNs than the gateway expects", appID)
			}
			if strings.Count(m.RootCertSN, "_") != 0 {
				t.Errorf("root SN %s: the ECDSA root was not skipped", m.RootCertSN)
			}
		} else {
			pub, err := platformclient.LoadPublicKey(read(e, "public_key_file"))
			if err != nil || !pub.Equal(want.AlipayPublicKey) {
				t.Errorf("%s: public key file: %v", appID, err)
			}
		}
	}
}

func TestGenerateAlipayAccountChain(t *testing.T) {
	cert, pk := testAlipayAccounts(t)
	if pk.Cert != nil || cert.Cert == nil {
		t.Fatal("modes mixed up")
	}
	if n := strings.Count(string(cert.Cert.RootCertPEM), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("root chain holds %d certificates, want an RSA and an ECDSA root", n)
	}
	if n := strings.Count(string(cert.Cert.AlipayCertPEM), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("Alipay certificate file holds %d certificates, want it and its CA", n)
	}
	root, err := alipay.RootCertSN(cert.Cert.RootCertPEM)
	if err != nil || len(root) != 32 {
		t.Fatalf("root SN %q: %v", root, err)
	}
	for _, s := range []string{cert.String(), pk.String(), strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(cert.GoString(), "\n", ""), " ", ""))} {
		if strings.Contains(s, "PRIVATE") || strings.Contains(s, "BEGIN") {
			t.Fatalf("account string shows key material: %s", s)
		}
	}
	if _, err := sandbox.New(sandbox.Options{Keys: testKeys(t), Accounts: sandbox.Accounts{Alipay: []sandbox.AlipayAccount{pk, pk}}}); err == nil {
		t.Fatal("the same app twice was accepted")
	}
	broken := cert
	files := *cert.Cert
	files.AppCertPEM = files.CACertPEM // a certificate for another key
	broken.Cert = &files
	if _, err := sandbox.New(sandbox.Options{Keys: testKeys(t), Accounts: sandbox.Accounts{Alipay: []sandbox.AlipayAccount{broken}}}); err == nil {
		t.Fatal("an app certificate of another key was accepted")
	}
}
