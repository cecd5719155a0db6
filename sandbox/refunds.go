package sandbox

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/reconcile"
)

// RefundOutcome is what the platform made of a refund.
type RefundOutcome string

const (
	RefundSuccess    RefundOutcome = "SUCCESS"
	RefundProcessing RefundOutcome = "PROCESSING"
	// RefundAbnormal: WeChat Pay could not pay the buyer back; it may still succeed or close.
	RefundAbnormal RefundOutcome = "ABNORMAL"
	RefundClosed   RefundOutcome = "CLOSED"
)

// ParseRefundOutcome accepts the outcome names (case-insensitive); empty is SUCCESS.
func ParseRefundOutcome(s string) (RefundOutcome, error) {
	o := RefundOutcome(strings.ToUpper(s))
	switch o {
	case RefundSuccess, RefundProcessing, RefundAbnormal, RefundClosed:
		return o, nil
	case "":
		return RefundSuccess, nil
	}
	return "", fmt.Errorf("unknown refund outcome %q (want SUCCESS, PROCESSING, ABNORMAL or CLOSED)", s)
}

// refundMoves are the outcome changes SettleRefund plays, as the platforms make them.
var refundMoves = map[RefundOutcome][]RefundOutcome{
	RefundProcessing: {RefundSuccess, RefundAbnormal, RefundClosed},
	RefundAbnormal:   {RefundSuccess, RefundClosed},
}

// Refund is one refund as the platform keeps it.
type Refund struct {
	Platform reconcile.Platform `json:"platform"`
	// MerchantID is the trade's account (Alipay app_id, WeChat Pay mchid).
	MerchantID  string `json:"merchant_id"`
	OutTradeNo  string `json:"out_trade_no"`
	TradeNo     string `json:"trade_no"`
	OutRefundNo string `json:"out_refund_no"` // Alipay's out_request_no
	// RefundID is WeChat Pay's refund_id; Alipay numbers no refund.
	RefundID         string        `json:"refund_id,omitempty"`
	AmountMinor      int64         `json:"amount_minor"`
	TradeAmountMinor int64         `json:"trade_amount_minor"` // what the trade was paid
	Currency         string        `json:"currency"`
	Outcome          RefundOutcome `json:"outcome"`
	CreatedAt        time.Time     `json:"created_at"`
	SucceededAt      time.Time     `json:"succeeded_at,omitzero"` // SUCCESS only
	// RefundedTotalMinor is what the trade's successful refunds came to once this one
	// succeeded: Alipay's refund_fee. Zero unless SUCCESS.
	RefundedTotalMinor int64 `json:"refunded_total_minor,omitempty"`
	seq                int
}

// RefundSpec is a refund to make: Refund's arguments, with times a caller may set.
type RefundSpec struct {
	Platform    reconcile.Platform `json:"platform"`
	OutTradeNo  string             `json:"out_trade_no"`
	OutRefundNo string             `json:"out_refund_no"`
	AmountMinor int64              `json:"amount_minor"`
	Outcome     RefundOutcome      `json:"outcome,omitempty"`     // default SUCCESS
	CreatedAt   time.Time          `json:"created_at,omitzero"`   // default now
	SucceededAt time.Time          `json:"succeeded_at,omitzero"` // SUCCESS only; default CreatedAt
}

// refundKey names a refund: the platforms find a refund by the merchant's number.
type refundKey struct {
	platform    reconcile.Platform
	outRefundNo string
}

// Refund makes the platform refund part or all of a paid trade, with outcome (default
// SUCCESS; at most one). Several refunds of one trade are allowed while, CLOSED ones left
// out, they never come to more than the trade was paid. Nothing is sent: deliver the
// refund's callback with Deliver (Callback.OutRefundNo), or leave it lost.
func (s *Sandbox) Refund(p reconcile.Platform, outTradeNo, outRefundNo string, amountMinor int64, outcome ...RefundOutcome) (Refund, error) {
	if len(outcome) > 1 {
		return Refund{}, fmt.Errorf("refund %s: one outcome at most", outRefundNo)
	}
	spec := RefundSpec{Platform: p, OutTradeNo: outTradeNo, OutRefundNo: outRefundNo, AmountMinor: amountMinor}
	if len(outcome) == 1 {
		spec.Outcome = outcome[0]
	}
	return s.AddRefund(spec)
}

