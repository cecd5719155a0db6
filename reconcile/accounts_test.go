package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// stuckPlatform answers nothing until released: an account whose platform hangs.
type stuckPlatform struct {
	*scriptedPlatform
	release chan struct{}
	waited  atomic.Int64
}

func (s *stuckPlatform) Query(ctx context.Context, otn string) (reconcile.Result, error) {
	s.waited.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return s.scriptedPlatform.Query(ctx, otn)
}

// A slow account never holds the workers another account needs: with every worker of the
// stuck account blocked, the other account's orders are all repaired, and only then is the
// stuck one let go.
func TestSlowAccountDoesNotHoldAnotherAccountsWorkers(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 4 })
	slow := &stuckPlatform{scriptedPlatform: newScripted(reconcile.Alipay, "2021000000000009"), release: make(chan struct{})}
	fast := newScripted(reconcile.WechatPay, "1900000001")
	for i := range 20 {
		otn := fmt.Sprintf("SLOW-%02d", i)
		p.order(orderSpec{otn: otn, merchant: slow.merchant, createdAgo: time.Duration(60-i) * time.Minute})
		slow.set(otn, reconcile.StatePaid, "TS-"+otn, 8880)
		otn = fmt.Sprintf("FAST-%02d", i)
		p.order(orderSpec{otn: otn, platform: reconcile.WechatPay, merchant: fast.merchant, createdAgo: time.Duration(59-i) * time.Minute})
		fast.set(otn, reconcile.StatePaid, "TF-"+otn, 8880)
	}
	var fastDone atomic.Int64
	obs := observerFunc(func(c reconcile.Check) {
		if c.Order.MerchantID == fast.merchant && c.Applied.Outcome == reconcile.OutcomeApplied && fastDone.Add(1) == 20 {
			close(slow.release)
		}
	})
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(),
		[]reconcile.PlatformClient{slow, fast}, p.rs, obs, zerolog.Nop())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := runner.Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil {
		t.Fatalf("pass: %v (the fast account waited behind the stuck one)", err)
	}
	if run.Counts.Repaired != 40 || fastDone.Load() != 20 {
		t.Fatalf("repaired %d (fast %d), want 40 (20)", run.Counts.Repaired, fastDone.Load())
	}
	if got := slow.waited.Load(); got < 4 {
		t.Fatalf("the stuck account had %d orders in flight; the test needs its workers all busy", got)
	}
}

type observerFunc func(reconcile.Check)

func (f observerFunc) Checked(c reconcile.Check) { f(c) }

// Orders of accounts this process has no credentials for are not taken; the run says how
// many wait, per account.
func TestUnconfiguredAccountsAreCountedNotTaken(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	p.order(orderSpec{otn: "MINE"})
	p.ali.set("MINE", reconcile.StatePaid, "T-MINE", 8880)
	for i := range 3 {
		p.order(orderSpec{otn: fmt.Sprintf("THEIRS-%d", i), merchant: "2021000000000077"})
	}
	p.order(orderSpec{otn: "WX-THEIRS", platform: reconcile.WechatPay, merchant: "1900000099"})
	p.order(orderSpec{otn: "OLD-THEIRS", merchant: "2021000000000077", createdAgo: 100 * time.Hour}) // outside the lookback
	run := p.pass(reconcile.PassSpec{})
	if run.Counts.Scanned != 1 || run.Counts.Repaired != 1 {
		t.Fatalf("counts %+v: only the configured account's order is checked", run.Counts)
	}
	want := []reconcile.AccountCount{
		{Account: reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: "2021000000000077"}, Orders: 3},
		{Account: reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: "1900000099"}, Orders: 1},
	}
	if fmt.Sprint(run.Unconfigured) != fmt.Sprint(want) {
		t.Fatalf("unconfigured = %v, want %v", run.Unconfigured, want)
	}
	if n := p.count(`SELECT count(*) FROM payment_orders WHERE merchant_id <> $1 AND (last_checked_at IS NOT NULL OR lease_owner IS NOT NULL)`, testMerchant); n != 0 {
		t.Fatalf("%d orders of unconfigured accounts were touched", n)
	}
}

// A backfill over two accounts that is interrupted resumes from a cursor that skips nothing
// either account had not finished.
func TestResumeAcrossAccountsSkipsNothing(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 2 })
	other := newScripted(reconcile.WechatPay, "1900000001")
	p.ali.latency = 5 * time.Millisecond
	other.latency = 40 * time.Millisecond // falls behind
	from := time.Now().Add(-3 * time.Hour)
	for i := range 30 {
		otn := fmt.Sprintf("A-%02d", i)
		p.order(orderSpec{otn: otn, createdAgo: time.Duration(120-2*i) * time.Minute})
		p.ali.set(otn, reconcile.StatePaid, "TA-"+otn, 8880)
		otn = fmt.Sprintf("W-%02d", i)
		p.order(orderSpec{otn: otn, platform: reconcile.WechatPay, merchant: other.merchant, createdAgo: time.Duration(119-2*i) * time.Minute})
		other.set(otn, reconcile.StatePaid, "TW-"+otn, 8880)
	}
	ctx, cancel := context.WithCancel(context.Background())
	obs := &cancelAfter{n: 25, cancel: cancel}
	clients := []reconcile.PlatformClient{p.ali, other}
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), clients, p.rs, obs, zerolog.Nop())
	run, err := runner.Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeBackfill, From: from, To: time.Now()})
	if !errors.Is(err, reconcile.ErrInterrupted) {
		t.Fatalf("err %v, want interrupted", err)
	}
	runner = reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), clients, p.rs, nil, zerolog.Nop())
	if _, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeBackfill, Resume: run.ID}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if n := p.count(`SELECT count(*) FROM payment_orders WHERE status = 'PAID'`); n != 60 {
		t.Fatalf("after resume %d of 60 paid: the cursor skipped orders of the slower account", n)
	}
	// ... and checked nothing twice: each account resumed from its own position.
	for i := range 30 {
		if q := p.ali.count(p.ali.queries, fmt.Sprintf("A-%02d", i)) + other.count(other.queries, fmt.Sprintf("W-%02d", i)); q != 2 {
			t.Errorf("orders A-%02d and W-%02d were asked %d times in all, want once each", i, i, q)
		}
	}
}

