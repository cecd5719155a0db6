package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/relay"
	"github.com/payrecon/payrecon/relay/natstest"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// BenchmarkRelayThroughput relays 100,000 outbox rows and, in the same run, publishes the
// same payloads with bare asynchronous JetStream publishes (same window, same headers, no
// database), each into its own file-backed stream. The machine is shared, so it runs
// three rounds, bare and relay back to back in each, and prints every round and the median
// ratio. Run with -benchtime 1x.
func BenchmarkRelayThroughput(b *testing.B) {
	const (
		rows   = 100_000
		rounds = 3
	)
	batch, workers, window := envInt("RELAY_BENCH_BATCH", 1000), envInt("RELAY_BENCH_WORKERS", 2), envInt("RELAY_BENCH_WINDOW", 1024)
	for i := 0; i < b.N; i++ {
		var ratios []float64
		var relayRates, bareRates []float64
		for round := 1; round <= rounds; round++ {
			db := repotest.NewDB(b)
			seedBench(b, db, rows)
			var payloads []json.RawMessage
			if err := db.Select(&payloads, `SELECT payload FROM fulfillment_outbox ORDER BY id`); err != nil {
				b.Fatal(err)
			}
			bare := bareAsyncPublish(b, natstest.NewStream(b, natstest.Options{File: true}), payloads, window)

			relayStream := natstest.NewStream(b, natstest.Options{File: true})
			c, err := relay.Connect(natstest.URL(), relay.ConnectOptions{Window: window, AckTimeout: 10 * time.Second, Log: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			r := relay.New(postgres.NewStore(db.DB), c.JetStream(), relay.Settings{SubjectPrefix: relayStream.Prefix, Batch: batch,
				Workers: workers, AckTimeout: 10 * time.Second}, nil, zerolog.Nop())
			start := time.Now()
			totals, err := r.Pass(context.Background())
			took := time.Since(start)
			c.Close()
			if err != nil || totals.Published != rows {
				b.Fatalf("relay pass: %+v, %v", totals, err)
			}
			if n := relayStream.Count(b); n != rows {
				b.Fatalf("relay stream holds %d messages, want %d", n, rows)
			}
			relayRate, bareRate := float64(rows)/took.Seconds(), float64(rows)/bare.Seconds()
			relayRates, bareRates = append(relayRates, relayRate), append(bareRates, bareRate)
			ratios = append(ratios, relayRate/bareRate)
			fmt.Printf("relay throughput round %d, %d outbox rows: relay %.0f msg/s (%s), bare JetStream async publish %.0f msg/s (%s): relay = %.0f%% of bare\n",
				round, rows, relayRate, took.Round(time.Millisecond), bareRate, bare.Round(time.Millisecond), 100*relayRate/bareRate)
		}
		fmt.Printf("relay throughput (batch %d, %d workers, window %d): median relay %.0f msg/s, bare %.0f msg/s, median ratio %.0f%% of bare\n",
			batch, workers, window, median(relayRates), median(bareRates), 100*median(ratios))
		b.ReportMetric(median(relayRates), "relay-msg/s")
		b.ReportMetric(median(bareRates), "bare-msg/s")
		b.ReportMetric(100*median(ratios), "relay-%-of-bare")
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// bareAsyncPublish publishes payloads as the relay would, minus the database, and returns
// how long until every acknowledgement came back.
func bareAsyncPublish(b *testing.B, s *natstest.Stream, payloads []json.RawMessage, window int) time.Duration {
	nc, err := nats.Connect(natstest.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i, p := range payloads {
		m := nats.NewMsg(s.Prefix + reconcile.OutboxKindPaid)
		m.Data = p
		m.Header.Set(relay.HeaderMsgID, relay.MsgID(int64(i+1)))
		m.Header.Set(relay.HeaderOrderID, fmt.Sprint(i+1))
		m.Header.Set(relay.HeaderKind, reconcile.OutboxKindPaid)
		m.Header.Set(relay.HeaderOutboxID, fmt.Sprint(i+1))
		m.Header.Set(relay.HeaderCreatedAt, start.UTC().Format(time.RFC3339Nano))
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(10*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		b.Fatal("bare publish: acknowledgements did not come back")
	}
	took := time.Since(start)
	if n := s.Count(b); n != uint64(len(payloads)) {
		b.Fatalf("bare stream holds %d messages, want %d", n, len(payloads))
	}
	return took
}

// seedBench inserts rows paid orders with realistic order.paid payloads.
func seedBench(b *testing.B, db *repotest.DB, rows int) {
	_, err := db.Exec(`
		WITH o AS (
			INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, platform_trade_no, paid_amount_minor, paid_at)
			SELECT 'alipay', '2021000000000001', 'BENCH' || lpad(g::text, 10, '0'), 100 + g % 90000, 'PAID',
				'2026112822001' || lpad(g::text, 15, '0'), 100 + g % 90000, now()
			FROM generate_series(1, $1) g
			RETURNING id, merchant_id, out_trade_no, platform_trade_no, amount_minor, paid_at
		)
		INSERT INTO fulfillment_outbox (order_id, kind, payload)
		SELECT id, 'order.paid', jsonb_build_object('order_id', id, 'platform', 'alipay', 'merchant_id', merchant_id,
			'out_trade_no', out_trade_no, 'platform_trade_no', platform_trade_no, 'amount_minor', amount_minor,
			'currency', 'CNY', 'source', 'reconcile', 'paid_at', to_char(paid_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
		FROM o ORDER BY id`, rows)
	if err != nil {
		b.Fatalf("seed: %v", err)
	}
	if _, err := db.Exec(`ANALYZE fulfillment_outbox`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRelayFollowLag drives 1,000 transitions/s through the real apply statement
// (ApplyTransition writes the order, its event and its outbox row) for 10 s while a
// following relay, woken by NOTIFY, relays them; it prints the lag from each transition's
// commit to JetStream's acknowledgement of its message. Run with -benchtime 1x.
func BenchmarkRelayFollowLag(b *testing.B) {
	const (
		rate     = 1000
		duration = 10 * time.Second
		total    = int(rate * duration / time.Second)
		workers  = 8
	)
	for i := 0; i < b.N; i++ {
		db := repotest.NewDB(b)
		var orderIDs []int64
		if err := db.Select(&orderIDs, `INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status)
			SELECT 'wechatpay', '1900000001', 'LAG' || g, 100 + g, 'PENDING' FROM generate_series(1, $1) g RETURNING id`, total); err != nil {
			b.Fatal(err)
		}
		sort.Slice(orderIDs, func(i, j int) bool { return orderIDs[i] < orderIDs[j] })
		store := postgres.NewStore(db.DB)
		stream := natstest.NewStream(b, natstest.Options{File: true})
		c, err := relay.Connect(natstest.URL(), relay.ConnectOptions{Window: 512, AckTimeout: 10 * time.Second, Log: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		acks := &ackTimes{at: make(map[int64]time.Time, total)}
		r := relay.New(store, c.JetStream(), relay.Settings{SubjectPrefix: stream.Prefix, Batch: 500,
			AckTimeout: 10 * time.Second, Poll: time.Second}, acks, zerolog.Nop())
		listener, err := postgres.ListenOutbox(db.URL)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		followDone := make(chan error, 1)
		go func() { followDone <- r.Follow(ctx, listener.Wake()) }()

		committed := make([]time.Time, total)
		start := time.Now().Add(50 * time.Millisecond)
		var wg sync.WaitGroup
		b.ResetTimer()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for k := w; k < total; k += workers {
					time.Sleep(time.Until(start.Add(time.Duration(k) * time.Second / rate)))
					moved, err := store.ApplyTransition(context.Background(), reconcile.Transition{OrderID: orderIDs[k],
						From: reconcile.StatusPending, To: reconcile.StatusPaid, Platform: reconcile.WechatPay,
						PlatformTradeNo: fmt.Sprintf("42000%010d", k), AmountMinor: int64(100 + k + 1), PaidAt: time.Now(),
						Source: reconcile.SourceReconcile, Outbox: &reconcile.OutboxMessage{Kind: reconcile.OutboxKindPaid,
							Payload: map[string]any{"order_id": orderIDs[k], "amount_minor": 100 + k + 1}}})
					committed[k] = time.Now()
					if err != nil || !moved {
						b.Errorf("transition %d: %v, %v", k, moved, err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		produced := time.Since(start)
		deadline := time.Now().Add(30 * time.Second)
		for acks.count() < total && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		cancel()
		<-followDone
		listener.Close()
		c.Close()
		if n := acks.count(); n != total {
			b.Fatalf("%d of %d messages acknowledged", n, total)
		}
		lags := make([]time.Duration, 0, total)
		for k, id := range orderIDs {
			lags = append(lags, acks.get(id).Sub(committed[k]))
		}
		sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
		p := func(q float64) time.Duration { return lags[int(q*float64(len(lags)-1))] }
		fmt.Printf("relay --follow lag, %d transitions at %.0f/s (offered %d/s): commit -> JetStream ack p50 %s, p99 %s, max %s\n",
			total, float64(total)/produced.Seconds(), rate, p(0.50).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond),
			lags[len(lags)-1].Round(10*time.Microsecond))
		b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	}
}

// ackTimes records when each order's message was acknowledged.
type ackTimes struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func (a *ackTimes) Batch(r relay.BatchReport) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range r.Delivered {
		a.at[d.OrderID] = d.AckedAt
	}
}

func (a *ackTimes) Lag(time.Duration) {}

func (a *ackTimes) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

func (a *ackTimes) get(orderID int64) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[orderID]
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
