package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// FindingSort is a column findings are ordered by.
type FindingSort string

const (
	SortLastSeen  FindingSort = "last_seen"
	SortFirstSeen FindingSort = "first_seen"
	SortAtStake   FindingSort = "at_stake"
	SortSeenCount FindingSort = "seen_count"
	SortID        FindingSort = "id"
)

// FindingSorts lists the sorts a search knows, the default first.
var FindingSorts = []FindingSort{SortLastSeen, SortFirstSeen, SortAtStake, SortSeenCount, SortID}

// DefaultListLimit is a page's size when the filter names none.
const DefaultListLimit = 100

// FindingFilter is the one way to ask for findings: which ones (the console's filters,
// `mismatches list`, a report file) and which page of them. Zero fields do not filter.
type FindingFilter struct {
	Statuses []ReviewStatus // empty: every status
	Kind     MismatchKind
	Platform Platform
	Merchant string
	// Query finds findings by number: a finding id, or the start of our out_trade_no, the
	// platform's trade number or the refund's out_refund_no (ParseFindingQuery reads it).
	Query string
	// Since and Until bound the period [Since, Until) in which a finding was first or last
	// seen, the report's rule. Either may be zero (unbounded).
	Since, Until time.Time
	// MinAtStake and MaxAtStake bound the money at stake (AtStakeMinor), in minor units;
	// nil: unbounded.
	MinAtStake, MaxAtStake *int64
	// OverdueAt is when a finding first seen before it is overdue if not resolved
	// (now less the review SLA): a search counts them (FindingPage.Overdue); zero counts none.
	// OverdueOnly keeps only those.
	OverdueAt   time.Time
	OverdueOnly bool

	// A search's page: ordered by Sort ("": SortLastSeen, the id breaking ties), Offset
	// findings in.
	Sort      FindingSort
	Ascending bool
	Offset    int
	// A list's page, in id order: AfterID is the keyset cursor (only findings with a larger
	// id), for readers that walk every finding however many there are.
	AfterID int64
	Limit   int // <= 0: DefaultListLimit
}

// KindTotal is the number of findings of one kind, the money they put at stake and how many
// of them are overdue.
type KindTotal struct {
	Kind         MismatchKind `db:"kind"`
	Count        int64        `db:"count"`
	AtStakeMinor int64        `db:"at_stake_minor"`
	Overdue      int64        `db:"overdue"`
}

// FindingPage is one page of a search, how many findings match in all, and the per-kind
// totals of every match (not just the page).
type FindingPage struct {
	Findings []Finding
	Total    int64
	Overdue  int64 // of Total, those overdue (FindingFilter.OverdueAt)
	ByKind   []KindTotal
	// ByPlatform sums every match per platform; ByAccount per merchant account, the
	// MaxAccountTotals with the most money at stake first.
	ByPlatform []AccountTotal
	ByAccount  []AccountTotal
}

// AccountTotal is the findings of one platform (MerchantID "") or merchant account.
type AccountTotal struct {
	Platform     Platform `db:"platform"`
	MerchantID   string   `db:"merchant_id"`
	Count        int64    `db:"count"`
	AtStakeMinor int64    `db:"at_stake_minor"`
	Overdue      int64    `db:"overdue"`
}

// MaxAccountTotals is how many merchant accounts a search sums apart: a service provider
// may have thousands, and a page shows those with the most at stake.
const MaxAccountTotals = 20

// NeedsAction are the review statuses of a finding someone still has to act on: what the
// console and mismatches list show unless asked for others.
var NeedsAction = []ReviewStatus{ReviewOpen, ReviewAcknowledged, ReviewPendingApproval}

// DefaultReviewSLA is how long a finding may wait for finance before it is overdue
// (RECONCILER_REVIEW_SLA).
const DefaultReviewSLA = 72 * time.Hour

// Overdue says whether f, unresolved and first seen before overdueAt, is overdue.
func (f Finding) Overdue(overdueAt time.Time) bool {
	return f.ReviewStatus != ReviewResolved && !overdueAt.IsZero() && f.FirstSeenAt.Before(overdueAt)
}

// MaxFindingQuery is the longest query a search takes: longer than any number the
// platforms or merchants write (WeChat Pay's 32-character out_trade_no, 64 for a refund).
const MaxFindingQuery = 64

// ParseFindingQuery reads what a person typed into a search box (or --q): spaces around it
// dropped; what is left must be at most MaxFindingQuery characters of printable text.
func ParseFindingQuery(s string) (string, error) {
	q := strings.TrimSpace(s)
	if utf8.RuneCountInString(q) > MaxFindingQuery {
		return "", Inputf("a search is at most %d characters (an id, or the start of an order, trade or refund number), got %d",
			MaxFindingQuery, utf8.RuneCountInString(q))
	}
	for _, r := range q {
		if !unicode.IsPrint(r) {
			return "", Inputf("the search %q holds a character that is not printable", q)
		}
	}
	return q, nil
}

// FindingFinder is what FindingByRef needs of the review store.
type FindingFinder interface {
	Details(ctx context.Context, id int64) (FindingDetails, error)
	Search(ctx context.Context, f FindingFilter) (FindingPage, error)
}

// FindingByRef is the finding a person names by ref: the one with that id, else the only
// one whose out_trade_no, platform trade number or out_refund_no starts with ref. None is
// ErrNotFound, wrapped; several are an InputError listing the first of them by id, so the
// person gives more of the number.
func FindingByRef(ctx context.Context, store FindingFinder, ref string) (FindingDetails, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil && id > 0 {
		if d, err := store.Details(ctx, id); !errors.Is(err, ErrNotFound) {
			return d, err
		}
	}
	page, err := store.Search(ctx, FindingFilter{Query: ref, Sort: SortID, Ascending: true, Limit: 5})
	switch {
	case err != nil:
		return FindingDetails{}, err
	case page.Total == 0:
		return FindingDetails{}, fmt.Errorf("no finding has the id %s or a number starting with it: %w", ref, ErrNotFound)
	case page.Total > 1:
		ids := make([]string, len(page.Findings))
		for i, f := range page.Findings {
			ids[i] = fmt.Sprintf("%d (%s)", f.ID, f.OutTradeNo)
		}
		return FindingDetails{}, Inputf("%d findings have a number starting with %s: %s: give more of it, or the id",
			page.Total, ref, strings.Join(ids, ", "))
	}
	return store.Details(ctx, page.Findings[0].ID)
}
