package reconcile

import "time"

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
	// Since and Until bound the period [Since, Until) in which a finding was first or last
	// seen, the report's rule. Either may be zero (unbounded).
	Since, Until time.Time
	// MinAtStake and MaxAtStake bound the money at stake (AtStakeMinor), in minor units;
	// nil: unbounded.
	MinAtStake, MaxAtStake *int64

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

// KindTotal is the number of findings of one kind and the money they put at stake.
type KindTotal struct {
	Kind         MismatchKind `db:"kind"`
	Count        int64        `db:"count"`
	AtStakeMinor int64        `db:"at_stake_minor"`
}

// FindingPage is one page of a search, how many findings match in all, and the per-kind
// totals of every match (not just the page).
type FindingPage struct {
	Findings []Finding
	Total    int64
	ByKind   []KindTotal
}
