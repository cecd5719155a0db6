package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// BenchmarkRecordMismatch measures the apply path's finding upsert with the evidence trigger
// (migration 0008): a new finding, a repeat sighting with the same figures, and one with new
// figures (version bump). Run: go test -run '^$' -bench RecordMismatch ./repo/postgres/
func BenchmarkRecordMismatch(b *testing.B) {
	db := repotest.NewDB(b)
	st := postgres.NewStore(db.DB)
	ctx := context.Background()
	m := reconcile.Mismatch{Platform: reconcile.Alipay, MerchantID: "2021000000000001", Kind: reconcile.MismatchAmount,
		LocalAmountMinor: 1000, PlatformAmountMinor: 900, LocalStatus: reconcile.StatusPaid}
	cases := []struct {
		name string
		next func(i int) reconcile.Mismatch
	}{
		{"new", func(i int) reconcile.Mismatch { m := m; m.OutTradeNo = fmt.Sprintf("new-%d", i); return m }},
		{"same-figures", func(int) reconcile.Mismatch { m := m; m.OutTradeNo = "same"; return m }},
		{"new-figures", func(i int) reconcile.Mismatch {
			m := m
			m.OutTradeNo, m.PlatformAmountMinor = "moving", int64(i+1)
			return m
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := st.RecordMismatch(ctx, c.next(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	var v int64
	if err := db.Get(&v, `SELECT evidence_version FROM reconcile_mismatches WHERE out_trade_no = 'same'`); err != nil || v != 1 {
		b.Fatalf("same figures bumped the version to %d (%v)", v, err)
	}
}

// BenchmarkReviewMove measures one review move (lock, rules, conditional update, audit row)
// as acknowledge on fresh findings. Run: go test -run '^$' -bench ReviewMove ./repo/postgres/
func BenchmarkReviewMove(b *testing.B) {
	db := repotest.NewDB(b)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	ids := make([]int64, 0, 1024)
	for i := 0; b.Loop(); i++ {
		if len(ids) == 0 {
			b.StopTimer()
			for j := range 1024 {
				ids = append(ids, insertFinding(b, db, seedFinding{otn: fmt.Sprintf("bench-%d-%d", i, j)}))
			}
			b.StartTimer()
		}
		id := ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		if _, err := rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "ann", OSUser: "ops", Version: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
