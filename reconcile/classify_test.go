package reconcile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

type mismatchRow struct {
	Kind         string  `db:"kind"`
	SeenCount    int     `db:"seen_count"`
	ReviewStatus string  `db:"review_status"`
	LocalAmount  *int64  `db:"local_amount_minor"`
	PlatformAmt  *int64  `db:"platform_amount_minor"`
	LocalStatus  *string `db:"local_status"`
	OrderID      *int64  `db:"order_id"`
}

func (b *bundle) mismatches(otn string) []mismatchRow {
	b.t.Helper()
	var rows []mismatchRow
	if err := b.db.Select(&rows, `SELECT kind, seen_count, review_status, local_amount_minor, platform_amount_minor, local_status, order_id
		FROM reconcile_mismatches WHERE out_trade_no = $1 ORDER BY kind`, otn); err != nil {
		b.t.Fatal(err)
	}
	return rows
}

// TestFindingsChangeNoState: each case applies a result twice and expects one finding whose
// seen_count is 2, and the order exactly as it was.
func TestFindingsChangeNoState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		order  orderSpec
		result func(otn string) reconcile.Result
		seller string // configured Alipay seller id
		want   reconcile.MismatchKind
	}{
		{"amount differs", orderSpec{amount: 8880}, func(o string) reconcile.Result { return paid(o, "T-"+o, 8870, reconcile.SourceNotify) }, "", reconcile.MismatchAmount},
		{"currency differs", orderSpec{amount: 8880, currency: "USD"}, func(o string) reconcile.Result { return paid(o, "T-"+o, 8880, reconcile.SourceReconcile) }, "", reconcile.MismatchCurrency},
		{"seller differs", orderSpec{amount: 8880}, func(o string) reconcile.Result {
			r := paid(o, "T-"+o, 8880, reconcile.SourceNotify)
			r.SellerID = "2088000000000099"
			return r
		}, "2088000000000001", reconcile.MismatchMerchant},
		{"out_trade_no under another app id", orderSpec{merchant: "2021000000000777"}, func(o string) reconcile.Result { return paid(o, "T-"+o, 8880, reconcile.SourceNotify) }, "", reconcile.MismatchMerchant},
		{"paid after close", orderSpec{status: reconcile.StatusClosed}, func(o string) reconcile.Result { return paid(o, "T-"+o, 8880, reconcile.SourceReconcile) }, "", reconcile.MismatchPaidAfterClose},
		{"paid after failure", orderSpec{status: reconcile.StatusFailed}, func(o string) reconcile.Result { return paid(o, "T-"+o, 8880, reconcile.SourceNotify) }, "", reconcile.MismatchPaidAfterClose},
		{"second payment", orderSpec{status: reconcile.StatusPaid, tradeNo: "T-FIRST"}, func(o string) reconcile.Result { return paid(o, "T-SECOND-"+o, 8880, reconcile.SourceNotify) }, "", reconcile.MismatchDuplicatePayment},
		{"alipay closed after payment", orderSpec{status: reconcile.StatusPaid, tradeNo: "T-R1"}, func(o string) reconcile.Result {
			r := stateResult(o, reconcile.StateClosed, reconcile.SourceBackfill)
			r.PlatformTradeNo, r.RawState = "T-R1", "TRADE_CLOSED"
			return r
		}, "", reconcile.MismatchRefundedAtPlatform},
		{"wechat refund", orderSpec{platform: reconcile.WechatPay, merchant: "2021000000000001", status: reconcile.StatusPaid, tradeNo: "T-R2"}, func(o string) reconcile.Result {
			r := stateResult(o, reconcile.StateRefunded, reconcile.SourceReconcile)
			r.Platform, r.PlatformTradeNo, r.RawState = reconcile.WechatPay, "T-R2", "REFUND"
			return r
		}, "", reconcile.MismatchRefundedAtPlatform},
		{"local paid, platform open", orderSpec{status: reconcile.StatusPaid, tradeNo: "T-U1"}, func(o string) reconcile.Result { return stateResult(o, reconcile.StateOpen, reconcile.SourceBackfill) }, "", reconcile.MismatchLocalPaidPlatformNot},
		{"local paid, platform never heard of it", orderSpec{status: reconcile.StatusPaid, tradeNo: "T-U2"}, func(o string) reconcile.Result {
			return stateResult(o, reconcile.StateNotFound, reconcile.SourceBackfill)
		}, "", reconcile.MismatchLocalPaidPlatformNot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withRedis, func(s *reconcile.ApplierSettings) {
				s.Accounts = map[reconcile.AccountKey]reconcile.Account{{Platform: reconcile.Alipay, MerchantID: "2021000000000001"}: {SellerID: tc.seller}}
			})
			otn := "M-1"
			tc.order.otn = otn
			id := b.order(tc.order)
			var before struct {
				Status  string `db:"status"`
				Version int64  `db:"version"`
			}
			b.db.Get(&before, `SELECT status, version FROM payment_orders WHERE id = $1`, id) //nolint:errcheck
			for i := 0; i < 2; i++ {
				res, err := b.applier.ApplyResult(context.Background(), tc.result(otn), reconcile.ApplyOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome != reconcile.OutcomeMismatch || res.Mismatch != tc.want {
					t.Fatalf("apply #%d: %s %s, want mismatch %s", i+1, res.Outcome, res.Mismatch, tc.want)
				}
			}
			rows := b.mismatches(otn)
			if len(rows) != 1 || rows[0].Kind != string(tc.want) || rows[0].SeenCount != 2 || rows[0].ReviewStatus != "OPEN" {
				t.Fatalf("mismatch rows = %+v, want one %s seen twice", rows, tc.want)
			}
			var after struct {
				Status  string `db:"status"`
				Version int64  `db:"version"`
			}
			b.db.Get(&after, `SELECT status, version FROM payment_orders WHERE id = $1`, id) //nolint:errcheck
			if after != before || b.events(id) != 0 || b.outbox(id) != 0 {
				t.Fatalf("state changed: before %+v after %+v, %d events, %d outbox", before, after, b.events(id), b.outbox(id))
			}
		})
	}
}

