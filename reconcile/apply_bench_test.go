package reconcile_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// countingStore counts the statements the apply path sends (each Store method is exactly
// one SQL statement in postgres.Store).
type countingStore struct {
	reconcile.Store
	n atomic.Int64
}

func (c *countingStore) FindOrder(ctx context.Context, p reconcile.Platform, m, o string) (reconcile.Order, error) {
	c.n.Add(1)
	return c.Store.FindOrder(ctx, p, m, o)
}

func (c *countingStore) OutTradeNoExists(ctx context.Context, p reconcile.Platform, o string) (bool, error) {
	c.n.Add(1)
	return c.Store.OutTradeNoExists(ctx, p, o)
}

func (c *countingStore) ApplyTransition(ctx context.Context, t reconcile.Transition) (bool, error) {
	c.n.Add(1)
	return c.Store.ApplyTransition(ctx, t)
}

func (c *countingStore) RecordMismatch(ctx context.Context, m reconcile.Mismatch) error {
	c.n.Add(1)
	return c.Store.RecordMismatch(ctx, m)
}

// BenchmarkApplyResult reports applies per second and database statements per apply for a
// fresh transition (one lookup plus one single-statement transaction) and for a repeated
// callback answered from the Redis DONE mark (no database call at all).
func BenchmarkApplyResult(b *testing.B) {
	for _, mode := range []claimMode{withRedis, dbOnly} {
		b.Run("fresh/"+string(mode), func(b *testing.B) {
			env := setup(b, mode)
			counter := &countingStore{Store: env.store}
			a := env.withStore(counter)
			env.db.MustExec(`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at)
				SELECT 'alipay', '2021000000000001', 'B-' || g, 8880, 'PENDING', now() - interval '10 minutes' FROM generate_series(1, $1) g`, b.N)
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					r := paid(fmt.Sprintf("B-%d", i), fmt.Sprintf("T-B-%d", i), 8880, reconcile.SourceNotify)
					res, err := a.ApplyResult(context.Background(), r, reconcile.ApplyOptions{})
					if err != nil || res.Outcome != reconcile.OutcomeApplied {
						b.Fatalf("apply %d: %v %v", i, res.Outcome, err)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "applies/s")
			b.ReportMetric(float64(counter.n.Load())/float64(b.N), "stmts/apply")
		})
	}
	b.Run("duplicate-callback/redis", func(b *testing.B) {
		env := setup(b, withRedis)
		counter := &countingStore{Store: env.store}
		a := env.withStore(counter)
		env.order(orderSpec{otn: "DUP-1", amount: 8880})
		r := paid("DUP-1", "T-DUP-1", 8880, reconcile.SourceNotify)
		if res, err := a.ApplyResult(context.Background(), r, reconcile.ApplyOptions{}); err != nil || res.Outcome != reconcile.OutcomeApplied {
			b.Fatalf("first apply: %v %v", res.Outcome, err)
		}
		counter.n.Store(0)
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := a.ApplyResult(context.Background(), r, reconcile.ApplyOptions{})
				if err != nil || res.Outcome != reconcile.OutcomeDuplicate {
					b.Fatalf("repeat: %v %v", res.Outcome, err)
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "applies/s")
		b.ReportMetric(float64(counter.n.Load())/float64(b.N), "stmts/apply")
	})
}
