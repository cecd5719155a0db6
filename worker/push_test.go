package worker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/metrics"
	"github.com/payrecon/payrecon/reconcile"
)

// TestPushMetricsAddsAndSendsLastSuccessOnlyOnSuccess plays the Pushgateway: run mode must
// push-add (POST, not PUT: other metrics of the group survive) grouped by job and shard, and
// include the last-success time only when the pass succeeded, so an alert on its age fires
// when passes keep failing.
func TestPushMetricsAddsAndSendsLastSuccessOnlyOnSuccess(t *testing.T) {
	t.Parallel()
	type push struct{ method, path, body string }
	var (
		mu     sync.Mutex
		pushes []push
	)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		pushes = append(pushes, push{r.Method, r.URL.Path, string(b)})
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer gw.Close()

	a := &App{cfg: config.Config{PushgatewayURL: gw.URL, Shard: reconcile.Shard{Index: 2, Count: 4}}, log: zerolog.Nop(), metrics: metrics.New()}
	run := reconcile.Run{ID: 7, Counts: reconcile.CounterValues{Scanned: 5, Repaired: 2}}
	a.metrics.RecordRun(run)
	a.pushMetrics(run, false)
	a.pushMetrics(run, true)

	mu.Lock()
	defer mu.Unlock()
	if len(pushes) != 2 {
		t.Fatalf("%d pushes, want 2", len(pushes))
	}
	for i, p := range pushes {
		if p.method != http.MethodPost || p.path != "/metrics/job/payrecon_reconciler/shard/2-of-4" {
			t.Fatalf("push %d: %s %s, want POST (push-add) grouped by job and shard", i, p.method, p.path)
		}
		if !strings.Contains(p.body, "payrecon_last_run_orders") {
			t.Fatalf("push %d lacks the run counters", i)
		}
	}
	if strings.Contains(pushes[0].body, "payrecon_last_success_timestamp_seconds") {
		t.Fatal("a failed pass pushed a last-success time")
	}
	if !strings.Contains(pushes[1].body, "payrecon_last_success_timestamp_seconds") {
		t.Fatal("a successful pass did not push its last-success time")
	}
}
