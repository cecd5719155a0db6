package repo

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
)

// Finding is one reconcile_mismatches row. Nullable amounts and times are pointers (nil:
// NULL); nullable text is "" when NULL.
type Finding struct {
	ID                  int64                  `json:"id" db:"id"`
	OrderID             *int64                 `json:"order_id" db:"order_id"`
	Platform            reconcile.Platform     `json:"platform" db:"platform"`
	MerchantID          string                 `json:"merchant_id" db:"merchant_id"`
	OutTradeNo          string                 `json:"out_trade_no" db:"out_trade_no"`
	PlatformTradeNo     string                 `json:"platform_trade_no" db:"platform_trade_no"`
	Kind                reconcile.MismatchKind `json:"kind" db:"kind"`
	LocalAmountMinor    *int64                 `json:"local_amount_minor" db:"local_amount_minor"`
	PlatformAmountMinor *int64                 `json:"platform_amount_minor" db:"platform_amount_minor"`
	LocalStatus         string                 `json:"local_status" db:"local_status"`
	PlatformStatus      string                 `json:"platform_status" db:"platform_status"`
	Detail              json.RawMessage        `json:"detail" db:"detail"`
	FirstSeenAt         time.Time              `json:"first_seen_at" db:"first_seen_at"`
	LastSeenAt          time.Time              `json:"last_seen_at" db:"last_seen_at"`
	SeenCount           int64                  `json:"seen_count" db:"seen_count"`
	ReviewStatus        reconcile.ReviewStatus `json:"review_status" db:"review_status"`
	Resolution          string                 `json:"resolution" db:"resolution"`
	Note                string                 `json:"note" db:"note"`
	ResolvedBy          string                 `json:"resolved_by" db:"resolved_by"`
	ResolvedAt          *time.Time             `json:"resolved_at" db:"resolved_at"`
}

// AtStakeMinor is the money the finding puts in question (reconcile.AtStakeMinor); the
// report's sums use the same rule in SQL (atStakeSQL).
func (f Finding) AtStakeMinor() int64 {
	return reconcile.AtStakeMinor(f.Kind, f.LocalAmountMinor, f.PlatformAmountMinor)
}

// findingColumns selects a Finding; NULL text comes back as "".
const findingColumns = `id, order_id, platform, merchant_id, out_trade_no,
	COALESCE(platform_trade_no, '') AS platform_trade_no, kind, local_amount_minor, platform_amount_minor,
	COALESCE(local_status, '') AS local_status, COALESCE(platform_status, '') AS platform_status,
	detail, first_seen_at, last_seen_at, seen_count, review_status,
	COALESCE(resolution, '') AS resolution, COALESCE(note, '') AS note,
	COALESCE(resolved_by, '') AS resolved_by, resolved_at`

// AuditEntry is one reconcile_mismatch_audit row.
type AuditEntry struct {
	ID         int64     `json:"id" db:"id"`
	MismatchID int64     `json:"mismatch_id" db:"mismatch_id"`
	Action     string    `json:"action" db:"action"`
	Actor      string    `json:"actor" db:"actor"`
	FromStatus string    `json:"from_status" db:"from_status"`
	ToStatus   string    `json:"to_status" db:"to_status"`
	Note       string    `json:"note" db:"note"`
	CreatedAt  time.Time `json:"created_at" db:"created_at"`
}

// Audit actions written by the review workflow, and by the database when the apply path
// reopens a RESOLVED finding on new evidence (migration 0004).
const (
	AuditAcknowledge = string(reconcile.ReviewAcknowledge)
	AuditResolve     = string(reconcile.ReviewResolve)
	AuditReopen      = "reopen"
)

