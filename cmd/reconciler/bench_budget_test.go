package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/sandbox"
	"github.com/payrecon/payrecon/worker"
)

// budgetCase is one measurement of the shared call budget: k worker processes on one
// account of qps (and, with slowOrders, a second account of the same platform whose every
// answer takes 2 s, in the same processes).
type budgetCase struct {
	name       string
	procs      int
	qps        float64
	orders     int
	slowOrders int
	// sandboxProcess runs the platform simulator as a separate `reconciler sandbox` process
	// (behind a recording proxy), so its signing competes with the workers for the CPUs.
	sandboxProcess bool
}

type budgetFigures struct {
	calls, throttled int
	steady           float64 // calls/s of the fast account over its steady interval
	peak             int     // its busiest second
	cpuPerOrder      time.Duration
}

// slowMchID is the second WeChat Pay merchant of the two-account cases.
const slowMchID = "1900000077"

// platformWorld is where the workers' platform calls go: a recording front door and how to
// set the sandbox up behind it.
type platformWorld struct {
	rec        *callRecorder
	url        string
	env        []string // the RECONCILER_* settings naming the accounts
	directEnv  []string // the same, straight to a sandbox process (no recorder in between)
	fastMch    string
	setPaid    func(p reconcile.Platform, merchant, otn string, amount int64)
	capAccount func(merchant string, qps float64)
	slowDown   func(merchant string, latency time.Duration)
}

// inProcessPlatform serves an in-process sandbox (with a second, slow WeChat Pay merchant
// when slow) behind the recorder.
func inProcessPlatform(b *testing.B, slow bool, qps float64) *platformWorld {
	var extra sandbox.Accounts
	if slow {
		acct, err := sandbox.GenerateWechatAccount(slowMchID, "wx0000000000000077", sandbox.WechatModePublicKey, 2048)
		if err != nil {
			b.Fatal(err)
		}
		extra.WechatPay = append(extra.WechatPay, acct)
	}
	sb, err := sandbox.New(sandbox.Options{Keys: benchKeys, Accounts: extra})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Close)
	rec := &callRecorder{next: sb}
	srv := httptest.NewServer(rec)
	b.Cleanup(srv.Close)
	file, err := sb.WriteAccountsFile(b.TempDir(), srv.URL, qps)
	if err != nil {
		b.Fatal(err)
	}
	return &platformWorld{
		rec: rec, url: srv.URL, env: sandbox.AccountsEnv(file), fastMch: sb.Identity().WechatMchID,
		setPaid: func(p reconcile.Platform, merchant, otn string, amount int64) {
			sb.SetScenario(p, otn, sandbox.Scenario{MerchantID: merchant, State: sandbox.StatePaid, AmountMinor: amount})
		},
		capAccount: func(merchant string, qps float64) { sb.SetAccountQPSCap(reconcile.WechatPay, merchant, qps) },
		slowDown: func(merchant string, d time.Duration) {
			sb.SetAccountFault(reconcile.WechatPay, merchant, sandbox.Fault{Latency: sandbox.Duration(d)})
		},
	}
}

// sandboxProcess starts `reconciler sandbox` with the bench key set and puts a recording
// reverse proxy in front of it. Only the default accounts are configured.
func sandboxProcess(b *testing.B, bin string) *platformWorld {
	dir := b.TempDir()
	files, err := sandbox.WriteKeyFiles(dir, benchKeys, sandbox.Identity{})
	if err != nil {
		b.Fatal(err)
	}
	addr := freeAddrB(b)
	cmd := exec.Command(bin, "sandbox", "--listen", addr, "--keys-dir", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // cleanup
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(base + "/sandbox/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("sandbox process did not come up:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	target, _ := url.Parse(base)
	rec := &callRecorder{next: httputil.NewSingleHostReverseProxy(target)}
	srv := httptest.NewServer(rec)
	b.Cleanup(srv.Close)
	// An unserved sandbox with the same keys only spells out the settings.
	names, err := sandbox.New(sandbox.Options{Keys: benchKeys})
	if err != nil {
		b.Fatal(err)
	}
	control := func(method, path string, body any) {
		js, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(js))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			b.Fatalf("sandbox control %s %s: %s", method, path, resp.Status)
		}
	}
	return &platformWorld{
		rec: rec, url: srv.URL, env: names.Env(srv.URL, files), directEnv: names.Env(base, files), fastMch: names.Identity().WechatMchID,
		setPaid: func(p reconcile.Platform, merchant, otn string, amount int64) {
			control(http.MethodPut, "/sandbox/scenarios/"+string(p)+"/"+otn, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: amount})
		},
		capAccount: func(_ string, qps float64) {
			control(http.MethodPut, "/sandbox/qps/wechatpay", map[string]float64{"qps": qps})
		},
		slowDown: func(_ string, d time.Duration) {
			control(http.MethodPut, "/sandbox/faults/wechatpay", sandbox.Fault{Latency: sandbox.Duration(d)})
		},
	}
}

