package statement

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/transform"

	"github.com/payrecon/payrecon/reconcile"
)

// Alipay detail columns, found by name.
const (
	alipayColTradeNo  = "支付宝交易号"
	alipayColOutTrade = "商户订单号"
	alipayColKind     = "业务类型"
	alipayColDone     = "完成时间"
	alipayColCreated  = "创建时间"
	alipayColAmount   = "订单金额（元）"
	alipayColReceived = "商家实收（元）"
	alipayColRefundNo = "退款批次号/请求号"
	alipayColFee      = "服务费（元）"

	alipayKindPayment = "交易"
	alipayKindRefund  = "退款"
)

// alipayFooter matches "#交易合计：6笔，商家实收共0.06元，..." and its refund twin; older bills
// name another amount ("交易金额共0.08元").
var alipayFooter = regexp.MustCompile(`^#(交易|退款)合计[：:]\s*(\d+)笔[，,]\s*([^，,共]+)共(-?[0-9.]+)元`)

// alipayAccount and alipayPeriod read the "#账号：[...]" and "#起始日期：[...]   终止日期：[...]"
// lines.
var (
	alipayAccount = regexp.MustCompile(`^#账号[：:]\s*\[([^\]]*)\]`)
	alipayPeriod  = regexp.MustCompile(`^#起始日期[：:]\s*\[([^\]]*)\]\s*终止日期[：:]\s*\[([^\]]*)\]`)
)

// declared is one footer line's figures.
type declared struct {
	seen  bool
	count int
	label string
	minor int64
}

type alipayIdx struct{ trade, out, kind, created, done, amount, received, refundNo, fee int }

// alipayReader reads an Alipay detail CSV.
type alipayReader struct {
	opt   options
	rec   *csvRecords
	days  chinaDays
	state int // 0 before the header, 1 in the rows, 2 in the footer
	idx   alipayIdx
	cols  int // fields the header names
	sums  Totals
	// what the merchant received and gave back (商家实收), which the footer may declare
	payRecv, refRecv int64
	pay, ref         declared
	// afterDetail, when set (a zip), checks the summary entry once the detail added up.
	afterDetail func(t Totals, payRecv, refRecv int64) error
	closer      io.Closer
	head        Header
	err         error
}

// NewAlipayCSV reads an Alipay detail CSV: GBK as Alipay writes it, or UTF-8 when a person
// re-saved it that way (told apart by the first few KiB).
func NewAlipayCSV(r io.Reader, opts ...Option) Reader {
	return newAlipayReader(r, buildOptions("alipay detail csv", opts))
}

func newAlipayReader(r io.Reader, o options) *alipayReader {
	return &alipayReader{opt: o, rec: newCSVRecords(decodeAlipay(r))}
}

// newAlipayReaderAhead is newAlipayReader with the unzipping, decoding and tab dropping done
// ahead of the parsing, in a goroutine of its own (readAhead). Its closer must be set, and
// closed: closing stops the goroutine, then src is closed.
func newAlipayReaderAhead(r io.Reader, src io.Closer, o options) *alipayReader {
	ra := newReadAhead(transform.NewReader(decodeAlipay(r), quoteTabs{}))
	return &alipayReader{opt: o, rec: newCSVRecordsTabbed(ra), closer: closers{ra, src}}
}

// decodeAlipay wraps r in a GBK decoder unless its start is valid UTF-8 with non-ASCII text
// in it (GBK's Chinese is almost never valid UTF-8); a UTF-8 BOM is skipped.
func decodeAlipay(r io.Reader) io.Reader {
	br := bufio.NewReaderSize(r, 8<<10)
	head, _ := br.Peek(4 << 10)
	head = trimPartialRune(head)
	if utf8.Valid(head) && !isASCII(head) {
		if bytes.HasPrefix(head, utf8BOM) {
			br.Discard(len(utf8BOM)) //nolint:errcheck // the bytes were peeked
		}
		return br
	}
	return transform.NewReader(br, newFastGBK())
}

func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func (a *alipayReader) Totals() Totals { return a.sums }

func (a *alipayReader) Close() error {
	if a.closer == nil {
		return nil
	}
	return a.closer.Close()
}

func (a *alipayReader) reject(line int, format string, args ...any) error {
	return a.rejectColumn(line, "", format, args...)
}

// rejectColumn refuses the bill for what column (a header name) of line holds.
func (a *alipayReader) rejectColumn(line int, column, format string, args ...any) error {
	a.err = &RejectError{File: a.opt.name, Line: line, Column: column, Reason: fmt.Sprintf(format, args...)}
	return a.err
}

