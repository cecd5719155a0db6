package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RefundClaimKey is the Redis key every source shares for one refund's outcome.
func (a *Applier) RefundClaimKey(p Platform, platformTradeNo, outRefundNo string) string {
	return a.settings.ClaimPrefix + string(p) + ":refund:" + platformTradeNo + ":" + outRefundNo
}

// ApplyRefundResult applies one verified refund answer exactly once, along the payment
// path's shape: find the refund, check it against the order and the answer, claim, move it
// with ONE conditional statement (with its event and outbox row), mark the claim done; when
// nothing moved, classify. Findings are outcomes; an error (wrapping ErrRetryable) means
// nothing was applied and a retry may succeed.
func (a *Applier) ApplyRefundResult(ctx context.Context, r RefundResult, opt ApplyOptions) (Applied, error) {
	if err := r.validate(); err != nil {
		return Applied{}, err
	}
	if a.refunds == nil {
		return Applied{}, fmt.Errorf("refund %s/%s: the store cannot apply refunds", r.Platform, r.OutRefundNo)
	}
	if r.Source == SourceNotify && r.State == RefundStateSuccess && r.PlatformTradeNo != "" && !opt.DryRun {
		if a.claims.Peek(ctx, a.RefundClaimKey(r.Platform, r.PlatformTradeNo, r.OutRefundNo)) == ClaimDone {
			return Applied{Outcome: OutcomeDuplicate}, nil
		}
	}
	ref, err := a.lookupRefund(ctx, r, opt)
	if errors.Is(err, ErrNotFound) {
		return a.noSuchRefund(ctx, r, opt)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("find refund %s/%s: %w: %w", r.Platform, r.OutRefundNo, ErrRetryable, err)
	}
	order, err := a.lookupRefundOrder(ctx, ref, opt)
	if err != nil {
		return Applied{}, fmt.Errorf("find order %s of refund %s: %w: %w", ref.OutTradeNo, ref.OutRefundNo, ErrRetryable, err)
	}
	applied, err := a.applyRefundTo(ctx, r, ref, order, opt)
	if err == nil {
		a.log.Debug().Str("platform", string(r.Platform)).Str("out_trade_no", ref.OutTradeNo).
			Str("out_refund_no", r.OutRefundNo).Str("source", string(r.Source)).Int64("refund_id", ref.ID).
			Str("outcome", string(applied.Outcome)).Str("mismatch", string(applied.Mismatch)).
			Str("refund_to", string(applied.RefundTo)).Msg("refund result applied")
	}
	return applied, err
}

// lookupRefund finds the refund the answer is about, preferring the caller's fresh copy.
func (a *Applier) lookupRefund(ctx context.Context, r RefundResult, opt ApplyOptions) (Refund, error) {
	if ref := opt.Refund; ref != nil && ref.Platform == r.Platform && ref.MerchantID == r.MerchantID && ref.OutRefundNo == r.OutRefundNo {
		return *ref, nil
	}
	return a.refunds.FindRefund(ctx, r.Platform, r.MerchantID, r.OutRefundNo)
}

// lookupRefundOrder finds the refund's order, preferring the caller's copy. What the copy
// says of the order's refunds may be stale: the conditional statement, which reads the
// order afresh, decides whether it can take the amount back.
func (a *Applier) lookupRefundOrder(ctx context.Context, ref Refund, opt ApplyOptions) (Order, error) {
	if o := opt.Order; o != nil && o.ID == ref.OrderID {
		return *o, nil
	}
	return a.store.FindOrder(ctx, ref.Platform, ref.MerchantID, ref.OutTradeNo)
}

