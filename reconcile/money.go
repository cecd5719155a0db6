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

// The units amounts are kept in, as powers of ten of a yuan: fen (hundredths) for every
// amount, thousandths of a fen (hundred-thousandths) for the fees the bills write to five
// decimals and what is left after them.
const (
	FenPlaces      = 2
	MilliFenPlaces = 5
)

// ParseYuanPlaces reads a decimal yuan amount as the daily bills write it, optionally
// negative ("0.01", "-12.3", "0.00000"), into units of 10^-places of a yuan, exactly: money
// never goes through float64. Unlike ParseYuan (a platform's answer) it takes a sign and up
// to places decimals; it refuses what it would have to guess about: an empty string, a plus
// sign, exponents, separators, spaces, more decimals than places, a bare point and overflow.
func ParseYuanPlaces(s string, places int) (int64, error) {
	text := s
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac := s, ""
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		intPart, frac = s[:dot], s[dot+1:]
		if frac == "" {
			return 0, fmt.Errorf("%w: %q ends in a point", ErrAmount, text)
		}
	}
	if intPart == "" || len(frac) > places || !allDigits(intPart) || !allDigits(frac) {
		return 0, fmt.Errorf("%w: %q (want digits, at most %d decimals)", ErrAmount, text, places)
	}
	var v int64
	for i := 0; i < len(intPart)+places; i++ {
		var d int64
		switch {
		case i < len(intPart):
			d = int64(intPart[i] - '0')
		case i-len(intPart) < len(frac):
			d = int64(frac[i-len(intPart)] - '0')
		}
		if v > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("%w: %q out of range", ErrAmount, text)
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, nil
}

// FormatYuanPlaces writes units of 10^-places of a yuan as yuan with exactly show decimals,
// which must keep every nonzero digit (show <= places): a bill's own spelling of an amount.
func FormatYuanPlaces(v int64, places, show int) string {
	neg := v < 0
	if neg {
		v = -v
	}
	for i := show; i < places; i++ {
		v /= 10
	}
	s := fmt.Sprintf("%0*d", show+1, v)
	s = s[:len(s)-show] + "." + s[len(s)-show:]
	if neg {
		s = "-" + s
	}
	return s
}

// MilliFenToFen rounds thousandths of a fen to the fen, halves away from zero: a fee or a
// net as money is paid (the exact figure stays what the bill says).
func MilliFenToFen(mf int64) int64 {
	if mf < 0 {
		return -MilliFenToFen(-mf)
	}
	return (mf + 500) / 1000
}
