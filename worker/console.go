package worker

import (
	"context"
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/metrics"
	"github.com/payrecon/payrecon/repo/postgres"
)

// ConsoleDrain is how long a stopping console lets its requests finish: none outlives the
// server's write timeout, so waiting longer would wait for nothing.
const ConsoleDrain = httpapi.WriteTimeout

// Console is `reconciler console`'s process: the review console under /review/ with
// /metrics and the probes, over one connection pool. It needs no platform key and no Redis,
// so the pod that runs it holds the reviewer's credential and nothing of the worker's, and
// the internet-facing callback pods hold no reviewer's. Of the accounts file, when given, it
// takes only the structure (cfg.Console.Accounts, read without opening a key file), to name
// each sub-merchant's service provider.
type Console struct {
	db      *sqlx.DB
	handler http.Handler
}

// OpenConsole connects with cfg.DatabaseURL (in production payrecon_reviewer's URL) and
// builds the console's port.
func OpenConsole(ctx context.Context, cfg config.Config, log zerolog.Logger) (*Console, error) {
	settings, err := console.FromSettings(cfg.Console, cfg.Timezone, log)
	if err != nil {
		return nil, err
	}
	db, err := postgres.OpenWithTimeout(ctx, cfg.DatabaseURL, cfg.DatabaseTimeout)
	if err != nil {
		return nil, err
	}
	h := httpapi.NewConsoleMux(metrics.Runtime(), db, console.New(settings, postgres.NewReview(db)))
	return &Console{db: db, handler: h}, nil
}

// Handler is the console's port: /review/, /metrics, /healthz and /readyz.
func (c *Console) Handler() http.Handler { return c.handler }

// Close closes the database pool.
func (c *Console) Close() { c.db.Close() }