// applyRefundTo decides what an answer means for a refund we have.
func (a *Applier) applyRefundTo(ctx context.Context, r RefundResult, ref Refund, o Order, opt ApplyOptions) (Applied, error) {
	base := Applied{Order: o, Refund: &ref}
	if r.OutTradeNo != "" && r.OutTradeNo != ref.OutTradeNo {
		return a.refundFinding(ctx, r, ref, o, MismatchUnknownRefund, opt,
			map[string]any{"platform_out_trade_no": r.OutTradeNo, "reason": "the platform's refund belongs to another order"})
	}
	if r.CurrencyOrDefault() != ref.Currency {
		return a.refundFinding(ctx, r, ref, o, MismatchCurrency, opt,
			map[string]any{"local_currency": ref.Currency, "platform_currency": r.CurrencyOrDefault()})
	}
	if r.AmountMinor == 0 && r.RefundedTotalMinor > 0 {
		// Alipay's notification names the trade's running total. Out of order with another
		// refund of the same trade it cannot be split exactly: leave the refund for the
		// pass, whose query names this refund's own amount.
		if ref.Status == RefundSuccess {
			r.AmountMinor = ref.AmountMinor
		} else if r.AmountMinor = r.RefundedTotalMinor - o.RefundedMinor; r.AmountMinor != ref.AmountMinor {
			return base.with(OutcomeStillPending), nil
		}
	}
	if r.AmountMinor != 0 && r.AmountMinor != ref.AmountMinor {
		return a.refundFinding(ctx, r, ref, o, MismatchRefundAmount, opt, nil)
	}
	switch r.State {
	case RefundStateProcessing:
		return a.refundUnsettled(ref, base), nil
	case RefundStateNotFound:
		return a.refundNotFound(ctx, r, ref, o, opt)
	}
	to, _ := r.State.status()
	if ref.Status == to {
		return a.refundAlreadyThere(ctx, r, ref, o, opt)
	}
	if !CanRefundTransition(ref.Status, to) {
		return a.refundAgainstSettled(ctx, r, ref, o, opt)
	}
	// Whether the order can take the amount back is the conditional statement's to decide:
	// the refund and the order were read one after the other, and another process may have
	// landed this very refund in between. Only a dry run, which writes nothing, judges here.
	if opt.DryRun && to == RefundSuccess && !canTakeBack(o, ref.AmountMinor) {
		return a.refundFinding(ctx, r, ref, o, MismatchOverRefunded, opt, overRefundDetail(o, ref.AmountMinor))
	}
	return a.moveRefund(ctx, r, ref, o, to, opt)
}

// with returns a copy carrying outcome.
func (ap Applied) with(outcome Outcome) Applied {
	ap.Outcome = outcome
	return ap
}

// canTakeBack says whether a PAID order can refund amount more without passing what was
// paid. A REFUNDED order has nothing left to refund.
func canTakeBack(o Order, amount int64) bool {
	return o.Status == StatusPaid && o.RefundedMinor+amount <= o.PaidAmountMinor
}

func overRefundDetail(o Order, amount int64) map[string]any {
	return map[string]any{"paid_minor": o.PaidAmountMinor, "refunded_minor": o.RefundedMinor,
		"refund_minor": amount, "order_status": string(o.Status)}
}

// refundUnsettled is a refund the platform is still working on.
func (a *Applier) refundUnsettled(ref Refund, base Applied) Applied {
	if ref.Status == RefundProcessing || ref.Status == RefundAbnormal {
		return base.with(OutcomeStillPending)
	}
	return base.with(OutcomeUnchanged)
}

// refundNotFound: the platform does not know the refund. Young, it may not have reached the
// platform yet; past RECONCILER_REFUND_TTL, or already SUCCESS in our books, it is a finding.
func (a *Applier) refundNotFound(ctx context.Context, r RefundResult, ref Refund, o Order, opt ApplyOptions) (Applied, error) {
	base := Applied{Order: o, Refund: &ref}
	switch ref.Status {
	case RefundClosed:
		return base.with(OutcomeUnchanged), nil
	case RefundProcessing, RefundAbnormal:
		if a.settings.Now().Sub(ref.CreatedAt) < a.settings.RefundTTL {
			return base.with(OutcomeStillPending), nil
		}
	}
	return a.refundFinding(ctx, r, ref, o, MismatchRefundNotAtPlatform, opt,
		map[string]any{"refund_age": a.settings.Now().Sub(ref.CreatedAt).Round(time.Second).String()})
}

