package main

import (
	"cmp"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/sandbox"
)

// nestedCase is one measurement of nested budgets: a WeChat Pay service provider with a
// budget of qps over len(subQPS) sub-merchants, sub-merchant i with its own budget subQPS[i]
// (0: none but the provider's), each with orders due, worked by procs processes.
type nestedCase struct {
	name         string
	procs        int
	qps          float64
	subQPS       []float64
	ordersPerSub int
	orders       []int // per sub-merchant, when they differ
}

func (c nestedCase) ordersOf(i int) int {
	if c.orders != nil {
		return c.orders[i]
	}
	return c.ordersPerSub
}

// attainable is the most calls per second the budgets allow together: the provider's, or
// less when every sub-merchant has a budget of its own and they add up to less.
func (c nestedCase) attainable() float64 {
	sum := 0.0
	for _, q := range c.subQPS {
		if q == 0 {
			return c.qps
		}
		sum += q
	}
	return min(sum, c.qps)
}

const benchSPMchID = "1900008109"

// runNestedCase runs the case and returns each sub-merchant's calls and all of them, as the
// platform received them.
func runNestedCase(b *testing.B, c nestedCase) (perSub []callSeries, all callSeries) {
	bin := benchBinary(b)
	db := repotest.NewDB(b)
	rd := repotest.NewRedis(b)
	subs, sb, rec, url := providerPlatform(b, len(c.subQPS), "19000083%02d")
	file := nestedAccountsFile(b, sb, url, c)
	// The platform holds both budgets too: a call over either is throttled (and counted).
	sb.SetAccountQPSCap(reconcile.WechatPay, benchSPMchID, c.qps)
	for i, sub := range subs {
		if c.subQPS[i] > 0 {
			sb.SetAccountQPSCap(reconcile.WechatPay, sub, c.subQPS[i])
		}
		for n := 0; n < c.ordersOf(i); n++ {
			sb.SetScenario(reconcile.WechatPay, fmt.Sprintf("NB%d-%d", i, n), sandbox.Scenario{MerchantID: sub, State: sandbox.StatePaid, AmountMinor: 1000 + int64(n%500)})
		}
		db.MustExec(`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at)
			SELECT 'wechatpay', $1, $2 || '-' || g, 1000 + g % 500, 'PENDING', now() - interval '10 minutes'
			FROM generate_series(0, $3 - 1) g`, sub, fmt.Sprintf("NB%d", i), c.ordersOf(i))
	}
	db.MustExec(`VACUUM ANALYZE payment_orders`)

	env := append(os.Environ(), sandbox.AccountsEnv(file)...)
	env = append(env, "RECONCILER_DATABASE_URL="+db.URL, "RECONCILER_REDIS_URL="+rd.URL,
		"RECONCILER_CLAIM_PREFIX="+rd.Prefix, "RECONCILER_RATE_PREFIX="+rd.Prefix+"rate:",
		"RECONCILER_LOG_FORMAT=json", "RECONCILER_CONCURRENCY=16")
	cmds := make([]*exec.Cmd, c.procs)
	for i := range cmds {
		cmds[i] = exec.Command(bin, "run", "--shard", fmt.Sprintf("%d/%d", i, c.procs))
		cmds[i].Env = env
		if err := cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b.Fatalf("run shard %d/%d: %v", i, c.procs, err)
		}
	}
	var paid, want int
	db.Get(&paid, `SELECT count(*) FROM payment_orders WHERE status = 'PAID'`) //nolint:errcheck
	for i := range subs {
		want += c.ordersOf(i)
	}
	if paid != want {
		b.Fatalf("%d of %d orders repaired", paid, want)
	}
	for _, sub := range subs {
		perSub = append(perSub, rec.account(sub))
	}
	return perSub, rec.account("")
}

