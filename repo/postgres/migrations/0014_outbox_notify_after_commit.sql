-- payrecon's own transitions NOTIFY after they commit (repo/outbox_wake.go), not from inside
-- their transaction: PostgreSQL serialises the commits of all transactions that notified,
-- WAL flush included, so the trigger of migration 0006 capped every writer of outbox rows,
-- cluster-wide, at one commit per disk flush. A transition says so for its own transaction
-- (set_config('payrecon.outbox_notify', 'off', true), in its statement); rows inserted any
-- other way (an operator's psql, a backfill script) still wake the relays from here.
CREATE OR REPLACE FUNCTION payrecon_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('payrecon.outbox_notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('payrecon_outbox', '');
    END IF;
    RETURN NULL;
END;
$$;
