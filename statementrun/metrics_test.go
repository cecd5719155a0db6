package statementrun

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/payrecon/payrecon/reconcile"
)

// TestMetrics: a reconciled day sets the account's last-day gauge and counts its lines by
// outcome; a dry run moves nothing; a failed day counts its lines but not as reconciled.
func TestMetrics(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	acct := reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: alipayMerchant}
	day := DayResult{Account: acct, Day: testDay, LastDay: testDay.Start, Figures: reconcile.StatementFigures{Lines: 9},
		Tally: Tally{Matched: 5, Repaired: 2, Found: 1, Errors: 1}}
	m.DayReconciled(day)
	dry := day
	dry.DryRun = true
	m.DayReconciled(dry)
	failed := day
	failed.Day, failed.LastDay, failed.Err = testDay.Prev(), time.Time{}, errors.New("1 line not applied")
	m.DayReconciled(failed)

	for outcome, want := range map[string]float64{"matched": 10, "repaired": 4, "mismatch": 2, "error": 2, "claimed_elsewhere": 0} {
		if got := testutil.ToFloat64(m.Lines.WithLabelValues(outcome)); got != want {
			t.Errorf("lines{outcome=%s} = %v, want %v", outcome, got, want)
		}
	}
	if got := testutil.ToFloat64(m.LastDay.WithLabelValues("alipay", alipayMerchant)); got != float64(testDay.Start.Unix()) {
		t.Errorf("last day = %v, want %d (the failed earlier day must not move it)", got, testDay.Start.Unix())
	}
}
