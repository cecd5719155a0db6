package platformclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/payrecon/payrecon/reconcile"
)

// Defaults of the call policy; a zero field in PolicyConfig or Tuning means these.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxRetries       = 2
	DefaultBackoffBase      = 200 * time.Millisecond
	DefaultBackoffMax       = 5 * time.Second
	DefaultRateLimitRetries = 3
	DefaultBreakerFailures  = 5
	DefaultBreakerCooldown  = 30 * time.Second
)

// Tuning holds the call-policy knobs a deployment rarely touches. Zero values mean the
// defaults above; tests shrink them to keep the suite fast.
type Tuning struct {
	// BackoffBase and BackoffMax bound the exponential backoff between retries; each wait is
	// drawn uniformly from [0, min(BackoffMax, BackoffBase*2^attempt)] ("full jitter"), so
	// many workers that failed together do not come back together.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Budget, when set, paces every attempt instead of the Policy's own token bucket: the
	// account's call budget shared by every process (see redis.Budget). QPS still sets
	// how long a throttled call waits before it asks again.
	Budget Budget
	// OnThrottle, if set, is told of every throttle answer (WeChat 429, Alipay 40005).
	OnThrottle func()
	// RateLimitRetries is how many times a throttled call waits and asks again before the
	// throttle is returned as KindRateLimited. Negative: never retry a throttle.
	RateLimitRetries int
	// Burst is the token bucket's depth; default reconcile.BudgetBurst(QPS).
	Burst int
	// BreakerFailures consecutive retryable failures open the circuit.
	BreakerFailures int
	// BreakerCooldown is how long the circuit stays open before one probe call is let through.
	BreakerCooldown time.Duration
	// OnBreakerChange, if set, is told every state change (for metrics).
	OnBreakerChange func(platform reconcile.Platform, from, to string)
}

// PolicyConfig configures a Policy.
type PolicyConfig struct {
	Platform reconcile.Platform
	// QPS caps the calls per second, across every goroutine sharing the Policy. Zero or
	// negative: no cap.
	QPS float64
	// Timeout bounds each attempt (the HTTP round trip), not the waits between attempts.
	Timeout time.Duration
	// MaxRetries is how many times a retryable failure is retried after the first attempt.
	// Zero means DefaultMaxRetries; negative disables retries.
	MaxRetries int
	Tuning     Tuning
	// Logger is the client's: it names the platform and the account on every line already,
	// so the policy's lines add neither (a key given twice is refused by strict log stores).
	Logger zerolog.Logger
}

// Budget paces the calls of one merchant account: Wait returns once one call may be made,
// or with the context's error.
type Budget interface {
	Wait(ctx context.Context) error
}

// Policy runs platform calls under one per-platform rule set: a token bucket shared by all
// callers, a circuit breaker that makes a dead platform fail fast, a per-attempt timeout, and
// bounded retries for the failures that a retry can fix. A Policy is safe for concurrent use.
type Policy struct {
	platform   reconcile.Platform
	budget     Budget
	qps        float64
	onThrottle func()
	breaker    *gobreaker.TwoStepCircuitBreaker[struct{}]
	timeout    time.Duration
	maxRetries int
	rlRetries  int
	base, max  time.Duration
	log        zerolog.Logger
}

// NewPolicy fills defaults and builds the limiter and the breaker.
func NewPolicy(cfg PolicyConfig) *Policy {
	t := cfg.Tuning
	p := &Policy{
		platform:   cfg.Platform,
		timeout:    orDuration(cfg.Timeout, DefaultTimeout),
		maxRetries: cfg.MaxRetries,
		rlRetries:  t.RateLimitRetries,
		base:       orDuration(t.BackoffBase, DefaultBackoffBase),
		max:        orDuration(t.BackoffMax, DefaultBackoffMax),
		log:        cfg.Logger,
	}
	if p.maxRetries == 0 {
		p.maxRetries = DefaultMaxRetries
	} else if p.maxRetries < 0 {
		p.maxRetries = 0
	}
	if p.rlRetries == 0 {
		p.rlRetries = DefaultRateLimitRetries
	} else if p.rlRetries < 0 {
		p.rlRetries = 0
	}
	p.qps, p.onThrottle = cfg.QPS, t.OnThrottle
	p.budget = t.Budget
	if p.budget == nil {
		limit, burst := rate.Inf, reconcile.BudgetBurst(cfg.QPS)
		if cfg.QPS > 0 {
			limit = rate.Limit(cfg.QPS)
		}
		if t.Burst > 0 {
			burst = t.Burst
		}
		p.budget = rate.NewLimiter(limit, burst)
	}

	failures := uint32(DefaultBreakerFailures)
	if t.BreakerFailures > 0 {
		failures = uint32(t.BreakerFailures)
	}
	p.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        string(cfg.Platform),
		MaxRequests: 1,
		Timeout:     orDuration(t.BreakerCooldown, DefaultBreakerCooldown),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		// Only a failure that says "the platform is not answering" counts; see breakerOutcome.
		IsSuccessful: func(err error) bool { return !errors.Is(err, errBreakerFailure) },
		IsExcluded:   func(err error) bool { return errors.Is(err, errBreakerIgnore) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			p.log.Warn().Str("from", from.String()).Str("to", to.String()).
				Msg("platform circuit breaker changed state")
			if t.OnBreakerChange != nil {
				t.OnBreakerChange(cfg.Platform, from.String(), to.String())
			}
		},
	})
	return p
}

