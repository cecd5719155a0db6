package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// ErrLockHeld: another pass holds this shard's lock. Not a failure: the caller exits 0.
var ErrLockHeld = errors.New("another pass holds the lock for this shard")

// ErrInterrupted: the pass stopped on a signal after draining; the next one carries on.
var ErrInterrupted = errors.New("pass interrupted")

// ErrPassFailed: the pass as a whole failed (not one due order could be checked).
var ErrPassFailed = errors.New("pass failed")

// ErrCannotResume: the run named to resume does not exist or cannot be resumed (finished,
// not a backfill, another shard). Bad usage: no retry can help.
var ErrCannotResume = errors.New("cannot resume")

// Observer hears about every checked order and refund: metrics, the dry-run printout, a
// progress bar.
type Observer interface {
	Checked(c Check)
}

// DueObserver is an Observer that is also told, once per pass and before any of their
// loops starts, which accounts have due work (the worker sizes its scheduler to their call
// budgets). The slice is the pass's own: read it, do not keep it.
type DueObserver interface {
	Due(accounts []DueAccount)
}

// Check is one order's (or one refund's) check, as an Observer sees it.
type Check struct {
	RunID int64
	// Order is the order checked; for a refund check, the refunded order as far as the
	// refund names it (id, platform, account, out_trade_no).
	Order  Order
	Result Result // zero when the platform call failed, and for a refund check
	// Refund is set when the check was of a refund; RefundResult is then the platform's
	// answer (zero when the call failed).
	Refund       *Refund
	RefundResult RefundResult
	Applied      Applied
	// ClosedAtPlatform is set when the pass closed the trade at the platform first.
	ClosedAtPlatform bool
	Err              error
	// Took is the whole check; PlatformTime the part spent waiting on the platform (query,
	// close, confirming query, with their retries and rate-limit waits).
	Took, PlatformTime time.Duration
	DryRun             bool
}

// RunnerSettings tune a pass; zero values take the documented defaults.
type RunnerSettings struct {
	Concurrency     int
	Grace           time.Duration
	Lookback        time.Duration
	OrderTTL        time.Duration
	RecheckMin      time.Duration
	RecheckMax      time.Duration
	CloseAtPlatform bool
	// DrainTimeout bounds how long in-flight orders may finish after a signal.
	DrainTimeout time.Duration
	// PlatformTimeout is the deadline of one platform call attempt; the lease follows it.
	PlatformTimeout time.Duration
	// Lease is how long a taken order stays reserved for this pass; zero: DefaultOrderLease of the
	// platform timeout.
	Lease time.Duration
	// Budgets lets the pass start an account's loop only while the budget bounding its
	// calls can use more callers (dispatcher); nil: as soon as a loop of MaxActiveAccounts
	// is free.
	Budgets BudgetQueues
	Now     func() time.Time
}

