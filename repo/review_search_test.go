package repo_test

import (
	"context"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestSearchAtStakeMatchesTheDomain: the per-kind totals Search sums in SQL equal
// reconcile.AtStakeMinor summed in Go, for every kind and every NULL combination.
func TestSearchAtStakeMatchesTheDomain(t *testing.T) {
	db := repotest.NewDB(t)
	p := func(v int64) *int64 { return &v }
	amounts := []struct{ local, plat *int64 }{{p(1000), p(1500)}, {p(1500), p(1000)}, {nil, p(700)}, {p(300), nil}, {nil, nil}}
	want := map[reconcile.MismatchKind]int64{}
	for _, k := range reconcile.MismatchKinds {
		for i, a := range amounts {
			_, err := db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor, platform_amount_minor)
				VALUES ('alipay', 'm', $1, $2, $3, $4)`, string(k)+"-"+string(rune('a'+i)), string(k), a.local, a.plat)
			if err != nil {
				t.Fatal(err)
			}
			want[k] += reconcile.AtStakeMinor(k, a.local, a.plat)
		}
	}
	res, err := repo.NewReview(db.DB).Search(context.Background(), repo.SearchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ByKind) != len(reconcile.MismatchKinds) || res.Total != int64(len(reconcile.MismatchKinds)*len(amounts)) {
		t.Fatalf("totals: %+v", res)
	}
	for _, kt := range res.ByKind {
		if kt.AtStakeMinor != want[kt.Kind] {
			t.Errorf("%s: SQL says %d at stake, the domain %d", kt.Kind, kt.AtStakeMinor, want[kt.Kind])
		}
	}
	// Sorting by the money at stake agrees with the domain row by row.
	page, err := repo.NewReview(db.DB).Search(context.Background(), repo.SearchFilter{Sort: repo.SortAtStake, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(page.Findings); i++ {
		if page.Findings[i-1].AtStakeMinor() < page.Findings[i].AtStakeMinor() {
			t.Fatalf("row %d (%d) before row %d (%d) in descending order", i-1, page.Findings[i-1].AtStakeMinor(), i, page.Findings[i].AtStakeMinor())
		}
	}
}
