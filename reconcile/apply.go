package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Outcome is what ApplyResult did with a result; callers count it and reply with it.
type Outcome string

const (
	// OutcomeApplied: the order moved (PENDING -> PAID, CLOSED or FAILED).
	OutcomeApplied Outcome = "applied"
	// OutcomeDuplicate: this very result was applied before; nothing to do.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeClaimedElsewhere: another worker holds the claim on this result right now.
	OutcomeClaimedElsewhere Outcome = "claimed_elsewhere"
	// OutcomeMismatch: a finding was recorded; no state changed.
	OutcomeMismatch Outcome = "mismatch"
	// OutcomeStillPending: the platform says the order is still open (or unknown and not yet
	// expired); nothing to do yet.
	OutcomeStillPending Outcome = "still_pending"
	// OutcomeUnchanged: local and platform state already agree (or the order moved on
	// meanwhile); nothing to do.
	OutcomeUnchanged Outcome = "unchanged"
)

// Applied reports what ApplyResult did.
type Applied struct {
	Outcome Outcome
	// Order is the order as last read (zero when none matched).
	Order Order
	// From and To are set when Outcome is OutcomeApplied.
	From, To Status
	// Mismatch is set when Outcome is OutcomeMismatch.
	Mismatch MismatchKind
	// Refund is the refund a refund result was about, as last read (nil for payments and
	// for a refund we do not have).
	Refund *Refund
	// RefundFrom and RefundTo are set when a refund moved (Outcome is OutcomeApplied).
	RefundFrom, RefundTo RefundStatus
}

// ApplyOptions tune one application of a result.
type ApplyOptions struct {
	// CloseIfExpired lets an open or not-found answer close a PENDING order that is past its
	// expiry. The reconciler sets it once the trade cannot be paid any more (closed at the
	// platform first, or closing at the platform is switched off); callbacks never do.
	CloseIfExpired bool
	// DryRun classifies without writing anything: no claim, no update, no finding.
	DryRun bool
	// Order, when set, is the caller's fresh copy of the order the result is about (the
	// reconciler has just read it under its lease, a statement run with the day's lines), so
	// the lookup is skipped. The
	// conditional update still decides; a stale copy only costs a re-read. With Refund, it
	// is that refund's order.
	Order *Order
	// Refund, when set, is the caller's fresh copy of the refund a refund result is about
	// (the pass has just taken it under its lease, a statement run read it with the day's
	// lines), so its lookup is skipped; the
	// conditional statement still decides.
	Refund *Refund
	// OverrideHeldClaim says the order was taken over from a run whose process died: a
	// PROCESSING claim on it may be that run's, left until its lease runs out, so a held
	// claim does not stop this apply. The conditional update decides, as it does when
	// Redis is down.
	OverrideHeldClaim bool
	// Detail is added to any finding this application records (a statement names the bill
	// and the line the finding comes from).
	Detail map[string]any
}

// Account is what the configuration says about one of our merchant accounts.
type Account struct {
	// SellerID, when set, must equal the seller (Alipay seller_id) or app id (WeChat appid)
	// that a result names; a difference is a MERCHANT_MISMATCH.
	SellerID string
}

// Applier is the one path every verified platform result takes, whether it came from a
// callback, a reconciliation query, a backfill or a statement.
type Applier struct {
	store    Store
	refunds  RefundStore // nil: the store cannot apply refunds
	claims   Claimer
	settings ApplierSettings
	log      zerolog.Logger
}

// ApplierSettings are the knobs of the apply path; zero values take the documented defaults.
type ApplierSettings struct {
	ClaimPrefix string        // default "pay:notify:"
	ClaimLease  time.Duration // PROCESSING lease, default 60s
	ClaimTTL    time.Duration // DONE retention, default 25h
	OrderTTL    time.Duration // expiry of orders without expires_at, default 2h
	// RefundTTL is how long a refund the platform does not know may wait before it is a
	// REFUND_NOT_AT_PLATFORM finding; default DefaultRefundTTL.
	RefundTTL time.Duration
	Accounts  map[AccountKey]Account
	Now       func() time.Time
}

