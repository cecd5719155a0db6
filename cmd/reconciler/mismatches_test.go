package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo/repotest"
)

// The reviewers of the CLI tests, by the addresses the review console knows them by.
const (
	annAddr = "ann@example.com"
	bobAddr = "bob@example.com"
)

// reviewDay is the seeded data's day: 28 November 2026, China time (UTC+8).
var reviewDay = time.Date(2026, 11, 28, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))

// reviewCLI runs the binary's Main in-process and returns its exit code and output.
func reviewCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// reviewSeed is one reconcile_mismatches row; zero amounts are NULL.
type reviewSeed struct {
	orderID          int64
	platform, otn    string
	kind             string
	local, plat      int64
	at               time.Time // first and last seen
	last             time.Time // zero: at
	status           string
	resolution, by   string
	detail           string
	platformTradeNo  string
	seen             int
	merchant, lstate string
}

func seedReview(t *testing.T, db *repotest.DB, s reviewSeed) int64 {
	t.Helper()
	if s.platform == "" {
		s.platform = "alipay"
	}
	if s.kind == "" {
		s.kind = "AMOUNT_MISMATCH"
	}
	if s.status == "" {
		s.status = "OPEN"
	}
	if s.at.IsZero() {
		s.at = reviewDay.Add(10 * time.Hour)
	}
	if s.last.IsZero() {
		s.last = s.at
	}
	if s.detail == "" {
		s.detail = "{}"
	}
	if s.seen == 0 {
		s.seen = 1
	}
	if s.merchant == "" {
		s.merchant = "2021000000000001"
	}
	var resolvedAt any
	if s.status == "RESOLVED" {
		resolvedAt = s.last
	}
	var id int64
	err := db.Get(&id, `INSERT INTO reconcile_mismatches (order_id, platform, merchant_id, out_trade_no, platform_trade_no,
		kind, local_amount_minor, platform_amount_minor, local_status, platform_status, detail, first_seen_at, last_seen_at,
		seen_count, review_status, resolution, resolved_by, resolved_at)
		VALUES (NULLIF($1::bigint, 0), $2, $3, $4, NULLIF($5, ''), $6, NULLIF($7::bigint, 0), NULLIF($8::bigint, 0),
		NULLIF($9, ''), 'TRADE_SUCCESS', $10::jsonb, $11, $12, $13, $14, NULLIF($15, ''), NULLIF($16, ''), $17)
		RETURNING id`,
		s.orderID, s.platform, s.merchant, s.otn, s.platformTradeNo, s.kind, s.local, s.plat, s.lstate, s.detail,
		s.at, s.last, s.seen, s.status, s.resolution, s.by, resolvedAt)
	if err != nil {
		t.Fatalf("seed finding %q: %v", s.otn, err)
	}
	return id
}

