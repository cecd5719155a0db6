package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
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
	// A scheduled pass takes the road `run` takes (worker.RunPass), which logs the process's
	// figures after every pass.
	e2eEventually(t, 10*time.Second, "a scheduled pass's process stats in the log", func() bool {
		return strings.Contains(serve.stderr.String(), `"message":"process stats"`)
	})
	if n := e.count(`SELECT count(*) FROM reconcile_runs a JOIN reconcile_runs b ON a.id < b.id
		WHERE a.mode = 'scheduled' AND b.mode = 'scheduled' AND b.started_at < COALESCE(a.finished_at, now())`); n != 0 {
		t.Fatalf("%d pairs of scheduled passes overlapped", n)
	}
	// Metrics are on the admin port only: the callback port is reachable from the internet.
	if resp, err := http.Get(base + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the callback port: %v %v, want 404", resp, err)
	}
	resp, err := http.Get(serve.admin + "/metrics")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics on the admin port: %v %v, want 200", resp, err)
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

// TestE2EServePortsAndHostileRequests: the callback port answers callbacks and probes and
// nothing else, the admin port metrics and probes; a 900 KB header is refused before any
// handler runs; a flood of forged callbacks is counted in full but logged sampled, each
// line clipped.
func TestE2EServePortsAndHostileRequests(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	serve, base := e.startServe()
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for url, want := range map[string]int{
		base + "/metrics": 404, base + "/healthz": 200, base + "/readyz": 200,
		serve.admin + "/metrics": 200, serve.admin + "/healthz": 200, serve.admin + "/readyz": 200,
		serve.admin + "/notify/alipay": 404,
	} {
		if got := get(url); got != want {
			t.Errorf("GET %s: %d, want %d", url, got, want)
		}
	}

	huge := strings.Repeat("A", 900<<10)
	req, _ := http.NewRequest(http.MethodPost, base+"/notify/wechatpay", strings.NewReader("{}"))
	req.Header.Set("Wechatpay-Serial", huge)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("900 KB header: %d, want 431", resp.StatusCode)
		}
		resp.Body.Close()
	} // a reset connection is a refusal too

	// Forged callbacks whose serial and request id are long and carry quotes, a tab and
	// non-ASCII bytes (HTTP itself keeps line breaks out of a header).
	const forged = 200
	hostile := "\"}\t{\"message\":\"forged\",\"序列号\":\"" + strings.Repeat("B", 4000)
	for range forged {
		req, _ := http.NewRequest(http.MethodPost, base+"/notify/wechatpay", strings.NewReader(`{"id":"x"}`))
		req.Header.Set("Wechatpay-Serial", hostile[:2000])
		req.Header.Set("Request-Id", hostile)
		req.Header.Set("Wechatpay-Signature", "bm90IGEgc2lnbmF0dXJl")
		req.Header.Set("Wechatpay-Timestamp", fmt.Sprint(time.Now().Unix()))
		req.Header.Set("Wechatpay-Nonce", "n")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 4 {
			t.Fatalf("forged callback answered %d", resp.StatusCode)
		}
	}
	resp, err := http.Get(serve.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`payrecon_callbacks_total{platform="wechatpay",result="refused_signature"} %d`, forged); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	serve.signal(t, syscall.SIGTERM)
	serve.wait(t, 30*time.Second)
	logs := serve.stderr.String()
	if strings.Contains(logs, `"message":"forged"`) || strings.Contains(logs, "序列号") {
		t.Error("a sender-chosen value reached the log unescaped")
	}
	if strings.Contains(logs, strings.Repeat("A", 200)) || strings.Contains(logs, strings.Repeat("B", 200)) {
		t.Error("a sender-chosen value was logged beyond 128 bytes")
	}
	lines := strings.Count(logs, `"event":"bad_signature"`)
	if lines == 0 || lines >= forged/2 {
		t.Errorf("%d bad-signature lines for %d forged callbacks: want them logged, sampled", lines, forged)
	}
}

// TestE2EServeWithoutPrivateKeysAnswersCallbacks: serve without --schedule verifies
// callbacks with the platforms' public keys and the API v3 key alone, so the merchant
// private keys need not be on the callback pods; the callbacks are applied and
// acknowledged. A command that signs requests (run, serve --schedule) refuses to start
// without them and names the missing one.
func TestE2EServeWithoutPrivateKeysAnswersCallbacks(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	noKeys := []string{"RECONCILER_ALIPAY_PRIVATE_KEY_FILE=", "RECONCILER_WECHATPAY_PRIVATE_KEY_FILE=", "RECONCILER_WECHATPAY_SERIAL_NO="}
	cbs := map[reconcile.Platform][]sandbox.Callback{}
	var orders []e2eOrder
	for _, p := range e2ePlatforms {
		o := e2eOrder{platform: p, otn: string(p) + "-nokey", amount: 4200, createdAt: e2eAgo(5 * time.Minute)}
		orders = append(orders, o)
		e.paidAtPlatform(p, o.otn, o.amount)
		cbs[p] = append(cbs[p], sandbox.Callback{Platform: p, OutTradeNo: o.otn})
	}
	e.seed(orders...)
	serve, base := e.startServe(noKeys...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, p := range e2ePlatforms {
		d, err := e.sb.Deliver(ctx, sandbox.DeliveryOptions{URL: base + "/notify/" + string(p), Copies: 1, TimeScale: 1000}, cbs[p]...)
		if err != nil {
			t.Fatal(err)
		}
		waitAllAcked(t, ctx, d, string(p))
	}
	for _, o := range orders {
		if got := e.order(o.platform, o.otn); got.Status != string(reconcile.StatusPaid) || got.Events != 1 {
			t.Errorf("%s: %s with %d events, want PAID once", o.otn, got.Status, got.Events)
		}
	}
	serve.signal(t, syscall.SIGTERM)
	serve.wait(t, 30*time.Second)
	serve.expect(t, 0)
	if n := e.sb.PlatformQueryCount(reconcile.Alipay) + e.sb.PlatformQueryCount(reconcile.WechatPay); n != 0 {
		t.Errorf("a verify-only serve called the platforms %d times", n)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "RECONCILER_ALIPAY_PRIVATE_KEY_FILE: is required"},
		{[]string{"serve", "--schedule", "@every 1m"}, "RECONCILER_ALIPAY_PRIVATE_KEY_FILE: is required"},
	} {
		p := e.run(noKeys, c.args...)
		if p.exitCode() != 2 || !strings.Contains(p.stderr.String(), c.want) {
			t.Errorf("%v without private keys: exit %d, want 2 naming %q:\n%s", c.args, p.exitCode(), c.want, e2eTail(p.stderr.String(), 2000))
		}
	}
}
