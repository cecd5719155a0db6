// Package worker is payrecon's runtime: it wires the configuration into the apply path, the
// platform clients of every merchant account (or verify-only readers where serve holds no
// private key), the metrics, the pass runner, the schedule and the relay, and runs a pass
// from start to summary. It returns errors as the domain classifies them; the command maps
// them to exit codes.
package worker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/metrics"
	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/redis"
)

// App is everything a worker command needs, wired from the configuration once.
type App struct {
	cfg     config.Config
	log     zerolog.Logger
	store   *postgres.Store
	rdb     *goredis.Client
	claims  *redis.Claimer   // nil: database-only claims
	procs   *procsForDueWork // nil: the passes leave GOMAXPROCS alone (PaceRuntime)
	applier *reconcile.Applier
	// One callback reader per merchant account; callbacks find theirs by app_id, serial or
	// path. An account given without its private key has a reader but no client.
	alipay  map[string]httpapi.AlipayNotifyReader // by app_id
	wechat  []httpapi.WechatNotifyReader          // in configuration order
	clients []reconcile.PlatformClient
	metrics *metrics.Metrics
	// queues are the shared budgets' queues, by the account owning the budget (a provider,
	// a direct account, a sub-merchant with a qps of its own); none without Redis.
	queues map[reconcile.AccountKey]*redis.Budget
	// owners are callBudgets of the accounts, built once: the paced runtime and every pass's
	// budget queues read them (scheduled passes may start on goroutines of their own).
	owners map[reconcile.AccountKey]budgetOwner
}

// New connects to the database (and Redis), loads the platform keys and builds the apply
// path. Key and setting problems are *config.Error (exit 2).
func New(ctx context.Context, cfg config.Config, log zerolog.Logger, withPlatforms bool) (*App, error) {
	if n := cfg.Accounts.SubMerchantCount(); n > MaxSubMerchants {
		// Every sub-merchant has a client view and a place in the account list from the
		// start (a pass only starts loops for the accounts with due work): past this, the
		// start-up's memory grows with the file, not the work.
		return nil, &config.Error{Setting: "RECONCILER_ACCOUNTS_FILE", Msg: fmt.Sprintf(
			"%d sub-merchants of service providers are configured; one deployment reconciles at most %d: split the file across deployments", n, MaxSubMerchants)}
	}
	a := &App{cfg: cfg, log: log, metrics: metrics.New(), alipay: map[string]httpapi.AlipayNotifyReader{},
		queues: map[reconcile.AccountKey]*redis.Budget{}, owners: callBudgets(cfg.Accounts)}
	var claimer reconcile.Claimer
	if cfg.RedisURL != "" {
		var err error
		// The client connects lazily: a configuration error below still comes first.
		a.rdb, err = redis.NewClient(cfg.RedisURL, cfg.RedisTimeout)
		if err != nil {
			return nil, &config.Error{Setting: "RECONCILER_REDIS_URL", Msg: err.Error()}
		}
		a.claims = redis.NewClaimer(a.rdb, redis.ClaimerOptions{CallTimeout: cfg.RedisTimeout}, log)
		claimer = a.claims
		a.metrics.WatchClaims(a.claims)
	}
	if withPlatforms {
		if err := a.buildPlatforms(); err != nil {
			a.Close()
			return nil, err
		}
		if len(a.alipay)+len(a.wechat) == 0 {
			a.Close()
			return nil, &config.Error{Setting: "RECONCILER_ACCOUNTS_FILE", Msg: "no platform account configured: list accounts in RECONCILER_ACCOUNTS_FILE, or set RECONCILER_ALIPAY_APP_ID and/or RECONCILER_WECHATPAY_MCHID with their keys"}
		}
	}
	db, err := postgres.OpenWithTimeout(ctx, cfg.DatabaseURL, cfg.DatabaseTimeout)
	if err != nil {
		a.Close()
		return nil, err
	}
	// Every worker may hold a connection, plus each account's taking loop, the lock's
	// session and the run record.
	if n := cfg.Concurrency + cfg.Accounts.Len() + 4; n > 32 {
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
	}
	a.store = postgres.NewStore(db)
	accounts := map[reconcile.AccountKey]reconcile.Account{}
	for _, x := range cfg.Accounts.Alipay {
		accounts[reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: x.AppID}] = reconcile.Account{SellerID: x.SellerID}
	}
	for _, x := range cfg.Accounts.WechatPay {
		if x.SpMchID == "" { // a service provider has no orders of its own
			accounts[reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: x.MchID}] = reconcile.Account{SellerID: x.AppID}
		}
		for _, s := range x.SubMerchants {
			accounts[reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: s.SubMchID}] = reconcile.Account{SellerID: s.SubAppID}
		}
	}
	a.applier = reconcile.NewApplier(a.store, claimer, reconcile.ApplierSettings{
		ClaimPrefix: cfg.ClaimPrefix, ClaimLease: cfg.ClaimLease, ClaimTTL: cfg.ClaimTTL,
		OrderTTL: cfg.OrderTTL, RefundTTL: cfg.RefundTTL, Accounts: accounts,
	}, log)
	return a, nil
}

