package console_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMakerCheckerInTheConsole: a reviewer who is not an approver sees no approve button and
// gets 403 posting one anyway; the proposer sees none on their own proposal and is refused.
func TestMakerCheckerInTheConsole(t *testing.T) {
	f := newFixture(t)
	post := func(who, action string, id int64, form map[string]string) int {
		form["csrf"] = f.tokenFor(t, who)
		return f.do(t, request{method: "POST", path: actionPath(id, action), peer: trusted, who: who, form: form}).Code
	}
	audits := func(id int64) (n int) {
		must(t, f.db.Get(&n, `SELECT count(*) FROM reconcile_mismatch_audit WHERE mismatch_id = $1`, id))
		return n
	}
	page := func(who string, id int64) string {
		return f.do(t, request{method: "GET", path: findingPath(id), peer: trusted, who: who}).Body.String()
	}
	if c := post(ann, "resolve", f.pac, map[string]string{"version": "1", "resolution": "written_off", "note": "below cost"}); c != http.StatusSeeOther {
		t.Fatalf("propose: HTTP %d", c)
	}
	for _, c := range []struct {
		who         string
		wantButtons bool
	}{{ann, false}, {bob, false}, {cfo, true}, {aud, true}} {
		body := page(c.who, f.pac)
		if got := strings.Contains(body, `id="form-approve"`); got != c.wantButtons {
			t.Errorf("%s sees the approve form: %v, want %v", c.who, got, c.wantButtons)
		}
		if got := strings.Contains(body, `id="form-reject"`); got != c.wantButtons {
			t.Errorf("%s sees the reject form: %v, want %v", c.who, got, c.wantButtons)
		}
	}
	if !strings.Contains(page(ann, f.pac), "You proposed this") {
		t.Errorf("the proposer is not told a second person must approve")
	}
	n := audits(f.pac)
	for _, action := range []string{"approve", "reject"} {
		if c := post(bob, action, f.pac, map[string]string{"version": "1", "note": "looks fine"}); c != http.StatusForbidden {
			t.Errorf("reviewer bob posting %s: HTTP %d, want 403", action, c)
		}
	}
	// An approver's own proposal: cfo proposes on another finding and may not approve it.
	if c := post(cfo, "resolve", f.unknown, map[string]string{"version": "1", "resolution": "refunded"}); c != http.StatusSeeOther {
		t.Fatalf("cfo proposes: HTTP %d", c)
	}
	if strings.Contains(page(cfo, f.unknown), `id="form-approve"`) {
		t.Errorf("cfo sees an approve button on their own proposal")
	}
	w := f.do(t, request{method: "POST", path: actionPath(f.unknown, "approve"), peer: trusted, who: cfo,
		form: map[string]string{"version": "1", "csrf": f.token(t, cfo, f.amount)}})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "second person") {
		t.Errorf("self-approval: HTTP %d, want 403 naming the second person\n%s", w.Code, w.Body.String())
	}
	if audits(f.pac) != n {
		t.Errorf("refused approvals wrote audit rows")
	}
	if c := post(cfo, "approve", f.pac, map[string]string{"version": "1"}); c != http.StatusSeeOther {
		t.Errorf("cfo approves ann's proposal: HTTP %d", c)
	}
}

// TestStaleEvidenceIsRefused: a reviewer who read version 1 cannot resolve after a pass saw
// new figures; the page says to look again and shows the new version.
func TestStaleEvidenceIsRefused(t *testing.T) {
	f := newFixture(t)
	tok := f.tokenFor(t, ann)
	_, err := f.db.Exec(`UPDATE reconcile_mismatches SET platform_amount_minor = 143456, seen_count = seen_count + 1 WHERE id = $1`, f.amount)
	must(t, err)
	w := f.do(t, request{method: "POST", path: actionPath(f.amount, "resolve"), peer: trusted, who: ann,
		form: map[string]string{"csrf": tok, "version": "1", "resolution": "accepted"}})
	body := w.Body.String()
	if w.Code != http.StatusConflict || !strings.Contains(body, "look again") || !strings.Contains(body, `<b id="version">2</b>`) {
		t.Fatalf("stale resolve: HTTP %d, want 409 with 'look again' and version 2\n%s", w.Code, body)
	}
	var n int
	must(t, f.db.Get(&n, `SELECT count(*) FROM reconcile_mismatch_audit WHERE mismatch_id = $1`, f.amount))
	if n != 0 {
		t.Errorf("a refused move wrote %d audit rows", n)
	}
	// Without a version at all the console refuses too: it always names what was seen.
	w = f.do(t, request{method: "POST", path: actionPath(f.amount, "resolve"), peer: trusted, who: ann,
		form: map[string]string{"csrf": tok, "resolution": "accepted"}})
	if w.Code != http.StatusBadRequest {
		t.Errorf("resolve without a version: HTTP %d, want 400", w.Code)
	}
}