func (s *RunnerSettings) fillDefaults() {
	if s.Concurrency <= 0 {
		s.Concurrency = 16
	}
	if s.Lookback <= 0 {
		s.Lookback = 72 * time.Hour
	}
	if s.OrderTTL <= 0 {
		s.OrderTTL = 2 * time.Hour
	}
	if s.RecheckMax < s.RecheckMin {
		s.RecheckMax = s.RecheckMin
	}
	if s.DrainTimeout <= 0 {
		s.DrainTimeout = 30 * time.Second
	}
	if s.Lease <= 0 {
		s.Lease = DefaultOrderLease(s.PlatformTimeout)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
}

// DefaultOrderLease is the lease of a taken order when RECONCILER_ORDER_LEASE is not set:
// ten platform call timeouts, never under two minutes (a platform timeout of zero is the
// default 10s). A lease must outlast the slowest check (query, close and confirming query,
// each with its retries); a live pass that outlived it would share the order with another
// pass (safe, the apply path decides, but wasteful). A dead pass's leases never wait for it:
// the next pass of its shard takes them over at once.
func DefaultOrderLease(platformTimeout time.Duration) time.Duration {
	if platformTimeout <= 0 {
		platformTimeout = 10 * time.Second
	}
	return max(10*platformTimeout, 2*time.Minute)
}

// Runner runs reconciliation passes: it takes due orders, asks their platform, and feeds
// every definite answer to the shared apply path.
type Runner struct {
	applier *Applier
	queue   WorkQueue
	// refunds is the queue's refund half; nil when the queue or the apply path's store
	// cannot take refunds: passes then check orders only.
	refunds  RefundQueue
	runs     RunLog
	locks    Locker
	clients  map[AccountKey]PlatformClient
	accounts []AccountKey // in the order given, so passes dispatch deterministically
	settings RunnerSettings
	observer Observer
	log      zerolog.Logger
}

// NewRunner wires a runner. observer may be nil. A queue that is also a RefundQueue (over a
// store the applier can apply refunds with) gives passes that check refunds too.
func NewRunner(applier *Applier, queue WorkQueue, runs RunLog, locks Locker, clients []PlatformClient,
	settings RunnerSettings, observer Observer, log zerolog.Logger) *Runner {
	settings.fillDefaults()
	r := &Runner{applier: applier, queue: queue, runs: runs, locks: locks, clients: map[AccountKey]PlatformClient{},
		settings: settings, observer: observer, log: log}
	if rq, ok := queue.(RefundQueue); ok && applier.refunds != nil {
		r.refunds = rq
	}
	for _, c := range clients {
		k := AccountKey{Platform: c.Platform(), MerchantID: c.MerchantID()}
		if _, dup := r.clients[k]; !dup {
			r.accounts = append(r.accounts, k)
		}
		r.clients[k] = c
	}
	return r
}

// PassSpec says which pass to run.
type PassSpec struct {
	Mode  RunMode
	Shard Shard
	// From and To bound a backfill window on created_at: [From, To).
	From, To time.Time
	DryRun   bool
	// Resume continues the backfill run with this id from its saved cursor.
	Resume int64
}

// Pass runs one pass to completion, interruption or failure and returns its run record.
// Errors: ErrLockHeld (nothing ran), ErrInterrupted (drained, resumable), a *PlatformError of
// KindConfig (our credentials are wrong: stopped at the first sign), ErrPassFailed or a
// database error (the pass as a whole failed).
func (r *Runner) Pass(ctx context.Context, spec PassSpec) (Run, error) {
	if spec.Shard.Count == 0 {
		spec.Shard = Shard{Index: 0, Count: 1}
	}
	lockName := fmt.Sprintf("payrecon:%s:%s", lockKind(spec.Mode), spec.Shard)
	lock, ok, err := r.locks.TryLock(ctx, lockName)
	if err != nil {
		return Run{}, fmt.Errorf("take shard lock %s: %w", lockName, err)
	}
	if !ok {
		return Run{}, ErrLockHeld
	}
	defer lock.Unlock()

	run, err := r.startRun(ctx, spec, lockName, lock.Session)
	if err != nil {
		return Run{}, err
	}
	log := r.log.With().Int64("run_id", run.ID).Str("mode", string(run.Mode)).Str("shard", run.Shard.String()).Logger()
	log.Info().Bool("dry_run", run.DryRun).Time("window_from", run.WindowFrom).Time("window_to", run.WindowTo).
		Str("cursor", run.Cursor.String()).Msg("pass started")
	run.TakenOver = r.takeOver(ctx, run, log)

	run.Unconfigured = r.countUnconfigured(ctx, run, log)
	p := r.newPass(run, log)
	checkedBefore := run.Counts.Scanned
	errorsBefore := run.Counts.Errors

	passErr := p.loop(ctx)

	run = p.snapshot() // p.run was built after Unconfigured and TakenOver were set
	run.FinishedAt = r.settings.Now()
	checked, failed := run.Counts.Scanned-checkedBefore, run.Counts.Errors-errorsBefore
	switch {
	case passErr == nil && checked > 0 && failed == checked:
		passErr = fmt.Errorf("%w: all %d checks of orders and refunds failed", ErrPassFailed, checked)
		fallthrough
	case passErr != nil && !errors.Is(passErr, ErrInterrupted):
		run.Status, run.Error = RunFailed, passErr.Error()
	case errors.Is(passErr, ErrInterrupted):
		run.Status = RunInterrupted
	default:
		run.Status = RunSucceeded
	}
	// The run row is written even when the pass was cancelled: use a fresh context.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.runs.FinishRun(fctx, run); err != nil {
		log.Error().Err(err).Msg("could not record the end of the run")
		if passErr == nil {
			passErr = fmt.Errorf("record run %d: %w", run.ID, err)
		}
	}
	ev := log.Info()
	if run.Status != RunSucceeded {
		ev = log.Warn().Err(passErr)
	}
	for _, rc := range RunCounters {
		ev = ev.Int64(rc.Name, rc.Value(run.Counts))
	}
	ev.Str("status", string(run.Status)).Dur("took", run.FinishedAt.Sub(run.StartedAt)).Msg("pass finished")
	return run, passErr
}