func (s *ApplierSettings) fillDefaults() {
	if s.ClaimPrefix == "" {
		s.ClaimPrefix = "pay:notify:"
	}
	if s.ClaimLease <= 0 {
		s.ClaimLease = 60 * time.Second
	}
	if s.ClaimTTL <= 0 {
		s.ClaimTTL = 25 * time.Hour
	}
	if s.OrderTTL <= 0 {
		s.OrderTTL = 2 * time.Hour
	}
	if s.RefundTTL <= 0 {
		s.RefundTTL = DefaultRefundTTL
	}
	if s.Now == nil {
		s.Now = time.Now
	}
}

// NewApplier builds the apply path. A nil claimer means database-only claims.
func NewApplier(store Store, claims Claimer, settings ApplierSettings, log zerolog.Logger) *Applier {
	settings.fillDefaults()
	if claims == nil {
		claims = NoClaims{}
	}
	refunds, _ := store.(RefundStore)
	return &Applier{store: store, refunds: refunds, claims: claims, settings: settings, log: log}
}

// ClaimKey is the Redis key the callback service and the reconciler share for one payment.
func (a *Applier) ClaimKey(p Platform, platformTradeNo string) string {
	return ClaimKey(a.settings.ClaimPrefix, p, platformTradeNo)
}

// ClaimKey is the claim key of one payment under prefix (RECONCILER_CLAIM_PREFIX).
func ClaimKey(prefix string, p Platform, platformTradeNo string) string {
	return prefix + string(p) + ":" + platformTradeNo
}

// TookPaymentIn says whether a review move was the approval of accept_payment, which moved
// the finding's order to PAID by its platform trade number: that payment's claim is then to
// be marked DONE like any applied payment's, so the platform's remaining callbacks for it
// are shed.
func TookPaymentIn(m ReviewMove) (Platform, string, bool) {
	ok := m.Audit.Action == AuditApprove && m.Finding.Resolution == string(ResolutionAcceptPayment) && m.Finding.PlatformTradeNo != ""
	return m.Finding.Platform, m.Finding.PlatformTradeNo, ok
}

// ApplyResult applies one verified result exactly once: find the order, check it, claim,
// conditionally update with its event and outbox row in one transaction, mark done. It
// returns an error (wrapping ErrRetryable) only when nothing was applied and a retry may
// succeed; findings are outcomes, not errors.
func (a *Applier) ApplyResult(ctx context.Context, r Result, opt ApplyOptions) (Applied, error) {
	if err := validateResult(r); err != nil {
		return Applied{}, err
	}

	// Load shedding: a repeated callback whose payment is marked DONE never reaches the
	// database. The reconciler does not trust DONE (it has just read the order as PENDING).
	if r.Source == SourceNotify && r.State == StatePaid && !opt.DryRun {
		if a.claims.Peek(ctx, a.ClaimKey(r.Platform, r.PlatformTradeNo)) == ClaimDone {
			return Applied{Outcome: OutcomeDuplicate}, nil
		}
	}

	order, err := a.lookup(ctx, r, opt)
	if errors.Is(err, ErrNotFound) {
		return a.noSuchOrder(ctx, r, opt)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("find order %s/%s: %w: %w", r.Platform, r.OutTradeNo, ErrRetryable, err)
	}

	var applied Applied
	switch r.State {
	case StatePaid:
		applied, err = a.applyPaid(ctx, r, order, opt)
	case StateClosed:
		applied, err = a.applyClosed(ctx, r, order, opt)
	case StateRefunded:
		applied, err = a.applyRefunded(ctx, r, order, opt)
	case StateFailed:
		applied, err = a.applyFailed(ctx, r, order, opt)
	case StateOpen, StateNotFound:
		applied, err = a.applyUnpaid(ctx, r, order, opt)
	}
	if err == nil {
		a.log.Debug().Str("platform", string(r.Platform)).Str("out_trade_no", r.OutTradeNo).
			Str("platform_trade_no", r.PlatformTradeNo).Str("source", string(r.Source)).Int64("order_id", order.ID).
			Str("outcome", string(applied.Outcome)).Str("mismatch", string(applied.Mismatch)).Str("to", string(applied.To)).
			Msg("result applied")
	}
	return applied, err
}

