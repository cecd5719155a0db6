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

// QueryRefund implements reconcile.PlatformClient. The simulated platform keeps no refund
// records of the merchant's own yet: every refund is unknown to it, behind the same faults
// as a query.
func (p *Platform) QueryRefund(ctx context.Context, otn, outRefundNo string) (reconcile.RefundResult, error) {
	kind, latency, hang := p.fault("query")
	if err := reconcile.Sleep(ctx, latency); err != nil {
		return reconcile.RefundResult{}, &reconcile.PlatformError{Platform: p.platform, Kind: reconcile.KindRetryable, Err: err}
	}
	if kind != "" {
		return reconcile.RefundResult{}, p.fail(ctx, kind, hang)
	}
	return reconcile.RefundResult{Platform: p.platform, MerchantID: p.merchant, OutTradeNo: otn, OutRefundNo: outRefundNo,
		State: reconcile.RefundStateNotFound, RawState: string(reconcile.RefundStateNotFound)}, nil
}
