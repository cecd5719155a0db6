package platformclient

import (
	"errors"
	"fmt"
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

// CheckNotifyMerchant refuses, like a bad signature, a verified notification that the
// provider self (an Alipay third-party app or a WeChat Pay service provider, with
// subMerchants) received for a merchant that is neither itself nor one of them: the
// provider's keys sign every sub-merchant's notifications, and a merchant we do not
// reconcile is not ours to apply, however well it is signed. A provider configured without
// sub-merchants refuses nothing here: its notifications name itself in practice, and any
// other merchant they name is the apply path's to classify.
func CheckNotifyMerchant(p reconcile.Platform, n reconcile.Notification, self string, subMerchants map[string]bool) error {
	if m := n.MerchantID(); len(subMerchants) > 0 && m != "" && m != self && !subMerchants[m] {
		field := "sub_mchid"
		if p == reconcile.Alipay {
			field = "auth_app_id"
		}
		return BadSignature(p, fmt.Sprintf("notification for %s %s, which is not a configured sub-merchant of %s", field, m, self))
	}
	return nil
}

// Malformed is the error for a callback that could not be read; its chain holds
// ErrMalformed. Its kind is KindPermanent: sending the same bytes again will not help.
func Malformed(p reconcile.Platform, msg string) *reconcile.PlatformError {
	return NewError(p, reconcile.KindPermanent, "", msg, ErrMalformed)
}
