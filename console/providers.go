package console

import (
	"fmt"
	"slices"
	"strings"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
)

// Providers knows which service provider (服务商: an Alipay third-party app, a WeChat Pay
// partner) calls for each sub-merchant, from the accounts file's structure: the pages show
// a sub-merchant with its provider and the list filters by provider. The zero value knows
// none, and every merchant reads as a direct one, as it did before the console took the file.
type Providers struct {
	of   map[reconcile.AccountKey]string   // sub-merchant -> its provider's id
	subs map[string][]reconcile.AccountKey // provider id -> its sub-merchants, in file order
	ids  []string                          // the providers' ids, sorted
	on   map[string][]reconcile.Platform   // provider id -> the platforms it is a provider on
}

// ProvidersOf reads who calls for whom from the accounts (config.LoadAccountsStructure has
// checked that no sub-merchant is listed twice). Only ids are read: no key path is looked at.
func ProvidersOf(a config.Accounts) Providers {
	p := Providers{of: map[reconcile.AccountKey]string{}, subs: map[string][]reconcile.AccountKey{}, on: map[string][]reconcile.Platform{}}
	for _, acct := range a.Alipay {
		for _, s := range acct.SubMerchants {
			p.add(reconcile.Alipay, acct.AppID, s.AuthAppID)
		}
	}
	for _, acct := range a.WechatPay {
		for _, s := range acct.SubMerchants {
			p.add(reconcile.WechatPay, acct.SpMchID, s.SubMchID)
		}
	}
	slices.Sort(p.ids)
	return p
}

func (p *Providers) add(platform reconcile.Platform, provider, sub string) {
	k := reconcile.AccountKey{Platform: platform, MerchantID: sub}
	p.of[k] = provider
	p.subs[provider] = append(p.subs[provider], k)
	if !slices.Contains(p.on[provider], platform) {
		if len(p.on[provider]) == 0 {
			p.ids = append(p.ids, provider)
		}
		p.on[provider] = append(p.on[provider], platform)
	}
}

// Of is the provider that calls for a merchant account ("" for a direct merchant, or one
// the accounts file does not list).
func (p Providers) Of(platform reconcile.Platform, merchant string) string {
	return p.of[reconcile.AccountKey{Platform: platform, MerchantID: merchant}]
}

// Known reports whether id names a provider of the accounts file.
func (p Providers) Known(id string) bool { return len(p.subs[id]) > 0 }

// SubMerchants are the accounts provider id calls for (on either platform, should one id
// name a provider on both).
func (p Providers) SubMerchants(id string) []reconcile.AccountKey { return p.subs[id] }

// providerChoice is one provider of the list's filter: its id and the platforms it is one on.
type providerChoice struct {
	ID        string
	Platforms []reconcile.Platform
}

// choices are the providers for the filter, sorted by id (none: the filter is not shown).
func (p Providers) choices() []providerChoice {
	out := make([]providerChoice, 0, len(p.ids))
	for _, id := range p.ids {
		out = append(out, providerChoice{ID: id, Platforms: p.on[id]})
	}
	return out
}

// Via is the line a page shows under a sub-merchant, "via provider 1900000109" in the page's
// language, or "" for a direct merchant. platform is a reconcile.Platform or its string.
func (p page) Via(platform any, merchant string) string {
	id := p.providers.Of(reconcile.Platform(fmt.Sprint(platform)), merchant)
	if id == "" {
		return ""
	}
	return fmt.Sprintf(text(p.Lang, "via_provider"), id)
}

// ProviderName is a provider of the filter as its option reads: its id and its platforms.
func (p page) ProviderName(c providerChoice) string {
	names := make([]string, len(c.Platforms))
	for i, pl := range c.Platforms {
		names[i] = p.N(pl)
	}
	return c.ID + " (" + strings.Join(names, ", ") + ")"
}
