package sim

import (
	"context"

	"github.com/payrecon/payrecon/reconcile"
)

// Query implements reconcile.PlatformClient.
func (p *Platform) Query(ctx context.Context, otn string) (reconcile.Result, error) {
	kind, latency, hang := p.fault("query")
	if err := reconcile.Sleep(ctx, latency); err != nil {
		return reconcile.Result{}, &reconcile.PlatformError{Platform: p.platform, Kind: reconcile.KindRetryable, Err: err}
	}
	if kind != "" {
		return reconcile.Result{}, p.fail(ctx, kind, hang)
	}
	t := p.Truth(otn)
	r := reconcile.Result{Platform: p.platform, MerchantID: p.merchant, OutTradeNo: otn, State: t.State, RawState: string(t.State)}
	if t.EverPaid {
		r.PlatformTradeNo, r.AmountMinor, r.PaidAt = t.TradeNo, t.Amount, t.PaidAt
	}
	return r, nil
}

// Close implements reconcile.PlatformClient: an open trade is closed; a paid one refuses
// with KindAlreadyPaid. With the "answer lost" fault the trade is closed and the caller
// still sees a retryable error.
func (p *Platform) Close(ctx context.Context, otn string) error {
	kind, latency, hang := p.fault("close")
	if err := reconcile.Sleep(ctx, latency); err != nil {
		return &reconcile.PlatformError{Platform: p.platform, Kind: reconcile.KindRetryable, Err: err}
	}
	if kind != "" && kind != "platform_close_answer_lost" {
		return p.fail(ctx, kind, hang)
	}
	p.mu.Lock()
	t, ok := p.trades[otn]
	var err error
	if ok {
		switch t.State {
		case reconcile.StateOpen:
			t.State = reconcile.StateClosed
		case reconcile.StatePaid, reconcile.StateRefunded:
			err = &reconcile.PlatformError{Platform: p.platform, Kind: reconcile.KindAlreadyPaid, Message: "trade paid"}
		}
	}
	p.mu.Unlock()
	if err == nil && kind != "" {
		return p.fail(ctx, kind, hang)
	}
	return err
}

// QueryRefund implements reconcile.PlatformClient: the truth about that refund of that trade
// (SUCCESS with its amount and time; NOT_FOUND when the platform has none, as for a refund
// the merchant's app recorded but never got to the platform), behind the same faults as a
// query.
func (p *Platform) QueryRefund(ctx context.Context, otn, outRefundNo string) (reconcile.RefundResult, error) {
	kind, latency, hang := p.fault("query_refund")
	// The answer is the truth when the platform read it; the latency comes after, so a
	// refund settled meanwhile makes it stale by the time the pass applies it.
	answer := p.refundAnswer(otn, outRefundNo)
	if err := reconcile.Sleep(ctx, latency); err != nil {
		return reconcile.RefundResult{}, &reconcile.PlatformError{Platform: p.platform, Kind: reconcile.KindRetryable, Err: err}
	}
	if kind != "" {
		return reconcile.RefundResult{}, p.fail(ctx, kind, hang)
	}
	return answer, nil
}
