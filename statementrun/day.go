package statementrun

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
	"github.com/payrecon/payrecon/statement"
)

// Line outcomes as statement_lines and the lines metric name them.
const (
	outcomeRepaired = "repaired"
	outcomeMismatch = "mismatch"
	outcomeMatched  = "unchanged"
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
	tx, err := r.store.BeginStatement(ctx, repo.StatementDay{Account: acct.Key, Date: spec.Day.Date,
		Start: spec.Day.Start, End: spec.Day.End}, runID)
	if err != nil {
		d.Err = err
		return d
	}
	defer tx.Rollback()
	start := time.Now()
	staged, err := tx.Stage(ctx, &dayChecked{Reader: bill.Reader, day: spec.Day})
	d.Phases.Stage = time.Since(start)
	if err != nil {
		// A rejected bill ends here: nothing was applied, the staged lines go with the rollback.
		d.Err = err
		return d
	}
	d.Figures = figures(staged, bill)
	// Once the bill is staged the day is finished even if a signal arrives: what is left is
	// a few set-based statements and the few lines that need the apply path, and a day
	// finished whole is one a re-run repeats nothing of.
	ctx = context.WithoutCancel(ctx)
	if d.Err = r.settle(ctx, log, tx, acct.Key, spec, bill, &d); d.Err != nil {
		return d
	}
	if spec.DryRun {
		log.Info().Int("lines", d.Figures.Lines).Int("repaired", d.Tally.Repaired).Int("found", d.Tally.Found).
			Msg("dry run: nothing written but the run row")
		return d
	}
	if d.Err = tx.Commit(); d.Err != nil {
		return d
	}
	log.Info().Int("lines", d.Figures.Lines).Int("matched", d.Figures.Matched).Int("repaired", d.Tally.Repaired).
		Int("found", d.Tally.Found).Int("held", d.Figures.Held).Int("reported", d.Tally.Reported).
		Dur("stage", d.Phases.Stage).Dur("classify", d.Phases.Classify).Dur("apply", d.Phases.Apply).Dur("settle", d.Phases.Settle).
		Msg("statement reconciled")
	if d.Tally.Errors > 0 {
		d.Err = fmt.Errorf("%d lines: %w; re-run the day to apply them", d.Tally.Errors, ErrLinesFailed)
	}
	return d
}

// settle does the day's work on the staged bill, short of committing.
func (r *Runner) settle(ctx context.Context, log zerolog.Logger, tx *repo.StatementTx, acct reconcile.AccountKey,
	spec Spec, bill Bill, d *DayResult) error {
	start := time.Now()
	lines, err := tx.Classify(ctx)
	if err != nil {
		return err
	}
	d.Phases.Classify = time.Since(start)
	start = time.Now()
	outcomes := r.applyLines(ctx, log, acct, spec, bill, lines, &d.Tally)
	d.Phases.Apply = time.Since(start)
	start = time.Now()
	defer func() { d.Phases.Settle = time.Since(start) }()
	t := d.Tally // the lines' own outcomes, before the held orders add theirs
	if err := r.reportHeld(ctx, log, tx, acct, spec, bill, &d.Tally); err != nil {
		return err
	}
	if d.Figures.Held, err = tx.HoldUnlisted(ctx); err != nil {
		return err
	}
	if err := tx.RecordLines(ctx, outcomes); err != nil {
		return err
	}
	d.Figures.Repaired, d.Figures.Found = t.Repaired, t.Found
	// Every line the classification matched set-based never came back to Go: the matched
	// ones are what is left.
	d.Figures.Matched = d.Figures.Lines - t.Repaired - t.Found - t.ClaimedElsewhere - t.Errors
	d.Tally.Matched = d.Figures.Matched
	return tx.SaveDay(ctx, d.Figures)
}

func figures(s repo.StagedBill, b Bill) repo.StatementFigures {
	t := s.Totals
	return repo.StatementFigures{
		Payments: t.Payments, PaymentsMinor: t.PaymentsMinor, Refunds: t.Refunds, RefundsMinor: t.RefundsMinor,
		ReceivedMinor: s.ReceivedMinor, FeeMilliFen: t.FeeMilliFen, NetMilliFen: s.ReceivedMinor*1000 - t.FeeMilliFen,
		Lines: s.Lines, BillSHA256: b.SHA256, BillLocation: b.Location,
	}
}

// applyLines sends the lines that need it through the apply path and counts every returned
// line; lines an earlier run of the day settled count as they did then and are not applied.
// Lines are applied by several workers, each commit costing a round trip and a WAL flush; all
// lines of one order go to the same worker, in bill order (payments first), so a payment and
// its refund on the same day repair, then report.
func (r *Runner) applyLines(ctx context.Context, log zerolog.Logger, acct reconcile.AccountKey, spec Spec, bill Bill,
	lines []repo.StatementLine, t *Tally) []repo.LineOutcome {
	queues := make([][]repo.StatementLine, r.concurrency)
	for _, l := range lines {
		if l.Prior != "" {
			countPrior(t, l.Prior)
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(l.OutTradeNo))
		i := h.Sum32() % uint32(len(queues))
		queues[i] = append(queues[i], l)
	}
	outs := make([][]repo.LineOutcome, len(queues))
	tallies := make([]Tally, len(queues))
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Go(func() {
			for _, l := range q {
				if o, ok := r.applyLine(ctx, log, acct, spec, bill, l, &tallies[i]); ok {
					outs[i] = append(outs[i], o)
				}
			}
		})
	}
	wg.Wait()
	var out []repo.LineOutcome
	for i := range queues {
		out = append(out, outs[i]...)
		t.Matched += tallies[i].Matched
		t.Repaired += tallies[i].Repaired
		t.Found += tallies[i].Found
		t.ClaimedElsewhere += tallies[i].ClaimedElsewhere
		t.Errors += tallies[i].Errors
	}
	return out
}

