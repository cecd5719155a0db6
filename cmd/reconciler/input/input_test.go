package input_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/cmd/reconciler/input"
	"github.com/payrecon/payrecon/reconcile"
)

func TestReportPeriodDefaults(t *testing.T) {
	t.Parallel()
	loc, _ := time.LoadLocation("Asia/Shanghai")
	now := time.Date(2026, 11, 30, 15, 4, 5, 0, loc)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, loc) }
	tests := []struct {
		from, to   string
		start, end time.Time
	}{
		{"", "", now.Add(-24 * time.Hour), now},
		{"2026-11-28", "", day(28), now},
		{"", "2026-11-28", day(27), day(28)},
		{"2026-12-05", "", day(5).AddDate(0, 1, 0), day(6).AddDate(0, 1, 0)}, // a --from after now: one day
		{"2026-11-28", "2026-11-29", day(28), day(29)},
	}
	for _, tc := range tests {
		start, end, err := input.ReportPeriod(tc.from, tc.to, now, loc)
		if err != nil || !start.Equal(tc.start) || !end.Equal(tc.end) {
			t.Errorf("ReportPeriod(%q, %q) = %v, %v, %v; want %v, %v", tc.from, tc.to, start, end, err, tc.start, tc.end)
		}
	}
}

func TestListQueryFilter(t *testing.T) {
	t.Parallel()
	loc, _ := time.LoadLocation("Asia/Shanghai")
	ok := input.ListQuery{Limit: 50}
	tests := []struct {
		name    string
		q       input.ListQuery
		wantErr string // empty: the query reads
		check   func(reconcile.FindingFilter) bool
	}{
		{"no status: all but resolved", ok, "", func(f reconcile.FindingFilter) bool {
			return len(f.Statuses) == 3 && !slices.Contains(f.Statuses, reconcile.ReviewResolved)
		}},
		{"all: no status filter", with(ok, func(q *input.ListQuery) { q.Status = "ALL" }), "", func(f reconcile.FindingFilter) bool { return f.Statuses == nil }},
		{"two statuses", with(ok, func(q *input.ListQuery) { q.Status = "OPEN,RESOLVED" }), "", func(f reconcile.FindingFilter) bool {
			return slices.Equal(f.Statuses, []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewResolved})
		}},
		{"platform any case", with(ok, func(q *input.ListQuery) { q.Platform = " WeChatPay " }), "", func(f reconcile.FindingFilter) bool { return f.Platform == reconcile.WechatPay }},
		{"date in loc", with(ok, func(q *input.ListQuery) { q.Since = "2026-11-28" }), "", func(f reconcile.FindingFilter) bool {
			return f.Since.Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, loc))
		}},
		{"bad status", with(ok, func(q *input.ListQuery) { q.Status = "OPEN,DONE" }), "--status", nil},
		{"bad kind", with(ok, func(q *input.ListQuery) { q.Kind = "NOPE" }), "--kind", nil},
		{"bad platform", with(ok, func(q *input.ListQuery) { q.Platform = "paypal" }), "--platform", nil},
		{"bad date", with(ok, func(q *input.ListQuery) { q.Until = "28/11/2026" }), "--until", nil},
		{"since not before until", with(ok, func(q *input.ListQuery) { q.Since, q.Until = "2026-11-28", "2026-11-28" }), "before --until", nil},
		{"limit zero", input.ListQuery{}, "--limit", nil},
		{"limit too big", input.ListQuery{Limit: 10001}, "--limit", nil},
		{"negative after-id", input.ListQuery{Limit: 1, AfterID: -1}, "--after-id", nil},
	}
	for _, tc := range tests {
		f, err := tc.q.Filter(loc)
		var ie *reconcile.InputError
		switch {
		case tc.wantErr != "" && (!errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want an InputError naming %s", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !tc.check(f)):
			t.Errorf("%s: filter %+v, error %v", tc.name, f, err)
		}
	}
}

func with(q input.ListQuery, edit func(*input.ListQuery)) input.ListQuery {
	edit(&q)
	return q
}
