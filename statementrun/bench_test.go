package statementrun

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/statement"
)

var (
	benchLines    = flag.Int("statement.lines", 100_000, "bill lines (and orders) of BenchmarkStatement")
	benchPlatform = flag.String("statement.platform", "alipay", "bill format of BenchmarkStatement: alipay (the zip) or wechatpay (gzip)")
	benchProcess  = flag.Bool("statement.process", true, "BenchmarkStatement also times `reconciler statement --file` as a process, against a server-side COPY FROM a file")
)

// benchRefundEvery puts a refund line in the bill every this many lines (0.1%).
const benchRefundEvery = 1000

// BenchmarkStatement reconciles a generated Alipay (or, with -statement.platform wechatpay,
// a gzipped WeChat Pay) bill of N lines against N orders of one merchant on a bad day: 99.6%
// PAID and matching, 0.1% PENDING and paid on the bill (repairs), 0.05% with another amount,
// 0.05% unknown locally; 0.1% refund lines, half of them matching a SUCCESS refund, a quarter
// repairing a PROCESSING one, a quarter for a refund we do not have. It measures two things,
// each against its own COPY floor, and prints both:
//
//   - in-process: Runner.Run over the file (hash it, unzip, decode, parse, stage by COPY,
//     classify, apply, held list, figures, commit), against a client COPY of the same
//     staged rows over one connection, generated rather than parsed, in the same process:
//     what the statement adds to streaming its rows into PostgreSQL. ns/op is this run. (It
//     also prints the ratio to a client COPY with an Exec per row, this benchmark's floor
//     before: its earlier figures were against that.)
//   - process: `reconciler statement --file` as an operator runs it, timed from the command
//     line (start, settings, connections, Redis claims, the run, the summary), against a
//     server-side COPY FROM a file of the same staged rows (no client at all: the fastest a
//     million rows get into a table). An outside benchmark of `statement --file` against
//     `COPY ... FROM 'file'` measures this ratio.
//
// The floors are measured just before and just after the runs and averaged: on a shared
// machine the load drifts. Peak RSS is the process's own (VmHWM, reset before the run) and
// the child's (its rusage).
//
//	go test ./statementrun/ -run XXX -bench BenchmarkStatement -benchtime 3x -statement.lines 1000000
func BenchmarkStatement(b *testing.B) {
	n, p := *benchLines, reconcile.Platform(*benchPlatform)
	full := setup(b)
	// repotest keeps two idle sessions per test database (parallel tests share the server);
	// the apply path's workers each keep one, as the binary's pool lets them.
	full.db.DB.SetMaxIdleConns(32)
	b.StopTimer()
	day := testDay
	dir := serverReadableDir(b)
	path := filepath.Join(dir, "bill")
	writeBenchBill(b, p, path, day, n)
	seedBenchOrders(b, full, p, day, n)
	fi, _ := os.Stat(path)
	var bin string
	if *benchProcess {
		bin = buildReconciler(b)
	}
	rd := repotest.NewRedis(b)
	b.Logf("%s N=%d file %.1f MiB, %d refund lines", p, n, float64(fi.Size())/(1<<20), n/benchRefundEvery)

	for i := range b.N {
		before := measureFloors(b, full, day, n, dir)
		var proc processRun
		if bin != "" {
			resetBench(b, full, p, day)
			proc = runProcess(b, full, bin, p, day, path, rd.URL, rd.Prefix+strconv.Itoa(i)+":")
		}
		resetBench(b, full, p, day)
		resetPeakRSS()
		start := time.Now()
		b.StartTimer()
		res, err := full.runFile(p, day, path, false)
		b.StopTimer()
		elapsed := time.Since(start)
		if err != nil {
			b.Fatalf("statement: %v", err)
		}
		peak := peakRSSKiB()
		floors := before.average(measureFloors(b, full, day, n, dir))
		reportStatement(b, n, res.Days[0], elapsed, peak, proc, floors)
	}
}

