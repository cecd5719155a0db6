package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// The platforms' documented retry schedules: the waits after a delivery that was not
// acknowledged. Alipay tries about 8 times over 25 h, WeChat Pay 16 times over 24 h.
var (
	AlipayRetrySchedule = []time.Duration{4 * time.Minute, 10 * time.Minute, 10 * time.Minute, time.Hour,
		2 * time.Hour, 6 * time.Hour, 15 * time.Hour}
	WechatRetrySchedule = []time.Duration{15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute,
		10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute, time.Hour,
		3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour}
)

// Callback names one notification to send: the order's current scenario, as the platform
// would report it, or with OutRefundNo the refund's outcome (out_trade_no may then be
// left empty).
type Callback struct {
	Platform   reconcile.Platform `json:"platform"`
	OutTradeNo string             `json:"out_trade_no"`
	// OutRefundNo sends the refund's notification instead: WeChat Pay's REFUND.SUCCESS,
	// REFUND.ABNORMAL or REFUND.CLOSED; Alipay's trade notification again with out_biz_no,
	// refund_fee (the trade's running total) and gmt_refund, for a successful refund only.
	OutRefundNo string `json:"out_refund_no,omitempty"`
	// RawState overrides the state word of a payment callback (e.g. a late TRADE_SUCCESS
	// after TRADE_CLOSED, to play an out-of-order delivery).
	RawState string `json:"raw_state,omitempty"`
}

// DeliveryOptions say where and how to send.
type DeliveryOptions struct {
	URL string `json:"url"`
	// Copies of each callback are delivered concurrently (duplicates); default 1.
	Copies int `json:"copies,omitempty"`
	// Shuffle starts the callbacks in random order (out-of-order deliveries).
	Shuffle bool `json:"shuffle,omitempty"`
	// Stagger is the pause between starting one callback and the next.
	Stagger Duration `json:"stagger,omitempty"`
	// TimeScale divides the retry schedule (1000: WeChat's 15 s wait becomes 15 ms);
	// zero or one is real time.
	TimeScale float64 `json:"time_scale,omitempty"`
	// MaxAttempts caps attempts per copy; zero is the first try plus the whole schedule.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// DeliveryResult is what happened to one copy of one callback.
type DeliveryResult struct {
	Callback
	Copy       int    `json:"copy"`
	Attempts   int    `json:"attempts"`
	Acked      bool   `json:"acked"`
	LastStatus int    `json:"last_status,omitempty"`
	LastError  string `json:"last_error,omitempty"`
}

// Delivery tracks callbacks being sent.
type Delivery struct {
	done    chan struct{}
	mu      sync.Mutex
	results []DeliveryResult
}

// Done is closed when every copy was acknowledged or gave up.
func (d *Delivery) Done() <-chan struct{} { return d.done }

// Wait blocks until the delivery is done (or ctx ends) and returns the results.
func (d *Delivery) Wait(ctx context.Context) ([]DeliveryResult, error) {
	select {
	case <-d.done:
	case <-ctx.Done():
		return d.Results(), ctx.Err()
	}
	return d.Results(), nil
}

// Results is a snapshot of the results so far.
func (d *Delivery) Results() []DeliveryResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DeliveryResult(nil), d.results...)
}

// outgoing is a built callback: its body and how to send one attempt.
type outgoing struct {
	cb       Callback
	body     []byte
	schedule []time.Duration
	// header returns the headers of one attempt (WeChat signs each attempt afresh: a
	// retry hours later must still carry a fresh timestamp).
	header func() (http.Header, error)
	acked  func(status int, body []byte) bool
}

