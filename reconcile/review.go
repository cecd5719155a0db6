package reconcile

import (
	"errors"
	"fmt"
	"strings"
)

// ReviewStatus is reconcile_mismatches.review_status: where finance is with a finding.
type ReviewStatus string

const (
	ReviewOpen         ReviewStatus = "OPEN"
	ReviewAcknowledged ReviewStatus = "ACKNOWLEDGED"
	// ReviewPendingApproval is a money-moving resolution proposed by one person and waiting
	// for a second (maker-checker).
	ReviewPendingApproval ReviewStatus = "PENDING_APPROVAL"
	ReviewResolved        ReviewStatus = "RESOLVED"
)

// ReviewStatuses lists every review status in workflow order.
var ReviewStatuses = []ReviewStatus{ReviewOpen, ReviewAcknowledged, ReviewPendingApproval, ReviewResolved}

// ParseReviewStatus accepts a review status in any letter case.
func ParseReviewStatus(s string) (ReviewStatus, error) {
	up := ReviewStatus(strings.ToUpper(strings.TrimSpace(s)))
	for _, st := range ReviewStatuses {
		if up == st {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown review status %q (want OPEN, ACKNOWLEDGED, PENDING_APPROVAL or RESOLVED)", s)
}

// MismatchKinds lists every reconcile_mismatches.kind.
var MismatchKinds = []MismatchKind{
	MismatchAmount, MismatchCurrency, MismatchMerchant,
	MismatchUnknownOrder, MismatchPaidAfterClose, MismatchDuplicatePayment,
	MismatchLocalPaidPlatformNot, MismatchRefundedAtPlatform,
	MismatchUnknownRefund, MismatchRefundAmount, MismatchOverRefunded, MismatchRefundAbnormal, MismatchRefundNotAtPlatform,
}

// ParseMismatchKind accepts a finding kind in any letter case.
func ParseMismatchKind(s string) (MismatchKind, error) {
	up := MismatchKind(strings.ToUpper(strings.TrimSpace(s)))
	for _, k := range MismatchKinds {
		if up == k {
			return k, nil
		}
	}
	names := make([]string, len(MismatchKinds))
	for i, k := range MismatchKinds {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown mismatch kind %q (want one of %s)", s, strings.Join(names, ", "))
}

// Review errors callers branch on (the CLI maps them to exit codes, the console to pages).
var (
	// ErrIllegalReview: the finding's status does not allow the move (or another reviewer
	// moved it first).
	ErrIllegalReview = errors.New("illegal review transition")
	// ErrStaleEvidence: the finding's evidence changed since the version the reviewer read.
	ErrStaleEvidence = errors.New("evidence changed, look again")
	// ErrSelfApproval: the proposer of a money-moving resolution tried to approve it.
	ErrSelfApproval = errors.New("the proposer cannot approve their own resolution")
	// ErrBadReview: the request itself is incomplete (no reviewer, no resolution, unknown
	// resolution, a rejection without a reason).
	ErrBadReview = errors.New("invalid review request")
	// ErrResolutionDoesNotFit: the resolution cannot settle a finding of this kind
	// (accept_payment for anything but a payment paid after the close or of another
	// amount). It comes wrapped with ErrBadReview.
	ErrResolutionDoesNotFit = errors.New("the resolution does not fit this finding")
)

// ReviewTransitionError is a review move the finding's current status does not allow: an
// acknowledgement of a finding that is no longer OPEN, a resolve of a RESOLVED one, or the
// loser of two reviewers racing on the same finding.
type ReviewTransitionError struct {
	ID      int64
	Action  string
	Current ReviewStatus
	Allowed []ReviewStatus
}

func (e *ReviewTransitionError) Error() string {
	allowed := make([]string, len(e.Allowed))
	for i, s := range e.Allowed {
		allowed[i] = string(s)
	}
	return fmt.Sprintf("mismatch %d is %s: cannot %s it (only from %s)", e.ID, e.Current, e.Action, strings.Join(allowed, " or "))
}

// Is makes errors.Is(err, ErrIllegalReview) hold.
func (e *ReviewTransitionError) Is(target error) bool { return target == ErrIllegalReview }

// StaleEvidenceError is a move that named an evidence version other than the current one.
type StaleEvidenceError struct {
	ID      int64
	Seen    int64 // the version the reviewer read (or the proposal was made on)
	Current int64
}

func (e *StaleEvidenceError) Error() string {
	return fmt.Sprintf("mismatch %d: evidence changed, look again (you saw version %d, it is now version %d)", e.ID, e.Seen, e.Current)
}

// Is makes errors.Is(err, ErrStaleEvidence) hold.
func (e *StaleEvidenceError) Is(target error) bool { return target == ErrStaleEvidence }
