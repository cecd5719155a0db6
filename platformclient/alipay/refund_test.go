package alipay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// refundNotifyBody is signedNotify sent again for a refund: out_biz_no, refund_fee (the
// trade's running total) and gmt_refund added, trade_status as given.
func refundNotifyBody(t testing.TB, total, status string, mod func(url.Values)) []byte {
	return signedNotify(t, fuzzKey(t), func(v url.Values) {
		v.Set("out_biz_no", "ORDER-1-R2")
		v.Set("refund_fee", total)
		v.Set("gmt_refund", "2024-03-02 09:15:00.5")
		v.Set("trade_status", status)
		if mod != nil {
			mod(v)
		}
	})
}

func TestParseNotifyRefund(t *testing.T) {
	pub := &fuzzKey(t).PublicKey
	china := func(s string) time.Time {
		at, err := time.ParseInLocation("2006-01-02 15:04:05.999", s, platformclient.ChinaTime)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	cases := []struct {
		name      string
		body      []byte
		total     int64
		at        time.Time
		tradeWord string
	}{
		{"partial refund, trade still paid", refundNotifyBody(t, "30.00", StatusTradeSuccess, nil), 3000,
			china("2024-03-02 09:15:00.5"), StatusTradeSuccess},
		// Fully refunded: TRADE_CLOSED on a paid trade. A refund, never read as a close.
		{"full refund, TRADE_CLOSED", refundNotifyBody(t, "88.88", StatusTradeClosed, nil), 8888,
			china("2024-03-02 09:15:00.5"), StatusTradeClosed},
		{"gmt_refund without a fraction", refundNotifyBody(t, "0.01", StatusTradeSuccess, func(v url.Values) {
			v.Set("gmt_refund", "2024-03-02 09:15:00")
		}), 1, china("2024-03-02 09:15:00"), StatusTradeSuccess},
		{"gmt_refund with milliseconds", refundNotifyBody(t, "10", StatusTradeFinished, func(v url.Values) {
			v.Set("gmt_refund", "2024-03-02 09:15:00.123")
		}), 1000, china("2024-03-02 09:15:00.123"), StatusTradeFinished},
		{"no gmt_refund", refundNotifyBody(t, "1.5", StatusTradeSuccess, func(v url.Values) { v.Del("gmt_refund") }),
			150, time.Time{}, StatusTradeSuccess},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseNotify(tc.body, pub)
			if err != nil || n.Refund == nil || n.Payment != nil || n.Ignored != "" {
				t.Fatalf("%+v, %v; want a refund", n, err)
			}
			want := reconcile.RefundResult{Platform: reconcile.Alipay, MerchantID: "2021000122600001", OutTradeNo: "ORDER-1",
				PlatformTradeNo: "2024030122001419991400012345", OutRefundNo: "ORDER-1-R2", State: reconcile.RefundStateSuccess,
				RawState: tc.tradeWord, RefundedTotalMinor: tc.total, SucceededAt: tc.at, Source: reconcile.SourceNotify,
				RawDigest: platformclient.Digest(tc.body)}
			got := *n.Refund
			if !got.SucceededAt.Equal(want.SucceededAt) {
				t.Fatalf("succeeded at %v, want %v", got.SucceededAt, want.SucceededAt)
			}
			got.SucceededAt = want.SucceededAt
			if got != want {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseNotifyRefundRefusals(t *testing.T) {
	key := fuzzKey(t)
	pub := &key.PublicKey
	full := refundNotifyBody(t, "88.88", StatusTradeClosed, nil)
	badSig := map[string][]byte{
		"tampered refund_fee": bytes.Replace(full, []byte("refund_fee=88.88"), []byte("refund_fee=8.88"), 1),
		"out_biz_no added":    bytes.Replace(signedNotify(t, key, nil), []byte("app_id="), []byte("out_biz_no=X&refund_fee=88.88&app_id="), 1),
		"no sign":             []byte(withoutParam(full, "sign")),
	}
	for name, b := range badSig {
		if n, err := ParseNotify(b, pub); !errors.Is(err, ErrBadSignature) || n != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrBadSignature", name, n, err)
		}
	}
	malformed := map[string][]byte{
		"no refund_fee":         refundNotifyBody(t, "1.00", StatusTradeSuccess, func(v url.Values) { v.Del("refund_fee") }),
		"three decimals":        refundNotifyBody(t, "1.005", StatusTradeSuccess, nil),
		"negative":              refundNotifyBody(t, "-1.00", StatusTradeSuccess, nil),
		"zero":                  refundNotifyBody(t, "0.00", StatusTradeSuccess, nil),
		"float-looking":         refundNotifyBody(t, "1e2", StatusTradeSuccess, nil),
		"unreadable gmt_refund": refundNotifyBody(t, "1.00", StatusTradeSuccess, func(v url.Values) { v.Set("gmt_refund", "today") }),
		"no out_trade_no":       refundNotifyBody(t, "1.00", StatusTradeSuccess, func(v url.Values) { v.Del("out_trade_no") }),
		"no app_id":             refundNotifyBody(t, "1.00", StatusTradeSuccess, func(v url.Values) { v.Del("app_id") }),
	}
	for name, b := range malformed {
		if n, err := ParseNotify(b, pub); !errors.Is(err, ErrMalformed) || n != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrMalformed", name, n, err)
		}
	}
	// Without out_biz_no a TRADE_CLOSED notification is the trade's own: a payment-side close.
	closed := signedNotify(t, key, func(v url.Values) { v.Set("trade_status", StatusTradeClosed) })
	if n, err := ParseNotify(closed, pub); err != nil || n.Payment == nil || n.Payment.State != reconcile.StateClosed {
		t.Errorf("plain TRADE_CLOSED: %+v, %v; want a payment notification, closed", n, err)
	}
}

// refundGateway answers every call with node (signed with key unless key is nil) and
// remembers the last form it was sent.
type refundGateway struct {
	mu   sync.Mutex
	node string
	key  *rsa.PrivateKey
	sent url.Values
}

func (g *refundGateway) serve(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent = r.PostForm
	body := `{"alipay_trade_fastpay_refund_query_response":` + g.node
	if g.key != nil {
		sig, _ := platformclient.SignSHA256(g.key, []byte(g.node))
		body += `,"sign":"` + sig + `"`
	}
	_, _ = io.WriteString(w, body+"}")
}

func TestQueryRefund(t *testing.T) {
	g := &refundGateway{}
	srv := httptest.NewServer(http.HandlerFunc(g.serve))
	defer srv.Close()
	app := rsaKey(t, 0)
	c, err := New(Config{Gateway: srv.URL, AppID: "2021000122600001", PrivateKey: app, AlipayPublicKey: &fuzzKey(t).PublicKey,
		MaxRetries: -1, Tuning: platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	const ids = `"out_request_no":"ORDER-1-R2","out_trade_no":"ORDER-1","trade_no":"2024030122001419991400012345"`
	paidBack := time.Date(2024, 3, 2, 9, 15, 0, 0, platformclient.ChinaTime)
	cases := []struct {
		name     string
		node     string
		unsigned bool
		state    reconcile.RefundState
		amount   int64
		at       time.Time
		kind     reconcile.PlatformErrorKind // 0: a result
	}{
		{"success", `{"code":"10000","msg":"Success","gmt_refund_pay":"2024-03-02 09:15:00",` + ids + `,"refund_amount":"30.00","refund_status":"REFUND_SUCCESS","total_amount":"88.88"}`,
			false, reconcile.RefundStateSuccess, 3000, paidBack, 0},
		{"success without refund_status", `{"code":"10000","msg":"Success",` + ids + `,"refund_amount":"0.01","total_amount":"88.88"}`,
			false, reconcile.RefundStateSuccess, 1, time.Time{}, 0},
		{"amount as a JSON number", `{"code":"10000","msg":"Success",` + ids + `,"refund_amount":12.5,"refund_status":"REFUND_SUCCESS"}`,
			false, reconcile.RefundStateSuccess, 1250, time.Time{}, 0},
		{"no refund_amount: no such refund", `{"code":"10000","msg":"Success",` + ids + `}`,
			false, reconcile.RefundStateNotFound, 0, time.Time{}, 0},
		{"trade not exist, signed", `{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在"}`,
			false, reconcile.RefundStateNotFound, 0, time.Time{}, 0},
		{"undocumented refund_status", `{"code":"10000","msg":"Success",` + ids + `,"refund_amount":"30.00","refund_status":"REFUND_PENDING"}`,
			false, reconcile.RefundStateProcessing, 0, time.Time{}, 0},
		{"unsigned success", `{"code":"10000","msg":"Success",` + ids + `,"refund_amount":"30.00"}`,
			true, "", 0, time.Time{}, reconcile.KindBadSignature},
		{"unsigned no-refund answer", `{"code":"10000","msg":"Success",` + ids + `}`,
			true, "", 0, time.Time{}, reconcile.KindBadSignature},
		{"unsigned trade not exist", `{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在"}`,
			true, "", 0, time.Time{}, reconcile.KindBadSignature},
		{"signed answer about another refund", `{"code":"10000","msg":"Success","out_request_no":"ORDER-1-R9","out_trade_no":"ORDER-1","refund_amount":"30.00"}`,
			false, "", 0, time.Time{}, reconcile.KindBadSignature},
		{"signed answer about another trade", `{"code":"10000","msg":"Success","out_request_no":"ORDER-1-R2","out_trade_no":"ORDER-9","refund_amount":"30.00"}`,
			false, "", 0, time.Time{}, reconcile.KindBadSignature},
		{"three decimals", `{"code":"10000","msg":"Success",` + ids + `,"refund_amount":"30.001"}`,
			false, "", 0, time.Time{}, reconcile.KindPermanent},
		{"unreadable gmt_refund_pay", `{"code":"10000","msg":"Success",` + ids + `,"refund_amount":"30.00","gmt_refund_pay":"soon"}`,
			false, "", 0, time.Time{}, reconcile.KindPermanent},
		{"unsigned system error: classified", `{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR"}`,
			true, "", 0, time.Time{}, reconcile.KindRetryable},
		{"throttled", `{"code":"40005","msg":"Call Limited","sub_code":"aop.call-limited"}`,
			true, "", 0, time.Time{}, reconcile.KindRateLimited},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g.mu.Lock()
			g.node, g.key = tc.node, fuzzKey(t)
			if tc.unsigned {
				g.key = nil
			}
			g.mu.Unlock()
			res, err := c.QueryRefund(context.Background(), "ORDER-1", "ORDER-1-R2")
			if got := reconcile.PlatformErrorKindOf(err); got != tc.kind {
				t.Fatalf("%+v, %v; want kind %v", res, err, tc.kind)
			}
			if tc.kind != 0 {
				return
			}
			if res.State != tc.state || res.AmountMinor != tc.amount || !res.SucceededAt.Equal(tc.at) ||
				res.Platform != reconcile.Alipay || res.MerchantID != "2021000122600001" || res.OutTradeNo != "ORDER-1" ||
				res.OutRefundNo != "ORDER-1-R2" || res.PlatformRefundNo != "" || res.RawDigest == "" {
				t.Fatalf("got %+v", res)
			}
		})
	}
	g.mu.Lock()
	sent := g.sent
	g.mu.Unlock()
	if sent.Get("method") != MethodRefundQuery || VerifyRequest(&app.PublicKey, sent) != nil ||
		sent.Get("biz_content") != `{"out_trade_no":"ORDER-1","out_request_no":"ORDER-1-R2","query_options":["gmt_refund_pay"]}` {
		t.Fatalf("request %v", sent)
	}
	if _, err := c.QueryRefund(context.Background(), "ORDER-1", ""); reconcile.PlatformErrorKindOf(err) != reconcile.KindPermanent {
		t.Fatalf("empty out_request_no: %v", err)
	}
}