// Deliver builds the callbacks now (an order the platform does not know is an error) and
// sends them in the background until each copy is acknowledged, its attempts run out, ctx
// ends or the sandbox closes.
func (s *Sandbox) Deliver(ctx context.Context, opts DeliveryOptions, cbs ...Callback) (*Delivery, error) {
	if opts.URL == "" {
		return nil, errors.New("delivery needs a url")
	}
	if _, err := url.ParseRequestURI(opts.URL); err != nil {
		return nil, fmt.Errorf("delivery url: %w", err)
	}
	copies := max(1, opts.Copies)
	outs := make([]outgoing, 0, len(cbs))
	for _, cb := range cbs {
		o, err := s.buildCallback(cb)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o)
	}
	if opts.Shuffle {
		rand.Shuffle(len(outs), func(i, j int) { outs[i], outs[j] = outs[j], outs[i] })
	}
	d := &Delivery{done: make(chan struct{})}
	var all sync.WaitGroup
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(d.done)
		for i, o := range outs {
			if i > 0 && opts.Stagger > 0 && !s.pause(ctx, time.Duration(opts.Stagger)) {
				break
			}
			for c := 0; c < copies; c++ {
				all.Add(1)
				go func() {
					defer all.Done()
					r := s.deliverOne(ctx, opts, o, c)
					d.mu.Lock()
					d.results = append(d.results, r)
					d.mu.Unlock()
				}()
			}
		}
		all.Wait()
	}()
	return d, nil
}

// deliverOne sends one copy on the platform's schedule until acknowledged.
func (s *Sandbox) deliverOne(ctx context.Context, opts DeliveryOptions, o outgoing, copyNo int) DeliveryResult {
	res := DeliveryResult{Callback: o.cb, Copy: copyNo}
	limit := len(o.schedule) + 1
	if opts.MaxAttempts > 0 {
		limit = min(limit, opts.MaxAttempts)
	}
	scale := opts.TimeScale
	if scale < 1 {
		scale = 1
	}
	for attempt := 0; attempt < limit; attempt++ {
		if attempt > 0 && !s.pause(ctx, time.Duration(float64(o.schedule[attempt-1])/scale)) {
			res.LastError = "delivery stopped"
			return res
		}
		res.Attempts++
		status, body, err := s.post(ctx, opts.URL, o)
		res.LastStatus = status
		if err != nil {
			res.LastError = err.Error()
			continue
		}
		res.LastError = ""
		if o.acked(status, body) {
			res.Acked = true
			return res
		}
	}
	return res
}

func (s *Sandbox) post(ctx context.Context, target string, o outgoing) (int, []byte, error) {
	h, err := o.header()
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(o.body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = h
	resp, err := s.cbClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}

// pause waits d unless ctx ends or the sandbox closes; it reports whether to go on.
func (s *Sandbox) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closed:
		return false
	}
}

func (s *Sandbox) buildCallback(cb Callback) (outgoing, error) {
	if cb.OutRefundNo != "" {
		return s.buildRefundCallback(cb)
	}
	sc := s.Scenario(cb.Platform, cb.OutTradeNo)
	if sc.State == StateNotFound {
		return outgoing{}, fmt.Errorf("callback for %s %q: the platform has no such order", cb.Platform, cb.OutTradeNo)
	}
	switch cb.Platform {
	case reconcile.Alipay:
		return s.alipayCallback(cb, sc)
	case reconcile.WechatPay:
		return s.wechatCallback(cb, sc)
	}
	return outgoing{}, fmt.Errorf("callback: unknown platform %q", cb.Platform)
}

// alipayCallback is the trade_status_sync form, signed over everything but sign and
// sign_type. Alipay's retries resend the same form (same notify_id).
func (s *Sandbox) alipayCallback(cb Callback, sc Scenario) (outgoing, error) {
	status := map[State]string{
		StatePaid: alipay.StatusTradeSuccess, StateOpen: alipay.StatusWaitBuyerPay, StateClosed: alipay.StatusTradeClosed,
		StateRefunded: alipay.StatusTradeClosed, StateFailed: alipay.StatusTradeClosed,
	}[sc.State]
	if sc.RawState != "" {
		status = sc.RawState
	}
	if cb.RawState != "" {
		status = cb.RawState
	}
	// Sent as, and signed for, the app the order belongs to, or the third-party app that
	// calls for its merchant.
	app := s.alipay.signer(s.alipay.owner(sc))
	if app == nil {
		return outgoing{}, fmt.Errorf("callback for alipay %q: its app %s is not played by the sandbox", cb.OutTradeNo, sc.MerchantID)
	}
	return alipayOutgoing(cb, app, s.alipayTradeForm(app, cb.OutTradeNo, sc, status))
}

