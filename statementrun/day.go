package statementrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// day reconciles one account's day inside one transaction: stage, classify, apply what needs
// it, settle the previous day's held list, hold today's unlisted orders, save the figures.
// A dry run does all of it and rolls the transaction back; its applications are dry too.
func (r *Runner) day(ctx context.Context, log zerolog.Logger, runID int64, acct Account, spec Spec) DayResult {
	d := DayResult{Account: acct.Key, Day: spec.Day, DryRun: spec.DryRun}
	log = log.With().Str("platform", string(acct.Key.Platform)).Str("merchant_id", acct.Key.MerchantID).Logger()
	bill, err := acct.Source.Bill(ctx, spec.Day)
	if err != nil {
		d.Err = err
		return d
	}
	if bill.Close != nil {
		defer bill.Close() //nolint:errcheck // read-only file
	}
	tx, err := r.store.BeginStatement(ctx, reconcile.StatementDay{Account: acct.Key, BusinessDay: spec.Day}, runID)
	if err != nil {
		d.Err = err
		return d
	}
	defer tx.Rollback()
	// The apply workers' sessions open while the bill streams in, not all at once after it;
	// a day that ends first (a rejected bill) stops waiting for them.
	warmCtx, stopWarm := context.WithCancel(ctx)
	warm := make(chan struct{})
	go func() { defer close(warm); r.store.WarmConns(warmCtx, r.concurrency) }()
	defer func() { stopWarm(); <-warm }()
	start := time.Now()
	picker := &pendingPicker{Reader: &dayChecked{Reader: bill.Reader, day: spec.Day}}
	if pending, ok, err := tx.PendingTrades(ctx, r.pickLimit); err != nil {
		log.Warn().Err(err).Msg("pending orders not read: their lines wait for the classification")
	} else if ok {
		picker.pending = pending
	}
	staged, err := tx.Stage(ctx, picker)
	d.Phases.Stage = time.Since(start)
	if err != nil {
		// A rejected bill ends here: nothing was applied, the staged lines go with the rollback.
		d.Err = err
		return d
	}
	d.Figures = figures(staged, picker.Totals(), bill)
	// Once the bill is staged the day is finished even if a signal arrives: what is left is
	// a few set-based statements and the few lines that need the apply path, and a day
	// finished whole is one a re-run repeats nothing of.
	ctx = context.WithoutCancel(ctx)
	if d.Err = r.settle(ctx, log, tx, acct.Key, spec, bill, picker.picked, &d); d.Err != nil {
		return d
	}
	if spec.DryRun {
		log.Info().Int64("lines", d.Figures.Lines).Int("repaired", d.Tally.Repaired).Int("found", d.Tally.Found).
			Msg("dry run: nothing written but the run row")
		return d
	}
	if d.Err = tx.Commit(); d.Err != nil {
		return d
	}
	log.Info().Int64("lines", d.Figures.Lines).Int64("matched", d.Figures.Matched).Int("repaired", d.Tally.Repaired).
		Int("found", d.Tally.Found).Int64("held", d.Figures.Held).Int("reported", d.Tally.Reported).
		Dur("stage", d.Phases.Stage).Dur("classify", d.Phases.Classify).Dur("apply", d.Phases.Apply).Dur("settle", d.Phases.Settle).
		Msg("statement reconciled")
	if d.Tally.Errors > 0 {
		d.Err = fmt.Errorf("%d lines: %w; re-run the day to apply them", d.Tally.Errors, ErrLinesFailed)
	}
	return d
}

