package input

import (
	"errors"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
)

func TestReviewInput(t *testing.T) {
	tests := []struct {
		name, move string
		req        ReviewRequest
		wantErr    string // empty: accepted
	}{
		{"ack", "ack", ReviewRequest{By: " ann@example.com ", Version: 3}, ""},
		{"no reviewer", "ack", ReviewRequest{By: "  "}, "--by is required"},
		{"negative version", "approve", ReviewRequest{By: "ann@example.com", Version: -1}, "--version"},
		{"resolve without resolution", "resolve", ReviewRequest{By: "ann@example.com"}, "--resolution is required"},
		{"resolve with a bad resolution", "resolve", ReviewRequest{By: "ann@example.com", Resolution: "shrug"}, "--resolution"},
		{"resolve", "resolve", ReviewRequest{By: "ann@example.com", Resolution: "refunded"}, ""},
		{"reject without a note", "reject", ReviewRequest{By: "ann@example.com"}, "--note is required"},
		{"reject", "reject", ReviewRequest{By: "ann@example.com", Note: "wrong order"}, ""},
	}
	for _, tc := range tests {
		in, err := ReviewInput(tc.move, tc.req)
		var ie *reconcile.InputError
		if tc.wantErr != "" {
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want an InputError naming %s", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || in.By != "ann@example.com" || in.OSUser == "" || in.Version != tc.req.Version || in.Note != tc.req.Note {
			t.Errorf("%s: %+v, %v", tc.name, in, err)
		}
		if tc.move == "resolve" && in.Resolution != reconcile.ResolutionRefunded {
			t.Errorf("%s: resolution %q", tc.name, in.Resolution)
		}
	}
}

// TestReviewInputNormalisesTheReviewer: --by is recorded in identity.Normalize's spelling, so
// what is stored and compared with the proposer is one string per person; what is no
// address is bad usage naming --by.
func TestReviewInputNormalisesTheReviewer(t *testing.T) {
	for _, tc := range []struct {
		by, want string // want "": refused
	}{
		{"ALICE@Example.com", "alice@example.com"},
		{"alice@example.com\u200b", "alice@example.com"},
		{"\u200dalice@example.com", "alice@example.com"},
		{"ＡＬＩＣＥ@example.com", "alice@example.com"},
		{"\ufeff\u202ealice@example.com", "alice@example.com"},
		{"\u0430lice@example.com", "\u0430lice@example.com"}, // Cyrillic а: another person
		{"alice", ""},
		{"alice@example.com.", ""},
		{"eve@evil.com@approvers.example.com", ""},
		{"alice@ex\u0430mple.com", ""},
	} {
		in, err := ReviewInput("ack", ReviewRequest{By: tc.by})
		var ie *reconcile.InputError
		switch {
		case tc.want == "" && (!errors.As(err, &ie) || !strings.Contains(err.Error(), "--by")):
			t.Errorf("--by %+q: %+v, %v; want an InputError naming --by", tc.by, in, err)
		case tc.want != "" && (err != nil || in.By != tc.want):
			t.Errorf("--by %+q: By %+q, %v; want %+q", tc.by, in.By, err, tc.want)
		}
	}
}

// TestReviewInputHoldsTheLists: once RECONCILER_REVIEWERS or RECONCILER_APPROVERS is set,
// every move needs someone on either list, approve and reject need an approver (when that
// list is set), and a look-alike of a listed person is not on the list.
func TestReviewInputHoldsTheLists(t *testing.T) {
	reviewers := []string{"ann@example.com", "bob@example.com"}
	approvers := []string{"cfo@example.com", "*@approvers.example.com"}
	tests := []struct {
		name, move, by       string
		reviewers, approvers []string
		wantErr              string // empty: allowed
	}{
		{"no lists: anyone", "approve", "zed@example.com", nil, nil, ""},
		{"reviewer acknowledges", "ack", "ann@example.com", reviewers, approvers, ""},
		{"reviewer in another spelling", "resolve", "ANN@example.com\u200b", reviewers, approvers, ""},
		{"approver acknowledges", "ack", "cfo@example.com", reviewers, approvers, ""},
		{"domain approver approves", "approve", "kim@approvers.example.com", reviewers, approvers, ""},
		{"approver rejects", "reject", "cfo@example.com", reviewers, approvers, ""},
		{"not listed", "ack", "zed@example.com", reviewers, approvers, "neither RECONCILER_REVIEWERS nor RECONCILER_APPROVERS"},
		{"reviewer approves", "approve", "ann@example.com", reviewers, approvers, "not on RECONCILER_APPROVERS"},
		{"reviewer rejects", "reject", "bob@example.com", reviewers, approvers, "not on RECONCILER_APPROVERS"},
		{"Cyrillic с approves", "approve", "\u0441fo@example.com", reviewers, approvers, `"\u0441fo@example.com" is not on RECONCILER_APPROVERS`},
		{"subdomain of the approvers' domain", "approve", "eve@x.approvers.example.com", reviewers, approvers, "not on RECONCILER_APPROVERS"},
		{"only reviewers set: a reviewer approves", "approve", "ann@example.com", reviewers, nil, ""},
		{"only reviewers set: an approver-to-be is not listed", "approve", "cfo@example.com", reviewers, nil, "neither"},
		{"only approvers set: a reviewer-to-be is not listed", "ack", "ann@example.com", nil, approvers, "neither"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReviewInput(tc.move, ReviewRequest{By: tc.by, Note: "n", Resolution: "accepted", Reviewers: tc.reviewers, Approvers: tc.approvers})
			var ie *reconcile.InputError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (!errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want an InputError saying %s", err, tc.wantErr)
			}
		})
	}
	_, err := ReviewInput("ack", ReviewRequest{By: "ann@example.com", Approvers: []string{"*@evil.com@approvers.example.com"}})
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Setting != "RECONCILER_APPROVERS" || !strings.Contains(err.Error(), "evil.com@approvers") {
		t.Errorf("a bad list entry: %v, want a config error naming RECONCILER_APPROVERS and the entry", err)
	}
}
