package reconcile

import (
	"fmt"
	"slices"
	"strings"
)

// Resolution is what finance decided about a finding (reconcile_mismatches.resolution).
type Resolution string

const (
	ResolutionRefunded   Resolution = "refunded"    // money went back to the buyer
	ResolutionAdjusted   Resolution = "adjusted"    // the books or the order were corrected
	ResolutionWrittenOff Resolution = "written_off" // the difference is absorbed as a loss
	// ResolutionAcceptPayment takes a payment the merchant keeps into the books: once
	// approved, the database moves the order to PAID (migration 0017).
	ResolutionAcceptPayment Resolution = "accept_payment"
	ResolutionAccepted      Resolution = "accepted"       // the difference is explained and fine as it is
	ResolutionFalsePositive Resolution = "false_positive" // there was nothing wrong
)

// Resolutions lists every resolution, the money-moving ones first.
var Resolutions = []Resolution{ResolutionRefunded, ResolutionAdjusted, ResolutionWrittenOff,
	ResolutionAcceptPayment, ResolutionAccepted, ResolutionFalsePositive}

// MovesMoney says whether the resolution moves money and so needs a second person's
// approval (maker-checker).
func (r Resolution) MovesMoney() bool {
	switch r {
	case ResolutionRefunded, ResolutionAdjusted, ResolutionWrittenOff, ResolutionAcceptPayment:
		return true
	}
	return false
}

// ForKinds are the findings the resolution may settle; nil means any. Taking a payment in
// fits only a payment the platform holds against an order that is not paid by it: one paid
// after the close, or one whose amount differs and the merchant accepts. A refund's
// finding never fits it.
func (r Resolution) ForKinds() []MismatchKind {
	if r == ResolutionAcceptPayment {
		return []MismatchKind{MismatchPaidAfterClose, MismatchAmount}
	}
	return nil
}

// Fits says whether the resolution may settle a finding of this kind (refund: the finding is
// about a refund, not the payment).
func (r Resolution) Fits(kind MismatchKind, refund bool) bool {
	kinds := r.ForKinds()
	return kinds == nil || (!refund && slices.Contains(kinds, kind))
}

// NeedsNote says whether the resolution must say why: an adjustment or a write-off is a
// decision about money someone will ask about at the month's close.
func (r Resolution) NeedsNote() bool {
	return r == ResolutionAdjusted || r == ResolutionWrittenOff
}

