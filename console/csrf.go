package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

const (
	// csrfLifetime is how long a form stays good after its page was served: a working day
	// with room to spare. An older token, taken from a page, a log or a browser's history,
	// is worthless.
	csrfLifetime = 12 * time.Hour
	// csrfSkew is how far in the future a token may have been issued: replicas' clocks
	// differ a little, never by more.
	csrfSkew = time.Minute
	// csrfDomain separates these MACs from anything else the key might ever sign.
	csrfDomain = "payrecon review console csrf"
)

// Why a form token is refused (for the log; the person is only told to reload).
var (
	errCSRFMalformed = errors.New("malformed form token")
	errCSRFExpired   = errors.New("form token expired")
	errCSRFFuture    = errors.New("form token issued in the future")
	errCSRFForged    = errors.New("form token not signed for this person and time")
)

// csrfTokens issues and checks the form tokens: "<issued-at unix seconds>.<HMAC>", the HMAC
// taken over the person and the issue time. No server-side session is needed, a token from
// one person's page is worthless to another, and none outlives csrfLifetime.
type csrfTokens struct {
	key []byte
	now func() time.Time
	log zerolog.Logger // why a token was refused
}

// issue is a fresh token for person, issued now.
func (c *csrfTokens) issue(person string) string {
	at := c.now().Unix()
	return strconv.FormatInt(at, 10) + "." + base64.RawURLEncoding.EncodeToString(c.mac(person, at))
}

// check accepts a token issued to person no longer than csrfLifetime ago.
func (c *csrfTokens) check(person, token string) error {
	ts, sig, ok := strings.Cut(token, ".")
	at, err := strconv.ParseInt(ts, 10, 64)
	// Only the spelling issue writes: "+17", "017" or a second dot would sign the same time
	// under another token.
	if !ok || err != nil || strconv.FormatInt(at, 10) != ts {
		return errCSRFMalformed
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(got) != sha256.Size || base64.RawURLEncoding.EncodeToString(got) != sig {
		return errCSRFMalformed
	}
	if !hmac.Equal(got, c.mac(person, at)) {
		return errCSRFForged
	}
	now := c.now()
	issued := time.Unix(at, 0)
	switch {
	case issued.After(now.Add(csrfSkew)):
		return errCSRFFuture
	case now.Sub(issued) > csrfLifetime:
		return errCSRFExpired
	}
	return nil
}

// mac signs the domain, the person and the time, each delimited so that no two different
// (person, time) pairs give one message (a person never holds a NUL: identity strips it).
func (c *csrfTokens) mac(person string, at int64) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(csrfDomain + "\x00" + person + "\x00"))
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(at)))
	return m.Sum(nil)
}
