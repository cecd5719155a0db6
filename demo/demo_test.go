package demo_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/demo"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestDemo runs `make demo`'s story against the real servers and checks its last step: the
// statement run repairs the order only the bill could find, reports the payment for an
// order never had, and prints the day's settlement figures, account by account.
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
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	_, stmt, ok := strings.Cut(text, "\n10. the next morning: the statement run")
	if !ok {
		t.Fatalf("no statement step in the demo's output:\n%s", text)
	}
	for _, want := range []*regexp.Regexp{
		// The pass and the backfill could not settle it: it is still PENDING before the bill.
		regexp.MustCompile(`(?m)^  A-bill-only-1 +2021000122600001 +bill only +paid +PENDING +PENDING +0 +0$`),
		regexp.MustCompile(`(?m)^   repaired from the bill only: A-bill-only-1 \(2021000122600001, .*ACQ.SYSTEM_ERROR\): PENDING -> PAID, 1 event\(s\), 1 outbox row\(s\)$`),
		regexp.MustCompile(`(?m)^   \d+ +wechatpay +W-bill-unknown-1 +36\.00 SUCCESS +1$`),
		regexp.MustCompile(`\(2 UNKNOWN_ORDER findings\)`),
		// The four rows below, added up.
		regexp.MustCompile(`(?m)^   the day in all: 21 payments 1100\.37 yuan, 1 refund\(s\) 77\.01 yuan, fees 6\.14016, net 1017\.21984 yuan; 22 lines: 15 matched, 1 repaired, 6 found$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("demo output lacks %s:\n%s", want, text)
		}
	}
	checkFigures(t, stmt)
}

// checkFigures checks each account's row of the day's settlement figures: counts and sums
// follow from the seeded orders (0.6% fee), matched/repaired/found from their stories.
func checkFigures(t *testing.T, stmt string) {
	t.Helper()
	want := map[string]string{
		// missed callback x2, storm x2 matched; bill only repaired; amount mismatch, paid after
		// close and A-unknown-1 found.
		"alipay:2021000122600001": "8 454.11 0 0.00 2.72466 451.38534 8 4 1 3 0 0",
		"alipay:2021000122600002": "3 108.08 0 0.00 0.64848 107.43152 3 3 0 0 0 0",
		// The refund line of the order refunded at the platform, the amount mismatch and
		// W-bill-unknown-1 found.
		"wechatpay:1900000001": "7 449.10 1 77.01 2.23254 369.85746 8 5 0 3 0 0",
		"wechatpay:1900000002": "3 89.08 0 0.00 0.53448 88.54552 3 3 0 0 0 0",
	}
	day := time.Now().In(mustChina(t)).Format(time.DateOnly)
	got := map[string]string{}
	for _, line := range strings.Split(stmt, "\n") {
		f := strings.Fields(line)
		if len(f) == 14 && f[0] == day {
			got[f[1]] = strings.Join(f[2:], " ")
		}
	}
	for acct, w := range want {
		if got[acct] != w {
			t.Errorf("%s %s: figures %q, want %q (payments amount refunds amount fees net lines matched repaired found held reported)\n%s",
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
