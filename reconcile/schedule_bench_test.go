package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// BenchmarkRecheckSchedule simulates 24h of passes every 5 minutes (a controlled clock) over
// orders that stay open at the platform, and compares the platform calls the re-check
// schedule makes with asking every pending order every pass (N x 288). Two starting points:
// orders never checked before, and long-pending orders already at the backoff cap.
// PAYRECON_SIM_ORDERS sets N (default 2000; the ratio does not depend on N).
func BenchmarkRecheckSchedule(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("PAYRECON_SIM_ORDERS")); err == nil && v > 0 {
		n = v
	}
	for _, start := range []struct {
		name   string
		checks int
	}{{"fresh", 0}, {"long-pending", 6}} {
		b.Run(start.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				env := setup(b, dbOnly)
				plat := newScripted(reconcile.Alipay, testMerchant)
				env.db.MustExec(`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at, expires_at, check_count)
					SELECT 'alipay', $2, 'SIM-' || g, 100, 'PENDING', now() - interval '1 hour', now() + interval '30 days', $3
					FROM generate_series(1, $1) g`, n, testMerchant, start.checks)
				for j := 1; j <= n; j++ {
					plat.set(fmt.Sprintf("SIM-%d", j), reconcile.StateOpen, "", 0)
				}
				var mu sync.Mutex
				clock := time.Now()
				now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
				env.settings.Now = now
				applier := reconcile.NewApplier(env.store, nil, env.settings, zerolog.Nop())
				runner := reconcile.NewRunner(applier, env.store, env.store.Runs(), env.store.Locker(), []reconcile.PlatformClient{plat},
					reconcile.RunnerSettings{Concurrency: 16, Grace: 2 * time.Minute, Lookback: 72 * time.Hour, OrderTTL: 2 * time.Hour,
						RecheckMin: time.Minute, RecheckMax: time.Hour, CloseAtPlatform: true, Now: now}, nil, zerolog.Nop())
				b.StartTimer()
				const passes = 24 * 60 / 5
				var calls int64
				for k := 0; k < passes; k++ {
					run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeScheduled})
					if err != nil {
						b.Fatal(err)
					}
					calls += run.Counts.Scanned
					mu.Lock()
					clock = clock.Add(5 * time.Minute)
					mu.Unlock()
				}
				naive := int64(n) * passes
				fmt.Printf("recheck schedule, %s, %d orders, 24h of 5-minute passes: %d platform calls (%.1f per order per day) vs %d asking every pass: %.1fx fewer\n",
					start.name, n, calls, float64(calls)/float64(n), naive, float64(naive)/float64(calls))
				b.ReportMetric(float64(calls)/float64(n), "calls/order/day")
				b.ReportMetric(float64(naive)/float64(calls), "x-fewer")
			}
		})
	}
}
