// Package statement reads the platforms' daily trade bills (Alipay's zip of GBK CSVs, WeChat
// Pay's CSV, plain or gzip) into bill lines, and checks each bill against its own totals. It
// knows file formats only: matching lines to orders is the business of the statement run.
//
// Readers (Open, OpenAlipayZip, NewAlipayCSV, NewWeChatCSV) stream: memory stays flat
// whatever the bill's size, and a bill is only known good at io.EOF. Columns are found by
// header name; amounts are parsed exactly into fen (fees into thousandths of a fen). A line
// that does not parse, totals that differ from the lines, a digest that differs or a cut
// archive end the read in a *RejectError naming the file and, where there is one, the line.
//
// Generators (WriteAlipayZip, WriteAlipayCSV, WriteWeChatCSV, SampleLines) write the same
// formats with every oddity the platforms have, for tests, benchmarks and the sandbox.
package statement

import (
	"errors"
	"fmt"
	"time"
)

// LineKind says whether a bill line records money coming in or going back.
type LineKind string

const (
	Payment LineKind = "payment"
	Refund  LineKind = "refund"
)

// Line is one detail row of a bill. Amounts are positive minor units (fen) for both kinds:
// a refund's sign is its Kind, whatever sign the file wrote it with.
type Line struct {
	No              int // line number in the detail file (1-based), so a finding can point at it
	Kind            LineKind
	OutTradeNo      string
	PlatformTradeNo string
	RefundNo        string // the merchant's refund number, refund lines only
	MerchantID      string // the mchid or app_id the line names, "" where the bill names none
	Currency        string
	// AmountMinor is the order's amount (a payment line) or the refund's (a refund line):
	// what the local order is checked against.
	AmountMinor int64
	// ReceivedMinor is what the merchant actually got or gave back (Alipay 商家实收, WeChat
	// Pay 应结订单金额 / 退款金额): less than AmountMinor where the platform paid part of it.
	ReceivedMinor int64
	// Pending marks a refund the platform has not finished (WeChat Pay 退款状态 PROCESSING).
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
	Reason string
}

func (e *RejectError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("bill %s rejected: line %d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("bill %s rejected: %s", e.File, e.Reason)
}

// ErrRejected matches every *RejectError with errors.Is.
var ErrRejected = errors.New("bill rejected")

func (e *RejectError) Is(target error) bool { return target == ErrRejected }