// lookup finds the order the result is about, preferring the one the caller already read.
func (a *Applier) lookup(ctx context.Context, r Result, opt ApplyOptions) (Order, error) {
	if o := opt.Order; o != nil && o.Platform == r.Platform && o.MerchantID == r.MerchantID && o.OutTradeNo == r.OutTradeNo {
		return *o, nil
	}
	return a.store.FindOrder(ctx, r.Platform, r.MerchantID, r.OutTradeNo)
}

func validateResult(r Result) error {
	var missing string
	switch {
	case r.Platform != Alipay && r.Platform != WechatPay:
		return fmt.Errorf("result: unknown platform %q", r.Platform)
	case r.MerchantID == "":
		missing = "merchant id"
	case r.OutTradeNo == "":
		missing = "out_trade_no"
	case r.Source == "":
		missing = "source"
	case r.State == StatePaid && r.PlatformTradeNo == "":
		missing = "platform trade number of a paid result"
	case r.State == StatePaid && r.AmountMinor <= 0:
		missing = "amount of a paid result"
	}
	if missing != "" {
		return fmt.Errorf("result %s/%s: missing %s", r.Platform, r.OutTradeNo, missing)
	}
	switch r.State {
	case StatePaid, StateOpen, StateClosed, StateRefunded, StateFailed, StateNotFound:
		return nil
	}
	return fmt.Errorf("result %s/%s: unknown state %q", r.Platform, r.OutTradeNo, r.State)
}

// noSuchOrder classifies a result that matches no order of ours.
func (a *Applier) noSuchOrder(ctx context.Context, r Result, opt ApplyOptions) (Applied, error) {
	if r.State != StatePaid && r.State != StateRefunded {
		// No money moved for an order we do not know: nothing for finance to review.
		return Applied{Outcome: OutcomeUnchanged}, nil
	}
	kind := MismatchUnknownOrder
	elsewhere, err := a.store.OutTradeNoExists(ctx, r.Platform, r.OutTradeNo)
	if err != nil {
		return Applied{}, fmt.Errorf("look up %s/%s under other merchants: %w: %w", r.Platform, r.OutTradeNo, ErrRetryable, err)
	}
	if elsewhere {
		kind = MismatchMerchant
	}
	return a.finding(ctx, r, Order{}, kind, opt, nil)
}

// checkPayment holds a paid result to the order and our account: every field must match exactly.
func (a *Applier) checkPayment(r Result, o Order) (MismatchKind, map[string]any) {
	if want := a.settings.Accounts[AccountKey{Platform: r.Platform, MerchantID: r.MerchantID}].SellerID; want != "" && r.SellerID != "" && r.SellerID != want {
		return MismatchMerchant, map[string]any{"expected_seller": want, "seller": r.SellerID}
	}
	if got := r.CurrencyOrDefault(); got != o.Currency {
		return MismatchCurrency, map[string]any{"local_currency": o.Currency, "platform_currency": got}
	}
	if r.AmountMinor != paidAmountExpected(r, o) {
		return MismatchAmount, nil
	}
	return "", nil
}

// paidAmountExpected is what a payment of the order must amount to: its price, or, once the
// order is paid by this very trade, what it was paid. They differ only where finance took
// in a payment of another amount (accept_payment): its repeats are then the order's own
// payment, not a new AMOUNT_MISMATCH that would reopen the settled finding.
func paidAmountExpected(r Result, o Order) int64 {
	if o.Status != StatusPending && o.PaidAmountMinor != 0 && o.PlatformTradeNo == r.PlatformTradeNo {
		return o.PaidAmountMinor
	}
	return o.AmountMinor
}

