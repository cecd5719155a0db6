package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
)

// app is everything a worker command needs, wired from the configuration once.
type app struct {
	cfg     config.Config
	log     zerolog.Logger
	store   *repo.Store
	rdb     *redis.Client
	claims  *repo.RedisClaimer // nil: database-only claims
	applier *reconcile.Applier
	alipay  *alipay.Client
	wechat  *wechatpay.Client
	clients []reconcile.PlatformClient
	metrics *metrics
}

// newApp connects to the database (and Redis), loads the platform keys and builds the apply
// path. Key and setting problems are *config.Error (exit 2).
func newApp(ctx context.Context, cfg config.Config, log zerolog.Logger, withPlatforms bool) (*app, error) {
	a := &app{cfg: cfg, log: log, metrics: newMetrics()}
	if withPlatforms {
		if err := a.buildPlatforms(); err != nil {
			return nil, err
		}
		if len(a.clients) == 0 {
			return nil, &config.Error{Setting: "RECONCILER_ALIPAY_APP_ID", Msg: "no platform configured: set RECONCILER_ALIPAY_APP_ID and/or RECONCILER_WECHATPAY_MCHID with their keys"}
		}
	}
	db, err := repo.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	// Every worker may hold a connection, plus the lock's session and the run record.
	if n := cfg.Concurrency + 4; n > 32 {
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
	}
	a.store = repo.NewStore(db)
	var claimer reconcile.Claimer
	if cfg.RedisURL != "" {
		a.rdb, err = repo.NewRedisClient(cfg.RedisURL, cfg.RedisTimeout)
		if err != nil {
			db.Close()
			return nil, &config.Error{Setting: "RECONCILER_REDIS_URL", Msg: err.Error()}
		}
		a.claims = repo.NewRedisClaimer(a.rdb, repo.RedisOptions{CallTimeout: cfg.RedisTimeout}, log)
		claimer = a.claims
		a.metrics.watchClaims(a.claims)
	}
	accounts := map[reconcile.Platform]reconcile.Account{
		reconcile.Alipay:    {SellerID: cfg.Alipay.SellerID},
		reconcile.WechatPay: {SellerID: cfg.WechatPay.AppID},
	}
	a.applier = reconcile.NewApplier(a.store, claimer, reconcile.ApplierSettings{
		ClaimPrefix: cfg.ClaimPrefix, ClaimLease: cfg.ClaimLease, ClaimTTL: cfg.ClaimTTL,
		OrderTTL: cfg.OrderTTL, Accounts: accounts,
	}, log)
	return a, nil
}

func (a *app) Close() {
	if a.rdb != nil {
		a.rdb.Close()
	}
	if a.store != nil {
		a.store.DB().Close()
	}
}

// readKeyFile reads a key file and parses it with parse; errors name the setting and say
// what is wrong with the format, never the key itself.
func readKeyFile[K any](setting, path string, parse func([]byte) (K, error)) (K, error) {
	var zero K
	b, err := os.ReadFile(path)
	if err != nil {
		return zero, &config.Error{Setting: setting, Msg: fmt.Sprintf("cannot read key file: %v", err)}
	}
	key, err := parse(b)
	if err != nil {
		return zero, &config.Error{Setting: setting, Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return key, nil
}

func (a *app) buildPlatforms() error {
	cfg := a.cfg
	if cfg.Alipay.Enabled() {
		priv, err := readKeyFile("RECONCILER_ALIPAY_PRIVATE_KEY_FILE", cfg.Alipay.PrivateKeyFile, platformclient.LoadPrivateKey)
		if err != nil {
			return err
		}
		pub, err := readKeyFile("RECONCILER_ALIPAY_PUBLIC_KEY_FILE", cfg.Alipay.PublicKeyFile, platformclient.LoadPublicKey)
		if err != nil {
			return err
		}
		a.alipay, err = alipay.New(alipay.Config{
			Gateway: cfg.Alipay.Gateway, AppID: cfg.Alipay.AppID, PrivateKey: priv,
			AlipayPublicKey: pub, SellerID: cfg.Alipay.SellerID, QPS: cfg.Alipay.QPS,
			Timeout: cfg.PlatformTimeout, Logger: a.log,
		})
		if err != nil {
			return &config.Error{Setting: "RECONCILER_ALIPAY_APP_ID", Msg: err.Error()}
		}
		a.clients = append(a.clients, a.metrics.instrument(a.alipay))
		a.metrics.watchBreaker(reconcile.Alipay, a.alipay.BreakerState)
	}
	if cfg.WechatPay.Enabled() {
		priv, err := readKeyFile("RECONCILER_WECHATPAY_PRIVATE_KEY_FILE", cfg.WechatPay.PrivateKeyFile, platformclient.LoadPrivateKey)
		if err != nil {
			return err
		}
		pub, err := readKeyFile("RECONCILER_WECHATPAY_PUBLIC_KEY_FILE", cfg.WechatPay.PublicKeyFile, platformclient.LoadPublicKey)
		if err != nil {
			return err
		}
		v3, err := config.ReadAPIv3Key(cfg.WechatPay.APIv3KeyFile)
		if err != nil {
			return &config.Error{Setting: "RECONCILER_WECHATPAY_APIV3_KEY_FILE", Msg: err.Error()}
		}
		a.wechat, err = wechatpay.New(wechatpay.Config{
			BaseURL: cfg.WechatPay.BaseURL, MchID: cfg.WechatPay.MchID, SerialNo: cfg.WechatPay.SerialNo,
			PrivateKey: priv, PlatformPublicKey: pub, PublicKeyID: cfg.WechatPay.PublicKeyID,
			APIv3Key: v3, AppID: cfg.WechatPay.AppID, QPS: cfg.WechatPay.QPS, Timeout: cfg.PlatformTimeout, Logger: a.log,
		})
		if err != nil {
			return &config.Error{Setting: "RECONCILER_WECHATPAY_MCHID", Msg: err.Error()}
		}
		a.clients = append(a.clients, a.metrics.instrument(a.wechat))
		a.metrics.watchBreaker(reconcile.WechatPay, a.wechat.BreakerState)
	}
	return nil
}

// runner builds the pass runner over the app's parts.
func (a *app) runner(observer reconcile.Observer) *reconcile.Runner {
	cfg := a.cfg
	// A lease outlives the slowest check: query, close and confirming query, each with
	// its retries.
	lease := 10 * cfg.PlatformTimeout
	if lease < 2*time.Minute {
		lease = 2 * time.Minute
	}
	return reconcile.NewRunner(a.applier, a.store, a.store.Runs(), a.store.Locker(), a.clients, reconcile.RunnerSettings{
		Concurrency: cfg.Concurrency, Grace: cfg.Grace, Lookback: cfg.Lookback, OrderTTL: cfg.OrderTTL,
		RecheckMin: cfg.RecheckMin, RecheckMax: cfg.RecheckMax, CloseAtPlatform: cfg.CloseAtPlatform,
		DrainTimeout: cfg.DrainTimeout, Lease: lease,
	}, observer, a.log)
}

func shardOf(cfg config.Config) reconcile.Shard {
	return reconcile.Shard{Index: cfg.Shard.Index, Count: cfg.Shard.Count}
}
