package console

import (
	"testing"

	"github.com/payrecon/payrecon/reconcile"
)

// TestEveryLabelInBothLanguages: a word added in English only would show its key to a
// Chinese reader (and the reverse).
func TestEveryLabelInBothLanguages(t *testing.T) {
	for _, table := range []map[string]map[string]string{labels, names} {
		for key := range table["en"] {
			if table["zh"][key] == "" {
				t.Errorf("%q has no Chinese label", key)
			}
		}
		for key := range table["zh"] {
			if table["en"][key] == "" {
				t.Errorf("%q has no English label", key)
			}
		}
	}
	// Every word of the database a page shows has a label in both, from here or render.
	var words []string
	for _, k := range reconcile.MismatchKinds {
		words = append(words, string(k))
	}
	for _, s := range reconcile.ReviewStatuses {
		words = append(words, string(s))
	}
	for _, r := range reconcile.Resolutions {
		words = append(words, string(r))
	}
	words = append(words, reconcile.AuditAcknowledge, reconcile.AuditResolve, reconcile.AuditPropose, reconcile.AuditApprove,
		reconcile.AuditReject, reconcile.AuditReopen, "alipay", "wechatpay", "PENDING", "PAID", "CLOSED", "FAILED", "REFUNDED",
		"notify", "reconcile", "backfill", "statement")
	for _, w := range words {
		for _, lang := range []string{"en", "zh"} {
			if name(lang, w) == w {
				t.Errorf("%s: %q has no label", lang, w)
			}
		}
	}
}

func TestYuan(t *testing.T) {
	for minor, want := range map[int64]string{0: "¥0.00", 5: "¥0.05", 123456: "¥1,234.56", 100000000: "¥1,000,000.00", -123456: "-¥1,234.56"} {
		if got := yuan(minor); got != want {
			t.Errorf("yuan(%d) = %q, want %q", minor, got, want)
		}
	}
}

func TestMatchPerson(t *testing.T) {
	list := []string{"ann@example.com", "*@finance.example.com"}
	for email, want := range map[string]bool{
		"ann@example.com": true, "ANN@Example.com": true, "bob@finance.example.com": true,
		"bob@example.com": false, "@finance.example.com": false, "bob@evilfinance.example.com": false,
		"bob@finance.example.com.evil": false,
	} {
		if got := matchPerson(list, email); got != want {
			t.Errorf("matchPerson(%q) = %v, want %v", email, got, want)
		}
	}
}
