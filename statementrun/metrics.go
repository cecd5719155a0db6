package statementrun

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the statement run's instruments:
// payrecon_statement_last_day_timestamp_seconds{platform,merchant}, the start of the newest
// day whose bill was reconciled for the account (re-running an older day does not move it back) (an alert on its age fires when bills stop
// being reconciled), and payrecon_statement_lines_total{outcome}.
type Metrics struct {
	LastDay *prometheus.GaugeVec
	Lines   *prometheus.CounterVec
}

// NewMetrics registers the statement metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LastDay: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "payrecon_statement_last_day_timestamp_seconds",
			Help: "Start (unix seconds) of the last business day whose trade bill was reconciled, by account."},
			[]string{"platform", "merchant"}),
		Lines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payrecon_statement_lines_total",
			Help: "Bill lines reconciled, by outcome (matched, repaired, mismatch, claimed_elsewhere, error)."},
			[]string{"outcome"}),
	}
	reg.MustRegister(m.LastDay, m.Lines)
	return m
}

// DayReconciled implements Observer. A dry run or a failed day moves nothing: the gauge says
// what was really reconciled.
func (m *Metrics) DayReconciled(d DayResult) {
	if d.DryRun || d.Figures.Lines == 0 && d.Err != nil {
		return
	}
	t := d.Tally
	for outcome, n := range map[string]int{"matched": t.Matched, "repaired": t.Repaired, "mismatch": t.Found,
		"claimed_elsewhere": t.ClaimedElsewhere, "error": t.Errors} {
		m.Lines.WithLabelValues(outcome).Add(float64(n))
	}
	if !d.LastDay.IsZero() {
		m.LastDay.WithLabelValues(string(d.Account.Platform), d.Account.MerchantID).Set(float64(d.LastDay.Unix()))
	}
}