// AddRefund is Refund with the times of the spec.
func (s *Sandbox) AddRefund(spec RefundSpec) (Refund, error) {
	o, err := ParseRefundOutcome(string(spec.Outcome))
	if err != nil {
		return Refund{}, err
	}
	switch {
	case spec.Platform != reconcile.Alipay && spec.Platform != reconcile.WechatPay:
		return Refund{}, fmt.Errorf("refund: unknown platform %q", spec.Platform)
	case spec.OutTradeNo == "" || spec.OutRefundNo == "":
		return Refund{}, fmt.Errorf("refund: out_trade_no and out_refund_no are required")
	case spec.AmountMinor <= 0:
		return Refund{}, fmt.Errorf("refund %s: the amount must be positive", spec.OutRefundNo)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := refundKey{spec.Platform, spec.OutRefundNo}
	if _, dup := s.refunds[k]; dup {
		return Refund{}, fmt.Errorf("refund %s exists already (SettleRefund moves it)", spec.OutRefundNo)
	}
	r, err := s.newRefundLocked(spec, o)
	if err != nil {
		return Refund{}, err
	}
	s.refunds[k] = r
	return *r, nil
}

// newRefundLocked checks the refund against its trade and builds it.
func (s *Sandbox) newRefundLocked(spec RefundSpec, o RefundOutcome) (*Refund, error) {
	tr, ok := s.orders[orderKey{spec.Platform, spec.OutTradeNo}]
	if !ok || (tr.sc.State != StatePaid && tr.sc.State != StateRefunded) {
		return nil, fmt.Errorf("refund %s: %s trade %q is not paid", spec.OutRefundNo, spec.Platform, spec.OutTradeNo)
	}
	if held := s.refundHeldLocked(spec.Platform, spec.OutTradeNo); held+spec.AmountMinor > tr.sc.AmountMinor {
		return nil, fmt.Errorf("refund %s: %s more would bring the refunds of %s to %s, above the %s paid", spec.OutRefundNo,
			reconcile.FormatYuan(spec.AmountMinor), spec.OutTradeNo, reconcile.FormatYuan(held+spec.AmountMinor), reconcile.FormatYuan(tr.sc.AmountMinor))
	}
	s.seq++
	r := &Refund{Platform: spec.Platform, MerchantID: s.ownerLocked(spec.Platform, tr.sc), OutTradeNo: spec.OutTradeNo,
		TradeNo: tr.sc.TradeNo, OutRefundNo: spec.OutRefundNo, AmountMinor: spec.AmountMinor, TradeAmountMinor: tr.sc.AmountMinor,
		Currency: cmp.Or(tr.sc.Currency, "CNY"), Outcome: o, CreatedAt: spec.CreatedAt, seq: s.seq}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now().Truncate(time.Millisecond)
	}
	if spec.Platform == reconcile.WechatPay {
		// refund_id: 29 digits, as WeChat Pay numbers refunds.
		r.RefundID = fmt.Sprintf("5030%s%017d", r.CreatedAt.In(platformclient.ChinaTime).Format("20060102"), s.seq)
	}
	if o == RefundSuccess {
		s.succeedLocked(r, cmp.Or(spec.SucceededAt, r.CreatedAt))
	}
	return r, nil
}

// refundHeldLocked is what a trade's refunds take back or may yet take back: all but the
// CLOSED ones.
func (s *Sandbox) refundHeldLocked(p reconcile.Platform, outTradeNo string) int64 {
	var sum int64
	for _, r := range s.refunds {
		if r.Platform == p && r.OutTradeNo == outTradeNo && r.Outcome != RefundClosed {
			sum += r.AmountMinor
		}
	}
	return sum
}

// succeedLocked marks r successful at `at`, with the trade's running total of successful
// refunds (Alipay's refund_fee) as it stands with r.
func (s *Sandbox) succeedLocked(r *Refund, at time.Time) {
	total := r.AmountMinor
	for _, o := range s.refunds {
		if o != r && o.Platform == r.Platform && o.OutTradeNo == r.OutTradeNo && o.Outcome == RefundSuccess {
			total += o.AmountMinor
		}
	}
	r.Outcome, r.SucceededAt, r.RefundedTotalMinor = RefundSuccess, at, total
}

