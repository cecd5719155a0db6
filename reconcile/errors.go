package reconcile

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned by a Store when no row matches.
var ErrNotFound = errors.New("not found")

// ErrRetryable marks an apply that failed for a passing reason (database error, lost
// connection). Nothing was applied and no claim was left behind: the same result may be
// applied again later.
var ErrRetryable = errors.New("retryable")

// PlatformErrorKind classifies a failed platform call so the caller knows what to do next.
type PlatformErrorKind int

const (
	// KindRetryable: timeout, 5xx, SYSTEM_ERROR, truncated body. Ask again later.
	KindRetryable PlatformErrorKind = iota + 1
	// KindRateLimited: the platform throttled us. Slow down and come back; never a result.
	KindRateLimited
	// KindBadSignature: the answer did not verify. Never applied; a security event.
	KindBadSignature
	// KindConfig: our credentials or parameters are wrong (bad key, bad app id, no
	// permission). Every further call will fail the same way: stop the pass.
	KindConfig
	// KindUnavailable: the circuit breaker is open; the platform was not called.
	KindUnavailable
	// KindAlreadyPaid: a close was refused because the trade was paid meanwhile.
	KindAlreadyPaid
	// KindPermanent: the request itself was refused for this order (bad parameter).
	KindPermanent
)

func (k PlatformErrorKind) String() string {
	switch k {
	case KindRetryable:
		return "retryable"
	case KindRateLimited:
		return "rate_limited"
	case KindBadSignature:
		return "bad_signature"
	case KindConfig:
		return "config"
	case KindUnavailable:
		return "unavailable"
	case KindAlreadyPaid:
		return "already_paid"
	case KindPermanent:
		return "permanent"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// PlatformError is every error a platform client returns. Message and Code come from the
// platform (or describe the transport failure); they never hold key material.
type PlatformError struct {
	Platform Platform
	Kind     PlatformErrorKind
	Code     string // platform code: "40004/ACQ.SYSTEM_ERROR", "FREQUENCY_LIMITED", "HTTP 502"
	Message  string
	Err      error // underlying transport error, if any
}

func (e *PlatformError) Error() string {
	s := fmt.Sprintf("%s %s error", e.Platform, e.Kind)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *PlatformError) Unwrap() error { return e.Err }

// PlatformErrorKindOf returns the kind of a platform error anywhere in err's chain, or 0.
func PlatformErrorKindOf(err error) PlatformErrorKind {
	var pe *PlatformError
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return 0
}

// InputError is a value a person typed (a flag, a filter, a date) that cannot be used. Msg
// says which value and why, in words for that person; the binary prints it and exits 2
// (bad usage), so the packages that read such values need not know about exit codes.
type InputError struct {
	Msg string
	// Err, when set, says what kind of mistake it is (ErrReportPeriodTooLong, ...), for a
	// reader that words it itself: the console says it in its page's language.
	Err error
}

func (e *InputError) Error() string { return e.Msg }

// Unwrap makes errors.Is(err, e.Err) hold.
func (e *InputError) Unwrap() error { return e.Err }

// Inputf is an InputError with a formatted message.
func Inputf(format string, a ...any) error { return &InputError{Msg: fmt.Sprintf(format, a...)} }