// providerPlatform is an in-process sandbox behind a call recorder, playing a WeChat Pay
// service provider (benchSPMchID) with n sub-merchants named by format.
func providerPlatform(b *testing.B, n int, format string) (subs []string, sb *sandbox.Sandbox, rec *callRecorder, url string) {
	subs = make([]string, n)
	for i := range subs {
		subs[i] = fmt.Sprintf(format, i)
	}
	sp, err := sandbox.GenerateWechatAccount(benchSPMchID, "wx0000000000008109", sandbox.WechatModePublicKey, 2048)
	if err != nil {
		b.Fatal(err)
	}
	sp.SubMerchants = subs
	if sb, err = sandbox.New(sandbox.Options{Keys: benchKeys, Accounts: sandbox.Accounts{WechatPay: []sandbox.WechatAccount{sp}}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Close)
	rec = &callRecorder{next: sb}
	srv := httptest.NewServer(rec)
	b.Cleanup(srv.Close)
	return subs, sb, rec, srv.URL
}

// nestedAccountsFile is the sandbox's accounts file with the provider's qps and each
// sub-merchant's own.
func nestedAccountsFile(b *testing.B, sb *sandbox.Sandbox, url string, c nestedCase) string {
	path, err := sb.WriteAccountsFile(b.TempDir(), url, c.qps)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var doc map[string][]map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	for _, acct := range doc["wechatpay"] {
		if acct["sp_mchid"] != benchSPMchID {
			continue
		}
		subs, _ := acct["sub_merchants"].([]any)
		for i, s := range subs {
			if q := c.subQPS[i]; q > 0 {
				s.(map[string]any)["qps"] = q
			}
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkNestedBudgets measures a service provider's budget over its sub-merchants as the
// platform sees it: reached together (steady calls/s while every sub-merchant has work, as a
// share of what the budgets allow: the provider's QPS, or the sub-merchants' own budgets
// when those add up to less; target >= 0.90) and held (the busiest 10 s of the provider and
// of each sub-merchant with a budget of its own, target <= 1.05 of it), with a sub-merchant
// held back by its own budget slowing no other. Run with `make bench` (-benchtime 1x).
func BenchmarkNestedBudgets(b *testing.B) {
	cases := []nestedCase{
		{name: "Q200-4subs", procs: 1, qps: 200, subQPS: []float64{0, 0, 0, 0}, ordersPerSub: 700},
		{name: "Q200-4subs-own40", procs: 2, qps: 200, subQPS: []float64{40, 40, 40, 40}, ordersPerSub: 600},
		{name: "Q200-one-held-at-10", procs: 2, qps: 200, subQPS: []float64{10, 0, 0, 0}, orders: []int{150, 700, 700, 700}},
	}
	fmt.Printf("\n%-20s %5s %6s %7s %9s %7s %9s %s\n", "case", "procs", "qps", "calls", "steady/s", "share", "peak10s/Q", "sub-merchants: steady/s (own qps, peak10s/own)")
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				perSub, all := runNestedCase(b, c)
				steady, from, to := all.steadyRate(time.Second)
				// The provider's budget is judged while every sub-merchant still had work.
				if end := earliestEnd(perSub); end.Before(to) {
					steady = all.rateBetween(from, end)
				}
				share, peak := steady/c.attainable(), float64(all.maxInWindow(10*time.Second))/(10*c.qps)
				line := ""
				for j, s := range perSub {
					r, _, _ := s.steadyRate(time.Second)
					if q := c.subQPS[j]; q > 0 {
						line += fmt.Sprintf(" %.1f (%g, %.3f)", r, q, float64(s.maxInWindow(10*time.Second))/(10*q))
					} else {
						line += fmt.Sprintf(" %.1f", r)
					}
				}
				fmt.Printf("%-20s %5d %6.0f %7d %9.1f %7.3f %9.3f%s\n", c.name, c.procs, c.qps, len(all), steady, share, peak, line)
				b.ReportMetric(share, "share")
				b.ReportMetric(peak, "peak10s/Q")
			}
		})
	}
}

