package redis_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/redis"
	"github.com/payrecon/payrecon/repo/repotest"
)

// spend runs callers goroutines on each budget for d and returns every grant's time.
func spend(t *testing.T, budgets []*redis.Budget, callers int, d time.Duration) []time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu     sync.Mutex
		grants []time.Time
		wg     sync.WaitGroup
	)
	for _, b := range budgets {
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b.Wait(ctx) == nil {
					mu.Lock()
					grants = append(grants, time.Now())
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	sort.Slice(grants, func(i, j int) bool { return grants[i].Before(grants[j]) })
	return grants
}

// maxInWindow is the most grants in any window of length w.
func maxInWindow(grants []time.Time, w time.Duration) int {
	best, lo := 0, 0
	for hi := range grants {
		for grants[hi].Sub(grants[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// Four processes (four budgets, four connections) on one account key share its QPS: the sum
// never exceeds it in any second, and they spend it.
func TestRedisBudgetIsSharedByProcesses(t *testing.T) {
	t.Parallel()
	r := repotest.NewRedis(t)
	const qps = 100.0
	var budgets []*redis.Budget
	for range 4 {
		opt, err := goredis.ParseURL(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		budgets = append(budgets, redis.NewBudget(c, redis.BudgetOptions{Key: r.Prefix + "rate:alipay:2021", QPS: qps, Shards: 4}))
	}
	const run = 3 * time.Second
	grants := spend(t, budgets, 8, run)
	burst := reconcile.BudgetBurst(qps)
	if got := maxInWindow(grants, time.Second); got > int(qps)+burst {
		t.Errorf("%d grants in one second, budget %g (+%d burst)", got, qps, burst)
	}
	// The floor is loose (a loaded CI machine delays wake-ups); BenchmarkBudget prints the
	// real share.
	// A floor, not a throughput target (BenchmarkBudget reports that): the spenders did run
	// against the bucket, so the count of commands per grant above means something.
	if got, want := len(grants), int(0.5*qps*run.Seconds()); got < want {
		t.Errorf("%d grants in %s, want at least %d: the budget went unspent", got, run, want)
	}
	for i, b := range budgets {
		if b.Failures() != 0 {
			t.Errorf("budget %d fell back %d times with Redis up", i, b.Failures())
		}
	}
}

// With Redis unreachable each of n shards paces at QPS/n: the sum still stays within the
// budget.
func TestRedisBudgetFallsBackToAShareOfTheBudget(t *testing.T) {
	t.Parallel()
	const qps = 80.0
	var budgets []*redis.Budget
	for range 4 {
		c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		budgets = append(budgets, redis.NewBudget(c, redis.BudgetOptions{Key: "k", QPS: qps, Shards: 4}))
	}
	const run = 2 * time.Second
	grants := spend(t, budgets, 4, run)
	// Each local bucket starts empty (its peers may still spend the shared one) and paces
	// at 20/s; the 4 is timing slack.
	if got, limit := len(grants), int(qps*run.Seconds())+4; got > limit {
		t.Errorf("%d grants in %s without Redis, more than the budget allows (%d)", got, run, limit)
	}
	if got, want := len(grants), int(0.7*qps*run.Seconds()); got < want {
		t.Errorf("%d grants in %s without Redis, want at least %d", got, run, want)
	}
	for i, b := range budgets {
		if b.Failures() == 0 || !b.UsingFallback() {
			t.Errorf("budget %d did not notice Redis was down", i)
		}
	}
}

// A process that loses Redis while its peers may still have it takes no burst of its own:
// its first call waits for its share's first token.
func TestRedisBudgetFallbackStartsWithoutABurst(t *testing.T) {
	t.Parallel()
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	b := redis.NewBudget(c, redis.BudgetOptions{Key: "k", QPS: 2, Shards: 1})
	start := time.Now()
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// At 2/s the share's first token comes after 500 ms; a full bucket would grant at once.
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Errorf("first call after losing Redis went after %s, want the share's first token (500 ms)", took)
	}
	if !b.UsingFallback() {
		t.Error("budget did not notice Redis was down")
	}
}

// A caller whose context ends while it queues behind others gives up at once.
func TestRedisBudgetWaitHonoursTheContext(t *testing.T) {
	t.Parallel()
	r := repotest.NewRedis(t)
	b := redis.NewBudget(r.Client, redis.BudgetOptions{Key: r.Prefix + "rate:slow", QPS: 0.5})
	ctx := context.Background()
	if err := b.Wait(ctx); err != nil { // the first call is free
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := b.Wait(short); err == nil {
		t.Fatal("a second call within the same two seconds was granted at 0.5 QPS")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Wait ignored its context for %s", took)
	}
}

// commandCounter counts the commands a Redis client sends.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *commandCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// countedClient is a client of a Redis of the test's own, counting the commands it sends,
// and the test's key prefix.
func countedClient(t *testing.T) (*goredis.Client, *commandCounter, string) {
	r := repotest.NewRedis(t)
	opt, err := goredis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	counter := &commandCounter{}
	c.AddHook(counter)
	return c, counter, r.Prefix
}

// A lone caller asks Redis about once per call: after a grant it waits until the next call
// can be allowed instead of collecting a refusal first. The budget is still spent.
func TestRedisBudgetAsksRedisOncePerCall(t *testing.T) {
	t.Parallel()
	c, counter, prefix := countedClient(t)
	const qps = 50.0
	b := redis.NewBudget(c, redis.BudgetOptions{Key: prefix + "rate:wechatpay:1900", QPS: qps})
	const run = 2 * time.Second
	grants := spend(t, []*redis.Budget{b}, 1, run)
	asked := counter.n.Load()
	t.Logf("%d grants, %d Redis commands", len(grants), asked)
	if float64(asked) > 1.3*float64(len(grants))+2 {
		t.Errorf("%d Redis commands for %d grants, want about one per grant", asked, len(grants))
	}
	// A floor, not a throughput target (BenchmarkBudget reports that): the spenders did run
	// against the bucket, so the count of commands per grant above means something.
	if got, want := len(grants), int(0.5*qps*run.Seconds()); got < want {
		t.Errorf("%d grants in %s, want at least %d", got, run, want)
	}
}

// Callers waiting together are granted in bunches: the asker takes a call for each of them
// in one Redis command, so a paced process wakes and asks once per bunch, not once per
// call. The bunches stay within the budget and spend it.
func TestRedisBudgetGrantsWaitingCallersInBunches(t *testing.T) {
	t.Parallel()
	c, counter, prefix := countedClient(t)
	const qps = 200.0
	b := redis.NewBudget(c, redis.BudgetOptions{Key: prefix + "rate:wechatpay:1901", QPS: qps})
	const run = 2 * time.Second
	grants := spend(t, []*redis.Budget{b}, 32, run)
	asked := counter.n.Load()
	burst := reconcile.BudgetBurst(qps)
	t.Logf("%d grants, %d Redis commands, burst %d", len(grants), asked, burst)
	if float64(asked) > float64(len(grants))/4+2 {
		t.Errorf("%d Redis commands for %d grants, want a command per bunch of several", asked, len(grants))
	}
	if got := maxInWindow(grants, time.Second); got > int(qps)+burst {
		t.Errorf("%d grants in one second, budget %g (+%d burst)", got, qps, burst)
	}
	if got, want := len(grants), int(0.5*qps*run.Seconds()); got < want {
		t.Errorf("%d grants in %s, want at least %d: the budget went unspent", got, run, want)
	}
}

// A call that already holds a nested budget's grant (WaitAhead) is served before the
// callers queued without one, even when it came last.
func TestRedisBudgetServesWaitAheadFirst(t *testing.T) {
	t.Parallel()
	c, _, prefix := countedClient(t)
	// 10 calls/s, a burst of one: one grant per 100 ms, one caller at a time.
	b := redis.NewBudget(c, redis.BudgetOptions{Key: prefix + "rate:alipay:2088", QPS: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Wait(ctx); err != nil { // spends the burst: the next grant is 100 ms away
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	call := func(name string, wait func(context.Context) error) {
		defer wg.Done()
		if err := wait(ctx); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	for _, name := range []string{"a", "b", "c"} {
		wg.Add(1)
		go call(name, b.Wait)
		time.Sleep(10 * time.Millisecond) // queued in this order
	}
	wg.Add(1)
	go call("ahead", b.WaitAhead)
	wg.Wait()
	// "a" took the turn before "ahead" came and is granted first; "ahead" goes next.
	if len(order) != 4 || order[1] != "ahead" {
		t.Fatalf("grants in order %v, want the ahead call right after the asker", order)
	}
}

// Callers that give up while queued, while asking, or just after a call or the turn was
// handed to them pass it on: after a storm of cancelled waits the budget still grants at
// once to the next caller (a lost turn would leave every later caller waiting forever).
func TestRedisBudgetSurvivesCallersGivingUp(t *testing.T) {
	t.Parallel()
	c, _, prefix := countedClient(t)
	b := redis.NewBudget(c, redis.BudgetOptions{Key: prefix + "rate:wechatpay:1902", QPS: 200})
	var wg sync.WaitGroup
	var granted atomic.Int64
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				// Deadlines from 0 to 12 ms: many end while queued, some while asking,
				// some right after being handed a call.
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((i+j)%13)*time.Millisecond)
				if b.Wait(ctx) == nil {
					granted.Add(1)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("after %d grants amid cancelled waits, a fresh caller waited %s and got %v: the turn was lost",
			granted.Load(), time.Since(start).Round(time.Millisecond), err)
	}
	if granted.Load() == 0 {
		t.Fatal("no caller was granted a call: the storm proved nothing")
	}
}

// A pass reads the budget's queue (reconcile.BudgetQueue): Waiting counts the asker and the
// callers queued behind it, enough is two bunches, and Moved closes each time a caller stops
// waiting, granted or giving up, so a pass holding accounts back hears of the room at once.
func TestRedisBudgetQueueCountsWaitersAndSaysWhenOneLeaves(t *testing.T) {
	t.Parallel()
	c, _, prefix := countedClient(t)
	// Half a call a second, a burst of one: a bunch of one call, one grant per 2 s, long
	// enough that no grant comes while the test queues and cancels callers.
	b := redis.NewBudget(c, redis.BudgetOptions{Key: prefix + "rate:alipay:2089", QPS: 0.5})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if waiting, enough := b.Waiting(); waiting != 0 || enough != 2 {
		t.Fatalf("idle budget: Waiting() = %d, %d; want 0 waiting, 2 (two bunches of one) enough", waiting, enough)
	}
	// At Q=100 the burst is 10 and a bunch three quarters of it, rounded up: 8.
	if _, enough := redis.NewBudget(c, redis.BudgetOptions{Key: prefix + "rate:alipay:2090", QPS: 100}).Waiting(); enough != 16 {
		t.Fatalf("a budget at Q=100 names %d waiting as enough, want 16 (two bunches of 8)", enough)
	}
	if err := b.Wait(ctx); err != nil { // spends the burst: the next grant is 2 s away
		t.Fatal(err)
	}
	moved := b.Moved()
	if b.Moved() != moved {
		t.Fatal("Moved gave a new channel with nothing moved in between")
	}
	granted := make(chan error, 4)
	giveUp, cancelOne := context.WithCancel(ctx)
	defer cancelOne()
	go func() { granted <- b.Wait(ctx) }() // the asker
	waitFor(t, func() bool { w, _ := b.Waiting(); return w == 1 })
	go func() { granted <- b.Wait(giveUp) }()
	go func() { granted <- b.Wait(ctx) }()
	waitFor(t, func() bool { w, _ := b.Waiting(); return w == 3 })
	select {
	case <-moved:
		t.Fatal("Moved closed while callers only joined the queue")
	default:
	}

	cancelOne() // a queued caller gives up
	select {
	case <-moved:
	case <-time.After(time.Second): // before the asker's grant could close it
		t.Fatal("Moved stayed open after a queued caller gave up")
	}
	if w, _ := b.Waiting(); w != 2 {
		t.Fatalf("%d waiting after one of three gave up, want 2", w)
	}
	moved = b.Moved()
	for range 3 {
		if err := <-granted; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	select {
	case <-moved:
	default:
		t.Fatal("Moved stayed open after the queue drained")
	}
	if w, _ := b.Waiting(); w != 0 {
		t.Fatalf("%d waiting after every caller returned, want 0", w)
	}
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
	}
}
