package redis

import (
	"context"
	"math"
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
// goroutine at a time asks Redis (the others queue locally), so waiting callers cost no Redis
// calls and no CPU. Redis down or slow: a local bucket at QPS/Shards takes over and Redis is
// asked again a second later.
type Budget struct {
	limiter *redis_rate.Limiter
	key     string
	limit   redis_rate.Limit
	local   *rate.Limiter
	timeout time.Duration
	retry   time.Duration
	log     zerolog.Logger

	turn chan struct{} // one Redis asker per process
	// notBefore (unix nanos, read and written only by the turn's holder) is the earliest the
	// next call can be allowed, learnt from the last grant: asking sooner would only earn a
	// refusal, one more Redis round trip and one more wake-up per call.
	notBefore int64
	downUntil atomic.Int64 // unix nanos until which the local bucket is used
	sharing   atomic.Bool  // the last call asked Redis successfully (or none failed yet)
	failures  atomic.Int64
	lastLog   atomic.Int64
}

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
		turn:    make(chan struct{}, 1),
	}
	b.sharing.Store(true)
	return b
}

// Wait implements platformclient.Budget.
func (b *Budget) Wait(ctx context.Context) error {
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.turn }()
	if err := reconcile.Sleep(ctx, time.Until(time.Unix(0, b.notBefore))); err != nil {
		return err
	}
	for {
		if time.Now().UnixNano() < b.downUntil.Load() {
			return b.local.Wait(ctx)
		}
		rctx, cancel := context.WithTimeout(ctx, b.timeout)
		res, err := b.limiter.Allow(rctx, b.key, b.limit)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.fallBack(err)
			continue
		}
		b.sharing.Store(true)
		if res.Allowed > 0 {
			b.notBefore = time.Now().Add(b.nextGrantIn(res)).UnixNano()
			return nil
		}
		if err := reconcile.Sleep(ctx, res.RetryAfter); err != nil {
			return err
		}
	}
}

// nextGrantIn is the soonest, after a grant, that Redis can allow the next call: the
// bucket is full again after ResetAfter, and Burst-1 calls may go before that. Other
// processes calling meanwhile only push it later, so waiting this long never leaves the
// budget unspent.
func (b *Budget) nextGrantIn(res *redis_rate.Result) time.Duration {
	interval := b.limit.Period / time.Duration(b.limit.Rate)
	return res.ResetAfter - time.Duration(b.limit.Burst-1)*interval
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
