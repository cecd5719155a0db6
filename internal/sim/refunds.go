package sim

import (
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// PlatformRefund is the platform's truth about one refund of a trade.
type PlatformRefund struct {
	OutTradeNo  string
	OutRefundNo string
	// RefundID is WeChat Pay's own refund number; Alipay numbers no refund.
	RefundID    string
	Amount      int64
	State       reconcile.RefundState
	SucceededAt time.Time
	// Portal: made in the merchant portal, so the merchant's app never recorded it.
	Portal bool
	// WasAbnormal: the refund went through ABNORMAL (the buyer's account refused the money)
	// before its outcome: a REFUND_ABNORMAL finding about it is explained.
	WasAbnormal bool
	// TotalAfter is the trade's refunded total once this refund succeeded: what Alipay's
	// notification of it says (refund_fee). Zero unless SUCCESS.
	TotalAfter int64
}

// refundMoves are the platform's refund state machine, as the real platforms move a refund:
// it is never called back, so nothing leaves SUCCESS or CLOSED.
var refundMoves = map[reconcile.RefundState][]reconcile.RefundState{
	reconcile.RefundStateProcessing: {reconcile.RefundStateSuccess, reconcile.RefundStateClosed, reconcile.RefundStateAbnormal},
	reconcile.RefundStateAbnormal:   {reconcile.RefundStateSuccess, reconcile.RefundStateClosed},
}

// AddRefund records a refund the platform accepted, PROCESSING. The simulated platform does
// not cap refunds at what the trade was paid (a real one refuses most attempts beyond it):
// the merchant's books must refuse every refund that does not fit, whatever the platform
// says, and only a platform that lets one through tests that. It refuses (false) a refund of
// a trade it has no payment for, or one refunded whole already (Refund).
func (p *Platform) AddRefund(otn, outRefundNo, refundID string, amount int64, portal bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.trades[otn]
	if !ok || !t.EverPaid || t.State == reconcile.StateRefunded {
		return false
	}
	p.refunds[outRefundNo] = &PlatformRefund{OutTradeNo: otn, OutRefundNo: outRefundNo, RefundID: refundID,
		Amount: amount, State: reconcile.RefundStateProcessing, Portal: portal}
	return true
}

// SettleRefund moves a refund to state at the given time, if its state machine allows it,
// and returns the refund as it now stands (with the trade's running total for a SUCCESS).
func (p *Platform) SettleRefund(outRefundNo string, to reconcile.RefundState, at time.Time) (PlatformRefund, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.refunds[outRefundNo]
	if !ok || !canMove(r.State, to) {
		return PlatformRefund{}, false
	}
	r.State = to
	switch to {
	case reconcile.RefundStateAbnormal:
		r.WasAbnormal = true
	case reconcile.RefundStateSuccess:
		r.SucceededAt = at
		p.refundedTotal[r.OutTradeNo] += r.Amount
		r.TotalAfter = p.refundedTotal[r.OutTradeNo]
		// The money went back: the day's bill lists the refund.
		p.moves = append(p.moves, Movement{OutTradeNo: r.OutTradeNo, TradeNo: p.trades[r.OutTradeNo].TradeNo,
			Amount: r.Amount, At: at, Refund: true, RefundNo: r.OutRefundNo, RefundID: r.RefundID})
	}
	return *r, true
}

func canMove(from, to reconcile.RefundState) bool {
	for _, s := range refundMoves[from] {
		if s == to {
			return true
		}
	}
	return false
}

// RefundTruth returns a copy of a refund's truth; State NOT_FOUND when the platform has none.
func (p *Platform) RefundTruth(outRefundNo string) PlatformRefund {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.refunds[outRefundNo]; ok {
		return *r
	}
	return PlatformRefund{OutRefundNo: outRefundNo, State: reconcile.RefundStateNotFound}
}

// refundAnswer is the platform's answer to a refund query: truthful, about this refund of
// this trade only.
func (p *Platform) refundAnswer(otn, outRefundNo string) reconcile.RefundResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := reconcile.RefundResult{Platform: p.platform, MerchantID: p.merchant, OutTradeNo: otn, OutRefundNo: outRefundNo,
		State: reconcile.RefundStateNotFound, RawState: string(reconcile.RefundStateNotFound)}
	r, ok := p.refunds[outRefundNo]
	if !ok || r.OutTradeNo != otn {
		return res
	}
	res.State, res.RawState, res.PlatformRefundNo = r.State, string(r.State), r.RefundID
	if t := p.trades[otn]; t != nil {
		res.PlatformTradeNo = t.TradeNo
	}
	// WeChat Pay names the amount in every answer; Alipay only once the refund succeeded.
	if r.State == reconcile.RefundStateSuccess || p.platform == reconcile.WechatPay {
		res.AmountMinor = r.Amount
	}
	if r.State == reconcile.RefundStateSuccess {
		res.SucceededAt = r.SucceededAt
	}
	return res
}

// HasRefunds reports whether a trade has any refund record (the simulation keeps the
// whole-trade refund of Refund apart from these).
func (p *Platform) HasRefunds(otn string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.refunds {
		if r.OutTradeNo == otn {
			return true
		}
	}
	return false
}
