package statement

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	kgzip "github.com/klauspost/compress/gzip"

	"github.com/payrecon/payrecon/reconcile"
)

// WeChat Pay detail columns, found by name; where older bills use another name, both.
const (
	wxColTime        = "交易时间"
	wxColMchID       = "商户号"
	wxColSubMchID    = "特约商户号"
	wxColTxnID       = "微信订单号"
	wxColOutTrade    = "商户订单号"
	wxColState       = "交易状态"
	wxColCurrency    = "货币种类"
	wxColSettle      = "应结订单金额"
	wxColSettleOld   = "总金额"
	wxColRefundID    = "微信退款单号"
	wxColOutRefund   = "商户退款单号"
	wxColRefund      = "退款金额"
	wxColRefundState = "退款状态"
	wxColFee         = "手续费"
	wxColOrder       = "订单金额"
	wxColApplyRefund = "申请退款金额"
	// The merchant's own text: the only columns that may hold ",`".
	wxColProduct = "商品名称"
	wxColAttach  = "商户数据包"

	wxSumCount       = "总交易单数"
	wxSumSettle      = "应结订单总金额"
	wxSumSettleOld   = "总交易额"
	wxSumRefund      = "退款总金额"
	wxSumRefundOld   = "总退款金额"
	wxSumFee         = "手续费总金额"
	wxSumOrder       = "订单总金额"
	wxSumApplyRefund = "申请退款总金额"

	wxStatePaid     = "SUCCESS"
	wxStateRefund   = "REFUND"
	wxRefundPending = "PROCESSING"
	wxRefundDone    = "SUCCESS"
)

var gzipMagic = []byte{0x1f, 0x8b}

type wxIdx struct {
	time, mch, subMch, txn, out, state, currency, settle, refundID, outRefund, refund, refundState, fee, order, apply int
}

// read is every column the reader reads.
func (x wxIdx) read() []int {
	return []int{x.time, x.mch, x.subMch, x.txn, x.out, x.state, x.currency, x.settle, x.refundID, x.outRefund,
		x.refund, x.refundState, x.fee, x.order, x.apply}
}

// wechatReader reads a WeChat Pay trade bill, plain or gzip.
type wechatReader struct {
	opt   options
	days  chinaDays
	src   io.Reader
	lr    *lineReader
	sha   hash.Hash
	state int // 0 before the header, 1 in the rows, 2 summary header seen, 3 summary row seen
	idx   wxIdx
	cols  int // fields the header names
	// textEnd is the first column after the merchant's text (商品名称, 商户数据包); 0 when the
	// header has none. extra is how many more fields than cols the current row has: text
	// that held ",`" split into them, and the columns from textEnd on moved right by extra.
	textEnd, extra int
	row            []string
	sums           Totals
	settle         int64 // sums of 应结订单金额, 退款金额 and 订单金额/申请退款金额 as the summary states them
	refund         int64
	sumCol         columns
	sumRow         []string
	sumNo          int
	closer         io.Closer
	err            error
}

// NewWeChatCSV reads a WeChat Pay trade bill (bill_type ALL), plain or gzip (told apart by
// the first bytes), with or without a BOM, in either header variant.
func NewWeChatCSV(r io.Reader, opts ...Option) Reader {
	return &wechatReader{opt: buildOptions("wechatpay bill", opts), src: r}
}

func (w *wechatReader) Totals() Totals { return w.sums }

func (w *wechatReader) Close() error {
	if w.closer == nil {
		return nil
	}
	return w.closer.Close()
}

func (w *wechatReader) reject(line int, format string, args ...any) error {
	return w.rejectColumn(line, "", format, args...)
}

// rejectColumn refuses the bill for what column (a header name) of line holds.
func (w *wechatReader) rejectColumn(line int, column, format string, args ...any) error {
	w.err = &RejectError{File: w.opt.name, Line: line, Column: column, Reason: fmt.Sprintf(format, args...)}
	return w.err
}

