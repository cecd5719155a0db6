// Command billrss measures how fast a generated bill reads and the process's peak RSS while
// it does: the readers stream, so the figure must stay flat from 100k to 1M lines.
//
//	go run ./statement/internal/billrss -format alipay-zip -lines 1000000
//
// It writes the bill to a temporary file, then (in a fresh child process, so the writer's
// buffers do not count) reads it and prints lines, lines/s and peak RSS.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

func main() {
	format := flag.String("format", "alipay-zip", "alipay-zip, alipay-csv, wechat or wechat-gz")
	lines := flag.Int("lines", 100_000, "lines in the generated bill")
	read := flag.String("read", "", "internal: read this file and report (the child process)")
	flag.Parse()
	if err := run(*format, *lines, *read); err != nil {
		fmt.Fprintln(os.Stderr, "billrss:", err)
		os.Exit(1)
	}
}

func run(format string, n int, read string) error {
	platform := reconcile.Alipay
	if format == "wechat" || format == "wechat-gz" {
		platform = reconcile.WechatPay
	}
	if read != "" {
		return measure(platform, read)
	}
	dir, err := os.MkdirTemp("", "billrss")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bill")
	if err := generate(format, n, path); err != nil {
		return err
	}
	st, _ := os.Stat(path)
	fmt.Printf("format=%s lines=%d file_bytes=%d\n", format, n, st.Size())
	cmd := exec.Command(os.Args[0], "-format", format, "-read", path)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func generate(format string, n int, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	lines := statement.SampleLines(day, "T", n, 50)
	ali := statement.AlipayFile{UserID: "20880211096256330156", Day: day}
	wx := statement.WeChatFile{AppID: "wx1", MchID: "1800", Gzip: format == "wechat-gz"}
	switch format {
	case "alipay-zip":
		_, err = statement.WriteAlipayZip(f, ali, lines)
	case "alipay-csv":
		_, err = statement.WriteAlipayCSV(f, ali, lines)
	case "wechat", "wechat-gz":
		_, _, err = statement.WriteWeChatCSV(f, wx, lines)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func measure(platform reconcile.Platform, path string) error {
	start := time.Now()
	r, err := statement.Open(platform, path)
	if err != nil {
		return err
	}
	defer r.Close()
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		n++
	}
	secs := time.Since(start).Seconds()
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("read lines=%d seconds=%.2f lines_per_s=%.0f peak_rss_mib=%.1f\n", n, secs, float64(n)/secs, float64(ru.Maxrss)/1024)
	return nil
}
