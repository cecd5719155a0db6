package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// reviewBase is the seeded data's reference time: midnight, 28 November 2026, China time.
var reviewBase = time.Date(2026, 11, 28, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))

// seedFinding is one reconcile_mismatches row to insert. Zero amounts insert NULL; zero
// times default to reviewBase.
type seedFinding struct {
	orderID         int64
	platform        string
	merchant        string
	otn             string
	ptn             string
	kind            reconcile.MismatchKind
	local, plat     int64
	localStatus     string
	platformStatus  string
	first, last     time.Time
	seen            int
	status          reconcile.ReviewStatus
	detail          string
	resolution, by  string
	resolvedAt      time.Time
	initialNoteText string
}

func insertFinding(t testing.TB, db *repotest.DB, s seedFinding) int64 {
	t.Helper()
	if s.platform == "" {
		s.platform = "alipay"
	}
	if s.merchant == "" {
		s.merchant = "2021000000000001"
	}
	if s.kind == "" {
		s.kind = reconcile.MismatchAmount
	}
	if s.first.IsZero() {
		s.first = reviewBase
	}
	if s.last.IsZero() {
		s.last = s.first
	}
	if s.seen == 0 {
		s.seen = 1
	}
	if s.status == "" {
		s.status = reconcile.ReviewOpen
	}
	if s.detail == "" {
		s.detail = `{}`
	}
	var resolvedAt any
	if !s.resolvedAt.IsZero() {
		resolvedAt = s.resolvedAt
	}
	var id int64
	err := db.Get(&id, `INSERT INTO reconcile_mismatches (order_id, platform, merchant_id, out_trade_no,
		platform_trade_no, kind, local_amount_minor, platform_amount_minor, local_status, platform_status,
		detail, first_seen_at, last_seen_at, seen_count, review_status, resolution, resolved_by, resolved_at, note)
		VALUES (NULLIF($1::bigint, 0), $2, $3, $4, NULLIF($5, ''), $6, NULLIF($7::bigint, 0), NULLIF($8::bigint, 0),
		NULLIF($9, ''), NULLIF($10, ''), $11::jsonb, $12, $13, $14, $15, NULLIF($16, ''), NULLIF($17, ''), $18, NULLIF($19, ''))
		RETURNING id`,
		s.orderID, s.platform, s.merchant, s.otn, s.ptn, string(s.kind), s.local, s.plat, s.localStatus,
		s.platformStatus, s.detail, s.first, s.last, s.seen, string(s.status), s.resolution, s.by, resolvedAt,
		s.initialNoteText)
	if err != nil {
		t.Fatalf("seed finding %q: %v", s.otn, err)
	}
	return id
}

func insertOrder(t testing.TB, db *repotest.DB, platform, merchant, otn string, amount int64, status string) int64 {
	t.Helper()
	return repotest.InsertOrder(t, db, repotest.Order{Platform: platform, MerchantID: merchant, OutTradeNo: otn, AmountMinor: amount,
		Status: status, CreatedAt: reviewBase.Add(-time.Hour)})
}

func auditRows(t testing.TB, db *repotest.DB, id int64) []reconcile.AuditEntry {
	t.Helper()
	rows, err := postgres.NewReview(db.DB).Audit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func otns(fs []reconcile.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.OutTradeNo
	}
	return out
}

