package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/relay"
	"github.com/payrecon/payrecon/repo/redis"
	"github.com/payrecon/payrecon/statementrun"
)

func TestRelayMetricsCountWhatABatchDid(t *testing.T) {
	m := NewRelay(prometheus.NewRegistry())
	now := time.Now()
	m.Batch(relay.BatchReport{Taken: 4, Failed: 1, Took: 20 * time.Millisecond, Delivered: []relay.Delivery{
		{OutboxID: 1, Kind: "order.paid", CreatedAt: now.Add(-time.Second), AckedAt: now},
		{OutboxID: 2, Kind: "order.paid", CreatedAt: now.Add(-time.Second), AckedAt: now, Duplicate: true},
		{OutboxID: 3, Kind: "order.refunded", CreatedAt: now.Add(-time.Second), AckedAt: now},
	}})
	m.Lag(90 * time.Second)
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"published order.paid", testutil.ToFloat64(m.published.WithLabelValues("order.paid")), 2},
		{"published order.refunded", testutil.ToFloat64(m.published.WithLabelValues("order.refunded")), 1},
		{"duplicates", testutil.ToFloat64(m.duplicates), 1},
		{"publish errors", testutil.ToFloat64(m.publishErrs), 1},
		{"lag", testutil.ToFloat64(m.lag), 90},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// Every payrecon_* metric the alert rules use is one the binary exports: a renamed metric
// must not silently disarm an alert.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	rules, err := os.ReadFile("../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	m.reg.MustRegister(m.lastSuccess)
	rm := NewRelay(m.reg)
	rm.published.WithLabelValues("order.paid")
	// Vectors are gathered once they have a child.
	m.unconfigured.WithLabelValues("alipay", "2021")
	m.throttles.WithLabelValues("alipay", "2021")
	m.callbacks.WithLabelValues("alipay", "refused_signature")
	m.findings.WithLabelValues("alipay", "amount_mismatch")
	m.platformErrs.WithLabelValues("alipay", "2021", "unavailable")
	m.WatchBreaker("alipay", "2021", func() string { return "closed" })
	m.WatchClaims(redis.NewClaimer(nil, redis.ClaimerOptions{}, zerolog.Nop()))
	// The statement command exports its own two, from its own registry.
	sm := statementrun.NewMetrics(m.reg)
	sm.LastDay.WithLabelValues("alipay", "2021")
	sm.Lines.WithLabelValues("matched")
	exported := map[string]bool{}
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		exported[f.GetName()] = true
	}
	used := regexp.MustCompile(`payrecon_[a-z_]+`).FindAllString(string(rules), -1)
	if len(used) == 0 {
		t.Fatal("no payrecon metric in the rules")
	}
	for _, name := range used {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if !exported[name] && !exported[base] {
			t.Errorf("rules.yaml uses %s, which the reconciler does not export", name)
		}
	}
}
