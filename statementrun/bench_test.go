package statementrun

import (
	"bufio"
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

var (
	benchLines    = flag.Int("statement.lines", 100_000, "bill lines (and orders) of BenchmarkStatement")
	benchPlatform = flag.String("statement.platform", "alipay", "bill format of BenchmarkStatement: alipay (the zip) or wechatpay (gzip)")
)

// BenchmarkStatement reconciles a generated Alipay (or, with -statement.platform wechatpay,
// a gzipped WeChat Pay) bill of N lines against N orders of one
// merchant on a bad day (99.8% PAID and matching, 0.1% PENDING and paid on the bill, 0.05%
// with another amount, 0.05% unknown locally), the whole --file run: unzip, decode, parse,
// stage by COPY, classify, apply. It prints the run's lines/s next to a bare COPY of the
// same lines into PostgreSQL in the same process, and the process's peak RSS during the run.
//
//	go test ./statementrun/ -run XXX -bench BenchmarkStatement -benchtime 1x -statement.lines 1000000
func BenchmarkStatement(b *testing.B) {
	n, p := *benchLines, reconcile.Platform(*benchPlatform)
	full := setup(b)
	b.StopTimer()
	day := testDay
	path := filepath.Join(b.TempDir(), "bill")
	writeBenchBill(b, p, path, day, n)
	seedBenchOrders(b, full, p, day, n)
	fi, _ := os.Stat(path)

	for range b.N {
		// The bare COPY runs just before and just after the statement and the two are
		// averaged: on a shared machine the load drifts, and this keeps the ratio honest.
		copyBefore := bareCopyRate(b, full, day, n)
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
		copyRate := (copyBefore + bareCopyRate(b, full, day, n)) / 2
		d, ph := res.Days[0].Figures, res.Days[0].Phases
		rate := float64(n) / elapsed.Seconds()
		b.ReportMetric(rate, "lines/s")
		b.ReportMetric(copyRate, "copy_lines/s")
		b.ReportMetric(float64(peak)/1024, "peak_rss_MiB")
		b.Logf("%s N=%d file %.1f MiB: statement %.0f lines/s (%.2fs) vs bare COPY %.0f lines/s: %.0f%% of COPY; peak RSS %.1f MiB; matched %d repaired %d found %d",
			p, n, float64(fi.Size())/(1<<20), rate, elapsed.Seconds(), copyRate, 100*rate/copyRate, float64(peak)/1024,
			d.Matched, d.Repaired, d.Found)
		b.Logf("phases: stage (unzip, decode, parse, COPY) %.2fs, classify %.2fs, apply %.2fs, held and figures %.2fs",
			ph.Stage.Seconds(), ph.Classify.Seconds(), ph.Apply.Seconds(), ph.Settle.Seconds())
	}
}

// writeBenchBill writes statement.SampleLines' n lines as an Alipay zip or a gzipped WeChat
// Pay CSV.
func writeBenchBill(b *testing.B, p reconcile.Platform, path string, day Day, n int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	lines := statement.SampleLines(day.Start, "B-", n, 0)
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

// seedBenchOrders writes the orders statement.SampleLines' lines are about, set-based: line
// i's order is B-i with the line's trade number, amount and time. Every 2000th line has no
// order, the next one another amount, every 1000th (offset 2) is still PENDING.
func seedBenchOrders(b *testing.B, e *env, p reconcile.Platform, day Day, n int) {
	_, err := e.db.DB.Exec(`
		INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, platform_trade_no,
			paid_amount_minor, paid_at, created_at)
		SELECT $4, $1, 'B-' || i,
			(i % 9973 + 1) + CASE WHEN i % 2000 = 1 THEN 1 ELSE 0 END,
			CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN 'PENDING' ELSE 'PAID' END,
			CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN NULL ELSE '2019091622001' || lpad(i::text, 15, '0') END,
			CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN NULL ELSE i % 9973 + 1 END,
			CASE WHEN i % 2000 = 1 OR i % 1000 = 2 THEN NULL ELSE $2::timestamptz + make_interval(secs => 1 + i % 86000) END,
			$2::timestamptz - interval '1 hour'
		FROM generate_series(0, $3 - 1) AS i WHERE i % 2000 <> 0`, merchantOf(p), day.Start, n, string(p))
	if err != nil {
		b.Fatalf("seed orders: %v", err)
	}
	if _, err := e.db.DB.Exec(`ANALYZE payment_orders`); err != nil {
		b.Fatal(err)
	}
}

// bareCopyRate COPYs the same lines (generated, not parsed) into a temporary table of the
// same shape: the floor any staged reconciliation is measured against.
func bareCopyRate(b *testing.B, e *env, day Day, n int) float64 {
	ctx := context.Background()
	tx, err := e.db.DB.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a measurement only
	if _, err := tx.Exec(`CREATE TEMP TABLE bare_copy (line_no integer, kind text, out_trade_no text, platform_trade_no text,
		refund_no text, currency text, amount_minor bigint, paid_at timestamptz) ON COMMIT DROP`); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	stmt, err := tx.Prepare(pq.CopyIn("bare_copy", "line_no", "kind", "out_trade_no", "platform_trade_no", "refund_no",
		"currency", "amount_minor", "paid_at"))
	if err != nil {
		b.Fatal(err)
	}
	no := 0
	for l := range statement.SampleLines(day.Start, "B-", n, 0) {
		no++
		if _, err := stmt.Exec(no, string(l.Kind), l.OutTradeNo, l.PlatformTradeNo, l.RefundNo, l.Currency, l.AmountMinor, l.At); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := stmt.Exec(); err != nil {
		b.Fatal(err)
	}
	stmt.Close()
	return float64(n) / time.Since(start).Seconds()
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