// settle does the day's work on the staged bill, short of committing. The lines that need
// the apply path are applied as the classification finds them (streamApplier), and the rest
// of them while the held lists are settled and drawn up on the statement's own connection:
// applying is a commit per line, each waiting on the disk, while the classification and the
// held lists are a few set-based statements; and the two never touch the same order (an
// order a line names is never held, and holding a refund writes only the held list: see
// DayTx.ClassifyEach and HoldUnlisted).
//
// Should the classification fail part way, the lines it had found are still applied, each
// through the apply path (a commit of its own), and the day is not saved: a re-run finds
// their orders and refunds already so, and counts those lines as matched.
func (r *Runner) settle(ctx context.Context, log zerolog.Logger, tx DayTx, acct reconcile.AccountKey,
	spec Spec, bill Bill, pending []reconcile.ClassifiedLine, d *DayResult) error {
	start := time.Now()
	apply := r.newStreamApplier(ctx, log, acct, spec, bill, tx)
	apply.first(pending)
	err := tx.ClassifyEach(ctx, apply.add)
	d.Phases.Classify = time.Since(start)
	if err != nil {
		apply.finish()
		return err
	}
	var t Tally // the lines' own outcomes; the held lists add theirs to d.Tally
	var outcomes []reconcile.LineOutcome
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		outcomes, t = apply.finish()
		// From the classification's start: the two overlap.
		d.Phases.Apply = time.Since(start)
	}()
	heldStart := time.Now()
	err = r.drawHeld(ctx, log, tx, acct, spec, bill, d)
	d.Phases.Settle = time.Since(heldStart)
	<-applied
	if err != nil {
		return err
	}
	start = time.Now()
	defer func() { d.Phases.Settle += time.Since(start) }()
	if err := tx.RecordLines(ctx, outcomes); err != nil {
		return err
	}
	// Every line the classification matched set-based never came back to Go: the matched
	// ones are what is left.
	t.Matched = int(d.Figures.Lines) - t.Repaired - t.Found - t.ClaimedElsewhere - t.Errors
	d.Figures.Matched, d.Figures.Repaired, d.Figures.Found = int64(t.Matched), int64(t.Repaired), int64(t.Found)
	d.Figures.RefundsRepaired, d.Figures.RefundsUnknown = int64(t.RefundsRepaired), int64(t.RefundsUnknown)
	d.Tally.add(t)
	return tx.SaveDay(ctx, d.Figures)
}

// drawHeld reports the previous day's held orders and refunds this bill does not list
// either, then holds today's unlisted refunds (ClassifyEach held today's unlisted orders).
func (r *Runner) drawHeld(ctx context.Context, log zerolog.Logger, tx DayTx, acct reconcile.AccountKey,
	spec Spec, bill Bill, d *DayResult) error {
	if err := r.reportHeld(ctx, log, tx, acct, spec, bill, &d.Tally); err != nil {
		return err
	}
	held, err := tx.HoldUnlisted(ctx)
	d.Figures.Held = int64(held)
	return err
}

// figures are the day's figures as staging found them: the bill's totals (its reader checked
// them against the lines) and what the lines add up to.
func figures(s reconcile.StagedBill, t statement.Totals, b Bill) reconcile.StatementFigures {
	return reconcile.StatementFigures{
		Payments: int64(t.Payments), PaymentsMinor: t.PaymentsMinor, Refunds: int64(t.Refunds), RefundsMinor: t.RefundsMinor,
		ReceivedMinor: s.ReceivedMinor, FeeMilliFen: t.FeeMilliFen, NetMilliFen: s.ReceivedMinor*1000 - t.FeeMilliFen,
		Lines: int64(s.Lines), BillSHA256: b.SHA256, BillLocation: b.Location,
	}
}

