package sandbox_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// secrets lists byte strings that must never appear in a log line or an error: pieces of
// every private key in the forms it could leak (PEM bodies, D in base64, hex and decimal,
// the primes) and the API v3 key.
func secrets(k *sandbox.Keys) map[string]string {
	out := map[string]string{}
	for name, key := range map[string]*rsa.PrivateKey{"alipay app": k.AlipayAppKey, "alipay platform": k.AlipayPlatformKey,
		"wechat merchant": k.WechatMerchantKey, "wechat platform": k.WechatPlatformKey} {
		addKeySecrets(out, name, key)
	}
	apiV3KeySecrets(out, "api v3 key", k.WechatAPIv3Key)
	return out
}

// TestNoKeyMaterialInLogsOrErrors drives every failure path with logging at trace level and
// scans the log and every error string for key material.
func TestNoKeyMaterialInLogsOrErrors(t *testing.T) {
	sb, url := newSandbox(t)
	k := sb.Keys()
	var logs syncBuffer
	log := zerolog.New(&logs).Level(zerolog.TraceLevel)
	ctx := context.Background()
	var texts []string
	record := func(err error) {
		if err != nil {
			texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}

	acfg := sb.AlipayConfig(url)
	wcfg := sb.WechatPayConfig(url)
	for _, cfg := range []any{acfg, wcfg} {
		texts = append(texts, fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg))
		b, err := json.Marshal(cfg)
		record(err)
		texts = append(texts, string(b))
	}
	log.Info().Interface("alipay", acfg).Interface("wechatpay", wcfg).Msg("a careless caller logs its config")

	tune := platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: time.Minute}
	mkClients := func(mod func(*alipay.Config, *wechatpay.Config)) []client {
		a, w := sb.AlipayConfig(url), sb.WechatPayConfig(url)
		a.Logger, w.Logger = log, log
		a.Timeout, w.Timeout = 100*time.Millisecond, 100*time.Millisecond
		a.Tuning, w.Tuning = tune, tune
		if mod != nil {
			mod(&a, &w)
		}
		ac, err := alipay.New(a)
		if err != nil {
			t.Fatal(err)
		}
		wc, err := wechatpay.New(w)
		if err != nil {
			t.Fatal(err)
		}
		return []client{ac, wc}
	}
	good := mkClients(nil)
	wrongKey := mkClients(func(a *alipay.Config, w *wechatpay.Config) {
		a.PrivateKey, w.PrivateKey = k.WechatMerchantKey, k.AlipayAppKey
	})
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		faults := []sandbox.Fault{{HTTPStatus: 502}, {BadSignature: true}, {TamperBody: true}, {Unsigned: true}, {Truncate: true},
			{Hang: true}, {RateLimited: true}, {StaleTimestamp: true}, {SignTest: true}, {WrongSerial: true},
			{ErrorCode: "ACQ.SYSTEM_ERROR"}, {ErrorCode: "isv.invalid-signature"}, {ErrorCode: "NO_AUTH"}, {ErrorCode: "SIGN_ERROR"}}
		for i, f := range faults {
			no := fmt.Sprintf("LEAK-%d", i)
			f := f
			sb.SetScenario(p, no, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, Fault: &f})
		}
	}
	for _, c := range append(good, wrongKey...) {
		for i := 0; i < 14; i++ {
			_, err := c.Query(ctx, fmt.Sprintf("LEAK-%d", i))
			record(err)
		}
		record(c.Close(ctx, "LEAK-1"))
	}
	for _, c := range good { // the breaker is open by now for some: fine, that path logs too
		_, err := c.Query(ctx, "LEAK-0")
		record(err)
	}

	// Callback refusals.
	ac := good[0].(*alipay.Client)
	wc := good[1].(*wechatpay.Client)
	_, err := ac.ParseNotify([]byte("out_trade_no=1&total_amount=1.00&sign=AAAA"))
	record(err)
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, fmt.Sprint(time.Now().Unix()))
	h.Set(wechatpay.HeaderNonce, "n")
	h.Set(wechatpay.HeaderSerial, k.WechatPublicKeyID)
	body := []byte(`{"event_type":"TRANSACTION.SUCCESS","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"AAAAAAAAAAAAAAAAAAAAAAAAAAAA","nonce":"123456789012","associated_data":"transaction"}}`)
	sig, _ := platformclient.SignSHA256(k.WechatPlatformKey, wechatpay.ResponseMessage(h.Get(wechatpay.HeaderTimestamp), "n", body))
	h.Set(wechatpay.HeaderSignature, sig)
	_, err = wc.ParseNotify(h, body) // verified, undecryptable
	record(err)
	h.Set(wechatpay.HeaderSignature, "AAAA")
	_, err = wc.ParseNotify(h, body)
	record(err)

	// Configuration and key loading errors.
	_, err = alipay.New(alipay.Config{PrivateKey: k.AlipayAppKey})
	record(err)
	_, err = wechatpay.New(wechatpay.Config{PrivateKey: k.WechatMerchantKey, APIv3Key: k.WechatAPIv3Key[:16]})
	record(err)
	_, err = wechatpay.ParseAPIv3Key(append(append([]byte(nil), k.WechatAPIv3Key...), 'x'))
	record(err)
	pemKey, _ := platformclient.EncodePrivateKeyPEM(k.AlipayAppKey)
	corrupt := []byte(strings.Replace(string(pemKey), "A", "*", 3))
	_, err = platformclient.LoadPrivateKey(corrupt)
	record(err)
	_, err = platformclient.LoadPrivateKey(pemKey[30 : len(pemKey)-30])
	record(err)
	_, err = platformclient.LoadPublicKey(pemKey)
	record(err)
	texts = append(texts, k.String())

	// The patterns themselves are right: they are found where the key really is.
	flat := strings.ReplaceAll(string(pemKey), "\n", "")
	found := 0
	for name, secret := range secrets(k) {
		if strings.HasPrefix(name, "alipay app pkcs8") && strings.Contains(flat, secret) {
			found++
		}
	}
	if found == 0 {
		t.Fatal("the secret patterns do not match the PEM they come from")
	}

	all := logs.String() + "\n" + strings.Join(texts, "\n")
	// The scan must have something to scan: failure paths logged, security events among them.
	if !strings.Contains(logs.String(), `"event":"bad_signature"`) || !strings.Contains(logs.String(), "circuit breaker") || len(texts) < 100 {
		t.Fatalf("too little captured to prove anything: %d texts, log %d bytes", len(texts), logs.Len())
	}
	for name, secret := range secrets(k) {
		if strings.Contains(all, secret) {
			t.Errorf("%s found in logs or errors", name)
		}
	}
}

