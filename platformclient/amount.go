package platformclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/payrecon/payrecon/reconcile"
)

// maxYuanInteger is the largest whole-yuan part whose fen value still fits in an int64.
const maxYuanInteger = math.MaxInt64 / 100

// ErrAmount is wrapped by every amount parsing failure.
var ErrAmount = errors.New("invalid yuan amount")

// ParseYuan reads a yuan amount as the platforms send it ("88.80", "88.8", "100", "0.01")
// into fen, exactly. It refuses anything it would have to guess about: signs, exponents,
// more than two decimals, spaces, separators, leading zeros, empty input and overflow.
// Money never goes through float64.
func ParseYuan(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrAmount)
	}
	intPart, frac := s, ""
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		intPart, frac = s[:dot], s[dot+1:]
		if frac == "" || len(frac) > 2 {
			return 0, fmt.Errorf("%w %q: want at most two decimals after the point", ErrAmount, s)
		}
	}
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return 0, fmt.Errorf("%w %q: want digits with an optional point", ErrAmount, s)
	}
	if len(intPart) > 1 && intPart[0] == '0' {
		return 0, fmt.Errorf("%w %q: leading zero", ErrAmount, s)
	}
	whole, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil || whole > maxYuanInteger {
		return 0, fmt.Errorf("%w %q: out of range", ErrAmount, s)
	}
	var cents int64
	switch len(frac) {
	case 1:
		cents = int64(frac[0]-'0') * 10
	case 2:
		cents = int64(frac[0]-'0')*10 + int64(frac[1]-'0')
	}
	fen := whole * 100
	if fen > math.MaxInt64-cents {
		return 0, fmt.Errorf("%w %q: out of range", ErrAmount, s)
	}
	return fen + cents, nil
}

// Yuan is an amount in fen read from a JSON yuan value. The platforms' documentation shows
// JSON numbers (88.88) while real answers carry strings ("88.88"): both are accepted, and a
// number is handed to ParseYuan as its literal text, never through float64. A JSON null
// leaves the amount at zero ("the platform did not say").
type Yuan int64

// UnmarshalJSON implements json.Unmarshaler on the raw token.
func (y *Yuan) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	text := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &text); err != nil {
			return fmt.Errorf("%w: %v", ErrAmount, err)
		}
	}
	fen, err := ParseYuan(text)
	if err != nil {
		return err
	}
	*y = Yuan(fen)
	return nil
}

// MarshalJSON writes the amount as a yuan string, the form real answers use.
func (y Yuan) MarshalJSON() ([]byte, error) {
	return json.Marshal(reconcile.FormatYuan(int64(y)))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
