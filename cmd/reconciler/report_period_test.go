package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/cmd/reconciler/input"
	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/reconcile/identity"
)

// periodStore is a console store that only answers Report, remembering the period asked.
type periodStore struct {
	console.Store // nil: the report download calls nothing else
	from, to      time.Time
}

func (s *periodStore) Report(_ context.Context, from, to time.Time, fn func(reconcile.Report) error) error {
	s.from, s.to = from, to
	return fn(reconcile.Report{From: from, To: to})
}

// TestReportPeriodMatchesTheConsole: the same two dates are the same period in
// `reconciler report --from --to` and in the console's report form ("to" included in both),
// in zones with and without daylight saving, one day and longer.
func TestReportPeriodMatchesTheConsole(t *testing.T) {
	t.Parallel()
	reviewers, err := identity.ParseList([]string{"ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, zone := range []string{"Asia/Shanghai", "America/New_York", "Europe/Berlin", "UTC"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		store := &periodStore{}
		h := console.New(console.Config{IdentityHeader: "X-Forwarded-Email", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
			Reviewers: reviewers, CSRFKey: []byte("test key"), Location: loc, Log: zerolog.Nop()}, store)
		for _, p := range [][2]string{{"2026-11-28", "2026-11-28"}, {"2026-11-01", "2026-11-30"}, {"2026-03-29", "2026-03-29"},
			{"2026-10-25", "2026-11-01"}, {"2028-02-28", "2028-03-01"}} {
			r := httptest.NewRequest(http.MethodGet, "/review/report?format=csv&from="+p[0]+"&to="+p[1], nil)
			r.Header.Set("X-Forwarded-Email", "ann@example.com")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%s %v: console HTTP %d: %s", zone, p, w.Code, w.Body.String())
			}
			start, end, err := input.ReportPeriod(p[0], p[1], time.Now(), loc)
			if err != nil || !start.Equal(store.from) || !end.Equal(store.to) {
				t.Errorf("%s %v: reconciler report reads [%v, %v) (%v), the console [%v, %v)", zone, p, start, end, err, store.from, store.to)
			}
			if days := end.Sub(start).Round(24*time.Hour) / (24 * time.Hour); p[0] == p[1] && days != 1 {
				t.Errorf("%s %v: %d days, want the one day", zone, p, days)
			}
		}
	}
}
