package statementrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

func payLine(otn, trade string, amount int64, at time.Time) statement.Line {
	return statement.Line{Kind: reconcile.BillPayment, OutTradeNo: otn, PlatformTradeNo: trade, Currency: "CNY", AmountMinor: amount,
		ReceivedMinor: amount, At: at}
}

// TestHeldBecomesFindingOneDayLater: a PAID order the day's bill leaves out is held, not
// reported; the next day's bill settles it: listed there (it fell on the other side of
// midnight) it is dropped, absent there too it is LOCAL_PAID_PLATFORM_UNPAID, exactly once.
func TestHeldBecomesFindingOneDayLater(t *testing.T) {
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			m := merchantOf(p)
			next := testDay.Start.AddDate(0, 0, 1)
			nextDay, _ := reconcile.ParseBusinessDay("2026-11-29", shanghai)
			late := testDay.End.Add(-time.Second)
			e.insert(order{platform: p, merchant: m, outTradeNo: "H-MISSING", amount: 100, status: reconcile.StatusPaid, tradeNo: "HT-1", paidAt: late})
			e.insert(order{platform: p, merchant: m, outTradeNo: "H-LATE", amount: 200, status: reconcile.StatusPaid, tradeNo: "HT-2", paidAt: late})
			e.insert(order{platform: p, merchant: m, outTradeNo: "H-LISTED", amount: 300, status: reconcile.StatusPaid, tradeNo: "HT-3", paidAt: late})

			day1 := writeBill(t, p, testDay, []statement.Line{payLine("H-LISTED", "HT-3", 300, late)})
			if _, err := e.runFile(p, testDay, day1, false); err != nil {
				t.Fatal(err)
			}
			if f := e.findings(p); len(f) != 0 {
				t.Fatalf("findings on the day itself: %v; want none (held)", f)
			}
			days, _ := e.store.StatementDays(context.Background(), "2026-11-28", "2026-11-29")
			if len(days) != 1 || days[0].Held != 2 {
				t.Fatalf("held on day 1: %+v; want 2", days)
			}

			// The platform booked H-LATE on the next day; H-MISSING it never had.
			day2 := writeBill(t, p, nextDay, []statement.Line{payLine("H-LATE", "HT-2", 200, next.Add(time.Minute))})
			if _, err := e.runFile(p, nextDay, day2, false); err != nil {
				t.Fatal(err)
			}
			f := e.findings(p)
			if len(f) != 1 || f["H-MISSING"] != string(reconcile.MismatchLocalPaidPlatformNot) {
				t.Fatalf("findings after day 2: %v; want only H-MISSING LOCAL_PAID_PLATFORM_UNPAID", f)
			}
			var source string
			var seen int
			e.db.DB.QueryRow(`SELECT detail->>'source', seen_count FROM reconcile_mismatches WHERE out_trade_no = 'H-MISSING'`).Scan(&source, &seen) //nolint:errcheck // compared below
			if source != "statement" || seen != 1 {
				t.Errorf("finding source %q seen %d; want statement, 1", source, seen)
			}
			// H-LATE is listed on day 2 with a paid_at of day 1: day 2 holds nothing for it,
			// and running either day again reports nothing new.
			before := e.snapshot()
			for _, run := range []struct {
				day  reconcile.BusinessDay
				path string
			}{{testDay, day1}, {nextDay, day2}} {
				res, err := e.runFile(p, run.day, run.path, false)
				if err != nil {
					t.Fatal(err)
				}
				// Re-running the older day leaves the account's newest reconciled day as it was.
				if !res.Days[0].LastDay.Equal(nextDay.Start) {
					t.Errorf("re-running %s: last day %s, want %s", run.day.Date, res.Days[0].LastDay, nextDay.Start)
				}
			}
			after := e.snapshot()
			before.Runs += 2
			if before != after {
				t.Errorf("re-running the days changed something:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// TestRejectedBillAppliesNothing: a bill that fails mid-stream (a line that does not parse)
// or at its end (totals that do not add up) leaves no repair, no finding, no figures.
func TestRejectedBillAppliesNothing(t *testing.T) {
	lines := []statement.Line{
		payLine("R-PEND", "RT-1", 100, testDay.Start.Add(time.Hour)),
		payLine("R-NONE", "RT-2", 100, testDay.Start.Add(time.Hour)),
		payLine("R-MORE", "RT-3", 100, testDay.Start.Add(time.Hour)),
	}
	reject := &statement.RejectError{File: "mem", Line: 8, Reason: "amount \"1.2.3\" is not a decimal"}
	cases := []struct {
		name   string
		source func(t *testing.T) Source
	}{
		{"unparsable line mid-stream", func(*testing.T) Source { return memSource{lines: lines, failAfter: 2, failErr: reject} }},
		{"alipay totals disagree", func(t *testing.T) Source {
			return FileSource{Platform: reconcile.Alipay, Path: writeSkewed(t, reconcile.Alipay, lines)}
		}},
		{"wechatpay totals disagree", func(t *testing.T) Source {
			return FileSource{Platform: reconcile.WechatPay, Path: writeSkewed(t, reconcile.WechatPay, lines)}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			p := reconcile.Alipay
			if c.name == "wechatpay totals disagree" {
				p = reconcile.WechatPay
			}
			e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: "R-PEND", amount: 100, status: reconcile.StatusPending})
			before := e.snapshot()
			res, err := e.runner.Run(context.Background(), Spec{Day: testDay, Accounts: []Account{
				{Key: reconcile.AccountKey{Platform: p, MerchantID: merchantOf(p)}, Source: c.source(t)}}})
			if !isRejected(err) {
				t.Fatalf("error %v; want a rejection", err)
			}
			after := e.snapshot()
			before.Runs++
			if before != after {
				t.Errorf("a rejected bill changed something:\nbefore %+v\nafter  %+v", before, after)
			}
			if res.Run.Status != reconcile.RunFailed {
				t.Errorf("run status %s, want failed", res.Run.Status)
			}
		})
	}
}

// writeSkewed writes a bill whose declared totals are one fen off its lines.
func writeSkewed(t *testing.T, p reconcile.Platform, lines []statement.Line) string {
	t.Helper()
	var b bytes.Buffer
	var err error
	if p == reconcile.Alipay {
		_, err = statement.WriteAlipayZip(&b, statement.AlipayFile{UserID: "20880211096256330156", Day: testDay.Start, SkewMinor: 1}, slices.Values(lines))
	} else {
		_, _, err = statement.WriteWeChatCSV(&b, statement.WeChatFile{MchID: wechatMerchant, SkewMinor: 1}, slices.Values(lines))
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "skewed")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDryRunWritesOnlyItsRunRow: a dry run classifies and counts, but writes nothing but
// its reconcile_runs row (no repair, no finding, no figures, no held list).
func TestDryRunWritesOnlyItsRunRow(t *testing.T) {
	e := setup(t)
	p := reconcile.WechatPay
	m := merchantOf(p)
	e.insert(order{platform: p, merchant: m, outTradeNo: "D-PEND", amount: 100, status: reconcile.StatusPending})
	e.insert(order{platform: p, merchant: m, outTradeNo: "D-HELD", amount: 100, status: reconcile.StatusPaid, tradeNo: "DT-9", paidAt: testDay.Start.Add(time.Hour)})
	path := writeBill(t, p, testDay, []statement.Line{
		payLine("D-PEND", "DT-1", 100, testDay.Start.Add(time.Hour)),
		payLine("D-NONE", "DT-2", 100, testDay.Start.Add(time.Hour)),
	})
	before := e.snapshot()
	res, err := e.runFile(p, testDay, path, true)
	if err != nil {
		t.Fatal(err)
	}
	after := e.snapshot()
	before.Runs++
	if before != after {
		t.Errorf("a dry run wrote more than its run row:\nbefore %+v\nafter  %+v", before, after)
	}
	c := res.Run.Counts
	if !res.Run.DryRun || c.Scanned != 2 || c.Repaired != 1 || c.Mismatches != 1 {
		t.Errorf("dry run counted %+v (dry %v); want 2 scanned, 1 repaired, 1 finding", c, res.Run.DryRun)
	}
	if res.Days[0].Figures.Held != 1 {
		t.Errorf("dry run held %d, want 1 (counted, not written)", res.Days[0].Figures.Held)
	}
}

// TestNotReadyIsRetryLater: an unpublished bill fails the account's day with the time to
// retry, and the other accounts still run.
func TestNotReadyIsRetryLater(t *testing.T) {
	e := setup(t)
	retry := time.Date(2026, 11, 29, 10, 0, 0, 0, shanghai)
	notReady := notReadySource{at: retry}
	okPath := writeBill(t, reconcile.Alipay, testDay, []statement.Line{payLine("N-NONE", "NT-1", 100, testDay.Start.Add(time.Hour))})
	res, err := e.runner.Run(context.Background(), Spec{Day: testDay, Accounts: []Account{
		{Key: reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: wechatMerchant}, Source: notReady},
		{Key: reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: alipayMerchant}, Source: FileSource{Platform: reconcile.Alipay, Path: okPath}},
	}})
	var nr *platformclient.BillNotReadyError
	if !errors.As(err, &nr) || !nr.RetryAt.Equal(retry) || !errors.Is(err, platformclient.ErrBillNotReady) {
		t.Fatalf("error %v; want BillNotReadyError retrying at %s", err, retry)
	}
	if len(res.Days) != 2 || res.Days[1].Err != nil || res.Days[1].Figures.Lines != 1 {
		t.Errorf("the ready account did not run: %+v", res.Days)
	}
}

