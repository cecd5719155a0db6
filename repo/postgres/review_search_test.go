package postgres_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
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
	res, err := postgres.NewReview(db.DB).Search(context.Background(), reconcile.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ByKind) != len(reconcile.MismatchKinds) || res.Total != int64(len(reconcile.MismatchKinds)*len(amounts)) {
		t.Fatalf("totals: %+v", res)
	}
	for i, kt := range res.ByKind {
		if kt.AtStakeMinor != want[kt.Kind] {
			t.Errorf("%s: SQL says %d at stake, the domain %d", kt.Kind, kt.AtStakeMinor, want[kt.Kind])
		}
		// The totals at the top of the console come in the domain's order of kinds.
		if kt.Kind != reconcile.MismatchKinds[i] {
			t.Errorf("totals row %d is %s, want %s (reconcile.MismatchKinds order)", i, kt.Kind, reconcile.MismatchKinds[i])
		}
	}
	// Sorting by the money at stake agrees with the domain row by row.
	page, err := postgres.NewReview(db.DB).Search(context.Background(), reconcile.FindingFilter{Sort: reconcile.SortAtStake, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(page.Findings); i++ {
		if page.Findings[i-1].AtStakeMinor() < page.Findings[i].AtStakeMinor() {
			t.Fatalf("row %d (%d) before row %d (%d) in descending order", i-1, page.Findings[i-1].AtStakeMinor(), i, page.Findings[i].AtStakeMinor())
		}
	}
}

// BenchmarkSearch is the console's list page over 100,000 findings: the per-kind totals and
// one page of 50, unfiltered by id order, filtered by status and merchant, and sorted by
// the money at stake (no index can serve that sort: it reads every match).
func BenchmarkSearch(b *testing.B) {
	db := repotest.NewDB(b)
	_, err := db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor,
		platform_amount_minor, review_status, first_seen_at, last_seen_at)
		SELECT CASE WHEN i % 2 = 0 THEN 'alipay' ELSE 'wechatpay' END, 'm' || (i % 20), 'B-' || i,
		(ARRAY['AMOUNT_MISMATCH','UNKNOWN_ORDER','PAID_AFTER_CLOSE','DUPLICATE_PAYMENT'])[1 + i % 4],
		1000 + i % 997, 1000 + i % 991, (ARRAY['OPEN','ACKNOWLEDGED','RESOLVED'])[1 + i % 3],
		now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval
		FROM generate_series(1, 100000) AS i`)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE reconcile_mismatches`); err != nil {
		b.Fatal(err)
	}
	r := postgres.NewReview(db.DB)
	for _, c := range []struct {
		name string
		f    reconcile.FindingFilter
	}{
		{"all_by_last_seen", reconcile.FindingFilter{Limit: 50}},
		{"open_one_merchant", reconcile.FindingFilter{Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen}, Merchant: "m7", Limit: 50}},
		{"all_by_at_stake_page_100", reconcile.FindingFilter{Sort: reconcile.SortAtStake, Offset: 99 * 50, Limit: 50}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Search(context.Background(), c.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSearchFindsByNumber: the query finds a finding by its id or by the start of its
// out_trade_no, platform trade number or out_refund_no, and nothing else; LIKE's own
// characters in it are taken as they are; the same filter lists what it searches.
func TestSearchFindsByNumber(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	ins := func(otn, trade, refund string) int64 {
		var id int64
		must := db.QueryRow(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, out_refund_no, kind)
			VALUES ('alipay', 'm', $1, NULLIF($2, ''), $3, 'AMOUNT_MISMATCH') RETURNING id`, otn, trade, refund).Scan(&id)
		if must != nil {
			t.Fatal(must)
		}
		return id
	}
	amount := ins("A-amount-mismatch-1", "2026112822001", "")
	refund := ins("W-portal-refund-1", "4200000001202611280001", "PORTAL-W-1")
	literal := ins("A_B%C", "", "")
	ins("AXBYC", "", "")
	ins("B-other-2", "2026112899", "")
	r := postgres.NewReview(db.DB)
	cases := []struct {
		q    string
		want []int64
	}{
		{"A-amount", []int64{amount}},
		{"A-amount-mismatch-1", []int64{amount}},
		{"2026112822", []int64{amount}},
		{"42000000012026", []int64{refund}},
		{"PORTAL-W", []int64{refund}},
		{"A_B%", []int64{literal}},                         // not AXBYC: _ and % are characters here
		{strconv.FormatInt(literal, 10), []int64{literal}}, // an id no number starts with
		{"amount", nil},                                    // a prefix, not a substring
		{"ZZZ", nil},
	}
	for _, c := range cases {
		page, err := r.Search(context.Background(), reconcile.FindingFilter{Query: c.q})
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		var got []int64
		for _, f := range page.Findings {
			got = append(got, f.ID)
		}
		if !slices.Equal(got, c.want) || page.Total != int64(len(c.want)) {
			t.Errorf("search %q found %v (total %d), want %v", c.q, got, page.Total, c.want)
		}
		listed, err := r.List(context.Background(), reconcile.FindingFilter{Query: c.q})
		if err != nil || len(listed) != len(c.want) {
			t.Errorf("list %q: %d findings (%v), want %d", c.q, len(listed), err, len(c.want))
		}
	}
}

// TestSearchByNumberUsesTheIndexes: among 20,000 findings the prefix search walks the
// text_pattern_ops indexes of migration 0015, never the whole table.
func TestSearchByNumberUsesTheIndexes(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	db.MustExec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, out_refund_no, kind)
		SELECT 'alipay', 'm', 'ORD-' || i, '2026' || lpad(i::text, 10, '0'), CASE WHEN i % 10 = 0 THEN 'RF-' || i ELSE '' END, 'AMOUNT_MISMATCH'
		FROM generate_series(1, 20000) AS i`)
	db.MustExec(`ANALYZE reconcile_mismatches`)
	where, args := postgres.SearchWhere(reconcile.FindingFilter{Query: "ORD-1234"})
	var plan []string
	if err := db.Select(&plan, `EXPLAIN SELECT id FROM reconcile_mismatches WHERE `+where, args...); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	for _, idx := range []string{"out_trade_no_prefix", "platform_trade_no_prefix", "out_refund_no_prefix"} {
		if !strings.Contains(text, idx) {
			t.Errorf("the plan does not use reconcile_mismatches_%s:\n%s", idx, text)
		}
	}
	if strings.Contains(text, "Seq Scan") {
		t.Errorf("the search reads the whole table:\n%s", text)
	}
}

// TestSearchAccounts: the console's provider filter. Only the named accounts' findings match
// (by platform and merchant together: the same id on the other platform is another
// merchant), with the other filters still applied and the totals counting the same rows;
// no account matches nothing, and Search itself is unnarrowed.
func TestSearchAccounts(t *testing.T) {
	db := repotest.NewDB(t)
	_, err := db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, local_amount_minor, platform_amount_minor)
		VALUES ('wechatpay', '1900000201', 'S-1', 'AMOUNT_MISMATCH', 100, 150), ('wechatpay', '1900000202', 'S-2', 'UNKNOWN_ORDER', NULL, 700),
		('wechatpay', '1900000301', 'D-1', 'AMOUNT_MISMATCH', 100, 120), ('alipay', '1900000201', 'A-1', 'AMOUNT_MISMATCH', 100, 110)`)
	if err != nil {
		t.Fatal(err)
	}
	subs := []reconcile.AccountKey{{Platform: reconcile.WechatPay, MerchantID: "1900000201"}, {Platform: reconcile.WechatPay, MerchantID: "1900000202"}}
	r := postgres.NewReview(db.DB)
	for _, c := range []struct {
		name     string
		f        reconcile.FindingFilter
		accounts []reconcile.AccountKey
		want     []string
	}{
		{"the provider's sub-merchants", reconcile.FindingFilter{}, subs, []string{"S-1", "S-2"}},
		{"with a kind", reconcile.FindingFilter{Kind: reconcile.MismatchAmount}, subs, []string{"S-1"}},
		{"with a merchant of theirs", reconcile.FindingFilter{Merchant: "1900000202"}, subs, []string{"S-2"}},
		{"with a merchant not theirs", reconcile.FindingFilter{Merchant: "1900000301"}, subs, nil},
		{"no account", reconcile.FindingFilter{}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.f.Sort, c.f.Ascending = reconcile.SortID, true
			res, err := r.SearchAccounts(context.Background(), c.f, c.accounts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range res.Findings {
				got = append(got, f.OutTradeNo)
			}
			if !slices.Equal(got, c.want) || res.Total != int64(len(c.want)) {
				t.Errorf("found %v (total %d), want %v", got, res.Total, c.want)
			}
			var byAccount int64
			for _, a := range res.ByAccount {
				byAccount += a.Count
			}
			if byAccount != res.Total {
				t.Errorf("the by-account totals count %d, the search %d", byAccount, res.Total)
			}
		})
	}
	if all, err := r.Search(context.Background(), reconcile.FindingFilter{}); err != nil || all.Total != 4 {
		t.Errorf("Search: %d findings (%v), want all 4", all.Total, err)
	}
}
