package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// pacedQueue is a call budget whose queue a pass can read (reconcile.BudgetQueue): every
// tick it grants a bunch of calls to the callers waiting longest. It records the most
// callers that ever waited at once.
type pacedQueue struct {
	bunch int

	mu         sync.Mutex
	waiting    []chan struct{}
	moved      chan struct{}
	maxWaiting int
}

func newPacedQueue(t *testing.T, bunch int, every time.Duration) *pacedQueue {
	q := &pacedQueue{bunch: bunch}
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				q.grant()
			}
		}
	}()
	return q
}

func (q *pacedQueue) grant() {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(q.bunch, len(q.waiting))
	for _, w := range q.waiting[:n] {
		close(w)
	}
	q.waiting = q.waiting[n:]
	if n > 0 {
		q.movedLocked()
	}
}

func (q *pacedQueue) movedLocked() {
	if q.moved != nil {
		close(q.moved)
		q.moved = nil
	}
}

func (q *pacedQueue) Wait(ctx context.Context) error {
	w := make(chan struct{})
	q.mu.Lock()
	q.waiting = append(q.waiting, w)
	q.maxWaiting = max(q.maxWaiting, len(q.waiting))
	q.mu.Unlock()
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		defer q.mu.Unlock()
		for i, x := range q.waiting {
			if x == w {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				q.movedLocked()
				break
			}
		}
		return ctx.Err()
	}
}

func (q *pacedQueue) Waiting() (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting), 2 * q.bunch
}

func (q *pacedQueue) Moved() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.moved == nil {
		q.moved = make(chan struct{})
	}
	return q.moved
}

func (q *pacedQueue) most() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.maxWaiting
}

// groupQueues puts each account in its group's budget (reconcile.BudgetQueues).
type groupQueues map[reconcile.AccountKey]struct {
	group reconcile.AccountKey
	queue *pacedQueue
}

func (g groupQueues) Queue(acct reconcile.AccountKey) (reconcile.AccountKey, reconcile.BudgetQueue) {
	x, ok := g[acct]
	if !ok {
		return acct, nil
	}
	return x.group, x.queue
}

// budgetedPlatform asks its budget before each query, as the real clients do, and counts
// the queries past the budget at once.
type budgetedPlatform struct {
	*scriptedPlatform
	budget *pacedQueue
	calls  *inFlight
}

type inFlight struct{ now, most atomic.Int64 }

func (f *inFlight) enter() func() {
	n := f.now.Add(1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
	return func() { f.now.Add(-1) }
}

func (b *budgetedPlatform) Query(ctx context.Context, otn string) (reconcile.Result, error) {
	if err := b.budget.Wait(ctx); err != nil {
		return reconcile.Result{}, &reconcile.PlatformError{Platform: b.platform, Kind: reconcile.KindRetryable, Err: err}
	}
	defer b.calls.enter()()
	return b.scriptedPlatform.Query(ctx, otn)
}

// provider is n sub-merchants of one service provider, one due order each, whose calls all
// go through one budget (the provider's).
type provider struct {
	id      reconcile.AccountKey
	queue   *pacedQueue
	calls   inFlight
	clients []reconcile.PlatformClient
}

func newProvider(p *passBundle, queues groupQueues, id string, n int, q *pacedQueue, latency time.Duration) *provider {
	pr := &provider{id: reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: id}, queue: q}
	for i := range n {
		s := newScripted(reconcile.WechatPay, fmt.Sprintf("%s%04d", id, i))
		s.latency = latency
		otn := fmt.Sprintf("%s-%04d", id, i)
		p.order(orderSpec{otn: otn, platform: reconcile.WechatPay, merchant: s.merchant, createdAgo: 30 * time.Minute})
		s.set(otn, reconcile.StatePaid, "T-"+otn, 8880)
		pr.clients = append(pr.clients, &budgetedPlatform{scriptedPlatform: s, budget: q, calls: &pr.calls})
		queues[reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: s.merchant}] = struct {
			group reconcile.AccountKey
			queue *pacedQueue
		}{pr.id, q}
	}
	return pr
}

func setupDispatch(t *testing.T) (*passBundle, groupQueues) {
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 2 })
	p.db.SetMaxOpenConns(8) // as in TestIdleAccountsGetNoLoop
	return p, groupQueues{}
}

