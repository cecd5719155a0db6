package render_test

import (
	"context"
	"flag"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

var benchFindings = flag.Int("report.findings", 100_000, "findings in BenchmarkReport's year")

// BenchmarkReport writes the report of a year holding N findings (100,000 by default,
// inserted by one INSERT ... SELECT generate_series) in each format to io.Discard, straight
// from the database as the CLI and the console do. Per format it reports the time and the
// process's peak RSS during the report above its RSS just before it (the kernel's VmHWM,
// reset through /proc/self/clear_refs after returning freed memory to the system), with the
// Go heap's sampled peak beside it. The target is under 100 MiB for each format.
//
//	go test ./render/ -run '^$' -bench BenchmarkReport -benchtime 1x -report.findings 100000
func BenchmarkReport(b *testing.B) {
	db := repotest.NewDB(b)
	n := *benchFindings
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, shanghai)
	to := from.AddDate(1, 0, 0)
	seedBenchFindings(b, db, n, from, to)
	rv := postgres.NewReview(db.DB)
	for _, format := range render.ReportFormats {
		b.Run(format, func(b *testing.B) {
			for range b.N {
				base, resetOK := resetPeakRSS()
				heap := sampleHeap()
				start := time.Now()
				err := rv.Report(context.Background(), from, to, func(rep reconcile.Report) error {
					if rep.Totals.Count != int64(n) {
						b.Fatalf("the report counts %d findings, want %d", rep.Totals.Count, n)
					}
					return render.ReportDoc{Report: rep, Loc: shanghai, Generated: to, Lang: render.LangEN}.Write(io.Discard, format)
				})
				elapsed := time.Since(start)
				heapPeak := heap()
				if err != nil {
					b.Fatal(err)
				}
				peak := statusKiB("VmHWM")
				if !resetOK {
					b.Logf("/proc/self/clear_refs is not writable: VmHWM is the process's peak since it started")
				}
				b.ReportMetric(elapsed.Seconds(), "s/report")
				b.ReportMetric(float64(peak-base)/1024, "rss-growth-MiB")
				b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
				b.ReportMetric(float64(heapPeak)/(1<<20), "peak-heap-MiB")
				b.Logf("%s, %d findings: %.2fs, peak RSS %.1f MiB (%.1f MiB above the %.1f MiB before it), Go heap peak %.1f MiB",
					format, n, elapsed.Seconds(), float64(peak)/1024, float64(peak-base)/1024, float64(base)/1024, float64(heapPeak)/(1<<20))
			}
		})
	}
}

// seedBenchFindings inserts n findings spread over [from, to) in one statement: every kind
// and review status the rules allow without a resolution, amounts that differ, a detail
// document and a note, as a busy year of a real merchant would hold.
func seedBenchFindings(b *testing.B, db *repotest.DB, n int, from, to time.Time) {
	b.Helper()
	start := time.Now()
	db.MustExec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, kind,
			local_amount_minor, platform_amount_minor, local_status, platform_status, detail, first_seen_at, last_seen_at,
			seen_count, review_status, note)
		SELECT CASE WHEN i % 3 = 0 THEN 'wechatpay' ELSE 'alipay' END, '2021000000000001', 'BENCH-ORDER-' || lpad(i::text, 10, '0'),
			'2025' || lpad(i::text, 24, '0'),
			(ARRAY['AMOUNT_MISMATCH', 'UNKNOWN_ORDER', 'PAID_AFTER_CLOSE', 'DUPLICATE_PAYMENT', 'LOCAL_PAID_PLATFORM_UNPAID'])[1 + i % 5],
			100000 + i % 997, 100000, 'PAID', 'TRADE_SUCCESS', jsonb_build_object('total_amount', (100000 + i % 997)::text, 'seq', i),
			t, t + interval '1 hour', 1 + i % 4, (ARRAY['OPEN', 'ACKNOWLEDGED'])[1 + i % 2], 'seen by the nightly pass'
		FROM generate_series(0, $1::int - 1) AS i,
			LATERAL (SELECT $2::timestamptz + ($3::timestamptz - $2::timestamptz - interval '2 hours') * i / $1::int AS t) AS at`,
		n, from, to)
	b.Logf("seeded %d findings in %.1fs", n, time.Since(start).Seconds())
}

// resetPeakRSS returns freed memory to the system and starts the kernel's peak-RSS count
// afresh, so VmHWM is the coming report's peak; it returns the RSS it starts from and
// whether the reset took.
func resetPeakRSS() (int64, bool) {
	runtime.GC()
	debug.FreeOSMemory()
	err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return statusKiB("VmRSS"), err == nil
}

// statusKiB reads one kB figure of /proc/self/status (0 where there is none).
func statusKiB(field string) int64 {
	f, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(f), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib
		}
	}
	return 0
}

// sampleHeap samples the Go heap in use every 10 ms until the returned function is called,
// which returns the highest figure seen.
func sampleHeap() func() uint64 {
	var mu sync.Mutex
	var peak uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
