package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/reconcile"
)

// cmdServe runs the callback endpoints, health and metrics, and optionally scheduled passes.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var schedule string
	var withRelay bool
	cfg, _, err := parseWithLoader("serve", args, config.GroupAll, stderr, func(fs *flag.FlagSet, l *config.Loader) {
		fs.StringVar(&schedule, "schedule", "", `run passes on this cron spec (robfig/cron, e.g. "*/5 * * * *", "CRON_TZ=Asia/Shanghai 0 9 * * *" or "@every 5m"; times in TIMEZONE unless CRON_TZ= says otherwise); passes never overlap`)
		fs.BoolVar(&withRelay, "relay", false, "also relay the fulfilment outbox to NATS JetStream (RECONCILER_RELAY_URL), as relay --follow does")
		// Only verifying callbacks needs no merchant private key; passes sign requests.
		l.VerifyOnly(func() bool { return schedule == "" })
	})
	if err != nil {
		return err
	}
	// A spec that does not parse is a usage error before anything connects.
	var sched cron.Schedule
	if schedule != "" {
		if sched, err = parseSchedule(schedule, cfg.Timezone); err != nil {
			return err
		}
	}
	log := newLogger(cfg, stderr)
	a, err := newApp(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.Close()

	public, err := listen(cfg.Listen, "RECONCILER_LISTEN", a.handler())
	if err != nil {
		return err
	}
	admin, err := listen(cfg.AdminListen, "RECONCILER_ADMIN_LISTEN", a.adminHandler())
	if err != nil {
		public.ln.Close()
		return err
	}
	closeListeners := func() { public.ln.Close(); admin.ln.Close() }

	waitRelay := func() {}
	if withRelay {
		if waitRelay, err = a.startServeRelay(ctx); err != nil {
			closeListeners()
			return err
		}
	}
	var cr *cron.Cron
	if sched != nil {
		cr = a.scheduler(ctx, sched)
		cr.Start()
	}
	log.Info().Str("listen", public.ln.Addr().String()).Str("admin_listen", admin.ln.Addr().String()).
		Str("schedule", schedule).Str("config", cfg.Redacted()).Msg("serving")
	fmt.Fprintf(stdout, "listening on %s, admin on %s\n", public.ln.Addr(), admin.ln.Addr())

	errc := make(chan error, 2)
	for _, s := range []servedListener{public, admin} {
		go func() { errc <- s.srv.Serve(s.ln) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	a.drain([]servedListener{public, admin}, cr)
	waitRelay()
	log.Info().Msg("stopped")
	return nil
}

// drain stops taking requests and passes and lets those in flight finish, within
// RECONCILER_DRAIN_TIMEOUT.
func (a *app) drain(servers []servedListener, cr *cron.Cron) {
	a.log.Info().Msg("shutting down: finishing in-flight callbacks and passes")
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.DrainTimeout)
	defer cancel()
	for _, s := range servers {
		if err := s.srv.Shutdown(ctx); err != nil {
			a.log.Warn().Err(err).Msg("http shutdown")
		}
	}
	if cr != nil {
		select {
		case <-cr.Stop().Done():
		case <-ctx.Done():
			a.log.Warn().Msg("a scheduled pass did not drain in time; its leases expire by themselves")
		}
	}
}

// scheduler runs passes on a schedule. SkipIfStillRunning keeps passes from overlapping,
// Recover keeps a panicking pass from taking the server down. Passes run on ctx, so SIGTERM
// drains a running pass like `run` does.
func (a *app) scheduler(ctx context.Context, sched cron.Schedule) *cron.Cron {
	logger := cronLogger{a.log}
	c := cron.New(cron.WithLocation(a.cfg.Timezone), cron.WithLogger(logger),
		cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)))
	runner := a.runner(a.metrics)
	c.Schedule(sched, cron.FuncJob(func() {
		run, err := runner.Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeScheduled, Shard: shardOf(a.cfg), DryRun: a.cfg.DryRun})
		if run.ID != 0 {
			a.metrics.RecordRun(run)
		}
		a.observeBacklog(ctx)
		switch {
		case err == nil:
			a.metrics.MarkSuccess()
		case errors.Is(err, reconcile.ErrLockHeld):
			a.log.Info().Msg("scheduled pass skipped: another pass holds this shard's lock")
		default:
			a.log.Error().Err(err).Int64("run_id", run.ID).Msg("scheduled pass failed")
		}
	}))
	a.metrics.ServeLastSuccess()
	return c
}

// scheduleParser reads five-field specs, descriptors (@every 5m, @daily) and a CRON_TZ= (or
// TZ=) prefix naming the zone of that spec.
var scheduleParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSchedule reads a --schedule spec whose times are in loc unless the spec names its own
// zone. A spec that does not parse is a usage error (exit 2): robfig/cron panics on some
// (a bare "TZ=UTC"), so those are caught here too.
func parseSchedule(spec string, loc *time.Location) (sched cron.Schedule, err error) {
	fail := func(reason any) error { return usagef("serve: --schedule %q: %v", spec, reason) }
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fail("not a schedule")
		}
	}()
	sched, err = scheduleParser.Parse(spec)
	if err != nil {
		return nil, fail(err)
	}
	// Without a zone of its own a spec would follow the process's local zone; dates in
	// payrecon are read in TIMEZONE, so its schedules are too.
	if s, ok := sched.(*cron.SpecSchedule); ok && s.Location == time.Local {
		s.Location = loc
	}
	return sched, nil
}

// cronLogger adapts zerolog to robfig/cron's logger.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) {
	l.log.Debug().Fields(kv).Msg("cron: " + msg)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg("cron: " + msg)
}

// servedListener is one of serve's ports.
type servedListener struct {
	ln  net.Listener
	srv *http.Server
}

func listen(addr, setting string, h http.Handler) (servedListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return servedListener{}, &config.Error{Setting: setting, Msg: err.Error()}
	}
	return servedListener{ln: ln, srv: httpapi.NewServer(h)}, nil
}

// handler is the public port: the platforms' callbacks and the probes, nothing else.
func (a *app) handler() http.Handler {
	return httpapi.NewCallbackMux(httpapi.Callbacks{Settler: a.applier, NotifyWait: a.cfg.NotifyWait,
		Alipay: a.alipay, Wechat: a.wechat, Count: a.metrics.Callback, Pinger: a.store.DB(), Log: a.log})
}

// adminHandler is for the cluster only (monitoring): metrics and the probes.
func (a *app) adminHandler() http.Handler {
	return httpapi.NewAdminMux(a.metrics.Registry(), a.store.DB(), nil)
}
