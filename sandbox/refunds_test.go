package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// refundClient is what the refund suite needs of either client.
type refundClient interface {
	client
	QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (reconcile.RefundResult, error)
}

func newRefundClient(t *testing.T, h harness, sb *sandbox.Sandbox, url string, o clientOpts) refundClient {
	t.Helper()
	c, ok := h.newClient(t, sb, url, o).(refundClient)
	if !ok {
		t.Fatalf("%s client cannot query refunds", h.platform)
	}
	return c
}

// refundHarness is what differs between the platforms' refund answers.
type refundHarness struct {
	harness
	// states: what the client reports for each sandbox outcome. Alipay shows only a
	// successful refund; any other is "no successful refund" to its query.
	states map[sandbox.RefundOutcome]reconcile.RefundState
	// numbersRefunds: WeChat Pay has a refund_id, Alipay none.
	numbersRefunds bool
}

var refundHarnesses = []refundHarness{
	{harness: alipayHarness, states: map[sandbox.RefundOutcome]reconcile.RefundState{
		sandbox.RefundSuccess: reconcile.RefundStateSuccess, sandbox.RefundProcessing: reconcile.RefundStateNotFound,
		sandbox.RefundAbnormal: reconcile.RefundStateNotFound, sandbox.RefundClosed: reconcile.RefundStateNotFound,
	}},
	{harness: wechatHarness, numbersRefunds: true, states: map[sandbox.RefundOutcome]reconcile.RefundState{
		sandbox.RefundSuccess: reconcile.RefundStateSuccess, sandbox.RefundProcessing: reconcile.RefundStateProcessing,
		sandbox.RefundAbnormal: reconcile.RefundStateAbnormal, sandbox.RefundClosed: reconcile.RefundStateClosed,
	}},
}

func TestRefundQueryConformance(t *testing.T) {
	for _, h := range refundHarnesses {
		t.Run(string(h.platform), func(t *testing.T) {
			sb, url := newSandbox(t)
			c := newRefundClient(t, h.harness, sb, url, clientOpts{})
			ctx := context.Background()
			for outcome, want := range h.states {
				t.Run(string(outcome), func(t *testing.T) {
					otn, rno := "RQ-"+string(outcome), "RQ-"+string(outcome)+"-1"
					sb.SetScenario(h.platform, otn, sandboxPaid(10000))
					made, err := sb.Refund(h.platform, otn, rno, 2500, outcome)
					if err != nil {
						t.Fatal(err)
					}
					res, err := c.QueryRefund(ctx, otn, rno)
					if err != nil {
						t.Fatal(err)
					}
					if res.State != want || res.Platform != h.platform || res.MerchantID != c.MerchantID() ||
						res.OutTradeNo != otn || res.OutRefundNo != rno || res.RawDigest != sb.LastAnswerDigest(h.platform, otn) {
						t.Fatalf("got %+v, want %s", res, want)
					}
					if want != reconcile.RefundStateNotFound && (res.AmountMinor != 2500 || res.PlatformTradeNo != made.TradeNo) {
						t.Fatalf("got %+v; want 25.00 of trade %s", res, made.TradeNo)
					}
					if want == reconcile.RefundStateSuccess && !res.SucceededAt.Equal(made.SucceededAt.Truncate(time.Second)) {
						t.Fatalf("succeeded at %v, want %v", res.SucceededAt, made.SucceededAt)
					}
					if h.numbersRefunds != (res.PlatformRefundNo != "") || (h.numbersRefunds && res.PlatformRefundNo != made.RefundID) {
						t.Fatalf("refund number %q, made %q", res.PlatformRefundNo, made.RefundID)
					}
					if sb.RefundQueryCount(h.platform, rno) != 1 || sb.QueryCount(h.platform, otn) != 0 {
						t.Fatalf("counted %d refund queries, %d trade queries", sb.RefundQueryCount(h.platform, rno), sb.QueryCount(h.platform, otn))
					}
				})
			}
			// Numbers the platform does not know: a signed "not found", never an error.
			sb.SetScenario(h.platform, "RQ-KNOWN", sandboxPaid(10000))
			for name, ids := range map[string][2]string{"unknown refund": {"RQ-KNOWN", "RQ-NONE-1"}, "unknown trade": {"RQ-NONE", "RQ-NONE-2"}} {
				if res, err := c.QueryRefund(ctx, ids[0], ids[1]); err != nil || res.State != reconcile.RefundStateNotFound {
					t.Errorf("%s: %+v, %v; want not found", name, res, err)
				}
			}
		})
	}
}

