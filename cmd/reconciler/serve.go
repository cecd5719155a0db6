package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// maxCallbackBody bounds what a callback may send; real ones are a few KiB.
const maxCallbackBody = 64 << 10

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
			a.metrics.recordRun(run)
		}
		a.observeBacklog(ctx)
		switch {
		case err == nil:
			a.metrics.lastSuccess.SetToCurrentTime()
		case errors.Is(err, reconcile.ErrLockHeld):
			a.log.Info().Msg("scheduled pass skipped: another pass holds this shard's lock")
		default:
			a.log.Error().Err(err).Int64("run_id", run.ID).Msg("scheduled pass failed")
		}
	}))
	a.metrics.reg.MustRegister(a.metrics.lastSuccess)
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

// maxHeaderBytes bounds a request's headers; a callback's are well under 2 KiB.
const maxHeaderBytes = 16 << 10

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
	return servedListener{ln: ln, srv: &http.Server{Handler: h, MaxHeaderBytes: maxHeaderBytes,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 15 * time.Second}}, nil
}

// handler is the public port: what the platforms reach: their callbacks and the probes, nothing else.
func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notify/alipay", a.notifyAlipay)
	mux.HandleFunc("POST /notify/alipay/{merchant_id}", a.notifyAlipay)
	mux.HandleFunc("POST /notify/wechatpay", a.notifyWechatPay)
	mux.HandleFunc("POST /notify/wechatpay/{merchant_id}", a.notifyWechatPay)
	a.probes(mux)
	return mux
}

// adminHandler is for the cluster only (monitoring): metrics and the probes.
func (a *app) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	a.probes(mux)
	return mux
}

func (a *app) probes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }) //nolint:errcheck
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.store.DB().PingContext(ctx); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n") //nolint:errcheck
	})
}

// callbackDeadline keeps every answer well inside the platforms' 5 s.
const callbackDeadline = 4 * time.Second

func (a *app) readCallback(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCallbackBody))
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %v", platformclient.ErrMalformed, err)
	}
	return body, nil
}

// settle applies a verified callback and tells whether to acknowledge it.
func (a *app) settle(ctx context.Context, res reconcile.Result) (reconcile.Applied, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callbackDeadline)
	defer cancel()
	return a.applier.ApplyCallback(ctx, res, a.cfg.NotifyWait)
}

func (a *app) notifyAlipay(w http.ResponseWriter, r *http.Request) {
	reply := func(ok bool, result string) {
		a.metrics.callbacks.WithLabelValues("alipay", result).Inc()
		// Alipay stops retrying only on a body of exactly "success".
		if ok {
			io.WriteString(w, "success") //nolint:errcheck
			return
		}
		io.WriteString(w, "fail") //nolint:errcheck
	}
	if len(a.alipay) == 0 {
		reply(false, "refused_not_configured")
		return
	}
	body, err := a.readCallback(w, r)
	var res reconcile.Result
	if err == nil {
		var read alipayNotifyReader
		if read, err = a.alipayAccountFor(r.PathValue("merchant_id"), body); err == nil {
			res, err = read(body)
		}
	}
	if err != nil {
		a.refused(reconcile.Alipay, err, r, body)
		reply(false, refusalReason(err))
		return
	}
	applied, ack, err := a.settle(r.Context(), res)
	a.logCallback(res, applied, ack, err)
	reply(ack, settledReason(ack, err))
}

func (a *app) notifyWechatPay(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, result, msg string) {
		a.metrics.callbacks.WithLabelValues("wechatpay", result).Inc()
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"code": "FAIL", "message": msg}) //nolint:errcheck
	}
	if len(a.wechat) == 0 {
		reply(http.StatusNotFound, "refused_not_configured", "wechat pay is not configured here")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callbackDeadline)
	defer cancel()
	body, err := a.readCallback(w, r)
	var res reconcile.Result
	if err == nil {
		var c wechatNotifyReader
		if c, err = a.wechatAccountFor(ctx, r.PathValue("merchant_id"), r.Header.Get(wechatpay.HeaderSerial)); err == nil {
			res, err = c.ParseNotifyContext(ctx, r.Header, body)
		}
	}
	if err != nil {
		a.refused(reconcile.WechatPay, err, r, body)
		switch {
		case errors.Is(err, platformclient.ErrBadSignature):
			reply(http.StatusUnauthorized, "refused_signature", "signature verification failed")
		case errors.Is(err, platformclient.ErrMalformed):
			reply(http.StatusBadRequest, "refused_malformed", "malformed notification")
		default:
			// Not the notification's fault (certificates still downloading): retry later.
			reply(http.StatusInternalServerError, "refused_error", "temporarily unable to verify; retry")
		}
		return
	}
	applied, ack, err := a.settle(ctx, res)
	a.logCallback(res, applied, ack, err)
	if ack {
		reply(http.StatusNoContent, "acked", "")
		return
	}
	reply(http.StatusInternalServerError, settledReason(ack, err), "temporarily unable to process; retry")
}