// earliestEnd is when the first sub-merchant ran out of work (its last call).
func earliestEnd(perSub []callSeries) time.Time {
	var end time.Time
	for _, s := range perSub {
		if len(s) > 0 && (end.IsZero() || s[len(s)-1].at.Before(end)) {
			end = s[len(s)-1].at
		}
	}
	return end
}

// scaleCase is a WeChat Pay service provider with subs sub-merchants configured, of which
// the first due have ordersEach orders due, at a provider budget of qps; the platform
// answers after latency, and the worker runs concurrency checks at once (16 when zero).
type scaleCase struct {
	name        string
	subs, due   int
	ordersEach  int
	qps         float64
	latency     time.Duration
	concurrency int
}

func (c scaleCase) orders() int { return c.due * c.ordersEach }

// scaleFigures are what one run of a scaleCase measured of the worker process.
type scaleFigures struct {
	wall        time.Duration
	rssMiB      float64
	cpuPerOrder time.Duration
	switches    float64 // the worker's context switches per order
	steady      float64 // provider calls/s over the steady interval; 0 when too few calls
}

// BenchmarkProviderScale measures what a pass costs when a service provider lists thousands
// of sub-merchants: with work due for a few, the process's peak RSS and time (target: under
// 100 MiB, cost following the due work, not the file); with work spread evenly over all of
// them, how much of the provider's budget the pass reaches (target >= 0.90). Run with
// `make bench` (-benchtime 1x).
func BenchmarkProviderScale(b *testing.B) {
	cases := []scaleCase{
		{name: "10k-subs-20-due", subs: 10000, due: 20, ordersEach: 5, qps: 200},
		{name: "10k-subs-all-due", subs: 10000, due: 10000, ordersEach: 1, qps: 400},
	}
	fmt.Printf("\n%-18s %6s %5s %7s %9s %7s %9s %9s %9s\n", "case", "subs", "due", "orders", "steady/s", "share", "wall", "rss MiB", "cpu/order")
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f := runScaleCase(b, c)
				rate, share := "-", "-" // too few calls for a steady rate
				if f.steady > 0 {
					rate, share = fmt.Sprintf("%.1f", f.steady), fmt.Sprintf("%.3f", f.steady/c.qps)
					b.ReportMetric(f.steady/c.qps, "share")
				}
				fmt.Printf("%-18s %6d %5d %7d %9s %7s %9s %9.1f %9s\n", c.name, c.subs, c.due, c.orders(), rate, share,
					f.wall.Round(10*time.Millisecond), f.rssMiB, f.cpuPerOrder.Round(time.Microsecond))
				b.ReportMetric(f.rssMiB, "rssMiB")
			}
		})
	}
}

func runScaleCase(b *testing.B, c scaleCase) scaleFigures {
	bin := benchBinary(b)
	db := repotest.NewDB(b)
	rd := repotest.NewRedis(b)
	subs, sb, rec, url := providerPlatform(b, c.subs, "18%08d")
	file, err := sb.WriteAccountsFile(b.TempDir(), url, c.qps)
	if err != nil {
		b.Fatal(err)
	}
	sb.SetAccountQPSCap(reconcile.WechatPay, benchSPMchID, c.qps)
	if c.latency > 0 {
		sb.SetFault(reconcile.WechatPay, sandbox.Fault{Latency: sandbox.Duration(c.latency)})
	}
	for i := 0; i < c.due; i++ {
		for n := 0; n < c.ordersEach; n++ {
			sb.SetScenario(reconcile.WechatPay, fmt.Sprintf("SC%d-%d", i, n), sandbox.Scenario{MerchantID: subs[i], State: sandbox.StatePaid, AmountMinor: 1000 + int64(n)})
		}
	}
	db.MustExec(`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at)
		SELECT 'wechatpay', '18' || lpad(s::text, 8, '0'), 'SC' || s || '-' || n, 1000 + n, 'PENDING', now() - interval '10 minutes'
		FROM generate_series(0, $1 - 1) s, generate_series(0, $2 - 1) n`, c.due, c.ordersEach)
	db.MustExec(`VACUUM ANALYZE payment_orders`)

	env := append(append(os.Environ(), sandbox.AccountsEnv(file)...), "RECONCILER_DATABASE_URL="+db.URL, "RECONCILER_REDIS_URL="+rd.URL,
		"RECONCILER_CLAIM_PREFIX="+rd.Prefix, "RECONCILER_RATE_PREFIX="+rd.Prefix+"rate:", "RECONCILER_LOG_FORMAT=json", fmt.Sprintf("RECONCILER_CONCURRENCY=%d", cmp.Or(c.concurrency, 16)))
	wall, st, _ := runWorker(b, bin, env)
	var paid int
	db.Get(&paid, `SELECT count(*) FROM payment_orders WHERE status = 'PAID'`) //nolint:errcheck
	if paid != c.orders() {
		b.Fatalf("%d of %d orders repaired", paid, c.orders())
	}
	f := scaleFigures{wall: wall, rssMiB: st.num("peak_rss_kib") / 1024, cpuPerOrder: st.cpu() / time.Duration(c.orders()),
		switches: st.num("context_switches") / float64(c.orders())}
	if all := rec.account(""); all.busy() > 5*time.Second {
		f.steady, _, _ = all.steadyRate(time.Second)
	}
	return f
}

