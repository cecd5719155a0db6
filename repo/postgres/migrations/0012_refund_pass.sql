-- A pass checks refunds beside orders (repo/refund_queue.go).
--
-- A backfill takes the refunds of the orders created in its window, in (the order's
-- created_at, refund id) keyset order. The order's created_at is kept on the refund (filled
-- by the insert trigger from the order, like its identity), so the take walks one index in
-- keyset order, as an order take does, instead of joining the orders and sorting the rest of
-- the window on every take. A run's take walks payment_refunds_due.
ALTER TABLE public.payment_refunds ADD COLUMN order_created_at timestamptz NULL;
UPDATE public.payment_refunds r SET order_created_at = o.created_at
    FROM public.payment_orders o WHERE o.id = r.order_id;
ALTER TABLE public.payment_refunds ALTER COLUMN order_created_at SET NOT NULL;
CREATE INDEX payment_refunds_by_order_created ON public.payment_refunds (platform, merchant_id, order_created_at, id);

CREATE OR REPLACE FUNCTION public.payment_refunds_fill() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o public.payment_orders%ROWTYPE;
BEGIN
    SELECT * INTO o FROM public.payment_orders WHERE id = NEW.order_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment_refunds: order % does not exist', NEW.order_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF NEW.platform = '' THEN NEW.platform := o.platform; END IF;
    IF NEW.merchant_id = '' THEN NEW.merchant_id := o.merchant_id; END IF;
    IF NEW.out_trade_no = '' THEN NEW.out_trade_no := o.out_trade_no; END IF;
    IF NEW.currency = '' THEN NEW.currency := o.currency; END IF;
    NEW.order_created_at := o.created_at;
    IF (NEW.platform, NEW.merchant_id, NEW.out_trade_no) IS DISTINCT FROM (o.platform, o.merchant_id, o.out_trade_no) THEN
        RAISE EXCEPTION 'payment_refunds: refund % names %/%/% but order % is %/%/%', NEW.out_refund_no,
            NEW.platform, NEW.merchant_id, NEW.out_trade_no, o.id, o.platform, o.merchant_id, o.out_trade_no
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

-- A backfill resumes its refunds from their own per-account positions, as it does its
-- orders (reconcile.Run.RefundCursor).
ALTER TABLE public.reconcile_runs ADD COLUMN refund_cursor text NULL;