func TestMismatchesListFormatsAndFilters(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	open := seedReview(t, db, reviewSeed{otn: "ORD-OPEN", local: 10000, plat: 9990, platformTradeNo: "2026112822001", seen: 3, lstate: "PAID"})
	ack := seedReview(t, db, reviewSeed{otn: "ORD-ACK", kind: "UNKNOWN_ORDER", platform: "wechatpay", plat: 123456, status: "ACKNOWLEDGED"})
	resolved := seedReview(t, db, reviewSeed{otn: "ORD-DONE", local: 1, plat: 2, status: "RESOLVED", resolution: "ok", by: "ann"})
	// 00:30 on the 28th in Shanghai, still the 27th in UTC.
	early := seedReview(t, db, reviewSeed{otn: "ORD-EARLY", local: 5, plat: 6, at: reviewDay.Add(30 * time.Minute)})
	weird := seedReview(t, db, reviewSeed{otn: "tab\there\x1b[31mred", local: 7, plat: 8, at: reviewDay.Add(-48 * time.Hour)})

	t.Run("table", func(t *testing.T) {
		code, out, errOut := reviewCLI(t, "mismatches", "list", "--database-url", db.URL)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != 5 { // header + open, ack, early, weird (resolved is hidden by default)
			t.Fatalf("table has %d lines, want 5:\n%s", len(lines), out)
		}
		for _, col := range []string{"ID", "KIND", "PLATFORM", "MERCHANT", "OUT_TRADE_NO", "PLATFORM_TRADE_NO", "LOCAL_AMOUNT",
			"PLATFORM_AMOUNT", "LOCAL_STATUS", "PLATFORM_STATUS", "SEEN", "FIRST_SEEN", "LAST_SEEN", "REVIEW"} {
			if !strings.Contains(lines[0], col) {
				t.Errorf("header %q lacks %s", lines[0], col)
			}
		}
		// tabwriter aligns: every row's OUT_TRADE_NO starts in the header's column.
		col := strings.Index(lines[0], "OUT_TRADE_NO")
		if !strings.HasPrefix(lines[1][col:], "ORD-OPEN") {
			t.Errorf("columns not aligned:\n%s", out)
		}
		fields := strings.Fields(lines[1])
		if fields[0] != fmt.Sprint(open) || !slices.Contains(fields, "100.00") || !slices.Contains(fields, "99.90") ||
			!slices.Contains(fields, "2026112822001") || !slices.Contains(fields, "OPEN") {
			t.Errorf("row %q", lines[1])
		}
		if !strings.Contains(lines[2], "1234.56") || !strings.Contains(lines[2], "ACKNOWLEDGED") {
			t.Errorf("row %q: want amount 1234.56 and ACKNOWLEDGED", lines[2])
		}
		if strings.Contains(out, "ORD-DONE") {
			t.Error("a RESOLVED finding listed by default")
		}
		if strings.ContainsAny(out, "\x1b\t") || !strings.Contains(out, `tab\there\x1b[31mred`) {
			t.Errorf("control characters must be shown escaped:\n%q", out)
		}
	})

	t.Run("json", func(t *testing.T) {
		code, out, errOut := reviewCLI(t, "mismatches", "list", "--database-url", db.URL, "--format", "json", "--status", "all")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got []struct {
			ID                  int64  `json:"id"`
			OutTradeNo          string `json:"out_trade_no"`
			ReviewStatus        string `json:"review_status"`
			LocalAmountMinor    *int64 `json:"local_amount_minor"`
			LocalAmount         string `json:"local_amount"`
			PlatformAmount      string `json:"platform_amount"`
			AtStake             string `json:"at_stake"`
			SeenCount           int    `json:"seen_count"`
			FirstSeenAt         string `json:"first_seen_at"`
			Resolution          string `json:"resolution"`
			PlatformAmountMinor int64  `json:"platform_amount_minor"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("decode: %v\n%s", err, out)
		}
		ids := make([]int64, len(got))
		for i, g := range got {
			ids[i] = g.ID
		}
		if want := []int64{open, ack, resolved, early, weird}; !slices.Equal(ids, want) {
			t.Fatalf("ids %v, want %v", ids, want)
		}
		g := got[0]
		if g.LocalAmount != "100.00" || g.PlatformAmount != "99.90" || g.AtStake != "0.10" || g.SeenCount != 3 ||
			g.LocalAmountMinor == nil || *g.LocalAmountMinor != 10000 || g.FirstSeenAt != "2026-11-28T10:00:00+08:00" {
			t.Fatalf("first finding %+v", g)
		}
		if got[1].LocalAmountMinor != nil || got[1].LocalAmount != "" || got[1].PlatformAmount != "1234.56" {
			t.Fatalf("NULL local amount came out as %+v", got[1])
		}
		if got[2].ReviewStatus != "RESOLVED" || got[2].Resolution != "ok" {
			t.Fatalf("resolved finding %+v", got[2])
		}
	})

	t.Run("csv", func(t *testing.T) {
		code, out, errOut := reviewCLI(t, "mismatches", "list", "--database-url", db.URL, "--format", "csv",
			"--status", "open,acknowledged", "--kind", "amount_mismatch")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 4 || !slices.Equal(recs[0], render.FindingCSVHeader) {
			t.Fatalf("csv:\n%s", out)
		}
		col := func(rec []string, name string) string { return rec[slices.Index(render.FindingCSVHeader, name)] }
		if col(recs[1], "id") != fmt.Sprint(open) || col(recs[1], "local_amount") != "100.00" ||
			col(recs[1], "platform_amount") != "99.90" || col(recs[1], "at_stake") != "0.10" ||
			col(recs[1], "first_seen_at") != "2026-11-28T10:00:00+08:00" || col(recs[1], "review_status") != "OPEN" {
			t.Fatalf("row %q", recs[1])
		}
		if col(recs[2], "out_trade_no") != "ORD-EARLY" || col(recs[3], "out_trade_no") != "tab\there\x1b[31mred" {
			t.Fatalf("rows %q", recs[1:])
		}
	})

	filters := []struct {
		name string
		args []string
		want []int64
	}{
		{"status all", []string{"--status", "all"}, []int64{open, ack, resolved, early, weird}},
		{"status resolved", []string{"--status", "RESOLVED"}, []int64{resolved}},
		{"kind", []string{"--kind", "UNKNOWN_ORDER"}, []int64{ack}},
		{"platform", []string{"--platform", "alipay"}, []int64{open, early, weird}},
		{"since a date: midnight in Shanghai", []string{"--since", "2026-11-28"}, []int64{open, ack, early}},
		{"since a date in UTC", []string{"--since", "2026-11-28", "--timezone", "UTC"}, []int64{open, ack}},
		// The one period rule: a date --until is its whole day, included.
		{"until a date: its day included", []string{"--until", "2026-11-27"}, []int64{weird}},
		{"since and until one date: that day", []string{"--since", "2026-11-28", "--until", "2026-11-28"}, []int64{open, ack, early}},
		{"since and until RFC 3339", []string{"--since", "2026-11-28T00:00:00+08:00", "--until", "2026-11-28T10:00:00+08:00"}, []int64{early}},
		{"after-id", []string{"--after-id", fmt.Sprint(ack)}, []int64{early, weird}},
	}
	for _, tc := range filters {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"mismatches", "list", "--database-url", db.URL, "--format", "json"}, tc.args...)
			code, out, errOut := reviewCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got []struct {
				ID int64 `json:"id"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			ids := []int64{}
			for _, g := range got {
				ids = append(ids, g.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("%v listed %v, want %v", tc.args, ids, tc.want)
			}
		})
	}
}

func TestMismatchesListPagesByID(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	var ids []int64
	for i := range 5 {
		ids = append(ids, seedReview(t, db, reviewSeed{otn: fmt.Sprintf("P-%d", i), local: 100, plat: 200}))
	}
	var listed []int64
	after := "0"
	for page := 0; ; page++ {
		code, out, errOut := reviewCLI(t, "mismatches", "list", "--database-url", db.URL, "--format", "csv", "--limit", "2", "--after-id", after)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs[1:] {
			var id int64
			fmt.Sscan(r[0], &id)
			listed = append(listed, id)
		}
		if len(recs)-1 < 2 {
			break
		}
		last := recs[len(recs)-1][0]
		if !strings.Contains(errOut, "--after-id "+last) {
			t.Fatalf("a full page must say how to get the next one; stderr %q", errOut)
		}
		after = last
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if !slices.Equal(listed, ids) {
		t.Fatalf("pages listed %v, want %v", listed, ids)
	}
}

func TestMismatchesExitCodes(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	openID := seedReview(t, db, reviewSeed{otn: "OPEN-1"})
	resolvedID := seedReview(t, db, reviewSeed{otn: "DONE-1", status: "RESOLVED", resolution: "ok", by: "ann"})
	u := db.URL
	id := func(v int64) string { return fmt.Sprint(v) }
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"no command", []string{"mismatches"}, 2, "name a command"},
		{"unknown command", []string{"mismatches", "bogus"}, 2, `unknown command "bogus"`},
		{"bad resolution", []string{"mismatches", "resolve", id(openID), "--database-url", u, "--by", annAddr, "--resolution", "paid back"}, 2, "unknown resolution"},
		{"reject without a note", []string{"mismatches", "reject", id(openID), "--database-url", u, "--by", annAddr}, 2, "--note is required"},
		{"approve without --by", []string{"mismatches", "approve", id(openID), "--database-url", u}, 2, "--by is required"},
		{"approve an open finding", []string{"mismatches", "approve", id(openID), "--database-url", u, "--by", annAddr}, 1,
			fmt.Sprintf("mismatch %d is OPEN", openID)},
		{"resolve naming a stale version", []string{"mismatches", "resolve", id(openID), "--database-url", u, "--by", annAddr,
			"--resolution", "accepted", "--version", "7"}, 1, "evidence changed, look again"},
		{"help", []string{"mismatches", "--help"}, 0, ""},
		{"list help", []string{"mismatches", "list", "--help"}, 0, "-status"},
		{"help after the id", []string{"mismatches", "resolve", "1", "--help"}, 0, "Usage: reconciler mismatches resolve ID"},
		{"bad flag after the id", []string{"mismatches", "ack", "1", "--by", annAddr, "--bogus"}, 2, "bogus"},
		{"bad status", []string{"mismatches", "list", "--database-url", u, "--status", "CLOSED"}, 2, "--status"},
		{"bad kind", []string{"mismatches", "list", "--database-url", u, "--kind", "WRONG"}, 2, "--kind"},
		{"bad platform", []string{"mismatches", "list", "--database-url", u, "--platform", "paypal"}, 2, "--platform"},
		{"bad format", []string{"mismatches", "list", "--database-url", u, "--format", "xml"}, 2, "--format"},
		{"bad since", []string{"mismatches", "list", "--database-url", u, "--since", "yesterday"}, 2, "--since"},
		{"since after until", []string{"mismatches", "list", "--database-url", u, "--since", "2026-11-29", "--until", "2026-11-28"}, 2, "before --until"},
		{"bad limit", []string{"mismatches", "list", "--database-url", u, "--limit", "0"}, 2, "--limit"},
		{"bad timezone", []string{"mismatches", "list", "--database-url", u, "--timezone", "Mars/Olympus"}, 2, "timezone"},
		{"ack without --by", []string{"mismatches", "ack", id(openID), "--database-url", u}, 2, "--by is required"},
		{"resolve without --by", []string{"mismatches", "resolve", id(openID), "--database-url", u, "--resolution", "x"}, 2, "--by is required"},
		{"resolve without --resolution", []string{"mismatches", "resolve", id(openID), "--database-url", u, "--by", annAddr}, 2, "--resolution is required"},
		{"ack without an id", []string{"mismatches", "ack", "--database-url", u, "--by", annAddr}, 2, "give the finding's id"},
		{"--by that is no address", []string{"mismatches", "ack", id(openID), "--database-url", u, "--by", "ann"}, 2, "--by must be the reviewer's address"},
		{"--by with a look-alike domain", []string{"mismatches", "ack", id(openID), "--database-url", u, "--by", "ann@ex\u0430mple.com"}, 2, `\u0430`},
		{"ack a non-numeric id", []string{"mismatches", "ack", "abc", "--database-url", u, "--by", annAddr}, 2, "positive whole number"},
		{"show two ids", []string{"mismatches", "show", "1", "2", "--database-url", u}, 2, "unexpected argument"},
		{"ack an unknown id", []string{"mismatches", "ack", "999999", "--database-url", u, "--by", annAddr}, 1, "no finding with id 999999"},
		{"resolve an unknown id", []string{"mismatches", "resolve", "999999", "--database-url", u, "--by", annAddr, "--resolution", "accepted"}, 1, "no finding with id 999999"},
		{"show an unknown id", []string{"mismatches", "show", "999999", "--database-url", u}, 1, "999999"},
		{"resolve a resolved finding", []string{"mismatches", "resolve", id(resolvedID), "--database-url", u, "--by", annAddr, "--resolution", "accepted"}, 1,
			fmt.Sprintf("mismatch %d is RESOLVED", resolvedID)},
		{"ack a resolved finding", []string{"mismatches", "ack", id(resolvedID), "--database-url", u, "--by", annAddr}, 1,
			fmt.Sprintf("mismatch %d is RESOLVED", resolvedID)},
		{"database down", []string{"mismatches", "list", "--database-url", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}, 1, "database"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := reviewCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if !strings.Contains(out+errOut, tc.wantErr) {
				t.Fatalf("output does not say %q\nstdout: %s\nstderr: %s", tc.wantErr, out, errOut)
			}
		})
	}
	// The refused moves changed nothing.
	var audit int
	if err := db.Get(&audit, `SELECT count(*) FROM reconcile_mismatch_audit`); err != nil || audit != 0 {
		t.Fatalf("refused moves wrote %d audit rows (%v)", audit, err)
	}
}

