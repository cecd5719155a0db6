package main

import (
	"context"
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
	"github.com/payrecon/payrecon/worker"
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
	a, err := worker.New(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.Close()
	review, err := a.ReviewConsole(ctx)
	if err != nil {
		return err
	}

	public, err := listen(cfg.Listen, "RECONCILER_LISTEN", a.CallbackMux())
	if err != nil {
		return err
	}
	// No review console yet: it plugs in here, on the admin port only.
	admin, err := listen(cfg.AdminListen, "RECONCILER_ADMIN_LISTEN", a.AdminMux(review))
	if err != nil {
		public.ln.Close()
		return err
	}
	closeListeners := func() { public.ln.Close(); admin.ln.Close() }

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
	drain(log, cfg.DrainTimeout, []servedListener{public, admin}, cr)
	waitRelay()
	log.Info().Msg("stopped")
	return nil
}

// drain stops taking requests and passes and lets those in flight finish, within
// RECONCILER_DRAIN_TIMEOUT.
func drain(log zerolog.Logger, timeout time.Duration, servers []servedListener, cr *cron.Cron) {
	log.Info().Msg("shutting down: finishing in-flight callbacks and passes")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range servers {
		if err := s.srv.Shutdown(ctx); err != nil {
			log.Warn().Err(err).Msg("http shutdown")
		}
	}
	if cr != nil {
		select {
		case <-cr.Stop().Done():
		case <-ctx.Done():
			log.Warn().Msg("a scheduled pass did not drain in time; its leases expire by themselves")
		}
	}
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

// parseSchedule reads --schedule (in TIMEZONE unless the spec names its zone); a spec that
// does not parse is a usage error (exit 2), never a panic.
func parseSchedule(spec string, loc *time.Location) (cron.Schedule, error) {
	sched, err := worker.ParseSchedule(spec, loc)
	if err != nil {
		return nil, usagef("serve: --schedule %q: %v", spec, err)
	}
	return sched, nil
}