// open sniffs gzip and starts the digest over the unzipped bytes.
func (w *wechatReader) open() error {
	if w.opt.sha1Hex != "" && !validHex(w.opt.sha1Hex) {
		return w.reject(0, "expected SHA1 %q is not 40 hex digits", w.opt.sha1Hex)
	}
	br := bufio.NewReader(w.src)
	var text io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == gzipMagic[0] && magic[1] == gzipMagic[1] {
		zr, err := kgzip.NewReader(br) // compress/gzip's format, inflated in half the time
		if err != nil {
			return w.reject(0, "bad gzip: %v", err)
		}
		text = zr
	}
	w.sha = sha1.New()
	text = io.TeeReader(text, w.sha)
	if w.closer != nil {
		// A bill opened from a file is unzipped and digested ahead of the parsing; w.sha is
		// read only after the last block came through, once the goroutine is done with it.
		ra := newReadAhead(text)
		w.closer, text = closers{ra, w.closer}, ra
	}
	w.lr = newLineReader(text)
	return nil
}

// Next returns the next detail line; see Reader.
func (w *wechatReader) Next() (Line, error) {
	if w.err != nil {
		return Line{}, w.err
	}
	if w.lr == nil {
		if err := w.open(); err != nil {
			return Line{}, err
		}
	}
	for {
		raw, err := w.lr.next()
		if err == io.EOF {
			return Line{}, w.finish()
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return Line{}, w.reject(w.lr.no, "the file is cut short: %v", err)
			}
			return Line{}, w.reject(w.lr.no, "read: %v", err)
		}
		if strings.TrimSpace(raw) == "" {
			continue
		}
		if w.state == 1 && strings.HasPrefix(raw, "`") {
			return w.line(raw)
		}
		if err := w.step(raw); err != nil {
			return Line{}, err
		}
	}
}

// step reads one non-blank line that is not a detail row: the header, the summary header or
// the summary row.
func (w *wechatReader) step(raw string) error {
	switch w.state {
	case 0:
		if err := w.header(raw); err != nil {
			return err
		}
		w.state = 1
	case 1:
		if !strings.HasPrefix(cleanCell(raw), wxSumCount) {
			return w.reject(w.lr.no, "a detail row must start with a backtick")
		}
		w.sumCol, w.state = newColumns(splitNames(nil, raw)), 2
	case 2:
		row, ok := splitBackticks(nil, raw)
		if !ok {
			return w.reject(w.lr.no, "the summary row must start with a backtick")
		}
		w.sumRow, w.sumNo, w.state = row, w.lr.no, 3
	default:
		return w.reject(w.lr.no, "text after the summary row")
	}
	return nil
}

// header maps the header row's names (plain, comma-separated) to positions.
func (w *wechatReader) header(raw string) error {
	names := splitNames(w.row[:0], raw)
	c := newColumns(names)
	w.cols = len(names)
	w.idx = wxIdx{
		time: c.find(wxColTime), mch: c.find(wxColMchID), subMch: c.find(wxColSubMchID),
		txn: c.find(wxColTxnID), out: c.find(wxColOutTrade), state: c.find(wxColState),
		currency: c.find(wxColCurrency), settle: c.find(wxColSettle, wxColSettleOld), refundID: c.find(wxColRefundID),
		outRefund: c.find(wxColOutRefund), refund: c.find(wxColRefund), refundState: c.find(wxColRefundState),
		fee: c.find(wxColFee), order: c.find(wxColOrder), apply: c.find(wxColApplyRefund),
	}
	for _, req := range []struct {
		name string
		at   int
	}{{wxColTime, w.idx.time}, {wxColTxnID, w.idx.txn}, {wxColOutTrade, w.idx.out},
		{wxColState, w.idx.state}, {wxColSettle, w.idx.settle}, {wxColRefund, w.idx.refund}} {
		if req.at < 0 {
			return w.rejectColumn(w.lr.no, req.name, "the header has no such column: not a WeChat Pay trade bill")
		}
	}
	w.textEnd = textEnd(c, w.idx)
	return nil
}