// countUnconfigured logs, once per run, how many pending orders in the run's window belong
// to accounts this process has no credentials for: no pass here will ever check them.
func (r *Runner) countUnconfigured(ctx context.Context, run Run, log zerolog.Logger) []AccountCount {
	from, to := run.WindowFrom, run.WindowTo
	counts, err := r.queue.Unconfigured(ctx, from, to, run.Shard, r.accounts)
	if err != nil {
		log.Warn().Err(err).Msg("could not count the orders of unconfigured accounts")
		return nil
	}
	if len(counts) > 0 {
		arr := zerolog.Arr()
		var total int64
		for _, c := range counts {
			arr.Dict(zerolog.Dict().Str("platform", string(c.Account.Platform)).Str("merchant_id", c.Account.MerchantID).Int64("orders", c.Orders))
			total += c.Orders
		}
		log.Warn().Int64("orders", total).Array("accounts", arr).
			Msg("pending orders of merchant accounts that are not configured wait unchecked; add the accounts to RECONCILER_ACCOUNTS_FILE")
	}
	return counts
}

// lockKind keeps the CronJob and a backfill from excluding each other: they share the
// leases, not the lock.
func lockKind(m RunMode) string {
	if m == ModeBackfill {
		return "backfill"
	}
	return "run"
}

// takeOver frees, at once, the leases of every earlier run of this lock still "running" (we
// hold the lock, so it stopped without recording its end: its process died), marks those
// runs interrupted and logs each; it also frees leases finished runs failed to release.
// Without it those orders would stay invisible until the leases ran out. A failure here is
// logged and the pass goes on: the leases still expire by themselves.
func (r *Runner) takeOver(ctx context.Context, run Run, log zerolog.Logger) []TakenOver {
	if run.DryRun {
		return nil // a dry run writes nothing but its own row
	}
	dead, err := r.runs.TakeOver(ctx, run)
	if err != nil {
		log.Warn().Err(err).Msg("could not take over the runs of dead processes; their leases expire by themselves")
		return nil
	}
	for _, d := range dead {
		if d.Finished {
			log.Warn().Int64("finished_run_id", d.RunID).Int("leases_freed", len(d.Orders)).
				Int("refund_leases_freed", len(d.Refunds)).Msg("freed leases a finished run failed to release")
			continue
		}
		log.Warn().Int64("dead_run_id", d.RunID).Int("leases_freed", len(d.Orders)).Int("refund_leases_freed", len(d.Refunds)).
			Msg("took over a run whose process died: marked it interrupted and freed its leases")
	}
	return dead
}

// DeadRuns counts the runs a pass took over (not the finished ones whose leftover leases it
// freed).
func (r Run) DeadRuns() int {
	n := 0
	for _, d := range r.TakenOver {
		if !d.Finished {
			n++
		}
	}
	return n
}

