package main

// End-to-end tests: the reconciler binary is built once per test binary and run as a
// subprocess, configured only through RECONCILER_* variables, against a private PostgreSQL
// database and Redis prefix (repotest) and the platform sandbox on a loopback httptest
// server. Assertions read the database, the sandbox counters, Redis, exit codes and output.
//
// Names here start with e2e so they never collide with the other tests of package main.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/sandbox"
)

// TestMain only removes the binaries the e2e tests and the benchmarks build (each lazily,
// so tests that do not need one never pay for its build).
func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{e2eBinDir, benchBinDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

var (
	e2eBuildOnce sync.Once
	e2eBinDir    string
	e2eBinPath   string
	e2eBuildErr  error

	e2eKeysOnce sync.Once
	e2eKeySet   *sandbox.Keys
	e2eKeysErr  error
)

// e2eBinary builds ./cmd/reconciler once per test binary, with the race detector when the
// tests themselves run with -race (a race in the worker then fails the test: exit code 66
// and a DATA RACE report on stderr).
func e2eBinary(t *testing.T) string {
	t.Helper()
	e2eBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "payrecon-e2e-bin-")
		if err != nil {
			e2eBuildErr = err
			return
		}
		e2eBinDir = dir
		e2eBinPath = filepath.Join(dir, "reconciler")
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		args := []string{"build", "-o", e2eBinPath}
		if e2eRace {
			args = append(args, "-race")
		}
		args = append(args, ".")
		cmd := exec.Command(goTool, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			e2eBuildErr = fmt.Errorf("go build ./cmd/reconciler: %v\n%s", err, out.String())
		}
	})
	if e2eBuildErr != nil {
		t.Fatal(e2eBuildErr)
	}
	return e2eBinPath
}

// e2eKeys is one sandbox key set per test binary: RSA key generation is slow.
func e2eKeys(t *testing.T) *sandbox.Keys {
	t.Helper()
	e2eKeysOnce.Do(func() { e2eKeySet, e2eKeysErr = sandbox.GenerateKeys(2048) })
	if e2eKeysErr != nil {
		t.Fatal(e2eKeysErr)
	}
	return e2eKeySet
}

// e2eEnv is one test's world: its database, Redis prefix, sandbox and the base settings.
type e2eEnv struct {
	t     *testing.T
	bin   string
	db    *repotest.DB
	redis *repotest.Redis
	sb    *sandbox.Sandbox
	sbURL string
	files sandbox.KeyFiles
	base  []string

	mu    sync.Mutex
	procs []*e2eProc
}

func newE2EEnv(t *testing.T) *e2eEnv {
	t.Helper()
	bin := e2eBinary(t)
	e := &e2eEnv{t: t, bin: bin, db: repotest.NewDB(t), redis: repotest.NewRedis(t)}
	sb, err := sandbox.New(sandbox.Options{Keys: e2eKeys(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	e.sb, e.sbURL = sb, srv.URL
	if e.files, err = sb.WriteKeyFiles(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	e.base = append(sb.Env(e.sbURL, e.files),
		"RECONCILER_DATABASE_URL="+e.db.URL,
		"RECONCILER_REDIS_URL="+e.redis.URL,
		"RECONCILER_CLAIM_PREFIX="+e.redis.Prefix,
		"RECONCILER_LOG_FORMAT=json",
		// The default 10 calls/s per platform would only make the tests slow; the QPS
		// budget has its own tests.
		"RECONCILER_ALIPAY_QPS=2000",
		"RECONCILER_WECHATPAY_QPS=2000",
	)
	// Registered after repotest's cleanups, so it runs first: processes stop before their
	// database is dropped, hanging sandbox handlers are released before the server closes.
	t.Cleanup(func() {
		e.mu.Lock()
		procs := append([]*e2eProc(nil), e.procs...)
		e.mu.Unlock()
		for _, p := range procs {
			p.kill()
		}
		for _, p := range procs {
			out, errOut := p.stdout.String(), p.stderr.String()
			if strings.Contains(errOut, "WARNING: DATA RACE") {
				t.Errorf("%s: data race in the reconciler:\n%s", p.name, e2eTail(errOut, 20000))
			}
			if key, line := repeatedLogKey(errOut); key != "" {
				t.Errorf("%s: a log line names %q twice:\n%s", p.name, key, line)
			}
			if t.Failed() {
				t.Logf("---- %s (exit %d, %s)\nstdout:\n%s\nstderr (JSON logs):\n%s", p.name, p.exitCode(), p.took,
					e2eTail(out, 4000), e2eTail(errOut, 12000))
			}
		}
		sb.Close()
		srv.Close()
	})
	return e
}

func e2eTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...(" + fmt.Sprint(len(s)-n) + " bytes cut)...\n" + s[len(s)-n:]
}

// e2eProc is one reconciler subprocess.
type e2eProc struct {
	name   string
	cmd    *exec.Cmd
	stdout e2eBuffer
	stderr e2eBuffer
	start  time.Time
	done   chan struct{}
	code   int
	took   time.Duration
	admin  string // serve's admin port, as a base URL
}

// e2eBuffer is a bytes.Buffer safe to read while the process writes.
type e2eBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *e2eBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *e2eBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// environ is the process environment: the parent's minus every RECONCILER_* variable, then
// the base settings, then extra ("KEY=value"; a later one wins).
func (e *e2eEnv) environ(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECONCILER_") && !strings.HasPrefix(kv, "JOB_COMPLETION_INDEX=") {
			env = append(env, kv)
		}
	}
	env = append(env, e.base...)
	return append(env, extra...)
}

// start runs the binary with args in the background.
func (e *e2eEnv) start(extra []string, args ...string) *e2eProc {
	e.t.Helper()
	p := &e2eProc{name: "reconciler " + strings.Join(args, " "), done: make(chan struct{}), code: -1}
	p.cmd = exec.Command(e.bin, args...)
	p.cmd.Env = e.environ(extra)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", p.name, err)
	}
	e.mu.Lock()
	p.name = fmt.Sprintf("#%d %s", len(e.procs)+1, p.name)
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	go func() {
		err := p.cmd.Wait()
		p.took = time.Since(p.start)
		p.code = p.cmd.ProcessState.ExitCode()
		if err != nil && p.code == -1 {
			p.code = -2 // killed by a signal
		}
		close(p.done)
	}()
	return p
}

