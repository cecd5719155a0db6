package reconcile_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
)

func TestAtStake(t *testing.T) {
	t.Parallel()
	p := func(v int64) *int64 { return &v }
	tests := []struct {
		kind        reconcile.MismatchKind
		local, plat *int64
		want        int64
	}{
		{reconcile.MismatchAmount, p(10000), p(9000), 1000},
		{reconcile.MismatchAmount, p(9000), p(10000), 1000},
		{reconcile.MismatchAmount, nil, p(700), 700},
		{reconcile.MismatchLocalPaidPlatformNot, p(2500), nil, 2500},
		{reconcile.MismatchUnknownOrder, nil, p(800), 800},
		{reconcile.MismatchDuplicatePayment, p(500), p(500), 500},
		{reconcile.MismatchPaidAfterClose, p(300), nil, 300},
		{reconcile.MismatchCurrency, nil, nil, 0},
	}
	for _, tc := range tests {
		if got := reconcile.AtStakeMinor(tc.kind, tc.local, tc.plat); got != tc.want {
			t.Errorf("%s local %v platform %v: at stake %d, want %d", tc.kind, tc.local, tc.plat, got, tc.want)
		}
	}
}

func TestParseReviewStatusAndKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want reconcile.ReviewStatus
		ok   bool
	}{{"OPEN", reconcile.ReviewOpen, true}, {"acknowledged", reconcile.ReviewAcknowledged, true}, {" Resolved ", reconcile.ReviewResolved, true},
		{"closed", "", false}, {"", "", false}} {
		got, err := reconcile.ParseReviewStatus(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseReviewStatus(%q) = %q, %v", tc.in, got, err)
		}
	}
	for _, tc := range []struct {
		in   string
		want reconcile.MismatchKind
		ok   bool
	}{{"amount_mismatch", reconcile.MismatchAmount, true}, {"REFUNDED_AT_PLATFORM", reconcile.MismatchRefundedAtPlatform, true},
		{"AMOUNT", "", false}} {
		got, err := reconcile.ParseMismatchKind(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseMismatchKind(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestDecideReview(t *testing.T) {
	t.Parallel()
	st := func(status reconcile.ReviewStatus) reconcile.FindingReviewState {
		return reconcile.FindingReviewState{ID: 7, Status: status, EvidenceVersion: 3}
	}
	pending := reconcile.FindingReviewState{ID: 7, Status: reconcile.ReviewPendingApproval, EvidenceVersion: 3,
		ProposedBy: "ann", ProposedVersion: 3}
	changed := pending
	changed.EvidenceVersion = 4
	req := func(a reconcile.ReviewAction, by string, r reconcile.Resolution, v int64) reconcile.ReviewRequest {
		return reconcile.ReviewRequest{Action: a, Actor: by, Resolution: r, SeenVersion: v, Note: "n"}
	}
	noNote := func(r reconcile.ReviewRequest) reconcile.ReviewRequest { r.Note = ""; return r }
	blank := func(r reconcile.ReviewRequest) reconcile.ReviewRequest { r.Note = "  "; return r }
	tests := []struct {
		name      string
		cur       reconcile.FindingReviewState
		req       reconcile.ReviewRequest
		wantAudit string
		wantTo    reconcile.ReviewStatus
		wantErr   error
	}{
		{"ack open", st(reconcile.ReviewOpen), req(reconcile.ReviewAcknowledge, "ann", "", 0), "acknowledge", reconcile.ReviewAcknowledged, nil},
		{"ack acknowledged", st(reconcile.ReviewAcknowledged), req(reconcile.ReviewAcknowledge, "ann", "", 0), "", "", reconcile.ErrIllegalReview},
		{"accepted resolves at once", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", "accepted", 3), "resolve", reconcile.ReviewResolved, nil},
		{"false positive resolves at once", st(reconcile.ReviewAcknowledged), req(reconcile.ReviewResolve, "ann", "false_positive", 0), "resolve", reconcile.ReviewResolved, nil},
		{"refunded waits", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", "refunded", 3), "propose", reconcile.ReviewPendingApproval, nil},
		{"adjusted waits", st(reconcile.ReviewAcknowledged), req(reconcile.ReviewResolve, "ann", "adjusted", 0), "propose", reconcile.ReviewPendingApproval, nil},
		{"written off waits", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", "written_off", 0), "propose", reconcile.ReviewPendingApproval, nil},
		// Other spellings of a money-moving resolution still wait for a second person.
		{"WRITTEN_OFF waits", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", "WRITTEN_OFF", 0), "propose", reconcile.ReviewPendingApproval, nil},
		{"written-off waits", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", "written-off", 0), "propose", reconcile.ReviewPendingApproval, nil},
		{"' Refunded ' waits", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", " Refunded ", 0), "propose", reconcile.ReviewPendingApproval, nil},
		{"unknown resolution", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", "paid back", 0), "", "", reconcile.ErrBadReview},
		{"written off without a note", st(reconcile.ReviewOpen), noNote(req(reconcile.ReviewResolve, "ann", "written_off", 0)), "", "", reconcile.ErrBadReview},
		{"adjusted with a blank note", st(reconcile.ReviewOpen), blank(req(reconcile.ReviewResolve, "ann", "adjusted", 0)), "", "", reconcile.ErrBadReview},
		{"the proposer withdraws", pending, req(reconcile.ReviewWithdraw, "ann", "", 0), "withdraw", reconcile.ReviewAcknowledged, nil},
		{"another withdraws", pending, req(reconcile.ReviewWithdraw, "bob", "", 0), "", "", reconcile.ErrBadReview},
		{"withdraw what awaits nothing", st(reconcile.ReviewAcknowledged), req(reconcile.ReviewWithdraw, "ann", "", 0), "", "", reconcile.ErrIllegalReview},
		{"refunded needs no note", st(reconcile.ReviewOpen), noNote(req(reconcile.ReviewResolve, "ann", "refunded", 0)), "propose", reconcile.ReviewPendingApproval, nil},
		{"stale resolve", st(reconcile.ReviewOpen), req(reconcile.ReviewResolve, "ann", "accepted", 2), "", "", reconcile.ErrStaleEvidence},
		{"resolve resolved", st(reconcile.ReviewResolved), req(reconcile.ReviewResolve, "ann", "accepted", 0), "", "", reconcile.ErrIllegalReview},
		{"resolve pending", pending, req(reconcile.ReviewResolve, "bob", "accepted", 0), "", "", reconcile.ErrIllegalReview},
		{"approve by a second person", pending, req(reconcile.ReviewApprove, "bob", "", 3), "approve", reconcile.ReviewResolved, nil},
		{"approve by the proposer", pending, req(reconcile.ReviewApprove, "ann", "", 0), "", "", reconcile.ErrSelfApproval},
		// The rules compare people exactly: folding " ANN " into "ann" is identity.Normalize's
		// job, done by the console and the CLI before a request gets here.
		{"approve by another string", pending, req(reconcile.ReviewApprove, "ann2", "", 0), "approve", reconcile.ReviewResolved, nil},
		{"approve by the proposer naming an old version", pending, req(reconcile.ReviewApprove, "ann", "", 1), "", "", reconcile.ErrSelfApproval},
		{"approve on changed evidence", changed, req(reconcile.ReviewApprove, "bob", "", 0), "", "", reconcile.ErrStaleEvidence},
		{"approve naming an old version", pending, req(reconcile.ReviewApprove, "bob", "", 2), "", "", reconcile.ErrStaleEvidence},
		{"approve open", st(reconcile.ReviewOpen), req(reconcile.ReviewApprove, "bob", "", 0), "", "", reconcile.ErrIllegalReview},
		{"reject pending", pending, req(reconcile.ReviewReject, "bob", "", 0), "reject", reconcile.ReviewAcknowledged, nil},
		{"reject without a note", pending, reconcile.ReviewRequest{Action: reconcile.ReviewReject, Actor: "bob"}, "", "", reconcile.ErrBadReview},
		{"reject resolved", st(reconcile.ReviewResolved), req(reconcile.ReviewReject, "bob", "", 0), "", "", reconcile.ErrIllegalReview},
		{"nobody named", st(reconcile.ReviewOpen), req(reconcile.ReviewAcknowledge, "  ", "", 0), "", "", reconcile.ErrBadReview},
		{"unknown action", st(reconcile.ReviewResolved), req("reopen", "ann", "", 0), "", "", reconcile.ErrBadReview},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := reconcile.DecideReview(tc.cur, tc.req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || d.Audit != tc.wantAudit || d.To != tc.wantTo || d.From != tc.cur.Status {
				t.Fatalf("decision %+v, %v; want %s -> %s", d, err, tc.wantAudit, tc.wantTo)
			}
			// What the store records is the resolution in its one spelling.
			if want, _ := reconcile.ParseResolution(string(tc.req.Resolution)); tc.req.Action == reconcile.ReviewResolve && d.Resolution != want {
				t.Errorf("decision records resolution %q, want %q", d.Resolution, want)
			}
		})
	}
}

// TestAcceptPaymentFitsOnlyAPayment: accept_payment settles a payment held against an order
// (paid after the close, or of another amount) and nothing else; every other resolution
// fits every finding.
func TestAcceptPaymentFitsOnlyAPayment(t *testing.T) {
	t.Parallel()
	for _, kind := range reconcile.MismatchKinds {
		for _, refund := range []bool{false, true} {
			want := !refund && (kind == reconcile.MismatchPaidAfterClose || kind == reconcile.MismatchAmount)
			cur := reconcile.FindingReviewState{ID: 7, Status: reconcile.ReviewAcknowledged, EvidenceVersion: 1, Kind: kind, Refund: refund}
			_, err := reconcile.DecideReview(cur, reconcile.ReviewRequest{Action: reconcile.ReviewResolve, Actor: "ann@example.com",
				Resolution: reconcile.ResolutionAcceptPayment})
			if (err == nil) != want || reconcile.ResolutionAcceptPayment.Fits(kind, refund) != want {
				t.Errorf("accept_payment of %s (refund %v): %v, want allowed %v", kind, refund, err, want)
			}
			if err != nil && (!errors.Is(err, reconcile.ErrBadReview) || !errors.Is(err, reconcile.ErrResolutionDoesNotFit)) {
				t.Errorf("refusal %v is not ErrBadReview and ErrResolutionDoesNotFit", err)
			}
			for _, other := range reconcile.Resolutions {
				if other != reconcile.ResolutionAcceptPayment && !other.Fits(kind, refund) {
					t.Errorf("%s does not fit %s", other, kind)
				}
			}
		}
	}
}

func TestResolutionMovesMoney(t *testing.T) {
	t.Parallel()
	for _, r := range reconcile.Resolutions {
		want := r == "refunded" || r == "adjusted" || r == "written_off" || r == "accept_payment"
		if r.MovesMoney() != want {
			t.Errorf("%s.MovesMoney() = %v", r, !want)
		}
		if got, err := reconcile.ParseResolution(" " + strings.ToUpper(string(r)) + " "); got != r || err != nil {
			t.Errorf("ParseResolution(%s) = %q, %v", r, got, err)
		}
	}
	if got, err := reconcile.ParseResolution("written-off"); got != reconcile.ResolutionWrittenOff || err != nil {
		t.Errorf("written-off: %q %v", got, err)
	}
}

func TestAvailableReviewActions(t *testing.T) {
	t.Parallel()
	pending := reconcile.FindingReviewState{ID: 1, Status: reconcile.ReviewPendingApproval, EvidenceVersion: 2, ProposedBy: "ann", ProposedVersion: 2}
	stale := pending
	stale.EvidenceVersion = 3
	for _, tc := range []struct {
		name  string
		cur   reconcile.FindingReviewState
		actor string
		want  string
	}{
		{"open", reconcile.FindingReviewState{Status: reconcile.ReviewOpen, EvidenceVersion: 1}, "bob", "[acknowledge resolve]"},
		{"acknowledged", reconcile.FindingReviewState{Status: reconcile.ReviewAcknowledged, EvidenceVersion: 1}, "bob", "[resolve]"},
		{"pending, a second person", pending, "bob", "[approve reject]"},
		{"pending, the proposer", pending, "ann", "[reject withdraw]"},
		{"pending on changed evidence", stale, "bob", "[reject]"},
		{"resolved", reconcile.FindingReviewState{Status: reconcile.ReviewResolved, EvidenceVersion: 1}, "bob", "[]"},
		{"nobody", reconcile.FindingReviewState{Status: reconcile.ReviewOpen, EvidenceVersion: 1}, "", "[]"},
	} {
		if got := fmt.Sprint(reconcile.AvailableReviewActions(tc.cur, tc.actor)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
