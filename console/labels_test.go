package console

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// TestEveryDatabaseWordHasALabel: every word of the database a page shows reads as a word
// in both languages, not as its code (render's TestEveryLabelInBothLanguages holds the table
// itself whole).
func TestEveryDatabaseWordHasALabel(t *testing.T) {
	var words []string
	for _, k := range reconcile.MismatchKinds {
		words = append(words, string(k))
	}
	for _, s := range reconcile.ReviewStatuses {
		words = append(words, string(s))
	}
	for _, r := range reconcile.LineResults {
		if !render.HasLabel("line." + string(r)) {
			t.Errorf("line result %s has no line.%s label", r, r)
		}
	}
	for _, k := range []reconcile.BillLineKind{reconcile.BillPayment, reconcile.BillRefund} {
		if !render.HasLabel("line_kind." + string(k)) {
			t.Errorf("line kind %s has no label", k)
		}
	}
	for _, r := range reconcile.Resolutions {
		words = append(words, string(r))
		// The resolve form says what each resolution will and will not do.
		if !render.HasLabel("does." + string(r)) {
			t.Errorf("resolution %s has no does.%s label for the resolve form", r, r)
		}
	}
	for _, lang := range []string{"en", "zh"} {
		for _, a := range []string{reconcile.AuditAcknowledge, reconcile.AuditResolve, reconcile.AuditPropose, reconcile.AuditApprove,
			reconcile.AuditReject, reconcile.AuditReopen} {
			if !render.HasLabel("audit."+a) || auditName(lang, a) == a {
				t.Errorf("%s: audit action %q has no label of its own", lang, a)
			}
		}
	}
	words = append(words, "alipay", "wechatpay", "PENDING", "PAID", "CLOSED", "FAILED", "REFUNDED",
		"notify", "reconcile", "backfill", "statement")
	for _, s := range reconcile.RefundStatuses {
		words = append(words, string(s))
	}
	words = append(words, string(reconcile.EventRefundSuccess), string(reconcile.EventRefundClosed), string(reconcile.EventRefundAbnormal))
	for _, w := range words {
		for _, lang := range []string{"en", "zh"} {
			if text(lang, w) == w {
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

// TestEveryLabelKeyThePagesUseExists: a key a template or handler asks for that the table
// lacks would show the raw key to finance.
func TestEveryLabelKeyThePagesUseExists(t *testing.T) {
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// A key built by concatenation ("field."+name) is not one key: the closing quote must not
	// be followed by a +.
	asks := regexp.MustCompile(`(?:\.T |text\([a-zA-Z.]+, |problemf\(|word\()"([a-z_.]+)"[^+]`)
	asked := 0
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range asks.FindAllStringSubmatch(string(src), -1) {
			asked++
			if !render.HasLabel(m[1]) {
				t.Errorf("%s asks for label %q, which the table lacks", f, m[1])
			}
		}
	}
	// The scan itself must find the pages' words, or it proves nothing.
	if asked < 60 {
		t.Fatalf("found %d label keys in the sources: the pattern no longer matches the templates", asked)
	}
}

// TestARefusalTheConsoleCannotNameIsStillChinese: an incomplete request the console has no
// words of its own for (a reason the review rules add later) keeps the rules' English text on
// the English page and says in Chinese, without it, that the rules refused the move.
func TestARefusalTheConsoleCannotNameIsStillChinese(t *testing.T) {
	err := fmt.Errorf("%w: mismatch 7: accept_payment settles only a payment finding", reconcile.ErrBadReview)
	p, status, ok := reviewRefusal("resolve", reconcile.ReviewInput{Resolution: reconcile.ResolutionAccepted}, err)
	if !ok || status != http.StatusBadRequest {
		t.Fatalf("refusal %v, HTTP %d", ok, status)
	}
	if en := p.in("en"); !strings.Contains(en, "accept_payment settles only a payment finding") {
		t.Errorf("en: %q lost the rules' reason", en)
	}
	if zh := p.in("zh"); !strings.Contains(zh, "复核规则不允许") || strings.ContainsAny(zh, "abcdefghijklmnopqrstuvwxyz") {
		t.Errorf("zh: %q", zh)
	}
	// A failure to ask is no refusal: the page is a 500, not a reason.
	if _, _, ok := reviewRefusal("resolve", reconcile.ReviewInput{}, errors.New("connection reset")); ok {
		t.Error("a database failure read as a refusal")
	}
}
