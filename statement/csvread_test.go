package statement

import (
	"encoding/csv"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// record is one CSV record and the line it starts on.
type record struct {
	Line   int
	Fields []string
}

// stdRecords reads text with encoding/csv as csvRecords promises to: lazy quotes, any number
// of fields per record.
func stdRecords(text string) ([]record, error) {
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord, r.LazyQuotes = -1, true
	var out []record
	for {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		line, _ := r.FieldPos(0)
		out = append(out, record{line, row})
	}
}

func ownRecords(text string) ([]record, error) {
	c := newCSVRecordsTabbed(strings.NewReader(text))
	var out []record
	for {
		row, err := c.read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, record{c.no, append([]string(nil), row...)})
	}
}

func sameAsEncodingCSV(t *testing.T, text string) {
	t.Helper()
	want, werr := stdRecords(text)
	got, gerr := ownRecords(text)
	if (werr != nil) != (gerr != nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %v (err %v)\nwant %v (err %v)", text, got, gerr, want, werr)
	}
}

// TestCSVRecordsReadAsEncodingCSV: the bill's CSV reader splits every record where
// encoding/csv with lazy quotes does, and numbers it the same, for the shapes a bill takes
// and for a few thousand random mixes of quotes, commas and line breaks.
func TestCSVRecordsReadAsEncodingCSV(t *testing.T) {
	for _, text := range []string{
		"", "\n", "\r\n", "a", "a\n", "a,b,c\n", "a,,\n", ",\n", "a\r\nb\r\n", "a\rb\n", "a\r",
		"a\n\n\nb\n", "a\n\r\n\r\nb",
		`"a,b",c` + "\n", `"a""b",c` + "\n", `a"b,c` + "\n", `"a"b,c` + "\n", `"a" ,c` + "\n",
		`"a` + "\n" + `b",c` + "\n", `"a` + "\r\n" + `b"` + "\r\n", `"never closes,a` + "\n" + "b,c\n",
		`""` + "\n", `"",""` + "\n", `x,"` + "\n", `x,"`, `"a"` + "\r", `"a""` + "\n",
		"#支付宝交易记录明细查询\n#账号:[20880211096256330156]\n支付宝交易号,商户订单号\n2026112822001,T-1\n",
		`2026112822001,T-1,"商品, ""名称""",{"a":"1","b":"2"}` + "\n",
	} {
		sameAsEncodingCSV(t, text)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "支付", ",", ",", `"`, `"`, `""`, "\n", "\r\n", "\r", " ", "\t"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		sameAsEncodingCSV(t, b.String())
	}
}

// FuzzCSVRecords holds the same for any input.
func FuzzCSVRecords(f *testing.F) {
	f.Add(`a,"b,c",d` + "\n" + `"e` + "\n" + `f""g",h` + "\r\n\n")
	f.Add(alipaySample)
	f.Fuzz(func(t *testing.T, text string) { sameAsEncodingCSV(t, text) })
}
