package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/metrics"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/worker"
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
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	m := metrics.NewRelay(reg)
	rl, err := worker.OpenRelay(ctx, cfg, postgres.NewStore(db), m, log)
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
		stop, err := worker.ServeMetrics(metricsListen, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	listener, err := postgres.ListenOutbox(cfg.DatabaseURL)
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
