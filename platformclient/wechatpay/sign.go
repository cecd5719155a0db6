package wechatpay

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payrecon/payrecon/platformclient"
)

// AuthScheme is the Authorization scheme of merchant requests.
const AuthScheme = "WECHATPAY2-SHA256-RSA2048"

// SignTestPrefix marks WeChat Pay's probe signatures: they must never verify.
const SignTestPrefix = "WECHATPAY/SIGNTEST/"

// MaxClockSkew is how far a signed timestamp may be from now; at or beyond it, rejected.
const MaxClockSkew = 300 * time.Second

// Response and callback signature headers.
const (
	HeaderTimestamp = "Wechatpay-Timestamp"
	HeaderNonce     = "Wechatpay-Nonce"
	HeaderSignature = "Wechatpay-Signature"
	HeaderSerial    = "Wechatpay-Serial"
	HeaderRequestID = "Request-Id"
)

// RequestMessage is what a merchant signs: METHOD\nPATH?QUERY\nTIMESTAMP\nNONCE\nBODY\n,
// the path and query exactly as sent, an empty body still ending in "\n".
func RequestMessage(method, pathAndQuery, timestamp, nonce string, body []byte) []byte {
	return []byte(method + "\n" + pathAndQuery + "\n" + timestamp + "\n" + nonce + "\n" + string(body) + "\n")
}

// ResponseMessage is what WeChat Pay signs on answers and callbacks: TIMESTAMP\nNONCE\nBODY\n.
func ResponseMessage(timestamp, nonce string, body []byte) []byte {
	return []byte(timestamp + "\n" + nonce + "\n" + string(body) + "\n")
}

// Authorization builds the header value for one request.
func Authorization(key *rsa.PrivateKey, mchID, serialNo, method, pathAndQuery, timestamp, nonce string, body []byte) (string, error) {
	sig, err := platformclient.SignSHA256(key, RequestMessage(method, pathAndQuery, timestamp, nonce, body))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`%s mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
		AuthScheme, mchID, nonce, sig, timestamp, serialNo), nil
}

// AuthFields is a parsed Authorization header.
type AuthFields struct {
	MchID, NonceStr, Signature, Timestamp, SerialNo string
}

// ParseAuthorization reads an Authorization header (field order free), for the sandbox.
func ParseAuthorization(h string) (AuthFields, error) {
	rest, ok := strings.CutPrefix(h, AuthScheme+" ")
	if !ok {
		return AuthFields{}, errors.New("authorization scheme is not " + AuthScheme)
	}
	var f AuthFields
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return AuthFields{}, errors.New("authorization field is not k=\"v\"")
		}
		v = v[1 : len(v)-1]
		switch k {
		case "mchid":
			f.MchID = v
		case "nonce_str":
			f.NonceStr = v
		case "signature":
			f.Signature = v
		case "timestamp":
			f.Timestamp = v
		case "serial_no":
			f.SerialNo = v
		}
	}
	if f.MchID == "" || f.NonceStr == "" || f.Signature == "" || f.Timestamp == "" || f.SerialNo == "" {
		return AuthFields{}, errors.New("authorization lacks a field")
	}
	return f, nil
}

// Verifier checks WeChat Pay signatures on answers and callbacks. The Wechatpay-Serial
// header picks the key: the public key when it names PublicKeyID, otherwise the platform
// certificate of that serial, if Certificate is set.
type Verifier struct {
	PublicKey   *rsa.PublicKey
	PublicKeyID string
	// Certificate finds the key of the platform certificate with this serial (upper-case
	// hex). Nil: only the public key verifies.
	Certificate func(serial string) (*rsa.PublicKey, bool)
	Now         func() time.Time
}

// Verify checks the signature headers over body. The error says which check failed,
// never anything about the key. The cheap checks come first, so a probe or a stale
// message never makes Certificate download anything.
func (v Verifier) Verify(h http.Header, body []byte) error {
	ts, nonce, sig, serial := h.Get(HeaderTimestamp), h.Get(HeaderNonce), h.Get(HeaderSignature), h.Get(HeaderSerial)
	if ts == "" || nonce == "" || sig == "" || serial == "" {
		return errors.New("signature headers missing")
	}
	if strings.HasPrefix(sig, SignTestPrefix) {
		return errors.New("signature is a WECHATPAY/SIGNTEST/ probe")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("Wechatpay-Timestamp is not a number")
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if skew := now().Sub(time.Unix(sec, 0)); skew >= MaxClockSkew || skew <= -MaxClockSkew {
		return fmt.Errorf("Wechatpay-Timestamp is %s away from now (limit %s)", skew.Round(time.Second), MaxClockSkew)
	}
	key, signer, err := v.keyFor(serial)
	if err != nil {
		return err
	}
	if err := platformclient.VerifySHA256(key, ResponseMessage(ts, nonce, body), sig); err != nil {
		return fmt.Errorf("signature does not verify with %s", signer)
	}
	return nil
}

// keyFor picks the verifying key a Wechatpay-Serial names, and says which it is.
func (v Verifier) keyFor(serial string) (*rsa.PublicKey, string, error) {
	if v.PublicKeyID != "" && strings.EqualFold(serial, v.PublicKeyID) {
		return v.PublicKey, SettingPublicKey, nil
	}
	if v.Certificate == nil {
		return nil, "", fmt.Errorf("Wechatpay-Serial %q is not the configured public key id (%s)", quoteSerial(serial), SettingPublicKeyID)
	}
	serial = NormalizeSerial(serial)
	if key, ok := v.Certificate(serial); ok {
		return key, "platform certificate " + serial, nil
	}
	return nil, "", fmt.Errorf("Wechatpay-Serial %q names neither the configured public key id nor a platform certificate WeChat Pay lists", quoteSerial(serial))
}

// NormalizeSerial is a certificate serial as WeChat Pay prints it: upper-case hex, no
// surrounding space.
func NormalizeSerial(serial string) string { return strings.ToUpper(strings.TrimSpace(serial)) }

// quoteSerial bounds what an untrusted header can put in a log line.
func quoteSerial(serial string) string {
	const limit = 64
	if len(serial) > limit {
		return serial[:limit] + "..."
	}
	return serial
}

// SignResponse sets the four signature headers on h for body, as WeChat Pay does (the
// sandbox uses it for answers and callbacks).
func SignResponse(h http.Header, key *rsa.PrivateKey, publicKeyID string, now time.Time, body []byte) error {
	ts, nonce := strconv.FormatInt(now.Unix(), 10), NewNonce()
	sig, err := platformclient.SignSHA256(key, ResponseMessage(ts, nonce, body))
	if err != nil {
		return err
	}
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderSignature, sig)
	h.Set(HeaderSerial, publicKeyID)
	return nil
}

// NewNonce is 32 random upper-case hex characters.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
