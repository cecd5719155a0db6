package worker

import (
	"net/http"

	"github.com/payrecon/payrecon/httpapi"
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