func TestUnknownOrderIsAFinding(t *testing.T) {
	t.Parallel()
	b := setup(t, dbOnly)
	res, err := b.applier.ApplyResult(context.Background(), paid("NOPE-1", "T-NOPE", 100, reconcile.SourceNotify), reconcile.ApplyOptions{})
	if err != nil || res.Outcome != reconcile.OutcomeMismatch || res.Mismatch != reconcile.MismatchUnknownOrder {
		t.Fatalf("got %s %s %v, want UNKNOWN_ORDER", res.Outcome, res.Mismatch, err)
	}
	rows := b.mismatches("NOPE-1")
	if len(rows) != 1 || rows[0].OrderID != nil || *rows[0].PlatformAmt != 100 {
		t.Fatalf("rows = %+v", rows)
	}
	// An unpaid answer about an unknown order moved no money: nothing for finance.
	res, err = b.applier.ApplyResult(context.Background(), stateResult("NOPE-2", reconcile.StateOpen, reconcile.SourceReconcile), reconcile.ApplyOptions{})
	if err != nil || res.Outcome != reconcile.OutcomeUnchanged || len(b.mismatches("NOPE-2")) != 0 {
		t.Fatalf("open unknown order: %s %v", res.Outcome, err)
	}
}

func TestResolvedFindingReopensOnlyOnNewEvidence(t *testing.T) {
	t.Parallel()
	b := setup(t, dbOnly)
	b.order(orderSpec{otn: "R-1", amount: 8880})
	apply := func(amount int64) {
		t.Helper()
		if _, err := b.applier.ApplyResult(context.Background(), paid("R-1", "T-R-1", amount, reconcile.SourceReconcile), reconcile.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	apply(8000)
	b.db.MustExec(`UPDATE reconcile_mismatches SET review_status = 'RESOLVED', resolution = 'refunded offline' WHERE out_trade_no = 'R-1'`)
	apply(8000)
	if rows := b.mismatches("R-1"); rows[0].ReviewStatus != "RESOLVED" || rows[0].SeenCount != 2 {
		t.Fatalf("same evidence reopened the finding: %+v", rows)
	}
	apply(7000)
	if rows := b.mismatches("R-1"); len(rows) != 1 || rows[0].ReviewStatus != "OPEN" || rows[0].SeenCount != 3 || *rows[0].PlatformAmt != 7000 {
		t.Fatalf("new evidence did not reopen: %+v", rows)
	}
	var note string
	if err := b.db.Get(&note, `SELECT a.note FROM reconcile_mismatch_audit a JOIN reconcile_mismatches m ON m.id = a.mismatch_id
		WHERE m.out_trade_no = 'R-1' AND a.action = 'reopen' AND a.from_status = 'RESOLVED' AND a.to_status = 'OPEN'`); err != nil {
		t.Fatalf("no audit row for the reopen: %v", err)
	}
	if !strings.Contains(note, "7000") || !strings.Contains(note, "8000") {
		t.Fatalf("reopen note %q does not show the old and new evidence", note)
	}
}

func TestUnpaidAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		state      reconcile.PlatformState
		createdAgo time.Duration
		close      bool
		wantOut    reconcile.Outcome
		wantStatus reconcile.Status
	}{
		{"open, not expired", reconcile.StateOpen, 10 * time.Minute, true, reconcile.OutcomeStillPending, reconcile.StatusPending},
		{"open, expired, may close", reconcile.StateOpen, 3 * time.Hour, true, reconcile.OutcomeApplied, reconcile.StatusClosed},
		{"open, expired, may not close (callback)", reconcile.StateOpen, 3 * time.Hour, false, reconcile.OutcomeStillPending, reconcile.StatusPending},
		{"not found, not expired", reconcile.StateNotFound, 10 * time.Minute, true, reconcile.OutcomeStillPending, reconcile.StatusPending},
		{"not found, expired", reconcile.StateNotFound, 3 * time.Hour, true, reconcile.OutcomeApplied, reconcile.StatusClosed},
		{"closed at the platform", reconcile.StateClosed, 10 * time.Minute, false, reconcile.OutcomeApplied, reconcile.StatusClosed},
		{"payment failed", reconcile.StateFailed, 10 * time.Minute, false, reconcile.OutcomeApplied, reconcile.StatusFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, dbOnly)
			id := b.order(orderSpec{otn: "U-1", createdAgo: tc.createdAgo})
			for i := 0; i < 2; i++ { // the second time must change nothing
				res, err := b.applier.ApplyResult(context.Background(), stateResult("U-1", tc.state, reconcile.SourceReconcile), reconcile.ApplyOptions{CloseIfExpired: tc.close})
				if err != nil {
					t.Fatal(err)
				}
				want := tc.wantOut
				if i == 1 && want == reconcile.OutcomeApplied {
					want = reconcile.OutcomeUnchanged
				}
				if res.Outcome != want {
					t.Fatalf("apply #%d: outcome %s, want %s", i+1, res.Outcome, want)
				}
			}
			if s := b.status(id); s != tc.wantStatus {
				t.Fatalf("status %s, want %s", s, tc.wantStatus)
			}
			wantEvents := 0
			if tc.wantStatus != reconcile.StatusPending {
				wantEvents = 1
			}
			if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = $2`, id, string(tc.wantStatus)); n != wantEvents {
				t.Fatalf("%d %s events, want %d", n, tc.wantStatus, wantEvents)
			}
			if b.outbox(id) != 0 {
				t.Fatal("an unpaid transition enqueued fulfilment")
			}
		})
	}
}

func TestExplicitExpiryWins(t *testing.T) {
	t.Parallel()
	b := setup(t, dbOnly)
	id := b.order(orderSpec{otn: "E-1", createdAgo: 3 * time.Hour})
	b.db.MustExec(`UPDATE payment_orders SET expires_at = now() + interval '1 hour' WHERE id = $1`, id)
	res, err := b.applier.ApplyResult(context.Background(), stateResult("E-1", reconcile.StateNotFound, reconcile.SourceReconcile), reconcile.ApplyOptions{CloseIfExpired: true})
	if err != nil || res.Outcome != reconcile.OutcomeStillPending {
		t.Fatalf("expires_at in the future: %s %v, want still pending", res.Outcome, err)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	paidID := b.order(orderSpec{otn: "DR-1", amount: 8880})
	b.order(orderSpec{otn: "DR-2", amount: 8880})
	expired := b.order(orderSpec{otn: "DR-3", createdAgo: 5 * time.Hour})
	ctx, dry := context.Background(), reconcile.ApplyOptions{DryRun: true, CloseIfExpired: true}

	res, err := b.applier.ApplyResult(ctx, paid("DR-1", "T-DR1", 8880, reconcile.SourceReconcile), dry)
	if err != nil || res.Outcome != reconcile.OutcomeApplied || res.To != reconcile.StatusPaid {
		t.Fatalf("dry paid: %+v %v", res, err)
	}
	res, err = b.applier.ApplyResult(ctx, paid("DR-2", "T-DR2", 1, reconcile.SourceReconcile), dry)
	if err != nil || res.Mismatch != reconcile.MismatchAmount {
		t.Fatalf("dry mismatch: %+v %v", res, err)
	}
	res, err = b.applier.ApplyResult(ctx, stateResult("DR-3", reconcile.StateNotFound, reconcile.SourceReconcile), dry)
	if err != nil || res.To != reconcile.StatusClosed {
		t.Fatalf("dry close: %+v %v", res, err)
	}
	if b.status(paidID) != reconcile.StatusPending || b.status(expired) != reconcile.StatusPending ||
		b.count(`SELECT count(*) FROM payment_events`) != 0 || b.count(`SELECT count(*) FROM reconcile_mismatches`) != 0 {
		t.Fatal("dry run wrote to the database")
	}
	if n, _ := b.redis.Client.Keys(ctx, b.redis.Prefix+"*").Result(); len(n) != 0 {
		t.Fatalf("dry run left claim keys %v", n)
	}
}
