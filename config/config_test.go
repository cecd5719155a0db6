package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// load runs a Loader over a fresh flag set with the given args and environment.
func load(groups Group, args []string, env map[string]string) (Config, error) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := Register(fs, groups, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return l.Load()
}

func TestDefaults(t *testing.T) {
	c, err := load(GroupAll, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"listen": c.Listen == ":8080", "admin": c.AdminListen == ":9090", "timezone": c.Timezone.String() == "Asia/Shanghai",
		"redis": c.RedisURL == "", "lease": c.ClaimLease == 60*time.Second, "ttl": c.ClaimTTL == 25*time.Hour,
		"grace": c.Grace == 2*time.Minute, "lookback": c.Lookback == 72*time.Hour, "order ttl": c.OrderTTL == 2*time.Hour,
		"prefix": c.ClaimPrefix == "pay:notify:", "timeout": c.PlatformTimeout == 10*time.Second, "db timeout": c.DatabaseTimeout == 30*time.Second,
		"recheck": c.RecheckMin == time.Minute && c.RecheckMax == time.Hour, "close": c.CloseAtPlatform,
		"notify wait": c.NotifyWait == 2*time.Second, "shard": c.Shard == reconcile.Shard{Index: 0, Count: 1}, "dry": !c.DryRun,
		"alipay gw": c.Alipay.Gateway == "https://openapi.alipay.com/gateway.do",
		"wechat":    c.WechatPay.BaseURL == "https://api.mch.weixin.qq.com",
	}
	for name, ok := range want {
		if ok != true {
			t.Errorf("default %s wrong: %+v", name, c)
		}
	}
}

