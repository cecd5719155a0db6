package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/schollz/progressbar/v3"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// PassOutput says where a pass prints: Out gets a dry run's lines and the run's summary;
// Progress, when not nil, a backfill's progress bar (give it a terminal only).
type PassOutput struct {
	Out      io.Writer
	Progress io.Writer
}

// RunPass runs one pass with the app's observers (the metrics, the overhead histogram, a dry
// run's printer, a backfill's progress bar), then logs the process's figures, records the
// run's metrics and the backlog, prints its summary and marks a regular pass's success (a
// `run` pushes it; `serve --schedule` serves it). `run`, `backfill` and every scheduled pass
// go through it. The error is the pass's own, for the command to map to an exit code.
func (a *App) RunPass(ctx context.Context, spec reconcile.PassSpec, out PassOutput) (reconcile.Run, error) {
	overhead := &overheadHistogram{}
	obs := observers{a.metrics, overhead}
	if spec.DryRun {
		obs = append(obs, render.NewDryRunPrinter(out.Out))
	}
	if a.procs != nil {
		obs = append(obs, a.procs)
	}
	var bar *progressbar.ProgressBar
	if spec.Mode == reconcile.ModeBackfill && out.Progress != nil {
		bar = newProgress(ctx, a, spec, out.Progress)
		obs = append(obs, progressObserver{bar})
	}
	run, err := a.Runner(obs).Pass(ctx, spec)
	if bar != nil {
		bar.Finish() //nolint:errcheck // cosmetic
		fmt.Fprintln(out.Progress)
	}
	if errors.Is(err, reconcile.ErrLockHeld) {
		return run, err
	}
	if run.ID != 0 {
		st := ReadProcessStats()
		a.log.Info().Int64("run_id", run.ID).Int64("peak_rss_kib", st.PeakRSSKiB).Float64("cpu_seconds", st.CPU.Seconds()).
			Int64("context_switches", st.ContextSwitches).
			Int64("overhead_p50_us", overhead.quantile(0.5).Microseconds()).Int64("overhead_p99_us", overhead.quantile(0.99).Microseconds()).
			Int64("scanned", run.Counts.Scanned).Msg("process stats")
		a.metrics.RecordRun(run)
		a.observeBacklog(ctx)
		render.RunSummary(out.Out, run)
	}
	regular := spec.Mode == reconcile.ModeOnce || spec.Mode == reconcile.ModeScheduled
	if regular && err == nil {
		a.metrics.MarkSuccess()
	}
	if spec.Mode == reconcile.ModeOnce {
		a.pushMetrics(run, err == nil)
	}
	return run, err
}

// observeBacklog refreshes the oldest-pending-order gauge.
func (a *App) observeBacklog(ctx context.Context) {
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
func (a *App) pushMetrics(run reconcile.Run, ok bool) {
	if a.cfg.PushgatewayURL == "" {
		return
	}
	// The shard's one spelling, "i/n", made a URL path segment: "i-of-n".
	group := strings.Replace(a.cfg.Shard.String(), "/", "-of-", 1)
	p := push.New(a.cfg.PushgatewayURL, "payrecon_reconciler").Grouping("shard", group).Gatherer(a.metrics.Registry())
	if ok {
		p = p.Collector(a.metrics.LastSuccess()) // marked by RunPass
	}
	if err := p.Add(); err != nil {
		a.log.Warn().Err(err).Msg("could not push metrics to the Pushgateway")
	}
}

func newProgress(ctx context.Context, a *App, spec reconcile.PassSpec, w io.Writer) *progressbar.ProgressBar {
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
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("checks"),
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

// Due tells the observers that want to know (reconcile.DueObserver).
func (o observers) Due(accounts []reconcile.DueAccount) {
	for _, x := range o {
		if d, ok := x.(reconcile.DueObserver); ok {
			d.Due(accounts)
		}
	}
}
