package platformclient

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// recordingBudget counts its grants and, when closed is nil, grants at once; otherwise it
// blocks until closed is closed or the context ends.
type recordingBudget struct {
	mu     sync.Mutex
	name   string
	order  *[]string
	grants int
	closed chan struct{}
}

func (b *recordingBudget) Wait(ctx context.Context) error {
	if b.closed != nil {
		select {
		case <-b.closed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.grants++
	*b.order = append(*b.order, b.name)
	return nil
}

// TestNestedBudgets: a sub-merchant's call waits for its own budget and then for its
// provider's; a sub-merchant held back by its own budget takes nothing of the provider's,
// so the provider's other sub-merchants go on.
func TestNestedBudgets(t *testing.T) {
	var order []string
	provider := &recordingBudget{name: "provider", order: &order}
	p := NewPolicy(PolicyConfig{Platform: reconcile.Alipay, QPS: 100, Tuning: Tuning{Budget: provider}, Logger: zerolog.Nop()})
	free := &recordingBudget{name: "free", order: &order}
	held := &recordingBudget{name: "held", order: &order, closed: make(chan struct{})}
	ok := func(context.Context) error { return nil }

	if err := p.Within(free).Do(context.Background(), "query", ok); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "free" || order[1] != "provider" {
		t.Fatalf("grants %v, want the sub-merchant's own budget, then the provider's", order)
	}

	// The held sub-merchant waits on its own budget; meanwhile another goes through.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	heldDone := make(chan error, 1)
	go func() { heldDone <- p.Within(held).Do(ctx, "query", ok) }()
	if err := p.Within(free).Do(context.Background(), "query", ok); err != nil {
		t.Fatal(err)
	}
	if err := <-heldDone; err == nil {
		t.Fatal("the held sub-merchant's call went through")
	}
	if provider.grants != 2 || held.grants != 0 {
		t.Fatalf("provider granted %d calls, held %d: the held sub-merchant took provider budget", provider.grants, held.grants)
	}
	if p.Within(nil) != p {
		t.Error("Within(nil) is not the policy itself")
	}
}

// aheadRecordingBudget records which way a call waited.
type aheadRecordingBudget struct{ recordingBudget }

func (b *aheadRecordingBudget) WaitAhead(ctx context.Context) error {
	b.name = "provider-ahead"
	return b.recordingBudget.Wait(ctx)
}

// A call holding its own grant goes ahead at the provider's budget where it can; a
// provider's own call (no budget of its own) waits in turn.
func TestNestedBudgetGoesAheadAtTheProvider(t *testing.T) {
	var order []string
	provider := &aheadRecordingBudget{recordingBudget{name: "provider", order: &order}}
	p := NewPolicy(PolicyConfig{Platform: reconcile.Alipay, QPS: 100, Tuning: Tuning{Budget: provider}, Logger: zerolog.Nop()})
	ok := func(context.Context) error { return nil }
	if err := p.Within(&recordingBudget{name: "own", order: &order}).Do(context.Background(), "query", ok); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "own" || order[1] != "provider-ahead" {
		t.Fatalf("grants %v, want the own budget's, then the provider's ahead of the queue", order)
	}
}