// TestRacingReviewers: two reviewers acknowledge the same finding at once; one wins, the
// other is told someone else moved it, and one audit row is written.
func TestRacingReviewers(t *testing.T) {
	f := newFixture(t)
	toks := map[string]string{ann: f.tokenFor(t, ann), bob: f.tokenFor(t, bob)}
	codes := map[string]int{}
	bodies := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for who, tok := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := f.do(t, request{method: "POST", path: actionPath(f.amount, "acknowledge"), peer: trusted, who: who,
				form: map[string]string{"csrf": tok, "version": "1"}})
			mu.Lock()
			codes[who], bodies[who] = w.Code, w.Body.String()
			mu.Unlock()
		}()
	}
	wg.Wait()
	won, lost := 0, 0
	for who, c := range codes {
		switch c {
		case http.StatusSeeOther:
			won++
		case http.StatusConflict:
			lost++
			if !strings.Contains(bodies[who], "Someone else already moved") {
				t.Errorf("the loser %s is not told why", who)
			}
		}
	}
	var n int
	must(t, f.db.Get(&n, `SELECT count(*) FROM reconcile_mismatch_audit WHERE mismatch_id = $1`, f.amount))
	if won != 1 || lost != 1 || n != 1 {
		t.Errorf("race: %v; audit rows %d; want one 303, one 409, one row", codes, n)
	}
}

var rowRe = regexp.MustCompile(`<a href="/review/findings/(\d+)" class="open">`)

