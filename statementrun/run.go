// Package statementrun reconciles a day's trade bill of each merchant account against our
// orders: it streams the bill into PostgreSQL while it is parsed, matches the lines with a few
// set-based statements, sends only the lines that need it (repairs, findings) through the
// shared apply path with source statement, settles the previous day's held list and saves the
// figures finance signs off.
package statementrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// Applier is the shared apply path (reconcile.Applier): payment lines through ApplyResult,
// refund lines through ApplyRefundResult.
type Applier interface {
	ApplyResult(ctx context.Context, r reconcile.Result, opt reconcile.ApplyOptions) (reconcile.Applied, error)
	ApplyRefundResult(ctx context.Context, r reconcile.RefundResult, opt reconcile.ApplyOptions) (reconcile.Applied, error)
}

// RunLog records the run (reconcile_runs); repo/postgres's Runs implements it.
type RunLog interface {
	StartRun(ctx context.Context, r *reconcile.Run) error
	FinishRun(ctx context.Context, r reconcile.Run) error
}

// Observer hears about each reconciled day; metrics implement it.
type Observer interface {
	DayReconciled(d DayResult)
}

// Account is one merchant account and where its bill comes from.
type Account struct {
	Key    reconcile.AccountKey
	Source Source
}

// Spec is one statement run: a day of some accounts.
type Spec struct {
	Day      reconcile.BusinessDay
	Accounts []Account
	DryRun   bool
}

// Tally counts one day's lines by what became of them.
type Tally struct {
	Matched, Repaired, Found, ClaimedElsewhere, Errors int
	// RefundsRepaired counts the refund lines among Repaired (a local refund moved to
	// SUCCESS), RefundsUnknown those among Found whose refund number we do not have.
	RefundsRepaired, RefundsUnknown int
	// Reported is how many of the previous day's held orders and refunds became findings.
	Reported int
}

// add adds o's line counts (a worker's share of the day) to t.
func (t *Tally) add(o Tally) {
	t.Matched += o.Matched
	t.Repaired += o.Repaired
	t.Found += o.Found
	t.ClaimedElsewhere += o.ClaimedElsewhere
	t.Errors += o.Errors
	t.RefundsRepaired += o.RefundsRepaired
	t.RefundsUnknown += o.RefundsUnknown
}

// DayResult is one account's reconciled day.
type DayResult struct {
	Account reconcile.AccountKey
	Day     reconcile.BusinessDay
	Figures reconcile.StatementFigures
	Tally   Tally
	DryRun  bool
	Err     error
	// LastDay is the newest day reconciled for the account so far (this one or a later one),
	// zero after a dry run or a failure.
	LastDay time.Time
	// Phases is where the day's time went: reading the bill into the staging table, the
	// set-based classification, the apply path (from the classification's start: lines are
	// applied as it finds them, so the two overlap), and the held list with the figures.
	Phases Phases
}

// Phases times a day's steps.
type Phases struct {
	Stage, Classify, Apply, Settle time.Duration
}

// Result is the whole run.
type Result struct {
	Run  reconcile.Run
	Days []DayResult
}

// Runner runs statements.
type Runner struct {
	store       Store
	locks       reconcile.Locker
	applier     Applier
	runs        RunLog
	observer    Observer
	log         zerolog.Logger
	now         func() time.Time
	concurrency int
	pickLimit   int // the most PENDING orders whose lines are picked out while staging
}

// NewRunner builds a runner that applies up to concurrency lines at once (RECONCILER_CONCURRENCY;
// 0 means 8); locks hold each run's liveness lock (taken at once, never waited for);
// observer may be nil.
func NewRunner(store Store, locks reconcile.Locker, applier Applier, runs RunLog, observer Observer, concurrency int, log zerolog.Logger) *Runner {
	if concurrency <= 0 {
		concurrency = 8
	}
	return &Runner{store: store, locks: locks, applier: applier, runs: runs, observer: observer, log: log, now: time.Now, concurrency: concurrency,
		pickLimit: maxPendingPicked}
}

// ErrLinesFailed says some lines could not be applied (database trouble): the day's record
// is saved without them and a re-run of the day applies exactly those.
var ErrLinesFailed = errors.New("some bill lines could not be applied")