// alipayTradeForm is a trade's trade_status_sync form, not yet signed.
func (s *Sandbox) alipayTradeForm(app *alipayApp, outTradeNo string, sc Scenario, status string) url.Values {
	china := func(t time.Time) string { return t.In(platformclient.ChinaTime).Format(platformclient.ChinaTimeLayout) }
	now := s.now()
	amount := reconcile.FormatYuan(sc.AmountMinor)
	f := url.Values{}
	f.Set("notify_time", china(now))
	f.Set("notify_type", "trade_status_sync")
	f.Set("notify_id", "2024"+randomAlnum(30))
	// app_id is the app that was called (a provider's, for its merchant), auth_app_id the
	// merchant whose trade it is.
	f.Set("app_id", app.AppID)
	f.Set("auth_app_id", s.alipay.owner(sc))
	f.Set("charset", "utf-8")
	f.Set("version", "1.0")
	f.Set("sign_type", "RSA2")
	f.Set("trade_no", sc.TradeNo)
	f.Set("out_trade_no", outTradeNo)
	f.Set("trade_status", status)
	f.Set("total_amount", amount)
	f.Set("seller_id", app.SellerID)
	f.Set("buyer_id", "2088102177846880")
	f.Set("subject", "payrecon sandbox order")
	created := now
	if !sc.PaidAt.IsZero() {
		created = sc.PaidAt.Add(-time.Minute)
		f.Set("gmt_payment", china(sc.PaidAt))
		f.Set("receipt_amount", amount)
		f.Set("buyer_pay_amount", amount)
		f.Set("invoice_amount", amount)
		f.Set("point_amount", "0.00")
		f.Set("fund_bill_list", `[{"amount":"`+amount+`","fundChannel":"ALIPAYACCOUNT"}]`)
	}
	f.Set("gmt_create", china(created))
	if status == alipay.StatusTradeClosed {
		f.Set("gmt_close", china(now))
	}
	return f
}

// alipayOutgoing signs a notification form as the app's Alipay key and sends it as Alipay
// does.
func alipayOutgoing(cb Callback, app *alipayApp, f url.Values) (outgoing, error) {
	if err := alipay.SignNotify(app.PlatformKey, f); err != nil {
		return outgoing{}, err
	}
	return outgoing{
		cb:       cb,
		body:     []byte(f.Encode()),
		schedule: AlipayRetrySchedule,
		header: func() (http.Header, error) {
			return http.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}, "User-Agent": {"Mozilla/4.0"}}, nil
		},
		acked: func(status int, body []byte) bool {
			return status == http.StatusOK && string(body) == alipay.NotifySuccess
		},
	}, nil
}

// wechatCallback is the encrypted TRANSACTION notification; each attempt is signed anew.
func (s *Sandbox) wechatCallback(cb Callback, sc Scenario) (outgoing, error) {
	if cb.RawState != "" {
		sc.RawState = cb.RawState
	}
	m := s.wechat.owner(sc)
	if m == nil {
		return outgoing{}, fmt.Errorf("callback for %q: the sandbox plays no WeChat Pay merchant %s", cb.OutTradeNo, sc.MerchantID)
	}
	plain := s.wechatTransaction(m.account(), s.wechat.subOf(sc), cb.OutTradeNo, sc)
	// WeChat Pay only notifies successful payments; other states are sent under their own
	// event type so out-of-order plays can still be staged.
	event, summary := "TRANSACTION.SUCCESS", "支付成功"
	if st := wechatStateWord(sc); st != wechatpay.StateSuccess {
		event, summary = "TRANSACTION."+st, "交易状态变更"
	}
	return s.wechatOutgoing(cb, m, event, summary, "transaction", plain)
}