// TestEverySettingFromEnvAndFlag sets each setting to a non-default value, once through its
// env var and once through its flag, and checks it landed in the right field; then the flag
// must win over the env var. It fails if a setting is added without a row here.
func TestEverySettingFromEnvAndFlag(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	os.WriteFile(keyFile, []byte("-----BEGIN PRIVATE KEY-----\n"), 0o600)
	v3 := filepath.Join(dir, "apiv3.key")
	os.WriteFile(v3, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)

	rows := map[string]struct {
		value string
		other string // a second valid value, for the flag-beats-env check
		got   func(Config) any
		want  any
	}{
		"database-url":                 {"postgres://a@b/c", "postgres://x@y/z", func(c Config) any { return c.DatabaseURL }, "postgres://a@b/c"},
		"database-timeout":             {"5s", "0s", func(c Config) any { return c.DatabaseTimeout }, 5 * time.Second},
		"log-level":                    {"debug", "warn", func(c Config) any { return c.LogLevel }, "debug"},
		"log-format":                   {"console", "json", func(c Config) any { return c.LogFormat }, "console"},
		"timezone":                     {"UTC", "Europe/Paris", func(c Config) any { return c.Timezone.String() }, "UTC"},
		"redis-url":                    {"redis://r:6379/1", "redis://s:6379/2", func(c Config) any { return c.RedisURL }, "redis://r:6379/1"},
		"redis-timeout":                {"250ms", "1s", func(c Config) any { return c.RedisTimeout }, 250 * time.Millisecond},
		"claim-prefix":                 {"x:", "y:", func(c Config) any { return c.ClaimPrefix }, "x:"},
		"claim-lease":                  {"30s", "45s", func(c Config) any { return c.ClaimLease }, 30 * time.Second},
		"claim-ttl":                    {"48h", "30h", func(c Config) any { return c.ClaimTTL }, 48 * time.Hour},
		"order-ttl":                    {"30m", "1h", func(c Config) any { return c.OrderTTL }, 30 * time.Minute},
		"refund-ttl":                   {"45m", "2h", func(c Config) any { return c.RefundTTL }, 45 * time.Minute},
		"grace":                        {"0s", "5m", func(c Config) any { return c.Grace }, time.Duration(0)},
		"lookback":                     {"24h", "12h", func(c Config) any { return c.Lookback }, 24 * time.Hour},
		"recheck-min":                  {"0s", "10s", func(c Config) any { return c.RecheckMin }, time.Duration(0)},
		"recheck-max":                  {"2h", "3h", func(c Config) any { return c.RecheckMax }, 2 * time.Hour},
		"concurrency":                  {"64", "8", func(c Config) any { return c.Concurrency }, 64},
		"dry-run":                      {"true", "false", func(c Config) any { return c.DryRun }, true},
		"close-at-platform":            {"false", "true", func(c Config) any { return c.CloseAtPlatform }, false},
		"drain-timeout":                {"5s", "9s", func(c Config) any { return c.DrainTimeout }, 5 * time.Second},
		"order-lease":                  {"3m", "4m", func(c Config) any { return c.OrderLease }, 3 * time.Minute},
		"shard":                        {"2/4", "1/4", func(c Config) any { return c.Shard }, reconcile.Shard{Index: 2, Count: 4}},
		"shards":                       {"", "", nil, nil}, // needs JOB_COMPLETION_INDEX: TestShardsFromJobIndex
		"pushgateway-url":              {"http://pgw:9091", "http://p:1", func(c Config) any { return c.PushgatewayURL }, "http://pgw:9091"},
		"listen":                       {"127.0.0.1:9000", ":9001", func(c Config) any { return c.Listen }, "127.0.0.1:9000"},
		"admin-listen":                 {"127.0.0.1:9100", ":9101", func(c Config) any { return c.AdminListen }, "127.0.0.1:9100"},
		"database-url-file":            {"", "", nil, nil}, // TestURLFiles
		"redis-url-file":               {"", "", nil, nil}, // TestURLFiles
		"notify-wait":                  {"500ms", "1s", func(c Config) any { return c.NotifyWait }, 500 * time.Millisecond},
		"platform-timeout":             {"3s", "4s", func(c Config) any { return c.PlatformTimeout }, 3 * time.Second},
		"alipay-gateway":               {"http://127.0.0.1:1/gateway.do", "http://x/g", func(c Config) any { return c.Alipay.Gateway }, "http://127.0.0.1:1/gateway.do"},
		"alipay-app-id":                {"", "", nil, nil}, // enabling needs the key files: TestPlatformRequirements
		"alipay-private-key-file":      {keyFile, keyFile, func(c Config) any { return c.Alipay.PrivateKeyFile }, keyFile},
		"alipay-public-key-file":       {keyFile, keyFile, func(c Config) any { return c.Alipay.PublicKeyFile }, keyFile},
		"alipay-seller-id":             {"2088", "2089", func(c Config) any { return c.Alipay.SellerID }, "2088"},
		"alipay-qps":                   {"2.5", "7", func(c Config) any { return c.Alipay.QPS }, 2.5},
		"wechatpay-base-url":           {"http://127.0.0.1:2", "http://y", func(c Config) any { return c.WechatPay.BaseURL }, "http://127.0.0.1:2"},
		"wechatpay-mchid":              {"", "", nil, nil},
		"wechatpay-appid":              {"wx123", "wx456", func(c Config) any { return c.WechatPay.AppID }, "wx123"},
		"wechatpay-serial-no":          {"5157f09efdc096de15ebe81a47057a72", "ab", func(c Config) any { return c.WechatPay.SerialNo }, "5157F09EFDC096DE15EBE81A47057A72"},
		"wechatpay-private-key-file":   {keyFile, keyFile, func(c Config) any { return c.WechatPay.PrivateKeyFile }, keyFile},
		"wechatpay-public-key-file":    {keyFile, keyFile, func(c Config) any { return c.WechatPay.PublicKeyFile }, keyFile},
		"wechatpay-public-key-id":      {"PUB_KEY_ID_1", "PUB_KEY_ID_2", func(c Config) any { return c.WechatPay.PublicKeyID }, "PUB_KEY_ID_1"},
		"wechatpay-apiv3-key-file":     {v3, v3, func(c Config) any { return c.WechatPay.APIv3KeyFile }, v3},
		"wechatpay-qps":                {"3", "4", func(c Config) any { return c.WechatPay.QPS }, 3.0},
		"accounts-file":                {"", "", nil, nil}, // TestAccountsFile
		"allow-insecure-platform":      {"true", "false", func(c Config) any { return c.AllowInsecurePlatform }, true},
		"rate-prefix":                  {"r:", "s:", func(c Config) any { return c.RatePrefix }, "r:"},
		"alipay-app-cert-file":         {keyFile, keyFile, func(c Config) any { return c.Alipay.AppCertFile }, keyFile},
		"alipay-alipay-cert-file":      {keyFile, keyFile, func(c Config) any { return c.Alipay.AlipayCertFile }, keyFile},
		"alipay-alipay-root-cert-file": {keyFile, keyFile, func(c Config) any { return c.Alipay.AlipayRootCertFile }, keyFile},
		"relay-url":                    {"nats://n1:4222,nats://n2:4222", "tls://x:4222", func(c Config) any { return c.Relay.URL }, "nats://n1:4222,nats://n2:4222"},
		"relay-subject-prefix":         {"acme.pay.", "x.", func(c Config) any { return c.Relay.SubjectPrefix }, "acme.pay."},
		"relay-batch":                  {"200", "300", func(c Config) any { return c.Relay.Batch }, 200},
		"relay-window":                 {"64", "32", func(c Config) any { return c.Relay.Window }, 64},
		"relay-ack-timeout":            {"3s", "4s", func(c Config) any { return c.Relay.AckTimeout }, 3 * time.Second},
		"relay-poll":                   {"250ms", "1s", func(c Config) any { return c.Relay.Poll }, 250 * time.Millisecond},
		"relay-retry-horizon":          {"15m", "10m", func(c Config) any { return c.Relay.RetryHorizon }, 15 * time.Minute},
		"admin-identity-header":        {"X-Auth-Request-Email", "X-Email", func(c Config) any { return c.Console.IdentityHeader }, "X-Auth-Request-Email"},
		"admin-trusted-proxies":        {"10.0.0.0/8, 192.0.2.7", "::1/128", func(c Config) any { return fmt.Sprint(c.Console.TrustedProxies) }, "[10.0.0.0/8 192.0.2.7/32]"},
		"reviewers":                    {"Ann@Example.com,*@finance.example.com", "b@x.y", func(c Config) any { return strings.Join(c.Console.Reviewers, ",") }, "ann@example.com,*@finance.example.com"},
		"approvers":                    {"cfo@example.com", "b@x.y", func(c Config) any { return strings.Join(c.Console.Approvers, ",") }, "cfo@example.com"},
		"admin-csrf-key-file":          {"", "", nil, nil}, // TestConsoleSettings
		"review-sla":                   {"24h", "96h", func(c Config) any { return c.Console.ReviewSLA }, 24 * time.Hour},
	}
	base := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"}
	for _, s := range settings {
		row, ok := rows[s.name]
		if !ok {
			t.Errorf("setting %s has no test row", s.name)
			continue
		}
		if row.got == nil {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			env[EnvName(s.name)] = row.value
			c, err := load(GroupAll, nil, env)
			if err != nil {
				t.Fatalf("from env: %v", err)
			}
			if got := row.got(c); got != row.want {
				t.Fatalf("from env: got %v, want %v", got, row.want)
			}
			c, err = load(GroupAll, []string{"--" + s.name + "=" + row.value}, base)
			if err != nil {
				t.Fatalf("from flag: %v", err)
			}
			if got := row.got(c); got != row.want {
				t.Fatalf("from flag: got %v, want %v", got, row.want)
			}
			env[EnvName(s.name)] = row.other
			c, err = load(GroupAll, []string{"--" + s.name + "=" + row.value}, env)
			if err != nil || row.got(c) != row.want {
				t.Fatalf("flag must win over env: got %v (%v), want %v", row.got(c), err, row.want)
			}
		})
	}
}

