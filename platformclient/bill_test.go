package platformclient

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

func TestBillRetryAt(t *testing.T) {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, ChinaTime)
	for _, c := range []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"the day itself: the next morning", day.Add(20 * time.Hour), day.Add(33 * time.Hour)},
		{"before publication", day.Add(32 * time.Hour), day.Add(33 * time.Hour)},
		{"late: in a quarter of an hour", day.Add(34*time.Hour + 7*time.Minute + 30*time.Second), day.Add(34*time.Hour + 22*time.Minute)},
		{"asked in UTC", day.Add(32 * time.Hour).UTC(), day.Add(33 * time.Hour)},
	} {
		if got := BillRetryAt(day.Add(15*time.Hour), 9, c.now); !got.Equal(c.want) {
			t.Errorf("%s: retry at %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBillDue: a bill is due from its platform's hour on the next day, China time, however
// the day and the clock are written.
func TestBillDue(t *testing.T) {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, ChinaTime)
	for _, c := range []struct {
		name string
		day  time.Time
		now  time.Time
		want bool
	}{
		{"the day itself", day, day.Add(23 * time.Hour), false},
		{"a minute before the hour", day, day.Add(33*time.Hour - time.Minute), false},
		{"on the hour", day, day.Add(33 * time.Hour), true},
		{"two days later", day, day.Add(48 * time.Hour), true},
		{"asked in UTC", day, day.Add(33 * time.Hour).UTC(), true},
		{"the day given at its noon in UTC", day.Add(12 * time.Hour).UTC(), day.Add(33*time.Hour - time.Second), false},
	} {
		if got := BillDue(c.day, 9, c.now); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSaveBill(t *testing.T) {
	dir := t.TempDir()
	var info BillInfo
	if err := SaveBill(reconcile.Alipay, dir, "../evil/x.csv.zip", strings.NewReader("PK bill"), &info); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("PK bill"))
	if info.Path != filepath.Join(dir, "x.csv.zip") || info.Bytes != 7 || info.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("info %+v", info)
	}
	// A body cut short leaves nothing behind and asks for a retry.
	var cut BillInfo
	err := SaveBill(reconcile.Alipay, dir, "y.csv.zip", iotest.ErrReader(io.ErrUnexpectedEOF), &cut)
	if reconcile.PlatformErrorKindOf(err) != reconcile.KindRetryable || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut body: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || cut.Path != "" {
		t.Fatalf("after a cut download: %d files, info %+v", len(entries), cut)
	}
}