// refundAlreadyThere: the answer agrees with our books. A callback is a duplicate (and its
// claim is marked, so the platform's further retries are shed); an ABNORMAL refund is
// sighted again for finance.
func (a *Applier) refundAlreadyThere(ctx context.Context, r RefundResult, ref Refund, o Order, opt ApplyOptions) (Applied, error) {
	if ref.Status == RefundAbnormal {
		return a.refundFinding(ctx, r, ref, o, MismatchRefundAbnormal, opt, nil)
	}
	if !opt.DryRun && ref.Status == RefundSuccess {
		a.claims.MarkDone(context.WithoutCancel(ctx), a.RefundClaimKey(r.Platform, tradeNoOf(r, o), ref.OutRefundNo), a.settings.ClaimTTL)
	}
	return a.refundStale(r, ref, o), nil
}

// refundAgainstSettled: the platform's outcome contradicts a refund our books have settled
// (SUCCESS here, CLOSED there, or the reverse). Never a transition: finance decides.
func (a *Applier) refundAgainstSettled(ctx context.Context, r RefundResult, ref Refund, o Order, opt ApplyOptions) (Applied, error) {
	if to, _ := r.State.status(); CanRefundTransition(to, ref.Status) {
		// A state our refund has already passed through (WeChat Pay's ABNORMAL notification
		// retried after the SUCCESS one, or a query answered before the refund settled and
		// applied after): late news, not a contradiction.
		return a.refundStale(r, ref, o), nil
	}
	switch {
	case ref.Status == RefundSuccess:
		// Our books say the money went back; the platform says it did not.
		return a.refundFinding(ctx, r, ref, o, MismatchRefundNotAtPlatform, opt, map[string]any{"platform_says": string(r.State)})
	case r.State == RefundStateSuccess:
		// The platform paid back a refund our books closed.
		return a.refundFinding(ctx, r, ref, o, MismatchUnknownRefund, opt, map[string]any{"reason": "the platform paid back a refund recorded as " + string(ref.Status)})
	}
	return Applied{Outcome: OutcomeUnchanged, Order: o, Refund: &ref}, nil
}

// refundStale answers late news about a refund: a callback is a duplicate (acknowledged, so
// the platform stops retrying it), a query's answer changes nothing.
func (a *Applier) refundStale(r RefundResult, ref Refund, o Order) Applied {
	if r.Source == SourceNotify {
		return Applied{Outcome: OutcomeDuplicate, Order: o, Refund: &ref}
	}
	return Applied{Outcome: OutcomeUnchanged, Order: o, Refund: &ref}
}

// tradeNoOf is the trade number a refund's claim is keyed on: the answer's, else the order's.
func tradeNoOf(r RefundResult, o Order) string {
	if r.PlatformTradeNo != "" {
		return r.PlatformTradeNo
	}
	return o.PlatformTradeNo
}

// moveRefund claims the refund's outcome and applies the conditional transition.
func (a *Applier) moveRefund(ctx context.Context, r RefundResult, ref Refund, o Order, to RefundStatus, opt ApplyOptions) (Applied, error) {
	if opt.DryRun {
		return Applied{Outcome: OutcomeApplied, Order: o, Refund: &ref, RefundFrom: ref.Status, RefundTo: to}, nil
	}
	key := a.RefundClaimKey(r.Platform, tradeNoOf(r, o), ref.OutRefundNo)
	owned := false
	switch a.claims.Claim(ctx, key, a.settings.ClaimLease) {
	case ClaimHeld:
		if !opt.OverrideHeldClaim {
			return Applied{Outcome: OutcomeClaimedElsewhere, Order: o, Refund: &ref}, nil
		}
	case ClaimDone:
		if r.Source == SourceNotify && to == RefundSuccess {
			return Applied{Outcome: OutcomeDuplicate, Order: o, Refund: &ref}, nil
		}
		// DONE marks a success; a pass that just read PROCESSING lets the update decide.
	case ClaimAcquired:
		owned = true
	}
	release := func() {
		if owned {
			a.claims.Release(context.WithoutCancel(ctx), key)
		}
	}
	mv, err := a.refunds.ApplyRefundTransition(ctx, a.refundTransition(r, ref, o, to))
	if err != nil {
		release()
		return Applied{}, fmt.Errorf("apply refund %s -> %s (order %d): %w: %w", ref.OutRefundNo, to, o.ID, ErrRetryable, err)
	}
	if mv.Changed {
		if to == RefundSuccess {
			a.claims.MarkDone(context.WithoutCancel(ctx), key, a.settings.ClaimTTL)
		} else {
			release() // an ABNORMAL refund may still succeed: nothing to shed
		}
		return a.refundMoved(ctx, r, ref, o, to, mv, opt)
	}
	release()
	return a.classifyUnmovedRefund(ctx, r, ref, to, opt)
}

