package worker

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/redis"
)

// A pass holds back an account by the queue of the budget that bounds its calls: a
// sub-merchant's provider's, even when the sub-merchant has a qps of its own (that one only
// slows itself), and a direct account's own. Without Redis there is no queue to read.
func TestBudgetQueuesNameTheBudgetThatBoundsEachAccount(t *testing.T) {
	accts := config.Accounts{
		Alipay: []config.AlipayAccount{
			{AppID: "2021001", QPS: 20},
			{AppID: "2021009", QPS: 50, SubMerchants: []config.AlipaySubMerchant{{AuthAppID: "2021101", QPS: 5}}},
		},
		WechatPay: []config.WechatAccount{
			{SpMchID: "1900000109", QPS: 100, SubMerchants: []config.WechatSubMerchant{{SubMchID: "1800000001"}, {SubMchID: "1800000002", QPS: 10}}},
		},
	}
	key := func(p reconcile.Platform, id string) reconcile.AccountKey {
		return reconcile.AccountKey{Platform: p, MerchantID: id}
	}
	// Budgets are only built here, never asked: the client never connects.
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	queues := map[reconcile.AccountKey]*redis.Budget{}
	for _, k := range []reconcile.AccountKey{key(reconcile.Alipay, "2021001"), key(reconcile.Alipay, "2021009"),
		key(reconcile.Alipay, "2021101"), key(reconcile.WechatPay, "1900000109"), key(reconcile.WechatPay, "1800000002")} {
		queues[k] = redis.NewBudget(rdb, redis.BudgetOptions{Key: k.MerchantID, QPS: 10})
	}
	a := &App{cfg: config.Config{Accounts: accts}, queues: queues, owners: callBudgets(accts)} // as New builds it
	bq := a.budgetQueues()
	cases := []struct {
		acct, group reconcile.AccountKey
		queued      bool
	}{
		{key(reconcile.Alipay, "2021001"), key(reconcile.Alipay, "2021001"), true},
		{key(reconcile.Alipay, "2021101"), key(reconcile.Alipay, "2021009"), true},
		{key(reconcile.WechatPay, "1800000001"), key(reconcile.WechatPay, "1900000109"), true},
		{key(reconcile.WechatPay, "1800000002"), key(reconcile.WechatPay, "1900000109"), true},
		{key(reconcile.WechatPay, "1800009999"), key(reconcile.WechatPay, "1800009999"), false}, // not configured
	}
	for _, c := range cases {
		group, q := bq.Queue(c.acct)
		if group != c.group {
			t.Errorf("%s: group %s, want %s", c.acct, group, c.group)
		}
		if c.queued && q != reconcile.BudgetQueue(queues[c.group]) {
			t.Errorf("%s: not the queue of %s's budget", c.acct, c.group)
		}
		if !c.queued && q != nil {
			t.Errorf("%s: a queue %v for an account without a budget", c.acct, q)
		}
	}
	if got := (&App{cfg: config.Config{Accounts: accts}, queues: map[reconcile.AccountKey]*redis.Budget{}}).budgetQueues(); got != nil {
		t.Errorf("without Redis budgets the pass was given %v to read", got)
	}
}