// SettleRefund moves a refund the platform is still working on (PROCESSING, or ABNORMAL)
// to outcome, as the platform does later: a refund that succeeds now succeeds at the
// sandbox's now.
func (s *Sandbox) SettleRefund(p reconcile.Platform, outRefundNo string, outcome RefundOutcome) (Refund, error) {
	o, err := ParseRefundOutcome(string(outcome))
	if err != nil {
		return Refund{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[refundKey{p, outRefundNo}]
	if !ok {
		return Refund{}, fmt.Errorf("%s has no refund %q", p, outRefundNo)
	}
	if !slices.Contains(refundMoves[r.Outcome], o) {
		return Refund{}, fmt.Errorf("refund %s: %s cannot become %s", outRefundNo, r.Outcome, o)
	}
	if o == RefundSuccess {
		s.succeedLocked(r, s.now().Truncate(time.Millisecond))
	} else {
		r.Outcome = o
	}
	return *r, nil
}

// RefundOf returns a refund by its merchant number.
func (s *Sandbox) RefundOf(p reconcile.Platform, outRefundNo string) (Refund, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.refunds[refundKey{p, outRefundNo}]; ok {
		return *r, true
	}
	return Refund{}, false
}

// RefundsOfDay lists the refunds of one account (merchant "" is the platform's default
// account) made or succeeded on day (China time), oldest first, with their times, amounts,
// numbers and outcomes: what a day's bill lists. Which time files a refund under a day is
// the bill's rule: WeChat Pay lists a refund under its creation (SUCCESS or PROCESSING),
// Alipay under its success (CreatedAt, SucceededAt).
func (s *Sandbox) RefundsOfDay(p reconcile.Platform, merchantID string, day time.Time) []Refund {
	from := platformclient.BillDay(day)
	to := from.AddDate(0, 0, 1)
	in := func(t time.Time) bool { return !t.IsZero() && !t.Before(from) && t.Before(to) }
	s.mu.Lock()
	defer s.mu.Unlock()
	if merchantID == "" {
		merchantID = s.ownerLocked(p, Scenario{})
	}
	var out []Refund
	for _, r := range s.refunds {
		if r.Platform == p && r.MerchantID == merchantID && (in(r.CreatedAt) || in(r.SucceededAt)) {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Refund) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// RefundQueryCount is how many refund queries reached the sandbox for one refund.
func (s *Sandbox) RefundQueryCount(p reconcile.Platform, outRefundNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refundQueries[refundKey{p, outRefundNo}]
}

// serveWechatRefundQuery answers GET /v3/refund/domestic/refunds/{no}: the refund the
// asking merchant made, or a signed 404 RESOURCE_NOT_EXISTS.
func (s *Sandbox) serveWechatRefundQuery(w http.ResponseWriter, r *http.Request) {
	no := r.PathValue("no")
	ref, found := s.RefundOf(reconcile.WechatPay, no)
	c := s.wechatAdmitAs(w, r, request{platform: reconcile.WechatPay, key: orderKey{reconcile.WechatPay, ref.OutTradeNo}, isQuery: true, refund: no})
	if c == nil {
		return
	}
	if !found || ref.MerchantID != c.account() {
		s.writeWechatError(w, c, wechatErrors["RESOURCE_NOT_EXISTS"])
		return
	}
	s.writeWechat(w, c, http.StatusOK, wechatRefundAnswer(ref))
}

// wechatRefundAmount is the amount object of a refund answer (full) or callback (short).
func wechatRefundAmount(ref Refund, full bool) json.RawMessage {
	fields := []field{{"total", ref.TradeAmountMinor}, {"refund", ref.AmountMinor},
		{"payer_total", ref.TradeAmountMinor}, {"payer_refund", ref.AmountMinor}}
	if full {
		fields = append(fields, field{"settlement_refund", ref.AmountMinor}, field{"settlement_total", ref.TradeAmountMinor},
			field{"discount_refund", 0}, field{"currency", ref.Currency}, field{"refund_fee", 0})
	}
	return jsonRaw(object(fields...))
}

// wechatRefundAnswer is the refund query's answer, in WeChat Pay's field order.
func wechatRefundAnswer(ref Refund) []byte {
	var success any
	if ref.Outcome == RefundSuccess {
		success = ref.SucceededAt.In(platformclient.ChinaTime).Format(time.RFC3339)
	}
	return object(field{"refund_id", ref.RefundID}, field{"out_refund_no", ref.OutRefundNo}, field{"transaction_id", ref.TradeNo},
		field{"out_trade_no", ref.OutTradeNo}, field{"channel", "ORIGINAL"}, field{"user_received_account", "支付用户零钱"},
		field{"success_time", success}, field{"create_time", ref.CreatedAt.In(platformclient.ChinaTime).Format(time.RFC3339)},
		field{"status", string(ref.Outcome)}, field{"funds_account", "AVAILABLE"}, field{"amount", wechatRefundAmount(ref, true)},
		field{"promotion_detail", jsonRaw([]byte("[]"))})
}

// wechatRefundResource is a refund callback's decrypted resource.
func wechatRefundResource(ref Refund, mchID, sub string) []byte {
	var success any
	if ref.Outcome == RefundSuccess {
		success = ref.SucceededAt.In(platformclient.ChinaTime).Format(time.RFC3339)
	}
	ids := []field{{"mchid", mchID}}
	if sub != "" { // a service provider's sub-merchant: both named, as the partner form does
		ids = []field{{"sp_mchid", mchID}, {"sub_mchid", sub}}
	}
	return object(append(ids, field{"out_trade_no", ref.OutTradeNo}, field{"transaction_id", ref.TradeNo},
		field{"out_refund_no", ref.OutRefundNo}, field{"refund_id", ref.RefundID}, field{"refund_status", string(ref.Outcome)},
		field{"success_time", success}, field{"user_received_account", "支付用户零钱"}, field{"amount", wechatRefundAmount(ref, false)})...)
}

// alipayRefundNode builds alipay_trade_fastpay_refund_query_response: a successful refund
// of the trade shows refund_amount; any other (none, still processing, failed) does not.
func (s *Sandbox) alipayRefundNode(outTradeNo, asked, outRequestNo string) []byte {
	sc := Scenario{State: StateNotFound}
	if outTradeNo != "" {
		sc = s.lookup(reconcile.Alipay, outTradeNo)
	}
	if sc.State == StateNotFound {
		return alipayErrors["ACQ.TRADE_NOT_EXIST"].node(field{"out_trade_no", asked})
	}
	ref, ok := s.RefundOf(reconcile.Alipay, outRequestNo)
	if !ok || ref.OutTradeNo != outTradeNo || ref.Outcome != RefundSuccess {
		return object(field{"code", "10000"}, field{"msg", "Success"}, field{"out_request_no", outRequestNo},
			field{"out_trade_no", outTradeNo}, field{"trade_no", sc.TradeNo})
	}
	amount := func(fen int64) any {
		if sc.AmountAsNumber {
			return json.Number(reconcile.FormatYuan(fen))
		}
		return reconcile.FormatYuan(fen)
	}
	return object(field{"code", "10000"}, field{"msg", "Success"},
		field{"gmt_refund_pay", ref.SucceededAt.In(platformclient.ChinaTime).Format(platformclient.ChinaTimeLayout)},
		field{"out_request_no", outRequestNo}, field{"out_trade_no", outTradeNo}, field{"refund_amount", amount(ref.AmountMinor)},
		field{"refund_status", alipay.RefundStatusSuccess}, field{"total_amount", amount(sc.AmountMinor)}, field{"trade_no", sc.TradeNo})
}

// alipayRefundNo is the refund an alipay.trade.fastpay.refund.query asks about: its
// out_request_no, which is the out_trade_no for a refund made without one.
func alipayRefundNo(method, bizContent string) string {
	if method != alipay.MethodRefundQuery {
		return ""
	}
	var biz struct {
		OutTradeNo   string `json:"out_trade_no"`
		OutRequestNo string `json:"out_request_no"`
	}
	_ = json.Unmarshal([]byte(bizContent), &biz)
	return cmp.Or(biz.OutRequestNo, biz.OutTradeNo)
}

// wechatRefundEvent is the event type and summary of a refund's callback; WeChat Pay sends
// none for a refund still processing.
func wechatRefundEvent(ref Refund) (string, string, error) {
	summary, ok := map[RefundOutcome]string{RefundSuccess: "退款成功", RefundAbnormal: "退款异常", RefundClosed: "退款关闭"}[ref.Outcome]
	if !ok {
		return "", "", fmt.Errorf("callback for refund %s: WeChat Pay sends none while it is %s", ref.OutRefundNo, ref.Outcome)
	}
	return "REFUND." + string(ref.Outcome), summary, nil
}
