package wechatpay

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// eventCallback builds a signed, encrypted callback of any event, as WeChat Pay sends it.
func eventCallback(t testing.TB, key *rsa.PrivateKey, event, originalType, plaintext string) (http.Header, []byte) {
	t.Helper()
	ct, err := EncryptResource([]byte(testV3Key), originalType, "Jq6bIW1Ze9Lk", []byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"EV-2018022511223320873","create_time":"2024-03-01T10:20:31+08:00","resource_type":"encrypt-resource","event_type":"` +
		event + `","summary":"退款成功","resource":{"original_type":"` + originalType + `","algorithm":"AEAD_AES_256_GCM","ciphertext":"` +
		ct + `","associated_data":"` + originalType + `","nonce":"Jq6bIW1Ze9Lk"}}`)
	h := http.Header{}
	if err := SignResponse(h, key, testKeyID, testNow, body); err != nil {
		t.Fatal(err)
	}
	return h, body
}

// refundObject is a decrypted refund callback resource; status "" leaves refund_status out.
func refundObject(status string) string {
	st := ""
	if status != "" {
		st = `"refund_status":"` + status + `",`
	}
	return `{"mchid":"1900000001","out_trade_no":"ORDER-1","transaction_id":"4200002024030100000000000001","out_refund_no":"ORDER-1-R1",` +
		`"refund_id":"50300908092024030100000000001",` + st + `"success_time":"2024-03-01T10:20:30+08:00",` +
		`"user_received_account":"支付用户零钱","amount":{"total":8888,"refund":3000,"payer_total":8888,"payer_refund":3000}}`
}

func TestParseNotifyRefund(t *testing.T) {
	nv := testVerifier(t)
	key := platformKey(t)
	for _, tc := range []struct {
		event, status string
		want          reconcile.RefundState
	}{
		{EventRefundSuccess, "SUCCESS", reconcile.RefundStateSuccess},
		{EventRefundAbnormal, "ABNORMAL", reconcile.RefundStateAbnormal},
		{EventRefundClosed, "CLOSED", reconcile.RefundStateClosed},
		// The object's refund_status decides; the event stands in when the object has none.
		{EventRefundSuccess, "", reconcile.RefundStateSuccess},
		{EventRefundClosed, "", reconcile.RefundStateClosed},
	} {
		t.Run(tc.event+"/"+tc.status, func(t *testing.T) {
			h, body := eventCallback(t, key, tc.event, OriginalRefund, refundObject(tc.status))
			n, err := nv.ParseNotify(h, body)
			if err != nil || n.Refund == nil || n.Payment != nil || n.Ignored != "" {
				t.Fatalf("%+v, %v; want a refund", n, err)
			}
			r := *n.Refund
			want := reconcile.RefundResult{Platform: reconcile.WechatPay, MerchantID: "1900000001", OutTradeNo: "ORDER-1",
				PlatformTradeNo: "4200002024030100000000000001", OutRefundNo: "ORDER-1-R1", PlatformRefundNo: "50300908092024030100000000001",
				State: tc.want, RawState: strings.TrimPrefix(tc.event, "REFUND."), AmountMinor: 3000, SucceededAt: r.SucceededAt,
				Source: reconcile.SourceNotify, RawDigest: platformclient.Digest(body)}
			if r != want || !r.SucceededAt.Equal(testNow) {
				t.Fatalf("got  %+v\nwant %+v", r, want)
			}
		})
	}
}

func TestParseNotifyRouting(t *testing.T) {
	nv := testVerifier(t)
	key := platformKey(t)
	cases := []struct {
		name, event, original, plaintext string
		want                             string // payment, refund, ignored:<type>
	}{
		{"payment", EventTransactionSuccess, OriginalTransaction, paidTransaction, "payment"},
		{"refund", EventRefundSuccess, OriginalRefund, refundObject("SUCCESS"), "refund"},
		{"no event type, a refund resource", "", OriginalRefund, refundObject("SUCCESS"), "refund"},
		{"no event type, a transaction resource", "", OriginalTransaction, paidTransaction, "payment"},
		// Never decrypted: the key and the object do not matter.
		{"a complaint", "COMPLAINT.CREATE", "complaint", "not json at all", "ignored:COMPLAINT.CREATE"},
		{"an unknown refund event", "REFUND.PROCESSING", OriginalRefund, "{}", "ignored:REFUND.PROCESSING"},
		{"a transfer", "MCHTRANSFER.BILL.FINISHED", "mch_payment", "{}", "ignored:MCHTRANSFER.BILL.FINISHED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, body := eventCallback(t, key, tc.event, tc.original, tc.plaintext)
			n, err := nv.ParseNotify(h, body)
			if err != nil {
				t.Fatal(err)
			}
			got := "none"
			switch {
			case n.Payment != nil && n.Refund == nil && n.Ignored == "":
				got = "payment"
			case n.Refund != nil && n.Payment == nil && n.Ignored == "":
				got = "refund"
			case n.Ignored != "" && n.Payment == nil && n.Refund == nil:
				got = "ignored:" + n.Ignored
			}
			if got != tc.want {
				t.Fatalf("%+v: %s, want %s", n, got, tc.want)
			}
		})
	}
	// Neither an event type nor a resource payrecon reads: a malformed callback.
	h, body := eventCallback(t, key, "", "complaint", "{}")
	if _, err := nv.ParseNotify(h, body); !errors.Is(err, ErrMalformed) {
		t.Fatalf("no event type, unknown resource: %v, want ErrMalformed", err)
	}
}

