package reconcile_test

import (
	"errors"
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

func TestNextReviewStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action  reconcile.ReviewAction
		from    reconcile.ReviewStatus
		want    reconcile.ReviewStatus
		allowed []reconcile.ReviewStatus // set when the move is illegal
	}{
		{reconcile.ReviewAcknowledge, reconcile.ReviewOpen, reconcile.ReviewAcknowledged, nil},
		{reconcile.ReviewAcknowledge, reconcile.ReviewAcknowledged, "", []reconcile.ReviewStatus{reconcile.ReviewOpen}},
		{reconcile.ReviewAcknowledge, reconcile.ReviewResolved, "", []reconcile.ReviewStatus{reconcile.ReviewOpen}},
		{reconcile.ReviewResolve, reconcile.ReviewOpen, reconcile.ReviewResolved, nil},
		{reconcile.ReviewResolve, reconcile.ReviewAcknowledged, reconcile.ReviewResolved, nil},
		{reconcile.ReviewResolve, reconcile.ReviewResolved, "", []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewAcknowledged}},
	} {
		got, err := reconcile.NextReviewStatus(7, tc.action, tc.from)
		if tc.allowed == nil {
			if err != nil || got != tc.want {
				t.Errorf("%s from %s = %q, %v; want %q", tc.action, tc.from, got, err, tc.want)
			}
			continue
		}
		var te *reconcile.ReviewTransitionError
		if !errors.Is(err, reconcile.ErrIllegalReview) || !errors.As(err, &te) {
			t.Fatalf("%s from %s: err %v, want a *ReviewTransitionError", tc.action, tc.from, err)
		}
		if te.ID != 7 || te.Current != tc.from || te.Action != string(tc.action) || len(te.Allowed) != len(tc.allowed) {
			t.Errorf("%s from %s: %+v", tc.action, tc.from, te)
		}
	}
	if _, err := reconcile.NextReviewStatus(7, "reopen", reconcile.ReviewResolved); err == nil || errors.Is(err, reconcile.ErrIllegalReview) {
		t.Errorf("an unknown action must be a plain error, got %v", err)
	}
}
