package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
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

// searchOrder maps a sort to SQL; the id breaks ties so pages never overlap.
var searchOrder = map[reconcile.FindingSort]string{
	reconcile.SortLastSeen:  "last_seen_at",
	reconcile.SortFirstSeen: "first_seen_at",
	reconcile.SortAtStake:   "(" + atStakeSQL + ")",
	reconcile.SortSeenCount: "seen_count",
	reconcile.SortID:        "id",
}

// Search returns one page of the findings f selects, with the totals of all of them. The
// totals and the page are read in one snapshot, so the counts agree with the rows.
func (r *Review) Search(ctx context.Context, f reconcile.FindingFilter) (reconcile.FindingPage, error) {
	return r.search(ctx, f, nil)
}

// SearchAccounts is Search among the findings of accounts alone: the console's filter by
// service provider, which names the provider's sub-merchants (thousands of them, sent as two
// arrays, not spelled into the SQL). No account matches nothing.
func (r *Review) SearchAccounts(ctx context.Context, f reconcile.FindingFilter, accounts []reconcile.AccountKey) (reconcile.FindingPage, error) {
	if accounts == nil {
		accounts = []reconcile.AccountKey{}
	}
	return r.search(ctx, f, accounts)
}

// search is Search, narrowed to accounts unless it is nil.
func (r *Review) search(ctx context.Context, f reconcile.FindingFilter, accounts []reconcile.AccountKey) (reconcile.FindingPage, error) {
	order, ok := searchOrder[f.Sort]
	if f.Sort == "" {
		order, ok = searchOrder[reconcile.SortLastSeen], true
	}
	if !ok {
		return reconcile.FindingPage{}, fmt.Errorf("search findings: unknown sort %q", f.Sort)
	}
	dir := " DESC"
	if f.Ascending {
		dir = " ASC"
	}
	limit := f.Limit
	if limit <= 0 {
		limit = reconcile.DefaultListLimit
	}
	where, args := searchWhere(f, accounts)

	tx, err := r.db.BeginTxx(ctx, nil)
	if err != nil {
		return reconcile.FindingPage{}, fmt.Errorf("search findings: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := tx.ExecContext(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`); err != nil {
		return reconcile.FindingPage{}, fmt.Errorf("search findings: snapshot: %w", err)
	}
	res := reconcile.FindingPage{Findings: []reconcile.Finding{}, ByKind: []reconcile.KindTotal{}}
	// A zero OverdueAt counts none overdue: nothing was first seen before the year 1.
	n := len(args)
	err = tx.SelectContext(ctx, &res.ByKind, `SELECT kind, count(*) AS count,
		COALESCE(sum(`+atStakeSQL+`), 0)::bigint AS at_stake_minor,
		count(*) FILTER (WHERE review_status <> 'RESOLVED' AND first_seen_at < $`+strconv.Itoa(n+2)+`) AS overdue
		FROM reconcile_mismatches WHERE `+where+` GROUP BY kind
		ORDER BY array_position($`+strconv.Itoa(n+1)+`::text[], kind), kind`, append(args, pq.Array(kindOrder()), f.OverdueAt)...)
	if err != nil {
		return reconcile.FindingPage{}, fmt.Errorf("search findings: totals: %w", err)
	}
	for _, k := range res.ByKind {
		res.Total += k.Count
		res.Overdue += k.Overdue
	}
	if res.ByPlatform, res.ByAccount, err = accountTotals(ctx, tx, where, args, f.OverdueAt); err != nil {
		return reconcile.FindingPage{}, err
	}
	q := `SELECT ` + findingColumns + ` FROM reconcile_mismatches WHERE ` + where +
		` ORDER BY ` + order + dir + `, id` + dir + fmt.Sprintf(` OFFSET $%d LIMIT $%d`, n+1, n+2)
	if err := tx.SelectContext(ctx, &res.Findings, q, append(args, f.Offset, limit)...); err != nil {
		return reconcile.FindingPage{}, fmt.Errorf("search findings: %w", err)
	}
	return res, nil
}

// accountTotals sums the matches per platform and per merchant account (the
// MaxAccountTotals with the most at stake), in the search's snapshot.
func accountTotals(ctx context.Context, tx *sqlx.Tx, where string, args []any, overdueAt time.Time) ([]reconcile.AccountTotal, []reconcile.AccountTotal, error) {
	n := len(args)
	sums := `count(*) AS count, COALESCE(sum(` + atStakeSQL + `), 0)::bigint AS at_stake_minor,
		count(*) FILTER (WHERE review_status <> 'RESOLVED' AND first_seen_at < $` + strconv.Itoa(n+1) + `) AS overdue`
	byPlatform := []reconcile.AccountTotal{}
	if err := tx.SelectContext(ctx, &byPlatform, `SELECT platform, '' AS merchant_id, `+sums+`
		FROM reconcile_mismatches WHERE `+where+` GROUP BY platform ORDER BY platform`, append(args, overdueAt)...); err != nil {
		return nil, nil, fmt.Errorf("search findings: totals by platform: %w", err)
	}
	byAccount := []reconcile.AccountTotal{}
	if err := tx.SelectContext(ctx, &byAccount, `SELECT platform, merchant_id, `+sums+`
		FROM reconcile_mismatches WHERE `+where+` GROUP BY platform, merchant_id
		ORDER BY at_stake_minor DESC, platform, merchant_id LIMIT $`+strconv.Itoa(n+2),
		append(args, overdueAt, reconcile.MaxAccountTotals)...); err != nil {
		return nil, nil, fmt.Errorf("search findings: totals by account: %w", err)
	}
	return byPlatform, byAccount, nil
}

// searchWhere is the WHERE clause of f, within accounts unless it is nil, and its
// arguments ("true" when nothing filters).
func searchWhere(f reconcile.FindingFilter, accounts []reconcile.AccountKey) (string, []any) {
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
	if accounts != nil {
		platforms, merchants := make([]string, len(accounts)), make([]string, len(accounts))
		for i, k := range accounts {
			platforms[i], merchants[i] = string(k.Platform), k.MerchantID
		}
		where = append(where, "(platform, merchant_id) IN (SELECT * FROM unnest("+arg(pq.Array(platforms))+"::text[], "+arg(pq.Array(merchants))+"::text[]))")
	}
	if f.Query != "" {
		// Prefix matches, each on its own text_pattern_ops index (migration 0015); a query
		// that reads as an id also names that finding.
		p := arg(likePrefix(f.Query))
		cond := "out_trade_no LIKE " + p + " OR platform_trade_no LIKE " + p + " OR (out_refund_no <> '' AND out_refund_no LIKE " + p + ")"
		if id, err := strconv.ParseInt(f.Query, 10, 64); err == nil && id > 0 {
			cond = "id = " + arg(id) + " OR " + cond
		}
		where = append(where, "("+cond+")")
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
	if f.OverdueOnly {
		where = append(where, "review_status <> 'RESOLVED' AND first_seen_at < "+arg(f.OverdueAt))
	}
	if len(where) == 0 {
		return "true", nil
	}
	return strings.Join(where, " AND "), args
}

// likePrefix is a LIKE pattern matching what starts with s: LIKE's own characters in s
// (backslash, percent, underscore) are escaped with its default escape, the backslash.
func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}

// kindOrder is the domain's order of finding kinds, as the totals at the top list them.
func kindOrder() []string {
	out := make([]string, len(reconcile.MismatchKinds))
	for i, k := range reconcile.MismatchKinds {
		out[i] = string(k)
	}
	return out
}
