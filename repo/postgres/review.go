package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
)

// findingColumns selects a Finding; NULL text comes back as "".
const findingColumns = `id, order_id, platform, merchant_id, out_trade_no,
	COALESCE(platform_trade_no, '') AS platform_trade_no, out_refund_no, kind, local_amount_minor, platform_amount_minor,
	COALESCE(local_status, '') AS local_status, COALESCE(platform_status, '') AS platform_status,
	detail, first_seen_at, last_seen_at, seen_count, review_status,
	COALESCE(resolution, '') AS resolution, COALESCE(note, '') AS note,
	COALESCE(resolved_by, '') AS resolved_by, resolved_at, evidence_version,
	COALESCE(proposed_by, '') AS proposed_by, proposed_at, proposed_version, COALESCE(approved_by, '') AS approved_by`

// auditColumns selects an AuditEntry; NULL text comes back as "".
const auditColumns = `id, mismatch_id, action, actor, COALESCE(os_user, '') AS os_user, COALESCE(db_user, '') AS db_user,
	COALESCE(from_status, '') AS from_status, COALESCE(to_status, '') AS to_status,
	COALESCE(resolution, '') AS resolution, evidence_version, COALESCE(note, '') AS note, created_at`

// Review is the finance review workflow and period report over PostgreSQL. The review rules
// are reconcile.DecideReview's; this type reads, locks and writes.
type Review struct {
	db *sqlx.DB
}

// NewReview wraps a connection pool.
func NewReview(db *sqlx.DB) *Review { return &Review{db: db} }

// recordedLineColumns selects a reconcile.RecordedLine.
const recordedLineColumns = `platform, merchant_id, to_char(bill_date, 'YYYY-MM-DD') AS bill_date, line_no, kind,
	out_trade_no, platform_trade_no, refund_no, amount_minor, order_id, outcome, COALESCE(mismatch_kind, '') AS mismatch_kind, mismatch_id`

// StatementLines lists the bill lines a statement run remembered for one account's day, by
// line number: all of them, or those of one result.
func (r *Review) StatementLines(ctx context.Context, acct reconcile.AccountKey, date string, result reconcile.LineResult) ([]reconcile.RecordedLine, error) {
	out := []reconcile.RecordedLine{}
	err := r.db.SelectContext(ctx, &out, `SELECT `+recordedLineColumns+` FROM statement_lines
		WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date AND ($4 = '' OR outcome = $4)
		ORDER BY line_no`, string(acct.Platform), acct.MerchantID, date, string(result))
	if err != nil {
		return nil, fmt.Errorf("read the bill lines of %s %s: %w", acct, date, err)
	}
	return out, nil
}