// applyLine applies one line (a payment through ApplyResult, a refund through
// ApplyRefundResult); ok is false when its outcome is not final (an error, or a callback
// holding the claim) and a re-run of the day must apply it again.
func (r *Runner) applyLine(ctx context.Context, log zerolog.Logger, acct reconcile.AccountKey, spec Spec, bill Bill,
	l reconcile.ClassifiedLine, books reconcile.LineBooks, t *Tally) (reconcile.LineOutcome, bool) {
	opt := reconcile.ApplyOptions{DryRun: spec.DryRun,
		Detail: map[string]any{"bill_date": spec.Day.Date, "bill_line": l.No, "bill_sha256": bill.SHA256}}
	if o, ok := books.Orders[l.OutTradeNo]; ok {
		opt.Order = &o
	}
	if ref, ok := books.Refunds[l.RefundNo]; ok && l.Kind == reconcile.BillRefund {
		opt.Refund = &ref
	}
	var applied reconcile.Applied
	var err error
	if l.Kind == reconcile.BillRefund {
		applied, err = r.applier.ApplyRefundResult(ctx, refundLineResult(acct, l, bill.SHA256), opt)
	} else {
		applied, err = r.applier.ApplyResult(ctx, lineResult(acct, l, bill.SHA256), opt)
	}
	if err != nil {
		t.Errors++
		log.Error().Err(err).Int("bill_line", l.No).Str("out_trade_no", l.OutTradeNo).Str("out_refund_no", l.RefundNo).
			Msg("bill line not applied")
		return reconcile.LineOutcome{}, false
	}
	return lineOutcome(log, spec, l, applied, t)
}

// lineOutcome counts what the apply path made of a line and says what to remember of it.
func lineOutcome(log zerolog.Logger, spec Spec, l reconcile.ClassifiedLine, applied reconcile.Applied, t *Tally) (reconcile.LineOutcome, bool) {
	o := reconcile.LineOutcome{Line: l, OrderID: applied.Order.ID}
	refund := l.Kind == reconcile.BillRefund
	switch applied.Outcome {
	case reconcile.OutcomeApplied:
		t.Repaired++
		o.Result = reconcile.LineRepaired
		if refund {
			t.RefundsRepaired++
		}
		log.Info().Int("bill_line", l.No).Str("out_trade_no", l.OutTradeNo).Str("out_refund_no", l.RefundNo).
			Int64("order_id", o.OrderID).Msg("repaired from the bill") // the run's logger names dry_run
	case reconcile.OutcomeMismatch:
		t.Found++
		o.Result, o.Mismatch = reconcile.LineMismatch, applied.Mismatch
		if refund && applied.Mismatch == reconcile.MismatchUnknownRefund {
			t.RefundsUnknown++
		}
	case reconcile.OutcomeClaimedElsewhere:
		// A callback is applying it right now; a re-run of the day settles the line.
		t.ClaimedElsewhere++
		return o, false
	default:
		// Already so in our books, or (a refund the bill gives as still PROCESSING) nothing
		// to move yet.
		t.Matched++
		o.Result = reconcile.LineUnchanged
	}
	return o, true
}

// countPrior counts a line an earlier run of the day settled as that run counted it.
func countPrior(t *Tally, l reconcile.ClassifiedLine) {
	refund := l.Kind == reconcile.BillRefund
	switch l.Prior {
	case reconcile.LineRepaired:
		t.Repaired++
		if refund {
			t.RefundsRepaired++
		}
	case reconcile.LineMismatch:
		t.Found++
		if refund && l.PriorMismatch == reconcile.MismatchUnknownRefund {
			t.RefundsUnknown++
		}
	default:
		t.Matched++
	}
}

// lineResult is a payment line as a verified platform result: the bill came from the
// platform over a signed request (or from its portal), so its lines are the platform's word.
func lineResult(acct reconcile.AccountKey, l reconcile.ClassifiedLine, digest string) reconcile.Result {
	r := reconcile.Result{Platform: acct.Platform, MerchantID: acct.MerchantID, OutTradeNo: l.OutTradeNo,
		PlatformTradeNo: l.PlatformTradeNo, AmountMinor: l.AmountMinor, Currency: l.Currency,
		Source: reconcile.SourceStatement, RawDigest: digest, State: reconcile.StatePaid, PaidAt: l.At, RawState: wechatpay.StateSuccess}
	if acct.Platform == reconcile.Alipay {
		r.RawState = alipay.StatusTradeSuccess
	}
	return r
}

