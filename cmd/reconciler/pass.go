package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/schollz/progressbar/v3"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// workerGroups are the settings of the commands that run passes.
const workerGroups = config.GroupDatabase | config.GroupLog | config.GroupApply | config.GroupWorker |
	config.GroupPlatforms | config.GroupTime

// cmdRun is the CronJob entry point: one pass over due PENDING orders, then exit.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := parse("run", args, workerGroups, stderr, nil)
	if err != nil {
		return err
	}
	return runPass(ctx, cfg, reconcile.PassSpec{Mode: reconcile.ModeOnce, Shard: shardOf(cfg), DryRun: cfg.DryRun}, stdout, stderr)
}

// cmdBackfill re-checks every order created in [from, to) whatever its local status.
func cmdBackfill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var fromS, toS string
	var resume int64
	cfg, _, err := parse("backfill", args, workerGroups, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&fromS, "from", "", "window start, inclusive: a date (midnight in RECONCILER_TIMEZONE) or an RFC 3339 time")
		fs.StringVar(&toS, "to", "", "window end, exclusive: a date or an RFC 3339 time; may lie in the future")
		fs.Int64Var(&resume, "resume", 0, "continue the interrupted backfill run with this id from its saved cursor")
	})
	if err != nil {
		return err
	}
	spec := reconcile.PassSpec{Mode: reconcile.ModeBackfill, Shard: shardOf(cfg), DryRun: cfg.DryRun, Resume: resume}
	if resume == 0 {
		if fromS == "" || toS == "" {
			return usagef("backfill: --from and --to are required (or --resume RUN_ID)")
		}
		if spec.From, err = parseWhen("from", fromS, cfg.Timezone); err != nil {
			return err
		}
		if spec.To, err = parseWhen("to", toS, cfg.Timezone); err != nil {
			return err
		}
		if !spec.From.Before(spec.To) {
			return usagef("backfill: --from (%s) must be before --to (%s)", fromS, toS)
		}
	}
	return runPass(ctx, cfg, spec, stdout, stderr)
}

// runPass runs one pass and maps its end to the exit-code contract.
func runPass(ctx context.Context, cfg config.Config, spec reconcile.PassSpec, stdout, stderr io.Writer) error {
	log := newLogger(cfg, stderr).With().Str("shard", spec.Shard.String()).Logger()
	a, err := newApp(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.Close()

	overhead := &overheadHistogram{}
	obs := observers{a.metrics, overhead}
	if spec.DryRun {
		obs = append(obs, render.NewDryRunPrinter(stdout))
	}
	var bar *progressbar.ProgressBar
	if spec.Mode == reconcile.ModeBackfill && isTerminal(stderr) {
		bar = newProgress(ctx, a, spec, stderr)
		obs = append(obs, progressObserver{bar})
	}
	run, err := a.runner(obs).Pass(ctx, spec)
	if bar != nil {
		bar.Finish() //nolint:errcheck // cosmetic
		fmt.Fprintln(stderr)
	}
	if errors.Is(err, reconcile.ErrLockHeld) {
		log.Info().Msg("another pass holds this shard's lock; nothing to do")
		fmt.Fprintf(stdout, "another pass holds the lock for shard %s; exiting\n", spec.Shard)
		return nil
	}
	if run.ID != 0 {
		rss, cpu := processStats()
		log.Info().Int64("run_id", run.ID).Int64("peak_rss_kib", rss).Float64("cpu_seconds", cpu.Seconds()).
			Int64("overhead_p50_us", overhead.quantile(0.5).Microseconds()).Int64("overhead_p99_us", overhead.quantile(0.99).Microseconds()).
			Int64("scanned", run.Counts.Scanned).Msg("process stats")
		a.metrics.RecordRun(run)
		a.observeBacklog(ctx)
		render.RunSummary(stdout, run)
	}
	if spec.Mode == reconcile.ModeOnce {
		a.pushMetrics(run, err == nil)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reconcile.ErrInterrupted):
		hint := "the next run carries on"
		if spec.Mode == reconcile.ModeBackfill {
			hint = fmt.Sprintf("continue with: reconciler backfill --resume %d", run.ID)
		}
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted after draining (run %d); %s", run.ID, hint)}
	case errors.Is(err, reconcile.ErrCannotResume):
		return &usageError{msg: "backfill: " + err.Error()}
	case reconcile.PlatformErrorKindOf(err) == reconcile.KindConfig:
		// Our credentials or account settings are wrong: no retry can help.
		return &usageError{msg: fmt.Sprintf("pass stopped: %v", err)}
	}
	return err
}

// observeBacklog refreshes the oldest-pending-order gauge.
func (a *app) observeBacklog(ctx context.Context) {
	age, err := a.store.OldestPendingAge(ctx, time.Now(), a.cfg.Lookback)
	if err != nil {
		a.log.Warn().Err(err).Msg("could not measure the pending backlog")
		return
	}
	a.metrics.SetOldestPendingAge(age)
}

// pushMetrics push-adds the run's metrics to the Pushgateway, grouped by job and shard. The
// last-success time goes along only when the pass succeeded, so an alert on its age fires
// when passes keep failing.
func (a *app) pushMetrics(run reconcile.Run, ok bool) {
	if a.cfg.PushgatewayURL == "" {
		return
	}
	p := push.New(a.cfg.PushgatewayURL, "payrecon_reconciler").Grouping("shard", fmt.Sprintf("%d-of-%d", a.cfg.Shard.Index, a.cfg.Shard.Count)).Gatherer(a.metrics.Registry())
	if ok {
		a.metrics.MarkSuccess()
		p = p.Collector(a.metrics.LastSuccess())
	}
	if err := p.Add(); err != nil {
		a.log.Warn().Err(err).Msg("could not push metrics to the Pushgateway")
	}
}

func newProgress(ctx context.Context, a *app, spec reconcile.PassSpec, w io.Writer) *progressbar.ProgressBar {
	from, to, after := spec.From, spec.To, reconcile.Cursor{}
	if spec.Resume != 0 {
		if run, err := a.store.Runs().LoadRun(ctx, spec.Resume); err == nil {
			from, to, after = run.WindowFrom, run.WindowTo, run.Cursor.Min() // an upper bound: accounts resume apart
		}
	}
	total, err := a.store.CountWindow(ctx, from, to, spec.Shard, after)
	if err != nil {
		total = -1
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("backfill"),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("orders"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetPredictTime(true))
}

type progressObserver struct{ bar *progressbar.ProgressBar }

func (p progressObserver) Checked(reconcile.Check) { p.bar.Add(1) } //nolint:errcheck // cosmetic

// observers fans one check out to several observers.
type observers []reconcile.Observer

func (o observers) Checked(c reconcile.Check) {
	for _, x := range o {
		if x != nil {
			x.Checked(c)
		}
	}
}
