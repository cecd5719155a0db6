// Package identity reads the people the review console and the CLI accept: a person's
// address as the sign-in proxy sends it or as someone types it after --by, and the entries
// of RECONCILER_REVIEWERS and RECONCILER_APPROVERS. Two spellings of one person must become
// one string, because the review rules compare strings (the proposer may not approve their
// own proposal) and the lists are matched against them: an invisible character, a fullwidth
// letter or a change of case must not make a second person.
//
// It does not fold look-alikes (a Cyrillic а is not a Latin a): such an address stays a
// different person, so it is on no list and is not the proposer, which is what refusing it
// needs. A domain must be ASCII, so a look-alike there is refused outright.
package identity

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// ErrInvalid is the error every refusal of this package wraps, with what is wrong.
var ErrInvalid = errors.New("invalid identity")

const (
	// maxInput bounds the work done on what a client sends before anything is checked.
	maxInput = 1024
	// maxAddress and maxLocal are RFC 5321's limits, in bytes of the normalised form.
	maxAddress = 254
	maxLocal   = 64
	maxDomain  = 253
	maxLabel   = 63
	// maxShown is how much of a refused value an error repeats: errors reach logs and
	// terminals, and the value is whatever a client sent.
	maxShown = 64
	// maxRounds bounds the normalise-fold-normalise loop; real input settles in one or two.
	maxRounds = 4
)

// Normalize returns the one spelling of a person's address: invisible and control characters
// removed, NFKC, full case folding, surrounding space trimmed; then it must have exactly one
// @, a non-empty local part without spaces or mail syntax, and an ASCII domain (an
// internationalised domain in its xn-- form). Errors wrap ErrInvalid and say what is wrong.
func Normalize(s string) (string, error) {
	c, err := canonical(s)
	if err != nil {
		return "", err
	}
	if err := checkAddress(c); err != nil {
		return "", invalid(s, err.Error())
	}
	return c, nil
}

// canonical is Normalize's transformation without the address rules: ParsePattern needs it
// for *@domain, which is not an address.
func canonical(s string) (string, error) {
	if len(s) > maxInput {
		return "", invalid(s, fmt.Sprintf("longer than %d bytes", maxInput))
	}
	if !utf8.ValidString(s) {
		// Replacing bad bytes with U+FFFD would make different inputs one person.
		return "", invalid(s, "not valid UTF-8")
	}
	// NFKC and folding can each undo the other's work on a few characters, so the steps
	// repeat until nothing changes: what comes out, normalised again, is itself.
	c := s
	for range maxRounds {
		next := strings.TrimSpace(stripInvisible(norm.NFKC.String(cases.Fold().String(norm.NFKC.String(stripInvisible(c))))))
		if next == c {
			return c, nil
		}
		c = next
	}
	return "", invalid(s, "does not settle under Unicode normalisation")
}

// stripInvisible drops what a reader cannot see and a comparison must not count: control
// characters (Cc), format characters (Cf: zero-width space, joiner and non-joiner, BOM, soft
// hyphen, bidi marks and overrides, tags), variation selectors, and the other default-ignorable
// code points (combining grapheme joiner, Hangul fillers).
func stripInvisible(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) {
			return -1
		}
		return r
	}, s)
}

// checkAddress holds a canonical string to the shape of an address.
func checkAddress(c string) error {
	if c == "" {
		return errors.New("empty")
	}
	if len(c) > maxAddress {
		return fmt.Errorf("longer than %d bytes", maxAddress)
	}
	if n := strings.Count(c, "@"); n != 1 {
		return fmt.Errorf("has %d @ signs, want exactly one", n)
	}
	local, domain, _ := strings.Cut(c, "@")
	if err := checkLocal(local); err != nil {
		return err
	}
	return checkDomain(domain)
}

// checkLocal refuses an empty or overlong local part and anything but what plain addresses
// are made of: ASCII letters, digits and RFC 5322's atext symbols and dots, and beyond ASCII
// letters, marks and digits only. Non-ASCII symbols and punctuation (U+2212 MINUS SIGN for a
// hyphen, U+2024 for a dot) are refused: they exist in no real mailbox and only look like
// something else. The * of a list pattern is no part of an address either.
func checkLocal(local string) error {
	if local == "" {
		return errors.New("nothing before the @")
	}
	if len(local) > maxLocal {
		return fmt.Errorf("more than %d bytes before the @", maxLocal)
	}
	for _, r := range local {
		switch {
		case r < utf8.RuneSelf && !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(atext, r)):
			return fmt.Errorf("%q before the @ (no spaces, quoted or pattern addresses)", r)
		case r >= utf8.RuneSelf && !unicode.In(r, unicode.L, unicode.M, unicode.N):
			return fmt.Errorf("%+q before the @, which is not a letter, mark or digit", r)
		}
	}
	return nil
}

// atext is the ASCII symbols an unquoted local part may hold (RFC 5322) and its dots, but
// not *: a person named *@domain would read as a pattern.
const atext = "!#$%&'+-/=?^_`{|}~."

// checkDomain: ASCII letters, digits and hyphens in dot-separated labels, none empty (so
// no leading, trailing or doubled dot), none starting or ending with a hyphen.
func checkDomain(domain string) error {
	if domain == "" {
		return errors.New("nothing after the @")
	}
	if len(domain) > maxDomain {
		return fmt.Errorf("a domain longer than %d bytes", maxDomain)
	}
	for i := 0; i < len(domain); i++ {
		if domain[i] >= utf8.RuneSelf {
			return errors.New("a domain that is not ASCII (give an internationalised domain in its xn-- form)")
		}
	}
	for _, label := range strings.Split(domain, ".") {
		switch {
		case label == "":
			return errors.New("an empty label in the domain (a leading, trailing or doubled dot)")
		case len(label) > maxLabel:
			return fmt.Errorf("a domain label longer than %d bytes", maxLabel)
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Errorf("a domain label %q that starts or ends with a hyphen", label)
		}
		for _, b := range []byte(label) {
			if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
				return fmt.Errorf("%q in the domain (letters, digits, hyphens and dots only)", rune(b))
			}
		}
	}
	return nil
}

// invalid is the error for a refused value: ErrInvalid, the value clipped and escaped (so
// neither its length nor its invisible characters reach a log or terminal), and the reason.
func invalid(s, reason string) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, quote(s), reason)
}

// quote escapes s to ASCII (a Cyrillic а shows as \u0430, a zero-width space as \u200b) after
// clipping it to maxShown bytes on a character boundary.
func quote(s string) string {
	if len(s) <= maxShown {
		return fmt.Sprintf("%+q", s)
	}
	cut := maxShown
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return fmt.Sprintf("%+q... (%d bytes)", s[:cut], len(s))
}