func TestReviewListFilters(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	h := time.Hour
	// id order is insertion order: the expectations below are in that order.
	for _, s := range []seedFinding{
		{otn: "a-open-amount", kind: reconcile.MismatchAmount, first: reviewBase.Add(-48 * h), last: reviewBase.Add(-47 * h)},
		{otn: "b-ack-unknown", kind: reconcile.MismatchUnknownOrder, status: reconcile.ReviewAcknowledged, platform: "wechatpay",
			first: reviewBase.Add(-30 * h), last: reviewBase.Add(2 * h)},
		{otn: "c-resolved-amount", kind: reconcile.MismatchAmount, status: reconcile.ReviewResolved, resolution: "refunded",
			by: "ann", resolvedAt: reviewBase, first: reviewBase.Add(h), last: reviewBase.Add(3 * h)},
		{otn: "d-open-dup", kind: reconcile.MismatchDuplicatePayment, platform: "wechatpay",
			first: reviewBase.Add(5 * h), last: reviewBase.Add(30 * h)},
		{otn: "e-open-amount", kind: reconcile.MismatchAmount, first: reviewBase.Add(30 * h), last: reviewBase.Add(31 * h)},
		{otn: "f-ack-amount", kind: reconcile.MismatchAmount, status: reconcile.ReviewAcknowledged,
			first: reviewBase.Add(-72 * h), last: reviewBase.Add(72 * h)},
	} {
		insertFinding(t, db, s)
	}
	day := reviewBase.Add(24 * h)
	tests := []struct {
		name   string
		filter reconcile.FindingFilter
		want   []string
	}{
		{"no filter lists every status", reconcile.FindingFilter{},
			[]string{"a-open-amount", "b-ack-unknown", "c-resolved-amount", "d-open-dup", "e-open-amount", "f-ack-amount"}},
		{"open only", reconcile.FindingFilter{Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen}},
			[]string{"a-open-amount", "d-open-dup", "e-open-amount"}},
		{"open and acknowledged", reconcile.FindingFilter{Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewAcknowledged}},
			[]string{"a-open-amount", "b-ack-unknown", "d-open-dup", "e-open-amount", "f-ack-amount"}},
		{"resolved", reconcile.FindingFilter{Statuses: []reconcile.ReviewStatus{reconcile.ReviewResolved}}, []string{"c-resolved-amount"}},
		{"kind", reconcile.FindingFilter{Kind: reconcile.MismatchAmount},
			[]string{"a-open-amount", "c-resolved-amount", "e-open-amount", "f-ack-amount"}},
		{"platform", reconcile.FindingFilter{Platform: reconcile.WechatPay}, []string{"b-ack-unknown", "d-open-dup"}},
		{"kind and platform and status", reconcile.FindingFilter{Kind: reconcile.MismatchAmount, Platform: reconcile.Alipay,
			Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen}}, []string{"a-open-amount", "e-open-amount"}},
		// first or last seen in [base, base+24h): b (last), c (both), d (first). f spans the
		// day without a sighting recorded in it; a and e lie wholly outside.
		{"since and until", reconcile.FindingFilter{Since: reviewBase, Until: day},
			[]string{"b-ack-unknown", "c-resolved-amount", "d-open-dup"}},
		{"since only: last seen at or after", reconcile.FindingFilter{Since: day},
			[]string{"d-open-dup", "e-open-amount", "f-ack-amount"}},
		{"until only: first seen before", reconcile.FindingFilter{Until: reviewBase},
			[]string{"a-open-amount", "b-ack-unknown", "f-ack-amount"}},
		{"since inclusive, until exclusive", reconcile.FindingFilter{Since: reviewBase.Add(-48 * h), Until: reviewBase.Add(h)},
			[]string{"a-open-amount", "b-ack-unknown"}},
		{"a one-microsecond period", reconcile.FindingFilter{Since: reviewBase.Add(30 * h), Until: reviewBase.Add(30*h + time.Microsecond)},
			[]string{"d-open-dup", "e-open-amount"}},
		{"nothing matches", reconcile.FindingFilter{Kind: reconcile.MismatchRefundedAtPlatform}, []string{}},
		{"limit", reconcile.FindingFilter{Limit: 2}, []string{"a-open-amount", "b-ack-unknown"}},
	}
	rv := postgres.NewReview(db.DB)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rv.List(context.Background(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(otns(got), tc.want) {
				t.Fatalf("List(%+v) = %q, want %q", tc.filter, otns(got), tc.want)
			}
		})
	}
}