// Store is the database adapter the app wired.
func (a *App) Store() *postgres.Store { return a.store }

// Metrics is the app's registry of instruments.
func (a *App) Metrics() *metrics.Metrics { return a.metrics }

// Close closes Redis and the database.
func (a *App) Close() {
	if a.rdb != nil {
		a.rdb.Close()
	}
	if a.store != nil {
		a.store.DB().Close()
	}
}

// readAccountFile reads one of an account's files and parses it with parse; errors name the
// accounts file (or setting), the account and the field, and say what is wrong with the
// format, never the key itself.
func readAccountFile[K any](fail func(field, msg string) *config.Error, field, path string, parse func([]byte) (K, error)) (K, error) {
	var zero K
	b, err := os.ReadFile(path)
	if err != nil {
		return zero, fail(field, fmt.Sprintf("cannot read: %v", err))
	}
	v, err := parse(b)
	if err != nil {
		return zero, fail(field, fmt.Sprintf("%s: %v", path, err))
	}
	return v, nil
}

// readKeyFile is readAccountFile for a secret key: a file others can read is warned about
// first.
func readKeyFile[K any](a *App, fail func(field, msg string) *config.Error, field, path string, parse func([]byte) (K, error)) (K, error) {
	a.warnIfExposed(field, path)
	return readAccountFile(fail, field, path, parse)
}

// warnIfExposed warns when a secret key file is readable by group or others: anyone else on
// the host (or in the pod) could sign as the merchant. It is a warning, not an error, so
// that a fix of the mode never has to wait for a release.
func (a *App) warnIfExposed(field, path string) {
	if mode, exposed := exposedKeyFile(path); exposed {
		a.log.Warn().Str("field", field).Str("file", path).Str("mode", mode.String()).
			Msg("key file is readable by group or others: chmod 600 it (on Kubernetes, defaultMode: 0400 on the Secret volume)")
	}
}

// exposedKeyFile tells whether path (its target, when a symlink as Secret volumes use) is
// readable by others, or by a group that is not the process's own (a Secret volume mounted
// 0440 with fsGroup = runAsGroup is readable by this process's group alone: fine).
func exposedKeyFile(path string) (fs.FileMode, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false // reading it fails next, with the reason
	}
	mode := fi.Mode().Perm()
	if mode&0o004 != 0 {
		return mode, true
	}
	if mode&0o040 == 0 {
		return mode, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return mode, !ok || int(st.Gid) != os.Getegid()
}

func (a *App) buildPlatforms() error {
	a.noteSubMerchants()
	for _, acct := range a.cfg.Accounts.Alipay {
		if acct.PrivateKeyFile == "" { // allowed only when serve only verifies callbacks
			read, err := a.alipayVerifier(acct)
			if err != nil {
				return err
			}
			a.alipay[acct.AppID] = read
			continue
		}
		c, err := a.alipayClient(acct)
		if err != nil {
			return err
		}
		if err := a.addAlipaySubMerchants(c, acct); err != nil {
			return err
		}
		a.alipay[acct.AppID] = c.ParseNotify
		a.addClient(c, c.BreakerState)
	}
	for _, acct := range a.cfg.Accounts.WechatPay {
		if acct.PrivateKeyFile == "" {
			v, err := a.wechatVerifier(acct)
			if err != nil {
				return err
			}
			a.wechat = append(a.wechat, v)
			continue
		}
		c, err := a.wechatClient(acct)
		if err != nil {
			return err
		}
		if err := a.addWechatSubMerchants(c, acct); err != nil {
			return err
		}
		a.wechat = append(a.wechat, c)
		if acct.SpMchID == "" {
			a.addClient(c, c.BreakerState)
		} else {
			// No orders of its own, so no place in the pass; its breaker is its
			// sub-merchants'.
			a.metrics.WatchBreaker(reconcile.WechatPay, acct.SpMchID, c.BreakerState)
		}
	}
	return nil
}

func (a *App) addClient(c reconcile.PlatformClient, breaker func() string) {
	a.clients = append(a.clients, a.metrics.Instrument(c))
	a.metrics.WatchBreaker(c.Platform(), c.MerchantID(), breaker)
}

