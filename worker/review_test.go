package worker

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
		{"ack", "ack", ReviewRequest{By: " ann ", Version: 3}, ""},
		{"no reviewer", "ack", ReviewRequest{By: "  "}, "--by is required"},
		{"negative version", "approve", ReviewRequest{By: "ann", Version: -1}, "--version"},
		{"resolve without resolution", "resolve", ReviewRequest{By: "ann"}, "--resolution is required"},
		{"resolve with a bad resolution", "resolve", ReviewRequest{By: "ann", Resolution: "shrug"}, "--resolution"},
		{"resolve", "resolve", ReviewRequest{By: "ann", Resolution: "refunded"}, ""},
		{"reject without a note", "reject", ReviewRequest{By: "ann"}, "--note is required"},
		{"reject", "reject", ReviewRequest{By: "ann", Note: "wrong order"}, ""},
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
		if err != nil || in.By != "ann" || in.OSUser == "" || in.Version != tc.req.Version || in.Note != tc.req.Note {
			t.Errorf("%s: %+v, %v", tc.name, in, err)
		}
		if tc.move == "resolve" && in.Resolution != reconcile.ResolutionRefunded {
			t.Errorf("%s: resolution %q", tc.name, in.Resolution)
		}
	}
}

// TestStatementAccountsSelection: a downloaded file needs its account named; a selection
// that matches no configured account (here: none has a private key) is bad usage.
func TestStatementAccountsSelection(t *testing.T) {
	a := &App{cfg: config.Config{Accounts: config.Accounts{Alipay: []config.AlipayAccount{{AppID: "2021"}}}}}
	accts, err := a.StatementAccounts(StatementSelection{Platform: "alipay", Merchant: "2021", File: "bill.zip"})
	if err != nil || len(accts) != 1 || accts[0].Key != (reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: "2021"}) {
		t.Fatalf("--file: %+v, %v", accts, err)
	}
	for _, sel := range []StatementSelection{
		{Platform: "paypal"},
		{File: "bill.zip", Platform: "alipay"},
		{Platform: "alipay"},
	} {
		var ie *reconcile.InputError
		if _, err := a.StatementAccounts(sel); !errors.As(err, &ie) {
			t.Errorf("%+v: error %v, want an InputError", sel, err)
		}
	}
}
