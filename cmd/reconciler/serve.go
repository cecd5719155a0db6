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
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// maxCallbackBody bounds what a callback may send; real ones are a few KiB.
const maxCallbackBody = 64 << 10

// cmdServe runs the callback endpoints, health and metrics, and optionally scheduled passes.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var schedule string
	var withRelay bool
	cfg, _, err := parse("serve", args, config.GroupAll, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&schedule, "schedule", "", `run passes on this cron spec (robfig/cron, e.g. "*/5 * * * *" or "@every 5m"); passes never overlap`)
		fs.BoolVar(&withRelay, "relay", false, "also relay the fulfilment outbox to NATS JetStream (RECONCILER_RELAY_URL), as relay --follow does")
	})
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	a, err := newApp(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.Close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return &config.Error{Setting: "RECONCILER_LISTEN", Msg: err.Error()}
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 15 * time.Second}

	waitRelay := func() {}
	if withRelay {
		if waitRelay, err = a.startServeRelay(ctx); err != nil {
			ln.Close()
			return err
		}
	}
	var sched *cron.Cron
	if schedule != "" {
		sched, err = a.scheduler(ctx, schedule)
		if err != nil {
			ln.Close()
			return err
		}
		sched.Start()
	}
	log.Info().Str("listen", ln.Addr().String()).Str("schedule", schedule).Str("config", cfg.Redacted()).Msg("serving")
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down: finishing in-flight callbacks and passes")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("http shutdown")
	}
	if sched != nil {
		select {
		case <-sched.Stop().Done():
		case <-sctx.Done():
			log.Warn().Msg("a scheduled pass did not drain in time; its leases expire by themselves")
		}
	}
	waitRelay()
	log.Info().Msg("stopped")
	return nil
}

// scheduler runs passes on a cron spec. SkipIfStillRunning keeps passes from overlapping,
// Recover keeps a panicking pass from taking the server down. Passes run on ctx, so SIGTERM
// drains a running pass like `run` does.
func (a *app) scheduler(ctx context.Context, spec string) (*cron.Cron, error) {
	logger := cronLogger{a.log}
	c := cron.New(cron.WithLogger(logger), cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)))
	runner := a.runner(a.metrics)
	_, err := c.AddFunc(spec, func() {
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
	})
	if err != nil {
		return nil, usagef("serve: --schedule %q: %v", spec, err)
	}
	a.metrics.reg.MustRegister(a.metrics.lastSuccess)
	return c, nil
}

// cronLogger adapts zerolog to robfig/cron's logger.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) {
	l.log.Debug().Fields(kv).Msg("cron: " + msg)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg("cron: " + msg)
}

// handler is serve's HTTP surface.
func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notify/alipay", a.notifyAlipay)
	mux.HandleFunc("POST /notify/alipay/{merchant_id}", a.notifyAlipay)
	mux.HandleFunc("POST /notify/wechatpay", a.notifyWechatPay)
	mux.HandleFunc("POST /notify/wechatpay/{merchant_id}", a.notifyWechatPay)
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
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	return mux
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
		var c *alipay.Client
		if c, err = a.alipayAccountFor(r.PathValue("merchant_id"), body); err == nil {
			res, err = c.ParseNotify(body)
		}
	}
	if err != nil {
		a.refused(reconcile.Alipay, err, "")
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
		var c *wechatpay.Client
		if c, err = a.wechatAccountFor(ctx, r.PathValue("merchant_id"), r.Header.Get(wechatpay.HeaderSerial)); err == nil {
			res, err = c.ParseNotifyContext(ctx, r.Header, body)
		}
	}
	if err != nil {
		a.refused(reconcile.WechatPay, err, r.Header.Get("Request-Id"))
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
func (a *app) alipayAccountFor(pathMerchant string, body []byte) (*alipay.Client, error) {
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
func (a *app) wechatAccountFor(ctx context.Context, pathMerchant, serial string) (*wechatpay.Client, error) {
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

// refused logs a callback we would not read. A bad signature is a security event.
func (a *app) refused(p reconcile.Platform, err error, requestID string) {
	ev := a.log.Warn()
	if errors.Is(err, platformclient.ErrBadSignature) {
		ev = a.log.Error().Str("event", "bad_signature")
	}
	ev.Str("platform", string(p)).Str("request_id", requestID).Err(err).Msg("callback refused")
}

func (a *app) logCallback(res reconcile.Result, applied reconcile.Applied, ack bool, err error) {
	ev := a.log.Info()
	if err != nil || !ack {
		ev = a.log.Warn().Err(err)
	}
	ev.Str("platform", string(res.Platform)).Str("out_trade_no", res.OutTradeNo).Str("platform_trade_no", res.PlatformTradeNo).
		Str("outcome", string(applied.Outcome)).Str("mismatch", string(applied.Mismatch)).Bool("acked", ack).Msg("callback")
}