// addKeySecrets adds the forms one private key could leak in.
func addKeySecrets(out map[string]string, name string, key *rsa.PrivateKey) {
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(key)
	for form, body := range map[string]string{
		"pkcs8 body": base64.StdEncoding.EncodeToString(pkcs8),
		"pkcs1 body": base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(key)),
	} {
		// Any 40-character window of the body would give it away; sample several (1024-bit
		// keys have shorter bodies, so start early enough for them too).
		for i := 200; i+40 <= len(body) && i < 1200; i += 200 {
			out[fmt.Sprintf("%s %s @%d", name, form, i)] = body[i : i+40]
		}
	}
	d := key.D.Bytes()
	out[name+" D base64"] = base64.StdEncoding.EncodeToString(d)[:40]
	out[name+" D hex"] = hex.EncodeToString(d)[:40]
	out[name+" D decimal"] = key.D.String()[:40]
	out[name+" P decimal"] = key.Primes[0].String()[:40]
}

// TestNoKeyMaterialInAlipayAccountPaths drives the several-app and certificate-mode paths
// (cert SN refusals, rotation, another app's key, certificate files holding keys) and scans
// logs and errors for every app's keys and the CA key.
func TestNoKeyMaterialInAlipayAccountPaths(t *testing.T) {
	sb, base := newAccountsSandbox(t)
	cert, pk := testAlipayAccounts(t)
	var logs syncBuffer
	log := zerolog.New(&logs).Level(zerolog.TraceLevel)
	ctx := context.Background()
	var texts []string
	record := func(err error) {
		if err != nil {
			texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}
	client := func(appID string, mod func(*alipay.Config)) *alipay.Client {
		cfg, err := sb.AlipayAccountConfig(appID, base)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Logger, cfg.MaxRetries = log, -1
		if mod != nil {
			mod(&cfg)
		}
		texts = append(texts, fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg))
		b, _ := json.Marshal(cfg)
		texts = append(texts, string(b))
		c, err := alipay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, a := range []sandbox.AlipayAccount{cert, pk} {
		texts = append(texts, fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a), fmt.Sprintf("%v %+v %#v", a.Cert, a.Cert, a.Cert))
		log.Info().Interface("account", a).Interface("cert", a.Cert).Msg("a careless caller logs an account")
		sb.SetScenario(reconcile.Alipay, "LEAK-"+a.AppID, sandbox.Scenario{MerchantID: a.AppID, State: sandbox.StatePaid, AmountMinor: 1})
	}
	calls := []struct {
		appID string
		mod   func(*alipay.Config)
	}{
		{certAppID, func(c *alipay.Config) { c.Cert.AppCertSN = "0123456789abcdef0123456789abcdef" }},
		{certAppID, func(c *alipay.Config) { c.Cert.RootCertSN = "" + "x" }},
		{certAppID, func(c *alipay.Config) { c.Cert.AlipayCerts[c.Cert.AlipayCertSN] = &pk.PlatformKey.PublicKey }},
		{pkAppID, func(c *alipay.Config) { c.AlipayPublicKey = &cert.PlatformKey.PublicKey }},
		{pkAppID, func(c *alipay.Config) { c.PrivateKey = cert.AppKey }},
		{certAppID, nil},
	}
	var clients []*alipay.Client
	for _, c := range calls {
		clients = append(clients, client(c.appID, c.mod))
	}
	for i, c := range clients {
		_, err := c.Query(ctx, "LEAK-"+calls[i].appID)
		record(err)
		record(c.Close(ctx, "LEAK-"+calls[i].appID))
	}
	if err := sb.RotateAlipayCert(certAppID); err != nil {
		t.Fatal(err)
	}
	_, err := clients[len(clients)-1].Query(ctx, "LEAK-"+certAppID) // holds the old certificate
	record(err)
	_, err = clients[len(clients)-1].ParseNotify([]byte("app_id=" + certAppID + "&out_trade_no=1&alipay_cert_sn=ffff&sign=AAAA"))
	record(err)
	record(sb.RotateAlipayCert(pkAppID))

	// Certificate files holding keys, or keys where certificates belong.
	keyPEM, _ := platformclient.EncodePrivateKeyPEM(cert.Cert.CAKey)
	appKeyPEM, _ := platformclient.EncodePrivateKeyPEM(cert.AppKey)
	_, err = alipay.NewCertMode(appKeyPEM, cert.Cert.AlipayCertPEM, cert.Cert.RootCertPEM)
	record(err)
	_, err = alipay.NewCertMode(cert.Cert.AppCertPEM, keyPEM, cert.Cert.RootCertPEM)
	record(err)
	_, err = alipay.NewCertMode(cert.Cert.AppCertPEM, cert.Cert.AlipayCertPEM, append(append([]byte(nil), cert.Cert.RootCertPEM...), keyPEM...))
	record(err)
	_, err = alipay.ParseCertificate(keyPEM[30 : len(keyPEM)-30])
	record(err)
	_, err = alipay.RootCertSN(keyPEM)
	record(err)

	all := logs.String() + "\n" + strings.Join(texts, "\n")
	if !strings.Contains(all, "rotated") || !strings.Contains(all, `"event":"bad_signature"`) || !strings.Contains(all, "app_cert_file: ") || len(texts) < 40 {
		t.Fatalf("too little captured to prove anything: %d texts, log %d bytes", len(texts), logs.Len())
	}
	secretsOf := map[string]string{}
	for _, a := range []sandbox.AlipayAccount{cert, pk} {
		addKeySecrets(secretsOf, a.AppID+" app", a.AppKey)
		addKeySecrets(secretsOf, a.AppID+" platform", a.PlatformKey)
	}
	addKeySecrets(secretsOf, "alipay CA", cert.Cert.CAKey)
	if rotated, ok := sb.AlipayAccount(certAppID); ok {
		addKeySecrets(secretsOf, "rotated platform", rotated.PlatformKey)
	}
	flat := strings.ReplaceAll(string(keyPEM), "\n", "")
	found := 0
	for name, secret := range secretsOf {
		if strings.HasPrefix(name, "alipay CA pkcs8") && strings.Contains(flat, secret) {
			found++
		}
	}
	if found == 0 {
		t.Fatal("the secret patterns do not match the PEM they come from")
	}
	for name, secret := range secretsOf {
		if strings.Contains(all, secret) {
			t.Errorf("%s found in logs or errors", name)
		}
	}
}