// textEnd is the first column after the merchant's text columns, which a row reads from its
// end when that text held ",`"; 0 (nothing read from the end) when the header has no such
// column, or when a column the reader needs lies between them and so could not be placed.
func textEnd(c columns, idx wxIdx) int {
	lo, end := -1, 0
	for _, i := range []int{c.find(wxColProduct), c.find(wxColAttach)} {
		if i < 0 {
			continue
		}
		if lo < 0 || i < lo {
			lo = i
		}
		end = max(end, i+1)
	}
	for _, i := range idx.read() {
		if lo >= 0 && i > lo && i < end {
			return 0
		}
	}
	return end
}

// fit checks that a row has the header's number of fields, or more only where the merchant's
// text may have held ",`", and notes how many more.
func (w *wechatReader) fit(no, n int) error {
	w.extra = n - w.cols
	if w.extra == 0 || w.extra > 0 && w.textEnd > 0 {
		return nil
	}
	return w.reject(no, "%d fields, the header names %d", n, w.cols)
}

// cell is column i of the current row, counted from the row's end past the merchant's text.
func (w *wechatReader) cell(row []string, i int) string {
	if w.extra > 0 && i >= w.textEnd {
		i += w.extra
	}
	return cell(row, i)
}

// amount reads a column that must hold a non-negative amount; a missing column reads as
// the fallback's value.
func (w *wechatReader) amount(no int, row []string, i int, name string, fallback int64) (int64, error) {
	if i < 0 {
		return fallback, nil
	}
	v, err := reconcile.ParseYuanPlaces(w.cell(row, i), reconcile.FenPlaces)
	if err != nil {
		return 0, w.rejectColumn(no, name, "%v", err)
	}
	if v < 0 {
		return 0, w.rejectColumn(no, name, "negative")
	}
	return v, nil
}

// line parses one detail row.
func (w *wechatReader) line(raw string) (Line, error) {
	no := w.lr.no
	row, _ := splitBackticks(w.row[:0], raw)
	w.row = row[:0]
	if err := w.fit(no, len(row)); err != nil {
		return Line{}, err
	}
	l := Line{No: no, OutTradeNo: w.cell(row, w.idx.out), PlatformTradeNo: w.cell(row, w.idx.txn),
		Currency: w.cell(row, w.idx.currency), MerchantID: w.cell(row, w.idx.mch)}
	if sub := w.cell(row, w.idx.subMch); sub != "" && sub != "0" {
		l.MerchantID = sub
	}
	if l.Currency == "" {
		l.Currency = reconcile.DefaultCurrency
	}
	if l.OutTradeNo == "" {
		return Line{}, w.rejectColumn(no, wxColOutTrade, "empty")
	}
	if l.PlatformTradeNo == "" {
		return Line{}, w.rejectColumn(no, wxColTxnID, "empty")
	}
	var err error
	if l.At, err = w.days.parse(w.cell(row, w.idx.time)); err != nil {
		return Line{}, w.rejectColumn(no, wxColTime, "%v", err)
	}
	if err := w.kindAndAmounts(no, row, &l); err != nil {
		return Line{}, err
	}
	if fee := w.cell(row, w.idx.fee); fee != "" {
		if l.FeeMilliFen, err = reconcile.ParseYuanPlaces(fee, reconcile.MilliFenPlaces); err != nil {
			return Line{}, w.rejectColumn(no, wxColFee, "%v", err)
		}
	}
	w.sums.add(l)
	if l.Kind == reconcile.BillPayment {
		w.settle += l.ReceivedMinor
	} else {
		w.refund += l.ReceivedMinor
	}
	return l, nil
}

