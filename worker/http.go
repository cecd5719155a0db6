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

// AdminMux is serve's admin port, for the cluster only: metrics and the probes. The review
// console is `reconciler console`'s (OpenConsole), never served by a process holding the
// worker's credential.
func (a *App) AdminMux() http.Handler {
	return httpapi.NewAdminMux(a.metrics.Registry(), a.store.DB())
}
