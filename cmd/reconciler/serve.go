package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/worker"
)

// serveGroups are every setting but the review console's and the reviewers' lists: serve
// holds the worker's credential and never serves /review/ (that is `reconciler console`).
const serveGroups = config.GroupAll &^ (config.GroupConsole | config.GroupPeople)

// cmdServe runs the callback endpoints, health and metrics, and optionally scheduled passes.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var schedule string
	var withRelay bool
	cfg, _, err := parseWithLoader("serve", args, serveGroups, stderr, func(fs *flag.FlagSet, l *config.Loader) {
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
	a, err := worker.New(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.Close()

	public, err := worker.Listen(cfg.Listen, "RECONCILER_LISTEN", a.CallbackMux())
	if err != nil {
		return err
	}
	admin, err := worker.Listen(cfg.AdminListen, "RECONCILER_ADMIN_LISTEN", a.AdminMux())
	if err != nil {
		public.Close()
		return err
	}
	closeListeners := func() { public.Close(); admin.Close() }

	waitRelay := func() {}
	if withRelay {
		if waitRelay, err = a.StartRelay(ctx); err != nil {
			closeListeners()
			return err
		}
	}
	var cr *cron.Cron
	if sched != nil {
		cr = a.Scheduler(ctx, sched)
		cr.Start()
	}
	log.Info().Str("listen", public.Addr().String()).Str("admin_listen", admin.Addr().String()).
		Str("schedule", schedule).Str("config", cfg.Redacted()).Msg("serving")
	fmt.Fprintf(stdout, "listening on %s, admin on %s\n", public.Addr(), admin.Addr())

	if err := worker.Serve(ctx, log, cfg.DrainTimeout, cr, public, admin); err != nil {
		return err
	}
	waitRelay()
	log.Info().Msg("stopped")
	return nil
}

// parseSchedule reads --schedule (in TIMEZONE unless the spec names its zone); a spec that
// does not parse is a usage error (exit 2), never a panic.
func parseSchedule(spec string, loc *time.Location) (cron.Schedule, error) {
	sched, err := worker.ParseSchedule(spec, loc)
	if err != nil {
		return nil, usagef("serve: --schedule %q: %v", spec, err)
	}
	return sched, nil
}