// Run reconciles the day of every account in spec and records one reconcile_runs row (mode
// statement, scanned = bill lines). Each account's day stands alone: one account's rejected
// or unpublished bill does not stop the others. The error joins every account's failure.
func (r *Runner) Run(ctx context.Context, spec Spec) (Result, error) {
	lock, err := r.holdLiveness(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("statement %s: %w", spec.Day.Date, err)
	}
	defer lock.Unlock()
	run := reconcile.Run{Mode: reconcile.ModeStatement, Status: reconcile.RunRunning, StartedAt: r.now(),
		WindowFrom: spec.Day.Start, WindowTo: spec.Day.End, Shard: reconcile.Shard{Index: 0, Count: 1}, DryRun: spec.DryRun,
		LockName: lock.name, Session: lock.Session}
	if err := r.runs.StartRun(ctx, &run); err != nil {
		return Result{}, fmt.Errorf("statement %s: record the run: %w", spec.Day.Date, err)
	}
	log := r.log.With().Int64("run_id", run.ID).Str("bill_date", spec.Day.Date).Bool("dry_run", spec.DryRun).Logger()
	r.takeOverDead(ctx, log, run.ID)
	res := Result{}
	var errs []error
	for _, acct := range spec.Accounts {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("%s %s: not started: %w", acct.Key, spec.Day.Date, ctx.Err()))
			continue
		}
		d := r.day(ctx, log, run.ID, acct, spec)
		if d.Err == nil && !d.DryRun {
			d.LastDay = r.lastDay(ctx, log, acct.Key, spec.Day)
		}
		res.Days = append(res.Days, d)
		addCounts(&run.Counts, d)
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", acct.Key, spec.Day.Date, d.Err))
			log.Error().Err(d.Err).Str("platform", string(acct.Key.Platform)).Str("merchant_id", acct.Key.MerchantID).Msg("statement failed")
		}
		if r.observer != nil {
			r.observer.DayReconciled(d)
		}
	}
	err = errors.Join(errs...)
	run.Status, run.FinishedAt = reconcile.RunSucceeded, r.now()
	switch {
	case err != nil && ctx.Err() != nil:
		// A signal: each day was finished whole or rolled back before staging ended; a re-run
		// does the rest.
		run.Status, run.Error = reconcile.RunInterrupted, err.Error()
		err = errors.Join(err, reconcile.ErrInterrupted)
	case err != nil:
		run.Status, run.Error = reconcile.RunFailed, err.Error()
	}
	if ferr := r.runs.FinishRun(context.WithoutCancel(ctx), run); ferr != nil {
		err = errors.Join(err, fmt.Errorf("statement %s: save the run: %w", spec.Day.Date, ferr))
	}
	res.Run = run
	return res, err
}

// lastDay reads the account's newest reconciled day; on a read error the day just done stands.
func (r *Runner) lastDay(ctx context.Context, log zerolog.Logger, acct reconcile.AccountKey, done reconcile.BusinessDay) time.Time {
	last, err := r.store.LastStatementDay(ctx, acct)
	if err == nil && last != "" {
		if d, perr := reconcile.ParseBusinessDay(last, done.Start.Location()); perr == nil {
			return d.Start
		}
	}
	if err != nil {
		log.Warn().Err(err).Str("platform", string(acct.Platform)).Str("merchant_id", acct.MerchantID).Msg("could not read the last statement day")
	}
	return done.Start
}

func addCounts(c *reconcile.CounterValues, d DayResult) {
	c.Scanned += int64(d.Figures.Lines)
	c.Unchanged += int64(d.Tally.Matched)
	c.Repaired += int64(d.Tally.Repaired)
	c.Mismatches += int64(d.Tally.Found + d.Tally.Reported)
	c.ClaimedElsewhere += int64(d.Tally.ClaimedElsewhere)
	c.Errors += int64(d.Tally.Errors)
	if d.Err != nil && d.Tally.Errors == 0 {
		c.Errors++
	}
}

// liveness is the advisory lock a statement run holds from before its row exists until after
// it recorded its end: a later run that can take it knows this run stopped without finishing.
type liveness struct {
	reconcile.HeldLock
	name string
}

func (r *Runner) holdLiveness(ctx context.Context) (liveness, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return liveness{}, fmt.Errorf("name the run's lock: %w", err)
	}
	name := "payrecon:statement:" + hex.EncodeToString(b[:])
	lock, ok, err := r.locks.TryLock(ctx, name)
	if err != nil {
		return liveness{}, fmt.Errorf("take the run's lock: %w", err)
	}
	if !ok { // a random 64-bit name nobody else holds
		return liveness{}, fmt.Errorf("take the run's lock %s: held by another session", name)
	}
	return liveness{HeldLock: lock, name: name}, nil
}

// takeOverDead marks interrupted the statement runs that stopped without finishing (their
// process died, or their end could not be written), so no row stays "running" for ever. A
// failure here is logged: it costs this run nothing.
func (r *Runner) takeOverDead(ctx context.Context, log zerolog.Logger, runID int64) {
	dead, err := r.store.TakeOverStatementRuns(ctx, runID)
	if err != nil {
		log.Warn().Err(err).Msg("could not look for statement runs that died")
	}
	for _, id := range dead {
		log.Warn().Int64("dead_run_id", id).Msg("took over a statement run whose process died")
	}
}