func TestReviewListFindingFields(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	oid := insertOrder(t, db, "alipay", "2021000000000001", "ord-1", 10000, "PAID")
	id := insertFinding(t, db, seedFinding{orderID: oid, otn: "ord-1", ptn: "2026112822001", local: 10000, plat: 9999,
		localStatus: "PAID", platformStatus: "TRADE_SUCCESS", seen: 3, detail: `{"reason": "amount differs"}`,
		first: reviewBase, last: reviewBase.Add(time.Minute)})
	insertFinding(t, db, seedFinding{otn: "no-order", kind: reconcile.MismatchUnknownOrder})

	got, err := postgres.NewReview(db.DB).List(context.Background(), reconcile.FindingFilter{})
	if err != nil || len(got) != 2 {
		t.Fatalf("List: %v %v", got, err)
	}
	f := got[0]
	if f.ID != id || f.OrderID == nil || *f.OrderID != oid || f.Platform != reconcile.Alipay ||
		f.MerchantID != "2021000000000001" || f.OutTradeNo != "ord-1" || f.PlatformTradeNo != "2026112822001" ||
		f.Kind != reconcile.MismatchAmount || f.LocalAmountMinor == nil || *f.LocalAmountMinor != 10000 ||
		f.PlatformAmountMinor == nil || *f.PlatformAmountMinor != 9999 || f.LocalStatus != "PAID" ||
		f.PlatformStatus != "TRADE_SUCCESS" || f.SeenCount != 3 || f.ReviewStatus != reconcile.ReviewOpen ||
		!f.FirstSeenAt.Equal(reviewBase) || !f.LastSeenAt.Equal(reviewBase.Add(time.Minute)) || f.ResolvedAt != nil {
		t.Fatalf("finding read back wrong: %+v", f)
	}
	var detail map[string]string
	if err := json.Unmarshal(f.Detail, &detail); err != nil || detail["reason"] != "amount differs" {
		t.Fatalf("detail = %s (%v)", f.Detail, err)
	}
	if f.AtStakeMinor() != 1 {
		t.Fatalf("at stake = %d, want 1", f.AtStakeMinor())
	}
	n := got[1]
	if n.OrderID != nil || n.LocalAmountMinor != nil || n.PlatformAmountMinor != nil || n.PlatformTradeNo != "" {
		t.Fatalf("NULL columns read back as %+v", n)
	}
}

