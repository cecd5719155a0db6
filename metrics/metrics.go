// Package metrics is the Prometheus instruments payrecon exports: the pass's checks and
// findings, callbacks, platform calls and budget waits, breakers, claim-store failures, the
// backlog, the last run's counters and the relay's hand-off. Nothing else registers a metric.
package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Metrics is the process's Prometheus registry and the instruments payrecon exports.
type Metrics struct {
	reg *prometheus.Registry

	checks       *prometheus.CounterVec   // platform, outcome
	findings     *prometheus.CounterVec   // platform, kind
	callbacks    *prometheus.CounterVec   // platform, result
	platformDur  *prometheus.HistogramVec // platform, merchant_id, op
	platformErrs *prometheus.CounterVec   // platform, merchant_id, class
	throttles    *prometheus.CounterVec   // platform, merchant_id
	budgetWait   *prometheus.CounterVec   // platform, merchant_id
	unconfigured *prometheus.GaugeVec     // platform, merchant_id
	subMerchants *prometheus.GaugeVec     // platform, merchant_id, provider
	oldestAge    prometheus.Gauge
	lastSuccess  prometheus.Gauge
	runCounts    *prometheus.GaugeVec // counter
	takenOver    prometheus.Counter
}

// New registers every instrument, with the Go and process collectors, on a registry of its own.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.checks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_checks_total",
		Help: "Orders and refunds checked by a pass, by outcome (repaired, closed, unchanged, still_pending, mismatch, claimed_elsewhere, error, refund_repaired)."},
		[]string{"platform", "outcome"})
	m.findings = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_mismatches_total",
		Help: "Findings recorded (or seen again), by kind."}, []string{"platform", "kind"})
	m.callbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_callbacks_total",
		Help: "Callbacks received, by what we answered (acked, ignored, refused_signature, refused_malformed, refused_busy, refused_pending, refused_error, refused_not_configured)."},
		[]string{"platform", "result"})
	m.platformDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "payrecon_platform_request_duration_seconds",
		Help: "Platform calls (with their retries and budget waits), by merchant account and operation.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)},
		[]string{"platform", "merchant_id", "op"})
	m.platformErrs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_platform_errors_total",
		Help: "Failed platform calls by merchant account and error class (retryable, rate_limited, bad_signature, config, unavailable, permanent)."},
		[]string{"platform", "merchant_id", "class"})
	m.throttles = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_platform_throttled_total",
		Help: "Throttle answers (WeChat Pay 429, Alipay 40005) by merchant account: slow down, never a result."},
		[]string{"platform", "merchant_id"})
	m.budgetWait = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_platform_budget_wait_seconds_total",
		Help: "Time platform calls spent waiting for the merchant account's shared call budget."},
		[]string{"platform", "merchant_id"})
	m.unconfigured = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "payrecon_unconfigured_pending_orders",
		Help: "PENDING orders in the last pass's window whose merchant account is not configured: no pass checks them."},
		[]string{"platform", "merchant_id"})
	m.subMerchants = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "payrecon_sub_merchant_info",
		Help: "1 for each service provider's sub-merchant this process reconciles: merchant_id is the sub-merchant (as every other metric names it), provider the third-party app or sp_mchid that calls for it. Join on (platform, merchant_id) to group any account metric by provider."},
		[]string{"platform", "merchant_id", "provider"})
	m.oldestAge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "payrecon_oldest_pending_order_age_seconds",
		Help: "Age of the oldest PENDING order inside the lookback window."})
	m.lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{Name: "payrecon_last_success_timestamp_seconds",
		Help: "When the last pass completed successfully (unix seconds)."})
	m.runCounts = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "payrecon_last_run_orders",
		Help: "Counters of the last pass (scanned, repaired, closed, unchanged, still_pending, mismatches, claimed_elsewhere, errors, refunds_repaired)."},
		[]string{"counter"})
	m.takenOver = prometheus.NewCounter(prometheus.CounterOpts{Name: "payrecon_runs_taken_over_total",
		Help: "Runs of dead processes (lock session gone, row still running) whose leases a pass freed at once and marked interrupted."})
	m.reg.MustRegister(m.takenOver, m.checks, m.findings, m.callbacks, m.platformDur, m.platformErrs, m.throttles, m.budgetWait,
		m.unconfigured, m.subMerchants, m.oldestAge, m.runCounts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// WatchBreaker exports a merchant account's circuit breaker state (1 = open).
func (m *Metrics) WatchBreaker(p reconcile.Platform, merchantID string, state func() string) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "payrecon_platform_breaker_open",
		Help:        "1 while the merchant account's circuit breaker is open (calls fail fast), 0.5 half-open, 0 closed.",
		ConstLabels: prometheus.Labels{"platform": string(p), "merchant_id": merchantID}}, func() float64 {
		switch state() {
		case "open":
			return 1
		case "half-open":
			return 0.5
		}
		return 0
	}))
}

// SubMerchant records that merchantID is reached through provider: the metrics keep naming
// the sub-merchant by its own id, and payrecon_sub_merchant_info names its provider.
func (m *Metrics) SubMerchant(p reconcile.Platform, merchantID, provider string) {
	m.subMerchants.WithLabelValues(string(p), merchantID, provider).Set(1)
}

// ClaimStore is the Redis claimer, as far as its failures go.
type ClaimStore interface{ Failures() uint64 }

