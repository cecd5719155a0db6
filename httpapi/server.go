package httpapi

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MaxHeaderBytes bounds a request's headers; a callback's are well under 2 KiB, so a 900 KB
// header is refused before any handler (or log line) sees it.
const MaxHeaderBytes = 16 << 10

// WriteTimeout bounds the writing of one answer, so no request outlives it: a process that
// only answers requests (the console) drains within it.
const WriteTimeout = 15 * time.Second

// NewServer is an http.Server for h with the bounds every payrecon port keeps.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, MaxHeaderBytes: MaxHeaderBytes,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: WriteTimeout}
}

// Pinger tells whether the database answers: what /readyz reports. *sql.DB is one.
type Pinger interface {
	PingContext(ctx context.Context) error
}

// NewAdminMux is the admin port of serve and the relay, for the cluster only (monitoring):
// /metrics from gatherer and the probes (/readyz only when pinger is not nil). It takes no
// review console: the processes that hold the worker's credential never serve one.
func NewAdminMux(gatherer prometheus.Gatherer, pinger Pinger) http.Handler {
	return adminMux(gatherer, pinger)
}

// NewConsoleMux is `reconciler console`'s admin port: what NewAdminMux serves plus the review
// console under /review/ (unstripped).
func NewConsoleMux(gatherer prometheus.Gatherer, pinger Pinger, review http.Handler) http.Handler {
	mux := adminMux(gatherer, pinger)
	mux.Handle("/review/", review)
	return mux
}

func adminMux(gatherer prometheus.Gatherer, pinger Pinger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	probes(mux, pinger)
	return mux
}

// probes adds /healthz (the process answers) and, with a pinger, /readyz (the database
// answers too).
func probes(mux *http.ServeMux, pinger Pinger) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }) //nolint:errcheck
	if pinger == nil {
		return
	}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pinger.PingContext(ctx); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n") //nolint:errcheck
	})
}
