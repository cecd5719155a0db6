package statementrun

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// TestWechatDayWithoutTrades: WeChat Pay answers NO_STATEMENT_EXIST for a day on which the
// account had no trades. Once the bill is due (10:00 the next morning) the day is reconciled
// as a bill without lines: signed off with zero figures, its held orders aging as on any
// day, the run a success. Before that hour it is "not ready, retry at 10:00" and changes
// nothing.
func TestWechatDayWithoutTrades(t *testing.T) {
	e := setup(t)
	var now atomic.Pointer[time.Time]
	at := func(d reconcile.BusinessDay, h, m int) { // h:m on the morning after d
		v := d.End.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
		now.Store(&v)
	}
	at(testDay, 11, 0)
	clock := func() time.Time { return *now.Load() }
	// The sandbox and the client share the clock: WeChat Pay refuses requests signed with a
	// time more than five minutes off its own.
	sb, err := sandbox.New(sandbox.Options{Keys: keysForSandbox(t), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(func() { sb.Close(); srv.Close() })
	cfg := sb.WechatPayConfig(srv.URL)
	cfg.Now, cfg.Tuning = clock, platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}
	client, err := wechatpay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: sb.Identity().WechatMchID}
	sb.SetBillSpoil(key.Platform, key.MerchantID, sandbox.BillSpoil{NoStatementWhenEmpty: true})
	run := func(d reconcile.BusinessDay) (Result, error) {
		acct := Account{Key: key, Source: PlatformSource{Platform: key.Platform, Merchant: key.MerchantID, Client: client}}
		return e.runner.Run(context.Background(), Spec{Day: d, Accounts: []Account{acct}})
	}
	// Paid here the day before, unknown to WeChat Pay: held on its own (empty) day, reported
	// on the next.
	prev := testDay.Prev()
	e.insert(order{platform: key.Platform, merchant: key.MerchantID, outTradeNo: "EMPTY-HELD", amount: 500,
		status: reconcile.StatusPaid, tradeNo: "EHT-1", paidAt: prev.Start.Add(10 * time.Hour)})

	at(prev, 10, 1)
	res, err := run(prev)
	if err != nil || res.Run.Status != reconcile.RunSucceeded || res.Days[0].Figures != (reconcile.StatementFigures{Held: 1}) {
		t.Fatalf("the empty day before: %v, run %s, figures %+v; want success, nothing but one order held", err, res.Run.Status, res.Days[0].Figures)
	}

	at(testDay, 9, 59)
	before := e.snapshot()
	_, err = run(testDay)
	var nr *platformclient.BillNotReadyError
	if !errors.As(err, &nr) || !nr.RetryAt.Equal(testDay.End.Add(10*time.Hour)) || nr.Code != "NO_STATEMENT_EXIST" {
		t.Fatalf("at 09:59: %v; want not ready, retry at 10:00", err)
	}
	if after := e.snapshot(); after != withRuns(before, 1) {
		t.Errorf("a day not ready changed something:\nbefore %+v\nafter  %+v", before, after)
	}

	at(testDay, 10, 1)
	res, err = run(testDay)
	if err != nil || res.Run.Status != reconcile.RunSucceeded {
		t.Fatalf("at 10:01: %v, run %s; want success", err, res.Run.Status)
	}
	d := res.Days[0]
	if d.Figures != (reconcile.StatementFigures{}) || d.Tally.Reported != 1 || res.Run.Counts.Scanned != 0 {
		t.Errorf("figures %+v, tally %+v, counts %+v; want zero figures and the held order reported", d.Figures, d.Tally, res.Run.Counts)
	}
	if f := e.findings(key.Platform); len(f) != 1 || f["EMPTY-HELD"] != string(reconcile.MismatchLocalPaidPlatformNot) {
		t.Errorf("findings %v; want EMPTY-HELD %s", f, reconcile.MismatchLocalPaidPlatformNot)
	}
	days, err := e.store.StatementDays(context.Background(), testDay.Date, testDay.End.Format(time.DateOnly))
	if err != nil || len(days) != 1 || days[0].Lines != 0 || days[0].Payments != 0 || days[0].NetMilliFen != 0 {
		t.Fatalf("signed-off day %+v (%v); want one row of zero figures", days, err)
	}

	// Reconciled again, the empty day changes nothing.
	before = e.snapshot()
	if _, err := run(testDay); err != nil {
		t.Fatal(err)
	}
	if after := e.snapshot(); after != withRuns(before, 1) {
		t.Errorf("the empty day reconciled twice changed something:\nbefore %+v\nafter  %+v", before, after)
	}
}

func withRuns(s snapshot, n int64) snapshot {
	s.Runs += n
	return s
}
