package platformclient

import (
	"errors"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// ErrBadSignature marks a callback (or answer) whose signature did not verify: a security
// event. A callback handler answers it with 401 (WeChat Pay) or "fail" (Alipay).
var ErrBadSignature = errors.New("bad signature")

// ErrMalformed marks a callback that could not be read: not the expected form or JSON,
// undecryptable, or missing a field it cannot do without. Answered with 400 / "fail".
var ErrMalformed = errors.New("malformed message")

// ChinaTime is GMT+8, the zone of Alipay's timestamps (request timestamp, send_pay_date,
// gmt_payment). A fixed zone, so no tzdata is needed on the machine.
var ChinaTime = time.FixedZone("CST", 8*60*60)

// ChinaTimeLayout is Alipay's "yyyy-MM-dd HH:mm:ss".
const ChinaTimeLayout = "2006-01-02 15:04:05"

// NewError builds the *reconcile.PlatformError every client returns.
func NewError(p reconcile.Platform, kind reconcile.PlatformErrorKind, code, msg string, err error) *reconcile.PlatformError {
	return &reconcile.PlatformError{Platform: p, Kind: kind, Code: code, Message: msg, Err: err}
}

// BadSignature is the error for an answer or callback that did not verify; its chain holds
// ErrBadSignature.
func BadSignature(p reconcile.Platform, msg string) *reconcile.PlatformError {
	return NewError(p, reconcile.KindBadSignature, "", msg, ErrBadSignature)
}

// Malformed is the error for a callback that could not be read; its chain holds
// ErrMalformed. Its kind is KindPermanent: sending the same bytes again will not help.
func Malformed(p reconcile.Platform, msg string) *reconcile.PlatformError {
	return NewError(p, reconcile.KindPermanent, "", msg, ErrMalformed)
}
