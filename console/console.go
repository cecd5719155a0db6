// Package console is the finance review console: server-rendered pages under /review/ on the
// admin port, behind an authenticating proxy that names the person in a header.
package console

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/reconcile/identity"
)

// Store is what the console reads and writes: the review workflow over PostgreSQL
// (*postgres.Review is one).
type Store interface {
	Search(ctx context.Context, f reconcile.FindingFilter) (reconcile.FindingPage, error)
	// SearchAccounts is Search among the findings of accounts alone (a service provider's
	// sub-merchants): none match when accounts is empty.
	SearchAccounts(ctx context.Context, f reconcile.FindingFilter, accounts []reconcile.AccountKey) (reconcile.FindingPage, error)
	Details(ctx context.Context, id int64) (reconcile.FindingDetails, error)
	Acknowledge(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error)
	Resolve(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error)
	Approve(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error)
	Reject(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error)
	Withdraw(ctx context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error)
	// Report reads the report of [from, to) in one snapshot and hands it to fn, its findings
	// streamed from the database while fn writes them.
	Report(ctx context.Context, from, to time.Time, fn func(reconcile.Report) error) error
	// StatementDays lists the statement days with bill dates in [from, to) (YYYY-MM-DD).
	StatementDays(ctx context.Context, from, to string) ([]reconcile.StatementDayRow, error)
	// StatementAccounts lists every account a statement day was ever saved for.
	StatementAccounts(ctx context.Context) ([]reconcile.AccountKey, error)
	// StatementLines lists the bill lines a run remembered for one account's day ("" result: all).
	StatementLines(ctx context.Context, acct reconcile.AccountKey, date string, result reconcile.LineResult) ([]reconcile.RecordedLine, error)
}

// Config is the console's settings.
type Config struct {
	IdentityHeader string             // e.g. X-Forwarded-Email
	TrustedProxies []netip.Prefix     // peers whose IdentityHeader is believed
	Reviewers      []identity.Pattern // RECONCILER_REVIEWERS, parsed
	Approvers      []identity.Pattern // RECONCILER_APPROVERS, parsed
	CSRFKey        []byte             // signs the form tokens
	Location       *time.Location     // times are shown, and dates read, in this zone
	ReviewSLA      time.Duration      // RECONCILER_REVIEW_SLA: a finding unresolved this long is overdue (0: the default)
	Log            zerolog.Logger
	Now            func() time.Time // nil: time.Now
	// Providers names each sub-merchant's service provider (RECONCILER_ACCOUNTS_FILE's
	// structure); the zero value knows none.
	Providers Providers
}

// FromSettings builds a Config from the process settings; without a CSRF key file the key is
// random, so form tokens are good for this process only. The lists of people are read here,
// once: an entry that is no address or *@domain is a *config.Error naming its setting. The
// providers come from the accounts file's structure the settings hold (none without it).
func FromSettings(c config.Console, loc *time.Location, log zerolog.Logger) (Config, error) {
	cfg := Config{IdentityHeader: c.IdentityHeader, TrustedProxies: c.TrustedProxies, Location: loc, Log: log, ReviewSLA: c.ReviewSLA,
		Providers: ProvidersOf(c.Accounts)}
	var err error
	if cfg.Reviewers, err = identity.ParseList(c.Reviewers); err != nil {
		return Config{}, &config.Error{Setting: "RECONCILER_REVIEWERS", Msg: err.Error()}
	}
	if cfg.Approvers, err = identity.ParseList(c.Approvers); err != nil {
		return Config{}, &config.Error{Setting: "RECONCILER_APPROVERS", Msg: err.Error()}
	}
	if c.CSRFKeyFile != "" {
		b, err := os.ReadFile(c.CSRFKeyFile)
		if err != nil {
			return Config{}, fmt.Errorf("review console: read RECONCILER_ADMIN_CSRF_KEY_FILE: %w", err)
		}
		cfg.CSRFKey = []byte(strings.TrimSpace(string(b)))
		return cfg, nil
	}
	cfg.CSRFKey = make([]byte, 32)
	if _, err := rand.Read(cfg.CSRFKey); err != nil {
		return Config{}, fmt.Errorf("review console: csrf key: %w", err)
	}
	return cfg, nil
}

type handler struct {
	cfg    Config
	store  Store
	log    zerolog.Logger
	tokens *csrfTokens
}

// New is the console's handler; it serves paths under /review/ (mount it there, unstripped).
func New(cfg Config, store Store) http.Handler {
	if cfg.IdentityHeader == "" {
		cfg.IdentityHeader = "X-Forwarded-Email"
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.CSRFKey) == 0 {
		panic("console.New: no CSRF key") // FromSettings always sets one; a caller that forgets must not run keyless
	}
	warnOfLoneApprovers(cfg)
	h := &handler{cfg: cfg, store: store, log: cfg.Log, tokens: &csrfTokens{key: cfg.CSRFKey, now: cfg.Now, log: cfg.Log}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /review/{$}", h.list)
	mux.HandleFunc("GET /review/findings/{id}", h.finding)
	mux.HandleFunc("POST /review/findings/{id}/{action}", h.act)
	mux.HandleFunc("GET /review/report", h.report)
	mux.HandleFunc("GET /review/statements", h.statements)
	mux.HandleFunc("GET /review/statements/{platform}/{merchant}/{date}", h.statementLines)
	mux.HandleFunc("GET /review/approvals", h.approvals)
	mux.HandleFunc("POST /review/bulk", h.bulk)
	// Any other path under /review/ is a 404 in the reader's language, not the mux's English.
	mux.HandleFunc("/review/", notFound)
	return securityHeaders(h.identify(h.textOnly(mux)))
}

// securityHeaders keeps the pages out of frames and caches and away from any script: the
// console works without JavaScript and allows none.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
