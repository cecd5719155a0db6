package identity_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/payrecon/payrecon/reconcile/identity"
)

// TestNormalize: the spellings of one person become one string; what is no address is
// refused with ErrInvalid and a reason.
func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" with wantErr
		wantErr  string // a fragment of the reason
	}{
		{"plain", "alice@example.com", "alice@example.com", ""},
		{"surrounding space", "  alice@example.com\t", "alice@example.com", ""},
		{"upper case", "ALICE@Example.COM", "alice@example.com", ""},
		{"fullwidth letters", "ＡＬＩＣＥ@example.com", "alice@example.com", ""},
		{"fullwidth domain", "alice@ＥＸＡＭＰＬＥ.com", "alice@example.com", ""},
		{"fullwidth at", "alice＠example.com", "alice@example.com", ""},
		{"full case folding", "STRAẞE@example.com", "strasse@example.com", ""},
		{"zero-width space after", "alice@example.com\u200b", "alice@example.com", ""},
		{"zero-width space inside", "ali\u200bce@example.com", "alice@example.com", ""},
		{"zero-width joiner", "ali\u200dce@example.com", "alice@example.com", ""},
		{"zero-width non-joiner", "alice@exam\u200cple.com", "alice@example.com", ""},
		{"word joiner", "alice\u2060@example.com", "alice@example.com", ""},
		{"BOM", "\ufeffalice@example.com", "alice@example.com", ""},
		{"soft hyphen", "al\u00adice@example.com", "alice@example.com", ""},
		{"RTL override", "\u202ealice@example.com\u202c", "alice@example.com", ""},
		{"RTL mark", "alice\u200f@example.com", "alice@example.com", ""},
		{"bidi isolate", "\u2067alice@example.com\u2069", "alice@example.com", ""},
		{"variation selector", "alice\ufe0f@example.com", "alice@example.com", ""},
		{"combining grapheme joiner", "ali\u034fce@example.com", "alice@example.com", ""},
		{"Hangul filler", "alice\u3164@example.com", "alice@example.com", ""},
		{"tag characters", "alice@example.com\U000E0041\U000E007F", "alice@example.com", ""},
		{"NUL inside", "ali\x00ce@example.com", "alice@example.com", ""},
		{"newline after", "alice@example.com\r\n", "alice@example.com", ""},
		{"escape sequence", "\x1b[31malice@example.com", "", "'[' before the @"},
		{"no-break space around", "\u00a0alice@example.com\u3000", "alice@example.com", ""},
		{"composed and decomposed are one", "jose\u0301@example.com", "josé@example.com", ""},
		{"xn-- domain", "li@xn--fiqs8s.example", "li@xn--fiqs8s.example", ""},
		{"Chinese local part", "李雷@example.com", "李雷@example.com", ""},
		// A look-alike is not folded: it stays another person, on no list and not the proposer.
		{"Cyrillic a before the @", "\u0430lice@example.com", "\u0430lice@example.com", ""},
		{"Cyrillic a in the domain", "alice@ex\u0430mple.com", "", "not ASCII"},
		{"Chinese domain", "li@例子.com", "", "xn--"},
		{"minus sign before the @", "alice\u2212smith@example.com", "", "not a letter"},
		{"minus sign in the domain", "alice@ex\u2212ample.com", "", "not ASCII"},
		{"one-dot leader folds to a dot", "alice@example\u2024com", "alice@example.com", ""},
		{"two @", "eve@evil.com@approvers.example.com", "", "2 @ signs"},
		{"fullwidth second @", "eve@evil.com＠approvers.example.com", "", "2 @ signs"},
		{"no @", "alice", "", "0 @ signs"},
		{"nothing before the @", "@example.com", "", "nothing before"},
		{"invisible local part", "\u200b@example.com", "", "nothing before"},
		{"nothing after the @", "alice@", "", "nothing after"},
		{"trailing dot", "alice@example.com.", "", "empty label"},
		{"leading dot", "alice@.example.com", "", "empty label"},
		{"doubled dot", "alice@example..com", "", "empty label"},
		{"hyphen at a label's end", "alice@example-.com", "", "hyphen"},
		{"underscore in the domain", "alice@ex_ample.com", "", "letters, digits"},
		{"port in the domain", "alice@example.com:443", "", "letters, digits"},
		{"space inside", "alice smith@example.com", "", "no spaces"},
		{"ideographic space inside", "alice\u3000smith@example.com", "", "no spaces"},
		{"quoted local part", `"alice"@example.com`, "", "quoted"},
		{"display name", "Alice <alice@example.com>", "", "before the @"},
		{"list separator", "alice,bob@example.com", "", "before the @"},
		{"a pattern is no address", "*@example.com", "", "pattern"},
		{"private use", "alice\ue000@example.com", "", "not a letter"},
		{"invalid UTF-8", "alice\xff@example.com", "", "UTF-8"},
		{"empty", "", "", "empty"},
		{"only space", "   ", "", "empty"},
		{"only invisible", "\u200b\ufeff", "", "empty"},
		{"local part too long", strings.Repeat("a", 65) + "@example.com", "", "64 bytes"},
		{"too long", "a@" + strings.Repeat("b.", 130) + "com", "", "254 bytes"},
		{"far too long", strings.Repeat("a", 5000) + "@example.com", "", "1024 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := identity.Normalize(tc.in)
			if tc.wantErr != "" {
				if !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Normalize(%+q) = %+q, %v; want ErrInvalid saying %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Normalize(%+q) = %+q, %v; want %+q", tc.in, got, err, tc.want)
			}
			if again, err := identity.Normalize(got); err != nil || again != got {
				t.Errorf("Normalize is not idempotent: %+q -> %+q, %v", got, again, err)
			}
		})
	}
}

