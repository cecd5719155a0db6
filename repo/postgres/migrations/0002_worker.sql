-- The worker's sharding key: a stable hash of the order identity, computed by the database
-- so every writer (the merchant's own service included) gets it for free. md5 is stable
-- across PostgreSQL versions, unlike hashtext. reconcile.ShardOf computes the same value.
ALTER TABLE payment_orders ADD COLUMN shard_hash bigint GENERATED ALWAYS AS
    (('x' || substr(md5(platform || ':' || merchant_id || ':' || out_trade_no), 1, 8))::bit(32)::bigint) STORED;

-- The per-run progress a backfill resumes from, and who took a lease.
CREATE INDEX payment_orders_lease ON payment_orders (lease_owner) WHERE lease_owner IS NOT NULL;
