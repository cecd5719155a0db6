package wechatpay

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

var (
	testKeyOnce sync.Once
	testKey     *rsa.PrivateKey
)

func platformKey(t testing.TB) *rsa.PrivateKey {
	testKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

const (
	testKeyID = "PUB_KEY_ID_0114232134912410000000000000000042"
	testV3Key = "0123456789abcdefghijABCDEFGHIJ01"
)

var testNow = time.Unix(1709259630, 0) // 2024-03-01 10:20:30 +08:00

const paidTransaction = `{"amount":{"total":8888,"payer_total":8888,"currency":"CNY","payer_currency":"CNY"},"appid":"wxd678efh567hg6787","bank_type":"OTHERS","mchid":"1900000001","out_trade_no":"ORDER-1","payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},"success_time":"2024-03-01T10:20:30+08:00","trade_state":"SUCCESS","trade_state_desc":"支付成功","trade_type":"NATIVE","transaction_id":"4200002024030100000000000001"}`

// callback builds a signed, encrypted callback as WeChat Pay sends it.
func callback(t testing.TB, key *rsa.PrivateKey, plaintext string, at time.Time) (http.Header, []byte) {
	ct, err := EncryptResource([]byte(testV3Key), "transaction", "fXKB2UL0MqJ4", []byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"EV-2018022511223320873","create_time":"2024-03-01T10:20:31+08:00","resource_type":"encrypt-resource","event_type":"TRANSACTION.SUCCESS","summary":"支付成功","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM","ciphertext":"` + ct + `","associated_data":"transaction","nonce":"fXKB2UL0MqJ4"}}`)
	h := http.Header{}
	if err := SignResponse(h, key, testKeyID, at, body); err != nil {
		t.Fatal(err)
	}
	return h, body
}

func testVerifier(t testing.TB) *NotifyVerifier {
	nv, err := NewNotifyVerifier(&platformKey(t).PublicKey, testKeyID, []byte(testV3Key), func() time.Time { return testNow })
	if err != nil {
		t.Fatal(err)
	}
	return nv
}

func TestParseNotifyPaid(t *testing.T) {
	nv := testVerifier(t)
	h, body := callback(t, platformKey(t), paidTransaction, testNow)
	n, err := nv.ParseNotify(h, body)
	if err != nil || n.Payment == nil || n.Refund != nil || n.Ignored != "" {
		t.Fatalf("%+v, %v; want a payment", n, err)
	}
	res := *n.Payment
	if res.Platform != reconcile.WechatPay || res.MerchantID != "1900000001" || res.OutTradeNo != "ORDER-1" ||
		res.PlatformTradeNo != "4200002024030100000000000001" || res.State != reconcile.StatePaid || res.AmountMinor != 8888 ||
		res.Currency != "CNY" || !res.PaidAt.Equal(testNow) || res.SellerID != "wxd678efh567hg6787" ||
		res.Source != reconcile.SourceNotify || res.RawDigest != platformclient.Digest(body) {
		t.Fatalf("got %+v", res)
	}
}

func TestParseNotifyRefusals(t *testing.T) {
	nv := testVerifier(t)
	key := platformKey(t)
	other, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	type input struct {
		h    http.Header
		body []byte
	}
	mk := func(mod func(http.Header, []byte) (http.Header, []byte)) input {
		h, b := callback(t, key, paidTransaction, testNow)
		h, b = mod(h, b)
		return input{h, b}
	}
	badSig := map[string]input{
		"tampered body": mk(func(h http.Header, b []byte) (http.Header, []byte) {
			return h, bytes.Replace(b, []byte("支付成功"), []byte("支付失败"), 1)
		}),
		"other key": func() input { h, b := callback(t, other, paidTransaction, testNow); return input{h, b} }(),
		"stale 300s": func() input {
			h, b := callback(t, key, paidTransaction, testNow.Add(-300*time.Second))
			return input{h, b}
		}(),
		"future 300s": func() input {
			h, b := callback(t, key, paidTransaction, testNow.Add(300*time.Second))
			return input{h, b}
		}(),
		"signtest probe": mk(func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderSignature, SignTestPrefix+h.Get(HeaderSignature))
			return h, b
		}),
		"wrong serial": mk(func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderSerial, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1")
			return h, b
		}),
		"no headers": mk(func(_ http.Header, b []byte) (http.Header, []byte) { return http.Header{}, b }),
	}
	for name, in := range badSig {
		res, err := nv.ParseNotify(in.h, in.body)
		if !errors.Is(err, ErrBadSignature) || res != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrBadSignature and no Result", name, res, err)
		}
	}
	// 299 s of skew is still inside the window.
	h, b := callback(t, key, paidTransaction, testNow.Add(-299*time.Second))
	if _, err := nv.ParseNotify(h, b); err != nil {
		t.Errorf("299s skew: %v", err)
	}

	// Verified but unreadable: 400, not 401.
	resign := func(body []byte) input {
		h := http.Header{}
		if err := SignResponse(h, key, testKeyID, testNow, body); err != nil {
			t.Fatal(err)
		}
		return input{h, body}
	}
	_, good := callback(t, key, paidTransaction, testNow)
	malformed := map[string]input{
		"not json":          resign([]byte("hello")),
		"tampered cipher":   resign(bytes.Replace(good, []byte(`"ciphertext":"`), []byte(`"ciphertext":"AAAA`), 1)),
		"other algorithm":   resign(bytes.Replace(good, []byte("AEAD_AES_256_GCM"), []byte("AEAD_SM4_GCM"), 1)),
		"other aad":         resign(bytes.Replace(good, []byte(`"associated_data":"transaction"`), []byte(`"associated_data":"refund"`), 1)),
		"not a transaction": func() input { h, b := callback(t, key, `{"refund_id":"1"}`, testNow); return input{h, b} }(),
		"float amount": func() input {
			h, b := callback(t, key, `{"out_trade_no":"X","trade_state":"SUCCESS","amount":{"total":88.8}}`, testNow)
			return input{h, b}
		}(),
		"bad time": func() input {
			h, b := callback(t, key, `{"out_trade_no":"X","trade_state":"SUCCESS","amount":{"total":1},"success_time":"yesterday"}`, testNow)
			return input{h, b}
		}(),
	}
	for name, in := range malformed {
		res, err := nv.ParseNotify(in.h, in.body)
		if !errors.Is(err, ErrMalformed) || res != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrMalformed", name, res, err)
		}
	}
	// Another API v3 key: verified, undecryptable.
	nv2, _ := NewNotifyVerifier(&key.PublicKey, testKeyID, []byte("ABCDEFGHIJ0123456789abcdefghij01"), func() time.Time { return testNow })
	h, b = callback(t, key, paidTransaction, testNow)
	if _, err := nv2.ParseNotify(h, b); !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong API v3 key: %v", err)
	}
	if _, err := NewNotifyVerifier(&key.PublicKey, testKeyID, []byte("16-byte-key-0000"), nil); err == nil {
		t.Error("a 16-byte API v3 key was accepted")
	}
}

func TestParseAPIv3Key(t *testing.T) {
	for in, ok := range map[string]bool{testV3Key: true, testV3Key + "\n": true, testV3Key + "\r\n": true, testV3Key + " ": false, "short\n": false} {
		k, err := ParseAPIv3Key([]byte(in))
		if (err == nil) != ok || (ok && string(k) != testV3Key) {
			t.Errorf("%q: %q, %v", in, k, err)
		}
		if err != nil && bytes.Contains([]byte(err.Error()), []byte(in[:5])) {
			t.Errorf("error quotes the key: %v", err)
		}
	}
}

// FuzzParseNotify: no input panics; a callback is accepted only if its headers verify, and
// every refusal is classified (401 vs 400).
func FuzzParseNotify(f *testing.F) {
	key := platformKey(f)
	h, body := callback(f, key, paidTransaction, testNow)
	f.Add(h.Get(HeaderTimestamp), h.Get(HeaderNonce), h.Get(HeaderSignature), h.Get(HeaderSerial), body)
	h2, body2 := callback(f, key, `{"out_trade_no":"Y","trade_state":"CLOSED"}`, testNow)
	f.Add(h2.Get(HeaderTimestamp), h2.Get(HeaderNonce), h2.Get(HeaderSignature), h2.Get(HeaderSerial), body2)
	f.Add("1709259630", "n", SignTestPrefix+"abc", testKeyID, []byte(`{}`))
	f.Add("", "", "", "", []byte(nil))
	nv := testVerifier(f)
	f.Fuzz(func(t *testing.T, ts, nonce, sig, serial string, body []byte) {
		h := http.Header{}
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderNonce, nonce)
		h.Set(HeaderSignature, sig)
		h.Set(HeaderSerial, serial)
		n, err := nv.ParseNotify(h, body)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			if n != (reconcile.Notification{}) {
				t.Fatalf("error with a Notification %+v", n)
			}
			return
		}
		if nv.verifier.Verify(h, body) != nil {
			t.Fatal("accepted a callback whose signature does not verify")
		}
		switch {
		case n.Payment != nil && n.Refund == nil && n.Ignored == "":
			if res := n.Payment; res.Source != reconcile.SourceNotify || res.RawDigest != platformclient.Digest(body) || res.OutTradeNo == "" {
				t.Fatalf("result %+v", res)
			}
		case n.Refund != nil && n.Payment == nil && n.Ignored == "":
			if r := n.Refund; r.Source != reconcile.SourceNotify || r.RawDigest != platformclient.Digest(body) || r.OutRefundNo == "" || r.MerchantID == "" {
				t.Fatalf("refund %+v", r)
			}
		case n.Ignored != "" && n.Payment == nil && n.Refund == nil:
		default:
			t.Fatalf("not exactly one of payment, refund, ignored: %+v", n)
		}
	})
}
