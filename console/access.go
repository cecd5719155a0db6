package console

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/payrecon/payrecon/reconcile/identity"
)

// Role is what a signed-in person may do in the console.
type Role int

const (
	// RoleNone: signed in but not listed; the console shows them nothing.
	RoleNone Role = iota
	// RoleReviewer acknowledges findings and resolves or proposes resolutions.
	RoleReviewer
	// RoleApprover does what a reviewer does and approves or rejects another's proposal.
	RoleApprover
)

// viewer is the person behind a request, as the trusted proxy named them.
type viewer struct {
	Email string // identity.Normalize's spelling: what the review stores and compares
	Role  Role
	CSRF  string // a form token for this person, issued with this request's page

	tokens *csrfTokens // checks the token a POST brings back
}

func (v viewer) CanReview() bool  { return v.Role >= RoleReviewer }
func (v viewer) CanApprove() bool { return v.Role >= RoleApprover }

type viewerKey struct{}

func viewerFrom(ctx context.Context) viewer {
	v, _ := ctx.Value(viewerKey{}).(viewer)
	return v
}

// trustedPeer reports whether the TCP peer (never a forwarded-for header: that is what an
// untrusted caller would forge) is one of the proxies whose identity header we believe.
func (h *handler) trustedPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range h.cfg.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// identify answers 401 unless a trusted peer names exactly one person in a form
// identity.Normalize accepts, and 403 when that person is on neither list; otherwise it puts
// the viewer, under the normalised address, in the request's context.
func (h *handler) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		email, err := h.person(r)
		if err != nil {
			// The error is bounded and escaped (identity clips what it repeats).
			h.log.Info().Str("peer", r.RemoteAddr).Str("path", r.URL.Path).Bool("trusted_peer", h.trustedPeer(r)).
				AnErr("identity", err).Msg("review console: request without a trusted identity refused")
			w.Header().Set("Cache-Control", "no-store")
			fail(w, r, http.StatusUnauthorized, problemf("sign_in"))
			return
		}
		v := viewer{Email: email, CSRF: h.tokens.issue(email), tokens: h.tokens}
		switch {
		case identity.Match(h.cfg.Approvers, email):
			v.Role = RoleApprover
		case identity.Match(h.cfg.Reviewers, email):
			v.Role = RoleReviewer
		}
		if v.Role == RoleNone {
			h.log.Info().Str("person", email).Str("path", r.URL.Path).Msg("review console: person not listed as reviewer or approver")
			// Quoted to ASCII: a look-alike letter (a Cyrillic а) shows as what it is.
			fail(w, r, http.StatusForbidden, problemf("not_listed", strconv.QuoteToASCII(email)))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// person is the normalised address a trusted peer names in exactly one identity header.
func (h *handler) person(r *http.Request) (string, error) {
	vals := r.Header.Values(h.cfg.IdentityHeader)
	switch {
	case !h.trustedPeer(r):
		return "", errUntrustedPeer
	case len(vals) != 1:
		return "", errNotOneIdentity // none, or two: which of them would be the person?
	}
	return identity.Normalize(vals[0])
}

var (
	errUntrustedPeer  = errors.New("the peer is not a trusted proxy")
	errNotOneIdentity = errors.New("not exactly one identity header")
)

// csrfOK checks that a POST brings back a form token issued to the viewer and still good.
func csrfOK(r *http.Request, v viewer) bool {
	if v.tokens == nil {
		return false
	}
	if err := v.tokens.check(v.Email, r.PostFormValue("csrf")); err != nil {
		v.tokens.log.Info().Str("person", v.Email).Str("reason", err.Error()).Msg("review console: form token refused")
		return false
	}
	return true
}