func (a *Applier) applyPaid(ctx context.Context, r Result, o Order, opt ApplyOptions) (Applied, error) {
	if kind, detail := a.checkPayment(r, o); kind != "" {
		return a.finding(ctx, r, o, kind, opt, detail)
	}
	if o.Status != StatusPending {
		return a.classifyPaidAgainst(ctx, r, o, opt)
	}
	if opt.DryRun {
		return Applied{Outcome: OutcomeApplied, Order: o, From: StatusPending, To: StatusPaid}, nil
	}

	key := a.ClaimKey(r.Platform, r.PlatformTradeNo)
	owned := false
	switch a.claims.Claim(ctx, key, a.settings.ClaimLease) {
	case ClaimHeld:
		if !opt.OverrideHeldClaim {
			return Applied{Outcome: OutcomeClaimedElsewhere, Order: o}, nil
		}
	case ClaimDone:
		if r.Source == SourceNotify {
			return Applied{Outcome: OutcomeDuplicate, Order: o}, nil
		}
		// The reconciler just read PENDING: DONE may come from a restored Redis or a lost
		// commit. Let the conditional update decide.
	case ClaimAcquired:
		owned = true
	case ClaimUnavailable:
		// Redis only saves load; the conditional update below is the correctness layer.
	}

	changed, err := a.store.ApplyTransition(ctx, Transition{
		OrderID: o.ID, From: StatusPending, To: StatusPaid, Platform: r.Platform,
		PlatformTradeNo: r.PlatformTradeNo, AmountMinor: r.AmountMinor, PaidAt: r.PaidAt,
		Source: r.Source, RawDigest: r.RawDigest, Outbox: paidOutbox(o, r),
	})
	if err != nil {
		if owned {
			// Never leave a claim that would block the retry.
			a.claims.Release(context.WithoutCancel(ctx), key)
		}
		return Applied{}, fmt.Errorf("apply PAID to order %d (%s): %w: %w", o.ID, o.OutTradeNo, ErrRetryable, err)
	}
	if changed {
		a.claims.MarkDone(context.WithoutCancel(ctx), key, a.settings.ClaimTTL)
		o.Status, o.PlatformTradeNo, o.PaidAmountMinor, o.PaidAt = StatusPaid, r.PlatformTradeNo, r.AmountMinor, r.PaidAt
		return Applied{Outcome: OutcomeApplied, Order: o, From: StatusPending, To: StatusPaid}, nil
	}

	// Someone else moved the order between our read and our update (a late lease holder
	// lands here): read it again and classify against what it is now.
	if owned {
		a.claims.Release(context.WithoutCancel(ctx), key)
	}
	fresh, err := a.store.FindOrder(ctx, o.Platform, o.MerchantID, o.OutTradeNo)
	if err != nil {
		return Applied{}, fmt.Errorf("re-read order %d after a lost update: %w: %w", o.ID, ErrRetryable, err)
	}
	if fresh.Status == StatusPending {
		// Only possible if the order was moved and moved back, which the state machine forbids.
		return Applied{}, fmt.Errorf("order %d still PENDING after a lost conditional update: %w", o.ID, ErrRetryable)
	}
	return a.classifyPaidAgainst(ctx, r, fresh, opt)
}

// classifyPaidAgainst decides what a paid result means for an order that is not PENDING.
func (a *Applier) classifyPaidAgainst(ctx context.Context, r Result, o Order, opt ApplyOptions) (Applied, error) {
	switch o.Status {
	case StatusPaid, StatusRefunded:
		if o.PlatformTradeNo == r.PlatformTradeNo {
			if !opt.DryRun {
				// Shed the platform's remaining retries of this callback.
				a.claims.MarkDone(context.WithoutCancel(ctx), a.ClaimKey(r.Platform, r.PlatformTradeNo), a.settings.ClaimTTL)
			}
			if r.Source == SourceNotify {
				return Applied{Outcome: OutcomeDuplicate, Order: o}, nil
			}
			return Applied{Outcome: OutcomeUnchanged, Order: o}, nil
		}
		return a.finding(ctx, r, o, MismatchDuplicatePayment, opt, map[string]any{"local_platform_trade_no": o.PlatformTradeNo})
	default: // CLOSED, FAILED
		return a.finding(ctx, r, o, MismatchPaidAfterClose, opt, nil)
	}
}