func (r *Runner) startRun(ctx context.Context, spec PassSpec, lockName string, session Session) (Run, error) {
	if spec.Resume != 0 {
		run, err := r.runs.LoadRun(ctx, spec.Resume)
		if errors.Is(err, ErrNotFound) {
			return Run{}, fmt.Errorf("%w run %d: no such run", ErrCannotResume, spec.Resume)
		}
		if err != nil {
			return Run{}, fmt.Errorf("resume run %d: %w", spec.Resume, err)
		}
		switch {
		case run.Mode != ModeBackfill:
			return Run{}, fmt.Errorf("%w run %d: it is a %s run; only a backfill resumes", ErrCannotResume, run.ID, run.Mode)
		case run.Status == RunSucceeded:
			return Run{}, fmt.Errorf("%w run %d: it already finished", ErrCannotResume, run.ID)
		case run.Shard != spec.Shard:
			return Run{}, fmt.Errorf("%w run %d: it covers shard %s, not %s", ErrCannotResume, run.ID, run.Shard, spec.Shard)
		}
		run.Status, run.Error, run.DryRun = RunRunning, "", spec.DryRun
		run.LockName, run.Session = lockName, session
		if err := r.runs.SaveProgress(ctx, run); err != nil {
			return Run{}, err
		}
		return run, nil
	}
	run := Run{Mode: spec.Mode, Status: RunRunning, StartedAt: r.settings.Now(), Shard: spec.Shard, DryRun: spec.DryRun,
		LockName: lockName, Session: session}
	if spec.Mode == ModeBackfill {
		run.WindowFrom, run.WindowTo = spec.From, spec.To
	} else {
		run.WindowFrom = run.StartedAt.Add(-r.settings.Lookback)
		run.WindowTo = run.StartedAt.Add(-r.settings.Grace)
	}
	if err := r.runs.StartRun(ctx, &run); err != nil {
		return Run{}, fmt.Errorf("record run start: %w", err)
	}
	return run, nil
}

// pass is the state of one running pass.
type pass struct {
	*Runner
	log      zerolog.Logger
	counters *Counters

	mu  sync.Mutex
	run Run
	// marks and refundMarks track each account's finished orders and refunds.
	marks, refundMarks map[AccountKey]*watermark
	// adopted and adoptedRefunds are the orders and refunds taken over from dead runs
	// (read-only once the pass starts).
	adopted, adoptedRefunds map[int64]bool
}

// newPass sets up the state of a pass over run, whose takeover has been done.
func (r *Runner) newPass(run Run, log zerolog.Logger) *pass {
	p := &pass{Runner: r, run: run, log: log, counters: &Counters{}, marks: map[AccountKey]*watermark{},
		refundMarks: map[AccountKey]*watermark{}, adopted: map[int64]bool{}, adoptedRefunds: map[int64]bool{}}
	for _, d := range run.TakenOver {
		if d.Finished {
			// A finished run released or marked its claims; a claim on its orders now is
			// someone else's (a callback being applied), to be waited for as any other.
			continue
		}
		for _, id := range d.Orders {
			p.adopted[id] = true
		}
		for _, id := range d.Refunds {
			p.adoptedRefunds[id] = true
		}
	}
	p.counters.Load(run.Counts) // a resumed backfill keeps counting
	return p
}

func (p *pass) snapshot() Run {
	p.mu.Lock()
	defer p.mu.Unlock()
	run := p.run
	run.Counts = p.counters.Snapshot()
	run.Cursor = p.resumeCursorLocked(p.run.Cursor, p.marks)
	run.RefundCursor = p.resumeCursorLocked(p.run.RefundCursor, p.refundMarks)
	return run
}

// resumeCursorLocked is where each account resumes one kind of work: the last position
// before which it has finished everything (where this pass began, for an account with
// nothing finished yet).
func (p *pass) resumeCursorLocked(start Cursors, marks map[AccountKey]*watermark) Cursors {
	out := Cursors{}
	for _, k := range p.accounts {
		pos := start.For(k)
		if m := marks[k]; m != nil {
			if c, done := m.done(); done {
				pos = c
			}
		}
		if !pos.IsZero() {
			out[k] = pos
		}
	}
	return out
}

// loop runs one taking loop per account with due work, each with its own workers, so that
// one account's latency, throttling or failures never hold the workers another account
// needs; an account with nothing due gets no loop at all. It returns when every account
// has drained, the context ends (drain, then ErrInterrupted) or a fatal error stops all of
// them.
func (p *pass) loop(ctx context.Context) error {
	// Workers run on their own context: a signal stops the taking at once but lets
	// in-flight checks finish, for DrainTimeout at most.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	go func() {
		select {
		case <-ctx.Done():
			timer := time.NewTimer(p.settings.DrainTimeout)
			defer timer.Stop()
			select {
			case <-timer.C:
				cancelWork()
			case <-workCtx.Done():
			}
		case <-workCtx.Done():
		}
	}()

	due, err := p.dueAccounts(ctx)
	if err != nil {
		return err
	}
	if d, ok := p.observer.(DueObserver); ok {
		d.Due(due)
	}
	d := newDispatcher(p, ctx, workCtx)
	d.run(due)
	if err := d.fatal.get(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	return nil
}