func TestReviewListKeysetPagination(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	var open []int64
	for i := range 23 {
		status := reconcile.ReviewOpen
		if i%4 == 3 {
			status = reconcile.ReviewResolved
		}
		id := insertFinding(t, db, seedFinding{otn: fmt.Sprintf("page-%02d", i), status: status, resolution: "x", by: "y"})
		if status == reconcile.ReviewOpen {
			open = append(open, id)
		}
	}
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	filter := reconcile.FindingFilter{Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen}, Limit: 5}
	var seen []int64
	pages := 0
	for {
		page, err := rv.List(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, f := range page {
			if len(seen) > 0 && f.ID <= seen[len(seen)-1] {
				t.Fatalf("page %d: id %d not after %d", pages, f.ID, seen[len(seen)-1])
			}
			seen = append(seen, f.ID)
		}
		if pages == 1 {
			// Resolving findings already listed must not shift the next page (as OFFSET
			// would): the cursor is an id, not a position.
			for _, f := range page[:3] {
				if _, err := rv.Resolve(ctx, f.ID, reconcile.ReviewInput{By: "ann", Resolution: "accepted"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(page) < filter.Limit {
			break
		}
		filter.AfterID = page[len(page)-1].ID
	}
	if !slices.Equal(seen, open) {
		t.Fatalf("pages listed %v, want every open finding once: %v", seen, open)
	}
	if want := len(open)/5 + 1; pages != want {
		t.Fatalf("%d pages, want %d", pages, want)
	}
}

func TestReviewTransitions(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()

	tests := []struct {
		name       string
		start      reconcile.ReviewStatus
		missing    bool // act on an id that does not exist
		act        func(id int64) (reconcile.ReviewMove, error)
		wantStatus reconcile.ReviewStatus // "" when the move must fail
		wantAudit  reconcile.AuditEntry   // checked when the move succeeds
		wantErr    error
		wantMsg    []string
	}{
		{name: "ack open", start: reconcile.ReviewOpen,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: " ann ", OSUser: "ops1", Note: "looking into it"})
			},
			wantStatus: reconcile.ReviewAcknowledged,
			wantAudit:  reconcile.AuditEntry{Action: "acknowledge", Actor: "ann", OSUser: "ops1", FromStatus: "OPEN", ToStatus: "ACKNOWLEDGED", Note: "looking into it"}},
		{name: "resolve open", start: reconcile.ReviewOpen,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Resolve(ctx, id, reconcile.ReviewInput{By: "bob", Resolution: "accepted", Note: "ticket 7", Version: 1})
			},
			wantStatus: reconcile.ReviewResolved,
			wantAudit:  reconcile.AuditEntry{Action: "resolve", Actor: "bob", FromStatus: "OPEN", ToStatus: "RESOLVED", Resolution: "accepted", Note: "ticket 7"}},
		{name: "resolve acknowledged", start: reconcile.ReviewAcknowledged,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Resolve(ctx, id, reconcile.ReviewInput{By: "bob", Resolution: "false_positive"})
			},
			wantStatus: reconcile.ReviewResolved,
			wantAudit:  reconcile.AuditEntry{Action: "resolve", Actor: "bob", FromStatus: "ACKNOWLEDGED", ToStatus: "RESOLVED", Resolution: "false_positive"}},
		{name: "a money-moving resolution is a proposal", start: reconcile.ReviewAcknowledged,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Resolve(ctx, id, reconcile.ReviewInput{By: "bob", Resolution: "refunded"})
			},
			wantStatus: reconcile.ReviewPendingApproval,
			wantAudit:  reconcile.AuditEntry{Action: "propose", Actor: "bob", FromStatus: "ACKNOWLEDGED", ToStatus: "PENDING_APPROVAL", Resolution: "refunded"}},
		{name: "resolve naming a stale version", start: reconcile.ReviewOpen,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Resolve(ctx, id, reconcile.ReviewInput{By: "bob", Resolution: "accepted", Version: 2})
			},
			wantErr: reconcile.ErrStaleEvidence, wantMsg: []string{"evidence changed", "version 2", "version 1"}},
		{name: "ack acknowledged", start: reconcile.ReviewAcknowledged,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "ann"})
			},
			wantErr: reconcile.ErrIllegalReview, wantMsg: []string{"is ACKNOWLEDGED", "cannot acknowledge"}},
		{name: "ack resolved", start: reconcile.ReviewResolved,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "ann"})
			},
			wantErr: reconcile.ErrIllegalReview, wantMsg: []string{"is RESOLVED", "cannot acknowledge"}},
		{name: "resolve resolved", start: reconcile.ReviewResolved,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Resolve(ctx, id, reconcile.ReviewInput{By: "bob", Resolution: "accepted"})
			},
			wantErr: reconcile.ErrIllegalReview, wantMsg: []string{"is RESOLVED", "cannot resolve"}},
		{name: "ack unknown id", missing: true,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "ann"})
			},
			wantErr: reconcile.ErrNotFound, wantMsg: []string{"not found"}},
		{name: "resolve unknown id", missing: true,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Resolve(ctx, id, reconcile.ReviewInput{By: "ann", Resolution: "accepted"})
			},
			wantErr: reconcile.ErrNotFound, wantMsg: []string{"not found"}},
		{name: "ack without reviewer", start: reconcile.ReviewOpen,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "  "})
			},
			wantMsg: []string{"reviewer must be named"}},
		{name: "resolve without resolution", start: reconcile.ReviewOpen,
			act: func(id int64) (reconcile.ReviewMove, error) {
				return rv.Resolve(ctx, id, reconcile.ReviewInput{By: "ann", Resolution: " "})
			},
			wantErr: reconcile.ErrBadReview, wantMsg: []string{"unknown resolution"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := seedFinding{otn: fmt.Sprintf("tr-%d", i), status: tc.start, initialNoteText: "seeded note"}
			if tc.start == reconcile.ReviewResolved {
				s.resolution, s.by, s.resolvedAt = "earlier", "carol", reviewBase
			}
			id := int64(1 << 40)
			if !tc.missing {
				id = insertFinding(t, db, s)
			}
			before, _ := rv.Get(ctx, id)
			got, err := tc.act(id)
			if tc.wantStatus == "" {
				if err == nil {
					t.Fatalf("move succeeded: %+v", got)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v is not %v", err, tc.wantErr)
				}
				for _, m := range append(tc.wantMsg, fmt.Sprint(id)) {
					if !strings.Contains(err.Error(), m) {
						t.Fatalf("error %q does not say %q", err, m)
					}
				}
				if errors.Is(err, reconcile.ErrIllegalReview) {
					var te *reconcile.ReviewTransitionError
					if !errors.As(err, &te) || te.ID != id || te.Current != tc.start {
						t.Fatalf("transition error %#v", te)
					}
				}
				if tc.missing {
					return
				}
				after, err := rv.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if after.ReviewStatus != before.ReviewStatus || after.Note != before.Note ||
					after.Resolution != before.Resolution || after.ResolvedBy != before.ResolvedBy {
					t.Fatalf("a refused move changed the finding: %+v -> %+v", before, after)
				}
				if a := auditRows(t, db, id); len(a) != 0 {
					t.Fatalf("a refused move wrote audit rows: %+v", a)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored, err := rv.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Finding.ReviewStatus != tc.wantStatus || stored.ReviewStatus != tc.wantStatus {
				t.Fatalf("status returned %s, stored %s, want %s", got.Finding.ReviewStatus, stored.ReviewStatus, tc.wantStatus)
			}
			wantNote := tc.wantAudit.Note
			if wantNote == "" {
				wantNote = "seeded note" // an empty note keeps the one there
			}
			if stored.Note != wantNote {
				t.Fatalf("note = %q, want %q", stored.Note, wantNote)
			}
			if tc.wantStatus == reconcile.ReviewResolved {
				// resolved_at and the audit row's time are the same transaction's database clock.
				if stored.ResolvedBy != tc.wantAudit.Actor || stored.Resolution != tc.wantAudit.Resolution ||
					stored.ResolvedAt == nil || !stored.ResolvedAt.Equal(got.Audit.CreatedAt) {
					t.Fatalf("resolve columns: by %q resolution %q at %v", stored.ResolvedBy, stored.Resolution, stored.ResolvedAt)
				}
			} else if tc.wantStatus == reconcile.ReviewPendingApproval {
				if stored.ProposedBy != tc.wantAudit.Actor || stored.Resolution != tc.wantAudit.Resolution || stored.ResolvedAt != nil ||
					stored.ProposedVersion == nil || *stored.ProposedVersion != 1 || stored.ProposedAt == nil {
					t.Fatalf("proposal columns: %+v", stored)
				}
			} else if stored.ResolvedAt != nil || stored.ResolvedBy != "" || stored.Resolution != "" {
				t.Fatalf("acknowledge set resolve columns: %+v", stored)
			}
			audit := auditRows(t, db, id)
			if len(audit) != 1 {
				t.Fatalf("%d audit rows, want 1: %+v", len(audit), audit)
			}
			a, w := audit[0], tc.wantAudit
			if a.MismatchID != id || a.Action != w.Action || a.Actor != w.Actor || a.FromStatus != w.FromStatus ||
				a.ToStatus != w.ToStatus || a.Note != w.Note || a.OSUser != w.OSUser || a.Resolution != w.Resolution ||
				a.EvidenceVersion == nil || *a.EvidenceVersion != 1 || time.Since(a.CreatedAt).Abs() > time.Minute {
				t.Fatalf("audit row %+v, want %+v now", a, w)
			}
			if !reflect.DeepEqual(got.Audit, a) {
				t.Fatalf("returned audit row %+v, stored %+v", got.Audit, a)
			}
		})
	}
}

