package worker

import (
	"errors"
	"testing"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
)

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