// The refund queries go through the same fault plumbing as the trade queries.
func TestRefundQueryFaults(t *testing.T) {
	for _, h := range refundHarnesses {
		t.Run(string(h.platform), func(t *testing.T) {
			sb, url := newSandbox(t)
			c := newRefundClient(t, h.harness, sb, url, clientOpts{maxRetries: 1, rateLimitRetries: 1, timeout: 200 * time.Millisecond})
			sb.SetScenario(h.platform, "RF-1", sandboxPaid(10000))
			if _, err := sb.Refund(h.platform, "RF-1", "RF-1-1", 100); err != nil {
				t.Fatal(err)
			}
			faults := map[string]struct {
				f    sandbox.Fault
				want reconcile.PlatformErrorKind
			}{
				"unsigned":      {sandbox.Fault{Unsigned: true}, reconcile.KindBadSignature},
				"bad signature": {sandbox.Fault{BadSignature: true}, reconcile.KindBadSignature},
				"tampered":      {sandbox.Fault{TamperBody: true}, reconcile.KindBadSignature},
				"502":           {sandbox.Fault{HTTPStatus: 502}, reconcile.KindRetryable},
				"system error":  {sandbox.Fault{ErrorCode: h.systemErrCode}, reconcile.KindRetryable},
				"rate limited":  {sandbox.Fault{RateLimited: true}, reconcile.KindRateLimited},
				"latency":       {sandbox.Fault{Latency: sandbox.Duration(time.Second)}, reconcile.KindRetryable},
			}
			for name, tc := range faults {
				t.Run(name, func(t *testing.T) {
					sb.SetFault(h.platform, tc.f)
					defer sb.SetFault(h.platform, sandbox.Fault{})
					res, err := c.QueryRefund(context.Background(), "RF-1", "RF-1-1")
					wantKind(t, err, tc.want)
					if res != (reconcile.RefundResult{}) {
						t.Fatalf("a failed query returned %+v", res)
					}
				})
			}
			// An unsigned "not found" is no evidence either.
			sb.SetFault(h.platform, sandbox.Fault{Unsigned: true})
			_, err := c.QueryRefund(context.Background(), "RF-1", "RF-1-404")
			wantKind(t, err, reconcile.KindBadSignature)
			sb.SetFault(h.platform, sandbox.Fault{})
			// A fault that clears itself: the policy retries into the answer.
			sb.SetFault(h.platform, sandbox.Fault{HTTPStatus: 503, Times: 1})
			if res, err := c.QueryRefund(context.Background(), "RF-1", "RF-1-1"); err != nil || res.State != reconcile.RefundStateSuccess {
				t.Fatalf("after one 503: %+v, %v", res, err)
			}
		})
	}
}