// run runs the binary to its end (60 s at most) and returns the process.
func (e *e2eEnv) run(extra []string, args ...string) *e2eProc {
	e.t.Helper()
	p := e.start(extra, args...)
	p.wait(e.t, 60*time.Second)
	return p
}

// wait waits for the process to end; past timeout it kills it and fails the test.
func (p *e2eProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		t.Fatalf("%s did not finish within %s", p.name, timeout)
	}
	return p.code
}

func (p *e2eProc) exitCode() int {
	select {
	case <-p.done:
		return p.code
	default:
		return -1
	}
}

func (p *e2eProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *e2eProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

func (p *e2eProc) kill() {
	if !p.exited() {
		p.cmd.Process.Kill() //nolint:errcheck // best effort at cleanup
		<-p.done
	}
}

// expect checks the exit code.
func (p *e2eProc) expect(t *testing.T, code int) {
	t.Helper()
	if got := p.exitCode(); got != code {
		t.Fatalf("%s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", p.name, got, code,
			e2eTail(p.stdout.String(), 3000), e2eTail(p.stderr.String(), 6000))
	}
}

// e2eEventually polls cond every 20 ms until it holds or timeout passes.
func e2eEventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- seeding and reading the database ----

func (e *e2eEnv) merchant(p reconcile.Platform) string {
	if p == reconcile.Alipay {
		return e.sb.Identity().AlipayAppID
	}
	return e.sb.Identity().WechatMchID
}

// e2eOrder is one seeded order.
type e2eOrder struct {
	platform  reconcile.Platform
	otn       string
	amount    int64
	status    string // default PENDING
	createdAt time.Time
	// Only for orders seeded as PAID (or CLOSED after payment): what the merchant recorded.
	tradeNo   string
	expiresAt time.Time
}

// seed inserts orders: the contract's minimal columns, plus what a settled order carries.
func (e *e2eEnv) seed(orders ...e2eOrder) {
	e.t.Helper()
	for _, o := range orders {
		status := o.status
		if status == "" {
			status = "PENDING"
		}
		row := repotest.Order{Platform: string(o.platform), MerchantID: e.merchant(o.platform), OutTradeNo: o.otn, AmountMinor: o.amount,
			Status: status, CreatedAt: o.createdAt, PlatformTradeNo: o.tradeNo, ExpiresAt: o.expiresAt}
		if status == "PAID" || status == "REFUNDED" {
			row.PaidAmountMinor, row.PaidAt = o.amount, o.createdAt.Add(time.Minute)
		}
		repotest.InsertOrder(e.t, e.db, row)
	}
}

// paidAt sets the platform side of an order: paid with the given amount.
func (e *e2eEnv) paidAtPlatform(p reconcile.Platform, otn string, amount int64) {
	e.sb.SetScenario(p, otn, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: amount})
}

// e2eOrderRow is an order as the tests read it back.
type e2eOrderRow struct {
	ID         int64          `db:"id"`
	Status     string         `db:"status"`
	TradeNo    sql.NullString `db:"platform_trade_no"`
	PaidAmount sql.NullInt64  `db:"paid_amount_minor"`
	PaidAt     sql.NullTime   `db:"paid_at"`
	LeaseOwner sql.NullString `db:"lease_owner"`
	Events     int            `db:"events"`
	PaidEvents int            `db:"paid_events"`
	Outbox     int            `db:"outbox"`
}