// Next returns the next detail line; see Reader.
func (a *alipayReader) Next() (Line, error) {
	if a.err != nil {
		return Line{}, a.err
	}
	for {
		row, err := a.rec.next()
		if err == io.EOF {
			return Line{}, a.finish()
		}
		if err != nil {
			return Line{}, a.reject(a.rec.no, "read: %v", err)
		}
		comment := strings.HasPrefix(row[0], "#")
		switch {
		case a.state == 0 && comment:
			a.preamble(text(row))
		case a.state == 0:
			if err := a.header(row); err != nil {
				return Line{}, err
			}
			a.state = 1
		case comment:
			a.state = 2
			if err := a.footer(text(row)); err != nil {
				return Line{}, err
			}
		case a.state == 2:
			return Line{}, a.reject(a.rec.no, "a detail row after the footer")
		default:
			return a.line(row)
		}
	}
}

// Header is the account and period the bill's "#" lines name.
func (a *alipayReader) Header() Header { return a.head }

// preamble reads the "#" lines before the header; those it does not know are skipped.
func (a *alipayReader) preamble(text string) {
	if m := alipayAccount.FindStringSubmatch(text); m != nil {
		a.head.Account = strings.TrimSpace(m[1])
	}
	if m := alipayPeriod.FindStringSubmatch(text); m != nil {
		const cn = "2006年01月02日 15:04:05"
		a.head.Start, _ = time.ParseInLocation(cn, strings.TrimSpace(m[1]), chinaTime)
		a.head.End, _ = time.ParseInLocation(cn, strings.TrimSpace(m[2]), chinaTime)
	}
}

func (a *alipayReader) header(row []string) error {
	c := newColumns(row)
	a.cols = len(row)
	a.idx = alipayIdx{
		trade: c.find(alipayColTradeNo), out: c.find(alipayColOutTrade), kind: c.find(alipayColKind),
		created: c.find(alipayColCreated), done: c.find(alipayColDone), amount: c.find(alipayColAmount), received: c.find(alipayColReceived),
		refundNo: c.find(alipayColRefundNo), fee: c.find(alipayColFee),
	}
	for _, req := range []struct {
		name string
		at   int
	}{{alipayColTradeNo, a.idx.trade}, {alipayColOutTrade, a.idx.out}, {alipayColKind, a.idx.kind},
		{alipayColDone, a.idx.done}, {alipayColAmount, a.idx.amount}} {
		if req.at < 0 {
			return a.rejectColumn(a.rec.no, req.name, "the header has no such column: not an Alipay trade bill")
		}
	}
	return nil
}

// footer reads a "#" line after the rows; only the 合计 lines carry figures.
func (a *alipayReader) footer(text string) error {
	m := alipayFooter.FindStringSubmatch(text)
	if m == nil {
		if strings.Contains(text, "合计") {
			return a.reject(a.rec.no, "unreadable totals line %q", text)
		}
		return nil
	}
	var d declared
	if _, err := fmt.Sscan(m[2], &d.count); err != nil {
		return a.reject(a.rec.no, "totals count %q", m[2])
	}
	v, err := reconcile.ParseYuanPlaces(m[4], reconcile.FenPlaces)
	if err != nil {
		return a.reject(a.rec.no, "totals amount: %v", err)
	}
	d.seen, d.label, d.minor = true, strings.TrimSpace(m[3]), abs(v)
	if m[1] == "交易" {
		a.pay = d
	} else {
		a.ref = d
	}
	return nil
}

// line parses one detail row.
func (a *alipayReader) line(row []string) (Line, error) {
	no := a.rec.no
	if err := a.fit(row); err != nil {
		return Line{}, err
	}
	l := Line{No: no, Currency: reconcile.DefaultCurrency, OutTradeNo: cell(row, a.idx.out), PlatformTradeNo: cell(row, a.idx.trade)}
	switch k := cell(row, a.idx.kind); k {
	case alipayKindPayment:
		l.Kind = reconcile.BillPayment
	case alipayKindRefund:
		l.Kind = reconcile.BillRefund
		l.RefundNo = cell(row, a.idx.refundNo)
	default:
		return Line{}, a.rejectColumn(no, alipayColKind, "%q is neither %s nor %s", k, alipayKindPayment, alipayKindRefund)
	}
	if l.OutTradeNo == "" {
		return Line{}, a.rejectColumn(no, alipayColOutTrade, "empty")
	}
	if l.PlatformTradeNo == "" {
		return Line{}, a.rejectColumn(no, alipayColTradeNo, "empty")
	}
	var err error
	if l.At, err = a.days.parse(cell(row, a.idx.done)); err != nil {
		return Line{}, a.rejectColumn(no, alipayColDone, "%v", err)
	}
	if created := cell(row, a.idx.created); created != "" {
		if l.CreatedAt, err = a.days.parse(created); err != nil {
			return Line{}, a.rejectColumn(no, alipayColCreated, "%v", err)
		}
	}
	if err := a.amounts(no, row, &l); err != nil {
		return Line{}, err
	}
	a.sums.add(l)
	if l.Kind == reconcile.BillPayment {
		a.payRecv += l.ReceivedMinor
	} else {
		a.refRecv += l.ReceivedMinor
	}
	return l, nil
}

