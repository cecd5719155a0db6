package config

import (
	"flag"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// Group selects which settings a command takes, so `--help` lists only what applies.
type Group uint

const (
	// GroupDatabase: the database connection (every command but sandbox).
	GroupDatabase Group = 1 << iota
	// GroupLog: logging.
	GroupLog
	// GroupApply: the shared apply path (claims, TTLs).
	GroupApply
	// GroupWorker: pass scheduling (grace, lookback, re-check, shard, concurrency).
	GroupWorker
	// GroupPlatforms: the platform accounts and call policy.
	GroupPlatforms
	// GroupServe: serve's callback server.
	GroupServe
	// GroupTime: the time zone dates are read in.
	GroupTime
	// GroupRelay: the fulfilment hand-off to NATS JetStream.
	GroupRelay
	// GroupAdmin: the admin port (metrics and probes), which serve and console both open.
	GroupAdmin
	// GroupConsole: the review console (who is asking, who may act, the form key). Only
	// `reconciler console` takes it: serve holds no reviewer's settings.
	GroupConsole
	// GroupPeople: who may review and approve (RECONCILER_REVIEWERS, RECONCILER_APPROVERS),
	// which the console and the CLI's review moves both check.
	GroupPeople

	// GroupAll is every setting.
	GroupAll = GroupDatabase | GroupLog | GroupApply | GroupWorker | GroupPlatforms | GroupServe | GroupTime | GroupRelay |
		GroupAdmin | GroupConsole | GroupPeople
)

type kind int

const (
	kString kind = iota
	kBool
)

// setting is one row of the table: the single place defaults live.
type setting struct {
	name  string // flag name; the env var is EnvName(name)
	def   string
	group Group
	kind  kind
	usage string
	set   func(c *Config, v string) error // parses v into c; the error text is the reason only
}

var settings = []setting{
	// A *-url-file row comes before its *-url row: the URL row then sees what the file held.
	{"database-url-file", "", GroupDatabase, kString, "file holding the PostgreSQL URL (keeps the password out of the environment and the command line)", urlFileInto(func(c *Config) *string { return &c.DatabaseURL })},
	{"database-url", "", GroupDatabase, kString, "PostgreSQL URL (required, here or in database-url-file)", func(c *Config, v string) error {
		if v == "" && c.DatabaseURL == "" {
			return fmt.Errorf("is required (e.g. postgres://user@host:5432/db?sslmode=disable), or RECONCILER_DATABASE_URL_FILE")
		}
		if v != "" && c.DatabaseURL != "" {
			return fmt.Errorf("give either the URL or RECONCILER_DATABASE_URL_FILE, not both")
		}
		if v != "" {
			c.DatabaseURL = v
		}
		return checkURL(c.DatabaseURL, "postgres", "postgresql")
	}},
	{"database-timeout", "30s", GroupDatabase, kString, "how long run and serve wait for PostgreSQL to answer one statement before dropping the connection (a half-open connection otherwise hangs them); 0s: forever", durationInto(func(c *Config) *time.Duration { return &c.DatabaseTimeout }, true)},
	{"log-level", "info", GroupLog, kString, "debug, info, warn or error", func(c *Config, v string) error {
		c.LogLevel = v
		return oneOf(v, "debug", "info", "warn", "error")
	}},
	{"log-format", "", GroupLog, kString, "json or console (default: console on a terminal, json elsewhere)", func(c *Config, v string) error {
		c.LogFormat = v
		if v == "" {
			return nil
		}
		return oneOf(v, "json", "console")
	}},
	{"timezone", "Asia/Shanghai", GroupTime, kString, "IANA zone in which dates (--from 2026-11-28, bill days) are read", func(c *Config, v string) error {
		loc, err := time.LoadLocation(v)
		if err != nil || v == "" {
			return fmt.Errorf("must be an IANA time zone such as Asia/Shanghai, got %q", v)
		}
		c.Timezone = loc
		return nil
	}},
	{"redis-url-file", "", GroupApply, kString, "file holding the Redis URL (keeps the password out of the environment and the command line)", urlFileInto(func(c *Config) *string { return &c.RedisURL })},
	{"redis-url", "", GroupApply, kString, "Redis URL for claims; empty (and no redis-url-file) means database-only claims", func(c *Config, v string) error {
		if v != "" && c.RedisURL != "" {
			return fmt.Errorf("give either the URL or RECONCILER_REDIS_URL_FILE, not both")
		}
		if v != "" {
			c.RedisURL = v
		}
		if c.RedisURL == "" {
			return nil
		}
		return checkURL(c.RedisURL, "redis", "rediss", "unix")
	}},
	{"redis-timeout", "100ms", GroupApply, kString, "deadline of each Redis call", durationInto(func(c *Config) *time.Duration { return &c.RedisTimeout }, false)},
	{"claim-prefix", "pay:notify:", GroupApply, kString, "prefix of the Redis claim keys (shared with the callback service)", func(c *Config, v string) error {
		if v == "" {
			return fmt.Errorf("must not be empty")
		}
		c.ClaimPrefix = v
		return nil
	}},
	{"claim-lease", "60s", GroupApply, kString, "PROCESSING lease of a claim", durationInto(func(c *Config) *time.Duration { return &c.ClaimLease }, false)},
	{"claim-ttl", "25h", GroupApply, kString, "how long the DONE mark sheds repeated callbacks", durationInto(func(c *Config) *time.Duration { return &c.ClaimTTL }, false)},
	{"order-ttl", "2h", GroupApply, kString, "expiry of orders whose expires_at is null, from created_at", durationInto(func(c *Config) *time.Duration { return &c.OrderTTL }, false)},
	{"refund-ttl", "1h", GroupApply, kString, "how long a local refund the platform does not know may wait (it may not have reached the platform yet) before it is a REFUND_NOT_AT_PLATFORM finding", durationInto(func(c *Config) *time.Duration { return &c.RefundTTL }, false)},
	{"grace", "2m", GroupWorker, kString, "orders younger than this are left to their callback", durationInto(func(c *Config) *time.Duration { return &c.Grace }, true)},
	{"lookback", "72h", GroupWorker, kString, "orders older than this are left to backfill", durationInto(func(c *Config) *time.Duration { return &c.Lookback }, false)},
	{"recheck-min", "1m", GroupWorker, kString, "first re-check delay of a still-pending order (0s: every run)", durationInto(func(c *Config) *time.Duration { return &c.RecheckMin }, true)},
	{"recheck-max", "1h", GroupWorker, kString, "cap of the re-check delay", durationInto(func(c *Config) *time.Duration { return &c.RecheckMax }, true)},
	{"concurrency", "16", GroupWorker, kString, "orders checked at once", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return fmt.Errorf("must be a whole number from 1 to 1024, got %q", v)
		}
		c.Concurrency = n
		return nil
	}},
	{"dry-run", "false", GroupWorker, kBool, "query and classify, write nothing but the run record", boolInto(func(c *Config) *bool { return &c.DryRun })},
	{"close-at-platform", "true", GroupWorker, kBool, "close an expired, still-open trade at the platform before closing it locally", boolInto(func(c *Config) *bool { return &c.CloseAtPlatform })},
	{"drain-timeout", "30s", GroupWorker, kString, "on SIGTERM, how long in-flight orders may finish", durationInto(func(c *Config) *time.Duration { return &c.DrainTimeout }, false)},
	{"order-lease", "", GroupWorker, kString, "how long a taken order stays reserved for its pass (default max(10 x platform-timeout, 2m)); a dead pass's leases are taken over at once by the next pass of its shard", func(c *Config, v string) error {
		if v == "" {
			return nil
		}
		return durationInto(func(c *Config) *time.Duration { return &c.OrderLease }, false)(c, v)
	}},
	{"shard", "", GroupWorker, kString, "this process's shard as i/n (default 0/1, or JOB_COMPLETION_INDEX with --shards)", func(c *Config, v string) error {
		if v == "" {
			return nil
		}
		shard, err := reconcile.ParseShard(v)
		if err != nil {
			return fmt.Errorf("must be i/n with 0 <= i < n, got %q", v)
		}
		c.Shard = shard
		return nil
	}},
	{"shards", "", GroupWorker, kString, "shard count; the index comes from JOB_COMPLETION_INDEX (Kubernetes Indexed Job)", func(c *Config, v string) error {
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("must be a positive whole number, got %q", v)
		}
		if c.Shard.Count != 0 {
			return fmt.Errorf("give either --shard i/n or --shards n, not both")
		}
		idx := os.Getenv("JOB_COMPLETION_INDEX")
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= n {
			return fmt.Errorf("needs JOB_COMPLETION_INDEX between 0 and %d, got %q", n-1, idx)
		}
		c.Shard = reconcile.Shard{Index: i, Count: n}
		return nil
	}},
	{"pushgateway-url", "", GroupWorker, kString, "Prometheus Pushgateway to push run metrics to (run mode)", func(c *Config, v string) error {
		c.PushgatewayURL = v
		if v == "" {
			return nil
		}
		return checkURL(v, "http", "https")
	}},
	{"listen", ":8080", GroupServe, kString, "serve's public HTTP address: the platforms' callbacks (/notify/*), /healthz, /readyz", func(c *Config, v string) error {
		if !strings.Contains(v, ":") {
			return fmt.Errorf("must be host:port or :port, got %q", v)
		}
		c.Listen = v
		return nil
	}},
	{"admin-listen", ":9090", GroupAdmin, kString, "the admin HTTP address: /metrics, /healthz, /readyz, and console's /review/ pages (keep it off the public network)", func(c *Config, v string) error {
		if !strings.Contains(v, ":") {
			return fmt.Errorf("must be host:port or :port, got %q", v)
		}
		c.AdminListen = v
		return nil
	}},
	{"admin-identity-header", "X-Forwarded-Email", GroupConsole, kString, "header naming the signed-in person on the console's /review/ pages (set by an authenticating proxy such as oauth2-proxy)", func(c *Config, v string) error {
		if v == "" || strings.ContainsAny(v, " \t:") {
			return fmt.Errorf("must be an HTTP header name such as X-Forwarded-Email, got %q", v)
		}
		c.Console.IdentityHeader = v
		return nil
	}},
	{"admin-trusted-proxies", "127.0.0.0/8,::1/128", GroupConsole, kString, "CIDRs whose identity header the console believes (comma-separated); any other peer gets 401", func(c *Config, v string) error {
		c.Console.TrustedProxies = nil
		for _, part := range splitList(v) {
			p, err := netip.ParsePrefix(part)
			if err != nil {
				a, aerr := netip.ParseAddr(part)
				if aerr != nil {
					return fmt.Errorf("must be comma-separated CIDRs such as 127.0.0.0/8,::1/128, got %q", part)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			c.Console.TrustedProxies = append(c.Console.TrustedProxies, p.Masked())
		}
		return nil
	}},
	{"reviewers", "", GroupConsole | GroupPeople, kString, "who may acknowledge and resolve findings in the console, and with the mismatches commands once this or approvers is set: comma-separated addresses or *@domain", peopleInto(func(c *Config) *[]string { return &c.Console.Reviewers })},
	{"approvers", "", GroupConsole | GroupPeople, kString, "who may also approve or reject proposed resolutions, in the console and (once set) with the mismatches commands: comma-separated addresses or *@domain", peopleInto(func(c *Config) *[]string { return &c.Console.Approvers })},
	{"admin-csrf-key-file", "", GroupConsole, kString, "file holding the key the console's form tokens are signed with (share it between replicas); empty: a random key per process", func(c *Config, v string) error {
		c.Console.CSRFKeyFile = v
		if v == "" {
			return nil
		}
		b, err := os.ReadFile(v)
		if err != nil {
			return fmt.Errorf("cannot read: %w", err)
		}
		if len(strings.TrimSpace(string(b))) < 16 {
			return fmt.Errorf("%s must hold at least 16 bytes", v)
		}
		return nil
	}},
	{"review-sla", "72h", GroupConsole, kString, "how long a finding may wait for finance: one not resolved this long after it was first seen is overdue (the console's age column, filter and card)", durationInto(func(c *Config) *time.Duration { return &c.Console.ReviewSLA }, false)},
	{"notify-wait", "2s", GroupServe, kString, "how long a callback waits for a claim held by another handler", durationInto(func(c *Config) *time.Duration { return &c.NotifyWait }, true)},
	{"platform-timeout", "10s", GroupPlatforms, kString, "deadline of each platform call", durationInto(func(c *Config) *time.Duration { return &c.PlatformTimeout }, false)},
	// The console takes the accounts file too, to name each sub-merchant's provider: it reads
	// the file's structure alone (Loader.validate), never a key file the file names.
	{"accounts-file", "", GroupPlatforms | GroupConsole, kString, "YAML file listing several accounts per platform (adds to the single-account settings); the review console reads only who is whose service provider from it, and opens none of its key files", stringInto(func(c *Config) *string { return &c.AccountsFile })},
	{"allow-insecure-platform", "false", GroupPlatforms, kBool, "allow plain http:// platform URLs (tests, the sandbox, staging only)", boolInto(func(c *Config) *bool { return &c.AllowInsecurePlatform })},
	{"rate-prefix", "payrecon:rate:", GroupPlatforms, kString, "prefix of the Redis keys holding each account's shared call budget", func(c *Config, v string) error {
		if v == "" {
			return fmt.Errorf("must not be empty")
		}
		c.RatePrefix = v
		return nil
	}},
	{"alipay-gateway", "https://openapi.alipay.com/gateway.do", GroupPlatforms, kString, "Alipay OpenAPI gateway URL", urlInto(func(c *Config) *string { return &c.Alipay.Gateway })},
	{"alipay-app-id", "", GroupPlatforms, kString, "Alipay app_id (enables Alipay)", stringInto(func(c *Config) *string { return &c.Alipay.AppID })},
	{"alipay-private-key-file", "", GroupPlatforms, kString, "our RSA2 private key (PKCS#1/PKCS#8 PEM or bare base64)", fileInto(func(c *Config) *string { return &c.Alipay.PrivateKeyFile })},
	{"alipay-public-key-file", "", GroupPlatforms, kString, "Alipay's public key (PEM or bare base64)", fileInto(func(c *Config) *string { return &c.Alipay.PublicKeyFile })},
	{"alipay-app-cert-file", "", GroupPlatforms, kString, "certificate mode: the app's certificate appCertPublicKey_<app_id>.crt", fileInto(func(c *Config) *string { return &c.Alipay.AppCertFile })},
	{"alipay-alipay-cert-file", "", GroupPlatforms, kString, "certificate mode: Alipay's certificate alipayCertPublicKey_RSA2.crt", fileInto(func(c *Config) *string { return &c.Alipay.AlipayCertFile })},
	{"alipay-alipay-root-cert-file", "", GroupPlatforms, kString, "certificate mode: Alipay's root certificate chain alipayRootCert.crt", fileInto(func(c *Config) *string { return &c.Alipay.AlipayRootCertFile })},
	{"alipay-seller-id", "", GroupPlatforms, kString, "expected seller_id in Alipay answers (optional)", stringInto(func(c *Config) *string { return &c.Alipay.SellerID })},
	{"alipay-qps", "10", GroupPlatforms, kString, "Alipay calls per second for this app, shared by every process (see rate-prefix)", qpsInto(func(c *Config) *float64 { return &c.Alipay.QPS })},
	{"wechatpay-base-url", "https://api.mch.weixin.qq.com", GroupPlatforms, kString, "WeChat Pay API v3 base URL", urlInto(func(c *Config) *string { return &c.WechatPay.BaseURL })},
	{"wechatpay-mchid", "", GroupPlatforms, kString, "WeChat Pay mchid (enables WeChat Pay)", stringInto(func(c *Config) *string { return &c.WechatPay.MchID })},
	{"wechatpay-appid", "", GroupPlatforms, kString, "expected appid in WeChat Pay answers (optional)", stringInto(func(c *Config) *string { return &c.WechatPay.AppID })},
	{"wechatpay-serial-no", "", GroupPlatforms, kString, "merchant certificate serial number (hex)", func(c *Config, v string) error {
		if v != "" && !hexSerial.MatchString(v) {
			return fmt.Errorf("must be a hexadecimal certificate serial, got %q", v)
		}
		c.WechatPay.SerialNo = strings.ToUpper(v)
		return nil
	}},
	{"wechatpay-private-key-file", "", GroupPlatforms, kString, "merchant API private key (PEM or bare base64)", fileInto(func(c *Config) *string { return &c.WechatPay.PrivateKeyFile })},
	{"wechatpay-public-key-file", "", GroupPlatforms, kString, "WeChat Pay public key (PEM or bare base64); without it, platform certificates verify", fileInto(func(c *Config) *string { return &c.WechatPay.PublicKeyFile })},
	{"wechatpay-public-key-id", "", GroupPlatforms, kString, "WeChat Pay public key id (PUB_KEY_ID_...)", stringInto(func(c *Config) *string { return &c.WechatPay.PublicKeyID })},
	{"wechatpay-apiv3-key-file", "", GroupPlatforms, kString, "file holding the 32-byte API v3 key", func(c *Config, v string) error {
		c.WechatPay.APIv3KeyFile = v
		if v == "" {
			return nil
		}
		if _, err := ReadAPIv3Key(v); err != nil {
			return err
		}
		return nil
	}},
	{"wechatpay-qps", "10", GroupPlatforms, kString, "WeChat Pay calls per second for this merchant, shared by every process (see rate-prefix)", qpsInto(func(c *Config) *float64 { return &c.WechatPay.QPS })},
	{"relay-url", "", GroupRelay, kString, "NATS URL(s) of the JetStream the outbox is relayed to, comma-separated (required by relay and serve --relay)", func(c *Config, v string) error {
		c.Relay.URL = v
		for _, u := range strings.Split(v, ",") {
			if v == "" {
				break
			}
			if err := checkURL(strings.TrimSpace(u), "nats", "tls", "ws", "wss"); err != nil {
				return err
			}
		}
		return nil
	}},
	{"relay-subject-prefix", "payrecon.", GroupRelay, kString, "subject prefix of relayed messages: subject = prefix + kind (payrecon.order.paid)", func(c *Config, v string) error {
		if v == "" || strings.ContainsAny(v, " \t\r\n*>") || strings.HasPrefix(v, ".") || strings.Contains(v, "..") {
			return fmt.Errorf("must be a NATS subject prefix without spaces or wildcards, such as payrecon., got %q", v)
		}
		c.Relay.SubjectPrefix = v
		return nil
	}},
	{"relay-batch", "1000", GroupRelay, kString, "outbox rows taken (and locked) per batch", intInto(func(c *Config) *int { return &c.Relay.Batch }, 1, 10000)},
	{"relay-window", "1024", GroupRelay, kString, "publishes awaiting their JetStream acknowledgement at once", intInto(func(c *Config) *int { return &c.Relay.Window }, 1, 65536)},
	{"relay-ack-timeout", "10s", GroupRelay, kString, "how long a publish waits for its acknowledgement before its row is left for the next batch", durationInto(func(c *Config) *time.Duration { return &c.Relay.AckTimeout }, false)},
	{"relay-poll", "5s", GroupRelay, kString, "with --follow, look for undispatched rows this often even when no NOTIFY arrives", durationInto(func(c *Config) *time.Duration { return &c.Relay.Poll }, false)},
	{"relay-retry-horizon", "2m", GroupRelay, kString, "the longest a published row may wait before it is published again (after a crash or a lost ack); the stream's duplicate window must cover it", durationInto(func(c *Config) *time.Duration { return &c.Relay.RetryHorizon }, false)},
}

var hexSerial = regexp.MustCompile(`^[0-9A-Fa-f]+$`)

// value is a flag.Value that remembers the raw text; bool settings accept a bare --flag.
type value struct {
	s      string
	isBool bool
}

func (v *value) String() string     { return v.s }
func (v *value) Set(s string) error { v.s = s; return nil }
func (v *value) IsBoolFlag() bool   { return v.isBool }

// Loader binds a command's settings to its flag set.
type Loader struct {
	fs     *flag.FlagSet
	group  Group
	values map[string]*value
	env    func(string) (string, bool)
	// verifyOnly, when it answers true after parsing, lets accounts come without their
	// private keys: the command verifies callbacks and never signs a request.
	verifyOnly func() bool
}

// VerifyOnly makes the accounts' private keys optional when verifyOnly (asked after the
// flags are parsed) is true: for a command that only verifies callbacks.
func (l *Loader) VerifyOnly(verifyOnly func() bool) { l.verifyOnly = verifyOnly }

// Register adds the flags of the chosen groups to fs. Env lookups go through lookupEnv
// (os.LookupEnv when nil), so tests never touch the process environment.
func Register(fs *flag.FlagSet, groups Group, lookupEnv func(string) (string, bool)) *Loader {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	l := &Loader{fs: fs, group: groups, values: map[string]*value{}, env: lookupEnv}
	for _, s := range settings {
		if s.group&groups == 0 {
			continue
		}
		v := &value{s: s.def, isBool: s.kind == kBool}
		l.values[s.name] = v
		usage := s.usage + " [" + EnvName(s.name) + "]"
		fs.Var(v, s.name, usage)
	}
	return l
}

// Load resolves every registered setting (flag, else env, else default) after fs.Parse and
// validates the whole. Errors are *Error.
func (l *Loader) Load() (Config, error) {
	fromFlag := map[string]bool{}
	l.fs.Visit(func(f *flag.Flag) { fromFlag[f.Name] = true })
	var c Config
	for _, s := range settings {
		v, ok := l.values[s.name]
		if !ok {
			continue
		}
		raw, origin := v.s, ""
		if fromFlag[s.name] {
			origin = "--" + s.name
		} else if e, ok := l.env(EnvName(s.name)); ok {
			raw = e
		}
		raw = strings.TrimSpace(raw)
		if err := s.set(&c, raw); err != nil {
			return Config{}, &Error{Setting: EnvName(s.name), Flag: origin, Msg: err.Error()}
		}
	}
	if c.Shard.Count == 0 {
		c.Shard = reconcile.Shard{Index: 0, Count: 1}
	}
	err := l.validate(&c)
	return c, err
}

// validate checks what spans several settings.
func (l *Loader) validate(c *Config) error {
	if l.group&GroupWorker != 0 && c.RecheckMax < c.RecheckMin {
		return &Error{Setting: "RECONCILER_RECHECK_MAX", Msg: fmt.Sprintf("must not be below RECONCILER_RECHECK_MIN (%s), got %s", c.RecheckMin, c.RecheckMax)}
	}
	if l.group&GroupApply != 0 && c.ClaimTTL < c.ClaimLease {
		return &Error{Setting: "RECONCILER_CLAIM_TTL", Msg: fmt.Sprintf("must not be below RECONCILER_CLAIM_LEASE (%s), got %s", c.ClaimLease, c.ClaimTTL)}
	}
	if l.group&GroupRelay != 0 && c.Relay.RetryHorizon < c.Relay.AckTimeout {
		return &Error{Setting: "RECONCILER_RELAY_RETRY_HORIZON", Msg: fmt.Sprintf("must not be below RECONCILER_RELAY_ACK_TIMEOUT (%s), got %s", c.Relay.AckTimeout, c.Relay.RetryHorizon)}
	}
	if l.group&GroupPlatforms == 0 {
		return l.accountsStructure(c)
	}
	return resolveAccounts(c, l.verifyOnly == nil || !l.verifyOnly())
}

// accountsStructure reads the accounts file of a command that takes it without the
// platforms' settings (the review console): its structure only, into c.Console.Accounts,
// and no key file it names. c.Accounts stays empty: such a command speaks for no account.
func (l *Loader) accountsStructure(c *Config) error {
	if l.group&GroupConsole == 0 || c.AccountsFile == "" {
		return nil
	}
	accts, err := LoadAccountsStructure(c.AccountsFile)
	if err != nil {
		return err
	}
	c.Console.Accounts = accts
	return nil
}

// ReadAPIv3Key reads the WeChat Pay API v3 key file: exactly 32 bytes, one trailing newline
// ignored. The error never quotes the file's content.
func ReadAPIv3Key(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read key file: %w", err)
	}
	b = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
	if len(b) != 32 {
		return nil, fmt.Errorf("%s must hold a 32-byte API v3 key, found %d bytes", path, len(b))
	}
	return b, nil
}