// BenchmarkPacingCPU measures what pacing costs in CPU: the worker's CPU per order when the
// provider's budget paces the pass (Q=100) against the same pass unthrottled, for one
// sub-merchant with 1,500 orders and for 2,000 sub-merchants with one order each (target:
// paced <= 1.2x unthrottled, with thousands of accounts as with one). The two legs are the
// same pass, same accounts, orders and platform latency (20 ms), and differ in the budget
// alone, so a cost per account or per process weighs the same in both. The worker is a
// `reconciler run` process of its own, its CPU read from its own getrusage, start-up
// included. The unthrottled leg shares two cores with the sandbox, PostgreSQL and Redis, all
// busy, and its CPU per order wanders by a fifth from run to run (the paced leg's by a
// tenth), so each case runs paceRounds times, paced and unthrottled in turn, and reports the
// median ratio; the context switches per order beside it are the steadier figure. Run with
// `make bench` (-benchtime 1x).
func BenchmarkPacingCPU(b *testing.B) {
	const paced, unthrottled, paceRounds = 100, 100000, 5
	cases := []struct {
		name string
		subs int
		pass scaleCase
	}{
		{"1-sub-merchant", 1, scaleCase{subs: 1, due: 1, ordersEach: 1500, latency: 20 * time.Millisecond, concurrency: 64}},
		{"2000-sub-merchants", 2000, scaleCase{subs: 2000, due: 2000, ordersEach: 1, latency: 20 * time.Millisecond, concurrency: 64}},
	}
	fmt.Printf("\n%-20s %6s %14s %14s %12s %14s %12s %7s\n", "case", "subs", "paced cpu/ord", "paced calls/s", "paced cs/ord",
		"free cpu/ord", "free cs/ord", "ratio")
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ratios := make([]float64, 0, paceRounds)
				for range paceRounds {
					pacedPass, freePass := c.pass, c.pass
					pacedPass.qps, freePass.qps = paced, unthrottled
					p, u := runScaleCase(b, pacedPass), runScaleCase(b, freePass)
					ratio := float64(p.cpuPerOrder) / float64(u.cpuPerOrder)
					ratios = append(ratios, ratio)
					fmt.Printf("%-20s %6d %14s %14.1f %12.1f %14s %12.1f %6.2fx\n", c.name, c.subs, p.cpuPerOrder.Round(time.Microsecond),
						p.steady, p.switches, u.cpuPerOrder.Round(time.Microsecond), u.switches, ratio)
				}
				slices.Sort(ratios)
				fmt.Printf("%-20s median ratio %.2fx\n", c.name, ratios[len(ratios)/2])
				b.ReportMetric(ratios[len(ratios)/2], "paced/free")
			}
		})
	}
}