func (a *Applier) applyClosed(ctx context.Context, r Result, o Order, opt ApplyOptions) (Applied, error) {
	switch o.Status {
	case StatusPending:
		return a.transition(ctx, r, o, StatusClosed, opt)
	case StatusPaid:
		// Alipay TRADE_CLOSED after payment means fully refunded.
		return a.refundedAtPlatform(ctx, r, o, opt)
	}
	return Applied{Outcome: OutcomeUnchanged, Order: o}, nil
}

func (a *Applier) applyRefunded(ctx context.Context, r Result, o Order, opt ApplyOptions) (Applied, error) {
	if o.Status == StatusRefunded {
		return Applied{Outcome: OutcomeUnchanged, Order: o}, nil
	}
	return a.refundedAtPlatform(ctx, r, o, opt)
}

// refundedAtPlatform: the platform reports money that went in and back out. A paid order
// whose own refunds (landed, in flight or abnormal) account for it is explained: those
// refunds are checked on their own, and land the order as REFUNDED when they are whole.
// WeChat Pay says REFUND once any refund of the trade has started, however much; Alipay
// closes a paid trade only when the whole of it went back. Anything else (a pending order, a
// refund made where our books never heard of it) gets no automatic transition: finance
// decides.
func (a *Applier) refundedAtPlatform(ctx context.Context, r Result, o Order, opt ApplyOptions) (Applied, error) {
	least := int64(1)
	if r.Platform == Alipay {
		least = max(o.PaidAmountMinor, o.AmountMinor, 1)
	}
	if o.Status == StatusPaid && a.refunds != nil {
		refunds, err := a.refunds.OrderRefunds(ctx, o.ID)
		if err != nil {
			return Applied{}, fmt.Errorf("refunds of order %d (%s): %w: %w", o.ID, o.OutTradeNo, ErrRetryable, err)
		}
		var live int64
		for _, ref := range refunds {
			if ref.Status != RefundClosed {
				live += ref.AmountMinor
			}
		}
		if live >= least {
			return Applied{Outcome: OutcomeUnchanged, Order: o}, nil
		}
	}
	return a.finding(ctx, r, o, MismatchRefundedAtPlatform, opt, map[string]any{"paid_minor": o.PaidAmountMinor,
		"refunded_minor": o.RefundedMinor})
}

func (a *Applier) applyFailed(ctx context.Context, r Result, o Order, opt ApplyOptions) (Applied, error) {
	if o.Status == StatusPending {
		return a.transition(ctx, r, o, StatusFailed, opt)
	}
	return Applied{Outcome: OutcomeUnchanged, Order: o}, nil
}

// applyUnpaid handles "still open" and "not found" answers.
func (a *Applier) applyUnpaid(ctx context.Context, r Result, o Order, opt ApplyOptions) (Applied, error) {
	switch o.Status {
	case StatusPending:
		if opt.CloseIfExpired && !a.settings.Now().Before(o.ExpiryAt(a.settings.OrderTTL)) {
			return a.transition(ctx, r, o, StatusClosed, opt)
		}
		return Applied{Outcome: OutcomeStillPending, Order: o}, nil
	case StatusPaid, StatusRefunded:
		return a.finding(ctx, r, o, MismatchLocalPaidPlatformNot, opt, nil)
	}
	return Applied{Outcome: OutcomeUnchanged, Order: o}, nil
}

