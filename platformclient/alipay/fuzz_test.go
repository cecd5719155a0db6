package alipay

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/url"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

var extractSeeds = []string{
	`{"alipay_trade_query_response":{"code":"10000","msg":"Success","out_trade_no":"X1","total_amount":"88.88","trade_status":"TRADE_SUCCESS"},"sign":"abc="}`,
	`{"sign":"abc=","alipay_trade_query_response":{"code":"10000"}}`,
	`{"alipay_trade_query_response":{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在","buyer_pay_amount":"0.00"},"alipay_cert_sn":"x","sign":"s"}`,
	`{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-app-id"}}`,
	`{"alipay_trade_query_response":{"a":"}{\"}","b":{"c":[1,2,{"d":"\\"}]}},"sign":null}`,
	`{"alipay_trade_query_response":{"buyer_logon_id":"a\/b***@x.com","total_amount":88.8}, "sign" : "q"}`,
	` { "alipay_trade_query_response" : { "code" : "10000" } , "sign" : "" } `,
	`{"alipay_trade_query_response":{"code":"10000","msg":"Succ`,
	`{"alipay_trade_query_response":"nope","sign":"x"}`,
	`{"alipay_trade_query_response":{},"sign":7}`,
	`[]`, ``, `null`, `{"other":{}}`,
}

// FuzzExtractResponse: whatever the body, extraction never panics, and a node it returns is
// a JSON object that appears byte for byte in the body (never a re-serialisation).
func FuzzExtractResponse(f *testing.F) {
	for _, s := range extractSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := ExtractResponse(body, MethodTradeQuery)
		if err != nil {
			return
		}
		if len(env.Node) == 0 || env.Node[0] != '{' || !json.Valid(env.Node) {
			t.Fatalf("node %q is not a JSON object", env.Node)
		}
		if !bytes.Contains(body, env.Node) {
			t.Fatalf("node %q is not the body's own bytes", env.Node)
		}
		if env.Name != "alipay_trade_query_response" && env.Name != "error_response" {
			t.Fatalf("node name %q", env.Name)
		}
	})
}

// FuzzExtractResponseRoundTrip: for any JSON object node and sign wrapped the way Alipay
// writes an answer, extraction returns exactly the node's bytes and the sign.
func FuzzExtractResponseRoundTrip(f *testing.F) {
	f.Add(`{"code":"10000","msg":"Success"}`, "c2lnbg==")
	f.Add(`{"a":"}\"{","b":[{"c":"\\\\"}],"d":"a\/b"}`, "")
	f.Add(`{ "spaced" : 1 , "x":"中文" }`, "+/=")
	f.Add(`{"k":"\u0041"}`, "sig")
	f.Fuzz(func(t *testing.T, node, sign string) {
		n := []byte(node)
		// A sign is base64: only valid UTF-8 survives JSON encoding unchanged.
		if !json.Valid(n) || len(n) == 0 || n[0] != '{' || n[len(n)-1] != '}' || !utf8.ValidString(sign) {
			return // not an input this property speaks about
		}
		signJSON, _ := json.Marshal(sign)
		body := []byte(`{"alipay_trade_query_response":` + node + `,"sign":` + string(signJSON) + `}`)
		env, err := ExtractResponse(body, MethodTradeQuery)
		if err != nil {
			t.Fatalf("extract %s: %v", body, err)
		}
		if !bytes.Equal(env.Node, n) || env.Sign != sign {
			t.Fatalf("got node %q sign %q, want %q %q", env.Node, env.Sign, n, sign)
		}
	})
}

var (
	notifyKeyOnce sync.Once
	notifyKey     *rsa.PrivateKey
)

func fuzzKey(t testing.TB) *rsa.PrivateKey {
	notifyKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		notifyKey = k
	})
	return notifyKey
}

// signedNotify is a realistic trade_status_sync body signed with key.
func signedNotify(t testing.TB, key *rsa.PrivateKey, mod func(url.Values)) []byte {
	f := url.Values{
		"notify_time": {"2024-03-01 10:20:31"}, "notify_type": {"trade_status_sync"}, "notify_id": {"ac05099524730693a8b330c5ecf72da9786"},
		"app_id": {"2021000122600001"}, "auth_app_id": {"2021000122600001"}, "charset": {"utf-8"}, "version": {"1.0"},
		"sign_type": {"RSA2"}, "trade_no": {"2024030122001419991400012345"}, "out_trade_no": {"ORDER-1"},
		"trade_status": {"TRADE_SUCCESS"}, "total_amount": {"88.88"}, "receipt_amount": {"88.88"}, "buyer_pay_amount": {"88.88"},
		"seller_id": {"2088621000000001"}, "buyer_id": {"2088102177846880"}, "gmt_create": {"2024-03-01 10:19:30"},
		"gmt_payment": {"2024-03-01 10:20:30"}, "subject": {"咖啡 & cake + tea=1"},
		"fund_bill_list": {`[{"amount":"88.88","fundChannel":"ALIPAYACCOUNT"}]`}, "passback_params": {""},
	}
	if mod != nil {
		mod(f)
	}
	if err := SignNotify(key, f); err != nil {
		t.Fatal(err)
	}
	return []byte(f.Encode())
}

