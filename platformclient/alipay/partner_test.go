package alipay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

const (
	providerApp = "2021000000000009"
	subApp      = "2021000000000101"
	subToken    = "202611BB" + "TEST-ONLY-app-auth-token"
)

// queryGateway answers alipay.trade.query with a paid trade, signed with Alipay's key, and
// keeps every form it was sent.
type queryGateway struct {
	mu   sync.Mutex
	sent []url.Values
}

func (g *queryGateway) serve(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		g.mu.Lock()
		g.sent = append(g.sent, r.PostForm)
		g.mu.Unlock()
		var biz struct {
			OutTradeNo string `json:"out_trade_no"`
		}
		_ = json.Unmarshal([]byte(r.PostForm.Get("biz_content")), &biz)
		node := fmt.Sprintf(`{"code":"10000","msg":"Success","out_trade_no":%q,"trade_no":"2026112822001400000000000042",`+
			`"trade_status":"TRADE_SUCCESS","total_amount":"88.00","send_pay_date":"2026-11-28 10:00:00"}`, biz.OutTradeNo)
		sig, err := platformclient.SignSHA256(fuzzKey(t), []byte(node))
		if err != nil {
			t.Error(err)
		}
		_, _ = io.WriteString(w, `{"alipay_trade_query_response":`+node+`,"sign":"`+sig+`"}`)
	}
}

func newProvider(t *testing.T, gateway string) *Client {
	t.Helper()
	c, err := New(Config{Gateway: gateway, AppID: providerApp, PrivateKey: rsaKey(t, 0), AlipayPublicKey: &fuzzKey(t).PublicKey,
		MaxRetries: -1, Tuning: platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSubMerchantCallsCarryTheAppAuthToken: a provider's view for a sub-merchant signs with
// the provider's key, sends the merchant's app_auth_token as a signed common parameter, and
// names the merchant in its results; the provider's own calls carry no token.
func TestSubMerchantCallsCarryTheAppAuthToken(t *testing.T) {
	g := &queryGateway{}
	srv := httptest.NewServer(g.serve(t))
	defer srv.Close()
	provider := newProvider(t, srv.URL)
	sub, err := provider.ForSubMerchant(subApp, subToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sub.Query(context.Background(), "SUB-ORDER-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.MerchantID != subApp || sub.MerchantID() != subApp || res.State != reconcile.StatePaid || res.AmountMinor != 8800 {
		t.Errorf("sub-merchant's result %+v (client merchant %s), want it to name %s", res, sub.MerchantID(), subApp)
	}
	if _, err := provider.Query(context.Background(), "OWN-ORDER-1"); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sent) != 2 {
		t.Fatalf("%d requests, want 2", len(g.sent))
	}
	asSub, asProvider := g.sent[0], g.sent[1]
	if asSub.Get("app_id") != providerApp || asSub.Get("app_auth_token") != subToken {
		t.Errorf("the sub-merchant's request has app_id %q and app_auth_token %q", asSub.Get("app_id"), asSub.Get("app_auth_token"))
	}
	if err := VerifyRequest(&rsaKey(t, 0).PublicKey, asSub); err != nil {
		t.Errorf("the sub-merchant's request does not verify with the provider's key: %v", err)
	}
	tampered := url.Values{}
	for k, v := range asSub {
		tampered[k] = v
	}
	tampered.Set("app_auth_token", "another merchant's token")
	if VerifyRequest(&rsaKey(t, 0).PublicKey, tampered) == nil {
		t.Error("the signature does not cover app_auth_token")
	}
	if _, has := asProvider["app_auth_token"]; has || asProvider.Get("app_id") != providerApp {
		t.Errorf("the provider's own request %v carries a token", asProvider)
	}
}

func TestSubMerchantViewNeedsItsIDAndTokenAndNeverPrintsTheToken(t *testing.T) {
	provider := newProvider(t, "https://gateway.invalid/gateway.do")
	for _, tc := range [][2]string{{"", subToken}, {subApp, " "}} {
		if _, err := provider.ForSubMerchant(tc[0], tc[1], nil); err == nil {
			t.Errorf("ForSubMerchant(%q, %q) accepted", tc[0], tc[1])
		}
	}
	sub, err := provider.ForSubMerchant(subApp, subToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("%v", *sub), fmt.Sprintf("%+v", *sub), fmt.Sprintf("%#v", *sub), fmt.Sprint(sub.appAuthToken)} {
		if strings.Contains(s, "TEST-ONLY") {
			t.Fatalf("the token printed: %s", s)
		}
	}
}

// TestNotificationsPickTheSubMerchant: a provider app's notification names the merchant in
// auth_app_id, which picks the order; one for a merchant the app does not call for is
// refused like a bad signature; the app's own (auth_app_id = app_id, or none) read as
// before.
func TestNotificationsPickTheSubMerchant(t *testing.T) {
	provider := newProvider(t, "https://gateway.invalid/gateway.do")
	provider.AcceptSubMerchants(map[string]bool{subApp: true})
	body := func(authAppID string) []byte {
		return signedNotify(t, fuzzKey(t), func(v url.Values) {
			v.Set("app_id", providerApp)
			if authAppID == "" {
				v.Del("auth_app_id")
			} else {
				v.Set("auth_app_id", authAppID)
			}
		})
	}
	cases := []struct {
		authAppID, want string
		refused         bool
	}{{subApp, subApp, false}, {providerApp, providerApp, false}, {"", providerApp, false}, {"2021000000000999", "", true}}
	for _, tc := range cases {
		n, err := provider.ParseNotify(body(tc.authAppID))
		if tc.refused {
			if !errors.Is(err, ErrBadSignature) || n.Payment != nil {
				t.Errorf("auth_app_id %s: %+v, %v; want refused as a bad signature", tc.authAppID, n, err)
			}
			continue
		}
		if err != nil || n.Payment == nil || n.Payment.MerchantID != tc.want || n.MerchantID() != tc.want {
			t.Errorf("auth_app_id %q: %+v, %v; want the payment of %s", tc.authAppID, n, err, tc.want)
		}
	}
	refund := refundNotifyBody(t, "10.00", StatusTradeSuccess, func(v url.Values) {
		v.Set("app_id", providerApp)
		v.Set("auth_app_id", subApp)
	})
	if n, err := provider.ParseNotify(refund); err != nil || n.Refund == nil || n.Refund.MerchantID != subApp {
		t.Errorf("a sub-merchant's refund notification: %+v, %v", n, err)
	}
}