// dueAccounts are the configured accounts with due work in this pass's mode, window and
// shard, in configuration order.
func (p *pass) dueAccounts(ctx context.Context) ([]DueAccount, error) {
	s, run := p.settings, p.run
	listed, err := p.queue.DueAccounts(ctx, TakeQuery{Mode: run.Mode, Now: s.Now(), Grace: s.Grace, Lookback: s.Lookback,
		From: run.WindowFrom, To: run.WindowTo, Shard: run.Shard})
	if err != nil {
		return nil, err // the store names what it was doing
	}
	due := make(map[AccountKey]DueAccount, len(listed))
	for _, a := range listed {
		due[a.AccountKey] = a
	}
	out := make([]DueAccount, 0, len(listed))
	for _, k := range p.accounts {
		if a, ok := due[k]; ok {
			out = append(out, a)
		}
	}
	return out, nil
}

// fatalLatch keeps the first error that must stop the whole pass.
type fatalLatch struct {
	mu   sync.Mutex
	err  error
	stop chan struct{} // closed on the first error
}

func (f *fatalLatch) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
		close(f.stop)
	}
}

func (f *fatalLatch) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// takeLoop takes one account's orders and refunds, never more than it has free workers,
// until a take of each kind has come back short, ctx ends or the latch trips. It returns
// once its workers are done.
func (p *pass) takeLoop(ctx, workCtx context.Context, acct DueAccount, group *budgetGroup, fatal *fatalLatch) {
	l := p.newAccountLoop(acct, group, fatal)
	defer l.wg.Wait()
	// The dispatcher counted this loop's first take on its way to the budget's queue; the
	// checks it starts count themselves.
	firstTake := true
	defer func() {
		if firstTake {
			group.arrived(false)
		}
	}()
	lastSave := time.Now()
	for !l.orders.done || !l.refunds.done {
		// Wait for one free worker, then take as many as are free.
		if !waitForSlot(ctx, l.slots, fatal) {
			return
		}
		free := p.gatherFree(l.slots, l.clock.get())
		// Taken on the work context: a take cancelled halfway could lease rows it never
		// returns. Whatever it returns is checked, even if a signal came meanwhile.
		started, err := l.takeBatch(workCtx, free)
		if firstTake {
			firstTake = false
			group.arrived(started > 0)
		}
		for i := started; i < free; i++ {
			<-l.slots
		}
		if err != nil {
			fatal.set(err)
			return
		}
		if time.Since(lastSave) > 2*time.Second {
			p.saveProgress(ctx)
			lastSave = time.Now()
		}
	}
}

// accountLoop is one account's taking loop: ONE pool of workers that its orders and its
// refunds share, each kind taken from its own cursor.
type accountLoop struct {
	p         *pass
	acct      AccountKey
	group     *budgetGroup // nil: its budget's queue is not read
	source    Source
	owner     string
	passStart time.Time
	fatal     *fatalLatch
	slots     chan struct{}
	wg        sync.WaitGroup
	clock     checkClock
	orders    queueState
	refunds   queueState
}

// queueState is where one kind of an account's work stands in a pass.
type queueState struct {
	cursor Cursor
	mark   *watermark
	// done: a take came back short, so nothing more of this kind is due in this pass.
	done bool
}

// newAccountLoop sets up the loop of one due account. A kind the account has nothing due of
// starts done: its take would only come back empty.
func (p *pass) newAccountLoop(due DueAccount, group *budgetGroup, fatal *fatalLatch) *accountLoop {
	acct := due.AccountKey
	l := &accountLoop{p: p, acct: acct, group: group, source: SourceReconcile, owner: fmt.Sprintf("run-%d", p.run.ID),
		passStart: p.settings.Now(), fatal: fatal, slots: make(chan struct{}, p.settings.Concurrency)}
	if p.run.Mode == ModeBackfill {
		l.source = SourceBackfill
	}
	l.orders = queueState{cursor: p.run.Cursor.For(acct), mark: &watermark{}, done: !due.Orders}
	l.refunds = queueState{cursor: p.run.RefundCursor.For(acct), mark: &watermark{}, done: p.refunds == nil || !due.Refunds}
	p.mu.Lock()
	p.marks[acct], p.refundMarks[acct] = l.orders.mark, l.refunds.mark
	p.mu.Unlock()
	return l
}

