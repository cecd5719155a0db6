package worker

import (
	"context"
	"net/http"

	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/repo"
)

// CallbackMux is the public port: the platforms' callbacks and the probes, nothing else.
func (a *App) CallbackMux() http.Handler {
	return httpapi.NewCallbackMux(httpapi.Callbacks{Settler: a.applier, NotifyWait: a.cfg.NotifyWait,
		Alipay: a.alipay, Wechat: a.wechat, Count: a.metrics.Callback, Pinger: a.store.DB(), Log: a.log})
}

// AdminMux is for the cluster only: metrics, the probes and, when review is not nil, the
// review console under /review/.
func (a *App) AdminMux(review http.Handler) http.Handler {
	return httpapi.NewAdminMux(a.metrics.Registry(), a.store.DB(), review)
}

// ReviewConsole builds the review console for serve's admin port. It acts on findings
// through its own connection (RECONCILER_REVIEW_DATABASE_URL, as payrecon_reviewer) when one
// is configured, so the callback path keeps the worker's rights and the console gets the
// reviewer's; the App closes that connection.
func (a *App) ReviewConsole(ctx context.Context) (http.Handler, error) {
	cfg, err := console.FromSettings(a.cfg.Console, a.cfg.Timezone, a.log)
	if err != nil {
		return nil, err
	}
	db := a.store.DB()
	if a.cfg.Console.DatabaseURL != "" {
		if db, err = repo.Open(ctx, a.cfg.Console.DatabaseURL); err != nil {
			return nil, err
		}
		a.consoleDB = db
	}
	return console.New(cfg, repo.NewReview(db)), nil
}
