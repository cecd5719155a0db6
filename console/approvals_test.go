package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/repo/postgres"
)

// TestApprovalQueue: the queue shows each proposal awaiting approval with its proposer, the
// resolution proposed, the note and how long it has waited; the viewer's own proposals sit
// apart, and where no second approver exists the page says their proposals cannot be
// approved. The finding page says why a move is not offered instead of "nothing to do".
func TestApprovalQueue(t *testing.T) {
	f := newFixture(t) // now: base + 6h
	propose := func(otn, by, resolution, note string, ago time.Duration) int64 {
		var id int64
		must(t, f.db.QueryRow(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor,
			platform_amount_minor, first_seen_at, last_seen_at, review_status, resolution, resolved_by, proposed_by, proposed_at,
			proposed_version, note)
			VALUES ('alipay', 'Q', $1, 'AMOUNT_MISMATCH', 100, 90, $2, $2, 'PENDING_APPROVAL', $3, $4, $4, $5, 1, $6) RETURNING id`,
			otn, base.Add(-48*time.Hour), resolution, by, base.Add(6*time.Hour-ago), note).Scan(&id))
		return id
	}
	byAnn := propose("Q-ANN", ann, "refunded", "gave the 0.10 back", 2*time.Hour)
	byCfo := propose("Q-CFO", cfo, "adjusted", "booked by hand", 26*time.Hour)

	get := func(who, path string) string {
		w := f.do(t, request{method: "GET", path: path, peer: trusted, who: who})
		if w.Code != 200 {
			t.Fatalf("%s as %s: %d\n%s", path, who, w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	section := func(body, id string) string {
		i := strings.Index(body, `<table id="`+id+`">`)
		if i < 0 {
			return ""
		}
		return body[i : i+strings.Index(body[i:], "</table>")]
	}

	q := get(cfo, "/review/approvals")
	forYou, mine := section(q, "for-you"), section(q, "mine")
	for _, want := range []string{findingPath(byAnn), ann, "Refunded", "gave the 0.10 back", ">2h<"} {
		if !strings.Contains(forYou, want) {
			t.Errorf("cfo's queue: the proposal for them lacks %q:\n%s", want, forYou)
		}
	}
	if !strings.Contains(mine, findingPath(byCfo)) || !strings.Contains(mine, "Adjusted") || !strings.Contains(mine, ">1d 2h<") {
		t.Errorf("cfo's own proposal is not apart with its resolution and age:\n%s", mine)
	}
	if strings.Contains(forYou, findingPath(byCfo)) {
		t.Errorf("cfo's own proposal is offered to cfo to approve")
	}
	if strings.Contains(q, `id="no-second-approver"`) {
		t.Errorf("the page says no second approver, but *@audit.example.com approve too")
	}

	// ann reviews: cfo's proposal awaits an approver; the page says so.
	if body := get(ann, findingPath(byCfo)); !strings.Contains(body, "only an approver (RECONCILER_APPROVERS) may approve or reject it") {
		t.Errorf("ann on cfo's proposal is not told why she cannot act")
	}
	if body := get(ann, findingPath(byAnn)); !strings.Contains(body, "You proposed this") {
		t.Errorf("ann on her own proposal is not told it is hers")
	}

	// ann takes her proposal back from its page.
	if body := get(ann, findingPath(byAnn)); !strings.Contains(body, `id="form-withdraw"`) {
		t.Fatalf("ann's own proposal offers no withdraw")
	}
	if body := get(cfo, findingPath(byAnn)); strings.Contains(body, `id="form-withdraw"`) {
		t.Fatalf("cfo is offered to withdraw ann's proposal")
	}
	w := f.do(t, request{method: "POST", path: actionPath(byAnn, "withdraw"), peer: trusted, who: ann,
		form: map[string]string{"csrf": f.tokenFor(t, ann), "version": "1", "note": "paid back by hand after all"}})
	var st string
	must(t, f.db.Get(&st, `SELECT review_status FROM reconcile_mismatches WHERE id = $1`, byAnn))
	if w.Code != 303 || st != "ACKNOWLEDGED" {
		t.Fatalf("withdraw: %d, status %s; want 303 and ACKNOWLEDGED", w.Code, st)
	}

	// With cfo the only approver, cfo's own proposal can never be approved: the queue and
	// the finding say so.
	c := consoleSettings()
	c.Approvers = []string{cfo}
	cfg, err := console.FromSettings(c, shanghai, zerolog.Nop())
	must(t, err)
	cfg.Now = func() time.Time { return base.Add(6 * time.Hour) }
	f.h = console.New(cfg, postgres.NewReview(f.db.DB))
	if q := get(cfo, "/review/approvals"); !strings.Contains(q, `id="no-second-approver"`) {
		t.Errorf("with one approver the queue does not say their proposals cannot be approved")
	}
	if body := get(cfo, findingPath(byCfo)); !strings.Contains(body, "No other approver is configured") {
		t.Errorf("with one approver cfo's own proposal does not say it cannot be approved")
	}
}

// TestConsoleWarnsOfALoneApprover: at start, the console says when a proposal could never
// be approved in it: no approver, or one named by address; a second approver or a *@domain
// entry says nothing.
func TestConsoleWarnsOfALoneApprover(t *testing.T) {
	for _, c := range []struct {
		approvers []string
		warns     bool
	}{{nil, true}, {[]string{cfo}, true}, {[]string{cfo, bob}, false}, {[]string{"*@audit.example.com"}, false}} {
		var logs strings.Builder
		s := consoleSettings()
		s.Approvers = c.approvers
		cfg, err := console.FromSettings(s, shanghai, zerolog.New(&logs))
		must(t, err)
		console.New(cfg, nil)
		if warned := strings.Contains(logs.String(), "can be approved here") || strings.Contains(logs.String(), "never be approved"); warned != c.warns {
			t.Errorf("approvers %v: warned %v, want %v:\n%s", c.approvers, warned, c.warns, logs.String())
		}
	}
}
