package platformclient

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// DefaultDownloadTimeout bounds one bill download attempt (a million-line bill is tens of
// MiB); the URL query before it has the ordinary per-attempt timeout.
const DefaultDownloadTimeout = 5 * time.Minute

// MaxBillBytes bounds a downloaded bill, so a runaway answer cannot fill the disk.
const MaxBillBytes = 4 << 30

// BillInfo describes a downloaded trade bill: where it was saved and what vouches for it.
type BillInfo struct {
	Platform   reconcile.Platform
	MerchantID string
	Day        time.Time // the bill's day: midnight, China time
	Path       string    // the saved file: Alipay's zip; WeChat Pay's CSV (gzip when Gzip)
	Bytes      int64
	SHA256     string // hex digest of the saved bytes, so a finding can name the file it came from
	// HashType and HashValue are what the platform declared for the unzipped content
	// (WeChat Pay: "SHA1" and its hex; empty for Alipay). The download is not checked against
	// them: the reader does that while it parses (statement.WithSHA1(HashValue)).
	HashType, HashValue string
	Gzip                bool
	// Empty says the platform has no bill for the day because the account had no trades (WeChat
	// Pay's NO_STATEMENT_EXIST once the bill is due): nothing was downloaded, Path is "", and
	// the day is to be reconciled as a bill without lines.
	Empty bool
}

// ErrBillNotReady matches every *BillNotReadyError with errors.Is.
var ErrBillNotReady = errors.New("bill not published yet")

// BillNotReadyError says the platform has not published the day's bill yet (Alipay
// isp.bill_not_exist, WeChat Pay STATEMENT_CREATING, or NO_STATEMENT_EXIST before the bill is
// due); ask again at RetryAt.
type BillNotReadyError struct {
	Platform   reconcile.Platform
	MerchantID string
	Day        time.Time
	RetryAt    time.Time
	Code       string // the platform's code
	Message    string
}

func (e *BillNotReadyError) Error() string {
	return fmt.Sprintf("%s bill of %s for %s not published yet (%s); retry after %s", e.Platform,
		e.Day.Format("2006-01-02"), e.MerchantID, e.Message, e.RetryAt.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrBillNotReady) true.
func (e *BillNotReadyError) Is(target error) bool { return target == ErrBillNotReady }

// BillDay is the bill's day of t: its date in China time, at midnight.
func BillDay(t time.Time) time.Time {
	c := t.In(ChinaTime)
	return time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, ChinaTime)
}

// BillDueAt is when the platform publishes day's bill: publishHour (China time) on the next
// day.
func BillDueAt(day time.Time, publishHour int) time.Time {
	return BillDay(day).AddDate(0, 0, 1).Add(time.Duration(publishHour) * time.Hour)
}

// BillDue reports whether day's bill is due at now: from then on, a platform's "there is no
// bill" can mean the day had no trades rather than "not yet".
func BillDue(day time.Time, publishHour int, now time.Time) bool {
	return !now.Before(BillDueAt(day, publishHour))
}

// BillRetryAt is when to ask again for day's bill: the hour the platform publishes it on the
// next day, or in 15 minutes when that hour has passed (the bill is still being made).
func BillRetryAt(day time.Time, publishHour int, now time.Time) time.Time {
	if !BillDue(day, publishHour, now) {
		return BillDueAt(day, publishHour)
	}
	return now.Add(15 * time.Minute).Truncate(time.Minute)
}

// NotReady builds the error a client returns for an unpublished bill: a *reconcile.PlatformError
// that no retry will fix now (KindPermanent), holding the *BillNotReadyError.
func NotReady(e *BillNotReadyError) *reconcile.PlatformError {
	return NewError(e.Platform, reconcile.KindPermanent, e.Code, "", e) // e says it all
}

// SaveBill streams body into dir/name through a temporary file in dir, renamed into place
// only once the body is complete, so a cut download never looks like a bill. It fills
// info's Path, Bytes and SHA256. A body that ends early is retryable; a file that cannot be
// written is a configuration problem (the directory).
func SaveBill(p reconcile.Platform, dir, name string, body io.Reader, info *BillInfo) error {
	tmp, err := os.CreateTemp(dir, ".bill-*")
	if err != nil {
		return NewError(p, reconcile.KindConfig, "", "cannot write the bill: check the directory", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up after a failure
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, MaxBillBytes+1))
	if cerr := tmp.Close(); err == nil && cerr != nil {
		return NewError(p, reconcile.KindConfig, "", "cannot write the bill", cerr)
	}
	if err != nil {
		return NewError(p, reconcile.KindRetryable, "TRUNCATED", "bill download cut short", err)
	}
	if n > MaxBillBytes {
		return NewError(p, reconcile.KindPermanent, "TOO_LARGE", fmt.Sprintf("bill larger than %d bytes", int64(MaxBillBytes)), nil)
	}
	path := filepath.Join(dir, filepath.Base(name))
	if err := os.Rename(tmp.Name(), path); err != nil {
		return NewError(p, reconcile.KindConfig, "", "cannot write the bill", err)
	}
	info.Path, info.Bytes, info.SHA256 = path, n, hex.EncodeToString(h.Sum(nil))
	return nil
}