func TestBadValuesNameTheSetting(t *testing.T) {
	base := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"}
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"RECONCILER_CLAIM_TTL": "-5m"}, nil, `RECONCILER_CLAIM_TTL: must be a positive duration such as 90s or 2m, got "-5m"`},
		{nil, []string{"--claim-ttl", "soon"}, `--claim-ttl (RECONCILER_CLAIM_TTL): must be a positive duration such as 90s or 2m, got "soon"`},
		{map[string]string{"RECONCILER_RECHECK_MIN": "-1s"}, nil, "RECONCILER_RECHECK_MIN: must be a non-negative duration"},
		{map[string]string{"RECONCILER_CONCURRENCY": "0"}, nil, `RECONCILER_CONCURRENCY: must be a whole number from 1 to 1024, got "0"`},
		{map[string]string{"RECONCILER_DRY_RUN": "yes"}, nil, `RECONCILER_DRY_RUN: must be true or false, got "yes"`},
		{map[string]string{"RECONCILER_LOG_LEVEL": "loud"}, nil, "RECONCILER_LOG_LEVEL: must be one of debug, info, warn, error"},
		{map[string]string{"RECONCILER_TIMEZONE": "Mars/Olympus"}, nil, "RECONCILER_TIMEZONE: must be an IANA time zone"},
		{map[string]string{"RECONCILER_SHARD": "4/4"}, nil, `RECONCILER_SHARD: must be i/n with 0 <= i < n, got "4/4"`},
		{map[string]string{"RECONCILER_ALIPAY_QPS": "-3"}, nil, "RECONCILER_ALIPAY_QPS: must be a positive number"},
		{map[string]string{"RECONCILER_REDIS_URL": "http://x"}, nil, "RECONCILER_REDIS_URL: URL scheme must be one of redis"},
		{map[string]string{"RECONCILER_WECHATPAY_SERIAL_NO": "XYZ"}, nil, "RECONCILER_WECHATPAY_SERIAL_NO: must be a hexadecimal"},
		{map[string]string{"RECONCILER_ALIPAY_PRIVATE_KEY_FILE": "/nonexistent/key.pem"}, nil, "RECONCILER_ALIPAY_PRIVATE_KEY_FILE: cannot read key file"},
		{map[string]string{"RECONCILER_RECHECK_MIN": "2h"}, nil, "RECONCILER_RECHECK_MAX: must not be below RECONCILER_RECHECK_MIN"},
		{map[string]string{"RECONCILER_DATABASE_URL": ""}, nil, "RECONCILER_DATABASE_URL: is required"},
		{map[string]string{"RECONCILER_DATABASE_URL": "mysql://x"}, nil, "RECONCILER_DATABASE_URL: URL scheme must be one of postgres"},
	}
	for _, tc := range cases {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range tc.env {
			env[k] = v
		}
		_, err := load(GroupAll, tc.args, env)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !IsConfigError(err) {
			t.Errorf("env %v args %v: err = %v, want prefix %q", tc.env, tc.args, err, tc.want)
		}
	}
}

