package reconcile

import (
	"errors"
	"math"
	"math/big"
	"regexp"
	"strconv"
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

func TestParseYuan(t *testing.T) {
	good := map[string]int64{
		"0.01": 1, "88.8": 8880, "88.80": 8880, "100": 10000, "0": 0, "0.00": 0, "0.5": 50,
		"1.05": 105, "12345678.90": 1234567890,
		"92233720368547758.07": math.MaxInt64, // the largest amount that fits
	}
	for in, want := range good {
		got, err := ParseYuan(in)
		if err != nil || got != want {
			t.Errorf("ParseYuan(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := []string{"", "1e2", "-1.00", "+1", "1.234", " 1", "1 ", "1,00", "1.", ".5", "01.00", "00",
		"1..2", "1.2.3", "0x10", "NaN", "Inf", "１", "92233720368547758.08", "99999999999999999999", "1_000"}
	for _, in := range bad {
		if got, err := ParseYuan(in); err == nil || !errors.Is(err, ErrAmount) {
			t.Errorf("ParseYuan(%q) = %d, %v; want an ErrAmount error", in, got, err)
		}
	}
}

var yuanGrammar = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$`)

// FuzzParseYuan checks ParseYuan against an independent oracle: a grammar plus exact
// big.Rat arithmetic. Its seeds run as an ordinary test.
func FuzzParseYuan(f *testing.F) {
	for _, s := range []string{"0.01", "88.8", "100", "", "1e2", "-1.00", "+1", "1.234", " 1", "1,00",
		"92233720368547758.07", "92233720368547758.08", "007", "5.", ".5", "0.00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseYuan(s)
		want, ok := oracleYuan(s)
		if ok != (err == nil) {
			t.Fatalf("ParseYuan(%q) err=%v, oracle ok=%v", s, err, ok)
		}
		if ok && got != want {
			t.Fatalf("ParseYuan(%q) = %d, oracle %d", s, got, want)
		}
		if ok {
			back, err := ParseYuan(FormatYuan(got))
			if err != nil || back != got {
				t.Fatalf("round trip of %d via %q: %d, %v", got, FormatYuan(got), back, err)
			}
		}
	})
}

func oracleYuan(s string) (int64, bool) {
	if !yuanGrammar.MatchString(s) {
		return 0, false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, false
	}
	r.Mul(r, big.NewRat(100, 1))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	v, err := strconv.ParseInt(r.Num().String(), 10, 64)
	return v, err == nil
}

func TestParseYuanPlaces(t *testing.T) {
	for _, c := range []struct {
		in     string
		places int
		want   int64
		ok     bool
	}{
		{"0.01", 2, 1, true}, {"-0.04", 2, -4, true}, {"12.3", 2, 1230, true}, {"100", 2, 10000, true},
		{"0.00000", 5, 0, true}, {"-0.00600", 5, -600, true}, {"1.23456", 5, 123456, true},
		{"0.001", 2, 0, false}, {"", 2, 0, false}, {"1.", 2, 0, false}, {".5", 2, 0, false},
		{"+1.00", 2, 0, false}, {"1e3", 2, 0, false}, {"1,000.00", 2, 0, false}, {" 1.00", 2, 0, false},
		{"-", 2, 0, false}, {"92233720368547758.08", 2, 0, false}, {"0.000001", 5, 0, false},
	} {
		got, err := ParseYuanPlaces(c.in, c.places)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseYuanPlaces(%q, %d) = %d, %v; want %d ok=%v", c.in, c.places, got, err, c.want, c.ok)
		}
	}
}

func TestFormatYuanPlaces(t *testing.T) {
	for _, c := range []struct {
		v            int64
		places, show int
		want         string
	}{{1, 2, 2, "0.01"}, {-4, 2, 2, "-0.04"}, {600, 5, 5, "0.00600"}, {600, 5, 3, "0.006"}, {-123000, 5, 2, "-1.23"}} {
		if got := FormatYuanPlaces(c.v, c.places, c.show); got != c.want {
			t.Errorf("FormatYuanPlaces(%d,%d,%d) = %q, want %q", c.v, c.places, c.show, got, c.want)
		}
	}
}

func TestMilliFenToFen(t *testing.T) {
	for mf, want := range map[int64]int64{0: 0, 499: 0, 500: 1, 1499: 1, 1500: 2, 117745264: 117745, -500: -1, -499: 0, 7107360: 7107} {
		if got := MilliFenToFen(mf); got != want {
			t.Errorf("MilliFenToFen(%d) = %d, want %d", mf, got, want)
		}
	}
}