// kindAndAmounts reads what the row records: a payment (its settled and order amounts) or a
// refund (its numbers, status and amounts).
func (w *wechatReader) kindAndAmounts(no int, row []string, l *Line) error {
	var err error
	switch st := w.cell(row, w.idx.state); st {
	case wxStatePaid:
		l.Kind = reconcile.BillPayment
		if l.ReceivedMinor, err = w.amount(no, row, w.idx.settle, wxColSettle, 0); err == nil {
			l.AmountMinor, err = w.amount(no, row, w.idx.order, wxColOrder, l.ReceivedMinor)
		}
	case wxStateRefund:
		l.Kind, l.RefundNo, l.PlatformRefundNo = reconcile.BillRefund, w.cell(row, w.idx.outRefund), w.cell(row, w.idx.refundID)
		l.RefundStatus = w.cell(row, w.idx.refundState)
		l.Pending = l.RefundStatus == wxRefundPending
		if l.ReceivedMinor, err = w.amount(no, row, w.idx.refund, wxColRefund, 0); err == nil {
			l.AmountMinor, err = w.amount(no, row, w.idx.apply, wxColApplyRefund, l.ReceivedMinor)
		}
	default:
		return w.rejectColumn(no, wxColState, "%q is neither %s nor %s", st, wxStatePaid, wxStateRefund)
	}
	return err
}

// finish checks the digest, then the summary row, at the end of the file.
func (w *wechatReader) finish() error {
	if w.state < 3 {
		return w.reject(0, "no summary row: the file is incomplete")
	}
	if w.opt.sha1Hex != "" {
		if got := hex.EncodeToString(w.sha.Sum(nil)); got != w.opt.sha1Hex {
			return w.reject(0, "SHA1 of the bill is %s, the platform declared %s", got, w.opt.sha1Hex)
		}
	}
	if err := w.checkSummary(); err != nil {
		return err
	}
	w.err = io.EOF
	return io.EOF
}

func (w *wechatReader) checkSummary() error {
	countAt := w.sumCol.find(wxSumCount)
	n, err := strconv.Atoi(cell(w.sumRow, countAt))
	if countAt < 0 || err != nil {
		return w.reject(w.sumNo, "summary %s %q is not a count", wxSumCount, cell(w.sumRow, countAt))
	}
	if n != w.sums.Payments+w.sums.Refunds {
		return w.reject(w.sumNo, "summary %s is %d, the bill has %d lines", wxSumCount, n, w.sums.Payments+w.sums.Refunds)
	}
	checks := []struct {
		names  []string
		places int
		want   int64
		must   bool
	}{
		{[]string{wxSumSettle, wxSumSettleOld}, reconcile.FenPlaces, w.settle, true},
		{[]string{wxSumRefund, wxSumRefundOld}, reconcile.FenPlaces, w.refund, true},
		{[]string{wxSumFee}, reconcile.MilliFenPlaces, w.sums.FeeMilliFen, false},
		{[]string{wxSumOrder}, reconcile.FenPlaces, w.sums.PaymentsMinor, false},
		{[]string{wxSumApplyRefund}, reconcile.FenPlaces, w.sums.RefundsMinor, false},
	}
	for _, c := range checks {
		i := w.sumCol.find(c.names...)
		if i < 0 {
			if c.must {
				return w.reject(w.sumNo, "summary has no column %s", c.names[0])
			}
			continue
		}
		v, err := reconcile.ParseYuanPlaces(cell(w.sumRow, i), c.places)
		if err != nil {
			return w.reject(w.sumNo, "summary %s: %v", c.names[0], err)
		}
		if v != c.want {
			return w.reject(w.sumNo, "summary %s is %s, the lines add up to %s", c.names[0],
				reconcile.FormatYuanPlaces(v, c.places, c.places), reconcile.FormatYuanPlaces(c.want, c.places, c.places))
		}
	}
	return nil
}
