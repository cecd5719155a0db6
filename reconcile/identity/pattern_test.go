package identity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/reconcile/identity"
)

func TestParsePattern(t *testing.T) {
	tests := []struct {
		in, want string // want "": refused
	}{
		{"cfo@example.com", "cfo@example.com"},
		{" CFO@Example.com ", "cfo@example.com"},
		{"ＣＦＯ@example.com\u200b", "cfo@example.com"},
		{"*@approvers.example.com", "*@approvers.example.com"},
		{"*@Approvers.EXAMPLE.com", "*@approvers.example.com"},
		{"＊@approvers.example.com", "*@approvers.example.com"},
		{"*@", ""},
		{"*@approvers.example.com.", ""},
		{"*@evil.com@approvers.example.com", ""},
		{"*@appr\u043evers.example.com", ""}, // Cyrillic о
		{"*.example.com", ""},
		{"a*@example.com", ""},
		{"*", ""},
		{"**@example.com", ""},
		{"eve@evil.com@approvers.example.com", ""},
		{"", ""},
	}
	for _, tc := range tests {
		p, err := identity.ParsePattern(tc.in)
		switch {
		case tc.want == "" && !errors.Is(err, identity.ErrInvalid):
			t.Errorf("ParsePattern(%+q) = %q, %v; want ErrInvalid", tc.in, p, err)
		case tc.want != "" && (err != nil || p.String() != tc.want):
			t.Errorf("ParsePattern(%+q) = %q, %v; want %q", tc.in, p, err, tc.want)
		}
	}
}

func TestParseListNamesTheEntry(t *testing.T) {
	_, err := identity.ParseList([]string{"cfo@example.com", "*@x.example.com", "eve@evil.com@x.example.com"})
	if !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), "entry 3") || !strings.Contains(err.Error(), "eve@evil.com@x.example.com") {
		t.Fatalf("error %v, want ErrInvalid naming entry 3 and its text", err)
	}
	ps, err := identity.ParseList(nil)
	if err != nil || len(ps) != 0 {
		t.Fatalf("empty list: %v, %v", ps, err)
	}
}

// TestMatch: an exact entry is one address; *@domain is that domain exactly, never a suffix
// of it, and never an address with two @ (one of which is that domain).
func TestMatch(t *testing.T) {
	list, err := identity.ParseList([]string{"CFO@example.com", "*@approvers.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		email string
		want  bool
	}{
		{"cfo@example.com", true},
		{"kim@approvers.example.com", true},
		{"\u0441fo@example.com", false}, // Cyrillic с: another person
		{"bob@example.com", false},
		{"eve@evil.com@approvers.example.com", false},
		{"eve@x.approvers.example.com", false},
		{"eve@evilapprovers.example.com", false},
		{"eve@approvers.example.com.evil", false},
		{"@approvers.example.com", false},
		{"approvers.example.com", false},
		// Not normalised: a caller that forgot is refused, not matched by a near miss.
		{"CFO@example.com", false},
		{"cfo@example.com\u200b", false},
		{"kim@approvers.example.com ", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := identity.Match(list, tc.email); got != tc.want {
			t.Errorf("Match(%+q) = %v, want %v", tc.email, got, tc.want)
		}
	}
	if identity.Match(nil, "cfo@example.com") || identity.Match([]identity.Pattern{{}}, "cfo@example.com") {
		t.Error("an empty list or a zero Pattern matched someone")
	}
}