// Within is the policy for calls that also have a budget of their own inside this one's: a
// service provider's sub-merchant, whose own QPS nests inside the provider's. Each call waits
// for its own budget first and then for the provider's, so a sub-merchant held back by its
// own budget takes nothing of the provider's meanwhile and slows no other sub-merchant. The
// breaker, timeouts and retries stay the provider's. A nil own budget is p itself.
func (p *Policy) Within(own Budget) *Policy {
	if own == nil {
		return p
	}
	q := *p
	q.budget = nestedBudget{own: own, outer: p.budget}
	return &q
}

// AheadBudget is a Budget that can serve a call before the others waiting: one that already
// holds its own budget's grant. Waiting behind every other sub-merchant's call would put a
// varying delay between the two grants, and the platform would see the sub-merchant's calls
// bunched above its own QPS in some windows.
type AheadBudget interface {
	WaitAhead(ctx context.Context) error
}

// nestedBudget waits for own, then for outer, ahead of the calls without an own grant where
// outer can.
type nestedBudget struct{ own, outer Budget }

func (b nestedBudget) Wait(ctx context.Context) error {
	if err := b.own.Wait(ctx); err != nil {
		return err
	}
	if a, ok := b.outer.(AheadBudget); ok {
		return a.WaitAhead(ctx)
	}
	return b.outer.Wait(ctx)
}

// BreakerState reports "closed", "half-open" or "open", for metrics and health pages.
func (p *Policy) BreakerState() string { return p.breaker.State().String() }

// Timeout is the per-attempt timeout in force.
func (p *Policy) Timeout() time.Duration { return p.timeout }

var (
	errBreakerFailure = errors.New("counts as a breaker failure")
	errBreakerIgnore  = errors.New("ignored by the breaker")
)

// breakerOutcome tells the breaker what an attempt says about the platform's health. Only
// retryable failures (transport errors, timeouts, 5xx, SYSTEM_ERROR) mean "not answering".
// A throttle or a bad signature says nothing about liveness, and a caller that gave up
// (its context ended) says nothing either; every other answer proves the platform is up.
func breakerOutcome(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return errBreakerIgnore
	}
	switch reconcile.PlatformErrorKindOf(err) {
	case reconcile.KindRetryable:
		return errBreakerFailure
	case reconcile.KindRateLimited, reconcile.KindBadSignature:
		return errBreakerIgnore
	}
	return nil
}

// Do runs attempt under the policy. attempt gets a context bounded by the per-attempt
// timeout and must return nil or a *reconcile.PlatformError (anything else is treated as
// retryable). op names the call in logs.
func (p *Policy) Do(ctx context.Context, op string, attempt func(ctx context.Context) error) error {
	return p.DoTimeout(ctx, op, p.timeout, attempt)
}

// DoTimeout is Do with another per-attempt timeout: a bill download moves megabytes where a
// query moves a few KiB, under the same budget, breaker and retries.
func (p *Policy) DoTimeout(ctx context.Context, op string, timeout time.Duration, attempt func(ctx context.Context) error) error {
	var last error
	retries, throttles := 0, 0
	for n := 0; ; n++ {
		done, berr := p.breaker.Allow()
		if berr != nil {
			if last != nil {
				// The breaker opened while this call was retrying: report what we saw.
				return last
			}
			return NewError(p.platform, reconcile.KindUnavailable, "CIRCUIT_OPEN",
				"circuit breaker open after repeated failures; not calling the platform", berr)
		}
		if err := p.budget.Wait(ctx); err != nil {
			done(errBreakerIgnore)
			return p.contextError(ctx, err, last)
		}
		err := p.run(ctx, timeout, attempt)
		done(breakerOutcome(ctx, err))
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return p.contextError(ctx, ctx.Err(), last)
		}
		var wait time.Duration
		switch reconcile.PlatformErrorKindOf(err) {
		case reconcile.KindRetryable:
			if retries >= p.maxRetries {
				return err
			}
			wait = p.backoff(retries)
			retries++
		case reconcile.KindRateLimited:
			if p.onThrottle != nil {
				p.onThrottle()
			}
			if throttles >= p.rlRetries {
				return err
			}
			// A throttle asks us to slow down: wait at least one token interval on top of the
			// jittered backoff so the retry does not land in the same window.
			wait = p.backoff(throttles) + p.tokenInterval()
			throttles++
		default:
			return err
		}
		p.log.Debug().Str("op", op).Int("attempt", n+1).
			Dur("wait", wait).Str("kind", reconcile.PlatformErrorKindOf(err).String()).
			Msg("platform call failed; retrying")
		if err := reconcile.Sleep(ctx, wait); err != nil {
			return p.contextError(ctx, err, last)
		}
	}
}

// run executes one attempt under the per-attempt timeout.
func (p *Policy) run(ctx context.Context, timeout time.Duration, attempt func(ctx context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := attempt(actx)
	if err == nil {
		return nil
	}
	var pe *reconcile.PlatformError
	if !errors.As(err, &pe) {
		return NewError(p.platform, reconcile.KindRetryable, "", "unexpected failure", err)
	}
	return err
}

// contextError reports a caller that gave up: retryable (nothing is wrong with the order),
// with the context error in the chain so errors.Is(err, context.Canceled) works.
func (p *Policy) contextError(ctx context.Context, err error, last error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	msg := "gave up waiting"
	if last != nil {
		msg = fmt.Sprintf("gave up after: %v", last)
	}
	return NewError(p.platform, reconcile.KindRetryable, "CONTEXT", msg, err)
}

// backoff draws a full-jitter wait for the given retry number.
func (p *Policy) backoff(retry int) time.Duration {
	ceiling := p.base
	for i := 0; i < retry && ceiling < p.max; i++ {
		ceiling *= 2
	}
	if ceiling > p.max {
		ceiling = p.max
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

func (p *Policy) tokenInterval() time.Duration {
	if p.qps <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / p.qps)
}

func orDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