// TestLookAlikesStayApart: what the review compares. The spellings that are one person are
// equal after normalising; the look-alikes that are another person are not.
func TestLookAlikesStayApart(t *testing.T) {
	alice := must(t, "alice@example.com")
	for _, same := range []string{"alice@example.com\u200b", "ALICE@Example.com", "ＡＬＩＣＥ@example.com", "\ufeffalice@example.com"} {
		if got := must(t, same); got != alice {
			t.Errorf("%+q normalised to %+q, not alice's %+q", same, got, alice)
		}
	}
	for _, other := range []string{"\u0430lice@example.com", "alice1@example.com", "alicé@example.com"} {
		if got := must(t, other); got == alice {
			t.Errorf("%+q normalised to alice's address", other)
		}
	}
}

// TestErrorsAreBounded: a refusal repeats at most 64 bytes of what was sent, escaped, so a
// header or flag full of control characters or megabytes cannot reach a log as it came.
func TestErrorsAreBounded(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("\u202e", 300) + "@@",
		"x" + strings.Repeat("é", 600),
		"\x1b]0;pwned\x07@@" + strings.Repeat("a", 100),
		strings.Repeat("a", 10000),
		"\xff\xfe" + strings.Repeat("\x80", 100),
	} {
		_, err := identity.Normalize(in)
		if err == nil {
			t.Fatalf("%+q accepted", in[:20])
		}
		msg := err.Error()
		if len(msg) > 400 || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x1b\x07\u202e") {
			t.Errorf("error not bounded and escaped (%d bytes): %q", len(msg), msg)
		}
		for _, r := range msg {
			if r >= utf8.RuneSelf {
				t.Errorf("error holds a non-ASCII character: %q", msg)
				break
			}
		}
	}
}

// FuzzNormalize: whatever comes in, what comes out is accepted again unchanged, has one @
// and an ASCII domain, and holds nothing stripInvisible would strip.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"alice@example.com\u200b", "ＡＬＩＣＥ@example.com", "\u0345@x.com", "ǅ@x.com", "ﬃ@x.com",
		"STRAẞE@example.com", "\u0130@x.com", "eve@evil.com@x.com", "a@b", "\u1e9e\u0345\u0307@x.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := identity.Normalize(in)
		if err != nil {
			if !errors.Is(err, identity.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := identity.Normalize(out)
		if err != nil || again != out {
			t.Fatalf("Normalize(%+q) = %+q, but Normalize of that = %+q, %v", in, out, again, err)
		}
		local, domain, _ := strings.Cut(out, "@")
		if local == "" || strings.Contains(domain, "@") {
			t.Fatalf("%+q -> %+q", in, out)
		}
		for i := 0; i < len(domain); i++ {
			if domain[i] >= utf8.RuneSelf {
				t.Fatalf("%+q -> non-ASCII domain %+q", in, out)
			}
		}
	})
}

func must(t *testing.T, s string) string {
	t.Helper()
	n, err := identity.Normalize(s)
	if err != nil {
		t.Fatalf("Normalize(%+q): %v", s, err)
	}
	return n
}

func TestAnyoneElse(t *testing.T) {
	list := func(entries ...string) []identity.Pattern {
		out, err := identity.ParseList(entries)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		entries []string
		me      string
		want    bool
	}{
		{nil, "cfo@example.com", false},
		{[]string{"cfo@example.com"}, "cfo@example.com", false},
		{[]string{"cfo@example.com", "ceo@example.com"}, "cfo@example.com", true},
		{[]string{"*@example.com"}, "cfo@example.com", true},
		{[]string{"cfo@example.com"}, "ann@example.com", true},
	} {
		if got := identity.AnyoneElse(list(c.entries...), c.me); got != c.want {
			t.Errorf("AnyoneElse(%v, %s) = %v, want %v", c.entries, c.me, got, c.want)
		}
	}
}