// A partial refund, then a second one that refunds the rest; the sum never passes what was
// paid, and the callbacks carry what each platform says.
func TestPartialRefundThenSecond(t *testing.T) {
	for _, h := range refundHarnesses {
		t.Run(string(h.platform), func(t *testing.T) {
			sb, url := newSandbox(t)
			c := newRefundClient(t, h.harness, sb, url, clientOpts{})
			rc, rurl := newReceiver(t, sb)
			sb.SetScenario(h.platform, "PR-1", sandboxPaid(10000))
			first, err := sb.Refund(h.platform, "PR-1", "PR-1-1", 3000)
			if err != nil || first.RefundedTotalMinor != 3000 {
				t.Fatalf("first: %+v, %v", first, err)
			}
			if _, err := sb.Refund(h.platform, "PR-1", "PR-1-X", 7001); err == nil || !strings.Contains(err.Error(), "above") {
				t.Fatalf("70.01 more than paid: %v", err)
			}
			// A closed refund gave nothing back: it does not count against the trade.
			if _, err := sb.Refund(h.platform, "PR-1", "PR-1-C", 7000, sandbox.RefundClosed); err != nil {
				t.Fatal(err)
			}
			second, err := sb.Refund(h.platform, "PR-1", "PR-1-2", 7000)
			if err != nil || second.RefundedTotalMinor != 10000 {
				t.Fatalf("second: %+v, %v", second, err)
			}
			if _, err := sb.Refund(h.platform, "PR-1", "PR-1-3", 1); err == nil {
				t.Fatal("a refund of a fully refunded trade was made")
			}
			if _, err := sb.Refund(h.platform, "PR-1", "PR-1-1", 1); err == nil {
				t.Fatal("a refund number was used twice")
			}
			for rno, amount := range map[string]int64{"PR-1-1": 3000, "PR-1-2": 7000} {
				if res, err := c.QueryRefund(context.Background(), "PR-1", rno); err != nil || res.AmountMinor != amount {
					t.Fatalf("%s: %+v, %v", rno, res, err)
				}
			}
			d, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: rurl + "/notify/" + string(h.platform)},
				sandbox.Callback{Platform: h.platform, OutRefundNo: "PR-1-1"}, sandbox.Callback{Platform: h.platform, OutRefundNo: "PR-1-2"})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range waitDelivery(t, d) {
				if !r.Acked || r.OutTradeNo != "PR-1" {
					t.Fatalf("%+v", r)
				}
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if len(rc.refunds) != 2 || len(rc.results) != 0 || rc.rejects != 0 {
				t.Fatalf("receiver: %d refunds, %d payments, %d rejected", len(rc.refunds), len(rc.results), rc.rejects)
			}
			for _, r := range rc.refunds {
				want := map[string][2]int64{"PR-1-1": {3000, 3000}, "PR-1-2": {7000, 10000}}[r.OutRefundNo]
				wantAmount, wantTotal := want[0], want[1]
				if h.platform == reconcile.Alipay {
					// Alipay names the running total, and the trade closes with the last refund.
					wantAmount, wantWord := int64(0), map[bool]string{true: "TRADE_CLOSED", false: "TRADE_SUCCESS"}[wantTotal == 10000]
					if r.AmountMinor != wantAmount || r.RefundedTotalMinor != wantTotal || r.RawState != wantWord {
						t.Errorf("alipay refund %+v; want total %d, %s", r, wantTotal, wantWord)
					}
				} else if r.AmountMinor != wantAmount || r.State != reconcile.RefundStateSuccess || r.MerchantID != c.MerchantID() {
					t.Errorf("wechat refund %+v; want %d", r, wantAmount)
				}
				if r.OutTradeNo != "PR-1" || r.SucceededAt.IsZero() || r.Source != reconcile.SourceNotify {
					t.Errorf("refund %+v", r)
				}
			}
		})
	}
}

// WeChat Pay sends a callback for every outcome but PROCESSING, Alipay only for a success;
// "send it twice" is Copies, "lose it" is not delivering it.
func TestRefundCallbacks(t *testing.T) {
	sb, _ := newSandbox(t)
	rc, rurl := newReceiver(t, sb)
	sb.SetScenario(reconcile.WechatPay, "RC-W", sandboxPaid(9000))
	sb.SetScenario(reconcile.Alipay, "RC-A", sandboxPaid(9000))
	var cbs []sandbox.Callback
	for _, o := range []sandbox.RefundOutcome{sandbox.RefundSuccess, sandbox.RefundAbnormal, sandbox.RefundClosed, sandbox.RefundProcessing} {
		if _, err := sb.Refund(reconcile.WechatPay, "RC-W", "RC-W-"+string(o), 1000, o); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Refund(reconcile.Alipay, "RC-A", "RC-A-"+string(o), 1000, o); err != nil {
			t.Fatal(err)
		}
		if o != sandbox.RefundProcessing {
			cbs = append(cbs, sandbox.Callback{Platform: reconcile.WechatPay, OutRefundNo: "RC-W-" + string(o)})
		}
	}
	for _, bad := range []sandbox.Callback{
		{Platform: reconcile.WechatPay, OutRefundNo: "RC-W-PROCESSING"},
		{Platform: reconcile.Alipay, OutRefundNo: "RC-A-ABNORMAL"},
		{Platform: reconcile.Alipay, OutRefundNo: "RC-A-NONE"},
		{Platform: reconcile.Alipay, OutTradeNo: "RC-W", OutRefundNo: "RC-A-SUCCESS"},
	} {
		if _, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: rurl}, bad); err == nil {
			t.Errorf("%+v: delivered", bad)
		}
	}
	d, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: rurl + "/notify/wechatpay", Copies: 2}, cbs...)
	if err != nil {
		t.Fatal(err)
	}
	waitDelivery(t, d)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	got := map[string]int{}
	for _, r := range rc.refunds {
		if r.OutRefundNo != "RC-W-"+r.RawState || r.AmountMinor != 1000 || r.PlatformRefundNo == "" {
			t.Errorf("refund %+v", r)
		}
		got[string(r.State)]++
	}
	if got["SUCCESS"] != 2 || got["ABNORMAL"] != 2 || got["CLOSED"] != 2 || rc.rejects != 0 {
		t.Fatalf("received %v, %d rejected; want each outcome twice", got, rc.rejects)
	}
}