func freeAddrB(b *testing.B) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	return addr
}

// runBudgetCase seeds the orders (all paid at the platform), runs the worker processes
// `reconciler run --shard i/k` at once and reads the figures at the platform.
func runBudgetCase(b *testing.B, c budgetCase) budgetFigures {
	bin := benchBinary(b)
	db := repotest.NewDB(b)
	rd := repotest.NewRedis(b)
	var w *platformWorld
	if c.sandboxProcess {
		w = sandboxProcess(b, bin)
	} else {
		w = inProcessPlatform(b, c.slowOrders > 0, c.qps)
	}
	w.capAccount(w.fastMch, c.qps)
	seed := func(merchant, prefix string, n int) {
		for i := 0; i < n; i++ {
			w.setPaid(reconcile.WechatPay, merchant, fmt.Sprintf("%s-%d", prefix, i), 1000+int64(i%500))
		}
		db.MustExec(`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at)
			SELECT 'wechatpay', $1, $2 || '-' || g, 1000 + g % 500, 'PENDING', now() - interval '10 minutes'
			FROM generate_series(0, $3 - 1) g`, merchant, prefix, n)
	}
	seed(w.fastMch, "BF", c.orders)
	if c.slowOrders > 0 {
		w.capAccount(slowMchID, c.qps)
		w.slowDown(slowMchID, 2*time.Second)
		seed(slowMchID, "BS", c.slowOrders)
	}
	db.MustExec(`VACUUM ANALYZE payment_orders`)

	env := append(os.Environ(), w.env...)
	env = append(env, "RECONCILER_DATABASE_URL="+db.URL, "RECONCILER_REDIS_URL="+rd.URL,
		"RECONCILER_CLAIM_PREFIX="+rd.Prefix, "RECONCILER_RATE_PREFIX="+rd.Prefix+"rate:",
		"RECONCILER_LOG_FORMAT=json", "RECONCILER_CONCURRENCY=16",
		fmt.Sprintf("RECONCILER_ALIPAY_QPS=%g", c.qps), fmt.Sprintf("RECONCILER_WECHATPAY_QPS=%g", c.qps))
	cmds := make([]*exec.Cmd, c.procs)
	logs := make([]*bytes.Buffer, c.procs)
	for i := range cmds {
		cmds[i] = exec.Command(bin, "run", "--shard", fmt.Sprintf("%d/%d", i, c.procs))
		cmds[i].Env = env
		logs[i] = &bytes.Buffer{}
		cmds[i].Stderr = logs[i]
		if err := cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
	}
	var cpu time.Duration
	var scanned int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b.Fatalf("run shard %d/%d: %v\n%s", i, c.procs, err, tail(logs[i].String(), 20))
		}
		for _, st := range processStats(logs[i]) {
			cpu += st.cpu()
			scanned += int64(st.num("scanned"))
		}
	}
	var paid int
	db.Get(&paid, `SELECT count(*) FROM payment_orders WHERE status = 'PAID'`) //nolint:errcheck
	if want := c.orders + c.slowOrders; paid != want || scanned != int64(want) {
		b.Fatalf("%d of %d orders repaired, %d scanned", paid, want, scanned)
	}
	calls := w.rec.account(w.fastMch)
	f := budgetFigures{calls: len(calls), throttled: calls.throttles(), peak: calls.maxInWindow(time.Second)}
	f.steady, _, _ = calls.steadyRate(500 * time.Millisecond)
	f.cpuPerOrder = cpu / time.Duration(scanned)
	return f
}

