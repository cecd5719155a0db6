package platformclient

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
)

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

func TestYuanJSONAcceptsStringAndNumberLiterals(t *testing.T) {
	var v struct {
		A Yuan  `json:"a"`
		B Yuan  `json:"b"`
		C *Yuan `json:"c"`
		D Yuan  `json:"d"`
	}
	if err := json.Unmarshal([]byte(`{"a":"88.88","b":88.8,"c":null,"d":0.01}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 8888 || v.B != 8880 || v.C != nil || v.D != 1 {
		t.Fatalf("got %+v", v)
	}
	// A float64 detour would turn 0.29 into 28 fen (0.29*100 = 28.999999999999996).
	if err := json.Unmarshal([]byte(`{"a":0.29,"b":"1.15"}`), &v); err != nil || v.A != 29 || v.B != 115 {
		t.Fatalf("got %+v, %v", v, err)
	}
	for _, in := range []string{`{"a":1e2}`, `{"a":"1.234"}`, `{"a":-1}`, `{"a":true}`, `{"a":""}`, `{"a":{}}`} {
		if err := json.Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("%s: want an error", in)
		}
	}
	out, err := json.Marshal(Yuan(8880))
	if err != nil || string(out) != `"88.80"` {
		t.Fatalf("marshal = %s, %v", out, err)
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
			back, err := ParseYuan(reconcile.FormatYuan(got))
			if err != nil || back != got {
				t.Fatalf("round trip of %d via %q: %d, %v", got, reconcile.FormatYuan(got), back, err)
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