// takeBatch fills free workers and returns how many checks it started: orders first and,
// once their take comes back short, refunds in the slots the orders left. A batch is thus
// never smaller than the free workers while either kind has work, and neither kind waits
// for workers held back for the other.
func (l *accountLoop) takeBatch(ctx context.Context, free int) (int, error) {
	started := 0
	if !l.orders.done {
		orders, err := l.p.queue.Take(ctx, l.query(l.orders.cursor, free))
		if err != nil {
			return 0, fmt.Errorf("take due orders of %s: %w", l.acct, err)
		}
		l.orders.done = len(orders) < free
		taken := time.Now()
		for _, o := range orders {
			l.start(ctx, &l.orders, Cursor{CreatedAt: o.CreatedAt, ID: o.ID}, taken,
				func(ctx context.Context) error { return l.p.check(ctx, o, l.source, l.owner) })
		}
		started = len(orders)
	}
	if started == free || l.refunds.done {
		return started, nil
	}
	want := free - started
	refunds, err := l.p.refunds.TakeRefunds(ctx, l.query(l.refunds.cursor, want))
	if err != nil {
		return started, fmt.Errorf("take due refunds of %s: %w", l.acct, err)
	}
	l.refunds.done = len(refunds) < want
	taken := time.Now()
	for _, due := range refunds {
		l.start(ctx, &l.refunds, refundPosition(l.p.run.Mode, due.Refund), taken,
			func(ctx context.Context) error { return l.p.checkRefund(ctx, due, l.source, l.owner) })
	}
	return started + len(refunds), nil
}

// query is the take of up to limit items after the cursor.
func (l *accountLoop) query(after Cursor, limit int) TakeQuery {
	s, run := l.p.settings, l.p.run
	return TakeQuery{Mode: run.Mode, Now: s.Now(), PassStart: l.passStart, Grace: s.Grace, Lookback: s.Lookback,
		From: run.WindowFrom, To: run.WindowTo, After: after, Shard: run.Shard, Account: l.acct, Limit: limit,
		Lease: s.Lease, Owner: l.owner, DryRun: run.DryRun}
}

// start runs one taken check on a worker of its own, which holds the slot the take counted
// and frees it when done; the kind's cursor moves on to pos at once, its watermark once the
// check is done.
func (l *accountLoop) start(ctx context.Context, q *queueState, pos Cursor, taken time.Time, check func(context.Context) error) {
	q.cursor = pos
	mark := q.mark
	l.p.mu.Lock()
	ticket := mark.add(pos)
	l.p.mu.Unlock()
	l.group.coming()
	l.wg.Add(1)
	go func() {
		// From here to the budget's queue the check runs without blocking.
		l.group.arrived(true)
		defer l.wg.Done()
		defer func() { l.clock.observe(time.Since(taken)); <-l.slots }()
		defer func() {
			l.p.mu.Lock()
			mark.complete(ticket)
			l.p.mu.Unlock()
		}()
		if err := check(ctx); err != nil {
			l.fatal.set(err)
		}
	}()
}

// waitForSlot holds one worker slot, or reports false (holding none) once ctx ends or the
// latch trips.
func waitForSlot(ctx context.Context, slots chan struct{}, fatal *fatalLatch) bool {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return false
	case <-fatal.stop:
		return false
	}
	// A signal or a fatal error may have come while a worker freed up: select picks at
	// random among ready cases, so look again before taking more.
	select {
	case <-ctx.Done():
		<-slots
		return false
	case <-fatal.stop:
		<-slots
		return false
	default:
	}
	return true
}