func (a *Applier) refundTransition(r RefundResult, ref Refund, o Order, to RefundStatus) RefundTransition {
	t := RefundTransition{RefundID: ref.ID, OrderID: o.ID, To: to, Platform: r.Platform,
		PlatformTradeNo: tradeNoOf(r, o), PlatformRefundNo: r.PlatformRefundNo, AmountMinor: ref.AmountMinor,
		SucceededAt: r.SucceededAt, Source: r.Source, RawDigest: r.RawDigest}
	if to == RefundSuccess {
		t.Outbox = refundOutbox(r, ref, o)
	}
	return t
}

// refundMoved reports an applied transition; an ABNORMAL refund is also a finding, so the
// merchant hears that the buyer was not paid back.
func (a *Applier) refundMoved(ctx context.Context, r RefundResult, ref Refund, o Order, to RefundStatus, mv RefundMove, opt ApplyOptions) (Applied, error) {
	from := ref.Status
	ref.Status = to
	if to == RefundSuccess {
		o.RefundedMinor += ref.AmountMinor
		if mv.OrderRefunded {
			o.Status = StatusRefunded
		}
	}
	applied := Applied{Outcome: OutcomeApplied, Order: o, Refund: &ref, RefundFrom: from, RefundTo: to}
	if to == RefundAbnormal {
		if _, err := a.refundFinding(ctx, r, ref, o, MismatchRefundAbnormal, opt, nil); err != nil {
			// The transition is committed; the sighting comes back with the next check.
			a.log.Warn().Err(err).Str("out_refund_no", ref.OutRefundNo).Msg("abnormal refund moved but its finding was not recorded")
		}
	}
	return applied, nil
}

// classifyUnmovedRefund: the conditional update changed nothing. Someone else moved the
// refund first, or the order could not take the amount back (another refund of the same
// order got there first).
func (a *Applier) classifyUnmovedRefund(ctx context.Context, r RefundResult, ref Refund, to RefundStatus, opt ApplyOptions) (Applied, error) {
	fresh, err := a.refunds.FindRefund(ctx, ref.Platform, ref.MerchantID, ref.OutRefundNo)
	if err != nil {
		return Applied{}, fmt.Errorf("re-read refund %s after a lost update: %w: %w", ref.OutRefundNo, ErrRetryable, err)
	}
	o, err := a.store.FindOrder(ctx, fresh.Platform, fresh.MerchantID, fresh.OutTradeNo)
	if err != nil {
		return Applied{}, fmt.Errorf("re-read order of refund %s: %w: %w", ref.OutRefundNo, ErrRetryable, err)
	}
	if fresh.Status == ref.Status && to == RefundSuccess && !canTakeBack(o, fresh.AmountMinor) {
		return a.refundFinding(ctx, r, fresh, o, MismatchOverRefunded, opt, overRefundDetail(o, fresh.AmountMinor))
	}
	if fresh.Status == ref.Status {
		return Applied{}, fmt.Errorf("refund %s still %s after a lost conditional update: %w", ref.OutRefundNo, fresh.Status, ErrRetryable)
	}
	return a.applyRefundTo(ctx, r, fresh, o, opt)
}

// noSuchRefund classifies an answer about a refund we do not have.
func (a *Applier) noSuchRefund(ctx context.Context, r RefundResult, opt ApplyOptions) (Applied, error) {
	if r.State == RefundStateClosed || r.State == RefundStateNotFound {
		return Applied{Outcome: OutcomeUnchanged}, nil // no money moved
	}
	o, err := a.store.FindOrder(ctx, r.Platform, r.MerchantID, r.OutTradeNo)
	if errors.Is(err, ErrNotFound) {
		return a.refundOfNoOrder(ctx, r, opt)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("find order %s of refund %s: %w: %w", r.OutTradeNo, r.OutRefundNo, ErrRetryable, err)
	}
	return a.refundFinding(ctx, r, Refund{}, o, MismatchUnknownRefund, opt, nil)
}

