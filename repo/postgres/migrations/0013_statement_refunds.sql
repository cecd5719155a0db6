-- Statements match refunds: a bill's refund lines are matched to payment_refunds by (order,
-- out_refund_no), and a local SUCCESS refund that the bill of its day leaves out is held for a
-- day, as a PAID order is (repo/statement.go).

-- The held list holds refunds beside orders: a refund's row names its order (order_id) and
-- the refund itself (refund_id, out_refund_no); an order's row has no refund_id. The key moves
-- from (day, order) to (day, order, refund), a missing refund_id counting as one value, so an
-- order and its refunds (or two refunds of one order) may be held the same day, each once.
ALTER TABLE public.statement_held
    ADD COLUMN refund_id bigint NULL REFERENCES public.payment_refunds (id),
    ADD COLUMN out_refund_no text NOT NULL DEFAULT '',
    DROP CONSTRAINT statement_held_pkey;
CREATE UNIQUE INDEX statement_held_once
    ON public.statement_held (platform, merchant_id, bill_date, order_id, COALESCE(refund_id, 0));

-- The held list of a day reads an account's SUCCESS refunds by succeeded_at.
CREATE INDEX payment_refunds_succeeded_by_account
    ON public.payment_refunds (platform, merchant_id, succeeded_at) WHERE status = 'SUCCESS';

-- The day's refund figures beside the lines': refund lines that moved a local refund to
-- SUCCESS, and refund lines naming a refund number the merchant does not have
-- (UNKNOWN_REFUND: made in the merchant portal, or lost by the app).
ALTER TABLE public.statement_days
    ADD COLUMN refunds_repaired integer NOT NULL DEFAULT 0,
    ADD COLUMN refunds_unknown  integer NOT NULL DEFAULT 0;