// countingQueue counts the takes of each account on top of the real queue.
type countingQueue struct {
	reconcile.WorkQueue
	mu    sync.Mutex
	takes map[reconcile.AccountKey]int
}

func (q *countingQueue) Take(ctx context.Context, tq reconcile.TakeQuery) ([]reconcile.Order, error) {
	q.mu.Lock()
	q.takes[tq.Account]++
	q.mu.Unlock()
	return q.WorkQueue.Take(ctx, tq)
}

// TestIdleAccountsGetNoLoop: with thousands of configured accounts (a service provider's
// sub-merchants) and work due for three, a pass takes for those three only; with work due
// for more accounts than run at once (reconcile.MaxActiveAccounts), every one drains.
func TestIdleAccountsGetNoLoop(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 2 })
	// The worker bounds its pool (worker.New); so does this test, or 256 loops taking at
	// once would open up to 32 sessions on a server other packages' tests share.
	p.db.SetMaxOpenConns(8)
	const configured = 3000
	clients := make([]reconcile.PlatformClient, configured)
	scripted := make([]*scriptedPlatform, configured)
	for i := range clients {
		scripted[i] = newScripted(reconcile.WechatPay, fmt.Sprintf("19%08d", i))
		clients[i] = scripted[i]
	}
	due := func(i int, otn string) {
		p.order(orderSpec{otn: otn, platform: reconcile.WechatPay, merchant: scripted[i].merchant, createdAgo: 30 * time.Minute})
		scripted[i].set(otn, reconcile.StatePaid, "T-"+otn, 8880)
	}
	for _, i := range []int{7, 1500, 2999} {
		due(i, fmt.Sprintf("FEW-%d", i))
	}
	q := &countingQueue{WorkQueue: p.store, takes: map[reconcile.AccountKey]int{}}
	runner := reconcile.NewRunner(p.applier, q, p.store.Runs(), p.store.Locker(), clients, p.rs, nil, zerolog.Nop())
	run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired != 3 {
		t.Fatalf("pass: %+v, %v; want the three due orders repaired", run.Counts, err)
	}
	if len(q.takes) != 3 {
		t.Fatalf("takes for %d accounts, want the 3 with due work (of %d configured)", len(q.takes), configured)
	}

	// More accounts with work than run at once: all drain.
	n := reconcile.MaxActiveAccounts + 44
	for i := range n {
		due(i, fmt.Sprintf("MANY-%d", i))
	}
	run, err = runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired != int64(n) {
		t.Fatalf("pass over %d accounts with work: %+v, %v", n, run.Counts, err)
	}
}

// dueRecorder records what a pass tells a DueObserver, and whether any check came first.
type dueRecorder struct {
	mu         sync.Mutex
	calls      [][]reconcile.AccountKey
	checks     int
	checkedFor []string // merchant ids of the checks made before Due
}

func (d *dueRecorder) Due(accounts []reconcile.DueAccount) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]reconcile.AccountKey, len(accounts))
	for i, a := range accounts {
		keys[i] = a.AccountKey
	}
	d.calls = append(d.calls, keys)
}

func (d *dueRecorder) Checked(c reconcile.Check) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checks++
	if len(d.calls) == 0 {
		d.checkedFor = append(d.checkedFor, c.Order.MerchantID)
	}
}

// The worker sizes its scheduler to the budgets of the accounts with due work, so the pass
// names exactly those, once, before any of them is checked: not the idle configured ones.
func TestPassNamesTheAccountsWithDueWorkFirst(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	busy := newScripted(reconcile.WechatPay, "1900000001")
	idle := newScripted(reconcile.WechatPay, "1900000002")
	for i := range 3 {
		otn := fmt.Sprintf("DUE-%d", i)
		p.order(orderSpec{otn: otn, merchant: p.ali.merchant})
		p.ali.set(otn, reconcile.StatePaid, "TA-"+otn, 8880)
		otn = fmt.Sprintf("DUE-W%d", i)
		p.order(orderSpec{otn: otn, platform: reconcile.WechatPay, merchant: busy.merchant})
		busy.set(otn, reconcile.StatePaid, "TW-"+otn, 8880)
	}
	obs := &dueRecorder{}
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(),
		[]reconcile.PlatformClient{p.ali, idle, busy}, p.rs, obs, zerolog.Nop())
	run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired != 6 {
		t.Fatalf("pass: %v, repaired %d of 6", err, run.Counts.Repaired)
	}
	want := []reconcile.AccountKey{{Platform: reconcile.Alipay, MerchantID: p.ali.merchant}, {Platform: reconcile.WechatPay, MerchantID: busy.merchant}}
	if len(obs.calls) != 1 || fmt.Sprint(obs.calls[0]) != fmt.Sprint(want) {
		t.Fatalf("Due was told %v, want once %v", obs.calls, want)
	}
	if len(obs.checkedFor) != 0 || obs.checks != 6 {
		t.Fatalf("%d checks, %v of them before Due; want 6, all after", obs.checks, obs.checkedFor)
	}
}
