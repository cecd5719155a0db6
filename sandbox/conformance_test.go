package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// One conformance suite, run for both clients against the sandbox over loopback HTTP: every
// state and every error class, and what the reconciler is told in each case.

// client is what the suite needs from either client.
type client interface {
	reconcile.PlatformClient
	BreakerState() string
}

// clientOpts tune a client for one case.
type clientOpts struct {
	timeout          time.Duration
	maxRetries       int
	rateLimitRetries int
	breakerFailures  int
	qps              float64
	wrongKey         bool // sign requests with a key the platform does not know
	wrongMerchant    bool // an app id / mchid the platform does not know
}

func (o clientOpts) tuning() platformclient.Tuning {
	return platformclient.Tuning{
		BackoffBase: 2 * time.Millisecond, BackoffMax: 10 * time.Millisecond,
		RateLimitRetries: o.rateLimitRetries, BreakerFailures: o.breakerFailures,
		BreakerCooldown: 150 * time.Millisecond,
	}
}

func defaults(o clientOpts) clientOpts {
	if o.timeout == 0 {
		o.timeout = 2 * time.Second
	}
	if o.maxRetries == 0 {
		o.maxRetries = 2
	}
	if o.rateLimitRetries == 0 {
		o.rateLimitRetries = 2
	}
	if o.breakerFailures == 0 {
		o.breakerFailures = 50
	}
	return o
}

// harness describes one platform to the suite.
type harness struct {
	platform  reconcile.Platform
	newClient func(t testing.TB, sb *sandbox.Sandbox, url string, o clientOpts) client
	// states maps each sandbox state to what the client must report.
	states map[sandbox.State]reconcile.PlatformState
	// rawStates are extra platform words (Scenario.RawState) and their meaning.
	rawStates map[string]reconcile.PlatformState
	paidWord  string
	currency  string // what a paid Result names
	// unpaidHasTradeNo: Alipay numbers a trade once the buyer reaches it; WeChat Pay only
	// sends transaction_id for a payment.
	unpaidHasTradeNo bool
	// signatureFaults are the platform's ways an answer can fail verification.
	signatureFaults map[string]sandbox.Fault
	// configFaults are error codes that mean "fix the configuration", and the setting named.
	configFaults map[string]string
	// permanentCode is an error code refused for this order only.
	permanentCode  string
	systemErrCode  string
	settingKey     string // the private key setting a wrong key must name
	settingAccount string // the account setting a wrong app id / mchid must name
}

var alipayHarness = harness{
	platform: reconcile.Alipay,
	newClient: func(t testing.TB, sb *sandbox.Sandbox, url string, o clientOpts) client {
		o = defaults(o)
		cfg := sb.AlipayConfig(url)
		cfg.Timeout, cfg.MaxRetries, cfg.QPS, cfg.Tuning = o.timeout, o.maxRetries, o.qps, o.tuning()
		if o.wrongKey {
			cfg.PrivateKey = sb.Keys().WechatMerchantKey
		}
		if o.wrongMerchant {
			cfg.AppID = "2021000122609999"
		}
		c, err := alipay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	},
	states: map[sandbox.State]reconcile.PlatformState{
		sandbox.StatePaid: reconcile.StatePaid, sandbox.StateOpen: reconcile.StateOpen,
		sandbox.StateClosed: reconcile.StateClosed, sandbox.StateNotFound: reconcile.StateNotFound,
		// Alipay reports a fully refunded trade, and has no failed state: TRADE_CLOSED; the
		// refunded one carries its send_pay_date, which tells the client it was paid.
		sandbox.StateRefunded: reconcile.StateRefunded, sandbox.StateFailed: reconcile.StateClosed,
	},
	rawStates:        map[string]reconcile.PlatformState{alipay.StatusTradeFinished: reconcile.StatePaid},
	paidWord:         alipay.StatusTradeSuccess,
	currency:         "",
	unpaidHasTradeNo: true,
	signatureFaults: map[string]sandbox.Fault{
		"other key": {BadSignature: true},
		"tampered":  {TamperBody: true},
		"unsigned":  {Unsigned: true},
	},
	configFaults: map[string]string{
		"isv.insufficient-isv-permissions": alipay.SettingAppID,
		"aop.invalid-auth-token":           alipay.SettingAppID,
		"isv.missing-signature":            alipay.SettingAppID,
	},
	permanentCode:  "ACQ.INVALID_PARAMETER",
	systemErrCode:  "ACQ.SYSTEM_ERROR",
	settingKey:     alipay.SettingPrivateKey,
	settingAccount: alipay.SettingAppID,
}