// ParseResolution accepts a resolution in any letter case ("written-off" too).
func ParseResolution(s string) (Resolution, error) {
	v := Resolution(strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_"))
	for _, r := range Resolutions {
		if v == r {
			return r, nil
		}
	}
	names := make([]string, len(Resolutions))
	for i, r := range Resolutions {
		names[i] = string(r)
	}
	return "", fmt.Errorf("%w: unknown resolution %q (want one of %s)", ErrBadReview, s, strings.Join(names, ", "))
}

// ReviewAction is a reviewer's move on a finding.
type ReviewAction string

const (
	ReviewAcknowledge ReviewAction = "acknowledge"
	// ReviewResolve resolves with one person, or, for a money-moving resolution, proposes it.
	ReviewResolve ReviewAction = "resolve"
	ReviewApprove ReviewAction = "approve"
	ReviewReject  ReviewAction = "reject"
	// ReviewWithdraw is the proposer taking their own proposal back (to ACKNOWLEDGED).
	ReviewWithdraw ReviewAction = "withdraw"
)

// Audit actions: the reviewer's move as recorded. A money-moving resolve is a "propose";
// "reopen" is written by the database when new evidence reopens a RESOLVED finding.
const (
	AuditAcknowledge = "acknowledge"
	AuditResolve     = "resolve"
	AuditPropose     = "propose"
	AuditApprove     = "approve"
	AuditReject      = "reject"
	AuditReopen      = "reopen"
	AuditWithdraw    = "withdraw"
)

// ReviewMoves is the review state machine: the statuses each action may start from. Where
// it ends is DecideReview's business (a resolve ends RESOLVED or PENDING_APPROVAL by the
// money rule). A RESOLVED finding leaves it only when new evidence reopens it, which no
// reviewer can do.
var ReviewMoves = map[ReviewAction][]ReviewStatus{
	ReviewAcknowledge: {ReviewOpen},
	ReviewResolve:     {ReviewOpen, ReviewAcknowledged},
	ReviewApprove:     {ReviewPendingApproval},
	ReviewReject:      {ReviewPendingApproval},
	ReviewWithdraw:    {ReviewPendingApproval},
}

// FindingReviewState is what the state machine needs to know about a finding.
type FindingReviewState struct {
	ID              int64
	Status          ReviewStatus
	EvidenceVersion int64
	ProposedBy      string // the maker of a pending proposal
	ProposedVersion int64  // the evidence version the proposal was made on
	Kind            MismatchKind
	Refund          bool // the finding is about a refund (out_refund_no set)
}

// ReviewRequest is one reviewer's move as a console or the CLI asks for it.
type ReviewRequest struct {
	Action     ReviewAction
	Actor      string     // the person (required), normalised by the caller (identity.Normalize)
	Resolution Resolution // resolve only
	Note       string     // required for reject: the reason goes back to the proposer
	// SeenVersion is the evidence version the reviewer read; 0 means "not named" (the CLI
	// without --version), which takes the current one for a resolve and the proposal's for
	// an approval.
	SeenVersion int64
}

// ReviewDecision is a legal move: the audit action, where the finding goes.
type ReviewDecision struct {
	Audit    string
	From, To ReviewStatus
	// Resolution is the resolution a resolve or propose records, in its one spelling
	// (ParseResolution's): what the store writes, and what maker-checker was decided on.
	Resolution Resolution
}

// DecideReview applies the review rules: the state machine, the evidence version, and
// maker-checker. Errors are *ReviewTransitionError, *StaleEvidenceError, or wrap
// ErrSelfApproval or ErrBadReview.
func DecideReview(cur FindingReviewState, req ReviewRequest) (ReviewDecision, error) {
	if strings.TrimSpace(req.Actor) == "" {
		return ReviewDecision{}, fmt.Errorf("%w: mismatch %d: the reviewer must be named", ErrBadReview, cur.ID)
	}
	from, ok := ReviewMoves[req.Action]
	if !ok {
		return ReviewDecision{}, fmt.Errorf("%w: mismatch %d: unknown review action %q", ErrBadReview, cur.ID, req.Action)
	}
	legal := false
	for _, s := range from {
		legal = legal || s == cur.Status
	}
	if !legal {
		return ReviewDecision{}, &ReviewTransitionError{ID: cur.ID, Action: string(req.Action), Current: cur.Status, Allowed: from}
	}
	d := ReviewDecision{From: cur.Status}
	switch req.Action {
	case ReviewAcknowledge:
		d.Audit, d.To = AuditAcknowledge, ReviewAcknowledged
	case ReviewResolve:
		res, err := ParseResolution(string(req.Resolution))
		if err != nil {
			return ReviewDecision{}, fmt.Errorf("mismatch %d: %w", cur.ID, err)
		}
		if !res.Fits(cur.Kind, cur.Refund) {
			return ReviewDecision{}, fmt.Errorf("%w: mismatch %d: %s settles only a payment finding of kind %s, not %s (%w)",
				ErrBadReview, cur.ID, res, joinKinds(res.ForKinds()), cur.describeKind(), ErrResolutionDoesNotFit)
		}
		if res.NeedsNote() && strings.TrimSpace(req.Note) == "" {
			return ReviewDecision{}, fmt.Errorf("%w: mismatch %d: %s needs a note saying why", ErrBadReview, cur.ID, res)
		}
		// Decided on the parsed resolution: "WRITTEN_OFF" moves money as "written_off" does.
		d.Audit, d.To, d.Resolution = AuditResolve, ReviewResolved, res
		if res.MovesMoney() {
			d.Audit, d.To = AuditPropose, ReviewPendingApproval
		}
	case ReviewApprove:
		// Exact: the console and the CLI pass people in identity.Normalize's one spelling
		// (case folded, invisible characters out) and store them so, and the database's
		// review functions compare the same way. Folding here as well would hide a caller
		// that forgot.
		if req.Actor == cur.ProposedBy {
			return ReviewDecision{}, fmt.Errorf("mismatch %d: %w (%s proposed it; a second person must approve)", cur.ID, ErrSelfApproval, cur.ProposedBy)
		}
		// The checker approves what the maker saw: evidence that changed since the proposal
		// is refused even when the checker has read the new version.
		if cur.ProposedVersion != cur.EvidenceVersion {
			return ReviewDecision{}, &StaleEvidenceError{ID: cur.ID, Seen: cur.ProposedVersion, Current: cur.EvidenceVersion}
		}
		d.Audit, d.To = AuditApprove, ReviewResolved
	case ReviewWithdraw:
		if req.Actor != cur.ProposedBy {
			return ReviewDecision{}, fmt.Errorf("%w: mismatch %d: only its proposer (%s) may withdraw a proposal", ErrBadReview, cur.ID, cur.ProposedBy)
		}
		d.Audit, d.To = AuditWithdraw, ReviewAcknowledged
	case ReviewReject:
		if strings.TrimSpace(req.Note) == "" {
			return ReviewDecision{}, fmt.Errorf("%w: mismatch %d: a rejection needs a note saying why", ErrBadReview, cur.ID)
		}
		d.Audit, d.To = AuditReject, ReviewAcknowledged
	}
	// Last, so that a refusal for who you are (the proposer approving) is not hidden
	// behind one for what you read.
	if req.SeenVersion != 0 && req.SeenVersion != cur.EvidenceVersion {
		return ReviewDecision{}, &StaleEvidenceError{ID: cur.ID, Seen: req.SeenVersion, Current: cur.EvidenceVersion}
	}
	return d, nil
}

// AvailableReviewActions are the moves actor may take on the finding now, in workflow
// order: what a console offers as buttons (the server still decides each post with
// DecideReview). The proposer is not offered approve.
func AvailableReviewActions(cur FindingReviewState, actor string) []ReviewAction {
	var out []ReviewAction
	for _, a := range []ReviewAction{ReviewAcknowledge, ReviewResolve, ReviewApprove, ReviewReject, ReviewWithdraw} {
		req := ReviewRequest{Action: a, Actor: actor, Resolution: ResolutionAccepted, Note: "-"}
		if _, err := DecideReview(cur, req); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// AtStakeMinor is the money a finding puts in question, in minor units: the difference for
// an amount mismatch (of a payment or a refund), the local amount where our books moved
// money the platform did not (paid here but not there, a refund the platform does not have,
// a refund beyond what was paid), and otherwise the amount the platform reports moved (the
// local amount when it named none).
// Nil amounts are unknown and count as zero. It is never negative. The report's SQL sums
// the same rule (repo/postgres's atStakeSQL); a test holds them equal.
func AtStakeMinor(kind MismatchKind, localMinor, platformMinor *int64) int64 {
	l, p := orZero(localMinor), orZero(platformMinor)
	switch kind {
	case MismatchAmount, MismatchRefundAmount:
		if p > l {
			return p - l
		}
		return l - p
	case MismatchLocalPaidPlatformNot, MismatchRefundNotAtPlatform, MismatchOverRefunded:
		// Money our books moved that the platform did not (or may not) move.
		return l
	}
	if platformMinor != nil {
		return p
	}
	return l
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func joinKinds(kinds []MismatchKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, " or ")
}

func (cur FindingReviewState) describeKind() string {
	if cur.Refund {
		return "a refund's " + string(cur.Kind)
	}
	return string(cur.Kind)
}
