package worker

import (
	"errors"
	"strings"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// MaxSubMerchants is how many service providers' sub-merchants one deployment reconciles:
// a pass starts a loop only for an account with due work, but every sub-merchant still has
// a client view (a few hundred bytes) and its place in the account list from the start.
const MaxSubMerchants = 50000

// addSubMerchants puts a provider's sub-merchant views in the pass and lets the provider's
// callbacks name them (accept). The views share the provider's circuit breaker, which is
// watched once, under the provider's id (buildPlatforms): thousands of sub-merchants do not
// make thousands of gauges.
func addSubMerchants[V reconcile.PlatformClient](a *App, views []V, err error, accept func(map[string]bool)) error {
	if err != nil {
		return err
	}
	ids := make(map[string]bool, len(views))
	for _, v := range views {
		ids[v.MerchantID()] = true
		a.clients = append(a.clients, a.metrics.Instrument(v))
	}
	accept(ids)
	return nil
}

// noteSubMerchants names each configured sub-merchant's provider in the metrics, whether
// this process calls for it or only reads its callbacks.
func (a *App) noteSubMerchants() {
	for _, acct := range a.cfg.Accounts.Alipay {
		for _, s := range acct.SubMerchants {
			a.metrics.SubMerchant(reconcile.Alipay, s.AuthAppID, acct.AppID)
		}
	}
	for _, acct := range a.cfg.Accounts.WechatPay {
		for _, s := range acct.SubMerchants {
			a.metrics.SubMerchant(reconcile.WechatPay, s.SubMchID, acct.SpMchID)
		}
	}
}

// addAlipaySubMerchants gives each sub-merchant of a third-party app a client of its own
// (the app's keys, the merchant's app_auth_token, its own budget inside the app's) and lets
// the app's notifications name them.
func (a *App) addAlipaySubMerchants(c *alipay.Client, acct config.AlipayAccount) error {
	views, err := a.alipaySubClients(c, acct)
	return addSubMerchants(a, views, err, c.AcceptSubMerchants)
}

// alipaySubClients are the third-party app c's views for its sub-merchants, each with the
// merchant's app_auth_token (read from its file, a secret) and its own budget.
func (a *App) alipaySubClients(c *alipay.Client, acct config.AlipayAccount) ([]*alipay.Client, error) {
	views := make([]*alipay.Client, 0, len(acct.SubMerchants))
	for i, s := range acct.SubMerchants {
		field := config.SubMerchantField(i, s.AuthAppID, "app_auth_token_file")
		token, err := readKeyFile(a, acct.FieldError, field, s.AppAuthTokenFile, parseAppAuthToken)
		if err != nil {
			return nil, err
		}
		v, err := c.ForSubMerchant(s.AuthAppID, token, a.subBudget(reconcile.Alipay, s.AuthAppID, s.QPS))
		if err != nil {
			return nil, acct.FieldError(field, err.Error())
		}
		views = append(views, v)
	}
	return views, nil
}

// addWechatSubMerchants gives each sub-merchant of a service provider a partner-API client
// of its own (the provider's keys, its own budget inside the provider's) and lets the
// provider's callbacks name them.
func (a *App) addWechatSubMerchants(c *wechatpay.Client, acct config.WechatAccount) error {
	views, err := a.wechatSubClients(c, acct)
	return addSubMerchants(a, views, err, c.AcceptSubMerchants)
}

// wechatSubClients are the service provider c's partner-API views for its sub-merchants,
// each with its own budget.
func (a *App) wechatSubClients(c *wechatpay.Client, acct config.WechatAccount) ([]*wechatpay.Client, error) {
	views := make([]*wechatpay.Client, 0, len(acct.SubMerchants))
	for i, s := range acct.SubMerchants {
		v, err := c.ForSubMerchant(s.SubMchID, s.SubAppID, a.subBudget(reconcile.WechatPay, s.SubMchID, s.QPS))
		if err != nil {
			return nil, acct.FieldError(config.SubMerchantField(i, s.SubMchID, "sub_mchid"), err.Error())
		}
		views = append(views, v)
	}
	return views, nil
}

// subBudget is a sub-merchant's own budget, nil when it has none (only its provider's).
func (a *App) subBudget(p reconcile.Platform, id string, qps float64) platformclient.Budget {
	if qps <= 0 {
		return nil
	}
	return a.budget(reconcile.AccountKey{Platform: p, MerchantID: id}, qps)
}

// subMerchantIDs are the ids of an account's sub-merchants (auth_app_id or sub_mchid).
func subMerchantIDs[S any](subs []S, id func(S) string) map[string]bool {
	if len(subs) == 0 {
		return nil
	}
	out := make(map[string]bool, len(subs))
	for _, s := range subs {
		out[id(s)] = true
	}
	return out
}

// parseAppAuthToken reads an app_auth_token file: one token, surrounding space ignored.
// The errors never quote the file.
func parseAppAuthToken(b []byte) (string, error) {
	t := strings.TrimSpace(string(b))
	switch {
	case t == "":
		return "", errors.New("the token file is empty")
	case strings.ContainsAny(t, " \t\r\n"):
		return "", errors.New("the token file holds more than one token")
	}
	return t, nil
}