// refundLineResult is a refund line as a verified answer about the refund it names. A bill
// lists finished refunds (Alipay writes no status, WeChat Pay's 退款状态 says SUCCESS) and, on
// WeChat Pay, refunds still PROCESSING when the bill was made: any status but a success is
// fed as a PROCESSING answer, which moves nothing.
func refundLineResult(acct reconcile.AccountKey, l reconcile.ClassifiedLine, digest string) reconcile.RefundResult {
	r := reconcile.RefundResult{Platform: acct.Platform, MerchantID: acct.MerchantID, OutTradeNo: l.OutTradeNo,
		PlatformTradeNo: l.PlatformTradeNo, OutRefundNo: l.RefundNo, PlatformRefundNo: l.PlatformRefundNo,
		AmountMinor: l.AmountMinor, Currency: l.Currency, Source: reconcile.SourceStatement, RawDigest: digest,
		State: reconcile.RefundStateProcessing, RawState: l.RefundStatus}
	if l.RefundStatus == "" || strings.EqualFold(l.RefundStatus, wechatpay.RefundSuccess) {
		r.State, r.SucceededAt = reconcile.RefundStateSuccess, l.At
		if r.RawState == "" {
			r.RawState = alipay.RefundStatusSuccess // Alipay's word for a finished refund
		}
	}
	return r
}

// reportHeld settles the previous day's held list against this bill: orders and refunds it
// lists fell on the other side of midnight; the others are reported through the apply path as
// a "not in the bill" answer, exactly once: an order LOCAL_PAID_PLATFORM_UNPAID, a refund
// REFUND_NOT_AT_PLATFORM.
func (r *Runner) reportHeld(ctx context.Context, log zerolog.Logger, tx DayTx, acct reconcile.AccountKey,
	spec Spec, bill Bill, t *Tally) error {
	prev := spec.Day.Prev().Date
	held, err := tx.SettleHeld(ctx, prev)
	if err != nil {
		return err
	}
	opt := reconcile.ApplyOptions{DryRun: spec.DryRun, Detail: map[string]any{"held_since": prev, "bill_date": spec.Day.Date}}
	var done []reconcile.HeldEntry
	for _, h := range held {
		applied, err := r.applyHeld(ctx, acct, bill, h, opt)
		if err != nil {
			t.Errors++
			log.Error().Err(err).Str("out_trade_no", h.OutTradeNo).Int64("order_id", h.OrderID).
				Str("out_refund_no", h.OutRefundNo).Msg("held order or refund not reported")
			continue
		}
		if applied.Outcome == reconcile.OutcomeMismatch {
			t.Reported++
		}
		done = append(done, h)
	}
	return tx.MarkReported(ctx, prev, done)
}

// rawNotInBill is the platform status a finding records for what the bills left out: no
// platform said it, the bills' silence did.
const rawNotInBill = "NOT_IN_BILL"

// applyHeld sends a held order, or refund, through the apply path as absent from the bill.
func (r *Runner) applyHeld(ctx context.Context, acct reconcile.AccountKey, bill Bill, h reconcile.HeldEntry, opt reconcile.ApplyOptions) (reconcile.Applied, error) {
	if h.IsRefund() {
		return r.applier.ApplyRefundResult(ctx, reconcile.RefundResult{Platform: acct.Platform, MerchantID: acct.MerchantID,
			OutTradeNo: h.OutTradeNo, OutRefundNo: h.OutRefundNo, Currency: h.Currency, State: reconcile.RefundStateNotFound,
			RawState: rawNotInBill, Source: reconcile.SourceStatement, RawDigest: bill.SHA256}, opt)
	}
	return r.applier.ApplyResult(ctx, reconcile.Result{Platform: acct.Platform, MerchantID: acct.MerchantID,
		OutTradeNo: h.OutTradeNo, State: reconcile.StateNotFound, RawState: rawNotInBill, Source: reconcile.SourceStatement,
		RawDigest: bill.SHA256}, opt)
}
