package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// People of the tests: ann and bob review, cfo approves, and everyone at audit.example.com
// approves too; eve signs in but is on neither list.
const (
	ann = "ann@example.com"
	bob = "bob@example.com"
	cfo = "cfo@example.com"
	aud = "kim@audit.example.com"
	eve = "eve@example.com"
)

var shanghai, _ = time.LoadLocation("Asia/Shanghai")

// base is the seeded findings' first sighting: 28 November 2026, 10:00 China time.
var base = time.Date(2026, 11, 28, 10, 0, 0, 0, shanghai)

// fixture is a migrated database with three findings and the console over it.
type fixture struct {
	db                   *repotest.DB
	h                    http.Handler
	amount, unknown, pac int64 // AMOUNT_MISMATCH (with order and events), UNKNOWN_ORDER, PAID_AFTER_CLOSE
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, consoleSettings())
}

// newFixtureWith is newFixture with the console's settings cs (an accounts file's
// providers, say).
func newFixtureWith(t *testing.T, cs config.Console) *fixture {
	t.Helper()
	db := repotest.NewDB(t)
	f := &fixture{db: db}
	orderID := repotest.InsertOrder(t, db, repotest.Order{Platform: "alipay", MerchantID: "2021000000000001", OutTradeNo: "ORD-1001",
		AmountMinor: 123456, Status: "PAID", PlatformTradeNo: "2026112822001", PaidAmountMinor: 123456,
		PaidAt: base.Add(-time.Minute), CreatedAt: base.Add(-time.Hour)})
	_, err := db.Exec(`INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor, raw_digest, created_at)
		VALUES ($1, 'alipay', '2026112822001', 'PAID', 'notify', 123456, 'sha256:ab12', $2)`, orderID, base.Add(-time.Minute))
	must(t, err)
	insert := func(q string, args ...any) int64 {
		var id int64
		must(t, db.Get(&id, q, args...))
		return id
	}
	f.amount = insert(`INSERT INTO reconcile_mismatches (order_id, platform, merchant_id, out_trade_no, platform_trade_no, kind,
		local_amount_minor, platform_amount_minor, local_status, platform_status, detail, first_seen_at, last_seen_at, seen_count)
		VALUES ($1, 'alipay', '2021000000000001', 'ORD-1001', '2026112822001', 'AMOUNT_MISMATCH', 123456, 133456,
		'PAID', 'TRADE_SUCCESS', '{"total_amount":"1334.56"}', $2, $3, 3) RETURNING id`, orderID, base, base.Add(2*time.Hour))
	f.unknown = insert(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, kind,
		platform_amount_minor, platform_status, first_seen_at, last_seen_at)
		VALUES ('wechatpay', '1900000001', 'GHOST-7', '4200000001', 'UNKNOWN_ORDER', 5000, 'SUCCESS', $1, $1) RETURNING id`, base.Add(time.Hour))
	f.pac = insert(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, kind,
		local_amount_minor, platform_amount_minor, local_status, platform_status, first_seen_at, last_seen_at)
		VALUES ('wechatpay', '1900000002', 'ORD-2002', '4200000002', 'PAID_AFTER_CLOSE', 990000, 990000, 'CLOSED', 'SUCCESS', $1, $1)
		RETURNING id`, base.AddDate(0, 0, -3))
	// The console acts as it does in production: as payrecon_reviewer, with exactly that
	// role's rights (every test here would fail if the role lacked one the console needs).
	f.h = newConsoleWith(t, postgres.NewReview(asReviewer(t, db)), cs)
	return f
}

// asReviewer sets the roles up in the test database and opens a pool whose sessions run as
// payrecon_reviewer.
func asReviewer(t *testing.T, db *repotest.DB) *sqlx.DB {
	t.Helper()
	out, err := postgres.SetupRoles(context.Background(), db.DB)
	if err != nil || !out.Granted {
		t.Fatalf("set up roles: %+v %v", out, err)
	}
	u, err := url.Parse(db.URL)
	must(t, err)
	q := u.Query()
	q.Set("options", "-c role="+postgres.RoleReviewer)
	u.RawQuery = q.Encode()
	pool, err := postgres.Open(context.Background(), u.String())
	must(t, err)
	t.Cleanup(func() { pool.Close() })
	var cur string
	if err := pool.Get(&cur, `SELECT current_user`); err != nil || cur != postgres.RoleReviewer {
		t.Fatalf("current_user = %q (%v), want %s", cur, err, postgres.RoleReviewer)
	}
	return pool
}

// newConsole is the console as serve wires it, with the tests' people.
func newConsole(t *testing.T, store console.Store) http.Handler {
	t.Helper()
	return newConsoleWith(t, store, consoleSettings())
}

// newConsoleWith is newConsole with the settings cs.
func newConsoleWith(t *testing.T, store console.Store, cs config.Console) http.Handler {
	t.Helper()
	cfg, err := console.FromSettings(cs, shanghai, zerolog.New(zerolog.NewTestWriter(t)))
	must(t, err)
	cfg.Now = func() time.Time { return base.Add(6 * time.Hour) }
	return console.New(cfg, store)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// request is one request to the console from peer (host:port), as who ("" sends no
// identity header).
type request struct {
	method, path, peer, who string
	form                    map[string]string
	lang                    string
	extra                   string     // a second identity header value
	values                  url.Values // a form with repeated fields (used when form is nil)
}

func (f *fixture) do(t *testing.T, rq request) *httptest.ResponseRecorder {
	t.Helper()
	var body *strings.Reader
	if rq.form == nil && rq.values != nil {
		rq.form = map[string]string{}
		body = strings.NewReader(rq.values.Encode())
	} else if rq.form != nil {
		var b strings.Builder
		for k, v := range rq.form {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(k + "=" + urlQuery(v))
		}
		body = strings.NewReader(b.String())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(rq.method, rq.path, body)
	r.RemoteAddr = rq.peer
	if rq.form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if rq.who != "" {
		r.Header.Set("X-Forwarded-Email", rq.who)
	}
	if rq.extra != "" {
		r.Header.Add("X-Forwarded-Email", rq.extra)
	}
	if rq.lang != "" {
		r.Header.Set("Accept-Language", rq.lang)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token reads who's form token from a finding page.
func (f *fixture) token(t *testing.T, who string, id int64) string {
	t.Helper()
	w := f.do(t, request{method: "GET", path: findingPath(id), peer: trusted, who: who})
	m := csrfRe.FindStringSubmatch(w.Body.String())
	if w.Code != http.StatusOK || m == nil {
		t.Fatalf("no form token for %s on finding %d (HTTP %d)", who, id, w.Code)
	}
	return m[1]
}
