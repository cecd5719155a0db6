package console

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
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
	for _, s := range reconcile.RefundStatuses {
		words = append(words, string(s))
	}
	words = append(words, string(reconcile.EventRefundSuccess), string(reconcile.EventRefundClosed), string(reconcile.EventRefundAbnormal))
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

// TestEveryLabelKeyThePagesUseExists: a key a template or handler asks for that no table
// has would show the raw key to finance; the pages' own words come from labels, the shared
// column and domain words from render's table.
func TestEveryLabelKeyThePagesUseExists(t *testing.T) {
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	own := regexp.MustCompile(`(?:\.T |text\([a-zA-Z.]+, )"([a-z_]+)"`)
	shared := regexp.MustCompile(`\.L "([a-z_.]+)"`)
	var asked, sharedAsked int
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range own.FindAllStringSubmatch(string(src), -1) {
			asked++
			if _, ok := labels["en"][m[1]]; !ok {
				t.Errorf("%s asks for label %q, which the console's table lacks", f, m[1])
			}
		}
		for _, m := range shared.FindAllStringSubmatch(string(src), -1) {
			sharedAsked++
			if render.Label(render.LangEN, m[1]) == m[1] {
				t.Errorf("%s asks render for label %q, which its table lacks", f, m[1])
			}
		}
	}
	// The scan itself must find the pages' words, or it proves nothing.
	if asked < 50 || sharedAsked < 5 {
		t.Fatalf("found %d console and %d render label keys in the sources: the patterns no longer match the templates", asked, sharedAsked)
	}
}
