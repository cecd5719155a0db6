package demo_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/demo"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestDemo runs `make demo`'s story against the real servers and checks its refunds (as
// printed and in the database it keeps) and its statement step: the statement run repairs
// the order only the bill could find, reports the payment for an order never had and the
// refund made in the merchant portal, and prints the day's settlement figures, account by
// account.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole demo: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nats := os.Getenv("RECONCILER_TEST_NATS_URL")
	if nats == "" {
		nats = "nats://127.0.0.1:4222"
	}
	var out strings.Builder
	err := demo.Run(ctx, demo.Options{AdminDatabaseURL: repotest.AdminURL(), RedisURL: repotest.RedisURL(), NATSURL: nats,
		Keep: true, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}, &out)
	text := out.String()
	db := keptDatabase(t, text) // dropped when the test ends
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, text)
	}
	checkRefundStep(t, text)
	checkRefundState(t, db)
	_, stmt, ok := strings.Cut(text, "\n10. the next morning: the statement run")
	if !ok {
		t.Fatalf("no statement step in the demo's output:\n%s", text)
	}
	if !strings.Contains(text, "finance takes the short payment of W-amount-mismatch-1 in (accept_payment)") {
		t.Errorf("the demo does not show finance taking the short payment in:\n%s", text)
	}
	if !strings.Contains(text, "fulfilment hand-off: skipped") {
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`order\.paid order \d+ +W-amount-mismatch-1 +198\.01 yuan  via review `),
			regexp.MustCompile(`finding\.resolved finding \d+ +W-amount-mismatch-1`),
			regexp.MustCompile(`finding\.opened finding \d+ +A-unknown-1`),
		} {
			if !want.MatchString(text) {
				t.Errorf("the relay step lacks %s:\n%s", want, text)
			}
		}
	}
	for _, want := range []*regexp.Regexp{
		// The pass and the backfill could not settle it: it is still PENDING before the bill.
		regexp.MustCompile(`(?m)^  A-bill-only-1 +2021000122600001 +bill only +paid +PENDING +PENDING +0 +0$`),
		regexp.MustCompile(`(?m)^   repaired from the bill only: A-bill-only-1 \(2021000122600001, .*ACQ.SYSTEM_ERROR\): PENDING -> PAID, 1 event\(s\), 1 outbox row\(s\)$`),
		regexp.MustCompile(`(?m)^   \d+ +wechatpay +W-bill-unknown-1 +36\.00 SUCCESS +1$`),
		regexp.MustCompile(`\(2 UNKNOWN_ORDER findings\)`),
		// The refund made in the merchant portal: only the bill tells of it.
		regexp.MustCompile(`(?m)^   \d+ +wechatpay +W-portal-refund-1 +PORTAL-W-1 +12\.00 SUCCESS +1$`),
		regexp.MustCompile(`\(2 UNKNOWN_REFUND findings\)`),
		// A service provider's sub-merchant on each platform, repaired by the pass through
		// the provider's app or partner API, under its own merchant id.
		regexp.MustCompile(`(?m)^  A-via-provider-1 +2021000122609101 +via provider +paid +PENDING +PAID +\* +1 +1$`),
		regexp.MustCompile(`(?m)^  W-via-provider-1 +1900009201 +via provider +paid +PENDING +PAID +\* +1 +1$`),
		regexp.MustCompile(`statement run over 9 accounts' bills`),
		// The rows below, added up.
		regexp.MustCompile(`(?m)^   the day in all: 27 payments 1441\.39 yuan, 4 refund\(s\) 177\.01 yuan, fees 7\.58628, net 1256\.79372 yuan; 31 lines: 24 matched, 1 repaired, 6 found$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("demo output lacks %s:\n%s", want, text)
		}
	}
	checkFigures(t, stmt)
}

// checkFigures checks each account's row of the day's settlement figures: counts and sums
// follow from the seeded orders (0.6% fee), matched/repaired/found/held from their stories.
// Only the first seventeen columns are read: columns added after them leave the check alone.
func checkFigures(t *testing.T, stmt string) {
	t.Helper()
	want := map[string]string{
		// missed callback x2, storm x2, the refunded order's payment and its refund (which
		// run repaired) matched; bill only repaired; amount mismatch, paid after close and
		// A-unknown-1 found.
		"alipay:2021000122600001": "9 512.11 1 58.00 454.11 2.72466 451.38534 10 6 1 3 0 0 0 0",
		"alipay:2021000122600002": "3 108.08 0 0.00 108.08 0.64848 107.43152 3 3 0 0 0 0 0 0",
		// The partial refund matched (the abnormal one paid nothing back: not on the bill), and
		// so did the short payment finance took in (accept_payment, step 8); W-bill-unknown-1
		// and the refund line of the order refunded at the platform (a number we never had)
		// found.
		"wechatpay:1900000001": "9 615.10 2 107.01 508.09 3.04854 505.04146 11 9 0 2 0 0 1 0",
		// The portal refund found.
		"wechatpay:1900000002": "4 134.08 1 12.00 122.08 0.73248 121.34752 5 4 0 1 0 0 1 0",
		// Each provider's first sub-merchant: its own bill (asked with its app_auth_token or
		// sub_mchid), its one payment matched; the provider's Alipay app and the second
		// sub-merchants had no trades: a day of zeros, saved as such.
		"alipay:2021000122609101": "1 36.01 0 0.00 36.01 0.21606 35.79394 1 1 0 0 0 0 0 0",
		"wechatpay:1900009201":    "1 36.01 0 0.00 36.01 0.21606 35.79394 1 1 0 0 0 0 0 0",
		"alipay:2021000122609009": "0 0.00 0 0.00 0.00 0.00000 0.00000 0 0 0 0 0 0 0 0",
		"wechatpay:1900009202":    "0 0.00 0 0.00 0.00 0.00000 0.00000 0 0 0 0 0 0 0 0",
	}
	day := time.Now().In(mustChina(t)).Format(time.DateOnly)
	got := map[string]string{}
	for _, line := range strings.Split(stmt, "\n") {
		f := strings.Fields(line)
		if len(f) >= 17 && f[0] == day {
			got[f[1]] = strings.Join(f[2:17], " ")
		}
	}
	for acct, w := range want {
		if got[acct] != w {
			t.Errorf("%s %s: figures %q, want %q (payments amount refunds amount received fees net lines matched repaired found held refunds_repaired refunds_unknown reported)\n%s",
				day, acct, got[acct], w, stmt)
		}
	}
}

func mustChina(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// keptDatabase opens the database the demo kept (--keep) and drops it when the test ends.
func keptDatabase(t *testing.T, text string) *sqlx.DB {
	t.Helper()
	m := regexp.MustCompile(`(?m)^kept database (payrecon_demo_\d+) `).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the demo names no kept database:\n%s", text)
	}
	admin, err := postgres.Open(context.Background(), repotest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(`DROP DATABASE IF EXISTS ` + pq.QuoteIdentifier(m[1]) + ` WITH (FORCE)`) //nolint:errcheck // best effort
		admin.Close()
	})
	u, err := url.Parse(repotest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + m[1]
	db, err := postgres.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkRefundStep checks what the demo prints of the refunds: the refunds made and the
// callbacks sent, the pass's repaired refund, the refunded order, each refund before and
// after (the last step, once the bills are in), and the line for finance.
func checkRefundStep(t *testing.T, text string) {
	t.Helper()
	wants := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^   and 4 refunds at the platforms, 3 of them recorded by the merchant's app \(PROCESSING\), 1 made in the merchant portal;$`),
		regexp.MustCompile(`(?m)^   refund callbacks: 2 sent to /notify/\{platform\}, 2 acknowledged; none for the other 2 \(one lost, one the app never asked for\)$`),
		// The pass's counters: refunds_repaired, the last column, is the lost callback's refund.
		regexp.MustCompile(`(?m)^run 1 once succeeded, shard 0/1\n +scanned .* refunds_repaired\n( +\d+)+ +1\n`),
		regexp.MustCompile(`(?m)^  A-refund-lost-callback-1 +2021000122600001 +refund lost callback +paid +PAID +REFUNDED +\* +2 +1$`),
		regexp.MustCompile(`(?m)^  A-refund-lost-callback-1 +RF-A-lost-1 +58\.00 +SUCCESS +PROCESSING +SUCCESS +run +REFUND_SUCCESS +REFUNDED +-$`),
		regexp.MustCompile(`(?m)^  W-partial-refund-1 +RF-W-partial-1 +30\.00 +SUCCESS +PROCESSING +SUCCESS +callback +REFUND_SUCCESS +PAID, 30\.00 of 100\.00 back +-$`),
		regexp.MustCompile(`(?m)^  W-portal-refund-1 +PORTAL-W-1 +12\.00 +SUCCESS +- +- +- +- +PAID +UNKNOWN_REFUND #\d+$`),
		regexp.MustCompile(`(?m)^  W-abnormal-refund-1 +RF-W-abnormal-1 +66\.00 +ABNORMAL +PROCESSING +ABNORMAL +callback +REFUND_ABNORMAL +PAID +REFUND_ABNORMAL #\d+$`),
		regexp.MustCompile(`(?m)^   Refunds: 1 repaired by run, 1 partial \(30\.00 of 100\.00 yuan\), 1 unknown to us \(portal\), 1 abnormal$`),
		// The findings for finance name the refund a refund finding is about.
		regexp.MustCompile(`(?m)^  \d+ +REFUND_ABNORMAL +wechatpay +W-abnormal-refund-1 +RF-W-abnormal-1 +66\.00 ABNORMAL +66\.00 ABNORMAL +\d+$`),
	}
	if !strings.Contains(text, "fulfilment hand-off: skipped") {
		// Fulfilment hears of both refunds that went back to the buyer.
		wants = append(wants, regexp.MustCompile(`refund\.succeeded order \d+ +A-refund-lost-callback-1 refund RF-A-lost-1 +58\.00 yuan  via reconcile `),
			regexp.MustCompile(`refund\.succeeded order \d+ +W-partial-refund-1 refund RF-W-partial-1 +30\.00 yuan  via notify `))
	}
	for _, want := range wants {
		if !want.MatchString(text) {
			t.Errorf("demo output lacks %s:\n%s", want, text)
		}
	}
}