type notReadySource struct{ at time.Time }

func (s notReadySource) Bill(_ context.Context, d reconcile.BusinessDay) (Bill, error) {
	return Bill{}, platformclient.NotReady(&platformclient.BillNotReadyError{Platform: reconcile.WechatPay,
		MerchantID: wechatMerchant, Day: d.Start, RetryAt: s.at, Code: "NO_STATEMENT_EXIST"})
}

// TestSignalWhileStagingAppliesNothing: a signal while the bill streams in rolls the day
// back; the run row says interrupted and the other accounts are not started.
func TestSignalWhileStagingAppliesNothing(t *testing.T) {
	e := setup(t)
	p := reconcile.Alipay
	e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: "S-PEND", amount: 100, status: reconcile.StatusPending})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := []statement.Line{payLine("S-PEND", "ST-1", 100, testDay.Start.Add(time.Hour)), payLine("S-NONE", "ST-2", 100, testDay.Start.Add(time.Hour))}
	src := cancellingSource{memSource{lines: lines}, cancel}
	before := e.snapshot()
	res, err := e.runner.Run(ctx, Spec{Day: testDay, Accounts: []Account{
		{Key: reconcile.AccountKey{Platform: p, MerchantID: merchantOf(p)}, Source: src},
		{Key: reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: wechatMerchant}, Source: memSource{lines: lines}},
	}})
	if !errors.Is(err, reconcile.ErrInterrupted) {
		t.Fatalf("error %v; want interrupted", err)
	}
	after := e.snapshot()
	before.Runs++
	if before != after {
		t.Errorf("an interrupted day changed something:\nbefore %+v\nafter  %+v", before, after)
	}
	if res.Run.Status != reconcile.RunInterrupted || len(res.Days) != 1 {
		t.Errorf("run %s with %d days; want interrupted after the first account", res.Run.Status, len(res.Days))
	}
}