// BenchmarkBudget measures the shared call budget as the platform sees it: k processes on
// one account (target: 0.90-1.05 of its QPS, throttled <= 1%), a fast account beside a slow
// one (>= 0.90), and four processes against a sandbox running as its own process (loaded:
// the budget must still be spent). Run with `make bench` (-benchtime 1x).
func BenchmarkBudget(b *testing.B) {
	cases := []budgetCase{
		{name: "k1-Q200", procs: 1, qps: 200, orders: 1400},
		{name: "k2-Q200", procs: 2, qps: 200, orders: 1400},
		{name: "k4-Q200", procs: 4, qps: 200, orders: 1400},
		{name: "k8-Q200", procs: 8, qps: 200, orders: 1400},
		{name: "k1-Q200-slow-beside", procs: 1, qps: 200, orders: 1400, slowOrders: 48},
		{name: "k4-Q200-sandbox-proc", procs: 4, qps: 200, orders: 1400, sandboxProcess: true},
	}
	fmt.Printf("\n%-22s %5s %6s %7s %9s %7s %10s %9s %10s\n", "case", "procs", "qps", "calls", "steady/s", "share", "throttled", "peak 1s", "cpu/order")
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f := runBudgetCase(b, c)
				share := f.steady / c.qps
				thr := float64(f.throttled) / float64(max(1, f.calls))
				fmt.Printf("%-22s %5d %6.0f %7d %9.1f %7.3f %9.2f%% %9d %10s\n", c.name, c.procs, c.qps, f.calls, f.steady, share,
					100*thr, f.peak, f.cpuPerOrder.Round(time.Microsecond))
				b.ReportMetric(share, "share")
				b.ReportMetric(100*thr, "throttled%")
				b.ReportMetric(float64(f.peak)/c.qps, "peak1s/Q")
			}
		})
	}
}

// BenchmarkWorkerCPU runs passes inside the test process (the sandbox in its own process,
// so the test process is only the worker) and prints CPU per order paced by a budget
// (L=20ms, Q=100) against unthrottled (L=0). It is here to be profiled:
//
//	go test -run '^$' -bench WorkerCPU -benchtime 1x -cpuprofile cpu.out ./cmd/reconciler/
//	go tool pprof -top -cum reconciler.test cpu.out
//
// Paced, the same work costs more CPU: RSA signing (about two thirds of an order) runs on
// cold, idle cores, and every wake-up of a mostly idle process (budget grant, HTTP answer,
// SQL round trip) pays a futex wake and a scheduler search that a busy process does not.
func BenchmarkWorkerCPU(b *testing.B) {
	bin := benchBinary(b)
	cases := []struct {
		name    string
		orders  int
		latency time.Duration
		qps     float64
	}{
		{"paced-L20ms-Q100", 1500, 20 * time.Millisecond, 100},
		{"unthrottled-L0", 4000, 0, 100000},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			db := repotest.NewDB(b)
			rd := repotest.NewRedis(b)
			w := sandboxProcess(b, bin)
			w.capAccount(w.fastMch, c.qps)
			if c.latency > 0 {
				w.slowDown(w.fastMch, c.latency)
			}
			for i := 0; i < c.orders; i++ {
				w.setPaid(reconcile.WechatPay, w.fastMch, fmt.Sprintf("BP-%d", i), 1000+int64(i%500))
			}
			db.MustExec(`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at)
				SELECT 'wechatpay', $1, 'BP-' || g, 1000 + g % 500, 'PENDING', now() - interval '10 minutes'
				FROM generate_series(0, $2 - 1) g`, w.fastMch, c.orders)
			db.MustExec(`VACUUM ANALYZE payment_orders`)
			env := append(append([]string{}, w.directEnv...), "RECONCILER_DATABASE_URL="+db.URL, "RECONCILER_REDIS_URL="+rd.URL,
				"RECONCILER_CLAIM_PREFIX="+rd.Prefix, "RECONCILER_RATE_PREFIX="+rd.Prefix+"rate:",
				"RECONCILER_LOG_FORMAT=json", "RECONCILER_LOG_LEVEL=warn", "RECONCILER_CONCURRENCY=64",
				fmt.Sprintf("RECONCILER_ALIPAY_QPS=%g", c.qps), fmt.Sprintf("RECONCILER_WECHATPAY_QPS=%g", c.qps))
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				b.Setenv(k, v)
			}
			cpu0 := worker.ReadProcessStats().CPU
			start := time.Now()
			var stdout, stderr bytes.Buffer
			if code := Main(b.Context(), []string{"run"}, &stdout, &stderr); code != 0 {
				b.Fatalf("run exited %d\n%s", code, tail(stderr.String(), 20))
			}
			cpu1 := worker.ReadProcessStats().CPU
			wall := time.Since(start)
			perOrder := (cpu1 - cpu0) / time.Duration(c.orders)
			fmt.Printf("%-18s %6d orders in %6s (%5.0f/s): cpu/order %s\n", c.name, c.orders, wall.Round(time.Millisecond),
				float64(c.orders)/wall.Seconds(), perOrder.Round(time.Microsecond))
			b.ReportMetric(float64(perOrder.Microseconds()), "cpu-us/order")
		})
	}
}
