package statement

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"
)

// checkAccepted holds what any bill a reader accepts must satisfy: positive amounts, lines
// numbered in increasing order, and totals that are the sum of the lines handed out.
func checkAccepted(t *testing.T, r Reader) {
	t.Helper()
	lines, err := readAll(r)
	if err != nil {
		var re *RejectError
		if !errors.As(err, &re) {
			t.Fatalf("an error that is not a rejection: %v", err)
		}
		return
	}
	var sum Totals
	prev := 0
	for _, l := range lines {
		if l.AmountMinor < 0 || l.ReceivedMinor < 0 || l.No <= prev || l.OutTradeNo == "" {
			t.Fatalf("accepted a bad line %+v after line %d", l, prev)
		}
		prev = l.No
		sum.add(l)
	}
	if sum != r.Totals() {
		t.Fatalf("totals %+v, lines add up to %+v", r.Totals(), sum)
	}
}

// FuzzAlipayCSV feeds the detail reader mutations of generated and documented bills. Its
// seeds run as an ordinary test.
func FuzzAlipayCSV(f *testing.F) {
	f.Add(gbk(f, alipaySample))
	f.Add([]byte(alipaySample))
	lines := sampleSlice(12, 4)
	f.Add(alipayCSVBytes(f, AlipayFile{UserID: "20880211096256330156", Day: testDay}, lines))
	f.Add(alipayCSVBytes(f, AlipayFile{UserID: "2088", Day: testDay, OldFooter: true}, lines))
	f.Add(alipayCSVBytes(f, AlipayFile{UserID: "2088", Day: testDay, SkewMinor: 1}, lines))
	f.Add(gbk(f, alipaySample[:len(alipaySample)/2]))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAccepted(t, NewAlipayCSV(bytes.NewReader(data)))
	})
}

// FuzzWeChatCSV does the same for WeChat Pay bills, plain and gzip.
func FuzzWeChatCSV(f *testing.F) {
	f.Add([]byte(wechatSample))
	f.Add(gz(f, []byte(wechatSample)))
	lines := sampleSlice(12, 4)
	for _, file := range []WeChatFile{{AppID: "wx1", MchID: "1800"}, {AppID: "wx1", MchID: "1800", BOM: true, OldHeader: true},
		{AppID: "wx1", MchID: "1800", Gzip: true}, {AppID: "wx1", MchID: "1800", SkewMinor: 1}} {
		b, _ := wechatBytes(f, file, lines)
		f.Add(b)
	}
	f.Add([]byte(wechatSample[:len(wechatSample)/2]))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAccepted(t, NewWeChatCSV(bytes.NewReader(data)))
	})
}

// FuzzAlipayZip feeds the zip reader mutations of a generated bill: damaged archives, entry
// names and contents must end in a rejection, never a panic or a bill that does not add up.
func FuzzAlipayZip(f *testing.F) {
	lines := sampleSlice(8, 4)
	f.Add(alipayZipBytes(f, AlipayFile{UserID: "20880211096256330156", Day: testDay}, lines))
	f.Add(alipayZipBytes(f, AlipayFile{UserID: "2088", Day: testDay, SkewMinor: 1}, lines))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewAlipayZip(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("an error that is not a rejection: %v", err)
			}
			return
		}
		defer r.Close()
		checkAccepted(t, r)
	})
}

// FuzzFastGBK holds the ASCII shortcut to x/text's GBK decoder on any bytes.
func FuzzFastGBK(f *testing.F) {
	f.Add(gbk(f, alipaySample))
	f.Add([]byte{'a', 0x81, '0', 0xb0, 0x41, 0x80, 0xff, 0x81})
	f.Fuzz(func(t *testing.T, data []byte) {
		want, _ := simplifiedchinese.GBK.NewDecoder().Bytes(data)
		got, err := io.ReadAll(transform.NewReader(bytes.NewReader(data), newFastGBK()))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("decoding % x: %q, %v; want %q", data, got, err, want)
		}
	})
}