var wechatHarness = harness{
	platform: reconcile.WechatPay,
	newClient: func(t testing.TB, sb *sandbox.Sandbox, url string, o clientOpts) client {
		o = defaults(o)
		cfg := sb.WechatPayConfig(url)
		cfg.Timeout, cfg.MaxRetries, cfg.QPS, cfg.Tuning = o.timeout, o.maxRetries, o.qps, o.tuning()
		if o.wrongKey {
			cfg.PrivateKey = sb.Keys().AlipayAppKey
		}
		if o.wrongMerchant {
			cfg.MchID = "1900009999"
		}
		c, err := wechatpay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	},
	states: map[sandbox.State]reconcile.PlatformState{
		sandbox.StatePaid: reconcile.StatePaid, sandbox.StateOpen: reconcile.StateOpen,
		sandbox.StateClosed: reconcile.StateClosed, sandbox.StateNotFound: reconcile.StateNotFound,
		sandbox.StateRefunded: reconcile.StateRefunded, sandbox.StateFailed: reconcile.StateFailed,
	},
	rawStates: map[string]reconcile.PlatformState{
		wechatpay.StateUserPaying: reconcile.StateOpen, wechatpay.StateRevoked: reconcile.StateFailed,
	},
	paidWord: wechatpay.StateSuccess,
	currency: "CNY",
	signatureFaults: map[string]sandbox.Fault{
		"other key":       {BadSignature: true},
		"tampered":        {TamperBody: true},
		"unsigned":        {Unsigned: true},
		"stale timestamp": {StaleTimestamp: true},
		"signtest probe":  {SignTest: true},
		"wrong serial":    {WrongSerial: true},
	},
	configFaults: map[string]string{
		"NO_AUTH":    wechatpay.SettingMchID,
		"SIGN_ERROR": wechatpay.SettingPrivateKey,
	},
	permanentCode:  "PARAM_ERROR",
	systemErrCode:  "SYSTEM_ERROR",
	settingKey:     wechatpay.SettingPrivateKey,
	settingAccount: wechatpay.SettingMchID,
}

func TestConformanceAlipay(t *testing.T)    { runConformance(t, alipayHarness) }
func TestConformanceWechatPay(t *testing.T) { runConformance(t, wechatHarness) }

func kindOf(err error) reconcile.PlatformErrorKind { return reconcile.PlatformErrorKindOf(err) }

func wantKind(t *testing.T, err error, want reconcile.PlatformErrorKind) {
	t.Helper()
	if got := kindOf(err); got != want {
		t.Fatalf("error kind %v (%v), want %v", got, err, want)
	}
}

func wantNoResult(t *testing.T, res reconcile.Result) {
	t.Helper()
	if res != (reconcile.Result{}) {
		t.Fatalf("a failed call returned a Result: %+v", res)
	}
}

var paidAt = time.Date(2024, 3, 1, 10, 20, 30, 0, platformclient.ChinaTime)

