package reconcile

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FormatYuan writes an amount in minor units (fen) as yuan with two decimals, by integer
// arithmetic only: 8880 -> "88.80", -5 -> "-0.05". It is the one formatter for every amount
// payrecon sends (Alipay takes yuan) or shows (reports, the review workflow).
func FormatYuan(fen int64) string {
	sign := ""
	u := uint64(fen)
	if fen < 0 {
		sign = "-"
		u = uint64(-(fen + 1)) + 1 // safe for math.MinInt64
	}
	return fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
}

// FormatYuanOr is FormatYuan for a nullable amount: ifNull stands in for NULL, so each view
// chooses how an unknown amount looks ("" in CSV and JSON, "-" on a terminal).
func FormatYuanOr(fen *int64, ifNull string) string {
	if fen == nil {
		return ifNull
	}
	return FormatYuan(*fen)
}

// FormatYuanMilliFen writes thousandths of a fen as yuan with five decimals, exactly: bill
// fees (WeChat Pay writes them to five decimals) and the net after them. 198 -> "0.00198".
func FormatYuanMilliFen(mf int64) string {
	sign := ""
	u := uint64(mf)
	if mf < 0 {
		sign = "-"
		u = uint64(-(mf + 1)) + 1
	}
	return fmt.Sprintf("%s%d.%05d", sign, u/100000, u%100000)
}

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

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
