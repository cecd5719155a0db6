package render

import (
	"math"
	"testing"
)

// TestXLSXAmountIsExact: an amount is a number cell only when the float64 holds exactly its
// decimal text; one too large for that stays its text rather than be rounded.
func TestXLSXAmountIsExact(t *testing.T) {
	for fen, want := range map[int64]any{0: 0.0, 5: 0.05, 123456: 1234.56, 100: 1.0, -99999: -999.99,
		99_999_999_999_999: 999999999999.99, math.MaxInt64: "92233720368547758.07", math.MinInt64: "-92233720368547758.08"} {
		if got := xlsxAmount(fen); got != want {
			t.Errorf("xlsxAmount(%d) = %#v, want %#v", fen, got, want)
		}
	}
}
