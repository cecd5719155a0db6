package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/reconcile"
)

// Listener is one of serve's ports: the bound socket and the server that will answer on it.
type Listener struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr for h; a port that cannot be bound is an error of the setting named.
func Listen(addr, setting string, h http.Handler) (Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return Listener{}, &config.Error{Setting: setting, Msg: err.Error()}
	}
	return Listener{ln: ln, srv: httpapi.NewServer(h)}, nil
}

// Addr is the address bound (the port chosen for ":0").
func (l Listener) Addr() net.Addr { return l.ln.Addr() }

// Close releases a listener that will not be served.
func (l Listener) Close() { l.ln.Close() }

// Serve answers on every listener until ctx ends, then drains: it stops taking requests and
// scheduled passes (cr, when set) and lets those in flight finish, within timeout. A server
// that fails returns its error at once.
func Serve(ctx context.Context, log zerolog.Logger, timeout time.Duration, cr *cron.Cron, ls ...Listener) error {
	errc := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	drain(log, timeout, ls, cr)
	return nil
}

// drain stops taking requests and passes and lets those in flight finish, within
// RECONCILER_DRAIN_TIMEOUT.
func drain(log zerolog.Logger, timeout time.Duration, ls []Listener, cr *cron.Cron) {
	log.Info().Msg("shutting down: finishing in-flight callbacks and passes")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, l := range ls {
		if err := l.srv.Shutdown(ctx); err != nil {
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

// ServeMetrics serves /metrics and /healthz for a long-running relay on addr; an address
// that cannot be bound is a reconcile.InputError (the flag is wrong).
func ServeMetrics(addr string, reg *prometheus.Registry, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, reconcile.Inputf("relay: --metrics-listen %s: %v", addr, err)
	}
	srv := httpapi.NewServer(httpapi.NewAdminMux(reg, nil))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("relay: metrics server")
		}
	}()
	return func() { srv.Close() }, nil
}
