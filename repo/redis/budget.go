package redis

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/payrecon/payrecon/reconcile"
)

// BudgetOptions configure a Budget.
type BudgetOptions struct {
	// Key names the account's budget in Redis (prefix + platform + ":" + merchant id).
	Key string
	// QPS is the account's budget: calls per second for every process together.
	QPS float64
	// Burst is how many calls may go at once after a pause (GCRA burst); default
	// reconcile.BudgetBurst(QPS).
	Burst int
	// Shards is how many processes split the work (the n of --shard i/n). With Redis
	// unreachable each process falls back to a local bucket at QPS/Shards, so together they
	// still stay within the budget.
	Shards int
	// CallTimeout bounds each Redis call (default 100ms).
	CallTimeout time.Duration
	// RetryRedisAfter is how long the fallback is used before Redis is asked again (1s).
	RetryRedisAfter time.Duration
	Logger          zerolog.Logger
}

// Budget is one merchant account's platform call budget shared by every process through
// Redis (GCRA, one key per account), so k pods, backfill shards and `serve --schedule`
// together stay within the account's QPS and together spend it. Within a process one
// caller at a time asks Redis and the others queue locally, so waiting callers cost no Redis
// calls and no CPU. Redis down or slow: a local bucket at QPS/Shards takes over and Redis is
// asked again a second later.
//
// With several callers queued, the asker waits until the bucket holds a call for each of
// them (at most three quarters of the burst, about 75 ms of calls) and takes them in one
// ask, handing the others to the queue's front: a paced pass then wakes, asks Redis and
// signs once per bunch rather than once per call, which is what pacing costs in CPU (an idle
// process pays for every wake-up). No window of any length sees more than the GCRA allows.
type Budget struct {
	limiter *redis_rate.Limiter
	key     string
	limit   redis_rate.Limit
	local   *rate.Limiter
	timeout time.Duration
	retry   time.Duration
	log     zerolog.Logger

	mu     sync.Mutex
	asking bool          // a caller holds the turn to ask Redis
	queue  []waiter      // the callers waiting behind it, those going ahead first
	ahead  int           // how many at the queue's front go ahead (WaitAhead)
	moved  chan struct{} // closed when a caller next stops waiting (Moved); nil: none asked
	// fullAt (unix nanos, read and written only by the turn's holder) is when the bucket
	// will be full again, learnt from Redis's last answer: asking before it holds the calls
	// wanted would only earn a refusal, one more Redis round trip and one more wake-up.
	fullAt    int64
	downUntil atomic.Int64 // unix nanos until which the local bucket is used
	sharing   atomic.Bool  // the last call asked Redis successfully (or none failed yet)
	failures  atomic.Int64
	lastLog   atomic.Int64
}

// A waiter is a queued caller: it receives true when a call of a bunch is its own, false
// when the turn to ask Redis passes to it. Its buffer of one lets the sender never block.
type waiter chan bool

// NewBudget builds the budget of one account.
func NewBudget(rdb *goredis.Client, opts BudgetOptions) *Budget {
	if opts.Shards < 1 {
		opts.Shards = 1
	}
	if opts.Burst < 1 {
		opts.Burst = reconcile.BudgetBurst(opts.QPS)
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 100 * time.Millisecond
	}
	if opts.RetryRedisAfter <= 0 {
		opts.RetryRedisAfter = time.Second
	}
	// GCRA wants a whole number of calls per period; 1000 s periods keep fractional QPS
	// (0.5, 12.5) exact to a thousandth.
	limit := redis_rate.Limit{Rate: max(1, int(math.Round(opts.QPS*1000))), Period: 1000 * time.Second, Burst: opts.Burst}
	localQPS := opts.QPS / float64(opts.Shards)
	b := &Budget{
		limiter: redis_rate.NewLimiter(rdb),
		key:     opts.Key,
		limit:   limit,
		local:   rate.NewLimiter(rate.Limit(localQPS), reconcile.BudgetBurst(localQPS)),
		timeout: opts.CallTimeout,
		retry:   opts.RetryRedisAfter,
		log:     opts.Logger,
	}
	b.sharing.Store(true)
	return b
}

// Wait implements platformclient.Budget.
func (b *Budget) Wait(ctx context.Context) error { return b.wait(ctx, false) }

// WaitAhead is Wait for a call that already holds the grant of a budget nested inside this
// one (a sub-merchant's own, inside its provider's): it is served before the callers that
// hold none. Its two grants then come at most a bunch apart, so the platform sees the calls
// at the inner budget's pace rather than bunched by a long wait for the outer one.
func (b *Budget) WaitAhead(ctx context.Context) error { return b.wait(ctx, true) }

func (b *Budget) wait(ctx context.Context, ahead bool) error {
	b.mu.Lock()
	if !b.asking {
		b.asking = true
		b.mu.Unlock()
		return b.ask(ctx)
	}
	w := make(waiter, 1)
	if ahead {
		b.queue = slices.Insert(b.queue, b.ahead, w)
		b.ahead++
	} else {
		b.queue = append(b.queue, w)
	}
	b.mu.Unlock()
	select {
	case call := <-w:
		if call {
			return nil
		}
		return b.ask(ctx)
	case <-ctx.Done():
		b.leave(w)
		return ctx.Err()
	}
}

