package worker

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/redis"
)

// MarkTakenIn marks the claim of a payment an approved accept_payment took into the books,
// where Redis is configured. It is a saving, as every claim is: without it the first
// callback or pass that sees the payment again finds the order PAID by that trade and marks
// the claim itself.
func MarkTakenIn(ctx context.Context, cfg config.Config, log zerolog.Logger, move reconcile.ReviewMove) {
	platform, tradeNo, ok := reconcile.TookPaymentIn(move)
	if !ok || cfg.RedisURL == "" {
		return
	}
	rdb, err := redis.NewClient(cfg.RedisURL, cfg.RedisTimeout)
	if err != nil {
		log.Warn().Err(err).Msg("accepted payment: claim not marked")
		return
	}
	defer rdb.Close()
	redis.NewClaimer(rdb, redis.ClaimerOptions{CallTimeout: cfg.RedisTimeout}, log).
		MarkDone(ctx, reconcile.ClaimKey(cfg.ClaimPrefix, platform, tradeNo), cfg.ClaimTTL)
}
