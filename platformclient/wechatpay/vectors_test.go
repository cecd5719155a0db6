package wechatpay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Known-answer tests against published vectors. SHA256withRSA with PKCS#1 v1.5 padding is
// deterministic, so reproducing a published signature byte for byte proves the message we
// build and the way we sign are exactly the platform's.

const (
	docTimestamp = "1554208460"
	docNonce     = "593BEC0C930BF1AFEB40B4A08C8FB242"
)

// Source: WeChat Pay API v3 signing documentation (pay.weixin.qq.com/doc/v3/merchant/
// 4012365336, mirrored in wechatpay-skills as 签名与验签规则), with its published test key.
var docRequestVectors = []struct {
	name, method, url, body, signature string
}{
	{
		name:      "POST jsapi order (mchid 1900007291)",
		method:    "POST",
		url:       "/v3/pay/transactions/jsapi",
		body:      `{"appid":"wxd678efh567hg6787","mchid":"1900007291","description":"Image形象店-深圳腾大-QQ公仔","out_trade_no":"1217752501201407033233368018","notify_url":"https://www.weixin.qq.com/wxpay/pay.php","amount":{"total":100,"currency":"CNY"},"payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}}`,
		signature: "jnks4dlrPw3ZX+ozVvSK39oa0t7OMBsg83BHAwd8BRdUFiVaQNTLTvci+wURgP1OQBbKYhFGvt7iqYpDSTQkp7Uq1sltaQKyncCyrA1g88m5bsKERQfPyT0ahSwKTYJ1CAn9QiJuSJRq1QsQs07eehbU/k9BCS51jTyc1Jpsi2H77HF9f/BnjXAOP3/sPObg6V5Ee4EzwLox684hhuMuIwHo7D8KFk3LIHOKDcNI4It1aCXydFWNpNK+SG86VUDe5kwoDpw4Ulqfu9z8OFDGbDs9TCxEv8iqQzbpxOlEVoOe2kalSYM5kApQb3nZcxdUtoE0liJGW3RGUNE0t4v01A==",
	},
	{
		name:      "POST jsapi order (mchid 1230000109, earlier revision of the page)",
		method:    "POST",
		url:       "/v3/pay/transactions/jsapi",
		body:      `{"appid":"wxd678efh567hg6787","mchid":"1230000109","description":"Image形象店-深圳腾大-QQ公仔","out_trade_no":"1217752501201407033233368018","notify_url":"https://www.weixin.qq.com/wxpay/pay.php","amount":{"total":100,"currency":"CNY"},"payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}}`,
		signature: "gEuexJ547PHFV77TQ6eiE4tphVYfWfUe1Wc2dBmVnoMYU2rl/M4zhw+b3vBhuMw6AC7pteNkryLA7UWU2h+umo0OdSuuLm1++O3NckQPCSfm6dypsjn4GYm84KMqXWFrhFmyxEwIdEJDr3w1UYfxOcu55OQupfLkrt/ZzuOspnliJFrPzGQFUk7lGqMMtpz3EfbDUNxnVsHblORg3hVmuYNmbGWnS2ovU30Y2Q+iKFDxzkaXBk8LTy6HzvxizRo6Q+J4SVM7O0hKXfgo1QdI68kpzNULb3EVBXlhTyPUzhkHzzLxECL1qHl3HH2hEv8++C+4wBlsagF3j/O6PABojA==",
	},
	{
		name:      "GET with a path parameter and an empty body",
		method:    "GET",
		url:       "/v3/refund/domestic/refunds/123123123123",
		body:      "",
		signature: "Lc9VXxmeonkdV8Xk9tmigQFLhl0vRWTerdmoRu01aAnYwIrD/5nsSwE1WlmZGLRlAFTNQ3QsMa0+VRDlJp1Wp5p0nO8EK68b5sJBbjouxaFciIfq1zfDWWz+jqhcMoKXI1A6dPm1AW7D4d30WsMTNzp6g23OXakIsh9LO3lUmwvTuE0BY8ncf6tNGk4wKmvXwERd/ZpoQY3MAVKz+Nakwc+2XBmzT66KcUehU5kr4IvGa/lEU5RZb/q00zP9VLdBhC/jQSX3X1UcJLCtEc4gTmib4tnmAT+bHF/e17ZAuxDNcx6rqT8gNEXqaJGG+1OflMSTU2tpyG65G4dMKdFcoA==",
	},
}

func loadFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKnownAnswerRequestSignatures(t *testing.T) {
	key, err := platformclient.LoadPrivateKey(loadFixture(t, "doc_merchant_test_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range docRequestVectors {
		auth, err := Authorization(key, "1900007291", "408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB", v.method, v.url, docTimestamp, docNonce, []byte(v.body))
		if err != nil {
			t.Fatal(err)
		}
		f, err := ParseAuthorization(auth)
		if err != nil {
			t.Fatalf("%s: our own header does not parse: %v", v.name, err)
		}
		if f.Signature != v.signature {
			t.Errorf("%s:\n got  %s\n want %s", v.name, f.Signature, v.signature)
		}
		if f.Timestamp != docTimestamp || f.NonceStr != docNonce || f.MchID != "1900007291" {
			t.Errorf("%s: header fields %+v", v.name, f)
		}
	}
	// The message layout itself, as the page prints it: five lines, each ending in \n.
	if got := string(RequestMessage("GET", "/v3/certificates", docTimestamp, docNonce, nil)); got != "GET\n/v3/certificates\n1554208460\n593BEC0C930BF1AFEB40B4A08C8FB242\n\n" {
		t.Errorf("request message %q", got)
	}
}

// Source: the same documentation's response-verification example.
func TestKnownAnswerResponseVerification(t *testing.T) {
	pub, err := platformclient.LoadPublicKey(loadFixture(t, "doc_platform_test_public_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		ts   = "1722850421"
		body = `{"code_url":"weixin://wxpay/bizpayurl?pr=JyC91EIz1"}`
		sig  = "mfI1CPqvBrgcXfgXMFjdNIhBf27ACE2YyeWsWV9ZI7T7RU0vHvbQpu9Z32ogzc+k8ZC5n3kz7h70eWKjgqNdKQF0eRp8mVKlmfzMLBVHbssB9jEZEDXThOX1XFqX7s7ymia1hoHQxQagPGzkdWxtlZPZ4ZPvr1RiqkgAu6Is8MZgXXrRoBKqjmSdrP1N7uxzJ/cjfSiis9FiLjuADoqmQ1P7p2N876YPAol7Rn0+GswwAwxldbdLrmVSjfytfSBJFqTMHn4itojgxSWWN1byuckQt8hSTEv/Lg97QoeGniYP17T80pJeQyL3b+295FPHSO2AtvCgyIbKMZ0BALilAA=="
	)
	v := Verifier{PublicKey: pub, PublicKeyID: "PUB_KEY_ID_0000000000000024101100397200000006", Now: func() time.Time { return time.Unix(1722850421+60, 0) }}
	h := http.Header{}
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderNonce, "d824f2e086d3c1df967785d13fcd22ef")
	h.Set(HeaderSignature, sig)
	h.Set(HeaderSerial, v.PublicKeyID)
	if err := v.Verify(h, []byte(body)); err != nil {
		t.Fatalf("published response signature rejected: %v", err)
	}
	if err := v.Verify(h, []byte(body+" ")); err == nil {
		t.Fatal("tampered body verified")
	}
	stale := v
	stale.Now = func() time.Time { return time.Unix(1722850421+300, 0) }
	if err := stale.Verify(h, []byte(body)); err == nil {
		t.Fatal("a timestamp 300s old verified")
	}
	h2 := h.Clone()
	h2.Set(HeaderSerial, "PUB_KEY_ID_SOMEONE_ELSE")
	if err := v.Verify(h2, []byte(body)); err == nil {
		t.Fatal("a foreign serial verified")
	}
}

// Source: wechatpay-apiv3/wechatpay-go utils/aes_test.go. Its key is 16 bytes (so AES-128
// GCM there); production API v3 keys are 32 bytes, which Config enforces.
func TestKnownAnswerAESGCM(t *testing.T) {
	const (
		key   = "testAPIv3Key0000"
		ct    = "FsdXzxryWfKwvLJKf8LG/ToRPTRh8RN9wROC"
		nonce = "wCq51qZv4Yfg"
		aad   = "Dl56FrqWQJF1t9LtC3vEUsniZKvbqdR8"
	)
	plain, err := DecryptResource([]byte(key), aad, nonce, ct)
	if err != nil || string(plain) != "Hello World" {
		t.Fatalf("decrypt = %q, %v", plain, err)
	}
	// Our encryption produces the very same ciphertext (GCM is deterministic for a nonce).
	again, err := EncryptResource([]byte(key), aad, nonce, []byte("Hello World"))
	if err != nil || again != ct {
		t.Fatalf("encrypt = %q, %v", again, err)
	}
	for name, args := range map[string][4]string{
		"wrong key":      {"testAPIv3Key1111", aad, nonce, ct},
		"not a key":      {"not a aes key", aad, nonce, ct},
		"bad base64":     {key, aad, nonce, "invalid cipher"},
		"not ciphertext": {key, aad, nonce, "SGVsbG8gV29ybGQK"},
		"other aad":      {key, "x", nonce, ct},
	} {
		if _, err := DecryptResource([]byte(args[0]), args[1], args[2], args[3]); err == nil {
			t.Errorf("%s: decrypted", name)
		}
	}
}

// Source: wechatpay-apiv3/wechatpay-go core/notify/notify_test.go TestHandler_ParseNotifyRequest:
// a signed, encrypted notification and the certificate that verifies it.
func TestKnownAnswerNotification(t *testing.T) {
	pub, err := platformclient.LoadPublicKey(loadFixture(t, "wechatpay-go_notify_cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	const plaintext = `{"mchid":"1234567890","appid":"054aa7d7a2a54ab5898df65bd96f001c","create_time":"2020-06-30T12:12:00+08:00","out_contract_code":"21640bdbd08e473e828f3206a2741c6e"}`
	body := `{"id":"3119dfba-e649-5eec-ab1e-3412bc4d2e17","create_time":"2021-06-24T16:37:26+08:00","resource_type":"encrypt-resource","event_type":"PAYSCORE.USER_OPEN_SERVICE","summary":"签约成功","resource":{"original_type":"payscore","algorithm":"AEAD_AES_256_GCM","ciphertext":"YDS3lKPaC4Y52Gf3uhft5qUBlIa8b428AWTtTauHQfQrRw+X1WpiuHIDy0vo1Vd6VEq67aVyqPdDYMkRVSDaZL3iZttevRMOoPKMifozg6XPWjIZumks/GpT48lI4NizyeaqLBokNebthah3o1H76qSlO9NkDjp9bzmKLEYYH9TEklFUpsvPqOTOcgSLgh21YJXYR7dEBXFgRLiNIKRgO5JdXh1hccRUAlyVWxE54PXpnQ==","associated_data":"payscore","nonce":"Kj7QIyUiYx1q"}}`
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderNonce, "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz")
	h.Set(HeaderTimestamp, "1624523846")
	h.Set(HeaderSerial, "D7CE59D1F522D701")
	h.Set(HeaderSignature, "tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyXFlbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9FjDR//rxELLwXvV1VEA1IBLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmPQvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY406ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrFmtxw2Q==")

	// The vector's API v3 key is 16 bytes, so the verifier is built directly rather than
	// through NewNotifyVerifier, which insists on production's 32.
	nv := &NotifyVerifier{
		verifier: Verifier{PublicKey: pub, PublicKeyID: "D7CE59D1F522D701", Now: func() time.Time { return time.Unix(1624523846, 0) }},
		apiV3Key: []byte("testMchAPIv3Key0"),
	}
	plain, n, err := nv.open(h, []byte(body))
	if err != nil {
		t.Fatalf("published notification rejected: %v", err)
	}
	if string(plain) != plaintext || n.ID != "3119dfba-e649-5eec-ab1e-3412bc4d2e17" || n.Summary != "签约成功" {
		t.Fatalf("plaintext %q, envelope %+v", plain, n)
	}
	// It is a pay-score event, which payrecon does not read: verified, then ignored by name
	// (acknowledged by the handler, so WeChat Pay does not send it again for a day).
	if n, err := nv.ParseNotify(h, []byte(body)); err != nil || n.Ignored != "PAYSCORE.USER_OPEN_SERVICE" || n.Payment != nil || n.Refund != nil {
		t.Fatalf("a pay-score notification: %+v, %v; want ignored", n, err)
	}
	// Ignored only once verified: tampered, it is a bad signature.
	if _, err := nv.ParseNotify(h, []byte(body[:len(body)-2]+" }}")); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered pay-score notification: %v, want ErrBadSignature", err)
	}
	// Signature first: a tampered body is refused as a bad signature, before any decryption.
	tampered := []byte(body[:len(body)-2] + " }}")
	if _, _, err := nv.open(h, tampered); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered notification: %v, want ErrBadSignature", err)
	}
	// A wrong API v3 key: verified but undecryptable, malformed (HTTP 400).
	nv.apiV3Key = []byte("testMchAPIv3Key1")
	if _, _, err := nv.open(h, []byte(body)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("wrong API v3 key: %v, want ErrMalformed", err)
	}
}

