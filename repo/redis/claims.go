// Package redis is payrecon's Redis adapter (go-redis): the callback-compatible claims
// (reconcile.Claimer) and the call budget shared by every process (redis_rate). Both are a
// saving, never the correctness layer: a Redis that is down or slow makes each call give up
// at its deadline and the callers go on without it.
package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// Claim values: the callback service already writes these, so they are part of the contract.
const (
	claimProcessing = "PROCESSING"
	claimDone       = "DONE"
)

// releaseScript deletes a claim only while it is still PROCESSING: a release must never wipe
// the DONE mark that sheds the platform's remaining retries.
var releaseScript = goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// Claimer implements reconcile.Claimer on Redis. Every call has a short deadline and no
// retries: a hung or dead Redis must not stall a pass or a callback, because the database's
// conditional update is the correctness layer and Redis only saves load.
type Claimer struct {
	rdb      goredis.UniversalClient
	timeout  time.Duration
	log      zerolog.Logger
	logEvery time.Duration

	failures   atomic.Uint64
	lastLogNs  atomic.Int64
	suppressed atomic.Uint64
}

// ClaimerOptions tune the claimer.
type ClaimerOptions struct {
	// CallTimeout bounds each Redis call (default 100ms).
	CallTimeout time.Duration
	// LogEvery is the minimum interval between two "Redis unavailable" log lines (default 30s).
	LogEvery time.Duration
}

// NewClient builds a go-redis client from a redis:// URL with the claimer's short
// timeouts and no retries.
func NewClient(url string, callTimeout time.Duration) (*goredis.Client, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	if callTimeout <= 0 {
		callTimeout = 100 * time.Millisecond
	}
	opt.DialTimeout = callTimeout
	opt.ReadTimeout = callTimeout
	opt.WriteTimeout = callTimeout
	opt.PoolTimeout = callTimeout
	opt.MaxRetries = -1 // go-redis: -1 disables retries
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true
	// go-redis prints every failed dial itself; the claimer already logs failures once per
	// interval, so the library's own per-call lines would only flood the log in an outage.
	quietRedisOnce.Do(func() { goredis.SetLogger(discardLogger{}) })
	return goredis.NewClient(opt), nil
}

var quietRedisOnce sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// NewClaimer wraps a client.
func NewClaimer(rdb goredis.UniversalClient, opts ClaimerOptions, log zerolog.Logger) *Claimer {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 100 * time.Millisecond
	}
	if opts.LogEvery <= 0 {
		opts.LogEvery = 30 * time.Second
	}
	return &Claimer{rdb: rdb, timeout: opts.CallTimeout, log: log, logEvery: opts.LogEvery}
}

// Failures counts Redis calls that failed (and were skipped) since start.
func (c *Claimer) Failures() uint64 { return c.failures.Load() }

// Peek implements reconcile.Claimer.
func (c *Claimer) Peek(ctx context.Context, key string) reconcile.ClaimState {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, err := c.rdb.Get(ctx, key).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return reconcile.ClaimFree
	case err != nil:
		c.unavailable("peek", err)
		return reconcile.ClaimUnavailable
	case v == claimDone:
		return reconcile.ClaimDone
	default:
		return reconcile.ClaimHeld
	}
}

// Claim implements reconcile.Claimer: SET key PROCESSING NX EX lease.
func (c *Claimer) Claim(ctx context.Context, key string, lease time.Duration) reconcile.ClaimState {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// SET NX with GET would tell DONE from PROCESSING in one round trip, but SET ... NX GET
	// needs Redis 7; the common case (key free) is one call either way.
	ok, err := c.rdb.SetNX(ctx, key, claimProcessing, lease).Result()
	if err != nil {
		c.unavailable("claim", err)
		return reconcile.ClaimUnavailable
	}
	if ok {
		return reconcile.ClaimAcquired
	}
	v, err := c.rdb.Get(ctx, key).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		// Expired between the two calls: report it held; the caller comes back later.
		return reconcile.ClaimHeld
	case err != nil:
		c.unavailable("claim", err)
		return reconcile.ClaimUnavailable
	case v == claimDone:
		return reconcile.ClaimDone
	}
	return reconcile.ClaimHeld
}

// MarkDone implements reconcile.Claimer.
func (c *Claimer) MarkDone(ctx context.Context, key string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.rdb.Set(ctx, key, claimDone, ttl).Err(); err != nil {
		c.unavailable("mark done", err)
	}
}

// Release implements reconcile.Claimer.
func (c *Claimer) Release(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := releaseScript.Run(ctx, c.rdb, []string{key}, claimProcessing).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		c.unavailable("release", err)
	}
}

// unavailable counts a failure and logs at most once per interval, with how many it kept
// quiet about: a Redis outage must not turn into one log line per order.
func (c *Claimer) unavailable(op string, err error) {
	c.failures.Add(1)
	now := time.Now().UnixNano()
	last := c.lastLogNs.Load()
	if now-last < int64(c.logEvery) || !c.lastLogNs.CompareAndSwap(last, now) {
		c.suppressed.Add(1)
		return
	}
	c.log.Warn().Err(err).Str("op", op).Uint64("suppressed", c.suppressed.Swap(0)).
		Uint64("failures_total", c.failures.Load()).
		Msg("redis unavailable: continuing without claims, the database decides")
}