// cancellingSource cancels the run's context after handing out its first line.
type cancellingSource struct {
	memSource
	cancel context.CancelFunc
}

func (s cancellingSource) Bill(ctx context.Context, d reconcile.BusinessDay) (Bill, error) {
	b, err := s.memSource.Bill(ctx, d)
	b.Reader = &cancellingReader{Reader: b.Reader, cancel: s.cancel}
	return b, err
}

type cancellingReader struct {
	statement.Reader
	cancel context.CancelFunc
	n      int
}

func (r *cancellingReader) Next() (statement.Line, error) {
	if r.n++; r.n == 2 {
		r.cancel()
	}
	return r.Reader.Next()
}

// TestBillOfAnotherDayIsRejected: an Alipay bill names its period; given for another day it
// is refused whole instead of holding the whole day.
func TestBillOfAnotherDayIsRejected(t *testing.T) {
	e := setup(t)
	p := reconcile.Alipay
	next, _ := reconcile.ParseBusinessDay("2026-11-29", shanghai)
	path := writeBill(t, p, next, []statement.Line{payLine("W-1", "WT-1", 100, next.Start.Add(time.Hour))})
	before := e.snapshot()
	if _, err := e.runFile(p, testDay, path, false); !isRejected(err) {
		t.Fatalf("error %v; want the bill of 2026-11-29 rejected for 2026-11-28", err)
	}
	after := e.snapshot()
	before.Runs++
	if before != after {
		t.Errorf("a bill of another day changed something:\nbefore %+v\nafter  %+v", before, after)
	}
	if _, err := e.runFile(p, next, path, false); err != nil {
		t.Errorf("the same bill for its own day: %v", err)
	}
}