func runConformance(t *testing.T, h harness) {
	ctx := context.Background()

	t.Run("states", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{})
		for st, want := range h.states {
			no := "ST-" + string(st)
			if st != sandbox.StateNotFound {
				sb.SetScenario(h.platform, no, sandbox.Scenario{State: st, AmountMinor: 8888, TradeNo: "T" + no, PaidAt: paidAt})
			}
			res, err := c.Query(ctx, no)
			if err != nil {
				t.Fatalf("%s: %v", st, err)
			}
			if res.State != want || res.OutTradeNo != no || res.Platform != h.platform || res.MerchantID != c.MerchantID() {
				t.Errorf("%s: got %+v, want state %s", st, res, want)
			}
			if d := sb.LastAnswerDigest(h.platform, no); len(res.RawDigest) != 64 || res.RawDigest != d {
				t.Errorf("%s: RawDigest %q, the sandbox answered %q", st, res.RawDigest, d)
			}
			if n := sb.QueryCount(h.platform, no); n != 1 {
				t.Errorf("%s: %d queries, want 1", st, n)
			}
			if st == sandbox.StateNotFound {
				continue
			}
			wantTradeNo := "T" + no
			if !h.unpaidHasTradeNo && st != sandbox.StatePaid && st != sandbox.StateRefunded {
				wantTradeNo = ""
			}
			if res.AmountMinor != 8888 || res.PlatformTradeNo != wantTradeNo {
				t.Errorf("%s: amount %d, trade no %q", st, res.AmountMinor, res.PlatformTradeNo)
			}
			if st == sandbox.StatePaid {
				if !res.PaidAt.Equal(paidAt) || res.RawState != h.paidWord || res.Currency != h.currency {
					t.Errorf("paid: PaidAt %v RawState %q Currency %q", res.PaidAt, res.RawState, res.Currency)
				}
			}
		}
		for word, want := range h.rawStates {
			no := "RAW-" + word
			sb.SetScenario(h.platform, no, sandbox.Scenario{State: sandbox.StatePaid, RawState: word, AmountMinor: 100, PaidAt: paidAt})
			res, err := c.Query(ctx, no)
			if err != nil || res.State != want || res.RawState != word {
				t.Errorf("%s: %+v, %v; want %s", word, res, err, want)
			}
		}
	})

	t.Run("5xx then success after retries", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{})
		sb.SetScenario(h.platform, "R1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt,
			Fault: &sandbox.Fault{HTTPStatus: 502, Times: 2}})
		res, err := c.Query(ctx, "R1")
		if err != nil || res.State != reconcile.StatePaid {
			t.Fatalf("%+v, %v", res, err)
		}
		if n := sb.QueryCount(h.platform, "R1"); n != 3 {
			t.Fatalf("%d queries, want 3 (two 502s and the answer)", n)
		}
	})

	t.Run("system error is retryable", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{})
		sb.SetScenario(h.platform, "SE", sandbox.Scenario{State: sandbox.StateOpen, Fault: &sandbox.Fault{ErrorCode: h.systemErrCode}})
		res, err := c.Query(ctx, "SE")
		wantKind(t, err, reconcile.KindRetryable)
		wantNoResult(t, res)
		if n := sb.QueryCount(h.platform, "SE"); n != 3 {
			t.Fatalf("%d queries, want 1+2 retries", n)
		}
	})

	t.Run("persistent 5xx opens the breaker and fails fast", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{breakerFailures: 3})
		sb.SetScenario(h.platform, "B1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})
		sb.SetFault(h.platform, sandbox.Fault{HTTPStatus: 503})
		res, err := c.Query(ctx, "B1")
		wantKind(t, err, reconcile.KindRetryable)
		wantNoResult(t, res)
		if c.BreakerState() != "open" {
			t.Fatalf("breaker %s after 3 failed attempts, want open", c.BreakerState())
		}
		start := time.Now()
		res, err = c.Query(ctx, "B1")
		wantKind(t, err, reconcile.KindUnavailable)
		wantNoResult(t, res)
		if el := time.Since(start); el > time.Second { // no call, no timeout
			t.Fatalf("open breaker took %s", el)
		}
		if n := sb.QueryCount(h.platform, "B1"); n != 3 {
			t.Fatalf("%d queries reached the platform, want 3: an open breaker must not call", n)
		}
		sb.SetFault(h.platform, sandbox.Fault{})
		time.Sleep(200 * time.Millisecond) // cooldown: one probe goes through
		if res, err := c.Query(ctx, "B1"); err != nil || res.State != reconcile.StatePaid {
			t.Fatalf("after recovery: %+v, %v", res, err)
		}
		if c.BreakerState() != "closed" {
			t.Fatalf("breaker %s after a good probe", c.BreakerState())
		}
	})

	t.Run("rate limited", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{})
		sb.SetScenario(h.platform, "RL", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt,
			Fault: &sandbox.Fault{RateLimited: true}})
		res, err := c.Query(ctx, "RL")
		wantKind(t, err, reconcile.KindRateLimited)
		wantNoResult(t, res)
		if n := sb.QueryCount(h.platform, "RL"); n != 3 {
			t.Fatalf("%d queries, want 1 + 2 throttle retries", n)
		}
		// One throttle, then the answer: the client waits and comes back.
		sb.SetScenario(h.platform, "RL1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt,
			Fault: &sandbox.Fault{RateLimited: true, Times: 1}})
		if res, err := c.Query(ctx, "RL1"); err != nil || res.State != reconcile.StatePaid {
			t.Fatalf("after one throttle: %+v, %v", res, err)
		}
		if c.BreakerState() != "closed" {
			t.Fatal("throttles opened the breaker")
		}
	})

	t.Run("real QPS cap", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		sb.SetQPSCap(h.platform, 2)
		c := h.newClient(t, sb, url, clientOpts{rateLimitRetries: -1, maxRetries: -1})
		sb.SetScenario(h.platform, "Q", sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: 1})
		var mu sync.Mutex
		kinds := map[reconcile.PlatformErrorKind]int{}
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.Query(ctx, "Q")
				if err != nil {
					wantNoResult(t, res)
				}
				mu.Lock()
				kinds[kindOf(err)]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if kinds[0] < 1 || kinds[0] > 3 || kinds[reconcile.KindRateLimited] < 5 || kinds[0]+kinds[reconcile.KindRateLimited] != 8 {
			t.Fatalf("8 calls over a cap of 2/s: %v (0 = answered)", kinds)
		}
	})

	for name, f := range h.signatureFaults {
		t.Run("bad signature: "+name, func(t *testing.T) {
			t.Parallel()
			sb, url := newSandbox(t)
			c := h.newClient(t, sb, url, clientOpts{})
			f := f
			sb.SetScenario(h.platform, "S1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 5000, PaidAt: paidAt, Fault: &f})
			res, err := c.Query(ctx, "S1")
			wantKind(t, err, reconcile.KindBadSignature)
			wantNoResult(t, res)
			if !errors.Is(err, platformclient.ErrBadSignature) {
				t.Fatalf("chain lacks ErrBadSignature: %v", err)
			}
			if n := sb.QueryCount(h.platform, "S1"); n != 1 {
				t.Fatalf("%d queries: a bad signature is not retried", n)
			}
			// Not-found changes state too (it closes an expired order): a forged or unsigned
			// one is no Result either, on either platform.
			sb.SetFault(h.platform, f)
			res, err = c.Query(ctx, "NF-forged")
			wantKind(t, err, reconcile.KindBadSignature)
			wantNoResult(t, res)
			if c.BreakerState() != "closed" {
				t.Fatal("bad signatures opened the breaker")
			}
		})
	}

	t.Run("truncated body is retryable", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{})
		sb.SetScenario(h.platform, "TR", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt,
			Fault: &sandbox.Fault{Truncate: true}})
		res, err := c.Query(ctx, "TR")
		wantKind(t, err, reconcile.KindRetryable)
		wantNoResult(t, res)
		sb.SetScenario(h.platform, "TR1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt,
			Fault: &sandbox.Fault{Truncate: true, Times: 1}})
		if res, err := c.Query(ctx, "TR1"); err != nil || res.State != reconcile.StatePaid {
			t.Fatalf("after one cut: %+v, %v", res, err)
		}
	})

	t.Run("hang times out within the configured timeout", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{timeout: 150 * time.Millisecond, maxRetries: 1})
		sb.SetScenario(h.platform, "H", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt,
			Fault: &sandbox.Fault{Hang: true}})
		start := time.Now()
		res, err := c.Query(ctx, "H")
		el := time.Since(start)
		wantKind(t, err, reconcile.KindRetryable)
		wantNoResult(t, res)
		var pe *reconcile.PlatformError
		if !errors.As(err, &pe) || pe.Code != "TIMEOUT" {
			t.Fatalf("error %v, want code TIMEOUT", err)
		}
		if el < 300*time.Millisecond || el > 5*time.Second {
			t.Fatalf("two 150ms attempts took %s", el)
		}
		// Latency below the timeout is only slow.
		sb.SetScenario(h.platform, "SLOW", sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: 1,
			Fault: &sandbox.Fault{Latency: sandbox.Duration(20 * time.Millisecond), LatencyMax: sandbox.Duration(60 * time.Millisecond)}})
		if res, err := c.Query(ctx, "SLOW"); err != nil || res.State != reconcile.StateOpen {
			t.Fatalf("slow answer: %+v, %v", res, err)
		}
	})

	t.Run("config errors name the setting and stop", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		sb.SetScenario(h.platform, "C", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})
		for _, tc := range []struct {
			name    string
			o       clientOpts
			setting string
		}{
			{"wrong private key", clientOpts{wrongKey: true, breakerFailures: 2}, h.settingKey},
			{"wrong merchant", clientOpts{wrongMerchant: true, breakerFailures: 2}, h.settingAccount},
		} {
			c := h.newClient(t, sb, url, tc.o)
			before := sb.QueryCount(h.platform, "C")
			for i := 0; i < 3; i++ {
				res, err := c.Query(ctx, "C")
				wantKind(t, err, reconcile.KindConfig)
				wantNoResult(t, res)
				if !strings.Contains(err.Error(), tc.setting) {
					t.Fatalf("%s: %q does not name %s", tc.name, err, tc.setting)
				}
			}
			if n := sb.QueryCount(h.platform, "C") - before; n != 3 {
				t.Fatalf("%s: %d queries for 3 calls: config errors are not retried", tc.name, n)
			}
			if c.BreakerState() != "closed" {
				t.Fatalf("%s: config errors opened the breaker", tc.name)
			}
		}
		c := h.newClient(t, sb, url, clientOpts{})
		for code, setting := range h.configFaults {
			sb.SetFault(h.platform, sandbox.Fault{ErrorCode: code, Times: 1})
			_, err := c.Query(ctx, "C")
			wantKind(t, err, reconcile.KindConfig)
			if !strings.Contains(err.Error(), setting) {
				t.Fatalf("%s: %q does not name %s", code, err, setting)
			}
		}
		sb.SetFault(h.platform, sandbox.Fault{ErrorCode: h.permanentCode, Times: 1})
		_, err := c.Query(ctx, "C")
		wantKind(t, err, reconcile.KindPermanent)
	})

	t.Run("close", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{})
		sb.SetScenario(h.platform, "OPEN", sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: 1})
		if err := c.Close(ctx, "OPEN"); err != nil {
			t.Fatalf("close open: %v", err)
		}
		if res, err := c.Query(ctx, "OPEN"); err != nil || res.State != reconcile.StateClosed {
			t.Fatalf("after close: %+v, %v", res, err)
		}
		if n := sb.CloseCount(h.platform, "OPEN"); n != 1 {
			t.Fatalf("%d closes", n)
		}
		sb.SetScenario(h.platform, "PAID", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1, PaidAt: paidAt})
		wantKind(t, c.Close(ctx, "PAID"), reconcile.KindAlreadyPaid)
		if res, _ := c.Query(ctx, "PAID"); res.State != reconcile.StatePaid {
			t.Fatalf("a refused close changed the order: %+v", res)
		}
		if err := c.Close(ctx, "NEVER-SEEN"); err != nil {
			t.Fatalf("close of an unknown trade: %v", err)
		}
		if err := c.Close(ctx, "OPEN"); err != nil {
			t.Fatalf("close of a closed trade: %v", err)
		}
		sb.SetScenario(h.platform, "OPEN2", sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: 1, Fault: &sandbox.Fault{BadSignature: true}})
		wantKind(t, c.Close(ctx, "OPEN2"), reconcile.KindBadSignature)
		sb.SetScenario(h.platform, "OPEN3", sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: 1, Fault: &sandbox.Fault{HTTPStatus: 500, Times: 1}})
		if err := c.Close(ctx, "OPEN3"); err != nil {
			t.Fatalf("close after one 500: %v", err)
		}
	})

	t.Run("caller cancel", func(t *testing.T) {
		t.Parallel()
		sb, url := newSandbox(t)
		c := h.newClient(t, sb, url, clientOpts{})
		sb.SetScenario(h.platform, "CX", sandbox.Scenario{State: sandbox.StateOpen, Fault: &sandbox.Fault{Hang: true}})
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		res, err := c.Query(cctx, "CX")
		wantNoResult(t, res)
		if !errors.Is(err, context.DeadlineExceeded) || kindOf(err) != reconcile.KindRetryable {
			t.Fatalf("got %v", err)
		}
		if n := sb.QueryCount(h.platform, "CX"); n != 1 {
			t.Fatalf("%d queries after the caller gave up", n)
		}
	})
}

