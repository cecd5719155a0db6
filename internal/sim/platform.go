// Package sim is payrecon's seeded whole-worker simulation: an in-process platform whose
// truth the simulation controls and which misbehaves on purpose, the fault tallies, and
// "processes" (a pass with its own connection pool) that can crash at any point. The
// driver and the invariants are in sim_test.go; `go test ./internal/sim -run Simulation`.
package sim

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// Faults counts the faults injected, by type.
type Faults struct {
	mu sync.Mutex
	n  map[string]int64
}

// Add counts one fault of the given type.
func (f *Faults) Add(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int64{}
	}
	f.n[kind]++
}

// Merge adds another tally to this one.
func (f *Faults) Merge(o *Faults) {
	o.mu.Lock()
	snap := make(map[string]int64, len(o.n))
	for k, v := range o.n {
		snap[k] = v
	}
	o.mu.Unlock()
	for k, v := range snap {
		f.mu.Lock()
		if f.n == nil {
			f.n = map[string]int64{}
		}
		f.n[k] += v
		f.mu.Unlock()
	}
}

// String lists the tally sorted by type.
func (f *Faults) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.n))
	for k := range f.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		out += fmt.Sprintf("%s=%d ", k, f.n[k])
	}
	return out
}

// Trade is the platform's truth about one out_trade_no.
type Trade struct {
	State    reconcile.PlatformState
	TradeNo  string // the payment the platform reports (the first one)
	Amount   int64
	PaidAt   time.Time
	EverPaid bool
	// Payments are every trade number the buyer paid this order with (a second one is a
	// duplicate payment).
	Payments []string
}

// Movement is one payment or refund as the platform's daily bill lists it.
type Movement struct {
	OutTradeNo string
	TradeNo    string
	Amount     int64
	At         time.Time
	Refund     bool
	// RefundNo and RefundID name a refund the merchant's app or portal made (its
	// out_refund_no, WeChat Pay's refund_id); "" for a whole-trade refund (Refund).
	RefundNo, RefundID string
}

// Platform is an in-process payment platform implementing reconcile.PlatformClient. Its
// truth changes only through Set, Pay and Refund; each call may fail on purpose with the
// platform client's error kinds (5xx and truncated bodies retryable, 429 throttled, a bad
// signature, a hang until the caller's deadline), or close a trade and lose the answer.
type Platform struct {
	platform reconcile.Platform
	merchant string
	faults   *Faults

	mu     sync.Mutex
	rng    *rand.Rand
	trades map[string]*Trade
	moves  []Movement // every payment and refund, in order: what the platform's bill lists
	rate   float64    // probability that a call fails
	hang   time.Duration
	// refunds are the trades' refunds by out_refund_no (refunds.go); refundedTotal is each
	// trade's sum of successful refunds, what Alipay's refund notification reports.
	refunds       map[string]*PlatformRefund
	refundedTotal map[string]int64
}

// NewPlatform builds the platform of one merchant account.
func NewPlatform(p reconcile.Platform, merchant string, seed int64, faults *Faults) *Platform {
	return &Platform{platform: p, merchant: merchant, faults: faults, rng: rand.New(rand.NewSource(seed)), trades: map[string]*Trade{},
		refunds: map[string]*PlatformRefund{}, refundedTotal: map[string]int64{}}
}

// Platform implements reconcile.PlatformClient.
func (p *Platform) Platform() reconcile.Platform { return p.platform }

// MerchantID implements reconcile.PlatformClient.
func (p *Platform) MerchantID() string { return p.merchant }

// SetFaults sets the probability that a call fails and how long a hung call hangs.
func (p *Platform) SetFaults(rate float64, hang time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.hang = rate, hang
}

// Set puts a trade's truth.
func (p *Platform) Set(otn string, t Trade) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trades[otn] = &t
}

// Truth returns a copy of a trade's truth.
func (p *Platform) Truth(otn string) Trade {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.trades[otn]; ok {
		c := *t
		c.Payments = append([]string(nil), t.Payments...)
		return c
	}
	return Trade{State: reconcile.StateNotFound}
}

// Pay pays a trade: an open one becomes paid; a paid one is paid a second time (a
// duplicate payment the platform reports only through its callback). It reports whether
// the buyer could pay.
func (p *Platform) Pay(otn, tradeNo string, amount int64, at time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.trades[otn]
	if !ok {
		return false
	}
	switch t.State {
	case reconcile.StateOpen:
		t.State, t.TradeNo, t.Amount, t.PaidAt, t.EverPaid = reconcile.StatePaid, tradeNo, amount, at, true
	case reconcile.StatePaid:
	default:
		return false
	}
	t.Payments = append(t.Payments, tradeNo)
	p.moves = append(p.moves, Movement{OutTradeNo: otn, TradeNo: tradeNo, Amount: amount, At: at})
	return true
}

// Refund refunds a paid trade in full at the given time.
func (p *Platform) Refund(otn string, at time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.trades[otn]; ok && t.State == reconcile.StatePaid {
		t.State = reconcile.StateRefunded
		p.moves = append(p.moves, Movement{OutTradeNo: otn, TradeNo: t.TradeNo, Amount: t.Amount, At: at, Refund: true})
		return true
	}
	return false
}

// Movements are the payments and refunds made in [from, to) so far, in the order they
// happened: the bill the platform publishes for that day (early, for a day not yet over).
func (p *Platform) Movements(from, to time.Time) []Movement {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Movement
	for _, m := range p.moves {
		if !m.At.Before(from) && m.At.Before(to) {
			out = append(out, m)
		}
	}
	return out
}

// fault picks this call's fault ("" for none) and its latency.
func (p *Platform) fault(op string) (string, time.Duration, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	latency := time.Duration(p.rng.Intn(3)) * time.Millisecond
	if p.rate == 0 || p.rng.Float64() >= p.rate {
		return "", latency, 0
	}
	kinds := []string{"platform_5xx", "platform_429", "platform_truncated", "platform_bad_signature", "platform_hang", "platform_latency"}
	if op == "close" {
		kinds = append(kinds, "platform_close_answer_lost")
	}
	k := kinds[p.rng.Intn(len(kinds))]
	p.faults.Add(k)
	if k == "platform_latency" {
		return "", latency + time.Duration(5+p.rng.Intn(20))*time.Millisecond, 0
	}
	return k, latency, p.hang
}

func (p *Platform) fail(ctx context.Context, kind string, hang time.Duration) error {
	e := &reconcile.PlatformError{Platform: p.platform, Kind: reconcile.KindRetryable, Message: kind}
	switch kind {
	case "platform_429":
		e.Kind = reconcile.KindRateLimited
	case "platform_bad_signature":
		e.Kind = reconcile.KindBadSignature
	case "platform_hang":
		// The client's PLATFORM_TIMEOUT ends a hung call; the caller's context may end first.
		select {
		case <-time.After(hang):
		case <-ctx.Done():
		}
		e.Message = "timeout"
	}
	return e
}
