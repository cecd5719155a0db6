-- A pass takes each merchant account's orders separately (so a slow account never holds the
-- workers another needs): the claiming query filters on (platform, merchant_id) first.
CREATE INDEX IF NOT EXISTS payment_orders_due_by_account
    ON payment_orders (platform, merchant_id, created_at, id) WHERE status = 'PENDING';
-- A backfill re-checks every status of one account's window.
CREATE INDEX IF NOT EXISTS payment_orders_created_by_account
    ON payment_orders (platform, merchant_id, created_at, id);