func accountSecrets(out map[string]string, a sandbox.WechatAccount) {
	addKeySecrets(out, a.MchID+" merchant", a.MerchantKey)
	if a.PublicKey != nil {
		addKeySecrets(out, a.MchID+" public key", a.PublicKey)
	}
	for _, c := range a.Certificates {
		addKeySecrets(out, a.MchID+" certificate "+c.Serial, c.Key)
	}
	apiV3KeySecrets(out, a.MchID+" api v3 key", a.APIv3Key)
}

func apiV3KeySecrets(out map[string]string, name string, key []byte) {
	out[name] = string(key)
	out[name+" base64"] = base64.StdEncoding.EncodeToString(key)
	out[name+" hex"] = hex.EncodeToString(key)
}

func TestNoKeyMaterialInLogsOrErrorsCertificates(t *testing.T) {
	b := newWechatBench(t)
	ctx := context.Background()
	var logs syncBuffer
	log := zerolog.New(&logs).Level(zerolog.TraceLevel)
	var texts []string
	record := func(err error) {
		if err != nil {
			texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}
	secret := secrets(testKeys(t))
	for _, a := range testWechatAccounts(t) {
		accountSecrets(secret, a)
		texts = append(texts, a.String(), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a))
	}
	mk := func(mchID string, mod func(*wechatpay.Config)) *wechatpay.Client {
		return b.client(t, mchID, func(cfg *wechatpay.Config) {
			cfg.Logger, cfg.MaxRetries = log, -1
			if mod != nil {
				mod(cfg)
			}
			texts = append(texts, cfg.String(), fmt.Sprintf("%#v", *cfg))
		})
	}
	for _, mchID := range []string{certMchID, migratingMchID} {
		b.paid("LEAKC-"+mchID, mchID)
		for i, f := range []sandbox.Fault{{HTTPStatus: 502}, {BadSignature: true}, {TamperBody: true}, {Unsigned: true},
			{StaleTimestamp: true}, {SignTest: true}, {WrongSerial: true}, {RateLimited: true}, {ErrorCode: "SIGN_ERROR"}} {
			// A fresh client, so every fault meets a first download.
			c := mk(mchID, func(cfg *wechatpay.Config) { cfg.PlatformPublicKey, cfg.PublicKeyID = nil, "" })
			b.sb.SetAccountFault(reconcile.WechatPay, mchID, f)
			_, err := c.Query(ctx, "LEAKC-"+mchID)
			record(err)
			b.sb.SetAccountFault(reconcile.WechatPay, mchID, sandbox.Fault{})
			_, err = c.Query(ctx, "LEAKC-"+mchID)
			record(err)
			c.KnowsSerial(ctx, fmt.Sprintf("UNKNOWN%02d", i))
		}
		// Another merchant's API v3 key: a secret too, so a leak of the configured key shows.
		wrongV3 := mk(mchID, func(cfg *wechatpay.Config) { cfg.APIv3Key = testAccount(t, pubKeyMchID).APIv3Key })
		_, err := wrongV3.Query(ctx, "LEAKC-"+mchID)
		record(err)
		sink := deliver(t, b, wrongV3, "LEAKC-"+mchID, "LEAKC-"+mchID)
		for _, err := range sink.errs {
			record(err)
		}
	}
	if err := b.sb.RotateWechatCertificate(certMchID); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	c := mk(certMchID, nil)
	_, err := c.Query(ctx, "LEAKC-"+certMchID)
	record(err)
	sink := deliver(t, b, c, "LEAKC-"+migratingMchID, "LEAKC-"+migratingMchID)
	for _, err := range sink.errs {
		record(err)
	}
	_, err = wechatpay.New(wechatpay.Config{MchID: "1", SerialNo: "A", PrivateKey: testAccount(t, certMchID).MerchantKey,
		APIv3Key: testAccount(t, certMchID).APIv3Key[:20]})
	record(err)
	dir := t.TempDir()
	entries, err := b.sb.WriteWechatAccountFiles(dir, b.url)
	record(err)
	texts = append(texts, fmt.Sprint(entries))

	// The patterns themselves are right: they are found in the files the keys were written to
	// (the default merchant, first, is TestNoKeyMaterialInLogsOrErrors's).
	for _, e := range entries[1:] {
		priv, _ := os.ReadFile(e["private_key_file"].(string))
		v3, _ := os.ReadFile(e["apiv3_key_file"].(string))
		flat := strings.ReplaceAll(string(priv), "\n", "") + string(v3)
		found := 0
		for name, s := range secret {
			if strings.HasPrefix(name, e["mchid"].(string)) && strings.Contains(flat, s) {
				found++
			}
		}
		if found < 2 {
			t.Fatalf("%s: the secret patterns do not match the files they come from", e["mchid"])
		}
	}

	all := logs.String() + "\n" + strings.Join(texts, "\n")
	if !strings.Contains(logs.String(), `"event":"bad_signature"`) || !strings.Contains(logs.String(), "certificate download failed") ||
		!strings.Contains(logs.String(), "platform certificates downloaded") || len(texts) < 60 {
		t.Fatalf("too little captured to prove anything: %d texts, log %d bytes", len(texts), logs.Len())
	}
	for name, s := range secret {
		if strings.Contains(all, s) {
			t.Errorf("%s found in logs or errors", name)
		}
	}
}