func TestMismatchesAckResolveShow(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	orderID := repotest.InsertOrder(t, db, repotest.Order{Platform: "alipay", MerchantID: "2021000000000001", OutTradeNo: "ORD-9",
		AmountMinor: 10000, Status: "PAID", CreatedAt: reviewDay, PlatformTradeNo: "2026112822009", PaidAmountMinor: 9990, PaidAt: reviewDay})
	db.MustExec(`INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor, raw_digest)
		VALUES ($1, 'alipay', '2026112822009', 'PAID', 'reconcile', 9990, 'feedface')`, orderID)
	id := seedReview(t, db, reviewSeed{orderID: orderID, otn: "ORD-9", local: 10000, plat: 9990, platformTradeNo: "2026112822009",
		detail: `{"reason":"platform paid less","raw":{"total_amount":"99.90"}}`})
	sid := fmt.Sprint(id)

	code, out, errOut := reviewCLI(t, "mismatches", "ack", sid, "--database-url", db.URL, "--by", annAddr, "--note", "asked the merchant")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("mismatch %d: OPEN -> ACKNOWLEDGED by %s", id, annAddr)) {
		t.Fatalf("ack: exit %d\n%s\n%s", code, out, errOut)
	}
	// The id may also follow the flags.
	code, out, errOut = reviewCLI(t, "mismatches", "resolve", "--database-url", db.URL, "--by", bobAddr, "--resolution", "false_positive", sid)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("mismatch %d: ACKNOWLEDGED -> RESOLVED by %s", id, bobAddr)) {
		t.Fatalf("resolve: exit %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = reviewCLI(t, "mismatches", "show", sid, "--database-url", db.URL)
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		fmt.Sprintf("Finding %d: AMOUNT_MISMATCH, RESOLVED", id),
		"local amount       100.00", "platform amount    99.90", "at stake           0.10",
		"resolution         false_positive", "evidence version   1", "note               asked the merchant", "resolved by        " + bobAddr,
		"first seen         2026-11-28 10:00:00 +08:00",
		"\n  {\n    \"raw\": {\n      \"total_amount\": \"99.90\"\n    },\n    \"reason\": \"platform paid less\"\n  }\n",
		"Audit trail:", "acknowledge  " + annAddr + "  OPEN          ACKNOWLEDGED  asked the merchant",
		"resolve      " + bobAddr + "  ACKNOWLEDGED  RESOLVED      -",
		fmt.Sprintf("Order %d (current state):", orderID), "status             PAID", "amount             100.00 CNY",
		"Payment events:", "PAID   reconcile  2026112822009      99.90   feedface",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = reviewCLI(t, "mismatches", "show", sid, "--database-url", db.URL, "--format", "json")
	if code != 0 {
		t.Fatalf("show json: exit %d: %s", code, errOut)
	}
	var d struct {
		Finding struct {
			ID           int64           `json:"id"`
			ReviewStatus string          `json:"review_status"`
			AtStake      string          `json:"at_stake"`
			Detail       json.RawMessage `json:"detail"`
		} `json:"finding"`
		Audit []struct {
			Action, Actor string
		} `json:"audit"`
		Order  *struct{ ID int64 } `json:"order"`
		Events []struct {
			EventType string `json:"event_type"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("decode show json: %v\n%s", err, out)
	}
	if d.Finding.ID != id || d.Finding.ReviewStatus != "RESOLVED" || d.Finding.AtStake != "0.10" || len(d.Audit) != 2 ||
		d.Audit[1].Actor != bobAddr || d.Order == nil || d.Order.ID != orderID || len(d.Events) != 1 || d.Events[0].EventType != "PAID" ||
		!strings.Contains(string(d.Finding.Detail), "platform paid less") {
		t.Fatalf("show json %+v", d)
	}
}

// Not parallel: it sets the process environment.
func TestMismatchesReviewerFromEnvironment(t *testing.T) {
	db := repotest.NewDB(t)
	a := seedReview(t, db, reviewSeed{otn: "ENV-1"})
	b := seedReview(t, db, reviewSeed{otn: "ENV-2"})
	t.Setenv("RECONCILER_REVIEWER", "env-reviewer@example.com")
	t.Setenv("RECONCILER_DATABASE_URL", db.URL)

	code, out, errOut := reviewCLI(t, "mismatches", "ack", fmt.Sprint(a))
	if code != 0 || !strings.Contains(out, "by env-reviewer@example.com") {
		t.Fatalf("ack with RECONCILER_REVIEWER: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = reviewCLI(t, "mismatches", "ack", fmt.Sprint(b), "--by", "Flag-Reviewer@Example.com")
	if code != 0 || !strings.Contains(out, "by flag-reviewer@example.com") {
		t.Fatalf("the flag must win over the environment: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Setenv("RECONCILER_STATUS", "ACKNOWLEDGED")
	code, out, errOut = reviewCLI(t, "mismatches", "list", "--format", "csv")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("RECONCILER_STATUS: exit %d\n%s\n%s", code, out, errOut)
	}
	var actors []string
	if err := db.Select(&actors, `SELECT actor FROM reconcile_mismatch_audit ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(actors, []string{"env-reviewer@example.com", "flag-reviewer@example.com"}) {
		t.Fatalf("audit actors %q", actors)
	}
}

// TestMismatchesMakerChecker drives the four-eyes flow through the CLI: a money-moving
// resolution waits, its proposer cannot approve it, a rejection sends it back, changed
// evidence is refused, and a second person's approval resolves it. Every move leaves one
// audit row naming --by and the operating-system user.
func TestMismatchesMakerChecker(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	id := seedReview(t, db, reviewSeed{otn: "MC-1", local: 10000, plat: 9000})
	sid, u := fmt.Sprint(id), db.URL
	steps := []struct {
		name string
		args []string
		code int
		want string
		// status after the step
		status string
	}{
		{"propose a refund", []string{"resolve", sid, "--by", annAddr, "--resolution", "refunded", "--version", "1"}, 0,
			"OPEN -> PENDING_APPROVAL by " + annAddr, "PENDING_APPROVAL"},
		{"the proposer approves", []string{"approve", sid, "--by", annAddr}, 2, "cannot approve their own", "PENDING_APPROVAL"},
		{"the proposer approves, other case", []string{"approve", sid, "--by", "ANN@Example.com"}, 2, "cannot approve their own", "PENDING_APPROVAL"},
		{"the proposer approves, zero-width space", []string{"approve", sid, "--by", annAddr + "\u200b"}, 2, "cannot approve their own", "PENDING_APPROVAL"},
		{"the proposer approves, fullwidth", []string{"approve", sid, "--by", "ＡＮＮ@example.com"}, 2, "cannot approve their own", "PENDING_APPROVAL"},
		{"resolve again while pending", []string{"resolve", sid, "--by", bobAddr, "--resolution", "accepted"}, 1, "is PENDING_APPROVAL", "PENDING_APPROVAL"},
		{"reject", []string{"reject", sid, "--by", bobAddr, "--note", "refund not in the bank file"}, 0,
			"PENDING_APPROVAL -> ACKNOWLEDGED by " + bobAddr, "ACKNOWLEDGED"},
		{"propose a write-off", []string{"resolve", sid, "--by", annAddr, "--resolution", "written_off", "--note", "below cost"}, 0,
			"ACKNOWLEDGED -> PENDING_APPROVAL", "PENDING_APPROVAL"},
		{"new evidence arrives", nil, 0, "", "PENDING_APPROVAL"},
		{"approve the old evidence", []string{"approve", sid, "--by", bobAddr}, 1, "evidence changed", "PENDING_APPROVAL"},
		{"approve naming the old version", []string{"approve", sid, "--by", bobAddr, "--version", "1"}, 1, "evidence changed", "PENDING_APPROVAL"},
		{"reject the stale proposal", []string{"reject", sid, "--by", bobAddr, "--note", "figures changed"}, 0, "-> ACKNOWLEDGED", "ACKNOWLEDGED"},
		{"propose on the new evidence", []string{"resolve", sid, "--by", annAddr, "--resolution", "adjusted", "--note", "booked by hand", "--version", "2"}, 0,
			"PENDING_APPROVAL", "PENDING_APPROVAL"},
		{"a second person approves", []string{"approve", sid, "--by", bobAddr, "--version", "2"}, 0,
			"PENDING_APPROVAL -> RESOLVED by " + bobAddr, "RESOLVED"},
	}
	for _, st := range steps {
		if st.args == nil { // the apply path sees different figures: the database bumps the version
			db.MustExec(`UPDATE reconcile_mismatches SET platform_amount_minor = 8000, seen_count = seen_count + 1 WHERE id = $1`, id)
		} else {
			code, out, errOut := reviewCLI(t, append(append([]string{"mismatches"}, st.args...), "--database-url", u)...)
			if code != st.code || !strings.Contains(out+errOut, st.want) {
				t.Fatalf("%s: exit %d (want %d), output lacks %q\nstdout: %s\nstderr: %s", st.name, code, st.code, st.want, out, errOut)
			}
		}
		var status string
		if err := db.Get(&status, `SELECT review_status FROM reconcile_mismatches WHERE id = $1`, id); err != nil || status != st.status {
			t.Fatalf("%s: status %s (%v), want %s", st.name, status, err, st.status)
		}
	}
	var f struct {
		Resolution string `db:"resolution"`
		ResolvedBy string `db:"resolved_by"`
		ApprovedBy string `db:"approved_by"`
		Version    int64  `db:"evidence_version"`
	}
	if err := db.Get(&f, `SELECT resolution, resolved_by, approved_by, evidence_version FROM reconcile_mismatches WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if f.Resolution != "adjusted" || f.ResolvedBy != annAddr || f.ApprovedBy != bobAddr || f.Version != 2 {
		t.Fatalf("resolved finding %+v, want adjusted, proposed by annAddr, approved by bobAddr, version 2", f)
	}
	var trail []string
	if err := db.Select(&trail, `SELECT action || ' ' || actor || ' v' || evidence_version || ' ' || (os_user <> '')::text
		FROM reconcile_mismatch_audit WHERE mismatch_id = $1 ORDER BY id`, id); err != nil {
		t.Fatal(err)
	}
	want := []string{"propose " + annAddr + " v1 true", "reject " + bobAddr + " v1 true", "propose " + annAddr + " v1 true",
		"reject " + bobAddr + " v2 true", "propose " + annAddr + " v2 true", "approve " + bobAddr + " v2 true"}
	if !slices.Equal(trail, want) {
		t.Fatalf("audit trail %q, want %q (one row per accepted move, refusals none)", trail, want)
	}
}

// TestMismatchesReviewerIdentity: --by goes through the one normaliser, so the proposer in
// another spelling (a zero-width space, upper case) is still the proposer, and what is stored
// is the normalised address; once the lists are set, a person on neither is refused, a
// reviewer may not approve, and a look-alike of an approver (a Cyrillic с) is not one. Every
// refusal is exit 2 and writes nothing.
func TestMismatchesReviewerIdentity(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	id := seedReview(t, db, reviewSeed{otn: "ID-1", local: 10000, plat: 9000})
	other := seedReview(t, db, reviewSeed{otn: "ID-2"})
	sid, u := fmt.Sprint(id), db.URL
	lists := []string{"--reviewers", "alice@example.com,bob@example.com", "--approvers", "cfo@example.com,*@approvers.example.com"}
	steps := []struct {
		name  string
		args  []string
		code  int
		want  string
		lists bool // with the lists set
	}{
		{"alice proposes", []string{"resolve", sid, "--by", "alice@example.com", "--resolution", "refunded"}, 0, "PENDING_APPROVAL by alice@example.com", false},
		{"alice approves with a zero-width space", []string{"approve", sid, "--by", "alice@example.com\u200b"}, 2, "cannot approve their own", false},
		{"alice approves with a BOM and an RTL override", []string{"approve", sid, "--by", "\ufeff\u202eALICE@example.com"}, 2, "cannot approve their own", false},
		{"not on either list", []string{"ack", fmt.Sprint(other), "--by", "zed@example.com"}, 2, "neither RECONCILER_REVIEWERS nor RECONCILER_APPROVERS", true},
		{"a reviewer approves", []string{"reject", sid, "--by", "bob@example.com", "--note", "no"}, 2, "not on RECONCILER_APPROVERS", true},
		{"a Cyrillic с approves", []string{"reject", sid, "--by", "\u0441fo@example.com", "--note", "no"}, 2, `"\u0441fo@example.com" is not on RECONCILER_APPROVERS`, true},
		{"a subdomain of the approvers' domain", []string{"reject", sid, "--by", "eve@x.approvers.example.com", "--note", "no"}, 2, "not on RECONCILER_APPROVERS", true},
		{"two @ ending in the approvers' domain", []string{"reject", sid, "--by", "eve@evil.com@approvers.example.com", "--note", "no"}, 2, "2 @ signs", true},
		{"a bad list entry", []string{"ack", fmt.Sprint(other), "--by", "bob@example.com", "--approvers", "*@evil.com@approvers.example.com"}, 2, "RECONCILER_APPROVERS", false},
		{"alice approves with the lists set", []string{"approve", sid, "--by", "alice@example.com\u200b"}, 2, "not on RECONCILER_APPROVERS", true},
		{"the approver in capitals", []string{"approve", sid, "--by", "CFO@Example.com"}, 0, "PENDING_APPROVAL -> RESOLVED by cfo@example.com", true},
		{"a reviewer in capitals", []string{"ack", fmt.Sprint(other), "--by", "ALICE@Example.com"}, 0, "OPEN -> ACKNOWLEDGED by alice@example.com", true},
	}
	for _, st := range steps {
		args := append(append([]string{"mismatches"}, st.args...), "--database-url", u)
		if st.lists {
			args = append(args, lists...)
		}
		code, out, errOut := reviewCLI(t, args...)
		if code != st.code || !strings.Contains(out+errOut, st.want) {
			t.Fatalf("%s: exit %d (want %d), output lacks %q\nstdout: %s\nstderr: %s", st.name, code, st.code, st.want, out, errOut)
		}
	}
	// Only the accepted moves left audit rows, each under the normalised address.
	var trail []string
	if err := db.Select(&trail, `SELECT action || ' ' || actor FROM reconcile_mismatch_audit ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	want := []string{"propose alice@example.com", "approve cfo@example.com", "acknowledge alice@example.com"}
	if !slices.Equal(trail, want) {
		t.Fatalf("audit trail %q, want %q", trail, want)
	}
}

// Not parallel: it sets the process environment. The lists come from RECONCILER_APPROVERS as
// in a deployment; an approver look-alike is refused and the real approver is not.
func TestMismatchesListsFromEnvironment(t *testing.T) {
	db := repotest.NewDB(t)
	id := seedReview(t, db, reviewSeed{otn: "ENVLIST-1", local: 10000, plat: 9000})
	t.Setenv("RECONCILER_DATABASE_URL", db.URL)
	if code, out, errOut := reviewCLI(t, "mismatches", "resolve", fmt.Sprint(id), "--by", annAddr, "--resolution", "refunded"); code != 0 {
		t.Fatalf("propose without lists: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Setenv("RECONCILER_REVIEWERS", annAddr)
	t.Setenv("RECONCILER_APPROVERS", "cfo@example.com")
	for _, by := range []string{"\u0441fo@example.com", "cfo@examp1e.com", annAddr} {
		code, out, errOut := reviewCLI(t, "mismatches", "approve", fmt.Sprint(id), "--by", by)
		if code != 2 || !strings.Contains(errOut, "not on RECONCILER_APPROVERS") {
			t.Fatalf("approve --by %+q: exit %d, want 2 naming RECONCILER_APPROVERS\n%s\n%s", by, code, out, errOut)
		}
	}
	code, out, errOut := reviewCLI(t, "mismatches", "approve", fmt.Sprint(id), "--by", "cfo@example.com")
	if code != 0 || !strings.Contains(out, "PENDING_APPROVAL -> RESOLVED by cfo@example.com") {
		t.Fatalf("the approver: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestMismatchesFindByNumber: `mismatches show` takes an order, trade or refund number as
// the console's search box does (its start will do when it names one finding), and
// `mismatches list --q` lists what it finds; a number several findings start with lists
// them and asks for more (exit 2), one none starts with is exit 1.
func TestMismatchesFindByNumber(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	amount := seedReview(t, db, reviewSeed{otn: "A-amount-mismatch-1", local: 10000, plat: 9990, platformTradeNo: "2026112822001"})
	seedReview(t, db, reviewSeed{otn: "A-amount-mismatch-2", local: 500, plat: 400, platformTradeNo: "2026112822002"})
	other := seedReview(t, db, reviewSeed{otn: "W-unknown-1", kind: "UNKNOWN_ORDER", platform: "wechatpay", plat: 3600,
		platformTradeNo: "4200000001202611280001"})
	cases := []struct {
		name   string
		args   []string
		code   int
		output string
	}{
		{"show by out_trade_no", []string{"show", "A-amount-mismatch-1"}, 0, fmt.Sprintf("Finding %d:", amount)},
		{"show by the start of a trade number", []string{"show", "42000000012026"}, 0, fmt.Sprintf("Finding %d:", other)},
		{"show by id", []string{"show", fmt.Sprint(other)}, 0, fmt.Sprintf("Finding %d:", other)},
		{"show a number two start with", []string{"show", "A-amount"}, 2, "2 findings have a number starting with A-amount"},
		{"show a number none starts with", []string{"show", "NOPE-1"}, 1, "no finding has the id NOPE-1"},
		{"list --q", []string{"list", "--q", "2026112822", "--format", "csv"}, 0, "A-amount-mismatch-2"},
		{"list --q too long", []string{"list", "--q", strings.Repeat("9", 65)}, 2, "--q"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := reviewCLI(t, append(append([]string{"mismatches"}, c.args...), "--database-url", db.URL)...)
			if code != c.code || !strings.Contains(out+errOut, c.output) {
				t.Fatalf("exit %d, want %d saying %q\nstdout: %s\nstderr: %s", code, c.code, c.output, out, errOut)
			}
		})
	}
}

// TestMismatchesAcceptPayment: a payment made after the order was closed is taken into the
// books by the CLI under maker-checker: the approval moves the order to PAID (one event of
// source review, one outbox row) and marks the payment's claim DONE in Redis, so the
// platform's remaining callbacks for it are shed; approving again is refused and writes
// nothing.
func TestMismatchesAcceptPayment(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rd := repotest.NewRedis(t)
	const tradeNo = "2026112822001400000000000009"
	order := repotest.InsertOrder(t, db, repotest.Order{Platform: "alipay", MerchantID: "2021000000000001", OutTradeNo: "LATE-9",
		AmountMinor: 4200, Status: "CLOSED", CreatedAt: reviewDay})
	id := seedReview(t, db, reviewSeed{orderID: order, otn: "LATE-9", kind: "PAID_AFTER_CLOSE", local: 4200, plat: 4200,
		platformTradeNo: tradeNo, lstate: "CLOSED"})
	sid := fmt.Sprint(id)
	common := []string{"--database-url", db.URL, "--redis-url", rd.URL, "--claim-prefix", rd.Prefix}

	code, out, errOut := reviewCLI(t, append([]string{"mismatches", "resolve", sid, "--by", annAddr, "--resolution", "accept_payment"}, common...)...)
	if code != 0 || !strings.Contains(out, "-> PENDING_APPROVAL") {
		t.Fatalf("propose accept_payment: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = reviewCLI(t, append([]string{"mismatches", "approve", sid, "--by", bobAddr}, common...)...)
	if code != 0 || !strings.Contains(out, "order LATE-9 is PAID by "+tradeNo) {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	if v, err := rd.Client.Get(context.Background(), rd.Prefix+"alipay:"+tradeNo).Result(); err != nil || v != "DONE" {
		t.Errorf("the payment's claim: %q, %v; want DONE", v, err)
	}
	code, _, _ = reviewCLI(t, append([]string{"mismatches", "approve", sid, "--by", "carol@example.com"}, common...)...)
	if code != 1 {
		t.Errorf("approving again: exit %d, want 1 (already RESOLVED)", code)
	}
	var got struct {
		Status string `db:"status"`
		Events int    `db:"events"`
		Outbox int    `db:"outbox"`
	}
	if err := db.Get(&got, `SELECT status,
		(SELECT count(*) FROM payment_events WHERE order_id = o.id AND event_type = 'PAID' AND source = 'review') AS events,
		(SELECT count(*) FROM fulfillment_outbox WHERE order_id = o.id AND kind = 'order.paid') AS outbox
		FROM payment_orders o WHERE id = $1`, order); err != nil {
		t.Fatal(err)
	}
	if got.Status != "PAID" || got.Events != 1 || got.Outbox != 1 {
		t.Fatalf("the order after the approval: %+v, want PAID with one review event and one outbox row", got)
	}
}