// durationInto parses a Go duration into a field; zero is legal only where allowZero says so
// (RECHECK_MIN 0s means "every run").
func durationInto(field func(*Config) *time.Duration, allowZero bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		switch {
		case allowZero && (err != nil || d < 0):
			return fmt.Errorf("must be a non-negative duration such as 0s, 90s or 2m, got %q", v)
		case !allowZero && (err != nil || d <= 0):
			return fmt.Errorf("must be a positive duration such as 90s or 2m, got %q", v)
		}
		*field(c) = d
		return nil
	}
}

// intInto parses a whole number in [lo, hi] into a field.
func intInto(field func(*Config) *int, lo, hi int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be a whole number from %d to %d, got %q", lo, hi, v)
		}
		*field(c) = n
		return nil
	}
}

func boolInto(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch v {
		case "true":
			*field(c) = true
		case "false":
			*field(c) = false
		default:
			return fmt.Errorf("must be true or false, got %q", v)
		}
		return nil
	}
}

func stringInto(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func urlInto(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if err := checkURL(v, "http", "https"); err != nil {
			return err
		}
		*field(c) = v
		return nil
	}
}

func fileInto(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		*field(c) = v
		if v == "" {
			return nil
		}
		f, err := os.Open(v)
		if err != nil {
			return fmt.Errorf("cannot read key file: %w", err)
		}
		return f.Close()
	}
}