func TestParseNotifyRefundRefusals(t *testing.T) {
	nv := testVerifier(t)
	key := platformKey(t)
	other, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	// Verification comes first, for refunds and ignored events alike.
	h, good := eventCallback(t, key, EventRefundSuccess, OriginalRefund, refundObject("SUCCESS"))
	badSig := map[string]func() (http.Header, []byte){
		"tampered": func() (http.Header, []byte) {
			return h, bytes.Replace(good, []byte("退款成功"), []byte("退款失败"), 1)
		},
		"other key": func() (http.Header, []byte) {
			return eventCallback(t, other, EventRefundSuccess, OriginalRefund, refundObject("SUCCESS"))
		},
		"unsigned": func() (http.Header, []byte) { return http.Header{}, good },
		"ignored event, other key": func() (http.Header, []byte) {
			return eventCallback(t, other, "COMPLAINT.CREATE", "complaint", "{}")
		},
	}
	for name, mk := range badSig {
		h, b := mk()
		if n, err := nv.ParseNotify(h, b); !errors.Is(err, ErrBadSignature) || n != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrBadSignature", name, n, err)
		}
	}
	malformed := map[string]string{
		"not json":            "refund",
		"no out_refund_no":    strings.Replace(refundObject("SUCCESS"), `"out_refund_no":"ORDER-1-R1",`, "", 1),
		"no mchid":            strings.Replace(refundObject("SUCCESS"), `"mchid":"1900000001",`, "", 1),
		"no out_trade_no":     strings.Replace(refundObject("SUCCESS"), `"out_trade_no":"ORDER-1",`, "", 1),
		"unknown status":      refundObject("REFUNDED"),
		"no amount":           `{"mchid":"1","out_trade_no":"O","out_refund_no":"R","refund_status":"SUCCESS"}`,
		"no amount.refund":    `{"mchid":"1","out_trade_no":"O","out_refund_no":"R","refund_status":"SUCCESS","amount":{"total":1}}`,
		"float amount":        strings.Replace(refundObject("SUCCESS"), `"refund":3000`, `"refund":30.5`, 1),
		"negative amount":     strings.Replace(refundObject("SUCCESS"), `"refund":3000`, `"refund":-1`, 1),
		"amount as a string":  strings.Replace(refundObject("SUCCESS"), `"refund":3000`, `"refund":"3000"`, 1),
		"unreadable time":     strings.Replace(refundObject("SUCCESS"), `2024-03-01T10:20:30+08:00`, `yesterday`, 1),
		"a transaction shape": paidTransaction,
	}
	for name, plain := range malformed {
		h, b := eventCallback(t, key, EventRefundSuccess, OriginalRefund, plain)
		if name == "not json" {
			h, b = eventCallback(t, key, EventRefundSuccess, OriginalRefund, "not json")
		}
		if n, err := nv.ParseNotify(h, b); !errors.Is(err, ErrMalformed) || n != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrMalformed", name, n, err)
		}
	}
	// Verified, but sealed with another API v3 key: undecryptable, malformed.
	nv2, _ := NewNotifyVerifier(&key.PublicKey, testKeyID, []byte("ABCDEFGHIJ0123456789abcdefghij01"), func() time.Time { return testNow })
	if _, err := nv2.ParseNotify(h, good); !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong API v3 key: %v, want ErrMalformed", err)
	}
}

// refundServer answers every request with status and body, signed by key (or unsigned).
type refundServer struct {
	mu     sync.Mutex
	status int
	body   string
	key    *rsa.PrivateKey
	path   string
}

func (s *refundServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.path = r.URL.RequestURI()
	if s.key != nil {
		_ = SignResponse(w.Header(), s.key, testKeyID, testNow, []byte(s.body))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.status)
	_, _ = w.Write([]byte(s.body))
}

func refundClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := New(Config{BaseURL: url, MchID: "1900000001", SerialNo: "AB12", PrivateKey: platformKey(t),
		PlatformPublicKey: &platformKey(t).PublicKey, PublicKeyID: testKeyID, MaxRetries: -1,
		Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestQueryRefund(t *testing.T) {
	srv := &refundServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := refundClient(t, hs.URL)
	other, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(status string) string {
		return `{"refund_id":"50300908092024030100000000001","out_refund_no":"ORDER-1-R1","transaction_id":"4200002024030100000000000001",` +
			`"out_trade_no":"ORDER-1","channel":"ORIGINAL","user_received_account":"支付用户零钱","success_time":"2024-03-01T10:20:30+08:00",` +
			`"create_time":"2024-03-01T10:20:00+08:00","status":"` + status + `","funds_account":"AVAILABLE",` +
			`"amount":{"total":8888,"refund":3000,"payer_total":8888,"payer_refund":3000,"settlement_refund":3000,"settlement_total":8888,"discount_refund":0,"currency":"CNY","refund_fee":0}}`
	}
	notExists := `{"code":"RESOURCE_NOT_EXISTS","message":"退款单不存在"}`
	cases := []struct {
		name   string
		status int
		body   string
		key    *rsa.PrivateKey
		state  reconcile.RefundState
		kind   reconcile.PlatformErrorKind // 0: a result
	}{
		{"success", 200, answer("SUCCESS"), platformKey(t), reconcile.RefundStateSuccess, 0},
		{"closed", 200, answer("CLOSED"), platformKey(t), reconcile.RefundStateClosed, 0},
		{"processing", 200, answer("PROCESSING"), platformKey(t), reconcile.RefundStateProcessing, 0},
		{"abnormal", 200, answer("ABNORMAL"), platformKey(t), reconcile.RefundStateAbnormal, 0},
		{"not exists, signed", 404, notExists, platformKey(t), reconcile.RefundStateNotFound, 0},
		// An unsigned or forged "not found" is never evidence.
		{"not exists, unsigned", 404, notExists, nil, "", reconcile.KindBadSignature},
		{"not exists, other key", 404, notExists, other, "", reconcile.KindBadSignature},
		{"success, unsigned", 200, answer("SUCCESS"), nil, "", reconcile.KindBadSignature},
		{"success, other key", 200, answer("SUCCESS"), other, "", reconcile.KindBadSignature},
		{"another refund's answer", 200, strings.Replace(answer("SUCCESS"), "ORDER-1-R1", "ORDER-1-R9", 1), platformKey(t), "", reconcile.KindBadSignature},
		{"unknown status", 200, answer("REFUNDED"), platformKey(t), "", reconcile.KindPermanent},
		{"float amount", 200, strings.Replace(answer("SUCCESS"), `"refund":3000`, `"refund":30.5`, 1), platformKey(t), "", reconcile.KindPermanent},
		{"throttled", 429, `{"code":"FREQUENCY_LIMITED","message":"频率超限"}`, platformKey(t), "", reconcile.KindRateLimited},
		{"system error", 500, `{"code":"SYSTEM_ERROR","message":"系统错误"}`, platformKey(t), "", reconcile.KindRetryable},
		{"param error", 400, `{"code":"PARAM_ERROR","message":"参数错误"}`, platformKey(t), "", reconcile.KindPermanent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.mu.Lock()
			srv.status, srv.body, srv.key = tc.status, tc.body, tc.key
			srv.mu.Unlock()
			res, err := c.QueryRefund(context.Background(), "ORDER-1", "ORDER-1-R1")
			if got := reconcile.PlatformErrorKindOf(err); got != tc.kind {
				t.Fatalf("%+v, %v; want kind %v", res, err, tc.kind)
			}
			if tc.kind != 0 {
				return
			}
			if res.State != tc.state || res.Platform != reconcile.WechatPay || res.MerchantID != "1900000001" ||
				res.OutTradeNo != "ORDER-1" || res.OutRefundNo != "ORDER-1-R1" || res.RawDigest != platformclient.Digest([]byte(tc.body)) {
				t.Fatalf("got %+v", res)
			}
			if tc.state != reconcile.RefundStateNotFound && (res.AmountMinor != 3000 || res.Currency != "CNY" ||
				res.PlatformRefundNo != "50300908092024030100000000001" || res.PlatformTradeNo != "4200002024030100000000000001" ||
				!res.SucceededAt.Equal(testNow)) {
				t.Fatalf("got %+v", res)
			}
		})
	}
	srv.mu.Lock()
	path := srv.path
	srv.mu.Unlock()
	if path != "/v3/refund/domestic/refunds/ORDER-1-R1" {
		t.Fatalf("asked %s", path)
	}
	if _, err := c.QueryRefund(context.Background(), "ORDER-1", ""); reconcile.PlatformErrorKindOf(err) != reconcile.KindPermanent {
		t.Fatalf("empty out_refund_no: %v", err)
	}
}
