package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// The extra WeChat Pay merchants the tests play, one per mode.
const (
	certMchID      = "1900000102"
	migratingMchID = "1900000103"
	pubKeyMchID    = "1900000104"
)

var (
	wechatAccountsOnce sync.Once
	wechatAccounts     []sandbox.WechatAccount
	wechatAccountsErr  error
)

// testWechatAccounts generates the merchants once per test binary (RSA keys are slow);
// every sandbox copies them, so a rotation in one test is not seen by another.
func testWechatAccounts(t testing.TB) []sandbox.WechatAccount {
	t.Helper()
	wechatAccountsOnce.Do(func() {
		for _, a := range []struct {
			mchID, appID string
			mode         sandbox.WechatMode
		}{
			{certMchID, "wx00000000000102", sandbox.WechatModeCertificate},
			{migratingMchID, "wx00000000000103", sandbox.WechatModeMigrating},
			{pubKeyMchID, "wx00000000000104", sandbox.WechatModePublicKey},
		} {
			acct, err := sandbox.GenerateWechatAccount(a.mchID, a.appID, a.mode, 2048)
			if err != nil {
				wechatAccountsErr = err
				return
			}
			wechatAccounts = append(wechatAccounts, acct)
		}
	})
	if wechatAccountsErr != nil {
		t.Fatal(wechatAccountsErr)
	}
	return wechatAccounts
}

func testAccount(t testing.TB, mchID string) sandbox.WechatAccount {
	for _, a := range testWechatAccounts(t) {
		if a.MchID == mchID {
			return a
		}
	}
	t.Fatalf("no test account %s", mchID)
	return sandbox.WechatAccount{}
}

// testClock is real time plus an offset a test moves forward; sandbox and clients share it.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// exchange is one request the sandbox answered, as seen on the wire.
type exchange struct {
	path                          string
	requestSerial, responseSerial string
	status                        int
}

// wechatBench is a sandbox playing every test merchant behind a recorder.
type wechatBench struct {
	sb    *sandbox.Sandbox
	url   string
	clock *testClock
	mu    sync.Mutex
	seen  []exchange
}

func newWechatBench(t *testing.T) *wechatBench {
	t.Helper()
	b := &wechatBench{clock: &testClock{}}
	sb, err := sandbox.New(sandbox.Options{Keys: testKeys(t), Now: b.clock.Now,
		Accounts: sandbox.Accounts{WechatPay: testWechatAccounts(t)}})
	if err != nil {
		t.Fatal(err)
	}
	b.sb = sb
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		sb.ServeHTTP(rec, r)
		b.mu.Lock()
		b.seen = append(b.seen, exchange{path: r.URL.Path, requestSerial: r.Header.Get(wechatpay.HeaderSerial),
			responseSerial: w.Header().Get(wechatpay.HeaderSerial), status: rec.status})
		b.mu.Unlock()
	}))
	t.Cleanup(func() {
		sb.Close()
		srv.Close()
	})
	b.url = srv.URL
	return b
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (b *wechatBench) exchanges() []exchange {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]exchange(nil), b.seen...)
}

