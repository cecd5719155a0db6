package sim_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/internal/sim"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
)

var seedFlag = flag.Int64("seed", 0, "replay this one seed (also SIM_SEED)")

var zerologNop = zerolog.Nop()

// phaseTimes adds up where the seeds spend their time: the schedule, waiting for its
// passes, and the clean rounds with the checks.
var phaseTimes timeTally

type timeTally struct {
	mu                      sync.Mutex
	schedule, drain, checks time.Duration
}

func (p *timeTally) add(a, b, c time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.schedule += a
	p.drain += b
	p.checks += c
}

func repoStore(w *world) *postgres.Store { return postgres.NewStore(w.db.DB) }

// minSeeds is how many seeds a run under SIM_BUDGET must get through, or it fails: fewer
// means the simulation got too slow to mean anything.
const minSeeds = 100

// defaultSeeds is the seed count `make test` runs: a count, not a time budget, so a loaded
// machine makes the run slower, never shorter.
const defaultSeeds = 1000

func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

// TestSimulation drives SIM_SEEDS random schedules (default 1000, seeds SIM_FIRST onwards)
// through the real apply path, passes and backfills on PostgreSQL and Redis, with faults,
// and checks the invariants after each, on SIM_WORKERS workers (default 4) each with its own
// database. Every seed runs, however long it takes, unless SIM_BUDGET (a duration, for long
// campaigns: `make sim`) stops the run early; it then reports how many ran.
func TestSimulation(t *testing.T) {
	seeds := envInt("SIM_SEEDS", defaultSeeds)
	var budget time.Duration // none: the count decides
	if d, err := time.ParseDuration(os.Getenv("SIM_BUDGET")); err == nil && d > 0 {
		budget = d
	}
	// The seeds wait on PostgreSQL and Redis far more than they compute: four workers keep
	// two cores busy.
	workers := int(envInt("SIM_WORKERS", 4))
	first := envInt("SIM_FIRST", 1) // a campaign can start past the seeds make test runs
	one := *seedFlag
	if one == 0 {
		one = envInt("SIM_SEED", 0)
	}
	if one != 0 {
		first, seeds, workers = one, 1, 1
	}
	start := time.Now()
	next := make(chan int64)
	go func() {
		defer close(next)
		for i := int64(0); i < seeds && (budget == 0 || time.Since(start) < budget); i++ {
			next <- first + i
		}
	}()
	c := &campaign{total: &sim.Faults{}, seen: &sim.Faults{}, first: first}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		w := newWorld(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(t, w, next)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	fmt.Printf("simulation: time in schedules %s, waiting for their passes %s, clean rounds and checks %s (summed over workers)\n",
		phaseTimes.schedule.Round(time.Millisecond), phaseTimes.drain.Round(time.Millisecond), phaseTimes.checks.Round(time.Millisecond))
	ran := c.ran.Load()
	fmt.Printf("simulation: refunds as the seeds left them: %s\n", c.seen)
	// The last line says it all: how many seeds, how long, how many violated an invariant.
	summary := fmt.Sprintf("simulation: %d seeds in %s, %d violations, faults: %s(seeds %d-%d, %d workers, %.2f clean rounds per seed)",
		ran, took.Round(time.Second), len(c.failed), c.total, first, first+ran-1, workers,
		float64(c.cleanRounds.Load())/float64(max(1, ran)))
	fmt.Println(summary)
	t.Log(summary)
	for _, f := range c.failed {
		t.Error(f)
	}
	if budget == 0 && ran < seeds {
		t.Errorf("only %d of %d seeds ran", ran, seeds)
	}
	if want := min(seeds, minSeeds); budget > 0 && ran < want {
		t.Errorf("only %d seeds ran within SIM_BUDGET %s (want at least %d): the simulation got too slow", ran, budget, want)
	}
}

// campaign is what the workers of one TestSimulation add up.
type campaign struct {
	first            int64
	total            *sim.Faults
	seen             *sim.Faults // how the refunds ended (tallyRefunds)
	ran, cleanRounds atomic.Int64

	mu     sync.Mutex
	failed []string
}

// work runs seeds from next on one world until there are none left.
func (c *campaign) work(t *testing.T, w *world, next <-chan int64) {
	for seed := range next {
		s := newSeedRun(w, seed)
		rounds, violations, err := s.run(context.Background())
		c.ran.Add(1)
		c.cleanRounds.Add(int64(rounds))
		c.total.Merge(s.faults)
		c.seen.Merge(s.seen)
		if err != nil {
			violations = append(violations, "seed could not run: "+err.Error())
			if seed == c.first || c.ran.Load() < 2 {
				// The harness itself is broken: one line says so, not a thousand.
				t.Errorf("seed %d could not run: %v", seed, err)
				return
			}
		}
		c.mu.Lock()
		if len(violations) > 0 {
			c.failed = append(c.failed, fmt.Sprintf("seed %d: %d violations:\n  %s\n  replay: go test ./internal/sim -run Simulation -seed %d -v",
				seed, len(violations), joinMax(violations, 12), seed))
		}
		c.mu.Unlock()
	}
}

func joinMax(v []string, n int) string {
	out := ""
	for i, s := range v {
		if i == n {
			out += fmt.Sprintf("... and %d more", len(v)-n)
			break
		}
		if i > 0 {
			out += "\n  "
		}
		out += s
	}
	return out
}

// run plays one seed: the schedule with its faults, then the faults stop, the platform's
// callbacks are all delivered, clean passes run until the orders converge (five rounds at
// most), and the invariants are checked.
func (s *seedRun) run(ctx context.Context) (int, []string, error) {
	var err error
	for i := 0; i < 3; i++ { // a connection killed by the last seed's faults is retried
		if err = s.w.reset(ctx); err == nil {
			break
		}
		// Whatever the last seed left (a session still under its 1 ms timeout), gone.
		s.w.statementTimeout(ctx, "")
		s.w.freshSessions()
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reset: %w", err)
	}
	if err := s.seedOrders(ctx); err != nil {
		return 0, nil, err
	}
	state := &faultState{}
	steps := 8 + s.rng.Intn(16) // about 6-19 of the other kinds, beside the refund steps
	t0 := time.Now()
	for i := 0; i < steps; i++ {
		s.step(ctx, state)
	}
	t1 := time.Now()
	s.wg.Wait()
	t2 := time.Now()
	defer func() { phaseTimes.add(t1.Sub(t0), t2.Sub(t1), time.Since(t2)) }()
	// The faults stop. The clean phase's pool drops the idle sessions the schedule's kills
	// may have left dead; after a statement timeout every pool does. The platform settles
	// every refund that is not stuck.
	s.w.cleanPool.SetMaxIdleConns(0)
	s.w.cleanPool.SetMaxIdleConns(4)
	s.ali.SetFaults(0, 0)
	s.wx.SetFaults(0, 0)
	s.claims.SetDown(false)
	s.settleRefunds(0, true)
	if state.stmtTouched {
		s.w.statementTimeout(ctx, "")
		s.w.freshSessions()
	}
	snap, err := s.read(ctx)
	if err != nil {
		return 0, nil, err
	}
	violations := s.safety(snap)
	rounds := 0
	// Five rounds at most: a round can also fail for want of a server connection when the
	// machine's other tests hold them all.
	for ; rounds < 5; rounds++ {
		if rounds > 0 {
			time.Sleep(claimLease) // a claim left by a crashed holder runs out
		}
		s.clean(ctx)
		if snap, err = s.read(ctx); err != nil {
			return rounds, nil, err
		}
		if stuck, _ := s.unacknowledged(snap); len(s.converged(snap)) == 0 && len(stuck) == 0 {
			break
		}
	}
	violations = append(violations, s.safety(snap)...)
	violations = append(violations, s.converged(snap)...)
	violations = append(violations, s.durable(snap)...)
	violations = append(violations, s.claimsWithinLease(ctx)...)
	if len(violations) == 0 {
		// The converged world, reconciled against its day's bills: still safe, and a second
		// run of the same day changes nothing.
		violations = append(violations, s.rerunChangesNothing(ctx)...)
		if snap, err = s.read(ctx); err != nil {
			return rounds + 1, nil, err
		}
		violations = append(violations, s.safety(snap)...)
		violations = append(violations, s.converged(snap)...)
	}
	if len(violations) > 0 && testing.Verbose() {
		violations = append(violations, s.runsReport(ctx))
	}
	stuck, given := s.unacknowledged(snap)
	for i := 0; i < given; i++ {
		s.seen.Add("alipay_total_never_split")
	}
	s.tallyRefunds(snap)
	if len(stuck) > 0 {
		violations = append(violations, fmt.Sprintf("%d callbacks never acknowledged (first: %s)", len(stuck), describe(stuck[0])))
	}
	return rounds + 1, violations, nil
}

// runsReport lists the seed's runs, to read a failing seed by.
func (s *seedRun) runsReport(ctx context.Context) string {
	var rows []struct {
		ID     int64  `db:"id"`
		Mode   string `db:"mode"`
		Status string `db:"status"`
		Error  string `db:"error"`
		Lock   string `db:"lock"`
		PID    int64  `db:"pid"`
	}
	s.w.db.SelectContext(ctx, &rows, `SELECT id, mode, status, COALESCE(error, '') AS error, COALESCE(lock_name, '') AS lock,
		COALESCE(lock_pid, 0) AS pid FROM reconcile_runs ORDER BY id`) //nolint:errcheck
	out := "runs:"
	for _, r := range rows {
		out += fmt.Sprintf("\n    %d %s %s lock=%s pid=%d %s", r.ID, r.Mode, r.Status, r.Lock, r.PID, r.Error)
	}
	return out
}

// clean is one round without faults: every queued callback delivered (four at a time, a
// payment's or refund's notifications together), then a backfill
// and a run pass in one process, and the callbacks still queued once more (an Alipay running
// total splits onto its refund once the pass landed the trade's earlier ones); and where a
// statement run stopped without finishing, the day's statement again, which takes it over
// as the next morning's would.
func (s *seedRun) clean(ctx context.Context) {
	s.lastClean = s.now()
	for tries := 0; tries < 3 && len(s.pending) > 0; tries++ {
		for left := len(s.pending); left > 0; left -= 4 {
			s.deliverAtOnce(ctx, 4)
		}
	}
	r := s.runner(s.process(), 4)
	r.Pass(ctx, s.spec(reconcile.ModeBackfill)) //nolint:errcheck // judged by the invariants
	r.Pass(ctx, s.spec(reconcile.ModeOnce))     //nolint:errcheck
	s.deliver(ctx, len(s.pending))
	var open int
	if s.w.db.GetContext(ctx, &open, `SELECT count(*) FROM reconcile_runs WHERE mode = 'statement' AND status = 'running'`) == nil && open > 0 {
		if st, spec, cleanup, err := s.statementRun(2, s.w.cleanPool); err == nil {
			st.Run(ctx, spec) //nolint:errcheck
			cleanup()
		}
	}
}

// describe names a callback for a violation message.
func describe(cb callback) string {
	if r := cb.refund; r != nil {
		return fmt.Sprintf("refund %s of %s, %s, amount %d, running total %d", r.OutRefundNo, cb.otn, r.State, r.AmountMinor, r.RefundedTotalMinor)
	}
	return fmt.Sprintf("payment %s of %s, amount %d", cb.trade, cb.otn, cb.amount)
}
