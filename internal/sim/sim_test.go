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
	"github.com/payrecon/payrecon/repo"
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

func repoStore(w *world) *repo.Store { return repo.NewStore(w.db.DB) }

// minSeeds is how many seeds a run must get through within its budget, or it fails: fewer
// means the simulation got too slow to mean anything.
const minSeeds = 100

func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

// TestSimulation drives SIM_SEEDS random schedules (default 1000, seeds SIM_FIRST onwards)
// through the real apply path, passes and backfills on PostgreSQL and Redis, with faults,
// and checks the invariants after each; it stops at SIM_BUDGET (default 4m) and reports how
// many ran, on SIM_WORKERS workers (default 4) each with its own database.
func TestSimulation(t *testing.T) {
	seeds := envInt("SIM_SEEDS", 1000)
	budget := 4 * time.Minute
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
	deadline := start.Add(budget)
	next := make(chan int64)
	go func() {
		defer close(next)
		for i := int64(0); i < seeds && time.Now().Before(deadline); i++ {
			next <- first + i
		}
	}()
	total := &sim.Faults{}
	var ran, cleanRounds atomic.Int64
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		w := newWorld(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range next {
				s := newSeedRun(w, seed)
				rounds, violations, err := s.run(context.Background())
				ran.Add(1)
				cleanRounds.Add(int64(rounds))
				total.Merge(s.faults)
				if err != nil {
					violations = append(violations, "seed could not run: "+err.Error())
					if seed == first || ran.Load() < 2 {
						// The harness itself is broken: one line says so, not a thousand.
						t.Errorf("seed %d could not run: %v", seed, err)
						return
					}
				}
				if len(violations) > 0 {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("seed %d: %d violations:\n  %s\n  replay: go test ./internal/sim -run Simulation -seed %d -v",
						seed, len(violations), joinMax(violations, 12), seed))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	summary := fmt.Sprintf("simulation: %d seeds (from %d) in %s on %d workers, %.2f clean rounds per seed; faults injected: %s; seeds violating invariants: %d",
		ran.Load(), first, took.Round(time.Millisecond), workers, float64(cleanRounds.Load())/float64(max(1, ran.Load())), total, len(failed))
	fmt.Println(summary)
	fmt.Printf("simulation: time in schedules %s, waiting for their passes %s, clean rounds and checks %s (summed over workers)\n",
		phaseTimes.schedule.Round(time.Millisecond), phaseTimes.drain.Round(time.Millisecond), phaseTimes.checks.Round(time.Millisecond))
	t.Log(summary)
	for _, f := range failed {
		t.Error(f)
	}
	if want := min(seeds, minSeeds); ran.Load() < want {
		t.Errorf("only %d seeds ran within SIM_BUDGET %s (want at least %d): the simulation got too slow", ran.Load(), budget, want)
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
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reset: %w", err)
	}
	if err := s.seedOrders(ctx); err != nil {
		return 0, nil, err
	}
	state := &faultState{}
	steps := 6 + s.rng.Intn(14)
	t0 := time.Now()
	for i := 0; i < steps; i++ {
		s.step(ctx, state)
	}
	t1 := time.Now()
	s.wg.Wait()
	t2 := time.Now()
	defer func() { phaseTimes.add(t1.Sub(t0), t2.Sub(t1), time.Since(t2)) }()
	// The faults stop. The clean phase's pool drops the idle sessions the schedule's kills
	// may have left dead.
	s.w.cleanPool.SetMaxIdleConns(0)
	s.w.cleanPool.SetMaxIdleConns(4)
	s.ali.SetFaults(0, 0)
	s.wx.SetFaults(0, 0)
	s.claims.SetDown(false)
	if state.stmtTimeout {
		s.w.statementTimeout(ctx, "")
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
		if len(s.converged(snap)) == 0 && len(s.pending) == 0 {
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
	if len(s.pending) > 0 {
		violations = append(violations, fmt.Sprintf("%d callbacks never acknowledged", len(s.pending)))
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

// clean is one round without faults: every queued callback delivered, then a backfill
// and a run pass in one process; and where a statement run stopped without finishing, the
// day's statement again, which takes it over as the next morning's would.
func (s *seedRun) clean(ctx context.Context) {
	for tries := 0; tries < 3 && len(s.pending) > 0; tries++ {
		s.deliver(ctx, len(s.pending))
	}
	r := s.runner(s.process(), 4)
	r.Pass(ctx, s.spec(reconcile.ModeBackfill)) //nolint:errcheck // judged by the invariants
	r.Pass(ctx, s.spec(reconcile.ModeOnce))     //nolint:errcheck
	var open int
	if s.w.db.GetContext(ctx, &open, `SELECT count(*) FROM reconcile_runs WHERE mode = 'statement' AND status = 'running'`) == nil && open > 0 {
		if st, spec, cleanup, err := s.statementRun(2, s.w.cleanPool); err == nil {
			st.Run(ctx, spec) //nolint:errcheck
			cleanup()
		}
	}
}
