-- The fulfilment hand-off (`reconciler relay`): a relay following the outbox is woken by
-- NOTIFY instead of polling, and takes only the oldest undispatched row of each order so
-- that messages of one order reach NATS in the order they were written.

-- One constant payload per channel: PostgreSQL folds identical notifications of one
-- transaction into one, so a bulk insert wakes the relay once, not once per row.
CREATE OR REPLACE FUNCTION payrecon_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('payrecon_outbox', '');
    RETURN NULL;
END;
$$;

-- FOR EACH ROW, not FOR EACH STATEMENT: a transition whose conditional update moved no row
-- inserts nothing and must not wake anybody.
CREATE TRIGGER fulfillment_outbox_notify
    AFTER INSERT ON fulfillment_outbox
    FOR EACH ROW EXECUTE FUNCTION payrecon_outbox_notify();

-- The relay's take asks "is there an older undispatched row of this order?" for each row.
CREATE INDEX IF NOT EXISTS fulfillment_outbox_undispatched_order
    ON fulfillment_outbox (order_id, id) WHERE dispatched_at IS NULL;