// client builds a client for one merchant; mod adjusts its configuration.
func (b *wechatBench) client(t *testing.T, mchID string, mod func(*wechatpay.Config)) *wechatpay.Client {
	t.Helper()
	var cfg wechatpay.Config
	if mchID == "" {
		cfg = b.sb.WechatPayConfig(b.url)
	} else {
		var err error
		if cfg, err = b.sb.WechatAccountConfig(mchID, b.url); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Now = b.clock.Now
	cfg.Timeout = 2 * time.Second
	cfg.Tuning = platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := wechatpay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// paid sets a paid order of a merchant.
func (b *wechatBench) paid(no, mchID string) {
	b.sb.SetScenario(reconcile.WechatPay, no, sandbox.Scenario{MerchantID: mchID, State: sandbox.StatePaid, AmountMinor: 1234, PaidAt: paidAt})
}

// notifySink receives callbacks and answers them with client.ParseNotify.
type notifySink struct {
	mu      sync.Mutex
	results []reconcile.Result
	errs    []error
	serials []string
}

func (s *notifySink) handler(c *wechatpay.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := c.ParseNotify(r.Header, body)
		if err == nil && n.Payment == nil {
			err = fmt.Errorf("not a payment: %+v", n)
		}
		s.mu.Lock()
		s.serials = append(s.serials, r.Header.Get(wechatpay.HeaderSerial))
		if err != nil {
			s.errs = append(s.errs, err)
		} else {
			s.results = append(s.results, *n.Payment)
		}
		s.mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// deliver sends callbacks for orders to a sink served by c and waits for them.
func deliver(t *testing.T, b *wechatBench, c *wechatpay.Client, nos ...string) *notifySink {
	t.Helper()
	sink := &notifySink{}
	srv := httptest.NewServer(sink.handler(c))
	t.Cleanup(srv.Close)
	cbs := make([]sandbox.Callback, len(nos))
	for i, no := range nos {
		cbs[i] = sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: no}
	}
	d, err := b.sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: srv.URL, MaxAttempts: 1}, cbs...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return sink
}

func TestWechatRequestsNameThePublicKey(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	migrating := testAccount(t, migratingMchID)
	for _, tc := range []struct {
		mchID, keyID string
	}{
		{"", testKeys(t).WechatPublicKeyID},
		{pubKeyMchID, testAccount(t, pubKeyMchID).PublicKeyID},
		{migratingMchID, migrating.PublicKeyID},
	} {
		c := b.client(t, tc.mchID, nil)
		no := "NAMES-" + tc.mchID
		b.paid(no, tc.mchID)
		if _, err := c.Query(ctx, no); err != nil {
			t.Fatalf("%s: query: %v", tc.mchID, err)
		}
		if _, err := c.QueryByTransactionID(ctx, b.sb.Scenario(reconcile.WechatPay, no).TradeNo); err != nil {
			t.Fatalf("%s: query by transaction id: %v", tc.mchID, err)
		}
		if err := c.Close(ctx, "NAMES-UNKNOWN"); err != nil {
			t.Fatalf("%s: close: %v", tc.mchID, err)
		}
	}
	// The migrating merchant's certificate download names the public key too.
	c := b.client(t, migratingMchID, nil)
	if !c.KnowsSerial(ctx, migrating.Certificates[0].Serial) {
		t.Fatal("the migrating merchant's certificate is not known")
	}
	seen := b.exchanges()
	if len(seen) != 10 {
		t.Fatalf("%d requests, want 10: %+v", len(seen), seen)
	}
	want := map[int]string{0: testKeys(t).WechatPublicKeyID, 3: testAccount(t, pubKeyMchID).PublicKeyID, 6: migrating.PublicKeyID, 9: migrating.PublicKeyID}
	for i, ex := range seen {
		if ex.requestSerial != want[i-i%3] {
			t.Errorf("request %d (%s) Wechatpay-Serial %q, want %q", i, ex.path, ex.requestSerial, want[i-i%3])
		}
		// A request that names the public key gets its answer signed with it, migrating or not.
		if ex.path != wechatpay.CertificatesPath && ex.responseSerial != ex.requestSerial {
			t.Errorf("request %d answered by %q", i, ex.responseSerial)
		}
	}
	if seen[9].path != wechatpay.CertificatesPath {
		t.Fatalf("last request %s", seen[9].path)
	}

	// A client of a certificate-mode merchant has no public key to name.
	cc := b.client(t, certMchID, nil)
	b.paid("NAMES-CERT", certMchID)
	if _, err := cc.Query(ctx, "NAMES-CERT"); err != nil {
		t.Fatal(err)
	}
	for _, ex := range b.exchanges()[10:] {
		if ex.requestSerial != "" {
			t.Errorf("certificate-mode request %s named %q", ex.path, ex.requestSerial)
		}
	}
}

func TestWechatCertificateModeEndToEnd(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	acct := testAccount(t, certMchID)
	c := b.client(t, certMchID, nil)
	b.paid("CERT-PAID", certMchID)
	b.sb.SetScenario(reconcile.WechatPay, "CERT-OPEN", sandbox.Scenario{MerchantID: certMchID, State: sandbox.StateOpen, AmountMinor: 5})

	res, err := c.Query(ctx, "CERT-PAID")
	if err != nil {
		t.Fatal(err)
	}
	if res.State != reconcile.StatePaid || res.MerchantID != certMchID || res.SellerID != acct.AppID || res.AmountMinor != 1234 ||
		res.RawDigest != b.sb.LastAnswerDigest(reconcile.WechatPay, "CERT-PAID") {
		t.Fatalf("result %+v", res)
	}
	if err := c.Close(ctx, "CERT-OPEN"); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Query(ctx, "CERT-OPEN"); err != nil || res.State != reconcile.StateClosed {
		t.Fatalf("after close: %+v, %v", res, err)
	}
	// The default merchant's order is not this merchant's to see.
	b.paid("DEFAULT-PAID", "")
	if res, err := c.Query(ctx, "DEFAULT-PAID"); err != nil || res.State != reconcile.StateNotFound {
		t.Fatalf("another merchant's order: %+v, %v", res, err)
	}
	sink := deliver(t, b, c, "CERT-PAID")
	if len(sink.errs) != 0 || len(sink.results) != 1 || sink.results[0].OutTradeNo != "CERT-PAID" || sink.results[0].MerchantID != certMchID {
		t.Fatalf("callback: %+v, %v", sink.results, sink.errs)
	}
	if sink.serials[0] != acct.Certificates[0].Serial {
		t.Fatalf("callback signed by %s", sink.serials[0])
	}
	for _, ex := range b.exchanges() {
		if ex.path != wechatpay.CertificatesPath && ex.responseSerial != acct.Certificates[0].Serial {
			t.Errorf("%s answered by %q", ex.path, ex.responseSerial)
		}
	}
	if n := b.sb.CertificateDownloads(certMchID); n != 1 {
		t.Fatalf("%d certificate downloads, want 1", n)
	}
	if !c.KnowsSerial(ctx, acct.Certificates[0].Serial) || !c.KnowsSerial(ctx, strings.ToLower(acct.Certificates[0].Serial)) {
		t.Fatal("KnowsSerial: its own certificate")
	}
	// The callback endpoint asks every account about a serial: an unknown one costs each
	// account one download per interval, however often it is asked.
	b.clock.Advance(wechatpay.DefaultCertificateRefreshMin)
	for range 5 {
		if c.KnowsSerial(ctx, testKeys(t).WechatPublicKeyID) || c.KnowsSerial(ctx, "") {
			t.Fatal("KnowsSerial: another merchant's public key id, or nothing")
		}
	}
	if n := b.sb.CertificateDownloads(certMchID); n != 2 {
		t.Fatalf("%d certificate downloads after asking about unknown serials, want 2", n)
	}
}

func TestWechatMigration(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	acct := testAccount(t, migratingMchID)
	certSerial := acct.Certificates[0].Serial
	for i := range 6 {
		b.paid(fmt.Sprintf("MIG-%d", i), migratingMchID)
	}

	// Before the operator adds the public key: answers come signed by the certificate.
	before := b.client(t, migratingMchID, func(c *wechatpay.Config) { c.PlatformPublicKey, c.PublicKeyID = nil, "" })
	if res, err := before.Query(ctx, "MIG-0"); err != nil || res.State != reconcile.StatePaid {
		t.Fatalf("certificate-signed answer: %+v, %v", res, err)
	}
	if ex := b.exchanges(); ex[len(ex)-1].responseSerial != certSerial {
		t.Fatalf("answer signed by %q, want the certificate", ex[len(ex)-1].responseSerial)
	}

	// With both: answers signed by the public key, and callbacks by either signer verify.
	both := b.client(t, migratingMchID, nil)
	if res, err := both.Query(ctx, "MIG-1"); err != nil || res.State != reconcile.StatePaid {
		t.Fatalf("public-key-signed answer: %+v, %v", res, err)
	}
	if n := b.sb.CertificateDownloads(migratingMchID); n != 1 {
		t.Fatalf("%d downloads; a public-key answer needs none", n)
	}
	sink := deliver(t, b, both, "MIG-0", "MIG-1", "MIG-2", "MIG-3", "MIG-4", "MIG-5")
	if len(sink.errs) != 0 || len(sink.results) != 6 {
		t.Fatalf("callbacks: %d verified, errors %v", len(sink.results), sink.errs)
	}
	signers := map[string]int{}
	for _, s := range sink.serials {
		signers[s]++
	}
	if signers[acct.PublicKeyID] != 3 || signers[certSerial] != 3 {
		t.Fatalf("callback signers %v, want half each", signers)
	}
	// Only a certificate-signed callback needed the certificates, once.
	if n := b.sb.CertificateDownloads(migratingMchID); n != 2 {
		t.Fatalf("%d downloads, want 2 (one per client)", n)
	}

	// A client that knows only the public key refuses the certificate's callbacks: without
	// the API v3 key it cannot read them at all, and it cannot verify them either.
	pubOnly := b.client(t, migratingMchID, func(c *wechatpay.Config) { c.APIv3Key = nil })
	if pubOnly.KnowsSerial(ctx, certSerial) || !pubOnly.KnowsSerial(ctx, acct.PublicKeyID) {
		t.Fatal("KnowsSerial without the API v3 key")
	}
}

func TestWechatRotatedCertificateFetchedOnce(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	c := b.client(t, certMchID, nil)
	b.paid("ROT-0", certMchID)
	if _, err := c.Query(ctx, "ROT-0"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute) // past the refresh limit of the first download
	if err := b.sb.RotateWechatCertificate(certMchID); err != nil {
		t.Fatal(err)
	}
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		no := fmt.Sprintf("ROT-%d", i+1)
		b.paid(no, certMchID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Query(ctx, no)
			if err == nil && (res.State != reconcile.StatePaid || res.OutTradeNo != no) {
				err = fmt.Errorf("result %+v", res)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := b.sb.CertificateDownloads(certMchID); got != 2 {
		t.Fatalf("%d certificate downloads, want 2 (the first, then one for the rotation)", got)
	}
	var newSerial string
	for _, ex := range b.exchanges() {
		if ex.path != wechatpay.CertificatesPath {
			newSerial = ex.responseSerial
		}
	}
	if newSerial == testAccount(t, certMchID).Certificates[0].Serial || !c.KnowsSerial(ctx, newSerial) {
		t.Fatalf("answers signed by %s after the rotation", newSerial)
	}
	// The old certificate stays listed, so what it signed still verifies.
	if !c.KnowsSerial(ctx, testAccount(t, certMchID).Certificates[0].Serial) {
		t.Fatal("the old certificate was dropped")
	}
	if err := b.sb.RotateWechatCertificate(pubKeyMchID); err == nil {
		t.Fatal("a public-key merchant rotated a certificate")
	}
}

func TestWechatUnexplainedSerialRefused(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	var logs syncBuffer
	c := b.client(t, certMchID, func(cfg *wechatpay.Config) { cfg.Logger = zerolog.New(&logs) })
	b.paid("SER-OK", certMchID)
	if _, err := c.Query(ctx, "SER-OK"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute)
	b.sb.SetScenario(reconcile.WechatPay, "SER-BAD", sandbox.Scenario{MerchantID: certMchID, State: sandbox.StatePaid, AmountMinor: 1,
		Fault: &sandbox.Fault{WrongSerial: true}})
	const wrong = "PUB_KEY_ID_0114232134912410000000000000WRONG"
	for i := range 5 {
		res, err := c.Query(ctx, "SER-BAD")
		wantKind(t, err, reconcile.KindBadSignature)
		wantNoResult(t, res)
		if !errors.Is(err, platformclient.ErrBadSignature) || !strings.Contains(err.Error(), wrong) {
			t.Fatalf("query %d: %v, want a bad signature naming the serial", i, err)
		}
		// One refresh for the unknown serial, then none until the limit has passed.
		if got := b.sb.CertificateDownloads(certMchID); got != 2 {
			t.Fatalf("after query %d: %d downloads, want 2", i, got)
		}
	}
	b.clock.Advance(wechatpay.DefaultCertificateRefreshMin)
	_, err := c.Query(ctx, "SER-BAD")
	wantKind(t, err, reconcile.KindBadSignature)
	if got := b.sb.CertificateDownloads(certMchID); got != 3 {
		t.Fatalf("after the limit passed: %d downloads, want 3", got)
	}
	if !strings.Contains(logs.String(), `"event":"bad_signature"`) {
		t.Fatal("the refusal was not logged as a security event")
	}
	// The good answers still verify.
	if _, err := c.Query(ctx, "SER-OK"); err != nil {
		t.Fatal(err)
	}
}

func TestWechatFailedRefreshKeepsLastGoodSet(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	acct := testAccount(t, certMchID)
	c := b.client(t, certMchID, func(cfg *wechatpay.Config) { cfg.MaxRetries = -1 })
	b.paid("KEEP-1", certMchID)
	if _, err := c.Query(ctx, "KEEP-1"); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]sandbox.Fault{
		"502":            {HTTPStatus: 502},
		"bad signature":  {BadSignature: true},
		"tampered":       {TamperBody: true},
		"system error":   {ErrorCode: "SYSTEM_ERROR"},
		"rate limited":   {RateLimited: true},
		"unsigned":       {Unsigned: true},
		"stale":          {StaleTimestamp: true},
		"signtest probe": {SignTest: true},
	} {
		// The set is due for its 12-hourly refresh, which fails.
		b.clock.Advance(wechatpay.DefaultCertificateRefresh + time.Minute)
		b.sb.SetAccountFault(reconcile.WechatPay, certMchID, f)
		before := b.sb.CertificateDownloads(certMchID)
		if !c.KnowsSerial(ctx, acct.Certificates[0].Serial) {
			t.Fatalf("%s: the last good set was dropped", name)
		}
		if got := b.sb.CertificateDownloads(certMchID); got <= before {
			t.Fatalf("%s: no download attempted", name)
		}
		if c.KnowsSerial(ctx, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1") {
			t.Fatalf("%s: a failed download explained a serial", name)
		}
		b.sb.SetAccountFault(reconcile.WechatPay, certMchID, sandbox.Fault{})
		// What the kept certificate signs verifies, and the failed download is not retried
		// before the limit.
		downloads := b.sb.CertificateDownloads(certMchID)
		if res, err := c.Query(ctx, "KEEP-1"); err != nil || res.State != reconcile.StatePaid {
			t.Fatalf("%s: query after the failed refresh: %+v, %v", name, res, err)
		}
		sink := deliver(t, b, c, "KEEP-1")
		if len(sink.errs) != 0 || len(sink.results) != 1 {
			t.Fatalf("%s: callback after the failed refresh: %v", name, sink.errs)
		}
		if got := b.sb.CertificateDownloads(certMchID); got != downloads {
			t.Fatalf("%s: %d more downloads", name, got-downloads)
		}
	}
	// Once the limit has passed and the platform answers again, the refresh happens.
	b.clock.Advance(wechatpay.DefaultCertificateRefreshMin)
	before := b.sb.CertificateDownloads(certMchID)
	if _, err := c.Query(ctx, "KEEP-1"); err != nil || b.sb.CertificateDownloads(certMchID) != before+1 {
		t.Fatalf("the refresh after recovery: %v, %d downloads", err, b.sb.CertificateDownloads(certMchID)-before)
	}

	// The first download has no key to check the list's signature with but the
	// certificates it lists: an unsigned list, or one signed by a stranger, is refused.
	for name, f := range map[string]sandbox.Fault{"unsigned": {Unsigned: true}, "other key": {BadSignature: true}} {
		first := b.client(t, certMchID, nil)
		b.sb.SetAccountFault(reconcile.WechatPay, certMchID, f)
		if first.KnowsSerial(ctx, acct.Certificates[0].Serial) {
			t.Fatalf("%s: a first download that does not verify was trusted", name)
		}
		b.sb.SetAccountFault(reconcile.WechatPay, certMchID, sandbox.Fault{})
		b.clock.Advance(wechatpay.DefaultCertificateRefreshMin)
		if !first.KnowsSerial(ctx, acct.Certificates[0].Serial) {
			t.Fatalf("%s: the download after recovery", name)
		}
	}

	// A client with the wrong API v3 key cannot open the list: nothing is explained, and
	// the error names the setting, not the key.
	var logs syncBuffer
	wrong := b.client(t, certMchID, func(cfg *wechatpay.Config) {
		cfg.APIv3Key = []byte("ABCDEFGHIJ0123456789abcdefghij01")
		cfg.Logger = zerolog.New(&logs)
	})
	if wrong.KnowsSerial(ctx, acct.Certificates[0].Serial) {
		t.Fatal("a list sealed with another key was read")
	}
	if !strings.Contains(logs.String(), wechatpay.SettingAPIv3Key) {
		t.Fatalf("the failed download does not name %s: %s", wechatpay.SettingAPIv3Key, logs.String())
	}
}

func TestWechatOtherMerchantsKeyIsNeverAResult(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	other := testAccount(t, migratingMchID)
	// A man in the middle answers every query with the genuine answer, re-signed by another
	// merchant's platform key; the certificate list comes from the sandbox untouched.
	var signer atomic.Value
	mitm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wechatpay.CertificatesPath {
			b.sb.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		b.sb.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		s := signer.Load().([2]string)
		key := other.Certificates[0].Key
		if s[0] == "public key" {
			key = other.PublicKey
		}
		if err := wechatpay.SignResponse(w.Header(), key, s[1], b.clock.Now(), body); err != nil {
			t.Error(err)
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(mitm.Close)

	for _, tc := range []struct {
		name, mchID, signedBy, serial string
	}{
		{"cert merchant, other's certificate", certMchID, "certificate", other.Certificates[0].Serial},
		{"cert merchant, other's public key", certMchID, "public key", other.PublicKeyID},
		{"public-key merchant, other's key under its id", "", "public key", testKeys(t).WechatPublicKeyID},
		{"public-key merchant, other's certificate", "", "certificate", other.Certificates[0].Serial},
	} {
		signer.Store([2]string{tc.signedBy, tc.serial})
		no := "MITM-" + tc.mchID
		b.paid(no, tc.mchID)
		c := b.client(t, tc.mchID, func(cfg *wechatpay.Config) { cfg.BaseURL = mitm.URL })
		res, err := c.Query(ctx, no)
		wantKind(t, err, reconcile.KindBadSignature)
		wantNoResult(t, res)
		if c.KnowsSerial(ctx, other.Certificates[0].Serial) || c.KnowsSerial(ctx, other.PublicKeyID) {
			t.Fatalf("%s: another merchant's serial is known", tc.name)
		}
	}
	// A callback of another merchant is refused by this one's client.
	b.paid("OTHER-CB", migratingMchID)
	mine := b.client(t, certMchID, nil)
	sink := deliver(t, b, mine, "OTHER-CB", "OTHER-CB")
	if len(sink.results) != 0 || len(sink.errs) != 2 {
		t.Fatalf("another merchant's callbacks: %+v", sink.results)
	}
	for _, err := range sink.errs {
		wantKind(t, err, reconcile.KindBadSignature)
	}
}

func TestSandboxWechatMerchantsAreSeparate(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	cert := b.client(t, certMchID, nil)
	pub := b.client(t, pubKeyMchID, nil)
	def := b.client(t, "", nil)
	b.paid("SEP-CERT", certMchID)
	b.paid("SEP-PUB", pubKeyMchID)

	// Caps and faults of one merchant leave the others alone.
	b.sb.SetAccountFault(reconcile.WechatPay, pubKeyMchID, sandbox.Fault{ErrorCode: "NO_AUTH"})
	if _, err := pub.Query(ctx, "SEP-PUB"); kindOf(err) != reconcile.KindConfig {
		t.Fatalf("faulted merchant: %v", err)
	}
	if _, err := cert.Query(ctx, "SEP-CERT"); err != nil {
		t.Fatalf("another merchant got the fault: %v", err)
	}
	b.sb.SetAccountFault(reconcile.WechatPay, pubKeyMchID, sandbox.Fault{})
	if res, err := pub.Query(ctx, "SEP-PUB"); err != nil || res.MerchantID != pubKeyMchID {
		t.Fatalf("%+v, %v", res, err)
	}
	if res, err := def.Query(ctx, "SEP-PUB"); err != nil || res.State != reconcile.StateNotFound {
		t.Fatalf("the default merchant sees another's order: %+v, %v", res, err)
	}
	if err := def.Close(ctx, "SEP-PUB"); err != nil {
		t.Fatal(err)
	}
	if st := b.sb.Scenario(reconcile.WechatPay, "SEP-PUB").State; st != sandbox.StatePaid {
		t.Fatalf("another merchant's close changed the order: %s", st)
	}
	if b.sb.AccountQueryCount(reconcile.WechatPay, pubKeyMchID) != 2 || b.sb.AccountQueryCount(reconcile.WechatPay, certMchID) != 1 {
		t.Fatal("queries not counted per merchant")
	}

	// A request naming a key the merchant does not have is refused.
	wrongID := b.client(t, pubKeyMchID, func(cfg *wechatpay.Config) { cfg.PublicKeyID = testKeys(t).WechatPublicKeyID })
	if _, err := wrongID.Query(ctx, "SEP-PUB"); kindOf(err) != reconcile.KindPermanent {
		t.Fatalf("a request naming another merchant's key: %v", err)
	}

	// The control API lists the merchants with their modes and serials.
	resp, err := http.Get(b.url + "/sandbox/")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, a := range testWechatAccounts(t) {
		if !strings.Contains(string(info), `"mode": "`+string(a.Mode)+`"`) || !strings.Contains(string(info), a.MchID) {
			t.Fatalf("control info lacks %s: %s", a.MchID, info)
		}
	}
	if !strings.Contains(string(info), testAccount(t, certMchID).Certificates[0].Serial) {
		t.Fatalf("control info lacks the certificate serial: %s", info)
	}

	if _, err := b.sb.WechatAccountConfig("1999999999", b.url); err == nil {
		t.Fatal("a config for a merchant nobody plays")
	}
	if _, err := sandbox.New(sandbox.Options{Keys: testKeys(t), Accounts: sandbox.Accounts{WechatPay: []sandbox.WechatAccount{
		testAccount(t, certMchID), testAccount(t, certMchID)}}}); err == nil {
		t.Fatal("the same mchid played twice")
	}
	if _, err := sandbox.GenerateWechatAccount("1", "wx", "v2", 1024); err == nil {
		t.Fatal("an unknown mode")
	}
}

func TestWriteWechatAccountFiles(t *testing.T) {
	b := newWechatBench(t)
	dir := filepath.Join(t.TempDir(), "accounts")
	entries, err := b.sb.WriteWechatAccountFiles(dir, b.url+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 || entries[0]["mchid"] != b.sb.Identity().WechatMchID {
		t.Fatalf("%d entries, the default merchant first: %v", len(entries), entries)
	}
	for i, a := range testWechatAccounts(t) {
		e := entries[i+1]
		if e["mchid"] != a.MchID || e["appid"] != a.AppID || e["base_url"] != b.url || e["serial_no"] != a.MerchantSerial {
			t.Errorf("entry %d: %v", i, e)
		}
		_, hasID := e["public_key_id"]
		_, hasFile := e["public_key_file"]
		if want := a.Mode != sandbox.WechatModeCertificate; hasID != want || hasFile != want {
			t.Errorf("%s mode: public key fields %v", a.Mode, e)
		}
		for field, mode := range map[string]os.FileMode{"private_key_file": 0o600, "apiv3_key_file": 0o600, "public_key_file": 0o644} {
			path, ok := e[field].(string)
			if !ok {
				continue
			}
			st, err := os.Stat(path)
			if err != nil || st.Mode().Perm() != mode {
				t.Errorf("%s %s: %v, %v", a.MchID, field, st, err)
			}
		}
		// The files are what a client is configured with.
		cfg, err := b.sb.WechatAccountConfig(a.MchID, b.url)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(e["private_key_file"].(string))
		if key, err := platformclient.LoadPrivateKey(raw); err != nil || !key.Equal(cfg.PrivateKey) {
			t.Errorf("%s private key file: %v", a.MchID, err)
		}
		raw, _ = os.ReadFile(e["apiv3_key_file"].(string))
		if k, err := wechatpay.ParseAPIv3Key(raw); err != nil || !bytes.Equal(k, cfg.APIv3Key) {
			t.Errorf("%s API v3 key file: %v", a.MchID, err)
		}
		if path, ok := e["public_key_file"].(string); ok {
			raw, _ = os.ReadFile(path)
			if pub, err := platformclient.LoadPublicKey(raw); err != nil || !pub.Equal(cfg.PlatformPublicKey) || e["public_key_id"] != cfg.PublicKeyID {
				t.Errorf("%s public key file: %v", a.MchID, err)
			}
		}
	}
}

// A caller that gives up while the certificates download has not seen a bad signature:
// the query is retryable, and so is the callback (WeChat Pay sends it again).
func TestWechatSlowDownloadIsNotABadSignature(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	c := b.client(t, certMchID, func(cfg *wechatpay.Config) { cfg.Timeout, cfg.MaxRetries = 300*time.Millisecond, -1 })
	// The order's own (harmless) fault shields the query from the merchant's hang, which
	// then only the certificate download meets.
	b.sb.SetScenario(reconcile.WechatPay, "SLOW-1", sandbox.Scenario{MerchantID: certMchID, State: sandbox.StatePaid, AmountMinor: 1,
		Fault: &sandbox.Fault{Latency: sandbox.Duration(time.Nanosecond)}})
	b.sb.SetAccountFault(reconcile.WechatPay, certMchID, sandbox.Fault{Hang: true})
	res, err := c.Query(ctx, "SLOW-1")
	wantKind(t, err, reconcile.KindRetryable)
	wantNoResult(t, res)

	// A fresh client, whose first download meets the hang while the callback waits for it.
	fresh := b.client(t, certMchID, nil)
	sink := &notifySink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ctx, cancel := context.WithTimeout(r.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := fresh.ParseNotifyContext(ctx, r.Header, body)
		sink.mu.Lock()
		sink.errs = append(sink.errs, err)
		sink.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	d, err := b.sb.Deliver(ctx, sandbox.DeliveryOptions{URL: srv.URL, MaxAttempts: 1}, sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "SLOW-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sink.errs) != 1 || kindOf(sink.errs[0]) != reconcile.KindRetryable || errors.Is(sink.errs[0], platformclient.ErrBadSignature) {
		t.Fatalf("callback during a slow download: %v", sink.errs)
	}
}

// A certificate download that gets no answer (a proxy's 502 in front of the platform) says
// nothing about an answer or a callback signed by a certificate the client has not seen
// yet: both are retryable, never a bad signature, and once the platform answers again the
// same query verifies. (With the download failing fast, the query used to be refused as a
// bad signature; a slow download met the caller's deadline first and was retryable.)
func TestWechatUnansweredDownloadIsNotABadSignature(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	c := b.client(t, certMchID, func(cfg *wechatpay.Config) { cfg.MaxRetries = -1 })
	// The order's own (harmless) fault shields the query from the merchant's 502, which
	// then only the certificate download meets.
	b.sb.SetScenario(reconcile.WechatPay, "UNANSWERED-1", sandbox.Scenario{MerchantID: certMchID, State: sandbox.StatePaid, AmountMinor: 1,
		Fault: &sandbox.Fault{Latency: sandbox.Duration(time.Nanosecond)}})
	b.sb.SetAccountFault(reconcile.WechatPay, certMchID, sandbox.Fault{HTTPStatus: 502})
	res, err := c.Query(ctx, "UNANSWERED-1")
	wantKind(t, err, reconcile.KindRetryable)
	wantNoResult(t, res)
	if errors.Is(err, platformclient.ErrBadSignature) {
		t.Fatalf("query while the certificates cannot be downloaded: %v, want no bad signature", err)
	}
	sink := deliver(t, b, c, "UNANSWERED-1")
	if len(sink.errs) != 1 || kindOf(sink.errs[0]) != reconcile.KindRetryable || errors.Is(sink.errs[0], platformclient.ErrBadSignature) {
		t.Fatalf("callback while the certificates cannot be downloaded: %v, want one retryable error", sink.errs)
	}

	b.sb.SetAccountFault(reconcile.WechatPay, certMchID, sandbox.Fault{})
	b.clock.Advance(wechatpay.DefaultCertificateRefreshMin)
	if res, err := c.Query(ctx, "UNANSWERED-1"); err != nil || res.State != reconcile.StatePaid {
		t.Fatalf("query once the platform answers: %+v, %v", res, err)
	}
}
