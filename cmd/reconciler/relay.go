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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/metrics"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/relay"
	"github.com/payrecon/payrecon/repo"
)

// cmdRelay publishes the fulfilment outbox to NATS JetStream: one pass, or with --follow
// until SIGTERM.
func cmdRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var follow bool
	var metricsListen string
	cfg, _, err := parse("relay", args, config.GroupDatabase|config.GroupLog|config.GroupRelay, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&follow, "follow", false, "keep relaying, woken by the outbox NOTIFY (polling every --relay-poll as a fallback); SIGTERM stops after the batches in flight")
		fs.StringVar(&metricsListen, "metrics-listen", "", "with --follow, serve /metrics and /healthz on this address (e.g. :9091)")
	})
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	db, err := repo.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	m := metrics.NewRelay(reg)
	rl, err := openRelay(ctx, cfg, repo.NewStore(db), m, log)
	if err != nil {
		return err
	}
	defer rl.Close()

	if !follow {
		totals, err := rl.Pass(ctx)
		rl.ObserveLag(ctx)
		fmt.Fprintf(stdout, "relayed %d outbox messages in %d batches (%d already in the stream), %d not acknowledged\n",
			totals.Published, totals.Batches, totals.Duplicates, totals.Failed)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return &exitError{code: exitInterrupted, err: errors.New("relay interrupted; the rows not yet relayed stay undispatched for the next run")}
		}
		return fmt.Errorf("relay: %w", err)
	}

	if metricsListen != "" {
		stop, err := serveMetrics(metricsListen, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	listener, err := repo.ListenOutbox(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer listener.Close()
	log.Info().Str("config", cfg.Redacted()).Msg("relay: following the outbox")
	fmt.Fprintln(stdout, "relay: following the outbox")
	if err := rl.Follow(ctx, listener.Wake()); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	log.Info().Msg("relay: stopped")
	return nil
}

// openedRelay is a relay with the NATS connection it owns.
type openedRelay struct {
	*relay.Relay
	conn *relay.Conn
}

func (r *openedRelay) Close() { r.conn.Close() }

// openRelay connects to NATS and checks the stream before anything is taken: NATS down is
// exit 1 with nothing marked; a missing stream or a too-short duplicate window is exit 2.
func openRelay(ctx context.Context, cfg config.Config, store *repo.Store, obs relay.Observer, log zerolog.Logger) (*openedRelay, error) {
	rc := cfg.Relay
	if rc.URL == "" {
		return nil, &config.Error{Setting: "RECONCILER_RELAY_URL", Msg: "is required to relay the outbox (e.g. nats://127.0.0.1:4222)"}
	}
	conn, err := relay.Connect(rc.URL, relay.ConnectOptions{Window: rc.Window, AckTimeout: rc.AckTimeout, Log: log})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := conn.CheckStream(cctx, rc.SubjectPrefix, reconcile.OutboxKinds, rc.RetryHorizon)
	if err != nil {
		conn.Close()
		return nil, err
	}
	log.Info().Str("stream", info.Config.Name).Dur("duplicate_window", info.Config.Duplicates).
		Str("subject_prefix", rc.SubjectPrefix).Msg("relay: stream checked")
	r := relay.New(store, conn.JetStream(), relay.Settings{SubjectPrefix: rc.SubjectPrefix, Batch: rc.Batch,
		AckTimeout: rc.AckTimeout, Poll: rc.Poll}, obs, log)
	return &openedRelay{Relay: r, conn: conn}, nil
}

// startServeRelay runs the relay inside serve until ctx ends. A lost database does not stop
// serve: the relay starts over after a pause. The returned wait blocks until the batches
// in flight have finished.
func (a *app) startServeRelay(ctx context.Context) (wait func(), err error) {
	m := metrics.NewRelay(a.metrics.Registry())
	rl, err := openRelay(ctx, a.cfg, a.store, m, a.log)
	if err != nil {
		return nil, err
	}
	listener, err := repo.ListenOutbox(a.cfg.DatabaseURL)
	if err != nil {
		rl.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer rl.Close()
		defer listener.Close()
		for {
			err := rl.Follow(ctx, listener.Wake())
			if err == nil || ctx.Err() != nil {
				return
			}
			a.log.Error().Err(err).Msg("relay: stopped on a database error; starting over")
			if reconcile.Sleep(ctx, a.cfg.Relay.Poll) != nil {
				return
			}
		}
	}()
	a.log.Info().Msg("relay: following the outbox")
	return func() { <-done }, nil
}

// serveMetrics serves /metrics and /healthz for a long-running relay.
func serveMetrics(addr string, reg *prometheus.Registry, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usagef("relay: --metrics-listen %s: %v", addr, err)
	}
	srv := httpapi.NewServer(httpapi.NewAdminMux(reg, nil, nil))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("relay: metrics server")
		}
	}()
	return func() { srv.Close() }, nil
}
