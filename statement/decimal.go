package statement

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Places of the units the parsers produce: fen are hundredths of a yuan, milli-fen (the
// unit of fees, which WeChat Pay writes with five decimals) hundred-thousandths.
const (
	fenPlaces      = 2
	milliFenPlaces = 5
)

var errDecimal = errors.New("not an amount")

// parseDecimal reads an optionally negative decimal yuan amount ("0.01", "-12.3", "0.00000")
// into units of 10^-places of a yuan, exactly: money never goes through float64. It refuses
// what it would have to guess about: an empty string, a plus sign, exponents, separators,
// spaces, more decimals than places, a bare point and overflow.
func parseDecimal(s string, places int) (int64, error) {
	text := s
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac := s, ""
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		intPart, frac = s[:dot], s[dot+1:]
		if frac == "" {
			return 0, fmt.Errorf("%w: %q ends in a point", errDecimal, text)
		}
	}
	if intPart == "" || len(frac) > places || !digits(intPart) || !digits(frac) {
		return 0, fmt.Errorf("%w: %q (want digits, at most %d decimals)", errDecimal, text, places)
	}
	var v int64
	for i := 0; i < len(intPart); i++ {
		d := int64(intPart[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("%w: %q out of range", errDecimal, text)
		}
		v = v*10 + d
	}
	for i := 0; i < places; i++ {
		var d int64
		if i < len(frac) {
			d = int64(frac[i] - '0')
		}
		if v > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("%w: %q out of range", errDecimal, text)
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// formatDecimal writes units of 10^-places of a yuan with exactly `show` decimals, which
// must keep every nonzero digit (show <= places).
func formatDecimal(v int64, places, show int) string {
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

// feeDecimals is how many decimals a fee needs: two unless its milli-fen say otherwise.
func feeDecimals(milliFen int64) int {
	switch {
	case milliFen%1000 == 0:
		return 2
	case milliFen%100 == 0:
		return 3
	case milliFen%10 == 0:
		return 4
	}
	return 5
}