func TestReviewAckThenResolveKeepsTheTrail(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	id := insertFinding(t, db, seedFinding{otn: "trail"})
	if _, err := rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "ann", Note: "asked the merchant"}); err != nil {
		t.Fatal(err)
	}
	mv, err := rv.Resolve(ctx, id, reconcile.ReviewInput{By: "bob", Resolution: "accepted"})
	if err != nil {
		t.Fatal(err)
	}
	f := mv.Finding
	if f.Note != "asked the merchant" || f.Resolution != "accepted" || f.ResolvedBy != "bob" {
		t.Fatalf("resolved finding %+v", f)
	}
	audit := auditRows(t, db, id)
	got := make([]string, len(audit))
	for i, a := range audit {
		got[i] = fmt.Sprintf("%s %s %s->%s %q", a.Action, a.Actor, a.FromStatus, a.ToStatus, a.Note)
	}
	want := []string{`acknowledge ann OPEN->ACKNOWLEDGED "asked the merchant"`, `resolve bob ACKNOWLEDGED->RESOLVED ""`}
	if !slices.Equal(got, want) {
		t.Fatalf("audit trail %q, want %q", got, want)
	}
}

func TestReviewRacingResolversOnlyOneWins(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	id := insertFinding(t, db, seedFinding{otn: "contested", status: reconcile.ReviewAcknowledged})

	const n = 16
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = rv.Resolve(context.Background(), id, reconcile.ReviewInput{By: fmt.Sprintf("reviewer-%02d", i),
				Resolution: "accepted", Note: fmt.Sprintf("note %d", i)})
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("reviewers %d and %d both resolved the finding", winner, i)
			}
			winner = i
		case errors.Is(err, reconcile.ErrIllegalReview):
			var te *reconcile.ReviewTransitionError
			if !errors.As(err, &te) || te.Current != reconcile.ReviewResolved {
				t.Fatalf("reviewer %d lost with %v, want it told the finding is RESOLVED", i, err)
			}
		default:
			t.Fatalf("reviewer %d: unexpected error %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no reviewer resolved the finding")
	}
	f, err := rv.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	wantBy := fmt.Sprintf("reviewer-%02d", winner)
	if f.ReviewStatus != reconcile.ReviewResolved || f.ResolvedBy != wantBy || f.Note != fmt.Sprintf("note %d", winner) {
		t.Fatalf("finding %+v, want resolved by the winner %s", f, wantBy)
	}
	audit := auditRows(t, db, id)
	if len(audit) != 1 || audit[0].Action != "resolve" || audit[0].Actor != wantBy ||
		audit[0].FromStatus != "ACKNOWLEDGED" || audit[0].ToStatus != "RESOLVED" {
		t.Fatalf("audit rows %+v, want exactly one resolve by %s", audit, wantBy)
	}
}