// OrderState is the current payment_orders row a finding points at.
type OrderState struct {
	ID              int64      `json:"id" db:"id"`
	Platform        string     `json:"platform" db:"platform"`
	MerchantID      string     `json:"merchant_id" db:"merchant_id"`
	OutTradeNo      string     `json:"out_trade_no" db:"out_trade_no"`
	AmountMinor     int64      `json:"amount_minor" db:"amount_minor"`
	Currency        string     `json:"currency" db:"currency"`
	Status          string     `json:"status" db:"status"`
	PlatformTradeNo string     `json:"platform_trade_no" db:"platform_trade_no"`
	PaidAmountMinor *int64     `json:"paid_amount_minor" db:"paid_amount_minor"`
	PaidAt          *time.Time `json:"paid_at" db:"paid_at"`
	ExpiresAt       *time.Time `json:"expires_at" db:"expires_at"`
	CreatedAt       time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at" db:"updated_at"`
	Version         int64      `json:"version" db:"version"`
	NextCheckAt     *time.Time `json:"next_check_at" db:"next_check_at"`
	CheckCount      int64      `json:"check_count" db:"check_count"`
	LastCheckedAt   *time.Time `json:"last_checked_at" db:"last_checked_at"`
}

// PaymentEvent is one payment_events row of an order.
type PaymentEvent struct {
	ID              int64     `json:"id" db:"id"`
	EventType       string    `json:"event_type" db:"event_type"`
	Source          string    `json:"source" db:"source"`
	PlatformTradeNo string    `json:"platform_trade_no" db:"platform_trade_no"`
	AmountMinor     *int64    `json:"amount_minor" db:"amount_minor"`
	RawDigest       string    `json:"raw_digest" db:"raw_digest"`
	CreatedAt       time.Time `json:"created_at" db:"created_at"`
}

// FindingDetails is everything `mismatches show` prints about one finding.
type FindingDetails struct {
	Finding Finding        `json:"finding"`
	Audit   []AuditEntry   `json:"audit"`
	Order   *OrderState    `json:"order"`  // nil when the finding names no order
	Events  []PaymentEvent `json:"events"` // the order's events, oldest first
}

// Review is the finance review workflow and period report over PostgreSQL.
type Review struct {
	db *sqlx.DB
	// Now is the clock stamped on resolved_at and audit rows; time.Now by default.
	Now func() time.Time
}

// NewReview wraps a connection pool.
func NewReview(db *sqlx.DB) *Review { return &Review{db: db, Now: time.Now} }

func (r *Review) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// ListFilter selects findings for List. Zero fields do not filter.
type ListFilter struct {
	Statuses []reconcile.ReviewStatus // empty: every status
	Kind     reconcile.MismatchKind
	Platform reconcile.Platform
	// Since and Until bound the period [Since, Until) in which a finding was first or last
	// seen, the same rule the report uses. Either may be zero (unbounded).
	Since, Until time.Time
	// AfterID is the keyset cursor: only findings with a larger id. Results are in id order.
	AfterID int64
	Limit   int // <= 0: DefaultListLimit
}

// DefaultListLimit is List's page size when the filter names none.
const DefaultListLimit = 100

// List returns one page of findings in id order, after f.AfterID (keyset pagination: pass
// the last id of a page as the next AfterID).
func (r *Review) List(ctx context.Context, f ListFilter) ([]Finding, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	where = append(where, "id > "+arg(f.AfterID))
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
	if p := periodSQL(f.Since, f.Until, arg); p != "" {
		where = append(where, p)
	}
	q := `SELECT ` + findingColumns + ` FROM reconcile_mismatches WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY id LIMIT ` + arg(limit)
	out := []Finding{}
	if err := r.db.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("list mismatches: %w", err)
	}
	return out, nil
}

// periodSQL is the predicate "first or last seen in [since, until)"; zero bounds are open.
func periodSQL(since, until time.Time, arg func(any) string) string {
	in := func(col string) string {
		var c []string
		if !since.IsZero() {
			c = append(c, col+" >= "+arg(since))
		}
		if !until.IsZero() {
			c = append(c, col+" < "+arg(until))
		}
		return strings.Join(c, " AND ")
	}
	switch {
	case since.IsZero() && until.IsZero():
		return ""
	case until.IsZero(): // last_seen_at >= first_seen_at
		return in("last_seen_at")
	case since.IsZero():
		return in("first_seen_at")
	}
	return "((" + in("first_seen_at") + ") OR (" + in("last_seen_at") + "))"
}