func TestParseNotify(t *testing.T) {
	key := fuzzKey(t)
	pub := &key.PublicKey
	body := signedNotify(t, key, nil)
	n, err := ParseNotify(body, pub)
	if err != nil || n.Payment == nil || n.Refund != nil || n.Ignored != "" {
		t.Fatalf("%+v, %v; want a payment", n, err)
	}
	res := *n.Payment
	want := reconcile.Result{Platform: reconcile.Alipay, MerchantID: "2021000122600001", OutTradeNo: "ORDER-1",
		PlatformTradeNo: "2024030122001419991400012345", State: reconcile.StatePaid, RawState: "TRADE_SUCCESS",
		AmountMinor: 8888, SellerID: "2088621000000001", Source: reconcile.SourceNotify, RawDigest: platformclient.Digest(body)}
	paid := res.PaidAt
	res.PaidAt = want.PaidAt
	if res != want || paid.UTC().Format("2006-01-02T15:04:05") != "2024-03-01T02:20:30" {
		t.Fatalf("got %+v paid %v\nwant %+v", res, paid, want)
	}

	other, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"tampered amount": bytes.Replace(body, []byte("total_amount=88.88"), []byte("total_amount=98.88"), 1),
		"other key":       signedNotify(t, other, nil),
		"no sign":         []byte(withoutParam(body, "sign")),
		"sign_type RSA":   signedNotify(t, key, func(v url.Values) { v.Set("sign_type", "RSA") }),
	}
	for name, b := range bad {
		res, err := ParseNotify(b, pub)
		if !errors.Is(err, ErrBadSignature) || reconcile.PlatformErrorKindOf(err) != reconcile.KindBadSignature || res != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrBadSignature and no Result", name, res, err)
		}
	}
	malformed := map[string][]byte{
		"three decimals":  signedNotify(t, key, func(v url.Values) { v.Set("total_amount", "88.888") }),
		"unknown status":  signedNotify(t, key, func(v url.Values) { v.Set("trade_status", "TRADE_LOST") }),
		"no out_trade_no": signedNotify(t, key, func(v url.Values) { v.Del("out_trade_no") }),
		"bad gmt":         signedNotify(t, key, func(v url.Values) { v.Set("gmt_payment", "yesterday") }),
		"not a form":      []byte("%zz"),
	}
	for name, b := range malformed {
		res, err := ParseNotify(b, pub)
		if !errors.Is(err, ErrMalformed) || res != (reconcile.Notification{}) {
			t.Errorf("%s: %+v, %v; want ErrMalformed", name, res, err)
		}
	}
	// sign_type takes no part in the signature: dropping it still verifies.
	if _, err := ParseNotify([]byte(withoutParam(body, "sign_type")), pub); err != nil {
		t.Errorf("without sign_type: %v", err)
	}
}

func withoutParam(body []byte, name string) string {
	v, _ := url.ParseQuery(string(body))
	v.Del(name)
	return v.Encode()
}

// FuzzParseNotify: no input panics; an accepted notification always verified and carries
// its body's digest; every refusal is classified for the HTTP handler.
func FuzzParseNotify(f *testing.F) {
	key := fuzzKey(f)
	f.Add(signedNotify(f, key, nil))
	f.Add(signedNotify(f, key, func(v url.Values) { v.Set("trade_status", "TRADE_CLOSED") }))
	f.Add(signedNotify(f, key, func(v url.Values) { v.Set("total_amount", "1e2") }))
	f.Add(signedNotify(f, key, func(v url.Values) {
		v.Set("out_biz_no", "R-1")
		v.Set("refund_fee", "88.88")
		v.Set("gmt_refund", "2024-03-01 10:30:00.123")
		v.Set("trade_status", "TRADE_CLOSED")
	}))
	f.Add([]byte("sign=abc&out_trade_no=1"))
	f.Add([]byte("%%%"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := ParseNotify(body, &key.PublicKey)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			if n != (reconcile.Notification{}) {
				t.Fatalf("error with a Notification: %+v", n)
			}
			return
		}
		form, perr := url.ParseQuery(string(body))
		if perr != nil || VerifyNotifyParams(&key.PublicKey, form) != nil {
			t.Fatalf("accepted a notification that does not verify: %q", body)
		}
		switch {
		case n.Payment != nil && n.Refund == nil && n.Ignored == "":
			res := n.Payment
			if res.Source != reconcile.SourceNotify || res.RawDigest != platformclient.Digest(body) || res.OutTradeNo != form.Get("out_trade_no") {
				t.Fatalf("result %+v", res)
			}
		case n.Refund != nil && n.Payment == nil && n.Ignored == "":
			r := n.Refund
			if r.Source != reconcile.SourceNotify || r.RawDigest != platformclient.Digest(body) || r.OutRefundNo != form.Get("out_biz_no") ||
				r.AmountMinor != 0 || r.RefundedTotalMinor <= 0 {
				t.Fatalf("refund %+v", r)
			}
		default:
			t.Fatalf("not exactly one of payment, refund, ignored: %+v", n)
		}
	})
}
