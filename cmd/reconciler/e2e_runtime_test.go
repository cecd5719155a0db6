package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/worker"
)

// A paced `run` re-executes itself with GODEBUG's schedtrace (the runtime's monitor thread
// then skips its deep sleep) and runs on one P when the due accounts' budgets need less than
// half a core; an operator's own GODEBUG schedtrace and GOMAXPROCS win. Either way the
// process's stderr carries JSON log lines only, and the pass does its work.
func TestE2EPacedRuntime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		extra     []string
		wantDebug string
		wantProcs float64
	}{
		{"tuned to the budget", nil, worker.PacedSchedtrace, 1},
		{"the operator's settings win", []string{"GODEBUG=schedtrace=0", "GOMAXPROCS=2"}, "schedtrace=0", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newE2EEnv(t)
			otn := "wechatpay-paced-1"
			e.paidAtPlatform(reconcile.WechatPay, otn, 4200)
			e.seed(e2eOrder{platform: reconcile.WechatPay, otn: otn, amount: 4200, createdAt: e2eAgo(10 * time.Minute)})

			p := e.run(append([]string{"RECONCILER_WECHATPAY_QPS=50"}, c.extra...), "run")
			p.expect(t, 0)
			if got := e.order(reconcile.WechatPay, otn); got.Status != "PAID" || got.Outbox != 1 {
				t.Fatalf("order %+v, want PAID with its outbox row", got)
			}
			var sized map[string]any
			for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
				var ev map[string]any
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Errorf("stderr line is not JSON: %q", line)
					continue
				}
				if ev["message"] == "scheduler sized to the call budgets of the accounts with due work" {
					sized = ev
				}
			}
			if sized == nil {
				t.Fatalf("no log line sizing the scheduler:\n%s", p.stderr.String())
			}
			if sized["godebug"] != c.wantDebug || sized["gomaxprocs"] != c.wantProcs || sized["due_budget_qps"] != float64(50) || sized["due_accounts"] != float64(1) {
				t.Errorf("scheduler line %v; want godebug %q, gomaxprocs %v, due_budget_qps 50 over 1 account", sized, c.wantDebug, c.wantProcs)
			}
		})
	}
}