// A provider's sub-merchants are started only as fast as its budget uses them: with 300 of
// them due (more than MaxActiveAccounts) and the budget granting two calls every 10 ms, no
// more than a few bunches' worth of checks ever wait for it, and every order is repaired.
// Without the budget's queue to read, the pass starts up to 256 loops at once and their
// checks wait together.
func TestDispatchStartsAProvidersAccountsAsItsBudgetUsesThem(t *testing.T) {
	t.Parallel()
	const subs, bunch = 300, 2
	for _, read := range []bool{true, false} {
		t.Run(fmt.Sprintf("queue read %v", read), func(t *testing.T) {
			t.Parallel()
			p, queues := setupDispatch(t)
			pr := newProvider(p, queues, "1900", subs, newPacedQueue(t, bunch, 10*time.Millisecond), 0)
			rs := p.rs
			if read {
				rs.Budgets = queues
			}
			var logged bytes.Buffer
			runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), pr.clients, rs, nil,
				zerolog.New(&syncWriter{w: &logged}))
			run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
			if err != nil || run.Counts.Repaired != subs {
				t.Fatalf("pass: %+v, %v; want all %d repaired", run.Counts, err, subs)
			}
			// The pass says once that it holds the provider's accounts, naming its budget.
			held := strings.Count(logged.String(), `"budget_owner":"1900","message":"call budget has callers enough`)
			if want := map[bool]int{true: 1, false: 0}[read]; held != want {
				t.Fatalf("%d log lines about holding the provider's accounts, want %d", held, want)
			}
			most := pr.queue.most()
			t.Logf("at most %d checks waited for the budget (enough: %d)", most, 2*bunch)
			if read && most > 4*bunch {
				t.Fatalf("%d checks waited for a budget that grants %d at a time; want at most %d", most, bunch, 4*bunch)
			}
			if !read && most < 30 {
				t.Fatalf("without the queue read, only %d checks waited at once: the test no longer shows what reading it prevents", most)
			}
		})
	}
}

// Reading the queue never caps a slow platform: while the checks spend their time at the
// platform and the budget has room, its queue stays short and more accounts start, far past
// the two bunches a saturated budget is held to.
func TestDispatchDoesNotCapASlowPlatform(t *testing.T) {
	t.Parallel()
	p, queues := setupDispatch(t)
	const subs = 120
	pr := newProvider(p, queues, "1901", subs, newPacedQueue(t, 4, time.Millisecond), 300*time.Millisecond)
	rs := p.rs
	rs.Budgets = queues
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), pr.clients, rs, nil, zerolog.Nop())
	run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired != subs {
		t.Fatalf("pass: %+v, %v; want all %d repaired", run.Counts, err, subs)
	}
	if most := pr.calls.most.Load(); most < 40 {
		t.Fatalf("at most %d calls at the platform at once, with %d accounts due and a budget to spare; want at least 40", most, subs)
	}
}

// A saturated provider holds back only its own sub-merchants: the accounts of another
// budget, listed after all of them, are checked while the first provider still has most
// of its orders waiting.
func TestDispatchHoldsBackOnlyTheSaturatedBudgetsAccounts(t *testing.T) {
	t.Parallel()
	p, queues := setupDispatch(t)
	slow := newProvider(p, queues, "1902", 100, newPacedQueue(t, 1, 20*time.Millisecond), 0) // 50 calls/s: 2 s
	fast := newProvider(p, queues, "1903", 20, newPacedQueue(t, 4, time.Millisecond), 0)
	var slowDone, fastDone, slowAtFast atomic.Int64
	obs := observerFunc(func(c reconcile.Check) {
		if c.Applied.Outcome != reconcile.OutcomeApplied {
			return
		}
		if c.Order.MerchantID[:4] == "1902" {
			slowDone.Add(1)
		} else if fastDone.Add(1) == 20 {
			slowAtFast.Store(slowDone.Load())
		}
	})
	rs := p.rs
	rs.Budgets = queues
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(),
		append(slow.clients, fast.clients...), rs, obs, zerolog.Nop())
	run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired != 120 {
		t.Fatalf("pass: %+v, %v; want all 120 repaired", run.Counts, err)
	}
	if got := slowAtFast.Load(); got > 50 {
		t.Fatalf("the other budget's 20 accounts finished only after %d of the saturated provider's 100", got)
	}
}

// A signal while accounts are held back ends the pass promptly (ErrInterrupted); the held
// accounts' orders were never taken, and the next pass repairs every order. Had all 100
// accounts started, their checks would sit in the budget's queue (5 s of calls at 20 a
// second) and the drain would last its whole timeout (5 s here) before giving up on them.
func TestDispatchInterruptedWithAccountsHeldBack(t *testing.T) {
	t.Parallel()
	p, queues := setupDispatch(t)
	pr := newProvider(p, queues, "1904", 100, newPacedQueue(t, 1, 50*time.Millisecond), 0) // 20 calls/s
	rs := p.rs
	rs.Budgets = queues
	var checked atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := observerFunc(func(reconcile.Check) {
		if checked.Add(1) == 5 {
			cancel()
		}
	})
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), pr.clients, rs, obs, zerolog.Nop())
	start := time.Now()
	run, err := runner.Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if !errors.Is(err, reconcile.ErrInterrupted) {
		t.Fatalf("interrupted pass: %v, want ErrInterrupted", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("the interrupted pass took %s: its drain waited for checks queued at the budget", took)
	}
	if run.Counts.Repaired >= 100 {
		t.Fatalf("the interrupted pass repaired all %d; the test needs accounts held back", run.Counts.Repaired)
	}
	// The next pass, with a budget to spare, takes the rest: none was left leased.
	fast := newPacedQueue(t, 8, time.Millisecond)
	for _, c := range pr.clients {
		c.(*budgetedPlatform).budget = fast
	}
	runner = reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), pr.clients, p.rs, nil, zerolog.Nop())
	next, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired+next.Counts.Repaired != 100 {
		t.Fatalf("next pass: %+v, %v; want the remaining %d repaired", next.Counts, err, 100-run.Counts.Repaired)
	}
}

// syncWriter lets the pass's goroutines log into one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
