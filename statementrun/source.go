package statementrun

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// Bill is one day's bill, open for streaming.
type Bill struct {
	Reader   statement.Reader
	SHA256   string // hex SHA-256 of the raw file as received
	Location string // where the raw file is kept; "" when it was not kept
	Close    func() error
}

// Source gets one account's bill of one day: a file someone downloaded, or the platform.
type Source interface {
	Bill(ctx context.Context, day reconcile.BusinessDay) (Bill, error)
}

// FileSource is a bill a person downloaded from the merchant portal (--file).
type FileSource struct {
	Platform reconcile.Platform
	Path     string
}

// Bill hashes the file (so the day's record names exactly what was reconciled), then opens it.
func (f FileSource) Bill(_ context.Context, _ reconcile.BusinessDay) (Bill, error) {
	sum, err := fileSHA256(f.Path)
	if err != nil {
		return Bill{}, err
	}
	abs, err := filepath.Abs(f.Path)
	if err != nil {
		abs = f.Path
	}
	r, err := statement.Open(f.Platform, f.Path)
	if err != nil {
		return Bill{}, err
	}
	return Bill{Reader: r, SHA256: sum, Location: abs, Close: r.Close}, nil
}

func fileSHA256(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open bill: %w", err)
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", fmt.Errorf("read bill %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BillDownloader is what a platform's bill client does: save the account's bill of day (its
// date in China time) into dir. An unpublished bill is a *platformclient.BillNotReadyError in
// the error chain, naming the time to retry; a day the platform says had no trades is a
// BillInfo with Empty set and no file (the client decides which, with its clock).
type BillDownloader interface {
	DownloadBill(ctx context.Context, day time.Time, dir string) (platformclient.BillInfo, error)
}

// PlatformSource downloads the bill from the platform. With Keep set the file stays under
// Keep/<platform>/<merchant>/ and the day's record names it; otherwise it goes to a
// temporary directory removed once the bill has been read, and only its digest is kept.
type PlatformSource struct {
	Platform reconcile.Platform
	Merchant string
	Client   BillDownloader
	Keep     string
}

// Bill downloads the day's bill and opens it; a WeChat Pay bill is checked against the SHA1
// the platform declared while it is read. A day without trades is a bill without lines.
func (s PlatformSource) Bill(ctx context.Context, day reconcile.BusinessDay) (Bill, error) {
	dir, cleanup, err := s.dir()
	if err != nil {
		return Bill{}, err
	}
	got, err := s.Client.DownloadBill(ctx, day.Start, dir)
	if err != nil {
		cleanup()
		return Bill{}, err
	}
	if got.Empty {
		cleanup()
		return Bill{Reader: noTrades{}}, nil
	}
	var opts []statement.Option
	if strings.EqualFold(got.HashType, "SHA1") && got.HashValue != "" {
		opts = append(opts, statement.WithSHA1(got.HashValue))
	}
	r, err := statement.Open(s.Platform, got.Path, opts...)
	if err != nil {
		cleanup()
		return Bill{}, err
	}
	b := Bill{Reader: r, SHA256: got.SHA256, Close: func() error { err := r.Close(); cleanup(); return err }}
	if s.Keep != "" {
		b.Location = got.Path
	}
	return b, nil
}

// noTrades is the bill of a day the platform says the account had no trades on (WeChat Pay's
// NO_STATEMENT_EXIST once the bill is due): no lines, zero totals. It takes the path of any
// bill, so the day is signed off with zero figures and its held orders age as on any day.
type noTrades struct{}

func (noTrades) Next() (statement.Line, error) { return statement.Line{}, io.EOF }
func (noTrades) Totals() statement.Totals      { return statement.Totals{} }

func (s PlatformSource) dir() (string, func(), error) {
	if s.Keep == "" {
		d, err := os.MkdirTemp("", "payrecon-bill-*")
		if err != nil {
			return "", nil, fmt.Errorf("bill download directory: %w", err)
		}
		return d, func() { os.RemoveAll(d) }, nil
	}
	d := filepath.Join(s.Keep, string(s.Platform), s.Merchant)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", nil, fmt.Errorf("bill archive directory: %w", err)
	}
	return d, func() {}, nil
}

// dayChecked refuses a bill whose own header names another period than the day being
// reconciled (an Alipay bill of the wrong day given with --file would otherwise repair
// nothing and hold the whole day).
type dayChecked struct {
	statement.Reader
	day     reconcile.BusinessDay
	checked bool
}

func (r *dayChecked) Next() (statement.Line, error) {
	l, err := r.Reader.Next()
	if r.checked || (err != nil && !errors.Is(err, io.EOF)) {
		return l, err
	}
	r.checked = true
	hr, ok := r.Reader.(statement.HeaderReader)
	if !ok {
		return l, err
	}
	if h := hr.Header(); !h.Start.IsZero() && !h.Start.Equal(r.day.Start) {
		return statement.Line{}, &statement.RejectError{File: "bill", Reason: fmt.Sprintf("the bill covers the day from %s, not %s",
			h.Start.Format(time.DateTime), r.day.Date)}
	}
	return l, err
}

// maxPendingPicked bounds the PENDING orders whose bill lines are picked out while staging:
// past it (an account with a large backlog) the lines wait for the classification, as every
// line did before, rather than hold the backlog in memory.
const maxPendingPicked = 20_000

// pendingPicker hands a bill's lines on to staging and keeps the payment lines that name an
// order PENDING before the bill was read (at most two per PENDING order: a line repeated):
// whatever else the classification finds, those lines need the apply path, and they go to it
// as soon as the bill is staged whole (never before: a bill rejected part way applies nothing).
type pendingPicker struct {
	statement.Reader
	pending map[string]struct{}
	picked  []reconcile.ClassifiedLine
}

func (p *pendingPicker) Next() (statement.Line, error) {
	l, err := p.Reader.Next()
	if err == nil && l.Kind == reconcile.BillPayment && len(p.picked) < 2*len(p.pending) {
		if _, ok := p.pending[l.OutTradeNo]; ok {
			p.picked = append(p.picked, pendingLine(l))
		}
	}
	return l, err
}

// pendingLine is a bill line naming an order found PENDING before the bill was read, as the
// classification would return it.
func pendingLine(l statement.Line) reconcile.ClassifiedLine {
	return reconcile.ClassifiedLine{No: l.No, Kind: l.Kind, OutTradeNo: l.OutTradeNo, PlatformTradeNo: l.PlatformTradeNo,
		RefundNo: l.RefundNo, PlatformRefundNo: l.PlatformRefundNo, RefundStatus: l.RefundStatus,
		Currency: cmp.Or(l.Currency, reconcile.DefaultCurrency), AmountMinor: l.AmountMinor, At: l.At,
		OrderStatus: reconcile.StatusPending}
}