// gatherFree collects the worker slots that are free now, having taken one already. When
// workers free up one at a time (the steady state under platform latency or a call budget),
// it waits for a quarter of the pool, so the pass takes orders in batches instead of paying
// one claiming statement per order. The wait is batchWait, or a sixteenth of a check when
// checks are long: a freed worker then idles for a small part of what it is about to do,
// and under a budget (where checks are long because workers queue for tokens) it costs
// nothing at all, since the queue keeps the budget spent while the batch fills.
func (p *pass) gatherFree(slots chan struct{}, checkTime time.Duration) int {
	free, want := 1, max(1, p.settings.Concurrency/4)
	var timeout <-chan time.Time
	for free < p.settings.Concurrency {
		select {
		case slots <- struct{}{}:
			free++
			continue
		default:
		}
		if free >= want {
			break
		}
		if timeout == nil {
			timeout = time.After(batchWindow(checkTime))
		}
		select {
		case slots <- struct{}{}:
			free++
			continue
		case <-timeout:
		}
		break
	}
	return free
}

// batchWait bounds how long a pass waits to fill a batch when checks are quick;
// maxBatchWait bounds it whatever they take.
const (
	batchWait    = 10 * time.Millisecond
	maxBatchWait = 100 * time.Millisecond
)

// batchWindow is how long a take may wait for more free workers, given the recent time
// one check takes.
func batchWindow(checkTime time.Duration) time.Duration {
	return min(maxBatchWait, max(batchWait, checkTime/16))
}

// checkClock is a moving average of how long one account's checks take (from the take to
// the worker's release), read by gatherFree.
type checkClock struct{ avg atomic.Int64 }

func (c *checkClock) observe(d time.Duration) {
	for {
		old := c.avg.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/8
		}
		if c.avg.CompareAndSwap(old, next) {
			return
		}
	}
}

func (c *checkClock) get() time.Duration { return time.Duration(c.avg.Load()) }

func (p *pass) saveProgress(ctx context.Context) {
	if err := p.runs.SaveProgress(ctx, p.snapshot()); err != nil && ctx.Err() == nil {
		p.log.Warn().Err(err).Msg("could not save run progress")
	}
}

// check asks the platform about one order and applies the answer. It returns an error only
// for what must stop the whole pass (our own credentials are wrong).
func (p *pass) check(ctx context.Context, o Order, source Source, owner string) error {
	start := time.Now()
	c := Check{RunID: p.run.ID, Order: o, DryRun: p.run.DryRun}
	log := p.log.With().Str("platform", string(o.Platform)).Str("out_trade_no", o.OutTradeNo).Int64("order_id", o.ID).Logger()
	p.counters.Scanned.Add(1)

	expired := !p.settings.Now().Before(o.ExpiryAt(p.settings.OrderTTL))
	askStart := time.Now()
	res, closed, err := p.ask(ctx, o, expired, log)
	c.PlatformTime = time.Since(askStart)
	c.Result, c.ClosedAtPlatform = res, closed
	if err == nil {
		res.Source = source
		opts := ApplyOptions{
			DryRun: p.run.DryRun,
			Order:  &o,
			// Close locally only once the buyer cannot pay any more: the platform never saw
			// the trade, or we closed it there, or closing there is switched off.
			CloseIfExpired: expired && (res.State == StateNotFound || closed || !p.settings.CloseAtPlatform || p.run.DryRun),
			// A dead run may have died holding this order's claim.
			OverrideHeldClaim: p.adopted[o.ID],
		}
		c.Applied, err = p.applier.ApplyResult(ctx, res, opts)
	}
	c.Err = err
	c.Took = time.Since(start)
	p.count(c)
	if p.observer != nil {
		p.observer.Checked(c)
	}
	if err != nil && PlatformErrorKindOf(err) == KindConfig {
		// The fault is ours, not the order's: release it due at once, so the run after the
		// fix does not wait for the lease to run out.
		if !p.run.DryRun {
			p.writeCheck(CheckRecord{OrderID: o.ID, Owner: owner, Now: p.settings.Now(), NextCheck: p.settings.Now()}, log)
		}
		return err
	}
	if err != nil {
		log.Warn().Err(err).Str("error_class", PlatformErrorKindOf(err).String()).Msg("check failed; due again after the minimum re-check delay")
	}
	if !p.run.DryRun && c.Applied.Outcome != OutcomeApplied {
		p.reschedule(o, c, owner, log)
	}
	return nil
}