// Get returns one finding; a missing id is reconcile.ErrNotFound, wrapped.
func (r *Review) Get(ctx context.Context, id int64) (Finding, error) {
	return getFinding(ctx, r.db, id, false)
}

func getFinding(ctx context.Context, q sqlx.QueryerContext, id int64, forUpdate bool) (Finding, error) {
	query := `SELECT ` + findingColumns + ` FROM reconcile_mismatches WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var f Finding
	err := sqlx.GetContext(ctx, q, &f, query, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Finding{}, fmt.Errorf("mismatch %d: %w", id, reconcile.ErrNotFound)
	}
	if err != nil {
		return Finding{}, fmt.Errorf("read mismatch %d: %w", id, err)
	}
	return f, nil
}

// Audit returns a finding's audit trail, oldest first (empty for an unknown id).
func (r *Review) Audit(ctx context.Context, id int64) ([]AuditEntry, error) {
	out := []AuditEntry{}
	err := r.db.SelectContext(ctx, &out, `SELECT id, mismatch_id, action, actor,
		COALESCE(from_status, '') AS from_status, COALESCE(to_status, '') AS to_status,
		COALESCE(note, '') AS note, created_at
		FROM reconcile_mismatch_audit WHERE mismatch_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("read audit trail of mismatch %d: %w", id, err)
	}
	return out, nil
}

// Details returns a finding with its audit trail and, when it names an order, the order's
// current state and payment events. A missing id is reconcile.ErrNotFound, wrapped.
func (r *Review) Details(ctx context.Context, id int64) (FindingDetails, error) {
	f, err := r.Get(ctx, id)
	if err != nil {
		return FindingDetails{}, err
	}
	d := FindingDetails{Finding: f, Events: []PaymentEvent{}}
	if d.Audit, err = r.Audit(ctx, id); err != nil {
		return FindingDetails{}, err
	}
	if f.OrderID == nil {
		return d, nil
	}
	var o OrderState
	err = r.db.GetContext(ctx, &o, `SELECT id, platform, merchant_id, out_trade_no, amount_minor, currency,
		status, COALESCE(platform_trade_no, '') AS platform_trade_no, paid_amount_minor, paid_at, expires_at,
		created_at, updated_at, version, next_check_at, check_count, last_checked_at
		FROM payment_orders WHERE id = $1`, *f.OrderID)
	switch {
	case errors.Is(err, sql.ErrNoRows): // the foreign key makes this unreachable; show what there is
		return d, nil
	case err != nil:
		return FindingDetails{}, fmt.Errorf("read order %d of mismatch %d: %w", *f.OrderID, id, err)
	}
	d.Order = &o
	err = r.db.SelectContext(ctx, &d.Events, `SELECT id, event_type, source,
		COALESCE(platform_trade_no, '') AS platform_trade_no, amount_minor,
		COALESCE(raw_digest, '') AS raw_digest, created_at
		FROM payment_events WHERE order_id = $1 ORDER BY created_at, id`, o.ID)
	if err != nil {
		return FindingDetails{}, fmt.Errorf("read payment events of order %d: %w", o.ID, err)
	}
	return d, nil
}

// ReviewMove is the outcome of a successful acknowledge or resolve: the finding as it now
// stands and the audit row written with it.
type ReviewMove struct {
	Finding Finding    `json:"finding"`
	Audit   AuditEntry `json:"audit"`
}

// Acknowledge moves a finding OPEN -> ACKNOWLEDGED and records who did it. A non-empty note
// replaces the finding's note. A missing id is reconcile.ErrNotFound; a finding in another
// status is a *ReviewTransitionError (errors.Is ErrIllegalReview). Both are wrapped.
func (r *Review) Acknowledge(ctx context.Context, id int64, actor, note string) (ReviewMove, error) {
	return r.move(ctx, move{id: id, action: reconcile.ReviewAcknowledge, actor: actor, note: note})
}