func TestSettleRefundAndRefundsOfDay(t *testing.T) {
	now := time.Date(2024, 3, 2, 23, 59, 0, 0, time.FixedZone("CST", 8*3600))
	sb, err := sandbox.New(sandbox.Options{Keys: testKeys(t), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	sb.SetScenario(reconcile.WechatPay, "SR-1", sandboxPaid(5000))
	if _, err := sb.Refund(reconcile.WechatPay, "SR-1", "SR-1-1", 5000, sandbox.RefundProcessing); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.SettleRefund(reconcile.WechatPay, "SR-1-1", sandbox.RefundAbnormal); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute) // the next day in China
	done, err := sb.SettleRefund(reconcile.WechatPay, "SR-1-1", sandbox.RefundSuccess)
	if err != nil || done.Outcome != sandbox.RefundSuccess || !done.SucceededAt.Equal(now) || done.RefundedTotalMinor != 5000 {
		t.Fatalf("settled: %+v, %v", done, err)
	}
	if _, err := sb.SettleRefund(reconcile.WechatPay, "SR-1-1", sandbox.RefundClosed); err == nil {
		t.Fatal("a successful refund was closed")
	}
	day1, day2 := sb.RefundsOfDay(reconcile.WechatPay, "", now.Add(-24*time.Hour)), sb.RefundsOfDay(reconcile.WechatPay, "", now)
	if len(day1) != 1 || len(day2) != 1 || day1[0].OutRefundNo != "SR-1-1" || !day1[0].CreatedAt.Before(day2[0].SucceededAt) {
		t.Fatalf("made on day 1, succeeded on day 2: %+v / %+v", day1, day2)
	}
	if other := sb.RefundsOfDay(reconcile.Alipay, "", now); len(other) != 0 {
		t.Fatalf("alipay's day: %+v", other)
	}
}

func TestRefundControlAPI(t *testing.T) {
	sb, base := newSandbox(t)
	sb.SetScenario(reconcile.Alipay, "CR-1", sandboxPaid(8000))
	code, body := call(t, "POST", base+"/sandbox/refunds",
		`{"platform":"alipay","out_trade_no":"CR-1","out_refund_no":"CR-1-1","amount_minor":3000,"outcome":"processing","created_at":"2024-03-01T12:00:00+08:00"}`)
	var ref sandbox.Refund
	if code != 200 || json.Unmarshal([]byte(body), &ref) != nil || ref.Outcome != sandbox.RefundProcessing || ref.MerchantID != sb.Identity().AlipayAppID {
		t.Fatalf("post %d %s", code, body)
	}
	if code, body = call(t, "PUT", base+"/sandbox/refunds/alipay/CR-1-1", `{"outcome":"SUCCESS"}`); code != 200 || !strings.Contains(body, `"refunded_total_minor": 3000`) {
		t.Fatalf("settle %d %s", code, body)
	}
	if code, body = call(t, "GET", base+"/sandbox/refunds/alipay/CR-1-1", ""); code != 200 || !strings.Contains(body, `"outcome": "SUCCESS"`) {
		t.Fatalf("get %d %s", code, body)
	}
	if code, body = call(t, "GET", base+"/sandbox/refunds/alipay?day=2024-03-01", ""); code != 200 || !strings.Contains(body, `"CR-1-1"`) {
		t.Fatalf("list %d %s", code, body)
	}
	for _, bad := range []struct{ method, path, body string }{
		{"POST", "/sandbox/refunds", `{"platform":"alipay","out_trade_no":"CR-1","out_refund_no":"CR-1-2","amount_minor":5001}`},
		{"POST", "/sandbox/refunds", `{"platform":"alipay","out_trade_no":"NOPE","out_refund_no":"CR-1-3","amount_minor":1}`},
		{"POST", "/sandbox/refunds", `{"platform":"alipay","out_trade_no":"CR-1","out_refund_no":"CR-1-4","amount_minor":1,"outcome":"LOST"}`},
		{"PUT", "/sandbox/refunds/alipay/CR-1-1", `{"outcome":"CLOSED"}`},
		{"GET", "/sandbox/refunds/alipay/CR-9", ""},
		{"GET", "/sandbox/refunds/alipay?day=yesterday", ""},
	} {
		if code, body := call(t, bad.method, base+bad.path, bad.body); code != 400 || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s %s: %d %s", bad.method, bad.path, bad.body, code, body)
		}
	}
}
