package statement

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

var testDay = time.Date(2019, 9, 16, 0, 0, 0, 0, chinaTime)

// readAll drains a reader; the error is the one that ended it (nil for io.EOF).
func readAll(r Reader) ([]Line, error) {
	var out []Line
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, l)
	}
}

func gbk(t testing.TB, s string) []byte {
	t.Helper()
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("gbk: %v", err)
	}
	return b
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func alipayZipBytes(t testing.TB, f AlipayFile, lines []Line) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := WriteAlipayZip(&b, f, slices.Values(lines)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func alipayCSVBytes(t testing.TB, f AlipayFile, lines []Line) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := WriteAlipayCSV(&b, f, slices.Values(lines)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func wechatBytes(t testing.TB, f WeChatFile, lines []Line) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	sum, _, err := WriteWeChatCSV(&b, f, slices.Values(lines))
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), sum
}

// wantReject checks err is a *RejectError on line (0: not on a line).
func wantReject(t *testing.T, err error, line int) *RejectError {
	t.Helper()
	var re *RejectError
	if !errors.As(err, &re) || !errors.Is(err, ErrRejected) {
		t.Fatalf("want a rejection, got %v", err)
	}
	if re.Line != line {
		t.Fatalf("rejected on line %d, want %d: %v", re.Line, line, err)
	}
	return re
}

// sameLines compares what a reader gave back with what a generator was given. Only Alipay's
// bill carries the order's creation time, and only WeChat Pay's the platform's refund number
// and the refund's status: alipay says which reader it was.
func sameLines(t *testing.T, got, want []Line, alipay bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if w.ReceivedMinor == 0 {
			w.ReceivedMinor = w.AmountMinor
		}
		g.No, g.MerchantID = 0, ""
		w.No, w.MerchantID = 0, ""
		if !g.At.Equal(w.At) {
			t.Fatalf("line %d at %v, want %v", i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		// What a bill carries must be read back, and what it does not must not be invented.
		if alipay {
			w.PlatformRefundNo, w.RefundStatus = "", ""
		} else {
			w.CreatedAt = time.Time{}
		}
		if !g.CreatedAt.Equal(w.CreatedAt) {
			t.Fatalf("line %d created %v, want %v", i, g.CreatedAt, w.CreatedAt)
		}
		g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
		if g != w {
			t.Fatalf("line %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func sampleSlice(n, refundEvery int) []Line {
	return slices.Collect(SampleLines(testDay, "T", n, refundEvery))
}

func simplifiedChineseDecode(b []byte) (string, error) {
	out, err := simplifiedchinese.GBK.NewDecoder().Bytes(b)
	return string(out), err
}

func slicesValues(l []Line) func(func(Line) bool) { return slices.Values(l) }

func asReject(err error, re **RejectError) bool {
	return errors.As(err, re) && errors.Is(err, ErrRejected)
}
