package statement

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	kflate "github.com/klauspost/compress/flate"
	"github.com/payrecon/payrecon/reconcile"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// Alipay zip entry names end in these (after the "<userId>_<yyyyMMdd>_" prefix).
const (
	alipayDetailSuffix  = "业务明细.csv"
	alipaySummaryMarker = "汇总"
)

// OpenAlipayZip reads the zip Alipay's bill download serves: the detail CSV's lines, checked
// against its footer and against the summary CSV's 合计 row. Entry names are GBK (the zip
// does not flag them UTF-8); both encodings are understood.
func OpenAlipayZip(file string, opts ...Option) (ReadCloser, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open bill: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open bill: %w", err)
	}
	a, err := newAlipayZip(f, st.Size(), buildOptions(file, opts))
	if err != nil {
		f.Close()
		return nil, err
	}
	a.closer = closers{a.closer, f}
	return a, nil
}

// NewAlipayZip is OpenAlipayZip over a zip already at hand (size bytes of r).
func NewAlipayZip(r io.ReaderAt, size int64, opts ...Option) (ReadCloser, error) {
	a, err := newAlipayZip(r, size, buildOptions("alipay bill zip", opts))
	if err != nil {
		return nil, err
	}
	return a, nil
}

func newAlipayZip(r io.ReaderAt, size int64, o options) (*alipayReader, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, &RejectError{File: o.name, Reason: fmt.Sprintf("not a readable zip (cut short?): %v", err)}
	}
	// klauspost's inflate gives the same bytes as compress/flate in half the time, which is
	// a tenth of reading a bill; the zip's own CRC check still covers them.
	zr.RegisterDecompressor(zip.Deflate, kflate.NewReader)
	var detail, summary *zip.File
	for _, f := range zr.File {
		name := path.Base(entryName(f))
		switch {
		case strings.Contains(name, alipaySummaryMarker):
			summary = f
		case strings.HasSuffix(name, alipayDetailSuffix):
			detail = f
		}
	}
	if detail == nil {
		return nil, &RejectError{File: o.name, Reason: "the zip holds no " + alipayDetailSuffix + " entry"}
	}
	rc, err := detail.Open()
	if err != nil {
		return nil, &RejectError{File: o.name, Reason: fmt.Sprintf("open %s: %v", entryName(detail), err)}
	}
	file := o.name
	o.name = file + ":" + entryName(detail)
	a := newAlipayReaderAhead(rc, rc, o)
	if summary != nil {
		a.afterDetail = func(t Totals, payRecv, refRecv int64) error {
			return checkAlipaySummary(file+":"+entryName(summary), summary, t, payRecv-refRecv)
		}
	}
	return a, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// entryName decodes a zip entry's name: GBK unless the zip says UTF-8 and it is valid.
func entryName(f *zip.File) string {
	if !f.NonUTF8 && utf8.ValidString(f.Name) {
		return f.Name
	}
	s, err := simplifiedchinese.GBK.NewDecoder().String(f.Name)
	if err != nil {
		return f.Name
	}
	return s
}

// Summary columns checked against the detail.
const (
	alipaySumTrades   = "交易订单总笔数"
	alipaySumRefunds  = "退款订单总笔数"
	alipaySumReceived = "商家实收（元）"
	alipaySumTotalRow = "合计"
)

// checkAlipaySummary reads the summary entry's 合计 row and compares the counts and the net
// received amount with the detail. It is a few lines, read whole.
func checkAlipaySummary(name string, f *zip.File, t Totals, netReceived int64) error {
	rc, err := f.Open()
	if err != nil {
		return &RejectError{File: name, Reason: fmt.Sprintf("open: %v", err)}
	}
	defer rc.Close()
	rec := newCSVRecords(decodeAlipay(rc))
	var cols columns
	for {
		row, err := rec.next()
		if err == io.EOF {
			return &RejectError{File: name, Reason: "no " + alipaySumTotalRow + " row"}
		}
		if err != nil {
			return &RejectError{File: name, Line: rec.no, Reason: fmt.Sprintf("read: %v", err)}
		}
		if strings.HasPrefix(row[0], "#") {
			continue
		}
		if cols == nil {
			cols = newColumns(row)
			continue
		}
		if cell(row, 0) == alipaySumTotalRow {
			return compareAlipaySummary(name, rec.no, cols, row, t, netReceived)
		}
	}
}

func compareAlipaySummary(name string, no int, cols columns, row []string, t Totals, netReceived int64) error {
	bad := func(format string, args ...any) error {
		return &RejectError{File: name, Line: no, Reason: fmt.Sprintf(format, args...)}
	}
	for _, c := range []struct {
		col  string
		want int
	}{{alipaySumTrades, t.Payments}, {alipaySumRefunds, t.Refunds}} {
		i := cols.find(c.col)
		if i < 0 {
			return bad("summary has no column %s", c.col)
		}
		var n int
		if _, err := fmt.Sscan(cell(row, i), &n); err != nil {
			return bad("%s %q is not a count", c.col, cell(row, i))
		}
		if n != c.want {
			return bad("summary %s is %d, the detail has %d", c.col, n, c.want)
		}
	}
	if i := cols.find(alipaySumReceived); i >= 0 {
		v, err := reconcile.ParseYuanPlaces(cell(row, i), reconcile.FenPlaces)
		if err != nil {
			return bad("%s: %v", alipaySumReceived, err)
		}
		if v != netReceived {
			return bad("summary %s is %s, the detail adds up to %s", alipaySumReceived,
				reconcile.FormatYuanPlaces(v, reconcile.FenPlaces, 2), reconcile.FormatYuanPlaces(netReceived, reconcile.FenPlaces, 2))
		}
	}
	return nil
}
