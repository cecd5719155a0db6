package wechatpay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

const (
	spMchID  = "1900000109"
	subMchID = "1900000201"
	subAppID = "wx00000000000000a1"
)

// partnerServer plays WeChat Pay's partner APIs: it answers with body (signed) and keeps each
// request's method, URI and body.
type partnerServer struct {
	mu   sync.Mutex
	t    *testing.T
	body string
	code int
	seen []string
}

func (s *partnerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, r.Method+" "+r.URL.RequestURI()+" "+string(b)+" "+r.Header.Get("Authorization"))
	code := s.code
	if code == 0 {
		code = http.StatusOK
	}
	// WeChat Pay signs every answer, a 204 without a body too.
	_ = SignResponse(w.Header(), platformKey(s.t), testKeyID, testNow, []byte(s.body))
	if code != http.StatusNoContent {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte(s.body))
}

func partnerTransaction(sub string) string {
	return `{"sp_appid":"wx8888888888888888","sp_mchid":"` + spMchID + `","sub_appid":"` + subAppID + `","sub_mchid":"` + sub + `",` +
		`"out_trade_no":"SUB-ORDER-1","transaction_id":"4200002026112800000000000001","trade_type":"JSAPI","trade_state":"SUCCESS",` +
		`"trade_state_desc":"支付成功","success_time":"2026-11-28T10:00:00+08:00",` +
		`"payer":{"sp_openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o","sub_openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6p"},` +
		`"amount":{"total":8800,"payer_total":8800,"currency":"CNY","payer_currency":"CNY"}}`
}

