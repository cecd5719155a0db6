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
	ReviewResolved     ReviewStatus = "RESOLVED"
)

// ReviewStatuses lists every review status in workflow order.
var ReviewStatuses = []ReviewStatus{ReviewOpen, ReviewAcknowledged, ReviewResolved}

// ParseReviewStatus accepts a review status in any letter case.
func ParseReviewStatus(s string) (ReviewStatus, error) {
	up := ReviewStatus(strings.ToUpper(strings.TrimSpace(s)))
	for _, st := range ReviewStatuses {
		if up == st {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown review status %q (want OPEN, ACKNOWLEDGED or RESOLVED)", s)
}

// MismatchKinds lists every reconcile_mismatches.kind.
var MismatchKinds = []MismatchKind{
	MismatchAmount, MismatchCurrency, MismatchMerchant,
	MismatchUnknownOrder, MismatchPaidAfterClose, MismatchDuplicatePayment,
	MismatchLocalPaidPlatformNot, MismatchRefundedAtPlatform,
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

// ErrIllegalReview is the sentinel every *ReviewTransitionError matches with errors.Is.
var ErrIllegalReview = errors.New("illegal review transition")

// ReviewTransitionError is a review move the finding's current status does not allow: an
// acknowledgement of a finding that is no longer OPEN, a resolve of a RESOLVED one, or the
// loser of two reviewers racing on the same finding.
type ReviewTransitionError struct {
	ID      int64
	Action  string // "acknowledge" or "resolve"
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

// ReviewAction is a reviewer's move on a finding; its name is also the audit row's action.
type ReviewAction string

const (
	ReviewAcknowledge ReviewAction = "acknowledge"
	ReviewResolve     ReviewAction = "resolve"
)

// ReviewRule is one legal move: the statuses it may start from and the status it ends in.
type ReviewRule struct {
	From []ReviewStatus
	To   ReviewStatus
}

// ReviewMoves is the review state machine. A RESOLVED finding leaves it only when the apply
// path reopens it on new evidence, which no reviewer can do.
var ReviewMoves = map[ReviewAction]ReviewRule{
	ReviewAcknowledge: {From: []ReviewStatus{ReviewOpen}, To: ReviewAcknowledged},
	ReviewResolve:     {From: []ReviewStatus{ReviewOpen, ReviewAcknowledged}, To: ReviewResolved},
}

// NextReviewStatus is where the action takes finding id from status current, or a
// *ReviewTransitionError when the state machine forbids it.
func NextReviewStatus(id int64, action ReviewAction, current ReviewStatus) (ReviewStatus, error) {
	rule, ok := ReviewMoves[action]
	if !ok {
		return "", fmt.Errorf("mismatch %d: unknown review action %q", id, action)
	}
	for _, from := range rule.From {
		if from == current {
			return rule.To, nil
		}
	}
	return "", &ReviewTransitionError{ID: id, Action: string(action), Current: current, Allowed: rule.From}
}

// AtStakeMinor is the money a finding puts in question, in minor units: the difference for
// an amount mismatch, the local amount for an order paid locally but not at the platform,
// and otherwise the amount the platform reports moved (the local amount when it named none).
// Nil amounts are unknown and count as zero. It is never negative.
func AtStakeMinor(kind MismatchKind, localMinor, platformMinor *int64) int64 {
	l, p := orZero(localMinor), orZero(platformMinor)
	switch kind {
	case MismatchAmount:
		if p > l {
			return p - l
		}
		return l - p
	case MismatchLocalPaidPlatformNot:
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
