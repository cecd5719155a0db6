// Package statement reads the platforms' daily trade bills (Alipay's zip of GBK CSVs, WeChat
// Pay's CSV, plain or gzip) into bill lines, and checks each bill against its own totals. It
// knows file formats only: matching lines to orders is the business of the statement run.
//
// Readers (Open, OpenAlipayZip, NewAlipayCSV, NewWeChatCSV) stream: memory stays flat
// whatever the bill's size, and a bill is only known good at io.EOF. Each platform's lines
// are split the way it writes them: WeChat Pay quotes nothing and starts every field with a
// backtick, so its rows split on ",`" alone and a product name or attach may hold commas,
// quotes and JSON; Alipay writes CSV, quoting a text field that holds a comma or a quote, so
// its detail is read by a CSV reader. Columns are found by header name; amounts are parsed
// exactly into fen (fees into thousandths of a fen). A line that does not parse, totals that
// differ from the lines, a digest that differs or a cut archive end the read in a
// *RejectError naming the file and, where there is one, the line and the column.
//
// Generators (WriteAlipayZip, WriteAlipayCSV, WriteWeChatCSV, SampleLines) write the same
// formats with every oddity the platforms have, for tests, benchmarks and the sandbox.
package statement

import (
	"errors"
	"fmt"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// Line is one detail row of a bill. Amounts are positive minor units (fen) for both kinds:
// a refund's sign is its Kind, whatever sign the file wrote it with.
//
// A refund line carries what matching it to the merchant's refund needs: the original
// order's OutTradeNo and PlatformTradeNo, the merchant's refund number (RefundNo), the
// platform's own refund number where the bill has one (PlatformRefundNo), the refund's
// amount (AmountMinor) and, where the bill says, its status (RefundStatus).
type Line struct {
	No              int // line number in the detail file (1-based) where the row starts, so a finding can point at it
	Kind            reconcile.BillLineKind
	OutTradeNo      string // the order's out_trade_no (on a refund line: the refunded order's)
	PlatformTradeNo string // the order's trade number at the platform (on a refund line: the refunded order's)
	// RefundNo is the merchant's refund number (out_refund_no; Alipay's out_request_no):
	// WeChat Pay 商户退款单号, Alipay 退款批次号/请求号. Refund lines only.
	RefundNo string
	// PlatformRefundNo is the platform's refund number (WeChat Pay 微信退款单号, the refund_id);
	// "" on Alipay, whose bill has none. Refund lines only.
	PlatformRefundNo string
	// RefundStatus is the refund's state as the bill writes it (WeChat Pay 退款状态: SUCCESS or
	// PROCESSING); "" where the bill does not say (Alipay lists finished refunds only).
	RefundStatus string
	MerchantID   string // the mchid or app_id the line names, "" where the bill names none
	Currency     string
	// AmountMinor is the order's amount (a payment line) or the refund's (a refund line:
	// WeChat Pay 申请退款金额, Alipay 订单金额 without its minus sign): what the local order or
	// refund is checked against.
	AmountMinor int64
	// ReceivedMinor is what the merchant actually got or gave back (Alipay 商家实收, WeChat
	// Pay 应结订单金额 / 退款金额): less than AmountMinor where the platform paid part of it.
	ReceivedMinor int64
	// Pending marks a refund the platform has not finished (RefundStatus PROCESSING).
	Pending bool
	// FeeMilliFen is the platform's service fee in thousandths of a fen: WeChat Pay writes
	// fees with five decimals of a yuan, and finance signs off the fee total to the last digit.
	// Negative on refund lines that return a fee.
	FeeMilliFen int64
	At          time.Time // when the payment or refund completed, in the bill's zone
	// CreatedAt is when the order was created (Alipay 创建时间: the order's, on a refund line
	// too); zero where the bill does not say.
	CreatedAt time.Time
}

// Totals are a bill's own figures: what its footer or summary row declares, or what its lines
// add up to.
type Totals struct {
	Payments      int
	PaymentsMinor int64
	Refunds       int
	RefundsMinor  int64
	FeeMilliFen   int64
}

// Reader yields a bill's lines in file order. Next returns io.EOF after the last line, and
// only once the lines have been checked against the bill's declared totals (and digest); a
// bill that fails either check ends in a *RejectError instead, so a caller that stages lines
// as they stream must treat any error other than io.EOF as "apply nothing".
type Reader interface {
	Next() (Line, error)
	// Totals is what the lines read so far add up to; after io.EOF, the whole bill's.
	Totals() Totals
}

// Header is what a bill says about itself beyond its lines. Alipay's detail CSV names the
// account (its userId: the PID followed by 0156) and the period in its "#" lines; WeChat
// Pay's names neither (its lines carry the mchid).
type Header struct {
	Account    string
	Start, End time.Time // zero when the bill does not say
}

// HeaderReader is a Reader that knows its bill's Header once the first line (or io.EOF)
// has been read. The Alipay readers are HeaderReaders.
type HeaderReader interface {
	Reader
	Header() Header
}

// ReadCloser is a Reader over a file it must close.
type ReadCloser interface {
	Reader
	Close() error
}

// RejectError says why a whole bill was refused: a line that does not parse, totals that do
// not add up, a digest that differs, a truncated archive.
type RejectError struct {
	File   string // the file (or zip entry) at fault
	Line   int    // 0 when the fault is not on one line
	Column string // the column at fault, by its header name; "" when the fault is not in one
	Reason string
}

func (e *RejectError) Error() string {
	switch {
	case e.Line > 0 && e.Column != "":
		return fmt.Sprintf("bill %s rejected: line %d, column %s: %s", e.File, e.Line, e.Column, e.Reason)
	case e.Line > 0:
		return fmt.Sprintf("bill %s rejected: line %d: %s", e.File, e.Line, e.Reason)
	case e.Column != "":
		return fmt.Sprintf("bill %s rejected: column %s: %s", e.File, e.Column, e.Reason)
	}
	return fmt.Sprintf("bill %s rejected: %s", e.File, e.Reason)
}

// ErrRejected matches every *RejectError with errors.Is.
var ErrRejected = errors.New("bill rejected")

func (e *RejectError) Is(target error) bool { return target == ErrRejected }