func TestPlatformRequirements(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	os.WriteFile(key, []byte("x"), 0o600)
	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("too-short\n"), 0o600)
	base := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	if _, err := load(GroupAll, nil, with("RECONCILER_ALIPAY_APP_ID", "2021")); err == nil || !strings.Contains(err.Error(), "RECONCILER_ALIPAY_PRIVATE_KEY_FILE: is required") {
		t.Errorf("alipay without keys: %v", err)
	}
	c, err := load(GroupAll, nil, with("RECONCILER_ALIPAY_APP_ID", "2021", "RECONCILER_ALIPAY_PRIVATE_KEY_FILE", key, "RECONCILER_ALIPAY_PUBLIC_KEY_FILE", key))
	if err != nil || !c.Alipay.Enabled() || c.WechatPay.Enabled() {
		t.Errorf("alipay enabled: %v %+v", err, c.Alipay)
	}
	if len(c.Accounts.Alipay) != 1 || c.Accounts.Alipay[0].AppID != "2021" || c.Accounts.Alipay[0].QPS != 10 || len(c.Accounts.WechatPay) != 0 {
		t.Errorf("the single-account settings add one account: %+v", c.Accounts)
	}
	if _, err := load(GroupAll, nil, with("RECONCILER_ALIPAY_APP_ID", "2021", "RECONCILER_ALIPAY_PRIVATE_KEY_FILE", key,
		"RECONCILER_ALIPAY_PUBLIC_KEY_FILE", key, "RECONCILER_ALIPAY_GATEWAY", "http://127.0.0.1:1/gateway.do")); err == nil ||
		!strings.Contains(err.Error(), "RECONCILER_ALIPAY_GATEWAY: must be an https:// URL") {
		t.Errorf("plain http gateway without RECONCILER_ALLOW_INSECURE_PLATFORM: %v", err)
	}
	if _, err := load(GroupAll, nil, with("RECONCILER_WECHATPAY_MCHID", "1900")); err == nil || !strings.Contains(err.Error(), "RECONCILER_WECHATPAY_SERIAL_NO: is required") {
		t.Errorf("wechat without settings: %v", err)
	}
	_, err = load(GroupAll, nil, with("RECONCILER_WECHATPAY_APIV3_KEY_FILE", short))
	if err == nil || !strings.Contains(err.Error(), "must hold a 32-byte API v3 key, found 9 bytes") || strings.Contains(err.Error(), "too-short") {
		t.Errorf("short API v3 key: %v (must not quote the key)", err)
	}
}

func TestShardsFromJobIndex(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "3")
	c, err := load(GroupAll, []string{"--shards", "8"}, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"})
	if err != nil || c.Shard != (reconcile.Shard{Index: 3, Count: 8}) {
		t.Fatalf("shard = %v, %v; want 3/8", c.Shard, err)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "8")
	if _, err := load(GroupAll, []string{"--shards", "8"}, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"}); err == nil {
		t.Fatal("index 8 of 8 accepted")
	}
}