// applyLine applies one line; ok is false when its outcome is not final (an error, or a
// callback holding the claim) and a re-run of the day must apply it again.
func (r *Runner) applyLine(ctx context.Context, log zerolog.Logger, acct reconcile.AccountKey, spec Spec, bill Bill,
	l repo.StatementLine, t *Tally) (repo.LineOutcome, bool) {
	applied, err := r.applier.ApplyResult(ctx, lineResult(acct, l, bill.SHA256), reconcile.ApplyOptions{
		DryRun: spec.DryRun, Detail: map[string]any{"bill_date": spec.Day.Date, "bill_line": l.No, "bill_sha256": bill.SHA256},
	})
	if err != nil {
		t.Errors++
		log.Error().Err(err).Int("bill_line", l.No).Str("out_trade_no", l.OutTradeNo).Msg("bill line not applied")
		return repo.LineOutcome{}, false
	}
	o := repo.LineOutcome{Line: l, OrderID: applied.Order.ID}
	switch applied.Outcome {
	case reconcile.OutcomeApplied:
		t.Repaired++
		o.Outcome = outcomeRepaired
		log.Info().Int("bill_line", l.No).Str("out_trade_no", l.OutTradeNo).Int64("order_id", o.OrderID).
			Bool("dry_run", spec.DryRun).Msg("order repaired from the bill")
	case reconcile.OutcomeMismatch:
		t.Found++
		o.Outcome, o.Mismatch = outcomeMismatch, applied.Mismatch
	case reconcile.OutcomeClaimedElsewhere:
		// A callback is applying it right now; a re-run of the day settles the line.
		t.ClaimedElsewhere++
		return o, false
	default:
		t.Matched++
		o.Outcome = outcomeMatched
	}
	return o, true
}

func countPrior(t *Tally, prior string) {
	switch prior {
	case outcomeRepaired:
		t.Repaired++
	case outcomeMismatch:
		t.Found++
	default:
		t.Matched++
	}
}

// lineResult is a bill line as a verified platform result: the bill came from the platform
// over a signed request (or from its portal), so its lines are the platform's word.
func lineResult(acct reconcile.AccountKey, l repo.StatementLine, digest string) reconcile.Result {
	r := reconcile.Result{Platform: acct.Platform, MerchantID: acct.MerchantID, OutTradeNo: l.OutTradeNo,
		PlatformTradeNo: l.PlatformTradeNo, AmountMinor: l.AmountMinor, Currency: l.Currency,
		Source: reconcile.SourceStatement, RawDigest: digest}
	if l.Kind == statement.Refund {
		r.State, r.RawState = reconcile.StateRefunded, "REFUND"
		return r
	}
	r.State, r.PaidAt = reconcile.StatePaid, l.At
	r.RawState = "SUCCESS"
	if acct.Platform == reconcile.Alipay {
		r.RawState = "TRADE_SUCCESS"
	}
	return r
}

// reportHeld settles the previous day's held list against this bill: orders it lists fell on
// the other side of midnight; the others are LOCAL_PAID_PLATFORM_UNPAID, through the apply
// path as a "not in the bill" answer, exactly once.
func (r *Runner) reportHeld(ctx context.Context, log zerolog.Logger, tx *repo.StatementTx, acct reconcile.AccountKey,
	spec Spec, bill Bill, t *Tally) error {
	prev := spec.Day.Prev().Date
	held, err := tx.SettleHeld(ctx, prev)
	if err != nil {
		return err
	}
	var done []int64
	for _, h := range held {
		res := reconcile.Result{Platform: acct.Platform, MerchantID: acct.MerchantID, OutTradeNo: h.OutTradeNo,
			State: reconcile.StateNotFound, RawState: "NOT_IN_BILL", Source: reconcile.SourceStatement, RawDigest: bill.SHA256}
		applied, err := r.applier.ApplyResult(ctx, res, reconcile.ApplyOptions{DryRun: spec.DryRun,
			Detail: map[string]any{"held_since": prev, "bill_date": spec.Day.Date}})
		if err != nil {
			t.Errors++
			log.Error().Err(err).Str("out_trade_no", h.OutTradeNo).Int64("order_id", h.OrderID).Msg("held order not reported")
			continue
		}
		if applied.Outcome == reconcile.OutcomeMismatch {
			t.Reported++
		}
		done = append(done, h.OrderID)
	}
	return tx.MarkReported(ctx, prev, done)
}
