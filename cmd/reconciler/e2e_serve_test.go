package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient/sandbox"
	"github.com/payrecon/payrecon/reconcile"
)

// TestE2EServeSchedulesPassesThatNeverOverlap: `serve` with a schedule (given through
// RECONCILER_SCHEDULE, as a Deployment would) runs passes that repair missed payments; a
// pass slower than the schedule's interval is never joined by a second one; SIGTERM ends
// the server with exit 0.
func TestE2EServeSchedulesPassesThatNeverOverlap(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	var ids []string
	for _, p := range e2ePlatforms {
		for i := 1; i <= 2; i++ {
			otn := fmt.Sprintf("%s-sched-%d", p, i)
			e.seed(e2eOrder{platform: p, otn: otn, amount: 300 + int64(i), createdAt: e2eAgo(10 * time.Minute)})
			e.paidAtPlatform(p, otn, 300+int64(i))
			ids = append(ids, otn)
		}
		// Each query takes 700ms: a pass of 4 orders at concurrency 1 outlasts several ticks.
		e.sb.SetFault(p, sandbox.Fault{Latency: sandbox.Duration(700 * time.Millisecond)})
	}
	serve, base := e.startServe("RECONCILER_SCHEDULE=@every 1s", "RECONCILER_CONCURRENCY=1")

	e2eEventually(t, 30*time.Second, "every order repaired by scheduled passes", func() bool {
		return e.count(`SELECT count(*) FROM payment_orders WHERE status = 'PAID'`) == len(ids)
	})
	e2eEventually(t, 30*time.Second, "a scheduled pass to finish", func() bool {
		return e.count(`SELECT count(*) FROM reconcile_runs WHERE mode = 'scheduled' AND status = 'succeeded'`) >= 1
	})
	if n := e.count(`SELECT count(*) FROM reconcile_runs a JOIN reconcile_runs b ON a.id < b.id
		WHERE a.mode = 'scheduled' AND b.mode = 'scheduled' AND b.started_at < COALESCE(a.finished_at, now())`); n != 0 {
		t.Fatalf("%d pairs of scheduled passes overlapped", n)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"payrecon_last_success_timestamp_seconds", `payrecon_checks_total{outcome="repaired",platform="alipay"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	serve.signal(t, syscall.SIGTERM)
	serve.wait(t, 30*time.Second)
	serve.expect(t, 0)
	for _, p := range e2ePlatforms {
		for i := 1; i <= 2; i++ {
			if o := e.order(p, fmt.Sprintf("%s-sched-%d", p, i)); o.Status != string(reconcile.StatusPaid) || o.Events != 1 {
				t.Errorf("%s-sched-%d: %s with %d events", p, i, o.Status, o.Events)
			}
		}
	}
	e.invariants()
}
