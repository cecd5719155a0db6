// Package config reads payrecon's typed configuration from command-line flags and
// RECONCILER_* environment variables (flags win), fills defaults from one table, validates
// with messages that name the offending setting, and renders a redacted form safe to log.
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // RECONCILER_TIMEZONE must resolve in a scratch container too

	"github.com/payrecon/payrecon/reconcile"
)

// Config is every setting of the reconciler.
type Config struct {
	DatabaseURL     string
	DatabaseTimeout time.Duration // per read or write on a worker's database connection; 0: none
	Listen          string
	AdminListen     string
	Timezone        *time.Location
	RedisURL        string
	RedisTimeout    time.Duration
	ClaimPrefix     string
	ClaimLease      time.Duration
	ClaimTTL        time.Duration
	Grace           time.Duration
	Lookback        time.Duration
	OrderTTL        time.Duration
	RefundTTL       time.Duration // a refund unknown at the platform is a finding after this
	Concurrency     int
	DryRun          bool
	LogLevel        string
	LogFormat       string // json, console, or "" for console on a terminal and json elsewhere
	PushgatewayURL  string
	PlatformTimeout time.Duration
	RecheckMin      time.Duration
	RecheckMax      time.Duration
	CloseAtPlatform bool
	NotifyWait      time.Duration
	DrainTimeout    time.Duration
	// OrderLease is how long a taken order stays reserved for its pass; zero means the
	// default derived from PlatformTimeout (reconcile.DefaultOrderLease).
	OrderLease time.Duration
	Shard      reconcile.Shard // this process's slice of the orders
	// Alipay and WechatPay are the single-account settings (RECONCILER_ALIPAY_*,
	// RECONCILER_WECHATPAY_*); Accounts holds every account, theirs included.
	Alipay                AlipayAccount
	WechatPay             WechatAccount
	AccountsFile          string
	Accounts              Accounts
	AllowInsecurePlatform bool
	RatePrefix            string
	Relay                 Relay
	Console               Console
}

// Console holds the review console's settings (`reconciler console`'s /review/ pages). It
// connects with DatabaseURL like every command: in production, the payrecon_reviewer role's.
type Console struct {
	IdentityHeader string         // the header the authenticating proxy names the person in
	TrustedProxies []netip.Prefix // peers whose identity header is believed
	Reviewers      []string       // lower-case addresses or *@domain
	Approvers      []string       // lower-case addresses or *@domain
	CSRFKeyFile    string         // "": a random key per process
	ReviewSLA      time.Duration  // a finding not resolved this long after it was first seen is overdue
	// Accounts is RECONCILER_ACCOUNTS_FILE's structure (LoadAccountsStructure), which names
	// each sub-merchant's service provider on the pages; none of its key or token files was
	// opened, and none may be: the console's pod mounts no key Secret.
	Accounts Accounts
}

// Relay holds the fulfilment hand-off's settings (`reconciler relay`, `serve --relay`).
type Relay struct {
	URL           string        // NATS server(s); empty: no relay configured
	SubjectPrefix string        // subject = SubjectPrefix + outbox kind
	Batch         int           // rows taken (and locked) per batch
	Window        int           // publishes awaiting their acknowledgement at once
	AckTimeout    time.Duration // how long a publish may wait for its acknowledgement
	Poll          time.Duration // --follow: look for rows this often even without a NOTIFY
	RetryHorizon  time.Duration // the longest a published row may wait to be re-published
}

// Error is a bad setting. Its message names the setting; the binary exits 2 on it.
type Error struct {
	Setting string // RECONCILER_CLAIM_TTL
	Flag    string // --claim-ttl, when the value came from the flag
	Msg     string
}

func (e *Error) Error() string {
	if e.Flag != "" {
		return fmt.Sprintf("%s (%s): %s", e.Flag, e.Setting, e.Msg)
	}
	return e.Setting + ": " + e.Msg
}

// IsConfigError reports whether err is (or wraps) a configuration error.
func IsConfigError(err error) bool {
	var ce *Error
	return errors.As(err, &ce)
}

// EnvName is the environment variable that backs a flag.
func EnvName(flagName string) string {
	return "RECONCILER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Redacted renders every setting as name=value with passwords in URLs masked; it is safe to
// log. Key files are listed by path only: their contents are never loaded into Config.
func (c Config) Redacted() string {
	kv := map[string]string{
		"database-url":         RedactURL(c.DatabaseURL),
		"redis-url":            RedactURL(c.RedisURL),
		"listen":               c.Listen,
		"admin-listen":         c.AdminListen,
		"claim-prefix":         c.ClaimPrefix,
		"claim-lease":          c.ClaimLease.String(),
		"order-lease":          c.OrderLease.String(),
		"claim-ttl":            c.ClaimTTL.String(),
		"grace":                c.Grace.String(),
		"lookback":             c.Lookback.String(),
		"order-ttl":            c.OrderTTL.String(),
		"refund-ttl":           c.RefundTTL.String(),
		"concurrency":          fmt.Sprint(c.Concurrency),
		"dry-run":              fmt.Sprint(c.DryRun),
		"pushgateway-url":      RedactURL(c.PushgatewayURL),
		"platform-timeout":     c.PlatformTimeout.String(),
		"recheck-min":          c.RecheckMin.String(),
		"recheck-max":          c.RecheckMax.String(),
		"shard":                c.Shard.String(),
		"accounts":             c.Accounts.redacted(),
		"rate-prefix":          c.RatePrefix,
		"relay-url":            RedactURLs(c.Relay.URL),
		"relay-subject-prefix": c.Relay.SubjectPrefix,
		"reviewers":            strings.Join(c.Console.Reviewers, ","),
		"approvers":            strings.Join(c.Console.Approvers, ","),
	}
	if c.Timezone != nil {
		kv["timezone"] = c.Timezone.String()
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + kv[k])
	}
	return b.String()
}

// redacted lists the accounts as platform:id(mode,qps,url), a service provider's with how
// many sub-merchants it calls for (thousands are not listed one by one); key and token
// files are never read into Config, so nothing secret can leak from here.
func (a Accounts) redacted() string {
	var parts []string
	subs := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(",sub_merchants=%d", n)
	}
	for _, x := range a.Alipay {
		parts = append(parts, fmt.Sprintf("alipay:%s(%s,qps=%g,%s%s)", x.AppID, x.Mode(), x.QPS, RedactURL(x.Gateway), subs(len(x.SubMerchants))))
	}
	for _, x := range a.WechatPay {
		parts = append(parts, fmt.Sprintf("wechatpay:%s(%s,qps=%g,%s%s)", x.ID(), x.Mode(), x.QPS, RedactURL(x.BaseURL), subs(len(x.SubMerchants))))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// RedactURLs masks the passwords of a comma-separated list of URLs (NATS servers).
func RedactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = RedactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// RedactURL masks the password (and any secret-looking query parameter) of a URL.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparseable url redacted]"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	changed := false
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "password") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") || lk == "key" {
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}