// checkRefundState checks the refunds in the database the demo kept: each refund's status,
// its events (type and source) and outbox rows, its order's refunded amount and status; the
// portal refund is a finding of the statement run only; the pass's run row counts the
// refund it repaired.
func checkRefundState(t *testing.T, db *sqlx.DB) {
	t.Helper()
	var rows []struct {
		No        string `db:"out_refund_no"`
		Status    string `db:"status"`
		Succeeded bool   `db:"succeeded"`
		Order     string `db:"order_status"`
		Refunded  int64  `db:"refunded_minor"`
		Paid      int64  `db:"paid_amount_minor"`
		Events    string `db:"events"`
		Outbox    int    `db:"outbox"`
	}
	if err := db.Select(&rows, `SELECT r.out_refund_no, r.status, r.succeeded_at IS NOT NULL AS succeeded,
		o.status AS order_status, o.refunded_minor, o.paid_amount_minor,
		COALESCE((SELECT string_agg(e.event_type || '/' || e.source, ',' ORDER BY e.id) FROM payment_events e WHERE e.refund_id = r.id), '') AS events,
		(SELECT count(*) FROM fulfillment_outbox b WHERE b.refund_id = r.id AND b.kind = 'refund.succeeded') AS outbox
		FROM payment_refunds r JOIN payment_orders o ON o.id = r.order_id ORDER BY r.out_refund_no`); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		succeeded := "-"
		if r.Succeeded {
			succeeded = "succeeded"
		}
		got = append(got, fmt.Sprintf("%s | %s | %s | %s | %d of %d | %s | %d outbox", r.No, r.Status, succeeded, r.Order,
			r.Refunded, r.Paid, r.Events, r.Outbox))
	}
	want := []string{
		"RF-A-lost-1 | SUCCESS | succeeded | REFUNDED | 5800 of 5800 | REFUND_SUCCESS/reconcile | 1 outbox",
		"RF-W-abnormal-1 | ABNORMAL | - | PAID | 0 of 6600 | REFUND_ABNORMAL/notify | 0 outbox",
		"RF-W-partial-1 | SUCCESS | succeeded | PAID | 3000 of 10000 | REFUND_SUCCESS/notify | 1 outbox",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("refunds in the database:\n%s\nwant (the portal refund is not ours):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var one struct {
		OrderRefunded int64 `db:"order_refunded"`
		Unknown       int64 `db:"unknown"`
		Abnormal      int64 `db:"abnormal"`
		Repaired      int64 `db:"repaired"`
	}
	if err := db.Get(&one, `SELECT
		(SELECT count(*) FROM payment_events e JOIN payment_orders o ON o.id = e.order_id
			WHERE o.out_trade_no = 'A-refund-lost-callback-1' AND e.event_type = 'REFUNDED' AND e.refund_id IS NULL) AS order_refunded,
		(SELECT count(*) FROM reconcile_mismatches m JOIN payment_orders o ON o.id = m.order_id
			WHERE m.kind = 'UNKNOWN_REFUND' AND m.out_refund_no = 'PORTAL-W-1' AND o.out_trade_no = 'W-portal-refund-1'
			AND m.detail->>'source' = 'statement') AS unknown,
		(SELECT count(*) FROM reconcile_mismatches WHERE kind = 'REFUND_ABNORMAL' AND out_refund_no = 'RF-W-abnormal-1') AS abnormal,
		(SELECT refunds_repaired FROM reconcile_runs WHERE mode = 'once') AS repaired`); err != nil {
		t.Fatal(err)
	}
	if one.OrderRefunded != 1 || one.Unknown != 1 || one.Abnormal != 1 || one.Repaired != 1 {
		t.Errorf("refunded order's REFUNDED event %d, UNKNOWN_REFUND for PORTAL-W-1 from the bill %d, REFUND_ABNORMAL %d, run's refunds_repaired %d; want 1 each",
			one.OrderRefunded, one.Unknown, one.Abnormal, one.Repaired)
	}
}
