package sandbox_test

import (
	"crypto/rsa"
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
)

// The protocol signatures our code produces verify with `openssl dgst -sha256 -verify`, and
// signatures `openssl dgst -sha256 -sign` produces over the protocol messages verify in our
// code: an independent implementation agrees on both the messages and the scheme.

type openssl struct {
	t   *testing.T
	bin string
	dir string
}

func newOpenSSL(t *testing.T) openssl {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		// The cross-check is the point of the test: no openssl, no proof (apt-get install openssl).
		t.Fatal("openssl not on PATH: install it (apt-get install openssl) to cross-check signatures")
	}
	return openssl{t: t, bin: bin, dir: t.TempDir()}
}

func (o openssl) write(name string, data []byte) string {
	p := filepath.Join(o.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		o.t.Fatal(err)
	}
	return p
}

func (o openssl) sign(key *rsa.PrivateKey, msg []byte) string {
	pemKey, _ := platformclient.EncodePrivateKeyPEM(key)
	out := filepath.Join(o.dir, "sig.bin")
	if b, err := exec.Command(o.bin, "dgst", "-sha256", "-sign", o.write("key.pem", pemKey), "-out", out, o.write("msg", msg)).CombinedOutput(); err != nil {
		o.t.Fatalf("openssl sign: %v %s", err, b)
	}
	sig, _ := os.ReadFile(out)
	return base64.StdEncoding.EncodeToString(sig)
}

func (o openssl) verify(pub *rsa.PublicKey, msg []byte, sigB64 string) bool {
	pemPub, _ := platformclient.EncodePublicKeyPEM(pub)
	raw, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		return false
	}
	return exec.Command(o.bin, "dgst", "-sha256", "-verify", o.write("pub.pem", pemPub), "-signature", o.write("ours.bin", raw), o.write("msg", msg)).Run() == nil
}

func TestOpenSSLCrossCheckAlipay(t *testing.T) {
	o := newOpenSSL(t)
	k := testKeys(t)
	params := url.Values{"app_id": {"2021000122600001"}, "method": {"alipay.trade.query"}, "format": {"JSON"}, "charset": {"utf-8"},
		"sign_type": {"RSA2"}, "timestamp": {"2024-03-01 10:20:30"}, "version": {"1.0"}, "biz_content": {`{"out_trade_no":"订单-1&x=y"}`}}

	// Our request signature verifies with openssl over the documented content.
	if err := alipay.SignRequest(k.AlipayAppKey, params); err != nil {
		t.Fatal(err)
	}
	if !o.verify(&k.AlipayAppKey.PublicKey, []byte(alipay.SignContent(params, "sign")), params.Get("sign")) {
		t.Fatal("openssl rejects our RSA2 request signature")
	}
	// openssl's signature over the request content passes the gateway's check.
	params.Set("sign", o.sign(k.AlipayAppKey, []byte(alipay.SignContent(params, "sign"))))
	if err := alipay.VerifyRequest(&k.AlipayAppKey.PublicKey, params); err != nil {
		t.Fatalf("openssl-signed request rejected: %v", err)
	}

	// A response node signed by openssl verifies over its raw bytes.
	node := []byte(`{"code":"10000","msg":"Success","out_trade_no":"X1","total_amount":"88.88","trade_status":"TRADE_SUCCESS"}`)
	if err := alipay.VerifyNode(&k.AlipayPlatformKey.PublicKey, node, o.sign(k.AlipayPlatformKey, node)); err != nil {
		t.Fatalf("openssl-signed node rejected: %v", err)
	}

	// A notification signed by openssl (content without sign and sign_type) is accepted.
	n := url.Values{"app_id": {"2021000122600001"}, "out_trade_no": {"X1"}, "trade_no": {"2024"}, "trade_status": {"TRADE_SUCCESS"},
		"total_amount": {"88.88"}, "sign_type": {"RSA2"}, "subject": {"咖啡 + cake"}}
	n.Set("sign", o.sign(k.AlipayPlatformKey, []byte(alipay.SignContent(n, "sign", "sign_type"))))
	res, err := alipay.ParseNotify([]byte(n.Encode()), &k.AlipayPlatformKey.PublicKey)
	if err != nil || res.Payment == nil || res.Payment.AmountMinor != 8888 {
		t.Fatalf("openssl-signed notification: %+v, %v", res, err)
	}
	// And our notification signature verifies with openssl.
	if err := alipay.SignNotify(k.AlipayPlatformKey, n); err != nil {
		t.Fatal(err)
	}
	if !o.verify(&k.AlipayPlatformKey.PublicKey, []byte(alipay.SignContent(n, "sign", "sign_type")), n.Get("sign")) {
		t.Fatal("openssl rejects our notification signature")
	}
}

func TestOpenSSLCrossCheckWechatPay(t *testing.T) {
	o := newOpenSSL(t)
	k := testKeys(t)
	body := []byte(`{"mchid":"1900000001"}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	auth, err := wechatpay.Authorization(k.WechatMerchantKey, "1900000001", k.WechatMerchantSerial, "POST",
		"/v3/pay/transactions/out-trade-no/X1/close", ts, "593BEC0C930BF1AFEB40B4A08C8FB242", body)
	if err != nil {
		t.Fatal(err)
	}
	f, err := wechatpay.ParseAuthorization(auth)
	if err != nil {
		t.Fatal(err)
	}
	msg := wechatpay.RequestMessage("POST", "/v3/pay/transactions/out-trade-no/X1/close", ts, f.NonceStr, body)
	if !o.verify(&k.WechatMerchantKey.PublicKey, msg, f.Signature) {
		t.Fatal("openssl rejects our Authorization signature")
	}

	// An answer signed by openssl passes our verification.
	answer := []byte(`{"out_trade_no":"X1","trade_state":"NOTPAY"}`)
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, ts)
	h.Set(wechatpay.HeaderNonce, "d824f2e086d3c1df967785d13fcd22ef")
	h.Set(wechatpay.HeaderSerial, k.WechatPublicKeyID)
	h.Set(wechatpay.HeaderSignature, o.sign(k.WechatPlatformKey, wechatpay.ResponseMessage(ts, "d824f2e086d3c1df967785d13fcd22ef", answer)))
	v := wechatpay.Verifier{PublicKey: &k.WechatPlatformKey.PublicKey, PublicKeyID: k.WechatPublicKeyID}
	if err := v.Verify(h, answer); err != nil {
		t.Fatalf("openssl-signed answer rejected: %v", err)
	}
	// And what we sign as the platform verifies with openssl.
	h2 := http.Header{}
	if err := wechatpay.SignResponse(h2, k.WechatPlatformKey, k.WechatPublicKeyID, time.Now(), answer); err != nil {
		t.Fatal(err)
	}
	if !o.verify(&k.WechatPlatformKey.PublicKey, wechatpay.ResponseMessage(h2.Get(wechatpay.HeaderTimestamp), h2.Get(wechatpay.HeaderNonce), answer), h2.Get(wechatpay.HeaderSignature)) {
		t.Fatal("openssl rejects our answer signature")
	}
}
