package worker

import (
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statementrun"
)

// StatementSelection is which accounts a statement run covers, as the statement command's
// flags give it: Platform and Merchant narrow the configured accounts; File, with both of
// them, reconciles that downloaded bill instead; Keep is where downloaded bills are kept.
type StatementSelection struct {
	Platform, Merchant, File, Keep string
}

// StatementAccounts picks the accounts to reconcile and where each one's bill comes from.
// A selection that names no usable account is a reconcile.InputError.
func (a *App) StatementAccounts(sel StatementSelection) ([]statementrun.Account, error) {
	if sel.Platform != "" {
		if _, err := reconcile.ParsePlatform(sel.Platform); err != nil {
			return nil, reconcile.Inputf("--platform: %v", err)
		}
	}
	if sel.File != "" {
		if sel.Platform == "" || sel.Merchant == "" {
			return nil, reconcile.Inputf("statement: --file needs --platform and --merchant (the account the bill belongs to)")
		}
		p := reconcile.Platform(sel.Platform)
		return []statementrun.Account{{Key: reconcile.AccountKey{Platform: p, MerchantID: sel.Merchant},
			Source: statementrun.FileSource{Platform: p, Path: sel.File}}}, nil
	}
	all, err := a.BillAccounts(sel.Keep)
	if err != nil {
		return nil, err
	}
	var out []statementrun.Account
	for _, acct := range all {
		k := acct.Key
		if (sel.Platform == "" || string(k.Platform) == sel.Platform) && (sel.Merchant == "" || k.MerchantID == sel.Merchant) {
			out = append(out, acct)
		}
	}
	if len(out) == 0 {
		return nil, reconcile.Inputf("statement: no configured account matches --platform %q --merchant %q", sel.Platform, sel.Merchant)
	}
	return out, nil
}
