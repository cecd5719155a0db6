package statement

import (
	"bufio"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
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
	wxColOutRefund   = "商户退款单号"
	wxColRefund      = "退款金额"
	wxColRefundState = "退款状态"
	wxColFee         = "手续费"
	wxColOrder       = "订单金额"
	wxColApplyRefund = "申请退款金额"

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
)

var gzipMagic = []byte{0x1f, 0x8b}

type wxIdx struct {
	time, mch, subMch, txn, out, state, currency, settle, outRefund, refund, refundState, fee, order, apply int
}

// wechatReader reads a WeChat Pay trade bill, plain or gzip.
type wechatReader struct {
	opt    options
	src    io.Reader
	lr     *lineReader
	sha    hash.Hash
	state  int // 0 before the header, 1 in the rows, 2 summary header seen, 3 summary row seen
	idx    wxIdx
	row    []string
	sums   Totals
	settle int64 // sums of 应结订单金额, 退款金额 and 订单金额/申请退款金额 as the summary states them
	refund int64
	sumCol columns
	sumRow []string
	sumNo  int
	closer io.Closer
	err    error
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
	w.err = &RejectError{File: w.opt.name, Line: line, Reason: fmt.Sprintf(format, args...)}
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
		zr, err := gzip.NewReader(br)
		if err != nil {
			return w.reject(0, "bad gzip: %v", err)
		}
		text = zr
	}
	w.sha = sha1.New()
	w.lr = newLineReader(io.TeeReader(text, w.sha))
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
		switch w.state {
		case 0:
			if err := w.header(raw); err != nil {
				return Line{}, err
			}
			w.state = 1
		case 1:
			if strings.HasPrefix(cleanCell(raw), wxSumCount) {
				row, _ := splitFields(nil, raw)
				w.sumCol, w.state = newColumns(row), 2
				continue
			}
			return w.line(raw)
		case 2:
			if w.sumRow, err = splitFields(nil, raw); err != nil {
				return Line{}, w.reject(w.lr.no, "summary row: %v", err)
			}
			w.sumNo, w.state = w.lr.no, 3
		default:
			return Line{}, w.reject(w.lr.no, "text after the summary row")
		}
	}
}

func (w *wechatReader) header(raw string) error {
	row, err := splitFields(w.row[:0], raw)
	if err != nil {
		return w.reject(w.lr.no, "header: %v", err)
	}
	c := newColumns(row)
	w.idx = wxIdx{
		time: c.find(wxColTime), mch: c.find(wxColMchID), subMch: c.find(wxColSubMchID),
		txn: c.find(wxColTxnID), out: c.find(wxColOutTrade), state: c.find(wxColState),
		currency: c.find(wxColCurrency), settle: c.find(wxColSettle, wxColSettleOld),
		outRefund: c.find(wxColOutRefund), refund: c.find(wxColRefund), refundState: c.find(wxColRefundState),
		fee: c.find(wxColFee), order: c.find(wxColOrder), apply: c.find(wxColApplyRefund),
	}
	for name, i := range map[string]int{wxColTime: w.idx.time, wxColTxnID: w.idx.txn, wxColOutTrade: w.idx.out,
		wxColState: w.idx.state, wxColSettle: w.idx.settle, wxColRefund: w.idx.refund} {
		if i < 0 {
			return w.reject(w.lr.no, "header has no column %s: not a WeChat Pay trade bill", name)
		}
	}
	return nil
}

// amount reads a column that must hold a non-negative amount; a missing column reads as
// the fallback's value.
func (w *wechatReader) amount(row []string, i int, name string, fallback int64) (int64, error) {
	if i < 0 {
		return fallback, nil
	}
	v, err := parseDecimal(cell(row, i), fenPlaces)
	if err != nil {
		return 0, w.reject(w.lr.no, "%s: %v", name, err)
	}
	if v < 0 {
		return 0, w.reject(w.lr.no, "%s is negative", name)
	}
	return v, nil
}

// line parses one detail row.
func (w *wechatReader) line(raw string) (Line, error) {
	no := w.lr.no
	row, err := splitFields(w.row[:0], raw)
	w.row = row[:0]
	if err != nil {
		return Line{}, w.reject(no, "%v", err)
	}
	l := Line{No: no, OutTradeNo: cell(row, w.idx.out), PlatformTradeNo: cell(row, w.idx.txn),
		Currency: cell(row, w.idx.currency), MerchantID: cell(row, w.idx.mch)}
	if sub := cell(row, w.idx.subMch); sub != "" && sub != "0" {
		l.MerchantID = sub
	}
	if l.Currency == "" {
		l.Currency = "CNY"
	}
	if l.OutTradeNo == "" || l.PlatformTradeNo == "" {
		return Line{}, w.reject(no, "empty %s or %s", wxColOutTrade, wxColTxnID)
	}
	if l.At, err = parseChinaTime(cell(row, w.idx.time)); err != nil {
		return Line{}, w.reject(no, "%s: %v", wxColTime, err)
	}
	switch st := cell(row, w.idx.state); st {
	case wxStatePaid:
		l.Kind = Payment
		if l.ReceivedMinor, err = w.amount(row, w.idx.settle, wxColSettle, 0); err == nil {
			l.AmountMinor, err = w.amount(row, w.idx.order, wxColOrder, l.ReceivedMinor)
		}
	case wxStateRefund:
		l.Kind, l.RefundNo = Refund, cell(row, w.idx.outRefund)
		l.Pending = cell(row, w.idx.refundState) == wxRefundPending
		if l.ReceivedMinor, err = w.amount(row, w.idx.refund, wxColRefund, 0); err == nil {
			l.AmountMinor, err = w.amount(row, w.idx.apply, wxColApplyRefund, l.ReceivedMinor)
		}
	default:
		return Line{}, w.reject(no, "%s %q is neither %s nor %s", wxColState, st, wxStatePaid, wxStateRefund)
	}
	if err != nil {
		return Line{}, err
	}
	if fee := cell(row, w.idx.fee); fee != "" {
		if l.FeeMilliFen, err = parseDecimal(fee, milliFenPlaces); err != nil {
			return Line{}, w.reject(no, "%s: %v", wxColFee, err)
		}
	}
	w.sums.add(l)
	if l.Kind == Payment {
		w.settle += l.ReceivedMinor
	} else {
		w.refund += l.ReceivedMinor
	}
	return l, nil
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
		{[]string{wxSumSettle, wxSumSettleOld}, fenPlaces, w.settle, true},
		{[]string{wxSumRefund, wxSumRefundOld}, fenPlaces, w.refund, true},
		{[]string{wxSumFee}, milliFenPlaces, w.sums.FeeMilliFen, false},
		{[]string{wxSumOrder}, fenPlaces, w.sums.PaymentsMinor, false},
		{[]string{wxSumApplyRefund}, fenPlaces, w.sums.RefundsMinor, false},
	}
	for _, c := range checks {
		i := w.sumCol.find(c.names...)
		if i < 0 {
			if c.must {
				return w.reject(w.sumNo, "summary has no column %s", c.names[0])
			}
			continue
		}
		v, err := parseDecimal(cell(w.sumRow, i), c.places)
		if err != nil {
			return w.reject(w.sumNo, "summary %s: %v", c.names[0], err)
		}
		if v != c.want {
			return w.reject(w.sumNo, "summary %s is %s, the lines add up to %s", c.names[0],
				formatDecimal(v, c.places, c.places), formatDecimal(c.want, c.places, c.places))
		}
	}
	return nil
}
