package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestReportListsTheReviewMovesOfThePeriod: the report streams the review moves recorded in
// its period, oldest first, each with its finding's order number and everything the audit
// row holds, counted in the same snapshot; a move made while the report is being written is
// in neither the count nor the list, and a period without moves has none.
func TestReportListsTheReviewMovesOfThePeriod(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	first := insertFinding(t, db, seedFinding{otn: "AUD-1", local: 100, plat: 90})
	second := insertFinding(t, db, seedFinding{otn: "AUD-2", local: 100, plat: 80})
	if _, err := rv.Acknowledge(ctx, first, reconcile.ReviewInput{By: "ann@example.com", OSUser: "ann", Version: 1, Note: "looking"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Resolve(ctx, first, reconcile.ReviewInput{By: "bob@example.com", Version: 1, Resolution: reconcile.ResolutionAccepted}); err != nil {
		t.Fatal(err)
	}
	// The database stamps a move with its own clock: the period is around now.
	now := time.Now()
	var moves []reconcile.ReportAuditEntry
	var count int64
	err := rv.Report(ctx, now.Add(-time.Hour), now.Add(time.Hour), func(rep reconcile.Report) error {
		// Another reviewer moves a finding while the report is written.
		if _, err := rv.Acknowledge(ctx, second, reconcile.ReviewInput{By: "ann@example.com", Version: 1}); err != nil {
			return err
		}
		count = rep.AuditCount
		return rep.Audit.Each(func(a reconcile.ReportAuditEntry) error {
			moves = append(moves, a)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if count != 2 || len(moves) != 2 {
		t.Fatalf("%d moves counted, %d listed: want the two made before the report", count, len(moves))
	}
	ack, res := moves[0], moves[1]
	if ack.Action != reconcile.AuditAcknowledge || ack.MismatchID != first || ack.OutTradeNo != "AUD-1" || ack.Actor != "ann@example.com" ||
		ack.OSUser != "ann" || ack.DBUser == "" || ack.FromStatus != "OPEN" || ack.ToStatus != "ACKNOWLEDGED" || ack.Note != "looking" ||
		ack.EvidenceVersion == nil || *ack.EvidenceVersion != 1 {
		t.Errorf("acknowledgement %+v", ack)
	}
	if res.Action != reconcile.AuditResolve || res.Resolution != "accepted" || res.ToStatus != "RESOLVED" || res.CreatedAt.Before(ack.CreatedAt) {
		t.Errorf("resolution %+v after %+v", res, ack)
	}
	// A period in the past holds no move.
	err = rv.Report(ctx, reviewBase, reviewBase.Add(24*time.Hour), func(rep reconcile.Report) error {
		n := 0
		err := rep.Audit.Each(func(reconcile.ReportAuditEntry) error { n++; return nil })
		if rep.AuditCount != 0 || n != 0 {
			t.Errorf("a past day: %d moves counted, %d listed", rep.AuditCount, n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