// TestListFiltersSortsAndPages: the totals at the top count every match; each filter
// narrows; sorting orders; pages do not overlap; a bad filter is a 400 naming the field.
func TestListFiltersSortsAndPages(t *testing.T) {
	f := newFixture(t)
	// 60 small amount findings on another merchant, one fen at stake apiece... plus i fen.
	_, err := f.db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor,
		platform_amount_minor, first_seen_at, last_seen_at)
		SELECT 'alipay', '2021000000000009', 'BULK-' || i, 'AMOUNT_MISMATCH', 1000, 1000 + i, $1::timestamptz, $1::timestamptz + i * interval '1 second'
		FROM generate_series(1, 60) AS i`, base)
	must(t, err)
	list := func(q string) (int, []string, string) {
		w := f.do(t, request{method: "GET", path: "/review/?" + q, peer: trusted, who: ann})
		var ids []string
		for _, m := range rowRe.FindAllStringSubmatch(w.Body.String(), -1) {
			ids = append(ids, m[1])
		}
		return w.Code, ids, w.Body.String()
	}
	cases := []struct {
		q         string
		wantRows  int
		wantTotal string
	}{
		{"", 50, "<b>63</b>"},
		{"page=2", 13, "<b>63</b>"},
		{"kind=UNKNOWN_ORDER", 1, "<b>1</b>"},
		{"platform=wechatpay", 2, "<b>2</b>"},
		{"merchant=2021000000000009", 50, "<b>60</b>"},
		{"status=OPEN&status=RESOLVED", 50, "<b>63</b>"},
		{"status=RESOLVED", 0, "<b>0</b>"},
		{"min=100", 2, "<b>2</b>"},                       // 10,000 at stake (amount) and 9,900 (paid after close)
		{"min=101", 1, "<b>1</b>"},                       // the paid-after-close one alone (¥9,900.00)
		{"min=100&max=100", 1, "<b>1</b>"},               // the amount one alone (¥100.00)
		{"from=2026-11-25&to=2026-11-25", 1, "<b>1</b>"}, // first seen three days before base
		{"from=2026-11-28", 50, "<b>62</b>"},
		{"q=BULK-1", 11, "<b>11</b>"},  // BULK-1 and BULK-10 to BULK-19: the start of the number
		{"q=+BULK-60+", 1, "<b>1</b>"}, // spaces around it do not count
		{"q=ULK-1", 0, "<b>0</b>"},     // a prefix, not a part
		{"q=BULK-1&kind=UNKNOWN_ORDER", 0, "<b>0</b>"},
	}
	for _, c := range cases {
		code, ids, body := list(c.q)
		if code != http.StatusOK || len(ids) != c.wantRows || !strings.Contains(body, `<div class="card total"><small>Total</small>`+c.wantTotal) {
			t.Errorf("%q: HTTP %d, %d rows, want %d rows and total %s", c.q, code, len(ids), c.wantRows, c.wantTotal)
		}
	}
	_, p1, body := list("")
	_, p2, _ := list("page=2")
	seen := map[string]bool{}
	for _, id := range append(p1, p2...) {
		if seen[id] {
			t.Errorf("finding %s on both pages", id)
		}
		seen[id] = true
	}
	if !strings.Contains(body, `rel="next"`) || strings.Contains(body, `rel="prev"`) {
		t.Errorf("page 1 pager wrong")
	}
	// Per-kind totals: 61 amount findings: 10,000 + 60 bulk (1..60 fen) = ¥100.00 + ¥18.30.
	if !strings.Contains(body, `data-kind="AMOUNT_MISMATCH"><small>Amount differs</small><b>61</b><small>Amount at stake ¥118.30</small>`) {
		t.Errorf("amount totals card missing or wrong")
	}
	_, desc, _ := list("sort=at_stake")
	_, asc, _ := list("sort=at_stake&dir=asc")
	if len(desc) < 2 || desc[0] != itoa(f.pac) || desc[1] != itoa(f.amount) || asc[0] == itoa(f.pac) {
		t.Errorf("sort by at stake: desc starts %v, asc starts %v", desc[:1], asc[:1])
	}
	for _, bad := range []string{"status=MAYBE", "kind=NOPE", "platform=paypal", "from=28/11/2026", "min=ten", "sort=name", "page=0", "from=2026-11-29&to=2026-11-28"} {
		if code, _, _ := list(bad); code != http.StatusBadRequest {
			t.Errorf("%q: HTTP %d, want 400", bad, code)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestListShowsWhatNeedsActionAndWhatIsOverdue: without a status asked for, the list and its
// totals are what someone still has to act on (open, acknowledged, awaiting approval); a
// finding unresolved longer than the review SLA (72 hours by default) is overdue: counted on
// its card, marked in the age column, and listed alone by the overdue filter.
func TestListShowsWhatNeedsActionAndWhatIsOverdue(t *testing.T) {
	f := newFixture(t) // now: base + 6h
	for _, c := range []struct {
		otn, status string
		firstSeen   time.Time
	}{
		{"SLA-OPEN-OLD", "OPEN", base.Add(-5 * 24 * time.Hour)},                // 5d 6h: overdue
		{"SLA-ACK-NEW", "ACKNOWLEDGED", base.Add(-time.Hour)},                  // 7h
		{"SLA-PENDING-OLD", "PENDING_APPROVAL", base.Add(-4 * 24 * time.Hour)}, // 4d 6h: overdue
		{"SLA-DONE-OLD", "RESOLVED", base.Add(-10 * 24 * time.Hour)},           // resolved: never overdue
	} {
		_, err := f.db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor,
			platform_amount_minor, first_seen_at, last_seen_at, review_status, resolution, resolved_by, proposed_by)
			VALUES ('alipay', 'SLA', $1, 'AMOUNT_MISMATCH', 100, 90, $2, $2, $3,
				CASE WHEN $3 IN ('RESOLVED', 'PENDING_APPROVAL') THEN 'adjusted' END,
				CASE WHEN $3 = 'RESOLVED' THEN 'cfo@example.com' END,
				CASE WHEN $3 = 'PENDING_APPROVAL' THEN 'ann@example.com' END)`, c.otn, c.firstSeen, c.status)
		must(t, err)
	}
	get := func(q string) string {
		w := f.do(t, request{method: "GET", path: "/review/?merchant=SLA" + q, peer: trusted, who: ann})
		if w.Code != 200 {
			t.Fatalf("%s: %d\n%s", q, w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	total := regexp.MustCompile(`<small>Total</small><b>(\d+)</b>`)
	overdue := regexp.MustCompile(`id="overdue-card"[^>]*><small>Overdue</small><b>(\d+)</b><small>Due within 3d</small>`)
	for _, c := range []struct {
		q                    string
		rows, total, overdue string
	}{
		{"", "3", "3", "2"},
		{"&status=OPEN&status=ACKNOWLEDGED&status=PENDING_APPROVAL&status=RESOLVED", "4", "4", "2"},
		{"&overdue=1", "2", "2", "2"},
		{"&status=RESOLVED", "1", "1", "0"},
	} {
		body := get(c.q)
		if n := fmt.Sprint(len(rowRe.FindAllString(body, -1))); n != c.rows {
			t.Errorf("%q: %s rows, want %s", c.q, n, c.rows)
		}
		if m := total.FindStringSubmatch(body); m == nil || m[1] != c.total {
			t.Errorf("%q: total card %v, want %s", c.q, m, c.total)
		}
		if m := overdue.FindStringSubmatch(body); m == nil || m[1] != c.overdue {
			t.Errorf("%q: overdue card %v, want %s", c.q, m, c.overdue)
		}
	}
	body := get("")
	for _, want := range []string{
		`<td class="nowrap age">5d 6h <span class="status status-overdue">Overdue</span></td>`,
		`<td class="nowrap age">4d 6h <span class="status status-overdue">Overdue</span></td>`,
		`<td class="nowrap age">7h</td>`,
		`name="status" value="OPEN" checked`, `name="status" value="PENDING_APPROVAL" checked`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
	if strings.Contains(body, `value="RESOLVED" checked`) {
		t.Errorf("the default view asks for resolved findings")
	}
}

// TestListSumsByPlatformAndAccount: the list sums what it matches per platform and per
// merchant account (most at stake first), each account linking to the list narrowed to it.
func TestListSumsByPlatformAndAccount(t *testing.T) {
	f := newFixture(t)
	_, err := f.db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor,
		platform_amount_minor, first_seen_at, last_seen_at)
		SELECT 'wechatpay', '19000000' || (i % 3), 'SUM-' || i, 'AMOUNT_MISMATCH', 1000, 1000 + 100 * (i % 3), $1::timestamptz, $1::timestamptz
		FROM generate_series(1, 9) AS i`, base)
	must(t, err)
	w := f.do(t, request{method: "GET", path: "/review/?kind=AMOUNT_MISMATCH", peer: trusted, who: ann})
	body := w.Body.String()
	i := strings.Index(body, `<table id="by-account">`)
	if w.Code != 200 || i < 0 {
		t.Fatalf("%d: no summary by account:\n%s", w.Code, body)
	}
	table := body[i : i+strings.Index(body[i:], "</table>")]
	// Three accounts of three findings: 0, 1 and 2 yuan at stake apiece; the fixture's one
	// Alipay amount finding (100 yuan) comes first.
	rows := regexp.MustCompile(`<tr data-account="([^"]+)">.*?<td class="num">(\d+)</td><td class="num">([^<]+)</td>`).FindAllStringSubmatch(table, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1]+" "+r[2]+" "+r[3])
	}
	want := []string{"alipay:2021000000000001 1 ¥100.00", "wechatpay:190000002 3 ¥6.00", "wechatpay:190000001 3 ¥3.00", "wechatpay:190000000 3 ¥0.00"}
	if !slices.Equal(got, want) {
		t.Errorf("by account: %v, want %v", got, want)
	}
	if !strings.Contains(table, `<td><b>WeChat Pay</b></td><td>all accounts</td><td class="num">9</td><td class="num">¥9.00</td>`) {
		t.Errorf("no WeChat Pay total of 9 findings, ¥9.00:\n%s", table)
	}
	if !strings.Contains(table, `href="/review/?kind=AMOUNT_MISMATCH&amp;merchant=190000001&amp;platform=wechatpay&amp;status=OPEN`) {
		t.Errorf("an account does not link to the list narrowed to it:\n%s", table)
	}
}