func TestReviewDetails(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	oid := insertOrder(t, db, "wechatpay", "1900000109", "dup-1", 500, "PAID")
	db.MustExec(`UPDATE payment_orders SET platform_trade_no = 'wx-1', paid_amount_minor = 500, paid_at = $2 WHERE id = $1`, oid, reviewBase)
	db.MustExec(`INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor, raw_digest)
		VALUES ($1, 'wechatpay', 'wx-1', 'PAID', 'notify', 500, 'abc123')`, oid)
	withOrder := insertFinding(t, db, seedFinding{orderID: oid, platform: "wechatpay", merchant: "1900000109", otn: "dup-1",
		ptn: "wx-2", kind: reconcile.MismatchDuplicatePayment, local: 500, plat: 500, detail: `{"first_trade_no": "wx-1"}`})
	orphan := insertFinding(t, db, seedFinding{otn: "nobody", kind: reconcile.MismatchUnknownOrder, plat: 700})
	if _, err := rv.Acknowledge(ctx, withOrder, reconcile.ReviewInput{By: "ann", Note: "calling the buyer"}); err != nil {
		t.Fatal(err)
	}

	d, err := rv.Details(ctx, withOrder)
	if err != nil {
		t.Fatal(err)
	}
	if d.Finding.ID != withOrder || d.Finding.ReviewStatus != reconcile.ReviewAcknowledged || string(d.Finding.Detail) == "{}" {
		t.Fatalf("finding %+v", d.Finding)
	}
	if d.Order == nil || d.Order.ID != oid || d.Order.Status != "PAID" || d.Order.PlatformTradeNo != "wx-1" ||
		d.Order.PaidAmountMinor == nil || *d.Order.PaidAmountMinor != 500 || d.Order.PaidAt == nil {
		t.Fatalf("order %+v", d.Order)
	}
	if len(d.Events) != 1 || d.Events[0].EventType != "PAID" || d.Events[0].Source != "notify" ||
		d.Events[0].PlatformTradeNo != "wx-1" || d.Events[0].RawDigest != "abc123" {
		t.Fatalf("events %+v", d.Events)
	}
	if len(d.Audit) != 1 || d.Audit[0].Actor != "ann" {
		t.Fatalf("audit %+v", d.Audit)
	}

	d, err = rv.Details(ctx, orphan)
	if err != nil {
		t.Fatal(err)
	}
	if d.Order != nil || len(d.Events) != 0 || len(d.Audit) != 0 {
		t.Fatalf("a finding without an order: %+v", d)
	}
	if _, err := rv.Details(ctx, orphan+1000); !errors.Is(err, reconcile.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprint(orphan+1000)) {
		t.Fatalf("details of a missing id: %v", err)
	}
}