func qpsInto(field func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		q, err := strconv.ParseFloat(v, 64)
		if err != nil || q <= 0 || math.IsInf(q, 0) || math.IsNaN(q) {
			return fmt.Errorf("must be a positive number of calls per second, got %q", v)
		}
		*field(c) = q
		return nil
	}
}

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("must be one of %s, got %q", strings.Join(allowed, ", "), v)
}

func checkURL(v string, schemes ...string) error {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("is not a valid URL: %s", RedactURL(v))
	}
	if err := oneOf(u.Scheme, schemes...); err != nil {
		return fmt.Errorf("URL scheme must be one of %s, got %q", strings.Join(schemes, ", "), u.Scheme)
	}
	return nil
}

// Names lists every setting's flag name (the env var is EnvName(name)), in table order.
func Names() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.name
	}
	return out
}

// urlFileInto reads a URL from a file (a mounted Secret) into a field. The error names the
// file but never quotes it: the URL may hold a password.
func urlFileInto(field func(c *Config) *string) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		if v == "" {
			return nil
		}
		b, err := os.ReadFile(v)
		if err != nil {
			return fmt.Errorf("cannot read: %w", err)
		}
		u := strings.TrimSpace(string(b))
		if u == "" {
			return fmt.Errorf("%s is empty", v)
		}
		*field(c) = u
		return nil
	}
}

// splitList splits a comma-separated setting, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// peopleInto reads a list of people: exact addresses or *@domain, compared without case.
func peopleInto(field func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, p := range splitList(v) {
			at := strings.LastIndex(p, "@")
			if at < 0 || at == len(p)-1 || (at == 0) || strings.ContainsAny(p, " \t") || (strings.Contains(p, "*") && !strings.HasPrefix(p, "*@")) {
				return fmt.Errorf("must be comma-separated addresses or *@domain, got %q", p)
			}
			out = append(out, strings.ToLower(p))
		}
		*field(c) = out
		return nil
	}
}