// leave takes a caller whose context ended out of the queue. When a call or the turn was
// sent to it meanwhile (senders pop and send under mu, so it has arrived), it passes it on.
func (b *Budget) leave(w waiter) {
	b.mu.Lock()
	if i := slices.Index(b.queue, w); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		if i < b.ahead {
			b.ahead--
		}
		b.movedLocked()
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	if call := <-w; call {
		b.handOn(1)
	} else {
		b.passTurn()
	}
}

// popLocked takes the queue's front waiter.
func (b *Budget) popLocked() waiter {
	w := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	if b.ahead > 0 {
		b.ahead--
	}
	b.movedLocked()
	return w
}

// handOn gives n granted calls to the queue's front waiters; a call with nobody left to
// take it (its caller gave up) is dropped, never spent later on top of newer grants.
func (b *Budget) handOn(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ; n > 0 && len(b.queue) > 0; n-- {
		b.popLocked() <- true
	}
}

// passTurn lets the queue's front waiter ask next, or frees the turn.
func (b *Budget) passTurn() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.asking = false
		b.movedLocked()
		return
	}
	b.popLocked() <- false
}

// ask is the turn holder's: it waits until the bucket holds a bunch, takes it from Redis in one call, keeps one
// and hands the others on. AllowN grants all of the bunch or nothing: a partial grant of
// GCRA's AllowAtMost would round the calls down and spend the fraction.
func (b *Budget) ask(ctx context.Context) error {
	defer b.passTurn()
	for {
		want := b.bunch()
		if err := reconcile.Sleep(ctx, time.Until(b.holds(want))); err != nil {
			return err
		}
		if time.Now().UnixNano() < b.downUntil.Load() {
			return b.local.Wait(ctx)
		}
		rctx, cancel := context.WithTimeout(ctx, b.timeout)
		res, err := b.limiter.AllowN(rctx, b.key, b.limit, want)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.fallBack(err)
			continue
		}
		b.sharing.Store(true)
		now := time.Now()
		b.fullAt = now.Add(res.ResetAfter).UnixNano()
		if res.Allowed > 0 {
			b.handOn(res.Allowed - 1)
			return nil
		}
	}
}

// bunch is how many calls the asker takes at once: one for itself and one for each caller
// queued behind it, at most three quarters of the burst. Waiting until the bucket held the
// whole burst would lose to every oversleep the calls a full bucket cannot hold; the last
// quarter (at least one call) absorbs it.
func (b *Budget) bunch() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return min(b.maxBunchLocked(), 1+len(b.queue))
}

// maxBunchLocked is the largest bunch: three quarters of the burst, at least one call.
func (b *Budget) maxBunchLocked() int {
	return max(1, b.limit.Burst-max(1, b.limit.Burst/4))
}

// holds is when the bucket, as Redis last described it, holds n calls: it is full (Burst)
// at fullAt and gains one call per interval before that. Other processes calling meanwhile
// only push it later, so waiting this long never leaves the budget unspent.
func (b *Budget) holds(n int) time.Time {
	interval := b.limit.Period / time.Duration(b.limit.Rate)
	return time.Unix(0, b.fullAt).Add(-time.Duration(b.limit.Burst-n) * interval)
}

// Waiting implements reconcile.BudgetQueue: the callers waiting (the one whose turn it is to
// ask Redis and those queued behind it), and two bunches as enough. A bunch goes out while
// the next gathers; more waiting only wait longer, holding their taken orders.
func (b *Budget) Waiting() (waiting, enough int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	waiting = len(b.queue)
	if b.asking {
		waiting++
	}
	return waiting, 2 * b.maxBunchLocked()
}

// Moved implements reconcile.BudgetQueue.
func (b *Budget) Moved() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.moved == nil {
		b.moved = make(chan struct{})
	}
	return b.moved
}

// movedLocked tells whoever watches (Moved) that a caller stopped waiting.
func (b *Budget) movedLocked() {
	if b.moved != nil {
		close(b.moved)
		b.moved = nil
	}
}

// Failures is how many times Redis could not answer and the local bucket paced instead.
func (b *Budget) Failures() int64 { return b.failures.Load() }

// UsingFallback reports whether the local bucket paces calls now.
func (b *Budget) UsingFallback() bool { return time.Now().UnixNano() < b.downUntil.Load() }

func (b *Budget) fallBack(err error) {
	b.failures.Add(1)
	now := time.Now()
	if b.sharing.Swap(false) {
		// The other processes may still reach Redis and spend the whole shared bucket, so
		// this one's share starts empty rather than with a burst of its own on top.
		b.local.ReserveN(now, int(b.local.TokensAt(now)))
	}
	b.downUntil.Store(now.Add(b.retry).UnixNano())
	// One line per interval, not one per call.
	if last := b.lastLog.Load(); now.UnixNano()-last > int64(10*time.Second) && b.lastLog.CompareAndSwap(last, now.UnixNano()) {
		b.log.Warn().Err(err).Str("budget", b.key).Float64("local_qps", float64(b.local.Limit())).
			Msg("call budget: Redis unreachable; pacing with a local share of the budget")
	}
}
