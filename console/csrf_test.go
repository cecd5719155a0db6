package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestCSRFTokens: a token is good for its person for csrfLifetime after its page was served,
// and for nobody else, nothing older, nothing from the future, nothing altered.
func TestCSRFTokens(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	issuedAt := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *csrfTokens {
		return &csrfTokens{key: key, now: func() time.Time { return issuedAt.Add(d) }, log: zerolog.Nop()}
	}
	const ann = "ann@example.com"
	tok := at(0).issue(ann)
	ts, sig, _ := strings.Cut(tok, ".")

	// Flip one bit of the MAC's first byte: still well-formed, no longer the signature.
	raw, _ := base64.RawURLEncoding.DecodeString(sig)
	raw[0] ^= 1
	tamperedMAC := ts + "." + base64.RawURLEncoding.EncodeToString(raw)
	// A later time under the original signature: what someone extending a token would try.
	laterTime := strconv.FormatInt(issuedAt.Add(6*time.Hour).Unix(), 10) + "." + sig
	// The token before this change: a bare HMAC of the address, which never expired.
	m := hmac.New(sha256.New, key)
	m.Write([]byte("payrecon review console csrf\x00" + ann))
	oldStyle := base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	otherKey := (&csrfTokens{key: []byte("another key, another deployment"), now: at(0).now}).issue(ann)

	tests := []struct {
		name   string
		person string
		token  string
		after  time.Duration // how long after issue it comes back
		want   error
	}{
		{"at once", ann, tok, 0, nil},
		{"11 hours later", ann, tok, 11 * time.Hour, nil},
		{"12 hours later", ann, tok, csrfLifetime, nil},
		{"12 hours and a second later", ann, tok, csrfLifetime + time.Second, errCSRFExpired},
		{"a week later", ann, tok, 7 * 24 * time.Hour, errCSRFExpired},
		{"from 30 s in the future (clock skew)", ann, tok, -30 * time.Second, nil},
		{"from 2 minutes in the future", ann, tok, -2 * time.Minute, errCSRFFuture},
		{"another person's", "bob@example.com", tok, 0, errCSRFForged},
		{"tampered MAC", ann, tamperedMAC, time.Hour, errCSRFForged},
		{"tampered time", ann, laterTime, 13 * time.Hour, errCSRFForged},
		{"another key", ann, otherKey, 0, errCSRFForged},
		{"old-style bare HMAC", ann, oldStyle, 0, errCSRFMalformed},
		{"empty", ann, "", 0, errCSRFMalformed},
		{"time only", ann, ts, 0, errCSRFMalformed},
		{"time with a plus", ann, "+" + tok, 0, errCSRFMalformed},
		{"time with a leading zero", ann, "0" + tok, 0, errCSRFMalformed},
		{"two dots", ann, tok + ".x", 0, errCSRFMalformed},
		{"padded MAC", ann, tok + "=", 0, errCSRFMalformed},
		{"short MAC", ann, tok[:len(tok)-4], 0, errCSRFMalformed},
		{"negative time", ann, "-1." + sig, 0, errCSRFForged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := at(tc.after).check(tc.person, tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("check = %v, want %v", err, tc.want)
			}
		})
	}
	if a, b := at(0).issue(ann), at(time.Second).issue(ann); a == b {
		t.Error("two pages a second apart got the same token")
	}
}