func partnerClients(t *testing.T, url string) (provider, sub *Client) {
	t.Helper()
	provider, err := New(Config{BaseURL: url, MchID: spMchID, SerialNo: "AB12", PrivateKey: platformKey(t),
		PlatformPublicKey: &platformKey(t).PublicKey, PublicKeyID: testKeyID, MaxRetries: -1, APIv3Key: []byte(testV3Key),
		Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	if sub, err = provider.ForSubMerchant(subMchID, subAppID, nil); err != nil {
		t.Fatal(err)
	}
	return provider, sub
}

// TestPartnerCalls: a service provider's view for a sub-merchant asks the partner APIs with
// sp_mchid and sub_mchid, signed as the provider (its mchid in the Authorization header),
// names the sub-merchant in its results, and refuses an answer about another sub-merchant.
func TestPartnerCalls(t *testing.T) {
	srv := &partnerServer{t: t, body: partnerTransaction(subMchID)}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	_, sub := partnerClients(t, hs.URL)
	ctx := context.Background()

	res, err := sub.Query(ctx, "SUB-ORDER-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.MerchantID != subMchID || res.SellerID != subAppID || res.State != reconcile.StatePaid || res.AmountMinor != 8800 ||
		sub.MerchantID() != subMchID {
		t.Errorf("partner query result %+v", res)
	}
	if _, err := sub.QueryByTransactionID(ctx, "4200002026112800000000000001"); err != nil {
		t.Fatal(err)
	}

	srv.mu.Lock()
	srv.body = partnerTransaction("1900000299")
	srv.mu.Unlock()
	if _, err := sub.Query(ctx, "SUB-ORDER-1"); !errors.Is(err, ErrBadSignature) {
		t.Errorf("an answer about another sub-merchant: %v, want refused", err)
	}

	srv.mu.Lock()
	srv.body, srv.code = "", http.StatusNoContent
	srv.mu.Unlock()
	if err := sub.Close(ctx, "SUB-ORDER-1"); err != nil {
		t.Fatal(err)
	}

	srv.mu.Lock()
	srv.code = http.StatusOK
	srv.body = `{"refund_id":"50300908092026112800000000001","out_refund_no":"SUB-ORDER-1-R1","transaction_id":"4200002026112800000000000001",` +
		`"out_trade_no":"SUB-ORDER-1","status":"SUCCESS","success_time":"2026-11-28T10:20:30+08:00","amount":{"total":8800,"refund":800,"currency":"CNY"}}`
	srv.mu.Unlock()
	ref, err := sub.QueryRefund(ctx, "SUB-ORDER-1", "SUB-ORDER-1-R1")
	if err != nil || ref.MerchantID != subMchID || ref.AmountMinor != 800 {
		t.Fatalf("partner refund query: %+v, %v", ref, err)
	}

	// The bill: whatever the answer (no bill that day here), the query names the sub-merchant.
	srv.mu.Lock()
	srv.code, srv.body = http.StatusBadRequest, `{"code":"NO_STATEMENT_EXIST","message":"当日无账单"}`
	srv.mu.Unlock()
	_, _ = sub.DownloadBill(ctx, testNow.AddDate(0, 0, -3), t.TempDir())

	srv.mu.Lock()
	defer srv.mu.Unlock()
	want := []string{
		"GET /v3/pay/partner/transactions/out-trade-no/SUB-ORDER-1?sp_mchid=" + spMchID + "&sub_mchid=" + subMchID + " ",
		"GET /v3/pay/partner/transactions/id/4200002026112800000000000001?sp_mchid=" + spMchID + "&sub_mchid=" + subMchID + " ",
		"GET /v3/pay/partner/transactions/out-trade-no/SUB-ORDER-1?sp_mchid=",
		"POST /v3/pay/partner/transactions/out-trade-no/SUB-ORDER-1/close " + `{"sp_mchid":"` + spMchID + `","sub_mchid":"` + subMchID + `"}`,
		"GET " + RefundPath + "SUB-ORDER-1-R1?sub_mchid=" + subMchID + " ",
		"GET " + TradeBillPath + "?bill_date=",
	}
	if len(srv.seen) != len(want) {
		t.Fatalf("requests %q, want %d", srv.seen, len(want))
	}
	if bill := srv.seen[len(want)-1]; !strings.Contains(bill, "&sub_mchid="+subMchID) {
		t.Errorf("the bill query %q does not name the sub-merchant", bill)
	}
	for i, w := range want {
		if !strings.HasPrefix(srv.seen[i], w) {
			t.Errorf("request %d: %q, want it to start %q", i, srv.seen[i], w)
		}
		if !strings.Contains(srv.seen[i], `mchid="`+spMchID+`"`) {
			t.Errorf("request %d is not signed as the provider: %q", i, srv.seen[i])
		}
	}
}

// TestPartnerCallbacks: a provider's callback names the sub-merchant (sub_mchid), which
// picks the order; one for a sub-merchant the provider does not accept is refused like a
// bad signature.
func TestPartnerCallbacks(t *testing.T) {
	provider, _ := partnerClients(t, "https://api.mch.weixin.invalid")
	provider.AcceptSubMerchants(map[string]bool{subMchID: true})
	for _, tc := range []struct {
		sub     string
		refused bool
	}{{subMchID, false}, {"1900000299", true}} {
		h, body := eventCallback(t, platformKey(t), "TRANSACTION.SUCCESS", OriginalTransaction, partnerTransaction(tc.sub))
		n, err := provider.ParseNotify(h, body)
		if tc.refused {
			if !errors.Is(err, ErrBadSignature) || n.Payment != nil {
				t.Errorf("sub_mchid %s: %+v, %v; want refused", tc.sub, n, err)
			}
			continue
		}
		if err != nil || n.Payment == nil || n.Payment.MerchantID != tc.sub || n.Payment.SellerID != subAppID {
			t.Errorf("sub_mchid %s: %+v, %v", tc.sub, n, err)
		}
	}
	refund := strings.Replace(refundObject("SUCCESS"), `"mchid":"1900000001"`, `"sp_mchid":"`+spMchID+`","sub_mchid":"`+subMchID+`"`, 1)
	h, body := eventCallback(t, platformKey(t), EventRefundSuccess, OriginalRefund, refund)
	if n, err := provider.ParseNotify(h, body); err != nil || n.Refund == nil || n.Refund.MerchantID != subMchID {
		t.Errorf("a sub-merchant's refund callback: %+v, %v", n, err)
	}
}
