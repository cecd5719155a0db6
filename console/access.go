package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"strings"
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
	Email string
	Role  Role
	CSRF  string // the form token of this person
}

func (v viewer) CanReview() bool  { return v.Role >= RoleReviewer }
func (v viewer) CanApprove() bool { return v.Role >= RoleApprover }

type viewerKey struct{}

func viewerFrom(ctx context.Context) viewer {
	v, _ := ctx.Value(viewerKey{}).(viewer)
	return v
}

// matchPerson reports whether email is on a list of exact addresses or *@domain (both lower
// case, as config stores them).
func matchPerson(list []string, email string) bool {
	email = strings.ToLower(email)
	for _, p := range list {
		if p == email {
			return true
		}
		if dom, ok := strings.CutPrefix(p, "*"); ok && strings.HasSuffix(email, dom) && len(email) > len(dom) {
			return true
		}
	}
	return false
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

// identify answers 401 unless a trusted peer names exactly one person, and 403 when that
// person is on neither list; otherwise it puts the viewer in the request's context.
func (h *handler) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(h.cfg.IdentityHeader)
		if !h.trustedPeer(r) || len(vals) != 1 || !plausibleEmail(vals[0]) {
			h.log.Info().Str("peer", r.RemoteAddr).Str("path", r.URL.Path).Bool("trusted_peer", h.trustedPeer(r)).
				Msg("review console: request without a trusted identity refused")
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "401 unauthorized: sign in through the finance sign-in proxy", http.StatusUnauthorized)
			return
		}
		email := strings.ToLower(strings.TrimSpace(vals[0]))
		v := viewer{Email: email, CSRF: h.csrfToken(email)}
		switch {
		case matchPerson(h.cfg.Approvers, email):
			v.Role = RoleApprover
		case matchPerson(h.cfg.Reviewers, email):
			v.Role = RoleReviewer
		}
		if v.Role == RoleNone {
			h.log.Info().Str("person", email).Str("path", r.URL.Path).Msg("review console: person not listed as reviewer or approver")
			http.Error(w, "403 forbidden: "+email+" is not a reviewer (RECONCILER_REVIEWERS) or approver (RECONCILER_APPROVERS)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

func plausibleEmail(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && len(s) <= 254 && !strings.ContainsAny(s, " \t\r\n<>\"")
}

// csrfToken is the form token of one person: an HMAC of their identity, so it needs no
// server-side session and a token taken from one person's page is worthless to another.
func (h *handler) csrfToken(email string) string {
	m := hmac.New(sha256.New, h.cfg.CSRFKey)
	m.Write([]byte("payrecon review console csrf\x00" + email))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfOK checks a POST's form token against the viewer's.
func csrfOK(r *http.Request, v viewer) bool {
	got := r.PostFormValue("csrf")
	return got != "" && hmac.Equal([]byte(got), []byte(v.CSRF))
}
