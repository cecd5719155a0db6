package reconcile

import (
	"math"
	"testing"
)

func TestFormatYuan(t *testing.T) {
	tests := []struct {
		fen  int64
		want string
	}{
		{0, "0.00"}, {1, "0.01"}, {9, "0.09"}, {10, "0.10"}, {99, "0.99"}, {100, "1.00"}, {101, "1.01"},
		{8880, "88.80"}, {12345, "123.45"}, {100000000, "1000000.00"}, {-1, "-0.01"}, {-5, "-0.05"},
		{-150, "-1.50"}, {-12345, "-123.45"}, {math.MaxInt64, "92233720368547758.07"}, {math.MinInt64, "-92233720368547758.08"},
	}
	for _, tc := range tests {
		if got := FormatYuan(tc.fen); got != tc.want {
			t.Errorf("FormatYuan(%d) = %q, want %q", tc.fen, got, tc.want)
		}
	}
}

func TestFormatYuanOr(t *testing.T) {
	five := int64(-5)
	if got := FormatYuanOr(nil, "-"); got != "-" {
		t.Errorf("FormatYuanOr(nil, \"-\") = %q", got)
	}
	if got := FormatYuanOr(nil, ""); got != "" {
		t.Errorf("FormatYuanOr(nil, \"\") = %q", got)
	}
	if got := FormatYuanOr(&five, "-"); got != "-0.05" {
		t.Errorf("FormatYuanOr(-5) = %q, want -0.05", got)
	}
}
