-- The outbox's NOTIFY moves out of the transitions' transactions (repo/outbox_wake.go):
-- PostgreSQL serialises the commits of all transactions that notified, WAL flush included,
-- so the trigger capped every writer of outbox rows, cluster-wide, at one commit per disk
-- flush. The writer now sends NOTIFY payrecon_outbox after its commit; relays still LISTEN
-- on the same channel and poll besides.
DROP TRIGGER IF EXISTS fulfillment_outbox_notify ON fulfillment_outbox;
DROP FUNCTION IF EXISTS payrecon_outbox_notify();