func (e *e2eEnv) order(p reconcile.Platform, otn string) e2eOrderRow {
	e.t.Helper()
	var r e2eOrderRow
	err := e.db.Get(&r, `SELECT o.id, o.status, o.platform_trade_no, o.paid_amount_minor, o.paid_at, o.lease_owner,
			(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id) AS events,
			(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id AND e.event_type = 'PAID') AS paid_events,
			(SELECT count(*) FROM fulfillment_outbox f WHERE f.order_id = o.id) AS outbox
		FROM payment_orders o WHERE o.platform = $1 AND o.out_trade_no = $2`, string(p), otn)
	if err != nil {
		e.t.Fatalf("read order %s/%s: %v", p, otn, err)
	}
	return r
}

func (e *e2eEnv) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Get(&n, query, args...); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// e2eRun is a reconcile_runs row.
type e2eRun struct {
	ID               int64        `db:"id"`
	Mode             string       `db:"mode"`
	Status           string       `db:"status"`
	Shard            string       `db:"shard"`
	Cursor           string       `db:"cursor"`
	DryRun           bool         `db:"dry_run"`
	Error            string       `db:"error"`
	FinishedAt       sql.NullTime `db:"finished_at"`
	WindowFrom       sql.NullTime `db:"window_from"`
	WindowTo         sql.NullTime `db:"window_to"`
	Scanned          int64        `db:"scanned"`
	Repaired         int64        `db:"repaired"`
	Closed           int64        `db:"closed"`
	Unchanged        int64        `db:"unchanged"`
	StillPending     int64        `db:"still_pending"`
	Mismatches       int64        `db:"mismatches"`
	ClaimedElsewhere int64        `db:"claimed_elsewhere"`
	Errors           int64        `db:"errors"`
}

func (r e2eRun) String() string {
	return fmt.Sprintf("run %d %s %s shard=%s dry=%v scanned=%d repaired=%d closed=%d unchanged=%d still_pending=%d mismatches=%d claimed_elsewhere=%d errors=%d cursor=%q error=%q",
		r.ID, r.Mode, r.Status, r.Shard, r.DryRun, r.Scanned, r.Repaired, r.Closed, r.Unchanged, r.StillPending, r.Mismatches,
		r.ClaimedElsewhere, r.Errors, r.Cursor, r.Error)
}

func (e *e2eEnv) runs() []e2eRun {
	e.t.Helper()
	var rs []e2eRun
	err := e.db.Select(&rs, `SELECT id, mode, status, shard, COALESCE(cursor, '') AS cursor, dry_run, COALESCE(error, '') AS error,
			finished_at, window_from, window_to, scanned, repaired, closed, unchanged, still_pending, mismatches, claimed_elsewhere, errors
		FROM reconcile_runs ORDER BY id`)
	if err != nil {
		e.t.Fatalf("read runs: %v", err)
	}
	return rs
}

// lastRun is the newest run row; the test fails if there is none.
func (e *e2eEnv) lastRun() e2eRun {
	e.t.Helper()
	rs := e.runs()
	if len(rs) == 0 {
		e.t.Fatal("no reconcile_runs row")
	}
	return rs[len(rs)-1]
}

// e2eCounts are the run counters a test expects; -1 means "do not check".
type e2eCounts struct {
	scanned, repaired, closed, unchanged, stillPending, mismatches, claimedElsewhere, errors int64
}

func (e *e2eEnv) expectRun(r e2eRun, status string, want e2eCounts) {
	e.t.Helper()
	got := e2eCounts{r.Scanned, r.Repaired, r.Closed, r.Unchanged, r.StillPending, r.Mismatches, r.ClaimedElsewhere, r.Errors}
	ok := r.Status == status && r.FinishedAt.Valid
	check := func(w, g int64) {
		if w >= 0 && w != g {
			ok = false
		}
	}
	check(want.scanned, got.scanned)
	check(want.repaired, got.repaired)
	check(want.closed, got.closed)
	check(want.unchanged, got.unchanged)
	check(want.stillPending, got.stillPending)
	check(want.mismatches, got.mismatches)
	check(want.claimedElsewhere, got.claimedElsewhere)
	check(want.errors, got.errors)
	if !ok {
		e.t.Fatalf("%s\nwant status %s (finished) and counts %+v", r, status, want)
	}
}

