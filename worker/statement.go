package worker

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/statementrun"
)

// StatementRunner builds the statement run on the app's apply path, with its metrics in reg.
func (a *App) StatementRunner(reg prometheus.Registerer) *statementrun.Runner {
	return statementrun.NewRunner(StatementStore{a.store}, a.store.Locker().WithWait(0), a.applier, a.store.Runs(),
		statementrun.NewMetrics(reg), a.cfg.Concurrency, a.log)
}

// StatementStore is the PostgreSQL store as a statement run needs it: its BeginStatement
// returns *postgres.StatementTx, which Go does not let stand for the statementrun.DayTx the
// run's interface names.
type StatementStore struct{ *postgres.Store }

// BeginStatement implements statementrun.Store.
func (s StatementStore) BeginStatement(ctx context.Context, day reconcile.StatementDay, runID int64) (statementrun.DayTx, error) {
	tx, err := s.Store.BeginStatement(ctx, day, runID)
	if err != nil {
		return nil, err
	}
	return tx, nil
}

// PushStatementMetrics push-adds the statement metrics to the Pushgateway (job
// payrecon_statement), as a pass pushes its own.
func (a *App) PushStatementMetrics(reg *prometheus.Registry, ok bool) {
	if a.cfg.PushgatewayURL == "" {
		return
	}
	p := push.New(a.cfg.PushgatewayURL, "payrecon_statement").Gatherer(reg)
	if err := p.Add(); err != nil {
		a.log.Warn().Err(err).Bool("succeeded", ok).Msg("could not push statement metrics to the Pushgateway")
	}
}

// BillAccounts is every configured account with a private key, each with a bill client
// (bill requests are signed like queries, under the account's shared call budget); keep,
// when set, is where downloaded bills are kept.
func (a *App) BillAccounts(keep string) ([]statementrun.Account, error) {
	var out []statementrun.Account
	add := func(p reconcile.Platform, id string, c statementrun.BillDownloader) {
		out = append(out, statementrun.Account{Key: reconcile.AccountKey{Platform: p, MerchantID: id},
			Source: statementrun.PlatformSource{Platform: p, Merchant: id, Client: c, Keep: keep}})
	}
	for _, acct := range a.cfg.Accounts.Alipay {
		if acct.PrivateKeyFile == "" {
			continue
		}
		c, err := a.alipayClient(acct)
		if err != nil {
			return nil, err
		}
		add(reconcile.Alipay, acct.AppID, c)
		// Each sub-merchant's own bill: the app asks with the merchant's app_auth_token.
		views, err := a.alipaySubClients(c, acct)
		if err != nil {
			return nil, err
		}
		for _, v := range views {
			add(reconcile.Alipay, v.MerchantID(), v)
		}
	}
	for _, acct := range a.cfg.Accounts.WechatPay {
		if acct.PrivateKeyFile == "" {
			continue
		}
		c, err := a.wechatClient(acct)
		if err != nil {
			return nil, err
		}
		if acct.SpMchID == "" {
			add(reconcile.WechatPay, acct.MchID, c)
		}
		// Each sub-merchant's own bill (sub_mchid), not the provider's of all of them.
		views, err := a.wechatSubClients(c, acct)
		if err != nil {
			return nil, err
		}
		for _, v := range views {
			add(reconcile.WechatPay, v.MerchantID(), v)
		}
	}
	return out, nil
}