// benchFloors are the COPY rates (lines/s) a statement is measured against: client, the
// staged rows streamed as COPY text a batch per call (as Stage sends them); rowExec, the same
// rows through database/sql, an Exec per row (this benchmark's floor before Stage wrote COPY
// text itself, kept to compare with its earlier figures); server, the server reading them
// from a file (0 when the server cannot reach our files).
type benchFloors struct{ client, rowExec, server float64 }

func (f benchFloors) average(g benchFloors) benchFloors {
	return benchFloors{(f.client + g.client) / 2, (f.rowExec + g.rowExec) / 2, (f.server + g.server) / 2}
}

// reportStatement reports one iteration's figures.
func reportStatement(b *testing.B, n int, d DayResult, elapsed time.Duration, peakKiB int64, proc processRun, floors benchFloors) {
	rate := float64(n) / elapsed.Seconds()
	b.ReportMetric(rate, "lines/s")
	b.ReportMetric(floors.client, "copy_lines/s")
	b.ReportMetric(rate/floors.client, "of_client_copy")
	b.ReportMetric(float64(peakKiB)/1024, "peak_rss_MiB")
	f, ph := d.Figures, d.Phases
	b.ReportMetric(rate/floors.rowExec, "of_row_exec_copy")
	b.Logf("in-process: statement %.0f lines/s (%.2fs) vs client COPY %.0f lines/s: %.2f of COPY; peak RSS %.1f MiB",
		rate, elapsed.Seconds(), floors.client, rate/floors.client, float64(peakKiB)/1024)
	b.Logf("  vs a client COPY with an Exec per row (the floor before) %.0f lines/s: %.2f", floors.rowExec, rate/floors.rowExec)
	b.Logf("  lines %d: matched %d repaired %d (refunds %d) found %d (unknown refunds %d) held %d",
		f.Lines, f.Matched, f.Repaired, f.RefundsRepaired, f.Found, f.RefundsUnknown, f.Held)
	b.Logf("  phases: stage (unzip, decode, parse, COPY) %.2fs, classify %.2fs, apply (overlaps classify) %.2fs, held and figures %.2fs",
		ph.Stage.Seconds(), ph.Classify.Seconds(), ph.Apply.Seconds(), ph.Settle.Seconds())
	if proc.elapsed == 0 {
		return
	}
	prate := float64(n) / proc.elapsed.Seconds()
	b.ReportMetric(prate, "process_lines/s")
	b.ReportMetric(float64(proc.rssKiB)/1024, "process_rss_MiB")
	if floors.server > 0 {
		b.ReportMetric(floors.server, "server_copy_lines/s")
		b.ReportMetric(prate/floors.server, "of_server_copy")
	}
	b.Logf("process: reconciler statement --file %.0f lines/s (%.2fs) vs server-side COPY FROM file %.0f lines/s: %.2f of COPY; peak RSS %.1f MiB, CPU %.2fs",
		prate, proc.elapsed.Seconds(), floors.server, prate/floors.server, float64(proc.rssKiB)/1024, proc.cpu.Seconds())
	b.Logf("  its phases: %s; CPU of this machine's PostgreSQL processes meanwhile %.2fs", proc.phases, proc.server.Seconds())
}

