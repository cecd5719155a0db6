package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payrecon/payrecon/relay"
)

// Relay exports the hand-off. The lag gauge is what the alert rules watch.
type Relay struct {
	published   *prometheus.CounterVec // kind
	duplicates  prometheus.Counter
	publishErrs prometheus.Counter
	batchDur    prometheus.Histogram
	delivery    prometheus.Histogram
	lag         prometheus.Gauge
}

// NewRelay registers the relay's instruments on reg.
func NewRelay(reg prometheus.Registerer) *Relay {
	m := &Relay{}
	m.published = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_relay_messages_published_total",
		Help: "Outbox messages acknowledged by JetStream and marked dispatched, by kind."}, []string{"kind"})
	m.duplicates = prometheus.NewCounter(prometheus.CounterOpts{Name: "payrecon_relay_duplicates_total",
		Help: "Acknowledgements the stream flagged as duplicate: re-publishes after a crash or a lost acknowledgement."})
	m.publishErrs = prometheus.NewCounter(prometheus.CounterOpts{Name: "payrecon_relay_publish_errors_total",
		Help: "Outbox messages taken but not acknowledged (NATS down, slow or refusing); they stay undispatched."})
	m.batchDur = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "payrecon_relay_batch_duration_seconds",
		Help: "One batch: take, publish, wait for the acknowledgements, mark.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)})
	m.delivery = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "payrecon_relay_delivery_lag_seconds",
		Help: "From the outbox row's commit to JetStream's acknowledgement.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 20)})
	m.lag = prometheus.NewGauge(prometheus.GaugeOpts{Name: "payrecon_outbox_oldest_undispatched_age_seconds",
		Help: "Age of the oldest fulfillment_outbox row not yet dispatched (0 when none waits): the hand-off's lag."})
	reg.MustRegister(m.published, m.duplicates, m.publishErrs, m.batchDur, m.delivery, m.lag)
	return m
}

// Batch implements relay.Observer.
func (m *Relay) Batch(b relay.BatchReport) {
	m.batchDur.Observe(b.Took.Seconds())
	m.publishErrs.Add(float64(b.Failed))
	for _, d := range b.Delivered {
		m.published.WithLabelValues(d.Kind).Inc()
		if d.Duplicate {
			m.duplicates.Inc()
		}
		m.delivery.Observe(d.AckedAt.Sub(d.CreatedAt).Seconds())
	}
}

// Lag implements relay.Observer.
func (m *Relay) Lag(d time.Duration) { m.lag.Set(d.Seconds()) }