// ask queries the platform and, for an expired order still open there, closes the trade at
// the platform and confirms with a second query. A close that loses to a payment is fine:
// the confirming query sees the payment and the order is repaired instead.
func (p *pass) ask(ctx context.Context, o Order, expired bool, log zerolog.Logger) (Result, bool, error) {
	client, ok := p.clients[AccountKey{Platform: o.Platform, MerchantID: o.MerchantID}]
	if !ok {
		// Takes are per account, so this is a bug, not a configuration gap.
		return Result{}, false, &PlatformError{Platform: o.Platform, Kind: KindPermanent,
			Message: fmt.Sprintf("no client for merchant account %s:%s", o.Platform, o.MerchantID)}
	}
	res, err := client.Query(ctx, o.OutTradeNo)
	if err != nil {
		return Result{}, false, err
	}
	if o.Status != StatusPending || res.State != StateOpen || !expired || !p.settings.CloseAtPlatform || p.run.DryRun {
		return res, false, nil
	}
	if err := client.Close(ctx, o.OutTradeNo); err != nil && PlatformErrorKindOf(err) != KindAlreadyPaid {
		return Result{}, false, fmt.Errorf("close expired trade at the platform: %w", err)
	}
	log.Info().Msg("expired trade closed at the platform")
	confirmed, err := client.Query(ctx, o.OutTradeNo)
	if err != nil {
		return Result{}, true, fmt.Errorf("confirm close at the platform: %w", err)
	}
	return confirmed, true, nil
}

func (p *pass) count(c Check) { p.counters.Add(c.Tally()) }

// reschedule writes when the order is due again and releases its lease. Answers back off
// (RECHECK_MIN doubled per consecutive check, capped at RECHECK_MAX); errors and held claims
// come back after RECHECK_MIN.
func (p *pass) reschedule(o Order, c Check, owner string, log zerolog.Logger) {
	now := p.settings.Now()
	next, backoff := p.nextCheck(now, o.CheckCount, c)
	p.writeCheck(CheckRecord{OrderID: o.ID, Owner: owner, Now: now, NextCheck: next, Backoff: backoff}, log)
}

// nextCheck is when an order or refund checked at now, after checks consecutive checks, is
// due again, and whether this check counts toward the backoff: an answer backs off, an error
// or a held claim comes back after RECHECK_MIN.
func (p *pass) nextCheck(now time.Time, checks int, c Check) (time.Time, bool) {
	backoff := c.Err == nil && c.Applied.Outcome != OutcomeClaimedElsewhere
	delay := p.settings.RecheckMin
	if backoff {
		delay = RecheckDelay(checks, p.settings.RecheckMin, p.settings.RecheckMax)
	}
	return now.Add(delay), backoff
}

// writeCheck releases the lease and records the next check. Written even during a drain:
// the lease must not outlive the check.
func (p *pass) writeCheck(rec CheckRecord, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.queue.Checked(ctx, rec); err != nil {
		log.Warn().Err(err).Msg("could not schedule the next check; the lease expires by itself")
	}
}

// RecheckDelay is the re-check backoff: min doubled per consecutive check, capped at max.
func RecheckDelay(checks int, min, max time.Duration) time.Duration {
	d := min
	for i := 0; i < checks && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

// watermark tracks which taken orders are finished, so a saved cursor never skips an order
// still in flight: the cursor is the last position before which everything is done.
type watermark struct {
	positions []Cursor
	finished  []bool
	base      int // ticket of positions[0]
	last      Cursor
	hasLast   bool
}

func (w *watermark) add(c Cursor) int {
	w.positions = append(w.positions, c)
	w.finished = append(w.finished, false)
	return w.base + len(w.positions) - 1
}

func (w *watermark) complete(ticket int) {
	w.finished[ticket-w.base] = true
	for len(w.finished) > 0 && w.finished[0] {
		w.last, w.hasLast = w.positions[0], true
		w.positions, w.finished = w.positions[1:], w.finished[1:]
		w.base++
	}
}

func (w *watermark) done() (Cursor, bool) { return w.last, w.hasLast }
