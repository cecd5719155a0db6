package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
)

// atStakeSQL is reconcile.AtStakeMinor in SQL: the console filters and sorts by the money at
// stake across every finding, which only the database can do a page at a time.
// TestSearchAtStakeMatchesTheDomain holds the two equal for every kind.
const atStakeSQL = `CASE kind
	WHEN 'AMOUNT_MISMATCH' THEN abs(COALESCE(platform_amount_minor, 0) - COALESCE(local_amount_minor, 0))
	WHEN 'REFUND_AMOUNT_MISMATCH' THEN abs(COALESCE(platform_amount_minor, 0) - COALESCE(local_amount_minor, 0))
	WHEN 'LOCAL_PAID_PLATFORM_UNPAID' THEN COALESCE(local_amount_minor, 0)
	WHEN 'REFUND_NOT_AT_PLATFORM' THEN COALESCE(local_amount_minor, 0)
	WHEN 'OVER_REFUNDED' THEN COALESCE(local_amount_minor, 0)
	ELSE COALESCE(platform_amount_minor, local_amount_minor, 0) END`

// SearchSort is a column the review console sorts findings by.
type SearchSort string

const (
	SortLastSeen  SearchSort = "last_seen"
	SortFirstSeen SearchSort = "first_seen"
	SortAtStake   SearchSort = "at_stake"
	SortSeenCount SearchSort = "seen_count"
	SortID        SearchSort = "id"
)

// searchOrder maps a sort to SQL; the id breaks ties so pages never overlap.
var searchOrder = map[SearchSort]string{
	SortLastSeen:  "last_seen_at",
	SortFirstSeen: "first_seen_at",
	SortAtStake:   "(" + atStakeSQL + ")",
	SortSeenCount: "seen_count",
	SortID:        "id",
}

// SearchSorts lists the sorts Search knows, the default first.
var SearchSorts = []SearchSort{SortLastSeen, SortFirstSeen, SortAtStake, SortSeenCount, SortID}

// SearchFilter selects, orders and pages findings for the review console. Zero fields do not
// filter.
type SearchFilter struct {
	Statuses []reconcile.ReviewStatus
	Kind     reconcile.MismatchKind
	Platform reconcile.Platform
	Merchant string
	// Since and Until bound the period as ListFilter's do (first or last seen in it).
	Since, Until time.Time
	// MinAtStake and MaxAtStake bound the money at stake, in minor units; nil: unbounded.
	MinAtStake, MaxAtStake *int64
	Sort                   SearchSort // "": SortLastSeen
	Ascending              bool
	Offset, Limit          int // Limit <= 0: DefaultListLimit
}

// KindTotal is the number of findings of one kind and the money they put at stake.
type KindTotal struct {
	Kind         reconcile.MismatchKind `db:"kind"`
	Count        int64                  `db:"count"`
	AtStakeMinor int64                  `db:"at_stake_minor"`
}

// SearchResult is one page of findings, how many match in all, and the per-kind totals of
// every match (not just the page).
type SearchResult struct {
	Findings []Finding
	Total    int64
	ByKind   []KindTotal
}

// Search returns one page of the findings f selects, with the totals of all of them. The
// totals and the page are read in one snapshot, so the counts agree with the rows.
func (r *Review) Search(ctx context.Context, f SearchFilter) (SearchResult, error) {
	order, ok := searchOrder[f.Sort]
	if f.Sort == "" {
		order, ok = searchOrder[SortLastSeen], true
	}
	if !ok {
		return SearchResult{}, fmt.Errorf("search findings: unknown sort %q", f.Sort)
	}
	dir := " DESC"
	if f.Ascending {
		dir = " ASC"
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	where, args := searchWhere(f)

	tx, err := r.db.BeginTxx(ctx, nil)
	if err != nil {
		return SearchResult{}, fmt.Errorf("search findings: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := tx.ExecContext(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`); err != nil {
		return SearchResult{}, fmt.Errorf("search findings: snapshot: %w", err)
	}
	res := SearchResult{Findings: []Finding{}, ByKind: []KindTotal{}}
	err = tx.SelectContext(ctx, &res.ByKind, `SELECT kind, count(*) AS count,
		COALESCE(sum(`+atStakeSQL+`), 0)::bigint AS at_stake_minor
		FROM reconcile_mismatches WHERE `+where+` GROUP BY kind
		ORDER BY array_position($`+strconv.Itoa(len(args)+1)+`::text[], kind), kind`, append(args, pq.Array(kindOrder()))...)
	if err != nil {
		return SearchResult{}, fmt.Errorf("search findings: totals: %w", err)
	}
	for _, k := range res.ByKind {
		res.Total += k.Count
	}
	n := len(args)
	q := `SELECT ` + findingColumns + ` FROM reconcile_mismatches WHERE ` + where +
		` ORDER BY ` + order + dir + `, id` + dir + fmt.Sprintf(` OFFSET $%d LIMIT $%d`, n+1, n+2)
	if err := tx.SelectContext(ctx, &res.Findings, q, append(args, f.Offset, limit)...); err != nil {
		return SearchResult{}, fmt.Errorf("search findings: %w", err)
	}
	return res, nil
}

// searchWhere is the WHERE clause of f and its arguments ("true" when nothing filters).
func searchWhere(f SearchFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(f.Statuses) > 0 {
		st := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			st[i] = string(s)
		}
		where = append(where, "review_status = ANY("+arg(pq.Array(st))+"::text[])")
	}
	if f.Kind != "" {
		where = append(where, "kind = "+arg(string(f.Kind)))
	}
	if f.Platform != "" {
		where = append(where, "platform = "+arg(string(f.Platform)))
	}
	if f.Merchant != "" {
		where = append(where, "merchant_id = "+arg(f.Merchant))
	}
	if p := periodSQL(f.Since, f.Until, arg); p != "" {
		where = append(where, p)
	}
	if f.MinAtStake != nil {
		where = append(where, "("+atStakeSQL+") >= "+arg(*f.MinAtStake))
	}
	if f.MaxAtStake != nil {
		where = append(where, "("+atStakeSQL+") <= "+arg(*f.MaxAtStake))
	}
	if len(where) == 0 {
		return "true", nil
	}
	return strings.Join(where, " AND "), args
}

// kindOrder is the domain's order of finding kinds, as the totals at the top list them.
func kindOrder() []string {
	out := make([]string, len(reconcile.MismatchKinds))
	for i, k := range reconcile.MismatchKinds {
		out[i] = string(k)
	}
	return out
}