func TestRedactionLeavesNoSecret(t *testing.T) {
	c, err := load(GroupAll, nil, map[string]string{
		"RECONCILER_DATABASE_URL":    "postgres://payrecon:pg-s3cret-pw@db:5432/pay?sslmode=require",
		"RECONCILER_REDIS_URL":       "redis://:r3dis-s3cret@cache:6379/0",
		"RECONCILER_PUSHGATEWAY_URL": "http://user:pgw-s3cret@pgw:9091/?token=tok-s3cret",
	})
	if err != nil {
		t.Fatal(err)
	}
	red := c.Redacted()
	for _, secret := range []string{"pg-s3cret-pw", "r3dis-s3cret", "pgw-s3cret", "tok-s3cret"} {
		if strings.Contains(red, secret) {
			t.Fatalf("redacted form leaks %q: %s", secret, red)
		}
	}
	for _, kept := range []string{"payrecon:xxxxx@db:5432/pay", "cache:6379", "claim-ttl=25h0m0s"} {
		if !strings.Contains(red, kept) {
			t.Fatalf("redacted form lost %q: %s", kept, red)
		}
	}
	// An unparseable URL must not be echoed back either.
	_, err = load(GroupAll, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u:bad\x7fpw@h/db"})
	if err == nil || strings.Contains(err.Error(), "bad\x7fpw") {
		t.Fatalf("bad URL error leaks the password: %v", err)
	}
}

func TestGroupsLimitFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	Register(fs, GroupDatabase|GroupLog, func(string) (string, bool) { return "", false })
	if fs.Lookup("database-url") == nil || fs.Lookup("alipay-app-id") != nil {
		t.Fatal("groups not honoured")
	}
}

// TestDesignSettingsExist: every setting of the design contract (README.md, Settings) is one the binary reads.
func TestDesignSettingsExist(t *testing.T) {
	design := []string{"DATABASE_URL", "LISTEN", "TIMEZONE", "REDIS_URL", "CLAIM_LEASE", "CLAIM_TTL", "GRACE",
		"LOOKBACK", "ORDER_TTL", "CONCURRENCY", "DRY_RUN", "LOG_LEVEL", "LOG_FORMAT", "PUSHGATEWAY_URL",
		"CLAIM_PREFIX", "PLATFORM_TIMEOUT", "RECHECK_MIN", "RECHECK_MAX", "CLOSE_AT_PLATFORM", "NOTIFY_WAIT",
		"ALIPAY_GATEWAY", "ALIPAY_APP_ID", "ALIPAY_PRIVATE_KEY_FILE", "ALIPAY_PUBLIC_KEY_FILE", "ALIPAY_QPS",
		"WECHATPAY_BASE_URL", "WECHATPAY_MCHID", "WECHATPAY_SERIAL_NO", "WECHATPAY_PRIVATE_KEY_FILE",
		"WECHATPAY_PUBLIC_KEY_FILE", "WECHATPAY_PUBLIC_KEY_ID", "WECHATPAY_APIV3_KEY_FILE", "WECHATPAY_QPS",
		"ACCOUNTS_FILE", "RATE_PREFIX", "ALLOW_INSECURE_PLATFORM",
		"RELAY_URL", "RELAY_SUBJECT_PREFIX", "ADMIN_LISTEN", "DATABASE_URL_FILE", "REDIS_URL_FILE"}
	have := map[string]bool{}
	for _, n := range Names() {
		have[EnvName(n)] = true
	}
	for _, d := range design {
		if !have["RECONCILER_"+d] {
			t.Errorf("RECONCILER_%s (design contract) is not a setting", d)
		}
	}
}

