package worker

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/metrics"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/relay"
	"github.com/payrecon/payrecon/repo/postgres"
)

// OpenedRelay is a relay with the NATS connection it owns.
type OpenedRelay struct {
	*relay.Relay
	conn *relay.Conn
}

// Close closes the NATS connection.
func (r *OpenedRelay) Close() { r.conn.Close() }

// OpenRelay connects to NATS and checks the stream before anything is taken: NATS down is
// exit 1 with nothing marked; a missing stream or a too-short duplicate window is exit 2.
func OpenRelay(ctx context.Context, cfg config.Config, store *postgres.Store, obs relay.Observer, log zerolog.Logger) (*OpenedRelay, error) {
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
	return &OpenedRelay{Relay: r, conn: conn}, nil
}

// StartRelay runs the relay inside serve until ctx ends. A lost database does not stop
// serve: the relay starts over after a pause. The returned wait blocks until the batches
// in flight have finished.
func (a *App) StartRelay(ctx context.Context) (wait func(), err error) {
	m := metrics.NewRelay(a.metrics.Registry())
	rl, err := OpenRelay(ctx, a.cfg, a.store, m, a.log)
	if err != nil {
		return nil, err
	}
	listener, err := postgres.ListenOutbox(a.cfg.DatabaseURL)
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
