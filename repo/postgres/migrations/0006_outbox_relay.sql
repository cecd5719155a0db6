-- The fulfilment hand-off (`reconciler relay`): a relay following the outbox is woken by
-- NOTIFY instead of polling. (Its take's "older undispatched row of this order?" probe uses
-- the unique (order_id, kind) index: an order has a handful of rows at most.)

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