// WatchClaims exports how often Redis failed (and the apply path went on without it).
func (m *Metrics) WatchClaims(c ClaimStore) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "payrecon_claim_store_failures_total",
		Help: "Redis claim calls that failed or timed out; the database decided alone."}, func() float64 { return float64(c.Failures()) }))
}

// Checked implements reconcile.Observer.
func (m *Metrics) Checked(c reconcile.Check) {
	p := string(c.Order.Platform)
	m.checks.WithLabelValues(p, string(c.Tally())).Inc()
	if c.Applied.Outcome == reconcile.OutcomeMismatch {
		m.findings.WithLabelValues(p, string(c.Applied.Mismatch)).Inc()
	}
}

// Callback counts one callback by platform and what was answered.
func (m *Metrics) Callback(p reconcile.Platform, result string) {
	m.callbacks.WithLabelValues(string(p), result).Inc()
}

// TimeBudget counts the time an account's calls wait for its budget.
func (m *Metrics) TimeBudget(acct reconcile.AccountKey, b platformclient.Budget) platformclient.Budget {
	return &timedBudget{Budget: b, wait: m.budgetWait.WithLabelValues(string(acct.Platform), acct.MerchantID)}
}

type timedBudget struct {
	platformclient.Budget
	wait prometheus.Counter
}

func (b *timedBudget) Wait(ctx context.Context) error {
	start := time.Now()
	err := b.Budget.Wait(ctx)
	b.wait.Add(time.Since(start).Seconds())
	return err
}

// WaitAhead implements platformclient.AheadBudget: it goes ahead where the budget it times
// can, and waits in turn where it cannot.
func (b *timedBudget) WaitAhead(ctx context.Context) error {
	a, ok := b.Budget.(platformclient.AheadBudget)
	if !ok {
		return b.Wait(ctx)
	}
	start := time.Now()
	err := a.WaitAhead(ctx)
	b.wait.Add(time.Since(start).Seconds())
	return err
}

func (m *Metrics) RecordRun(run reconcile.Run) {
	m.takenOver.Add(float64(run.DeadRuns()))
	m.unconfigured.Reset()
	for _, u := range run.Unconfigured {
		m.unconfigured.WithLabelValues(string(u.Account.Platform), u.Account.MerchantID).Set(float64(u.Orders))
	}
	for _, rc := range reconcile.RunCounters {
		m.runCounts.WithLabelValues(rc.Name).Set(float64(rc.Value(run.Counts)))
	}
}

// Instrument wraps a platform client to time its calls and count its errors by class.
func (m *Metrics) Instrument(c reconcile.PlatformClient) reconcile.PlatformClient {
	return &instrumentedClient{PlatformClient: c, m: m}
}

type instrumentedClient struct {
	reconcile.PlatformClient
	m *Metrics
}

func (c *instrumentedClient) observe(op string, start time.Time, err error) {
	p, merchant := string(c.Platform()), c.MerchantID()
	c.m.platformDur.WithLabelValues(p, merchant, op).Observe(time.Since(start).Seconds())
	if err != nil {
		class := reconcile.PlatformErrorKindOf(err).String()
		if errors.Is(err, context.Canceled) {
			class = "cancelled"
		}
		c.m.platformErrs.WithLabelValues(p, merchant, class).Inc()
	}
}

func (c *instrumentedClient) Query(ctx context.Context, outTradeNo string) (reconcile.Result, error) {
	start := time.Now()
	r, err := c.PlatformClient.Query(ctx, outTradeNo)
	c.observe("query", start, err)
	return r, err
}

func (c *instrumentedClient) Close(ctx context.Context, outTradeNo string) error {
	start := time.Now()
	err := c.PlatformClient.Close(ctx, outTradeNo)
	c.observe("close", start, err)
	return err
}

func (c *instrumentedClient) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (reconcile.RefundResult, error) {
	start := time.Now()
	r, err := c.PlatformClient.QueryRefund(ctx, outTradeNo, outRefundNo)
	c.observe("query_refund", start, err)
	return r, err
}

// Runtime is a registry of the Go and process collectors alone: `reconciler console`'s
// /metrics. The console checks no order, so it exports none of the worker's instruments,
// whose zeros would sit beside the real figures of serve and the passes.
func Runtime() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Registry is where every instrument is registered: what /metrics and the Pushgateway get.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// OnThrottle counts the account's throttle answers.
func (m *Metrics) OnThrottle(acct reconcile.AccountKey) func() {
	c := m.throttles.WithLabelValues(string(acct.Platform), acct.MerchantID)
	return c.Inc
}

// SetOldestPendingAge sets the backlog gauge.
func (m *Metrics) SetOldestPendingAge(d time.Duration) { m.oldestAge.Set(d.Seconds()) }

// ServeLastSuccess registers the last-success time for scraping (serve). Run mode pushes it
// instead, and only after a pass that succeeded.
func (m *Metrics) ServeLastSuccess() { m.reg.MustRegister(m.lastSuccess) }

// MarkSuccess sets the last-success time to now.
func (m *Metrics) MarkSuccess() { m.lastSuccess.SetToCurrentTime() }

// LastSuccess is the last-success gauge, for a push that includes it.
func (m *Metrics) LastSuccess() prometheus.Collector { return m.lastSuccess }
