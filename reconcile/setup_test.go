package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/redis"
	"github.com/payrecon/payrecon/repo/repotest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

type claimMode string

const (
	withRedis claimMode = "redis"
	dbOnly    claimMode = "database-only"
	redisDown claimMode = "redis-unreachable"
)

// bundle is what one test needs: its own database, its own Redis prefix, and the apply path
// wired to them the way the binary wires it.
type bundle struct {
	t        testing.TB
	db       *repotest.DB
	store    *postgres.Store
	redis    *repotest.Redis // nil unless mode is withRedis
	claims   reconcile.Claimer
	settings reconcile.ApplierSettings
	applier  *reconcile.Applier
	seq      atomic.Int64
}

func setup(t testing.TB, mode claimMode, tune ...func(*reconcile.ApplierSettings)) *bundle {
	t.Helper()
	b := &bundle{t: t, db: repotest.NewDB(t)}
	b.store = postgres.NewStore(b.db.DB)
	b.settings = reconcile.ApplierSettings{ClaimLease: 60 * time.Second, ClaimTTL: 25 * time.Hour, OrderTTL: 2 * time.Hour}
	switch mode {
	case withRedis:
		b.redis = repotest.NewRedis(t)
		b.settings.ClaimPrefix = b.redis.Prefix
		rc, err := redis.NewClient(b.redis.URL, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rc.Close() })
		b.claims = redis.NewClaimer(rc, redis.ClaimerOptions{}, zerolog.Nop())
	case redisDown:
		// Port 1 on loopback refuses connections: Redis "down".
		rc, err := redis.NewClient("redis://127.0.0.1:1/0", 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rc.Close() })
		b.claims = redis.NewClaimer(rc, redis.ClaimerOptions{}, zerolog.Nop())
	case dbOnly:
		b.claims = nil
	}
	for _, f := range tune {
		f(&b.settings)
	}
	b.applier = reconcile.NewApplier(b.store, b.claims, b.settings, zerolog.Nop())
	return b
}

// withStore rebuilds the applier over another store (a decorator around the real one).
func (b *bundle) withStore(s reconcile.Store) *reconcile.Applier {
	return reconcile.NewApplier(s, b.claims, b.settings, zerolog.Nop())
}

type orderSpec struct {
	platform   reconcile.Platform
	merchant   string
	otn        string
	amount     int64
	currency   string
	status     reconcile.Status
	tradeNo    string
	createdAgo time.Duration
}

// order inserts an order and returns its id. Zero fields take sensible defaults.
func (b *bundle) order(s orderSpec) int64 {
	b.t.Helper()
	if s.platform == "" {
		s.platform = reconcile.Alipay
	}
	if s.merchant == "" {
		s.merchant = "2021000000000001"
	}
	if s.otn == "" {
		s.otn = fmt.Sprintf("ORD-%d", b.seq.Add(1))
	}
	if s.amount == 0 {
		s.amount = 8880
	}
	if s.currency == "" {
		s.currency = "CNY"
	}
	if s.status == "" {
		s.status = reconcile.StatusPending
	}
	if s.createdAgo == 0 {
		s.createdAgo = 10 * time.Minute
	}
	return repotest.InsertOrder(b.t, b.db, repotest.Order{Platform: string(s.platform), MerchantID: s.merchant, OutTradeNo: s.otn,
		AmountMinor: s.amount, Currency: s.currency, Status: string(s.status), PlatformTradeNo: s.tradeNo,
		CreatedAgo: s.createdAgo.Truncate(time.Millisecond)})
}

func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	if err := b.db.Get(&n, query, args...); err != nil {
		b.t.Fatalf("count %q: %v", query, err)
	}
	return n
}

func (b *bundle) events(orderID int64) int {
	return b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1`, orderID)
}

func (b *bundle) outbox(orderID int64) int {
	return b.count(`SELECT count(*) FROM fulfillment_outbox WHERE order_id = $1`, orderID)
}

func (b *bundle) status(orderID int64) reconcile.Status {
	b.t.Helper()
	var s string
	if err := b.db.Get(&s, `SELECT status FROM payment_orders WHERE id = $1`, orderID); err != nil {
		b.t.Fatal(err)
	}
	return reconcile.Status(s)
}

func (b *bundle) claimValue(p reconcile.Platform, tradeNo string) string {
	b.t.Helper()
	if b.redis == nil {
		return ""
	}
	v, _ := b.redis.Client.Get(context.Background(), b.applier.ClaimKey(p, tradeNo)).Result()
	return v
}

// paid is a verified paid result for the default Alipay merchant.
func paid(otn, tradeNo string, amount int64, src reconcile.Source) reconcile.Result {
	return reconcile.Result{
		Platform: reconcile.Alipay, MerchantID: "2021000000000001", OutTradeNo: otn,
		PlatformTradeNo: tradeNo, State: reconcile.StatePaid, RawState: "TRADE_SUCCESS",
		AmountMinor: amount, PaidAt: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC),
		Source: src, RawDigest: "d1g3st",
	}
}

func stateResult(otn string, st reconcile.PlatformState, src reconcile.Source) reconcile.Result {
	return reconcile.Result{
		Platform: reconcile.Alipay, MerchantID: "2021000000000001", OutTradeNo: otn,
		State: st, RawState: string(st), Source: src,
	}
}