// fit checks that a row has the header's number of fields. More are accepted only when they
// are blank (a trailing comma): a comma left unquoted would move every column after it.
// Fewer mostly means a quote that opened and never closed swallowed the fields after it.
func (a *alipayReader) fit(row []string) error {
	if len(row) == a.cols {
		return nil
	}
	if len(row) > a.cols && strings.TrimSpace(strings.Join(row[a.cols:], "")) == "" {
		return nil
	}
	why := "a comma outside quotes?"
	if len(row) < a.cols {
		why = "a quote that does not close, or a row cut short?"
	}
	return a.reject(a.rec.no, "%d fields, the header names %d: %s", len(row), a.cols, why)
}

// amounts reads the row's amounts and fee. Refund rows carry negative amounts; a Line's
// refund amount is positive.
func (a *alipayReader) amounts(no int, row []string, l *Line) error {
	amount, err := reconcile.ParseYuanPlaces(cell(row, a.idx.amount), reconcile.FenPlaces)
	if err != nil {
		return a.rejectColumn(no, alipayColAmount, "%v", err)
	}
	received := amount
	if a.idx.received >= 0 {
		if received, err = reconcile.ParseYuanPlaces(cell(row, a.idx.received), reconcile.FenPlaces); err != nil {
			return a.rejectColumn(no, alipayColReceived, "%v", err)
		}
	}
	if l.Kind == reconcile.BillPayment && (amount < 0 || received < 0) {
		return a.rejectColumn(no, alipayColAmount, "a payment with a negative amount")
	}
	l.AmountMinor, l.ReceivedMinor = abs(amount), abs(received)
	if fee := cell(row, a.idx.fee); fee != "" {
		if l.FeeMilliFen, err = reconcile.ParseYuanPlaces(fee, reconcile.MilliFenPlaces); err != nil {
			return a.rejectColumn(no, alipayColFee, "%v", err)
		}
	}
	return nil
}

// finish checks the lines against the footer (and the zip's summary) at the end.
func (a *alipayReader) finish() error {
	if a.state == 0 {
		return a.reject(0, "no header row: not an Alipay trade bill")
	}
	if !a.pay.seen || !a.ref.seen {
		return a.reject(0, "no #交易合计 / #退款合计 footer: the file is incomplete")
	}
	if err := a.checkDeclared("交易合计", a.pay, a.sums.Payments, a.sums.PaymentsMinor, a.payRecv); err != nil {
		return err
	}
	if err := a.checkDeclared("退款合计", a.ref, a.sums.Refunds, a.sums.RefundsMinor, a.refRecv); err != nil {
		return err
	}
	if a.afterDetail != nil {
		if err := a.afterDetail(a.sums, a.payRecv, a.refRecv); err != nil {
			a.err = err
			return err
		}
	}
	a.err = io.EOF
	return io.EOF
}

// checkDeclared compares one footer line with the lines: 商家实收 totals against what the
// merchant received, any other wording (older bills: 交易金额) against the amounts.
func (a *alipayReader) checkDeclared(name string, d declared, count int, amount, received int64) error {
	if d.count != count {
		return a.reject(0, "#%s declares %d lines, the bill has %d", name, d.count, count)
	}
	sum := amount
	if strings.Contains(d.label, "实收") {
		sum = received
	}
	if d.minor != sum {
		return a.reject(0, "#%s declares %s %s yuan, the lines add up to %s", name, d.label,
			reconcile.FormatYuanPlaces(d.minor, reconcile.FenPlaces, 2), reconcile.FormatYuanPlaces(sum, reconcile.FenPlaces, 2))
	}
	return nil
}