// refundOfNoOrder: the platform refunded a trade we have no order for (under this merchant:
// MERCHANT_MISMATCH when the out_trade_no is another merchant's).
func (a *Applier) refundOfNoOrder(ctx context.Context, r RefundResult, opt ApplyOptions) (Applied, error) {
	kind := MismatchUnknownOrder
	if r.OutTradeNo != "" {
		elsewhere, err := a.store.OutTradeNoExists(ctx, r.Platform, r.OutTradeNo)
		if err != nil {
			return Applied{}, fmt.Errorf("look up %s/%s under other merchants: %w: %w", r.Platform, r.OutTradeNo, ErrRetryable, err)
		}
		if elsewhere {
			kind = MismatchMerchant
		}
	}
	return a.refundFinding(ctx, r, Refund{}, Order{}, kind, opt, nil)
}

// refundFinding records a refund finding (one per refund number and kind) and changes no
// state.
func (a *Applier) refundFinding(ctx context.Context, r RefundResult, ref Refund, o Order, kind MismatchKind, opt ApplyOptions, detail map[string]any) (Applied, error) {
	m := Mismatch{OrderID: o.ID, Platform: r.Platform, MerchantID: r.MerchantID, OutTradeNo: o.OutTradeNo,
		PlatformTradeNo: tradeNoOf(r, o), OutRefundNo: r.OutRefundNo, Kind: kind, LocalAmountMinor: ref.AmountMinor,
		PlatformAmountMinor: r.AmountMinor, LocalStatus: Status(ref.Status), PlatformStatus: refundPlatformStatus(r),
		Detail: map[string]any{}}
	if m.OutTradeNo == "" {
		m.OutTradeNo = r.OutTradeNo
	}
	for _, d := range []map[string]any{detail, opt.Detail} {
		for k, v := range d {
			m.Detail[k] = v
		}
	}
	m.Detail["source"] = string(r.Source)
	m.Detail["refund"] = true
	m.Detail["platform_currency"] = r.CurrencyOrDefault()
	if ref.ID != 0 {
		m.Detail["refund_id"] = ref.ID
	}
	if !opt.DryRun {
		if err := a.store.RecordMismatch(ctx, m); err != nil {
			return Applied{}, fmt.Errorf("record %s for refund %s/%s: %w: %w", kind, r.Platform, r.OutRefundNo, ErrRetryable, err)
		}
	}
	a.log.Info().Str("platform", string(r.Platform)).Str("out_trade_no", m.OutTradeNo).Str("out_refund_no", r.OutRefundNo).
		Int64("order_id", o.ID).Str("kind", string(kind)).Bool("dry_run", opt.DryRun).Msg("refund mismatch found")
	out := Applied{Outcome: OutcomeMismatch, Order: o, Mismatch: kind}
	if ref.ID != 0 {
		out.Refund = &ref
	}
	return out, nil
}

func refundPlatformStatus(r RefundResult) string {
	if r.RawState != "" {
		return r.RawState
	}
	return string(r.State)
}

// refundOutbox is the message downstream consumes for a succeeded refund.
func refundOutbox(r RefundResult, ref Refund, o Order) *OutboxMessage {
	payload := map[string]any{
		"order_id":          o.ID,
		"refund_id":         ref.ID,
		"platform":          string(ref.Platform),
		"merchant_id":       ref.MerchantID,
		"out_trade_no":      ref.OutTradeNo,
		"out_refund_no":     ref.OutRefundNo,
		"platform_trade_no": tradeNoOf(r, o),
		"amount_minor":      ref.AmountMinor,
		"currency":          ref.Currency,
		"source":            string(r.Source),
	}
	if r.PlatformRefundNo != "" {
		payload["platform_refund_no"] = r.PlatformRefundNo
	}
	if !r.SucceededAt.IsZero() {
		payload["succeeded_at"] = r.SucceededAt.UTC().Format(time.RFC3339)
	}
	return &OutboxMessage{Kind: OutboxKindRefundSucceeded, Payload: payload}
}