// A refund query answer shaped as the documentation's example, signed by an independent
// implementation: `openssl dgst -sha256 -sign doc_merchant_test_key.pem` over
// "1606810693\nD0DB1E38E6B4A5B7F46A4C8E4B1B2C77\n<body>\n" (the published test key stands
// in for WeChat Pay's, whose private half nobody publishes). PKCS#1 v1.5 is deterministic, so
// the signature is a fixed string: the answer must verify byte for byte, a changed byte must
// not, and the verified answer must read as the refund it describes.
func TestKnownAnswerRefundResponse(t *testing.T) {
	const (
		ts    = "1606810693"
		nonce = "D0DB1E38E6B4A5B7F46A4C8E4B1B2C77"
		body  = `{"refund_id":"50000000382019052709732678859","out_refund_no":"1217752501201407033233368018","transaction_id":"4200000709202012014171296823","out_trade_no":"1217752501201407033233368018","channel":"ORIGINAL","user_received_account":"招商银行信用卡0403","success_time":"2020-12-01T16:18:12+08:00","create_time":"2020-12-01T16:18:12+08:00","status":"SUCCESS","funds_account":"UNSETTLED","amount":{"total":100,"refund":100,"payer_total":90,"payer_refund":90,"settlement_refund":100,"settlement_total":100,"discount_refund":10,"currency":"CNY","refund_fee":0},"promotion_detail":[]}`
		sig   = "Rk5dUWDjDqNlx5AG813cHjZPiNl6f6L+/jmRYfLV75MbX+4U5xxmXJoFztS7nBSosvi/AjUdv3UV76nDsnJkd7/H9mdLaIGg6E7ILFTp84kRIM6Dd+ny8BhxsM/RrUWUW59xH9nAcZ9w0uZaqzj2mXXh0CTU6wmz0Dxqy5oCUZ7hHlWCvExwvWA59fUfhX/DP5QIkuhckRvyEWV1bL2Dcf+fA26v8A3LUvnmfB3Q/aAiLnw8NzkFOiRFs61capwVI0DbeLLVGmKbVrFml7Spl8GA8MPRs/aM/pzNIqglxCA8kIqIPHohME8DCUA8Y7ABoauzYXWgvRoriHOeRRq2kQ=="
		keyID = "PUB_KEY_ID_0114232134912410000000000000000042"
	)
	key, err := platformclient.LoadPrivateKey(loadFixture(t, "doc_merchant_test_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	// Our signer reproduces the published-key signature exactly.
	if got, err := platformclient.SignSHA256(key, ResponseMessage(ts, nonce, []byte(body))); err != nil || got != sig {
		t.Fatalf("our signature %q, %v; want openssl's", got, err)
	}
	now := func() time.Time { return time.Unix(1606810693+30, 0) }
	h := http.Header{}
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderSignature, sig)
	h.Set(HeaderSerial, keyID)
	v := Verifier{PublicKey: &key.PublicKey, PublicKeyID: keyID, Now: now}
	if err := v.Verify(h, []byte(body)); err != nil {
		t.Fatalf("known refund answer rejected: %v", err)
	}
	if err := v.Verify(h, []byte(strings.Replace(body, `"refund":100`, `"refund":900`, 1))); err == nil {
		t.Fatal("a refund answer with another amount verified")
	}
	// The same bytes through the client's refund query: verified, then read.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, vs := range h {
			w.Header()[k] = vs
		}
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL, MchID: "1900007291", SerialNo: "408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB", PrivateKey: key,
		PlatformPublicKey: &key.PublicKey, PublicKeyID: keyID, MaxRetries: -1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.QueryRefund(context.Background(), "1217752501201407033233368018", "1217752501201407033233368018")
	if err != nil {
		t.Fatal(err)
	}
	if res.State != reconcile.RefundStateSuccess || res.AmountMinor != 100 || res.Currency != "CNY" ||
		res.PlatformRefundNo != "50000000382019052709732678859" || res.PlatformTradeNo != "4200000709202012014171296823" ||
		res.SucceededAt.Unix() != 1606810692 || res.MerchantID != "1900007291" || res.RawDigest != platformclient.Digest([]byte(body)) {
		t.Fatalf("read %+v", res)
	}
}