// invariants are what must hold after ANY process ended, interrupted or not: nothing
// half-applied, no lease left behind, exactly one event per transition.
func (e *e2eEnv) invariants() {
	e.t.Helper()
	checks := []struct{ what, query string }{
		{"orders still leased after every process ended",
			`SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL OR lease_until IS NOT NULL`},
		{"PAID orders without exactly one PAID event",
			`SELECT count(*) FROM payment_orders o WHERE o.status = 'PAID'
				AND o.version > 0 -- moved by the product, not seeded PAID
				AND (SELECT count(*) FROM payment_events e WHERE e.order_id = o.id AND e.event_type = 'PAID') <> 1`},
		{"orders PAID by a pass without exactly one outbox row",
			`SELECT count(*) FROM payment_orders o WHERE EXISTS (SELECT 1 FROM payment_events e WHERE e.order_id = o.id AND e.event_type = 'PAID')
				AND (SELECT count(*) FROM fulfillment_outbox f WHERE f.order_id = o.id AND f.kind = 'order.paid') <> 1`},
		{"PENDING orders with an event or an outbox row",
			`SELECT count(*) FROM payment_orders o WHERE o.status = 'PENDING'
				AND (EXISTS (SELECT 1 FROM payment_events e WHERE e.order_id = o.id) OR EXISTS (SELECT 1 FROM fulfillment_outbox f WHERE f.order_id = o.id))`},
		{"PAID orders without trade number, paid amount or paid time",
			`SELECT count(*) FROM payment_orders WHERE status = 'PAID' AND version > 0
				AND (platform_trade_no IS NULL OR paid_amount_minor IS NULL OR paid_at IS NULL)`},
		{"CLOSED events with an outbox row",
			`SELECT count(*) FROM payment_events e JOIN fulfillment_outbox f ON f.order_id = e.order_id
				WHERE e.event_type = 'CLOSED'`},
	}
	for _, c := range checks {
		if n := e.count(c.query); n != 0 {
			e.t.Errorf("%s: %d", c.what, n)
		}
	}
}

// claimKeys lists the Redis keys under this test's claim prefix.
func (e *e2eEnv) claimKeys() []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := e.redis.Client.Keys(ctx, e.redis.Prefix+"*").Result()
	if err != nil {
		e.t.Fatalf("redis keys: %v", err)
	}
	return keys
}

func (e *e2eEnv) claim(p reconcile.Platform, tradeNo string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, _ := e.redis.Client.Get(ctx, e.redis.Prefix+string(p)+":"+tradeNo).Result()
	return v
}

// ---- serve ----

// e2eFreeAddr is a loopback address with a port free right now.
func e2eFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startServe starts `reconciler serve` and waits for /readyz. It returns the callback
// port's base URL; the admin port's is the process's admin.
func (e *e2eEnv) startServe(extra ...string) (*e2eProc, string) {
	e.t.Helper()
	addr, admin := e2eFreeAddr(e.t), e2eFreeAddr(e.t)
	p := e.start(append([]string{"RECONCILER_LISTEN=" + addr, "RECONCILER_ADMIN_LISTEN=" + admin}, extra...), "serve")
	base := "http://" + addr
	p.admin = "http://" + admin
	e.waitReady(p, "serve", base)
	return p, base
}

// waitReady waits until the process answers /readyz at base, failing the test when it exits
// first.
func (e *e2eEnv) waitReady(p *e2eProc, name, base string) {
	e.t.Helper()
	client := &http.Client{Timeout: time.Second}
	e2eEventually(e.t, 30*time.Second, name+" to answer /readyz", func() bool {
		if p.exited() {
			e.t.Fatalf("%s exited early with %d:\n%s", name, p.exitCode(), e2eTail(p.stderr.String(), 4000))
		}
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// getAs GETs url as the person who (by the identity header; none when empty) and returns
// the status and body.
func getAs(t *testing.T, url, who string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if who != "" {
		req.Header.Set("X-Forwarded-Email", who)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// e2eAgo is now minus d, rounded to the microsecond PostgreSQL keeps.
func e2eAgo(d time.Duration) time.Time { return time.Now().Add(-d).Truncate(time.Microsecond) }

// waitAllAcked waits for a delivery's callbacks (at most 30 s, or ctx) and fails the test
// for each copy serve did not acknowledge; who says whose callbacks they are.
func waitAllAcked(t *testing.T, ctx context.Context, d *sandbox.Delivery, who string) []sandbox.DeliveryResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := d.Wait(ctx)
	if err != nil {
		t.Fatalf("%s callbacks still being delivered: %v", who, err)
	}
	for _, r := range res {
		if !r.Acked {
			t.Errorf("%s callback %s %s copy %d not acknowledged after %d attempts (last status %d, %s)",
				who, r.Platform, r.OutTradeNo, r.Copy, r.Attempts, r.LastStatus, r.LastError)
		}
	}
	return res
}
