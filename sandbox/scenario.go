package sandbox

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// State is what the simulated platform knows about an order.
type State string

const (
	StateNotFound State = "not_found" // the default: the buyer never reached the platform
	StateOpen     State = "open"      // WAIT_BUYER_PAY / NOTPAY
	StatePaid     State = "paid"      // TRADE_SUCCESS / SUCCESS
	StateClosed   State = "closed"    // TRADE_CLOSED / CLOSED
	StateRefunded State = "refunded"  // Alipay TRADE_CLOSED after payment / WeChat REFUND
	StateFailed   State = "failed"    // WeChat PAYERROR (Alipay has no such state: TRADE_CLOSED)
)

// Scenario is one order as the platform sees it.
type Scenario struct {
	// MerchantID is the account the trade belongs to (Alipay app_id, WeChat mchid); empty
	// means the platform's default account. Another account asking about it finds nothing.
	MerchantID  string    `json:"merchant_id,omitempty"`
	State       State     `json:"state"`
	AmountMinor int64     `json:"amount_minor,omitempty"`
	Currency    string    `json:"currency,omitempty"` // WeChat amount.currency; default CNY
	TradeNo     string    `json:"trade_no,omitempty"` // generated when empty and the state needs one
	PaidAt      time.Time `json:"paid_at,omitzero"`   // default: when the scenario was set
	// RefundedAt is when a refunded order was refunded (its bill's refund line); default a
	// minute after PaidAt.
	RefundedAt time.Time `json:"refunded_at,omitzero"`
	// RawState overrides the platform's word for the state (TRADE_FINISHED, USERPAYING,
	// REVOKED, ...).
	RawState string `json:"raw_state,omitempty"`
	// AmountAsNumber makes Alipay send amounts as JSON numbers, as its documentation shows.
	AmountAsNumber bool `json:"amount_as_number,omitempty"`
	// BuyerLogonID is Alipay's masked buyer account; one with a '/' exercises EscapeSlashes.
	BuyerLogonID string `json:"buyer_logon_id,omitempty"`
	// Fault applies to this order's requests, before the platform-wide fault.
	Fault *Fault `json:"fault,omitempty"`
}

// Fault is a misbehaviour to inject. Several may be combined; Times bounds how many
// requests it affects.
type Fault struct {
	Latency    Duration `json:"latency,omitempty"`     // wait before answering
	LatencyMax Duration `json:"latency_max,omitempty"` // if set: wait uniformly in [Latency, LatencyMax]
	HTTPStatus int      `json:"http_status,omitempty"` // answer this status with a proxy's HTML page (e.g. 502)
	// RateLimited answers the platform's throttle: Alipay 40005, WeChat 429 FREQUENCY_LIMITED.
	RateLimited bool `json:"rate_limited,omitempty"`
	// ErrorCode answers a platform error: Alipay "ACQ.SYSTEM_ERROR", "isp.unknow-error",
	// "isv.insufficient-isv-permissions", "40004/ACQ.SOMETHING"; WeChat "SYSTEM_ERROR",
	// "NO_AUTH", "PARAM_ERROR", "SIGN_ERROR", ...
	ErrorCode string `json:"error_code,omitempty"`
	// Signature faults.
	BadSignature   bool `json:"bad_signature,omitempty"`   // signed with another key
	TamperBody     bool `json:"tamper_body,omitempty"`     // signed, then the body changed
	Unsigned       bool `json:"unsigned,omitempty"`        // no sign / no signature headers
	EscapeSlashes  bool `json:"escape_slashes,omitempty"`  // Alipay: '/' sent as "\/" (signed unescaped)
	StaleTimestamp bool `json:"stale_timestamp,omitempty"` // WeChat: Wechatpay-Timestamp 10 minutes old
	SignTest       bool `json:"sign_test,omitempty"`       // WeChat: a WECHATPAY/SIGNTEST/ probe signature
	WrongSerial    bool `json:"wrong_serial,omitempty"`    // WeChat: Wechatpay-Serial not the public key id
	// Transport faults.
	Truncate bool `json:"truncate,omitempty"` // connection cut halfway through the body
	Hang     bool `json:"hang,omitempty"`     // no answer until the caller gives up
	// Times is how many requests the fault affects before it clears itself; 0: all.
	Times int `json:"times,omitempty"`
}

// IsZero reports a fault that does nothing.
func (f Fault) IsZero() bool { return f == Fault{} }

// delay draws the latency to inject.
func (f Fault) delay() time.Duration {
	lo, hi := time.Duration(f.Latency), time.Duration(f.LatencyMax)
	if hi > lo {
		return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
	}
	return lo
}

// Duration is a time.Duration that reads "250ms" or nanoseconds from JSON.
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: want \"250ms\" or nanoseconds")
	}
	*d = Duration(n)
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ParseState accepts the State names (case-insensitive).
func ParseState(s string) (State, error) {
	st := State(strings.ToLower(s))
	switch st {
	case StateNotFound, StateOpen, StatePaid, StateClosed, StateRefunded, StateFailed:
		return st, nil
	case "":
		return StateNotFound, nil
	}
	return "", fmt.Errorf("unknown state %q (want not_found, open, paid, closed, refunded or failed)", s)
}

// orderKey identifies an order.
type orderKey struct {
	platform   reconcile.Platform
	outTradeNo string
}

// order is a scenario plus the budget left of its fault.
type order struct {
	sc    Scenario
	fault *faultState
}

type faultState struct {
	fault Fault
	left  int // -1: unlimited
}

func newFaultState(f Fault) *faultState {
	left := -1
	if f.Times > 0 {
		left = f.Times
	}
	return &faultState{fault: f, left: left}
}

// take returns the fault if it still applies, spending one use.
func (fs *faultState) take() (Fault, bool) {
	if fs == nil || fs.fault.IsZero() || fs.left == 0 {
		return Fault{}, false
	}
	if fs.left > 0 {
		fs.left--
	}
	return fs.fault, true
}
