package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// RefundQueue is where a pass takes the refunds it checks and writes back when each is due
// again: the refund half of WorkQueue. A WorkQueue that is not also a RefundQueue gives
// passes that check orders only.
type RefundQueue interface {
	// TakeRefunds leases up to q.Limit refunds of q.Account after q.After, in ONE statement
	// (FOR UPDATE SKIP LOCKED), so overlapping passes never check the same refund at once.
	// A run takes PROCESSING and ABNORMAL refunds that are due (grace and lookback on the
	// refund's created_at, next check reached) in their (created_at, id) order; a backfill
	// takes every refund of the orders created in [q.From, q.To) in (its order's
	// created_at, refund id) order. A dry run leases nothing.
	// Each refund comes with its order as the same statement read it.
	TakeRefunds(ctx context.Context, q TakeQuery) ([]DueRefund, error)
	// RefundChecked releases the lease and schedules the next check of an unsettled refund.
	RefundChecked(ctx context.Context, c RefundCheckRecord) error
}

// DueRefund is a refund a pass took, with its order: the check needs both, and the take
// reads the order in the same statement for less than a lookup per check costs.
type DueRefund struct {
	Refund Refund
	Order  Order
}

// RefundCheckRecord is what a pass writes back about one checked refund.
type RefundCheckRecord struct {
	RefundID int64
	Owner    string
	Now      time.Time
	// NextCheck is when a still-unsettled refund is due again.
	NextCheck time.Time
	// Backoff says the check counts toward the re-check backoff (an answer, not an error).
	Backoff bool
}

// refundPosition is where a taken refund sits in its take's keyset order: a run walks the
// refunds due by their own (created_at, id); a backfill, whose window is on the orders'
// created_at, walks its refunds by their order's created_at, so that each take reads one
// index in keyset order instead of every refund the account ever had.
func refundPosition(mode RunMode, r Refund) Cursor {
	if mode == ModeBackfill {
		return Cursor{CreatedAt: r.OrderCreatedAt, ID: r.ID}
	}
	return Cursor{CreatedAt: r.CreatedAt, ID: r.ID}
}

// refundOrder is the refunded order as far as the refund names it: what an Observer reads
// of a refund check (its platform, account and out_trade_no).
func refundOrder(r Refund) Order {
	return Order{ID: r.OrderID, Platform: r.Platform, MerchantID: r.MerchantID, OutTradeNo: r.OutTradeNo}
}

// checkRefund asks the platform about one refund and feeds the answer to the refund apply
// path. Like check, it returns an error only for what must stop the whole pass.
func (p *pass) checkRefund(ctx context.Context, due DueRefund, source Source, owner string) error {
	start := time.Now()
	ref := due.Refund
	c := Check{RunID: p.run.ID, Order: refundOrder(ref), Refund: &ref, DryRun: p.run.DryRun}
	log := p.log.With().Str("platform", string(ref.Platform)).Str("out_trade_no", ref.OutTradeNo).
		Str("out_refund_no", ref.OutRefundNo).Int64("refund_id", ref.ID).Logger()
	p.counters.Scanned.Add(1)

	res, err := p.askRefund(ctx, ref)
	c.PlatformTime = time.Since(start)
	c.RefundResult = res
	if err == nil {
		res.Source = source
		// A dead run may have died holding this refund's claim.
		opts := ApplyOptions{DryRun: p.run.DryRun, OverrideHeldClaim: p.adoptedRefunds[ref.ID], Refund: &ref, Order: &due.Order}
		c.Applied, err = p.applier.ApplyRefundResult(ctx, res, opts)
	}
	c.Err = err
	c.Took = time.Since(start)
	p.count(c)
	if p.observer != nil {
		p.observer.Checked(c)
	}
	if err != nil && PlatformErrorKindOf(err) == KindConfig {
		// Our credentials, not the refund: due at once once they are fixed.
		if !p.run.DryRun {
			now := p.settings.Now()
			p.writeRefundCheck(RefundCheckRecord{RefundID: ref.ID, Owner: owner, Now: now, NextCheck: now}, log)
		}
		return err
	}
	if err != nil {
		log.Warn().Err(err).Str("error_class", PlatformErrorKindOf(err).String()).Msg("refund check failed; due again after the minimum re-check delay")
	}
	if !p.run.DryRun && stillDue(c) {
		checks := ref.CheckCount
		if c.Applied.Outcome == OutcomeApplied {
			checks = 0 // the move restarted the backoff (its statement reset check_count)
		}
		now := p.settings.Now()
		next, backoff := p.nextCheck(now, checks, c)
		p.writeRefundCheck(RefundCheckRecord{RefundID: ref.ID, Owner: owner, Now: now, NextCheck: next, Backoff: backoff}, log)
	}
	return nil
}

// stillDue says whether a refund check leaves the refund to be checked again, and so needs
// its lease released and its next check written: anything but a move, and a move to
// ABNORMAL (the merchant must act, and the refund may still succeed or close). A move to
// SUCCESS or CLOSED needs no write: its statement cleared the lease and the schedule.
func stillDue(c Check) bool {
	return c.Applied.Outcome != OutcomeApplied || c.Applied.RefundTo == RefundAbnormal
}

// askRefund queries the refund through its account's client, and so its call budget.
func (p *pass) askRefund(ctx context.Context, ref Refund) (RefundResult, error) {
	client, ok := p.clients[AccountKey{Platform: ref.Platform, MerchantID: ref.MerchantID}]
	if !ok {
		// Takes are per account, so this is a bug, not a configuration gap.
		return RefundResult{}, &PlatformError{Platform: ref.Platform, Kind: KindPermanent,
			Message: fmt.Sprintf("no client for merchant account %s:%s", ref.Platform, ref.MerchantID)}
	}
	return client.QueryRefund(ctx, ref.OutTradeNo, ref.OutRefundNo)
}

// writeRefundCheck releases the refund's lease and records its next check; like writeCheck,
// written even during a drain.
func (p *pass) writeRefundCheck(rec RefundCheckRecord, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.refunds.RefundChecked(ctx, rec); err != nil {
		log.Warn().Err(err).Msg("could not schedule the refund's next check; the lease expires by itself")
	}
}