// Resolve moves a finding OPEN or ACKNOWLEDGED -> RESOLVED, setting resolution, note (when
// given), resolved_by and resolved_at. Errors as for Acknowledge.
func (r *Review) Resolve(ctx context.Context, id int64, actor, resolution, note string) (ReviewMove, error) {
	if strings.TrimSpace(resolution) == "" {
		return ReviewMove{}, fmt.Errorf("resolve mismatch %d: the resolution must not be empty", id)
	}
	return r.move(ctx, move{id: id, action: reconcile.ReviewResolve, actor: actor, note: note, resolution: resolution})
}

type move struct {
	id               int64
	action           reconcile.ReviewAction
	actor            string
	note, resolution string
}

// reviewUpdateSQL is the conditional update: it changes the row only while its status is one
// the move starts from, so of two reviewers racing exactly one moves it.
const reviewUpdateSQL = `
UPDATE reconcile_mismatches SET
	review_status = $3::text,
	note          = COALESCE(NULLIF($4::text, ''), note),
	resolution    = CASE WHEN $3::text = 'RESOLVED' THEN $5::text ELSE resolution END,
	resolved_by   = CASE WHEN $3::text = 'RESOLVED' THEN $6::text ELSE resolved_by END,
	resolved_at   = CASE WHEN $3::text = 'RESOLVED' THEN $7::timestamptz ELSE resolved_at END
WHERE id = $1 AND review_status = ANY($2::text[])`

// move applies one review transition and its audit row in one transaction. The row is read
// FOR UPDATE first so the audit row names the status it really left and an illegal move is
// reported with the status that forbids it; the conditional update keeps the guarantee on
// its own should that read ever change.
func (r *Review) move(ctx context.Context, m move) (ReviewMove, error) {
	actor := strings.TrimSpace(m.actor)
	if actor == "" {
		return ReviewMove{}, fmt.Errorf("%s mismatch %d: the reviewer must be named", m.action, m.id)
	}
	tx, err := r.db.BeginTxx(ctx, nil)
	if err != nil {
		return ReviewMove{}, fmt.Errorf("%s mismatch %d: begin: %w", m.action, m.id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	cur, err := getFinding(ctx, tx, m.id, true)
	if err != nil {
		return ReviewMove{}, err
	}
	to, err := reconcile.NextReviewStatus(m.id, m.action, cur.ReviewStatus)
	if err != nil {
		return ReviewMove{}, err
	}
	legalFrom := reconcile.ReviewMoves[m.action].From
	from := make([]string, len(legalFrom))
	for i, s := range legalFrom {
		from[i] = string(s)
	}
	now := r.now()
	res, err := tx.ExecContext(ctx, reviewUpdateSQL, m.id, pq.Array(from), string(to),
		strings.TrimSpace(m.note), strings.TrimSpace(m.resolution), actor, now)
	if err != nil {
		return ReviewMove{}, fmt.Errorf("%s mismatch %d: update: %w", m.action, m.id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return ReviewMove{}, fmt.Errorf("%s mismatch %d: update: %w", m.action, m.id, err)
	} else if n != 1 { // a concurrent reviewer moved it between the read and the update
		return ReviewMove{}, &reconcile.ReviewTransitionError{ID: m.id, Action: string(m.action), Current: cur.ReviewStatus, Allowed: legalFrom}
	}
	var audit AuditEntry
	err = tx.GetContext(ctx, &audit, `INSERT INTO reconcile_mismatch_audit
		(mismatch_id, action, actor, from_status, to_status, note, created_at)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7)
		RETURNING id, mismatch_id, action, actor, COALESCE(from_status, '') AS from_status,
			COALESCE(to_status, '') AS to_status, COALESCE(note, '') AS note, created_at`,
		m.id, string(m.action), actor, string(cur.ReviewStatus), string(to), strings.TrimSpace(m.note), now)
	if err != nil {
		return ReviewMove{}, fmt.Errorf("%s mismatch %d: write audit row: %w", m.action, m.id, err)
	}
	updated, err := getFinding(ctx, tx, m.id, false)
	if err != nil {
		return ReviewMove{}, err
	}
	if err := tx.Commit(); err != nil {
		return ReviewMove{}, fmt.Errorf("%s mismatch %d: commit: %w", m.action, m.id, err)
	}
	return ReviewMove{Finding: updated, Audit: audit}, nil
}