// transition applies a non-payment move (CLOSED, FAILED). No claim: these come only from the
// reconciler, carry no trade number to key on, and the conditional update alone decides.
func (a *Applier) transition(ctx context.Context, r Result, o Order, to Status, opt ApplyOptions) (Applied, error) {
	if opt.DryRun {
		return Applied{Outcome: OutcomeApplied, Order: o, From: o.Status, To: to}, nil
	}
	changed, err := a.store.ApplyTransition(ctx, Transition{
		OrderID: o.ID, From: o.Status, To: to, Platform: r.Platform, PlatformTradeNo: r.PlatformTradeNo,
		AmountMinor: o.AmountMinor, Source: r.Source, RawDigest: r.RawDigest,
	})
	if err != nil {
		return Applied{}, fmt.Errorf("apply %s to order %d (%s): %w: %w", to, o.ID, o.OutTradeNo, ErrRetryable, err)
	}
	if !changed {
		// The order moved meanwhile (a payment won the race): it is no longer ours to close.
		return Applied{Outcome: OutcomeUnchanged, Order: o}, nil
	}
	from := o.Status
	o.Status = to
	return Applied{Outcome: OutcomeApplied, Order: o, From: from, To: to}, nil
}

// finding records a mismatch for finance and changes no state.
func (a *Applier) finding(ctx context.Context, r Result, o Order, kind MismatchKind, opt ApplyOptions, detail map[string]any) (Applied, error) {
	m := Mismatch{
		OrderID: o.ID, Platform: r.Platform, MerchantID: r.MerchantID, OutTradeNo: r.OutTradeNo,
		PlatformTradeNo: r.PlatformTradeNo, Kind: kind, LocalAmountMinor: o.AmountMinor,
		PlatformAmountMinor: r.AmountMinor, LocalStatus: o.Status, PlatformStatus: platformStatus(r),
		Detail: detail,
	}
	if m.Detail == nil {
		m.Detail = map[string]any{}
	}
	for k, v := range opt.Detail {
		m.Detail[k] = v
	}
	m.Detail["source"] = string(r.Source)
	if o.ID != 0 && o.Currency != "" {
		m.Detail["local_currency"] = o.Currency
	}
	m.Detail["platform_currency"] = r.CurrencyOrDefault()
	if !r.PaidAt.IsZero() {
		// The paid time an approved accept_payment gives the order (migration 0017).
		m.Detail["paid_at"] = r.PaidAt.UTC().Format(time.RFC3339)
	}
	if !opt.DryRun {
		if err := a.store.RecordMismatch(ctx, m); err != nil {
			return Applied{}, fmt.Errorf("record %s for %s/%s: %w: %w", kind, r.Platform, r.OutTradeNo, ErrRetryable, err)
		}
	}
	a.log.Info().Str("platform", string(r.Platform)).Str("out_trade_no", r.OutTradeNo).
		Str("platform_trade_no", r.PlatformTradeNo).Int64("order_id", o.ID).Str("kind", string(kind)).
		Bool("dry_run", opt.DryRun).Msg("mismatch found")
	return Applied{Outcome: OutcomeMismatch, Order: o, Mismatch: kind}, nil
}

func platformStatus(r Result) string {
	if r.RawState != "" {
		return r.RawState
	}
	return string(r.State)
}

// paidOutbox is the fulfilment message downstream consumes for a newly paid order.
func paidOutbox(o Order, r Result) *OutboxMessage {
	payload := map[string]any{
		"order_id":          o.ID,
		"platform":          string(r.Platform),
		"merchant_id":       o.MerchantID,
		"out_trade_no":      o.OutTradeNo,
		"platform_trade_no": r.PlatformTradeNo,
		"amount_minor":      r.AmountMinor,
		"currency":          o.Currency,
		"source":            string(r.Source),
	}
	if !r.PaidAt.IsZero() {
		payload["paid_at"] = r.PaidAt.UTC().Format(time.RFC3339)
	}
	return &OutboxMessage{Kind: OutboxKindPaid, Payload: payload}
}

// NoClaims is the database-only claimer: every claim "succeeds" as unavailable, so the
// conditional update alone decides.
type NoClaims struct{}

func (NoClaims) Peek(context.Context, string) ClaimState                 { return ClaimUnavailable }
func (NoClaims) Claim(context.Context, string, time.Duration) ClaimState { return ClaimUnavailable }
func (NoClaims) MarkDone(context.Context, string, time.Duration)         {}
func (NoClaims) Release(context.Context, string)                         {}
