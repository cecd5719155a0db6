package identity

import (
	"fmt"
	"strings"
)

// Pattern is one entry of a list of people (RECONCILER_REVIEWERS, RECONCILER_APPROVERS): an
// exact address, or *@domain for everyone at exactly that domain. The zero Pattern matches
// nobody.
type Pattern struct {
	addr   string // a normalised address; "" for a domain pattern
	domain string // the domain of *@domain; "" for an address
}

// ParsePattern reads a list entry, normalised as Normalize normalises an address. Errors wrap
// ErrInvalid.
func ParsePattern(s string) (Pattern, error) {
	c, err := canonical(s)
	if err != nil {
		return Pattern{}, err
	}
	if domain, ok := strings.CutPrefix(c, "*@"); ok {
		if err := checkDomain(domain); err != nil {
			return Pattern{}, invalid(s, err.Error())
		}
		return Pattern{domain: domain}, nil
	}
	addr, err := Normalize(s)
	if err != nil {
		return Pattern{}, err
	}
	return Pattern{addr: addr}, nil
}

// ParseList reads every entry of a list; the error names the entry's position (from 1) and
// wraps ErrInvalid.
func ParseList(entries []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(entries))
	for i, e := range entries {
		p, err := ParsePattern(e)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// String is the entry as it would be written in the list.
func (p Pattern) String() string {
	if p.domain != "" {
		return "*@" + p.domain
	}
	return p.addr
}

// Match reports whether a normalised address is on the list. A domain pattern matches an
// address with exactly one @ whose domain is the pattern's, never a suffix of it (neither
// eve@evil.com@approvers.example.com nor eve@x.approvers.example.com is at
// approvers.example.com). An address that is not already in Normalize's form matches
// nothing: a caller that forgot to normalise is refused, not let in by a near miss.
func Match(patterns []Pattern, normalizedEmail string) bool {
	if n, err := Normalize(normalizedEmail); err != nil || n != normalizedEmail {
		return false
	}
	local, domain, _ := strings.Cut(normalizedEmail, "@")
	for _, p := range patterns {
		switch {
		case p.addr != "" && p.addr == normalizedEmail:
			return true
		case p.domain != "" && local != "" && domain == p.domain:
			return true
		}
	}
	return false
}

// AnyoneElse says whether patterns name someone other than normalizedEmail: an address
// that is not it, or a *@domain entry (it names every address of its domain). Where it is
// false, a proposal normalizedEmail made can have no second person to approve it.
func AnyoneElse(patterns []Pattern, normalizedEmail string) bool {
	for _, p := range patterns {
		if p.domain != "" || p.addr != normalizedEmail {
			return true
		}
	}
	return false
}

// Address is the one address p names, "" for a *@domain pattern.
func (p Pattern) Address() string { return p.addr }