// writeBenchBill writes statement.SampleLines' n lines (every benchRefundEvery-th a refund
// of the payment before it) as an Alipay zip or a gzipped WeChat Pay CSV.
func writeBenchBill(b *testing.B, p reconcile.Platform, path string, day reconcile.BusinessDay, n int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	lines := statement.SampleLines(day.Start, "B-", n, benchRefundEvery)
	if p == reconcile.Alipay {
		_, err = statement.WriteAlipayZip(w, statement.AlipayFile{UserID: "20880211096256330156", Day: day.Start}, lines)
	} else {
		_, _, err = statement.WriteWeChatCSV(w, statement.WeChatFile{MchID: wechatMerchant, Gzip: true}, lines)
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}

// benchOrderState is the seeded state of order B-i (i is in scope), as a row of
// (status, platform_trade_no, paid_amount_minor, paid_at, refunded_minor): PENDING for every
// 2000th (offset 1: it also has another amount) and every 1000th (offset 2); REFUNDED in full
// where the bill's refund line has a SUCCESS refund of ours (every 2000th, offset 998); the
// rest PAID with the line's trade number, amount and time. $2 is the day's start.
const benchOrderState = `
	CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN 'PENDING' WHEN i % 2000 = 998 THEN 'REFUNDED' ELSE 'PAID' END,
	CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN NULL ELSE '2019091622001' || lpad(i::text, 15, '0') END,
	CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN NULL ELSE i % 9973 + 1 END,
	CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN NULL ELSE $2::timestamptz + make_interval(secs => 1 + i % 86000) END,
	CASE WHEN i % 2000 = 998 THEN i % 9973 + 1 ELSE 0 END`

// seedBenchOrders writes the orders and refunds statement.SampleLines' lines are about,
// set-based: line i's order is B-i with the line's trade number, amount and time
// (benchOrderState). Every 2000th line has no order; a refund line (every 1000th, offset 999)
// refunds the order before it and has none of its own. Of the refunded orders, every other
// one has the refund as SUCCESS (matched), every fourth (offset 1) as PROCESSING (repaired
// by the bill), every fourth (offset 3) not at all (UNKNOWN_REFUND).
func seedBenchOrders(b *testing.B, e *env, p reconcile.Platform, day reconcile.BusinessDay, n int) {
	_, err := e.db.DB.Exec(`
		INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor,
			status, platform_trade_no, paid_amount_minor, paid_at, refunded_minor, created_at)
		SELECT $4, $1, 'B-' || i, (i % 9973 + 1) + CASE WHEN i % 2000 = 1 THEN 1 ELSE 0 END, `+benchOrderState+`,
			$2::timestamptz - interval '1 hour'
		FROM generate_series(0, $3 - 1) AS i WHERE i % 2000 <> 0 AND i % 1000 <> 999`, merchantOf(p), day.Start, n, string(p))
	if err != nil {
		b.Fatalf("seed orders: %v", err)
	}
	_, err = e.db.DB.Exec(`
		INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, succeeded_at, created_at)
		SELECT o.id, 're_B-' || i, i % 9973 + 1, CASE WHEN i % 2000 = 998 THEN 'SUCCESS' ELSE 'PROCESSING' END,
			CASE WHEN i % 2000 = 998 THEN $2::timestamptz + make_interval(secs => 61 + i % 86000) END,
			$2::timestamptz - interval '1 hour'
		FROM generate_series(998, $3 - 2, 1000) AS i
		JOIN payment_orders o ON o.platform = $4 AND o.merchant_id = $1 AND o.out_trade_no = 'B-' || i
		WHERE i % 4000 <> 3998`, merchantOf(p), day.Start, n, string(p))
	if err != nil {
		b.Fatalf("seed refunds: %v", err)
	}
	if _, err := e.db.DB.Exec(`ANALYZE payment_orders; ANALYZE payment_refunds`); err != nil {
		b.Fatal(err)
	}
}

// resetBench puts back what a statement run of the day changed: the orders and refunds it
// moved (those with events) go back to their seeded state; events, outbox rows, findings and
// the statement tables are emptied.
func resetBench(b *testing.B, e *env, p reconcile.Platform, day reconcile.BusinessDay) {
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE payment_refunds SET status = 'PROCESSING', succeeded_at = NULL, platform_refund_no = NULL
			WHERE id IN (SELECT refund_id FROM payment_events WHERE refund_id IS NOT NULL)`, nil},
		{`UPDATE payment_orders o SET (status, platform_trade_no, paid_amount_minor, paid_at, refunded_minor) =
			(SELECT ` + benchOrderState + ` FROM (SELECT substr(o.out_trade_no, 3)::int AS i) s)
			WHERE o.platform = $1 AND o.id IN (SELECT order_id FROM payment_events)`, []any{string(p), day.Start}},
		{`DELETE FROM fulfillment_outbox; DELETE FROM payment_events; DELETE FROM statement_lines;
			DELETE FROM statement_held; DELETE FROM statement_days; DELETE FROM reconcile_mismatches`, nil},
		// Every run starts from a checkpoint: the seeding's (a gigabyte of WAL) would
		// otherwise be written out during the first run and not the next, and a day's
		// repairs touch pages a checkpoint has passed, as they do in production.
		{`CHECKPOINT`, nil},
	} {
		if _, err := e.db.DB.Exec(q.sql, q.args...); err != nil {
			b.Fatalf("reset the day: %v", err)
		}
	}
}

// serverReadableDir is a directory PostgreSQL's own user can read and write (the server is
// local): the bill lives there, and the server-side COPY floor's file.
func serverReadableDir(b *testing.B) string {
	dir, err := os.MkdirTemp("", "payrecon-bench-*") // not b.TempDir(): its parent is private
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		b.Fatal(err)
	}
	return dir
}

// measureFloors measures both COPY floors of n staged rows: a client COPY streamed over one
// connection, and a server-side COPY FROM a file of the same rows.
func measureFloors(b *testing.B, e *env, day reconcile.BusinessDay, n int, dir string) benchFloors {
	ctx := context.Background()
	conn, err := e.db.DB.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a measurement only
	if _, err := tx.Exec(`CREATE TEMP TABLE bare_copy (` + postgres.StageColumns + `) ON COMMIT DROP;
		CREATE TEMP TABLE bare_copy_rows (` + postgres.StageColumns + `) ON COMMIT DROP;
		CREATE TEMP TABLE bare_copy_file (` + postgres.StageColumns + `) ON COMMIT DROP`); err != nil {
		b.Fatal(err)
	}
	f := benchFloors{client: clientCopyRate(b, conn, day, n), rowExec: rowExecCopyRate(b, tx, day, n)}
	f.server = serverCopyRate(b, tx, n, filepath.Join(dir, "rows.copy"))
	return f
}

// rowExecCopyRate COPYs the same lines through database/sql's prepared COPY, one Exec per
// row.
func rowExecCopyRate(b *testing.B, tx *sql.Tx, day reconcile.BusinessDay, n int) float64 {
	start := time.Now()
	stmt, err := tx.Prepare(pq.CopyIn("bare_copy_rows", postgres.StageColumnNames...))
	if err != nil {
		b.Fatal(err)
	}
	no := 0
	for l := range statement.SampleLines(day.Start, "B-", n, benchRefundEvery) {
		no++
		if _, err := stmt.Exec(no, string(l.Kind), l.OutTradeNo, l.PlatformTradeNo, l.RefundNo, l.PlatformRefundNo,
			l.RefundStatus, l.Currency, l.AmountMinor, l.At.UnixMicro()); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := stmt.Exec(); err != nil {
		b.Fatal(err)
	}
	stmt.Close()
	return float64(n) / time.Since(start).Seconds()
}

// clientCopyRate COPYs n generated lines into bare_copy as the statement stages them: rows
// written in COPY's text format (postgres.AppendStageRow), a batch per call, on the driver
// connection.
func clientCopyRate(b *testing.B, conn *sql.Conn, day reconcile.BusinessDay, n int) float64 {
	start := time.Now()
	err := conn.Raw(func(dc any) error {
		st, err := dc.(driver.Conn).Prepare(pq.CopyIn("bare_copy", postgres.StageColumnNames...))
		if err != nil {
			return err
		}
		defer st.Close()
		cd := st.(interface {
			CopyData(ctx context.Context, rows string) (driver.Result, error)
		})
		var buf []byte
		no := 0
		for l := range statement.SampleLines(day.Start, "B-", n, benchRefundEvery) {
			no++
			l.No = no
			if buf = postgres.AppendStageRow(buf, l); no%512 == 0 || no == n {
				if _, err := cd.CopyData(context.Background(), string(buf[:len(buf)-1])); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		_, err = st.Exec(nil) //nolint:staticcheck // lib/pq finishes a COPY with Exec(nil)
		return err
	})
	if err != nil {
		b.Fatalf("client COPY: %v", err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// serverCopyRate has the server COPY bare_copy's rows FROM a file it wrote (once): the
// server reads and parses the rows itself, no client in the way. 0 when the server cannot
// reach the file (not on this machine, or not allowed to read files).
func serverCopyRate(b *testing.B, tx *sql.Tx, n int, file string) float64 {
	if _, err := os.Stat(file); err != nil {
		if _, err := tx.Exec(`SAVEPOINT f; COPY bare_copy TO ` + pq.QuoteLiteral(file)); err != nil {
			b.Logf("no server-side COPY floor: %v", err)
			tx.Exec(`ROLLBACK TO SAVEPOINT f`) //nolint:errcheck // the client floor stands alone
			return 0
		}
	}
	start := time.Now()
	if _, err := tx.Exec(`COPY bare_copy_file FROM ` + pq.QuoteLiteral(file)); err != nil {
		b.Fatalf("server-side COPY FROM %s: %v", file, err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// processRun is one `reconciler statement --file` process.
type processRun struct {
	elapsed time.Duration
	cpu     time.Duration // the process's own, user and system
	rssKiB  int64
	phases  string        // as its "statement reconciled" log line gives them
	server  time.Duration // the database server's CPU while it ran (serverCPU), 0 when unreadable
}

// buildReconciler builds the binary an operator runs.
func buildReconciler(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "reconciler")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/reconciler").CombinedOutput()
	if err != nil {
		b.Fatalf("go build ./cmd/reconciler: %v\n%s", err, out)
	}
	return bin
}

// runProcess runs `reconciler statement --file` on the bill with settings of its own (the
// test's database and Redis, a fresh claim prefix), timed from the command line.
func runProcess(b *testing.B, e *env, bin string, p reconcile.Platform, day reconcile.BusinessDay, path, redisURL, prefix string) processRun {
	cmd := exec.Command(bin, "statement", "--file", path, "--platform", string(p), "--merchant", merchantOf(p), "--date", day.Date)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECONCILER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "RECONCILER_DATABASE_URL="+e.db.URL, "RECONCILER_REDIS_URL="+redisURL,
		"RECONCILER_CLAIM_PREFIX="+prefix, "RECONCILER_TIMEZONE="+shanghai.String(), "RECONCILER_LOG_FORMAT=json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cpu0 := serverCPU()
	start := time.Now()
	err := cmd.Run()
	run := processRun{elapsed: time.Since(start)}
	if cpu0 > 0 {
		run.server = serverCPU() - cpu0
	}
	if err != nil {
		b.Fatalf("reconciler statement: %v\n%s\n%s", err, stdout.String(), tail(stderr.String(), 4000))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		run.rssKiB = ru.Maxrss // KiB on Linux
		run.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	run.phases = loggedPhases(stderr.String())
	return run
}

// loggedPhases reads the phase durations (ms) off the process's "statement reconciled" line.
func loggedPhases(logs string) string {
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Message                        string
			Stage, Classify, Apply, Settle float64
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "statement reconciled" {
			return fmt.Sprintf("stage %.2fs, classify %.2fs, apply %.2fs, held and figures %.2fs",
				l.Stage/1000, l.Classify/1000, l.Apply/1000, l.Settle/1000)
		}
	}
	return "(not logged)"
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// serverCPU is the CPU (user and system) every PostgreSQL process on this machine has used:
// the live ones', and the postmaster's reaped children's (a session's backend ends with its
// connection). 0 when /proc cannot say (the server is elsewhere, or procfs is missing). A
// figure for the benchmark's reader, taken on a machine where nothing else runs queries.
func serverCPU() time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || !strings.HasPrefix(s[open+1:end], "postgres") {
			continue
		}
		// After the command: state, ppid, ... utime (14th field), stime, cutime, cstime.
		f := strings.Fields(s[end+1:])
		if len(f) < 15 {
			continue
		}
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			if i < 13 || !isPostgres(f[1]) { // a postmaster's reaped backends count too
				ticks += v
			}
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ, 100 on Linux
}

// isPostgres says whether process pid is a PostgreSQL process.
func isPostgres(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/comm")
	return err == nil && strings.HasPrefix(string(b), "postgres")
}

// resetPeakRSS starts the kernel's peak-RSS count afresh (VmHWM), so the figure is the
// run's, not the seeding's.
func resetPeakRSS() {
	runtime.GC()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) //nolint:errcheck // best effort: older kernels keep the old peak
}

func peakRSSKiB() int64 {
	f, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(f), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib
		}
	}
	return 0
}
