package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/relay"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/worker"
)

// demoRelay is the demo's fulfilment hand-off: the repaired orders' outbox rows go to a
// JetStream stream of the demo's own, and a consumer standing in for fulfilment prints
// what it receives. Without a NATS server the step is skipped, not failed.
func demoRelay(ctx context.Context, stdout io.Writer, cfg config.Config, store *postgres.Store, natsURL string, log zerolog.Logger) error {
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	nc, err := nats.Connect(natsURL, nats.Timeout(3*time.Second))
	if err != nil {
		say("\n9. fulfilment hand-off: skipped, no NATS server at %s (%v); make demo starts one", natsURL, err)
		return nil
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// A stream and subjects of the demo's own, so a demo never meets another's messages.
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.Relay.URL, cfg.Relay.SubjectPrefix = natsURL, "payrecon.demo"+tag+"."
	streamName := "PAYRECON_DEMO_" + tag
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{cfg.Relay.SubjectPrefix + ">"},
		Storage: jetstream.MemoryStorage, Duplicates: cfg.Relay.RetryHorizon})
	if err != nil {
		say("\n9. fulfilment hand-off: skipped, NATS at %s has no JetStream (%v)", natsURL, err)
		return nil
	}
	defer js.DeleteStream(context.WithoutCancel(ctx), streamName) //nolint:errcheck // a demo stream in memory

	// Fulfilment's side: a consumer that prints each message it receives.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	fp := &fulfilmentPrinter{w: stdout, printed: make(chan struct{}, 256)}
	cc, err := cons.Consume(fp.handle)
	if err != nil {
		return err
	}
	defer cc.Stop()

	say("\n9. fulfilment hand-off (reconciler relay): the outbox to NATS JetStream stream %s", streamName)
	rl, err := worker.OpenRelay(ctx, cfg, store, nil, log)
	if err != nil {
		return fmt.Errorf("demo relay: %w", err)
	}
	defer rl.Close()
	totals, err := rl.Pass(ctx)
	if err != nil {
		return fmt.Errorf("demo relay: %w", err)
	}
	deadline := time.After(10 * time.Second)
	for i := 0; i < totals.Published; i++ {
		select {
		case <-fp.printed:
		case <-deadline:
			return fmt.Errorf("demo relay: fulfilment received %d of %d messages", fp.count(), totals.Published)
		}
	}
	again, err := rl.Pass(ctx)
	if err != nil {
		return fmt.Errorf("demo relay: %w", err)
	}
	say("   relayed %d messages, each marked dispatched after JetStream acknowledged it; a second run relays %d", totals.Published, again.Published)
	say("   (a re-publish after a crash carries the same Nats-Msg-Id and is dropped by the stream; fulfilment deduplicates on order id + kind)")
	return nil
}

// fulfilmentPrinter stands in for fulfilment: it prints each message it receives.
type fulfilmentPrinter struct {
	w        io.Writer
	printed  chan struct{}
	mu       sync.Mutex
	received int
}

func (f *fulfilmentPrinter) handle(m jetstream.Msg) {
	var p struct {
		OutTradeNo  string `json:"out_trade_no"`
		OutRefundNo string `json:"out_refund_no"` // a refund's message: the money going back
		AmountMinor int64  `json:"amount_minor"`
		Source      string `json:"source"`
	}
	json.Unmarshal(m.Data(), &p) //nolint:errcheck // printed as far as it parses
	h := m.Headers()
	if finding := h.Get(relay.HeaderFindingID); finding != "" {
		f.mu.Lock()
		f.received++
		fmt.Fprintf(f.w, "   finance heard  %-22s finding %-4s %s\n", m.Subject(), finding, p.OutTradeNo)
		f.mu.Unlock()
		f.printed <- struct{}{}
		return
	}
	what := p.OutTradeNo
	if p.OutRefundNo != "" {
		what += " refund " + p.OutRefundNo
	}
	f.mu.Lock()
	f.received++
	fmt.Fprintf(f.w, "   fulfilment got %-22s order %-4s %-26s %10s yuan  via %-9s [%s]\n", m.Subject(), h.Get(relay.HeaderOrderID),
		what, reconcile.FormatYuan(p.AmountMinor), p.Source, h.Get(relay.HeaderMsgID))
	f.mu.Unlock()
	f.printed <- struct{}{}
}

func (f *fulfilmentPrinter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.received
}