// TestNothingReceivedIsNotTheOrderAmount: a payment the platform's discounts paid in full
// (商家实收 0.00) adds nothing to what the merchant received; the day's received figure is
// the bill's, not the order amounts'.
func TestNothingReceivedIsNotTheOrderAmount(t *testing.T) {
	e := setup(t)
	p := reconcile.Alipay
	e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: "R-FREE", amount: 100, status: reconcile.StatusPending})
	e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: "R-PAID", amount: 300, status: reconcile.StatusPending})
	free := payLine("R-FREE", "RT-1", 100, testDay.Start.Add(time.Hour))
	free.ReceivedMinor = 0
	res, err := e.runner.Run(context.Background(), Spec{Day: testDay, Accounts: []Account{{
		Key:    reconcile.AccountKey{Platform: p, MerchantID: merchantOf(p)},
		Source: memSource{lines: []statement.Line{free, payLine("R-PAID", "RT-2", 300, testDay.Start.Add(2*time.Hour))}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Days[0].Figures; d.PaymentsMinor != 400 || d.ReceivedMinor != 300 {
		t.Errorf("payments %d received %d; want 400 paid and 300 received (the free order brought in nothing)", d.PaymentsMinor, d.ReceivedMinor)
	}
}

// TestMoreWorkersThanThePoolHasConnections: a statement run with more apply workers than
// its pool has connections finishes (the workers share what there is). Warming their
// sessions once held the connections it got while it waited for more, and the day hung.
func TestMoreWorkersThanThePoolHasConnections(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.db.DB.SetMaxOpenConns(4)
	p := reconcile.Alipay
	var lines []statement.Line
	for i := range 40 {
		otn := fmt.Sprintf("P-%02d", i)
		e.insert(order{platform: p, merchant: merchantOf(p), outTradeNo: otn, amount: 100, status: reconcile.StatusPending})
		lines = append(lines, payLine(otn, "PT-"+otn, 100, testDay.Start.Add(time.Hour)))
	}
	runner := NewRunner(testStore{e.store}, e.store.Locker().WithWait(0), reconcile.NewApplier(e.store, nil, reconcile.ApplierSettings{}, zerolog.Nop()), e.store.Runs(), nil, 32, zerolog.Nop())
	done := make(chan error, 1)
	go func() {
		_, err := runner.Run(context.Background(), Spec{Day: testDay, Accounts: []Account{
			{Key: reconcile.AccountKey{Platform: p, MerchantID: merchantOf(p)}, Source: memSource{lines: lines}}}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("a statement run with 32 workers on a pool of 4 connections still running after two minutes")
	}
	var n int
	if err := e.db.Get(&n, `SELECT count(*) FROM payment_orders WHERE status = 'PAID'`); err != nil || n != 40 {
		t.Fatalf("%d of 40 orders repaired (%v)", n, err)
	}
}