// errNoAccount refuses a callback no configured account can read, like a bad signature: an
// unknown sender is not to be trusted.
func errNoAccount(p reconcile.Platform, msg string) error {
	return platformclient.BadSignature(p, "callback: "+msg)
}

// alipayAccountFor finds the app a notification is for: the one its URL names, else the
// notification's own app_id (which the signature then covers).
func (a *app) alipayAccountFor(pathMerchant string, body []byte) (alipayNotifyReader, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, platformclient.Malformed(reconcile.Alipay, "callback body is not a form")
	}
	appID := form.Get("app_id")
	if pathMerchant != "" && appID != pathMerchant {
		return nil, errNoAccount(reconcile.Alipay, "app_id does not match the notify URL's account")
	}
	if c, ok := a.alipay[appID]; ok {
		return c, nil
	}
	return nil, errNoAccount(reconcile.Alipay, "no configured app has the notification's app_id")
}

// wechatAccountFor finds the merchant a callback is for: the one its URL names, else the one
// whose public key or platform certificate has the serial that signed it (then that
// merchant's API v3 key decrypts it).
func (a *app) wechatAccountFor(ctx context.Context, pathMerchant, serial string) (wechatNotifyReader, error) {
	if pathMerchant != "" {
		for _, c := range a.wechat {
			if c.MerchantID() == pathMerchant {
				return c, nil
			}
		}
		return nil, errNoAccount(reconcile.WechatPay, "no configured merchant has the notify URL's mchid")
	}
	// First what every merchant already holds; only then may a merchant download its
	// platform certificates (a rotated certificate), so one callback never makes every
	// merchant download.
	for _, c := range a.wechat {
		if c.HoldsSerial(serial) {
			return c, nil
		}
	}
	for _, c := range a.wechat {
		if c.KnowsSerial(ctx, serial) {
			return c, nil
		}
	}
	return nil, errNoAccount(reconcile.WechatPay, "no configured merchant knows the signing key's serial")
}

func refusalReason(err error) string {
	if errors.Is(err, platformclient.ErrBadSignature) {
		return "refused_signature"
	}
	return "refused_malformed"
}

func settledReason(ack bool, err error) string {
	switch {
	case ack:
		return "acked"
	case err != nil:
		return "refused_error"
	}
	return "refused_busy"
}

// refused logs a callback we would not read: a bad signature is a security event. Anyone
// can send junk, so under a flood the lines are sampled (payrecon_callbacks_total still
// counts every refusal) and what the sender chose is clipped and escaped.
func (a *app) refused(p reconcile.Platform, err error, r *http.Request, body []byte) {
	if !a.refusals.allow() {
		return
	}
	ev := a.log.Warn()
	if errors.Is(err, platformclient.ErrBadSignature) {
		ev = a.log.Error().Str("event", "bad_signature")
	}
	ev = ev.Str("platform", string(p)).Str("raw_digest", platformclient.Digest(body)).
		Str("request_id", clip(r.Header.Get("Request-Id"))).Str("error", clip(err.Error()))
	if p == reconcile.WechatPay {
		ev = ev.Str("serial", clip(r.Header.Get(wechatpay.HeaderSerial)))
	}
	if n := a.refusals.suppressed.Swap(0); n > 0 {
		ev = ev.Int64("suppressed_since_last", n)
	}
	ev.Msg("callback refused")
}

func (a *app) logCallback(res reconcile.Result, applied reconcile.Applied, ack bool, err error) {
	ev := a.log.Info()
	if err != nil || !ack {
		ev = a.log.Warn().Err(err)
	}
	ev.Str("platform", string(res.Platform)).Str("out_trade_no", res.OutTradeNo).Str("platform_trade_no", res.PlatformTradeNo).
		Str("outcome", string(applied.Outcome)).Str("mismatch", string(applied.Mismatch)).Bool("acked", ack).Msg("callback")
}