// wechatOutgoing seals plain with the merchant's API v3 key into the callback envelope of
// event; each attempt is signed anew (a retry hours later carries a fresh timestamp).
func (s *Sandbox) wechatOutgoing(cb Callback, m *wechatMerchant, event, summary, originalType string, plain []byte) (outgoing, error) {
	acct := m.account()
	nonce := randomAlnum(12)
	ct, err := wechatpay.EncryptResource(acct.APIv3Key, originalType, nonce, plain)
	if err != nil {
		return outgoing{}, err
	}
	body := object(
		field{"id", fmt.Sprintf("%08x-%04x-5%03x-a%03x-%012x", rand.Uint32(), rand.Uint32N(1<<16), rand.Uint32N(1<<12), rand.Uint32N(1<<12), rand.Uint64N(1<<48))},
		field{"create_time", s.now().In(platformclient.ChinaTime).Format(time.RFC3339)},
		field{"resource_type", "encrypt-resource"},
		field{"event_type", event},
		field{"summary", summary},
		field{"resource", jsonRaw(object(
			field{"original_type", originalType}, field{"algorithm", wechatpay.AlgorithmAESGCM},
			field{"ciphertext", ct}, field{"associated_data", originalType}, field{"nonce", nonce}))},
	)
	key, serial := m.callbackSigner()
	return outgoing{
		cb:       cb,
		body:     body,
		schedule: WechatRetrySchedule,
		header: func() (http.Header, error) {
			h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"Mozilla/4.0"}}
			err := wechatpay.SignResponse(h, key, serial, s.now(), body)
			return h, err
		},
		acked: func(status int, _ []byte) bool { return status/100 == 2 },
	}, nil
}

// buildRefundCallback is a refund's notification, as its platform sends it.
func (s *Sandbox) buildRefundCallback(cb Callback) (outgoing, error) {
	ref, ok := s.RefundOf(cb.Platform, cb.OutRefundNo)
	if !ok {
		return outgoing{}, fmt.Errorf("callback for %s refund %q: the platform has no such refund", cb.Platform, cb.OutRefundNo)
	}
	if cb.OutTradeNo != "" && cb.OutTradeNo != ref.OutTradeNo {
		return outgoing{}, fmt.Errorf("callback for refund %q: it refunds %q, not %q", cb.OutRefundNo, ref.OutTradeNo, cb.OutTradeNo)
	}
	cb.OutTradeNo = ref.OutTradeNo
	sc := s.Scenario(cb.Platform, ref.OutTradeNo)
	if cb.Platform == reconcile.WechatPay {
		event, summary, err := wechatRefundEvent(ref)
		if err != nil {
			return outgoing{}, err
		}
		m := s.wechat.owner(sc)
		if m == nil {
			return outgoing{}, fmt.Errorf("callback for refund %q: the sandbox plays no WeChat Pay merchant %s", cb.OutRefundNo, sc.MerchantID)
		}
		return s.wechatOutgoing(cb, m, event, summary, "refund", wechatRefundResource(ref, m.acct.MchID, s.wechat.subOf(sc)))
	}
	return s.alipayRefundCallback(cb, sc, ref)
}

// alipayRefundCallback is the trade notification sent again for a successful refund:
// out_biz_no, refund_fee (the trade's running total) and gmt_refund added, the trade
// TRADE_CLOSED once fully refunded.
func (s *Sandbox) alipayRefundCallback(cb Callback, sc Scenario, ref Refund) (outgoing, error) {
	if ref.Outcome != RefundSuccess {
		return outgoing{}, fmt.Errorf("callback for refund %q: Alipay notifies successful refunds only, it is %s", cb.OutRefundNo, ref.Outcome)
	}
	app := s.alipay.signer(s.alipay.owner(sc))
	if app == nil {
		return outgoing{}, fmt.Errorf("callback for refund %q: its app %s is not played by the sandbox", cb.OutRefundNo, sc.MerchantID)
	}
	status := alipay.StatusTradeSuccess
	if ref.RefundedTotalMinor >= sc.AmountMinor {
		status = alipay.StatusTradeClosed
	}
	f := s.alipayTradeForm(app, ref.OutTradeNo, sc, status)
	f.Set("out_biz_no", ref.OutRefundNo)
	f.Set("refund_fee", reconcile.FormatYuan(ref.RefundedTotalMinor))
	// yyyy-MM-dd HH:mm:ss.S, milliseconds written in full.
	f.Set("gmt_refund", ref.SucceededAt.In(platformclient.ChinaTime).Format(platformclient.ChinaTimeLayout+".000"))
	return alipayOutgoing(cb, app, f)
}
