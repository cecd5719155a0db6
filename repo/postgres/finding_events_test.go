package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// findingEvent is one finding.* outbox row.
type findingEvent struct {
	Kind    string          `db:"kind"`
	OrderID *int64          `db:"order_id"`
	Payload json.RawMessage `db:"payload"`
}

func findingEvents(t *testing.T, db *repotest.DB, id int64) []findingEvent {
	t.Helper()
	var evs []findingEvent
	if err := db.Select(&evs, `SELECT kind, order_id, payload FROM fulfillment_outbox WHERE finding_id = $1 ORDER BY id`, id); err != nil {
		t.Fatal(err)
	}
	return evs
}

func eventKinds(evs []findingEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func (e findingEvent) field(t *testing.T, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// TestFindingsAreEvents: the worker opening a finding, a sighting with changed figures and
// each review move (made as the roles production uses) write one finding.* outbox row in
// their own transaction; a repeat with the same figures and a refused move write none.
func TestFindingsAreEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	worker := postgres.NewStore(asRole(t, db, postgres.RoleWorker))
	rv := postgres.NewReview(asRole(t, db, postgres.RoleReviewer))
	order := insertOrder(t, db, "alipay", "2021000000000001", "EV-1", 10000, "PENDING")
	sight := func(platformAmount int64) {
		t.Helper()
		err := worker.RecordMismatch(ctx, reconcile.Mismatch{OrderID: order, Platform: reconcile.Alipay, MerchantID: "2021000000000001",
			OutTradeNo: "EV-1", PlatformTradeNo: "T-EV-1", Kind: reconcile.MismatchAmount, LocalAmountMinor: 10000,
			PlatformAmountMinor: platformAmount, LocalStatus: reconcile.StatusPending, PlatformStatus: "TRADE_SUCCESS"})
		if err != nil {
			t.Fatal(err)
		}
	}
	sight(9000)
	var id int64
	if err := db.Get(&id, `SELECT id FROM reconcile_mismatches WHERE out_trade_no = 'EV-1'`); err != nil {
		t.Fatal(err)
	}
	sight(9000) // the same figures again: a sighting, not an event
	sight(8000) // the platform now says 80.00
	if _, err := rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Resolve(ctx, id, reconcile.ReviewInput{By: "ann@example.com", Resolution: reconcile.ResolutionAdjusted, Note: "coupon booked by hand"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Approve(ctx, id, reconcile.ReviewInput{By: "ann@example.com"}); !errors.Is(err, reconcile.ErrSelfApproval) {
		t.Fatalf("self-approval: %v, want refused", err)
	}
	if _, err := rv.Approve(ctx, id, reconcile.ReviewInput{By: "cfo@example.com"}); err != nil {
		t.Fatal(err)
	}
	sight(7000) // new evidence reopens the resolved finding

	evs := findingEvents(t, db, id)
	want := []string{"finding.opened", "finding.changed", "finding.acknowledged", "finding.proposed", "finding.resolved",
		"finding.changed", "finding.reopened"}
	if got := eventKinds(evs); !slices.Equal(got, want) {
		t.Fatalf("finding events %v, want %v", got, want)
	}
	for _, e := range evs {
		if e.OrderID != nil {
			t.Errorf("%s names order %d: a finding's row names the finding (the payload names the order)", e.Kind, *e.OrderID)
		}
		if e.field(t, "finding_id") != float64(id) || e.field(t, "order_id") != float64(order) || e.field(t, "out_trade_no") != "EV-1" ||
			e.field(t, "kind") != "AMOUNT_MISMATCH" {
			t.Errorf("%s payload %s lacks the finding's identity", e.Kind, e.Payload)
		}
	}
	if p := evs[1].field(t, "previous").(map[string]any); p["platform_amount_minor"] != float64(9000) || evs[1].field(t, "platform_amount_minor") != float64(8000) {
		t.Errorf("finding.changed %s: want the figures before (90.00) and after (80.00)", evs[1].Payload)
	}
	resolved := evs[4]
	if resolved.field(t, "actor") != "cfo@example.com" || resolved.field(t, "proposed_by") != "ann@example.com" ||
		resolved.field(t, "resolution") != "adjusted" || resolved.field(t, "review_status") != "RESOLVED" || resolved.field(t, "action") != "approve" {
		t.Errorf("finding.resolved %s: want the approver, the proposer and the resolution", resolved.Payload)
	}
	if evs[6].field(t, "review_status") != "OPEN" || evs[6].field(t, "actor") != "payrecon" {
		t.Errorf("finding.reopened %s: want it OPEN, reopened by payrecon", evs[6].Payload)
	}
}

// TestAFindingEventCommitsWithItsMove: the outbox row is the move's: when the move's
// transaction rolls back (a failure after the function ran), neither the move nor its
// event remains.
func TestAFindingEventCommitsWithItsMove(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	id := insertFinding(t, db, seedFinding{otn: "EV-rollback"})
	before := len(findingEvents(t, db, id))
	tx := db.MustBegin()
	if _, err := tx.Exec(`SELECT payrecon_review_acknowledge($1, 'ann@example.com', '', 0, '')`, id); err != nil {
		t.Fatal(err)
	}
	var inTx int
	if err := tx.Get(&inTx, `SELECT count(*) FROM fulfillment_outbox WHERE finding_id = $1 AND kind = 'finding.acknowledged'`, id); err != nil || inTx != 1 {
		t.Fatalf("inside the move's transaction: %d acknowledged events (%v), want 1", inTx, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := findingEvents(t, db, id); len(got) != before {
		t.Fatalf("after the rollback: events %v, want the %d from before", eventKinds(got), before)
	}
}

// TestAnOutboxBatchHoldsOneRowPerFinding: a finding's later message is not taken while its
// earlier one is undispatched (the finding's NOT EXISTS in the take, as an order's), so
// relays working in parallel can never publish a finding's moves out of order; once the
// first is dispatched, the next is taken.
func TestAnOutboxBatchHoldsOneRowPerFinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := repotest.NewDB(t)
	store := postgres.NewStore(db.DB)
	first := insertFinding(t, db, seedFinding{otn: "ORDERED-1"})
	second := insertFinding(t, db, seedFinding{otn: "ORDERED-2"})
	for _, id := range []int64{first, second} {
		db.MustExec(`SELECT payrecon_review_acknowledge($1, 'ann@example.com', '', 0, '')`, id)
	}
	take := func() map[int64][]string {
		t.Helper()
		b, err := store.TakeOutbox(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64][]string{}
		var ids []int64
		for _, r := range b.Rows {
			got[r.FindingID] = append(got[r.FindingID], r.Kind)
			ids = append(ids, r.ID)
		}
		if err := b.Dispatched(ctx, ids, time.Now()); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for round, want := range []string{"finding.opened", "finding.acknowledged"} {
		got := take()
		for _, id := range []int64{first, second} {
			if len(got[id]) != 1 || got[id][0] != want {
				t.Fatalf("take %d: finding %d's rows %v, want only %s", round+1, id, got[id], want)
			}
		}
	}
}
