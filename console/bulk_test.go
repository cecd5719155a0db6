package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestBulkMoves: a reviewer acknowledges two selected findings at once; proposes one
// write-off for all that a filter matches, after a page that shows how many and asks to
// confirm; an approver approves the batch. Each finding gets its own audit row; one whose
// evidence changed after the count was shown is left alone and listed; a reviewer cannot
// approve in bulk either.
func TestBulkMoves(t *testing.T) {
	f := newFixture(t)
	_, err := f.db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor,
		platform_amount_minor, first_seen_at, last_seen_at)
		SELECT 'alipay', 'BULK', 'BULK-' || i, 'AMOUNT_MISMATCH', 1000, 990, $1::timestamptz, $1::timestamptz
		FROM generate_series(1, 30) AS i`, base)
	must(t, err)
	page := func(who, path string) string {
		w := f.do(t, request{method: "GET", path: path, peer: trusted, who: who})
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, w.Code)
		}
		return w.Body.String()
	}
	post := func(who string, v url.Values) (int, string) {
		w := f.do(t, request{method: "POST", path: "/review/bulk", peer: trusted, who: who, values: v})
		return w.Code, w.Body.String()
	}
	count := func(q string, args ...any) int {
		var n int
		must(t, f.db.Get(&n, q, args...))
		return n
	}
	sels := regexp.MustCompile(`name="sel" value="([0-9.]+)"`)

	// ann selects two rows of the list and acknowledges them.
	list := page(ann, "/review/?merchant=BULK&sort=id&dir=asc")
	csrf := csrfRe.FindStringSubmatch(list)[1]
	rows := sels.FindAllStringSubmatch(list, 2)
	code, body := post(ann, url.Values{"csrf": {csrf}, "action": {"acknowledge"}, "note": {"seen"}, "scope": {"selected"},
		"sel": {rows[0][1], rows[1][1]}, "filter": {"merchant=BULK"}})
	if code != http.StatusOK || !strings.Contains(body, "Moved: 2 · Not moved: 0") {
		t.Fatalf("acknowledge two: %d\n%s", code, body)
	}
	if n := count(`SELECT count(*) FROM reconcile_mismatch_audit WHERE action = 'acknowledge' AND note = 'seen'`); n != 2 {
		t.Fatalf("%d audit rows for two acknowledgements", n)
	}

	// All that match: the count first, then the move on exactly those, at the versions read.
	code, body = post(ann, url.Values{"csrf": {csrf}, "action": {"resolve"}, "resolution": {"written_off"}, "note": {"below cost"},
		"scope": {"all"}, "filter": {"merchant=BULK"}})
	if code != http.StatusOK || !strings.Contains(body, `id="bulk-count"`) || !strings.Contains(body, "Confirm (30)") {
		t.Fatalf("all that match: %d, want a confirmation of 30\n%s", code, body)
	}
	confirm := url.Values{"csrf": {csrf}, "action": {"resolve"}, "resolution": {"written_off"}, "note": {"below cost"},
		"scope": {"confirmed"}, "filter": {"merchant=BULK"}}
	for _, m := range sels.FindAllStringSubmatch(body, -1) {
		confirm.Add("sel", m[1])
	}
	if len(confirm["sel"]) != 30 {
		t.Fatalf("the confirmation carries %d findings, want 30", len(confirm["sel"]))
	}
	f.db.MustExec(`UPDATE reconcile_mismatches SET platform_amount_minor = 980 WHERE out_trade_no = 'BULK-30'`) // new evidence meanwhile
	code, body = post(ann, confirm)
	if code != http.StatusOK || !strings.Contains(body, "Moved: 29 · Not moved: 1") || !strings.Contains(body, "The evidence changed") {
		t.Fatalf("confirmed: %d\n%s", code, body)
	}
	if n := count(`SELECT count(*) FROM reconcile_mismatches WHERE merchant_id = 'BULK' AND review_status = 'PENDING_APPROVAL' AND proposed_by = $1`, ann); n != 29 {
		t.Fatalf("%d proposals by ann, want 29", n)
	}

	// A reviewer cannot approve, one by one or in bulk.
	if code, _ := post(ann, url.Values{"csrf": {csrf}, "action": {"approve"}, "scope": {"all"}, "filter": {"status=PENDING_APPROVAL"}}); code != http.StatusForbidden {
		t.Fatalf("ann approving in bulk: %d, want 403", code)
	}

	// cfo approves every proposal awaiting approval.
	ccsrf := csrfRe.FindStringSubmatch(page(cfo, "/review/"))[1]
	_, body = post(cfo, url.Values{"csrf": {ccsrf}, "action": {"approve"}, "scope": {"all"}, "filter": {"status=PENDING_APPROVAL&merchant=BULK"}})
	approve := url.Values{"csrf": {ccsrf}, "action": {"approve"}, "scope": {"confirmed"}}
	for _, m := range sels.FindAllStringSubmatch(body, -1) {
		approve.Add("sel", m[1])
	}
	if code, body = post(cfo, approve); code != http.StatusOK || !strings.Contains(body, "Moved: 29 · Not moved: 0") {
		t.Fatalf("cfo approving: %d\n%s", code, body)
	}
	if n := count(`SELECT count(*) FROM reconcile_mismatch_audit WHERE action = 'approve' AND actor = $1`, cfo); n != 29 {
		t.Fatalf("%d approval audit rows, want 29", n)
	}

	// Nothing chosen, no note for a rejection, no token: refused whole.
	for _, c := range []struct {
		v    url.Values
		code int
	}{
		{url.Values{"csrf": {csrf}, "action": {"acknowledge"}, "scope": {"selected"}}, http.StatusBadRequest},
		{url.Values{"csrf": {csrf}, "action": {""}, "scope": {"selected"}, "sel": {rows[0][1]}}, http.StatusBadRequest},
		{url.Values{"csrf": {ccsrf}, "action": {"reject"}, "scope": {"selected"}, "sel": {rows[0][1]}}, http.StatusForbidden}, // cfo's token, ann posting
		{url.Values{"action": {"acknowledge"}, "scope": {"selected"}, "sel": {rows[0][1]}}, http.StatusForbidden},
	} {
		if code, body := post(ann, c.v); code != c.code {
			t.Errorf("%v: %d, want %d\n%s", c.v, code, c.code, body)
		}
	}
}
