package statement

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
)

const benchLines = 100_000

// benchFile writes a generated bill of benchLines lines (every 50th a refund) once.
func benchFile(b *testing.B, name string, write func(f *os.File) error) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := write(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p
}

func benchRead(b *testing.B, platform reconcile.Platform, path string) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := Open(platform, path)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
			n++
		}
		r.Close()
		if n != benchLines {
			b.Fatalf("%d lines, want %d", n, benchLines)
		}
	}
	b.ReportMetric(float64(benchLines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

var benchAlipay = AlipayFile{UserID: "20880211096256330156", Day: testDay}

func BenchmarkReadAlipayZip(b *testing.B) {
	p := benchFile(b, "bill.csv.zip", func(f *os.File) error {
		_, err := WriteAlipayZip(f, benchAlipay, SampleLines(testDay, "T", benchLines, 50))
		return err
	})
	benchRead(b, reconcile.Alipay, p)
}

func BenchmarkReadAlipayCSV(b *testing.B) {
	p := benchFile(b, "detail.csv", func(f *os.File) error {
		_, err := WriteAlipayCSV(f, benchAlipay, SampleLines(testDay, "T", benchLines, 50))
		return err
	})
	benchRead(b, reconcile.Alipay, p)
}

func BenchmarkReadWeChatPlain(b *testing.B) {
	p := benchFile(b, "bill.csv", func(f *os.File) error {
		_, _, err := WriteWeChatCSV(f, WeChatFile{AppID: "wx1", MchID: "1800"}, SampleLines(testDay, "T", benchLines, 50))
		return err
	})
	benchRead(b, reconcile.WechatPay, p)
}

func BenchmarkReadWeChatGzip(b *testing.B) {
	p := benchFile(b, "bill.csv.gz", func(f *os.File) error {
		_, _, err := WriteWeChatCSV(f, WeChatFile{AppID: "wx1", MchID: "1800", Gzip: true}, SampleLines(testDay, "T", benchLines, 50))
		return err
	})
	benchRead(b, reconcile.WechatPay, p)
}
