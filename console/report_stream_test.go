package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/reconcile"
)

// brokenFindings yields n findings, then fails as a lost database would.
type brokenFindings struct {
	reconcile.FindingList
	n int
}

var errLost = errors.New("connection to the database lost")

func (b brokenFindings) Each(fn func(reconcile.Finding) error) error {
	for i := range b.n {
		f := reconcile.Finding{ID: int64(i + 1), Kind: reconcile.MismatchUnknownOrder, Platform: reconcile.Alipay,
			OutTradeNo: fmt.Sprintf("ORD-%06d", i+1), FirstSeenAt: base, LastSeenAt: base, ReviewStatus: reconcile.ReviewOpen}
		if err := fn(f); err != nil {
			return err
		}
	}
	return errLost
}

// slowFindings yields n findings, one every pause: a report that takes a while to write.
type slowFindings struct {
	reconcile.FindingList
	n     int
	pause time.Duration
}

func (s slowFindings) Each(fn func(reconcile.Finding) error) error {
	err := brokenFindings{n: s.n}.Each(func(f reconcile.Finding) error {
		time.Sleep(s.pause)
		return fn(f)
	})
	if errors.Is(err, errLost) {
		return nil // all n came
	}
	return err
}

// slowStore serves a report whose n findings come one every pause.
type slowStore struct {
	console.Store
	n     int
	pause time.Duration
}

func (s slowStore) Report(_ context.Context, from, to time.Time, fn func(reconcile.Report) error) error {
	return fn(reconcile.Report{From: from, To: to, Findings: slowFindings{n: s.n, pause: s.pause}, Totals: reconcile.SummaryRow{Count: int64(s.n)}})
}

// TestReportDownloadOutlivesTheWriteTimeout: a download may take longer than the server's
// write timeout (which bounds pages); it extends its own deadline and arrives whole.
func TestReportDownloadOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(newConsole(t, slowStore{n: 40, pause: 25 * time.Millisecond}))
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	rq, _ := http.NewRequest("GET", srv.URL+"/review/report?from=2026-11-28&to=2026-11-28&format=xlsx", nil)
	rq.Header.Set("X-Forwarded-Email", ann)
	start := time.Now()
	resp, err := srv.Client().Do(rq)
	if err != nil {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "PK\x03\x04") || time.Since(start) < time.Second {
		t.Fatalf("HTTP %d after %v, %d bytes, %v: want the whole spreadsheet after more than a second", resp.StatusCode, time.Since(start), len(body), err)
	}
}

// brokenStore serves a report whose findings fail after n of them (the console's other
// reads are not used).
type brokenStore struct {
	console.Store
	n int
}

func (s brokenStore) Report(_ context.Context, from, to time.Time, fn func(reconcile.Report) error) error {
	return fn(reconcile.Report{From: from, To: to, Findings: brokenFindings{n: s.n}, Totals: reconcile.SummaryRow{Count: int64(s.n)}})
}

// TestReportDownloadFailures: a failure before the first byte is an error page (no download
// headers); one after it cuts the connection, so the client sees a broken download, never a
// short file that looks whole. A period over the limit is a 400 naming it.
func TestReportDownloadFailures(t *testing.T) {
	t.Parallel()
	get := func(t *testing.T, n int, query string) (*http.Response, []byte, error) {
		srv := httptest.NewServer(newConsole(t, brokenStore{n: n}))
		t.Cleanup(srv.Close)
		rq, _ := http.NewRequest("GET", srv.URL+"/review/report?"+query, nil)
		rq.Header.Set("X-Forwarded-Email", ann)
		resp, err := srv.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	day := "from=2026-11-28&to=2026-11-28&format="
	for _, format := range []string{"csv", "xlsx", "html"} {
		resp, body, err := get(t, 0, day+format)
		if resp.StatusCode != http.StatusInternalServerError || err != nil || resp.Header.Get("Content-Disposition") != "" {
			t.Errorf("%s, failing at once: HTTP %d %q (%v): %s", format, resp.StatusCode, resp.Header.Get("Content-Disposition"), err, body)
		}
	}
	for _, format := range []string{"csv", "html"} {
		resp, body, err := get(t, 5000, day+format)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), "payrecon-report") ||
			!errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(string(body), "ORD-000001") {
			t.Errorf("%s, failing mid-stream: HTTP %d %q, %d bytes read, then %v; want the download broken off",
				format, resp.StatusCode, resp.Header.Get("Content-Disposition"), len(body), err)
		}
	}
	resp, body, _ := get(t, 0, "from=2025-01-01&to=2026-01-02&format=csv") // 367 days
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "366 days") {
		t.Errorf("367 days: HTTP %d %s", resp.StatusCode, body)
	}
	if resp, _, _ := get(t, 0, "from=2025-01-01&to=2025-12-31&format=csv"); resp.StatusCode == http.StatusBadRequest {
		t.Errorf("a year: HTTP %d", resp.StatusCode)
	}
}
