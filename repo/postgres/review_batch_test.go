package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// seedOpen inserts n OPEN findings and returns them as batch items at their version.
func seedOpen(t testing.TB, db *repotest.DB, prefix string, n int) []reconcile.BatchItem {
	t.Helper()
	var items []reconcile.BatchItem
	err := db.Select(&items, `INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor, platform_amount_minor)
		SELECT 'alipay', '2021000000000001', $1 || i, 'AMOUNT_MISMATCH', 1000, 900 FROM generate_series(1, $2) AS i
		RETURNING id AS "id", evidence_version AS "version"`, prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// TestMoveBatchOnPostgres: a batch of 1,000 acknowledgements is 1,000 moves, each with its
// own audit row and version check: the one whose evidence changed since it was read is
// refused alone, and a second batch over the same findings moves none of the others again.
func TestMoveBatchOnPostgres(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	items := seedOpen(t, db, "batch-", reconcile.MaxBatch)
	stale := items[500]
	db.MustExec(`UPDATE reconcile_mismatches SET platform_amount_minor = 800 WHERE id = $1`, stale.ID) // a sighting with new figures
	in := reconcile.ReviewInput{By: "ann@example.com", Note: "after the 28 Nov outage"}
	res, err := reconcile.MoveBatch(ctx, rv.Acknowledge, items, in, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moved) != reconcile.MaxBatch-1 || len(res.Refused) != 1 || res.Refused[0].ID != stale.ID ||
		!errors.Is(res.Refused[0].Err, reconcile.ErrStaleEvidence) {
		t.Fatalf("moved %d, refused %+v; want all but the changed one, refused as stale", len(res.Moved), res.Refused)
	}
	var audit, acked int
	must(t, db.Get(&audit, `SELECT count(*) FROM reconcile_mismatch_audit WHERE action = 'acknowledge' AND note = $1`, in.Note))
	must(t, db.Get(&acked, `SELECT count(*) FROM reconcile_mismatches WHERE review_status = 'ACKNOWLEDGED'`))
	if audit != reconcile.MaxBatch-1 || acked != reconcile.MaxBatch-1 {
		t.Fatalf("%d audit rows, %d acknowledged; want %d of each", audit, acked, reconcile.MaxBatch-1)
	}
	again, err := reconcile.MoveBatch(ctx, rv.Acknowledge, items, in, 4)
	if err != nil || len(again.Moved) != 0 || len(again.Refused) != reconcile.MaxBatch {
		t.Fatalf("the same batch again moved %d, refused %d (%v); want none moved", len(again.Moved), len(again.Refused), err)
	}
	if _, err := reconcile.MoveBatch(ctx, rv.Acknowledge, append(items, reconcile.BatchItem{ID: 1}), in, 4); err == nil {
		t.Fatal("a batch over the limit was taken")
	}
}

// BenchmarkMoveBatch acknowledges batches of 1,000 findings on real PostgreSQL, four moves
// at a time; the target is under 10 s a batch. Run: go test -run '^$' -bench MoveBatch ./repo/postgres/
func BenchmarkMoveBatch(b *testing.B) {
	db := repotest.NewDB(b)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	in := reconcile.ReviewInput{By: "ann@example.com", Note: "bulk"}
	var took time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		items := seedOpen(b, db, "bench-"+time.Now().Format("150405.000000")+"-", reconcile.MaxBatch)
		b.StartTimer()
		start := time.Now()
		res, err := reconcile.MoveBatch(ctx, rv.Acknowledge, items, in, 4)
		took += time.Since(start)
		if err != nil || len(res.Moved) != len(items) {
			b.Fatalf("moved %d of %d: %v", len(res.Moved), len(items), err)
		}
	}
	b.ReportMetric(took.Seconds()/float64(b.N), "s/batch-of-1000")
	b.ReportMetric(float64(b.N*reconcile.MaxBatch)/took.Seconds(), "moves/s")
}