// StatementAccounts lists every account a statement day was ever saved for: the accounts
// whose days the console expects to find reconciled.
func (r *Review) StatementAccounts(ctx context.Context) ([]reconcile.AccountKey, error) {
	var out []reconcile.AccountKey
	err := r.db.SelectContext(ctx, &out, `SELECT DISTINCT platform AS "platform", merchant_id AS "merchantid"
		FROM statement_days ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("list the accounts of statement days: %w", err)
	}
	return out, nil
}

// StatementDays lists the saved statement days whose bill dates are in [from, to)
// (YYYY-MM-DD), by day and account: the figures finance signs off, for the review console.
func (r *Review) StatementDays(ctx context.Context, from, to string) ([]reconcile.StatementDayRow, error) {
	return statementDays(ctx, r.db, from, to)
}

// List returns one page of findings in id order, after f.AfterID (keyset pagination: pass
// the last id of a page as the next AfterID).
func (r *Review) List(ctx context.Context, f reconcile.FindingFilter) ([]reconcile.Finding, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = reconcile.DefaultListLimit
	}
	// The console's search and this list filter by the same rules: one WHERE builder.
	cond, args := searchWhere(f, nil)
	args = append(args, f.AfterID, limit)
	q := `SELECT ` + findingColumns + ` FROM reconcile_mismatches WHERE ` + cond +
		fmt.Sprintf(` AND id > $%d ORDER BY id LIMIT $%d`, len(args)-1, len(args))
	out := []reconcile.Finding{}
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
func (r *Review) Get(ctx context.Context, id int64) (reconcile.Finding, error) {
	return getFinding(ctx, r.db, id, false)
}

func getFinding(ctx context.Context, q sqlx.QueryerContext, id int64, forUpdate bool) (reconcile.Finding, error) {
	query := `SELECT ` + findingColumns + ` FROM reconcile_mismatches WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var f reconcile.Finding
	err := sqlx.GetContext(ctx, q, &f, query, id)
	if errors.Is(err, sql.ErrNoRows) {
		return reconcile.Finding{}, fmt.Errorf("mismatch %d: %w", id, reconcile.ErrNotFound)
	}
	if err != nil {
		return reconcile.Finding{}, fmt.Errorf("read mismatch %d: %w", id, err)
	}
	return f, nil
}

// Audit returns a finding's audit trail, oldest first (empty for an unknown id).
func (r *Review) Audit(ctx context.Context, id int64) ([]reconcile.AuditEntry, error) {
	out := []reconcile.AuditEntry{}
	err := r.db.SelectContext(ctx, &out, `SELECT `+auditColumns+`
		FROM reconcile_mismatch_audit WHERE mismatch_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("read audit trail of mismatch %d: %w", id, err)
	}
	return out, nil
}

// Details returns a finding with its audit trail and, when it names an order, the order's
// current state, payment events and refunds. A missing id is reconcile.ErrNotFound, wrapped.
func (r *Review) Details(ctx context.Context, id int64) (reconcile.FindingDetails, error) {
	f, err := r.Get(ctx, id)
	if err != nil {
		return reconcile.FindingDetails{}, err
	}
	d := reconcile.FindingDetails{Finding: f, Events: []reconcile.PaymentEvent{}, Refunds: []reconcile.RefundRecord{}, Lines: []reconcile.RecordedLine{}}
	if d.Audit, err = r.Audit(ctx, id); err != nil {
		return reconcile.FindingDetails{}, err
	}
	if err := r.db.SelectContext(ctx, &d.Lines, `SELECT `+recordedLineColumns+` FROM statement_lines
		WHERE mismatch_id = $1 ORDER BY bill_date, line_no`, id); err != nil {
		return reconcile.FindingDetails{}, fmt.Errorf("read the bill lines of mismatch %d: %w", id, err)
	}
	if f.OrderID == nil {
		return d, nil
	}
	h, err := r.OrderHistory(ctx, *f.OrderID)
	switch {
	case errors.Is(err, reconcile.ErrNotFound): // the foreign key makes this unreachable; show what there is
		return d, nil
	case err != nil:
		return reconcile.FindingDetails{}, fmt.Errorf("mismatch %d: %w", id, err)
	}
	d.Order, d.Events, d.Refunds = &h.Order, h.Events, h.Refunds
	return d, nil
}

// OrderHistory returns an order's current state with its payment events and refunds,
// oldest first. A missing order is reconcile.ErrNotFound, wrapped.
func (r *Review) OrderHistory(ctx context.Context, orderID int64) (reconcile.OrderHistory, error) {
	h := reconcile.OrderHistory{Events: []reconcile.PaymentEvent{}, Refunds: []reconcile.RefundRecord{}}
	err := r.db.GetContext(ctx, &h.Order, `SELECT id, platform, merchant_id, out_trade_no, amount_minor, currency,
		status, COALESCE(platform_trade_no, '') AS platform_trade_no, paid_amount_minor, refunded_minor, paid_at, expires_at,
		created_at, updated_at, version, next_check_at, check_count, last_checked_at
		FROM payment_orders WHERE id = $1`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return reconcile.OrderHistory{}, fmt.Errorf("order %d: %w", orderID, reconcile.ErrNotFound)
	}
	if err != nil {
		return reconcile.OrderHistory{}, fmt.Errorf("read order %d: %w", orderID, err)
	}
	err = r.db.SelectContext(ctx, &h.Events, `SELECT e.id, e.event_type, e.source,
		COALESCE(e.platform_trade_no, '') AS platform_trade_no, e.amount_minor,
		COALESCE(e.raw_digest, '') AS raw_digest, e.refund_id, COALESCE(f.out_refund_no, '') AS out_refund_no, e.created_at
		FROM payment_events e LEFT JOIN payment_refunds f ON f.id = e.refund_id
		WHERE e.order_id = $1 ORDER BY e.created_at, e.id`, orderID)
	if err != nil {
		return reconcile.OrderHistory{}, fmt.Errorf("read payment events of order %d: %w", orderID, err)
	}
	err = r.db.SelectContext(ctx, &h.Refunds, `SELECT id, out_refund_no, COALESCE(platform_refund_no, '') AS platform_refund_no,
		amount_minor, currency, status, succeeded_at, created_at, updated_at
		FROM payment_refunds WHERE order_id = $1 ORDER BY created_at, id`, orderID)
	if err != nil {
		return reconcile.OrderHistory{}, fmt.Errorf("read refunds of order %d: %w", orderID, err)
	}
	return h, nil
}

// Acknowledge moves a finding OPEN -> ACKNOWLEDGED. A non-empty note replaces the finding's
// note. Errors: reconcile.ErrNotFound (wrapped) for a missing id, and the errors of
// reconcile.DecideReview.
func (r *Review) Acknowledge(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error) {
	return r.move(ctx, id, reconcile.ReviewAcknowledge, in)
}

// Resolve resolves an OPEN or ACKNOWLEDGED finding: RESOLVED at once for accepted and
// false_positive, PENDING_APPROVAL (a proposal) for a resolution that moves money.
func (r *Review) Resolve(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error) {
	return r.move(ctx, id, reconcile.ReviewResolve, in)
}

// Approve is the checker's approval of a pending proposal: RESOLVED. The proposer's own
// approval is refused (reconcile.ErrSelfApproval).
func (r *Review) Approve(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error) {
	return r.move(ctx, id, reconcile.ReviewApprove, in)
}

// Withdraw takes the proposer's own pending proposal back to ACKNOWLEDGED.
func (r *Review) Withdraw(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error) {
	return r.move(ctx, id, reconcile.ReviewWithdraw, in)
}

// Reject sends a pending proposal back to ACKNOWLEDGED; the note says why.
func (r *Review) Reject(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error) {
	return r.move(ctx, id, reconcile.ReviewReject, in)
}

// reviewFunction is the database function that makes each move (migration 0010): it checks
// the rules under the finding's row lock and writes the audit row in the same statement, so
// a credential that can call it cannot make a move the rules forbid or leave no trail. The
// arguments are the finding, the person, the OS user, the evidence version seen and the
// note; a resolve adds the resolution.
var reviewFunction = map[reconcile.ReviewAction]string{
	reconcile.ReviewAcknowledge: `SELECT public.payrecon_review_acknowledge($1, $2, $3, $4, $5)`,
	reconcile.ReviewResolve:     `SELECT public.payrecon_review_resolve($1, $2, $3, $4, $6, $5)`,
	reconcile.ReviewApprove:     `SELECT public.payrecon_review_approve($1, $2, $3, $4, $5)`,
	reconcile.ReviewReject:      `SELECT public.payrecon_review_reject($1, $2, $3, $4, $5)`,
	reconcile.ReviewWithdraw:    `SELECT public.payrecon_review_withdraw($1, $2, $3, $4, $5)`,
}

// move makes one review move through its database function and reads back the finding and
// the audit row it wrote. The database is the authority; a refusal is explained with the
// domain's errors (reconcile.DecideReview on the finding as it now stands), so the person is
// told the same thing whichever side caught it.
func (r *Review) move(ctx context.Context, id int64, action reconcile.ReviewAction, in reconcile.ReviewInput) (reconcile.ReviewMove, error) {
	fn, ok := reviewFunction[action]
	if !ok {
		return reconcile.ReviewMove{}, fmt.Errorf("%w: mismatch %d: unknown review action %q", reconcile.ErrBadReview, id, action)
	}
	req := reconcile.ReviewRequest{Action: action, Actor: strings.TrimSpace(in.By), Resolution: in.Resolution,
		Note: strings.TrimSpace(in.Note), SeenVersion: in.Version}
	args := []any{id, req.Actor, strings.TrimSpace(in.OSUser), in.Version, req.Note}
	if action == reconcile.ReviewResolve {
		// The function knows resolutions by their one spelling: "WRITTEN-OFF" is written_off.
		res, err := reconcile.ParseResolution(string(in.Resolution))
		if err != nil {
			return reconcile.ReviewMove{}, fmt.Errorf("mismatch %d: %w", id, err)
		}
		args = append(args, string(res))
	}
	tx, err := r.db.BeginTxx(ctx, nil)
	if err != nil {
		return reconcile.ReviewMove{}, fmt.Errorf("%s mismatch %d: begin: %w", action, id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	var auditID int64
	err = tx.GetContext(ctx, &auditID, fn, args...)
	if err != nil {
		tx.Rollback() //nolint:errcheck // the refusal is the error worth reporting; explain reads afresh
		return reconcile.ReviewMove{}, r.explainRefusal(ctx, id, req, err)
	}
	var move reconcile.ReviewMove
	if move.Finding, err = getFinding(ctx, tx, id, false); err != nil {
		return reconcile.ReviewMove{}, err
	}
	if err := tx.GetContext(ctx, &move.Audit, `SELECT `+auditColumns+` FROM reconcile_mismatch_audit WHERE id = $1`, auditID); err != nil {
		return reconcile.ReviewMove{}, fmt.Errorf("%s mismatch %d: read the audit row: %w", action, id, err)
	}
	if err := tx.Commit(); err != nil {
		return reconcile.ReviewMove{}, fmt.Errorf("%s mismatch %d: commit: %w", action, id, err)
	}
	return move, nil
}

// Refusals the review functions raise (SQLSTATE class PR, migration 0010).
const (
	sqlStateIllegalReview = "PR001"
	sqlStateStaleEvidence = "PR002"
	sqlStateSelfApproval  = "PR003"
	sqlStateBadReview     = "PR004"
	sqlStateNoFinding     = "PR005"
)

// explainRefusal turns a review function's refusal into the domain's error. The finding is
// read again and the rules asked why; when they see nothing wrong (the database refused for
// a reason the domain does not model, such as an identity that is not normalised) the
// database's own message is kept under the sentinel its SQLSTATE maps to.
func (r *Review) explainRefusal(ctx context.Context, id int64, req reconcile.ReviewRequest, dbErr error) error {
	var pqErr *pq.Error
	if !errors.As(dbErr, &pqErr) || !strings.HasPrefix(string(pqErr.Code), "PR") {
		return fmt.Errorf("%s mismatch %d: %w", req.Action, id, dbErr)
	}
	if pqErr.Code == sqlStateNoFinding {
		return fmt.Errorf("mismatch %d: %w", id, reconcile.ErrNotFound)
	}
	if cur, err := r.Get(ctx, id); err == nil {
		if _, err := reconcile.DecideReview(cur.ReviewState(), req); err != nil {
			return err
		}
	}
	sentinel := map[pq.ErrorCode]error{
		sqlStateIllegalReview: reconcile.ErrIllegalReview,
		sqlStateStaleEvidence: reconcile.ErrStaleEvidence,
		sqlStateSelfApproval:  reconcile.ErrSelfApproval,
		sqlStateBadReview:     reconcile.ErrBadReview,
	}[pqErr.Code]
	if sentinel == nil {
		sentinel = reconcile.ErrBadReview
	}
	return fmt.Errorf("%w: %s", sentinel, pqErr.Message)
}