func (a *App) alipayClient(acct config.AlipayAccount) (*alipay.Client, error) {
	fail := acct.FieldError
	priv, err := readKeyFile(a, fail, "private_key_file", acct.PrivateKeyFile, platformclient.LoadPrivateKey)
	if err != nil {
		return nil, err
	}
	cfg := alipay.Config{Gateway: acct.Gateway, AppID: acct.AppID, PrivateKey: priv, SellerID: acct.SellerID,
		QPS: acct.QPS, Timeout: a.cfg.PlatformTimeout, Logger: a.log,
		Tuning: a.tuning(reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: acct.AppID}, acct.QPS)}
	if acct.CertMode() {
		// Each file is parsed on its own first, so the error names the field at fault.
		var pems [3][]byte
		for i, f := range []struct{ field, path string }{{"app_cert_file", acct.AppCertFile},
			{"alipay_cert_file", acct.AlipayCertFile}, {"alipay_root_cert_file", acct.AlipayRootCertFile}} {
			parse := func(b []byte) ([]byte, error) { _, err := alipay.ParseCertificate(b); return b, err }
			if f.field == "alipay_root_cert_file" {
				parse = func(b []byte) ([]byte, error) { _, err := alipay.RootCertSN(b); return b, err }
			}
			if pems[i], err = readAccountFile(fail, f.field, f.path, parse); err != nil {
				return nil, err
			}
		}
		if cfg.Cert, err = alipay.NewCertMode(pems[0], pems[1], pems[2]); err != nil {
			return nil, fail("alipay_cert_file", err.Error())
		}
	} else if cfg.AlipayPublicKey, err = readAccountFile(fail, "public_key_file", acct.PublicKeyFile, platformclient.LoadPublicKey); err != nil {
		return nil, err
	}
	c, err := alipay.New(cfg)
	if err != nil {
		return nil, fail("app_id", err.Error())
	}
	return c, nil
}

func (a *App) wechatClient(acct config.WechatAccount) (*wechatpay.Client, error) {
	fail := acct.FieldError
	priv, err := readKeyFile(a, fail, "private_key_file", acct.PrivateKeyFile, platformclient.LoadPrivateKey)
	if err != nil {
		return nil, err
	}
	v3, err := readKeyFile(a, fail, "apiv3_key_file", acct.APIv3KeyFile, wechatpay.ParseAPIv3Key)
	if err != nil {
		return nil, err
	}
	cfg := wechatpay.Config{BaseURL: acct.BaseURL, MchID: acct.ID(), SerialNo: acct.SerialNo, PrivateKey: priv,
		APIv3Key: v3, AppID: acct.AppID, QPS: acct.QPS, Timeout: a.cfg.PlatformTimeout, Logger: a.log,
		Tuning: a.tuning(reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: acct.ID()}, acct.QPS)}
	// Without a public key the account verifies with platform certificates only; with one,
	// certificates are still accepted (a merchant migrating to the public key).
	if acct.PublicKeyFile != "" {
		if cfg.PlatformPublicKey, err = readAccountFile(fail, "public_key_file", acct.PublicKeyFile, platformclient.LoadPublicKey); err != nil {
			return nil, err
		}
		cfg.PublicKeyID = acct.PublicKeyID
	}
	c, err := wechatpay.New(cfg)
	if err != nil {
		return nil, fail("mchid", err.Error())
	}
	return c, nil
}

// tuning gives an account's client its share of the call budget and its throttle counter.
// With Redis, every process calling for the account takes from one budget held there;
// without it, this shard paces at QPS/n so that n shards together stay within the budget.
func (a *App) tuning(acct reconcile.AccountKey, qps float64) platformclient.Tuning {
	return platformclient.Tuning{
		Budget:     a.budget(acct, qps),
		OnThrottle: a.metrics.OnThrottle(acct),
	}
}

// budget is an account's call budget at qps, shared through Redis by every process (one
// key per account), or this shard's share of it without Redis.
func (a *App) budget(acct reconcile.AccountKey, qps float64) platformclient.Budget {
	var budget platformclient.Budget
	if a.rdb != nil {
		b := redis.NewBudget(a.rdb, redis.BudgetOptions{
			Key: a.cfg.RatePrefix + string(acct.Platform) + ":" + acct.MerchantID, QPS: qps,
			Shards: a.cfg.Shard.Count, CallTimeout: a.cfg.RedisTimeout, Logger: a.log})
		a.queues[acct] = b
		budget = b
	} else {
		share := qps / float64(max(1, a.cfg.Shard.Count))
		budget = rate.NewLimiter(rate.Limit(share), reconcile.BudgetBurst(share))
	}
	return a.metrics.TimeBudget(acct, budget)
}

// Runner builds the pass runner over the app's parts.
func (a *App) Runner(observer reconcile.Observer) *reconcile.Runner {
	cfg := a.cfg
	return reconcile.NewRunner(a.applier, a.store, a.store.Runs(), a.store.Locker(), a.clients, reconcile.RunnerSettings{
		Concurrency: cfg.Concurrency, Grace: cfg.Grace, Lookback: cfg.Lookback, OrderTTL: cfg.OrderTTL,
		RecheckMin: cfg.RecheckMin, RecheckMax: cfg.RecheckMax, CloseAtPlatform: cfg.CloseAtPlatform,
		DrainTimeout: cfg.DrainTimeout, PlatformTimeout: cfg.PlatformTimeout, Lease: cfg.OrderLease, // 0: the default
		Budgets: a.budgetQueues(),
	}, observer, a.log)
}