// Platform-specific paths the shared suite does not cover.

func TestAlipayEscapedSlashesAndNumericAmounts(t *testing.T) {
	sb, url := newSandbox(t)
	c := alipayHarness.newClient(t, sb, url, clientOpts{})
	sb.SetScenario(reconcile.Alipay, "ESC", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1234, PaidAt: paidAt,
		BuyerLogonID: "a/b***@example.com", Fault: &sandbox.Fault{EscapeSlashes: true}})
	res, err := c.Query(context.Background(), "ESC")
	if err != nil || res.State != reconcile.StatePaid || res.AmountMinor != 1234 {
		t.Fatalf("escaped slashes: %+v, %v", res, err)
	}
	sb.SetScenario(reconcile.Alipay, "NUM", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 29, PaidAt: paidAt, AmountAsNumber: true})
	res, err = c.Query(context.Background(), "NUM")
	if err != nil || res.AmountMinor != 29 {
		t.Fatalf("numeric amount 0.29: %+v, %v", res, err)
	}
}

func TestQueryByPlatformTradeNumber(t *testing.T) {
	sb, url := newSandbox(t)
	ac := alipayHarness.newClient(t, sb, url, clientOpts{}).(*alipay.Client)
	wc := wechatHarness.newClient(t, sb, url, clientOpts{}).(*wechatpay.Client)
	sb.SetScenario(reconcile.Alipay, "A1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 10, TradeNo: "2024030122001", PaidAt: paidAt})
	sb.SetScenario(reconcile.WechatPay, "W1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 10, TradeNo: "4200002024030100001", PaidAt: paidAt})
	res, err := ac.QueryByTradeNo(context.Background(), "2024030122001")
	if err != nil || res.OutTradeNo != "A1" || res.State != reconcile.StatePaid {
		t.Fatalf("alipay by trade_no: %+v, %v", res, err)
	}
	res, err = wc.QueryByTransactionID(context.Background(), "4200002024030100001")
	if err != nil || res.OutTradeNo != "W1" || res.State != reconcile.StatePaid {
		t.Fatalf("wechat by transaction_id: %+v, %v", res, err)
	}
	res, err = ac.QueryByTradeNo(context.Background(), "nope")
	if err != nil || res.State != reconcile.StateNotFound {
		t.Fatalf("alipay unknown trade_no: %+v, %v", res, err)
	}
}