// TestURLFiles: the database and Redis URLs can come from files (a mounted Secret), so their
// passwords appear in neither the environment nor the command line; a file and a URL
// together are refused, and an error never quotes the file's content.
func TestURLFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dbFile := write("db", "postgres://u:s3cret@h/db\n")
	redisFile := write("redis", "redis://:s3cret@r:6379/1\n")
	badFile := write("bad", "mysql://u:s3cret@h/db\n")
	emptyFile := write("empty", "\n")
	cases := []struct {
		name      string
		env       map[string]string
		wantDB    string
		wantRedis string
		wantErr   string // the setting the error names; "" for none
	}{
		{"both from files", map[string]string{"RECONCILER_DATABASE_URL_FILE": dbFile, "RECONCILER_REDIS_URL_FILE": redisFile},
			"postgres://u:s3cret@h/db", "redis://:s3cret@r:6379/1", ""},
		{"database file, no redis", map[string]string{"RECONCILER_DATABASE_URL_FILE": dbFile}, "postgres://u:s3cret@h/db", "", ""},
		{"file and url together", map[string]string{"RECONCILER_DATABASE_URL_FILE": dbFile, "RECONCILER_DATABASE_URL": "postgres://x@y/z"}, "", "", "RECONCILER_DATABASE_URL"},
		{"redis file and url together", map[string]string{"RECONCILER_DATABASE_URL_FILE": dbFile, "RECONCILER_REDIS_URL_FILE": redisFile, "RECONCILER_REDIS_URL": "redis://x:1"}, "", "", "RECONCILER_REDIS_URL"},
		{"missing file", map[string]string{"RECONCILER_DATABASE_URL_FILE": filepath.Join(dir, "nope")}, "", "", "RECONCILER_DATABASE_URL_FILE"},
		{"empty file", map[string]string{"RECONCILER_DATABASE_URL_FILE": emptyFile}, "", "", "RECONCILER_DATABASE_URL_FILE"},
		{"wrong scheme in file", map[string]string{"RECONCILER_DATABASE_URL_FILE": badFile}, "", "", "RECONCILER_DATABASE_URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(GroupAll, nil, tc.env)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.DatabaseURL != tc.wantDB || c.RedisURL != tc.wantRedis {
					t.Fatalf("got %q and %q", c.DatabaseURL, c.RedisURL)
				}
				if strings.Contains(c.Redacted(), "s3cret") {
					t.Fatalf("redacted form leaks the password: %s", c.Redacted())
				}
				return
			}
			ce, ok := err.(*Error)
			if !ok || ce.Setting != tc.wantErr {
				t.Fatalf("want an error naming %s, got %v", tc.wantErr, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error quotes the file's content: %v", err)
			}
		})
	}
}

// TestConsoleSettings: the review console's defaults (loopback only, X-Forwarded-Email, nobody
// listed) and the values it refuses, each naming its setting.
func TestConsoleSettings(t *testing.T) {
	load := func(env map[string]string) (Config, error) {
		env["RECONCILER_DATABASE_URL"] = "postgres://u@h/db"
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		l := Register(fs, GroupDatabase|GroupConsole, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		return l.Load()
	}
	c, err := load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Console.IdentityHeader != "X-Forwarded-Email" || fmt.Sprint(c.Console.TrustedProxies) != "[127.0.0.0/8 ::1/128]" ||
		len(c.Console.Reviewers)+len(c.Console.Approvers) != 0 || c.Console.CSRFKeyFile != "" {
		t.Errorf("console defaults: %+v", c.Console)
	}
	dir := t.TempDir()
	short, key := filepath.Join(dir, "short"), filepath.Join(dir, "key")
	os.WriteFile(short, []byte("tiny\n"), 0o600)
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	if c, err := load(map[string]string{"RECONCILER_ADMIN_CSRF_KEY_FILE": key}); err != nil || c.Console.CSRFKeyFile != key {
		t.Errorf("key file: %+v, %v", c.Console, err)
	}
	for _, tc := range []struct{ env, value, want string }{
		{"RECONCILER_ADMIN_TRUSTED_PROXIES", "localhost", "RECONCILER_ADMIN_TRUSTED_PROXIES"},
		{"RECONCILER_ADMIN_IDENTITY_HEADER", "X Email", "RECONCILER_ADMIN_IDENTITY_HEADER"},
		{"RECONCILER_REVIEWERS", "ann", "RECONCILER_REVIEWERS"},
		{"RECONCILER_APPROVERS", "a*@example.com", "RECONCILER_APPROVERS"},
		{"RECONCILER_ADMIN_CSRF_KEY_FILE", short, "at least 16 bytes"},
		{"RECONCILER_ADMIN_CSRF_KEY_FILE", filepath.Join(dir, "missing"), "RECONCILER_ADMIN_CSRF_KEY_FILE"},
	} {
		if _, err := load(map[string]string{tc.env: tc.value}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: got %v, want an error naming %s", tc.env, tc.value, err, tc.want)
		}
	}
}
