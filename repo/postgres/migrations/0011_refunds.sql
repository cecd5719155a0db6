-- Refunds: the other half of an order's money. The merchant's app records each refund it
-- asks the platform for as a payment_refunds row in PROCESSING; payrecon lands every
-- refund's outcome exactly once, through the same checks, claim and conditional update as
-- payments (repo/refunds.go), from callbacks, passes, backfills and bills.

CREATE TABLE public.payment_refunds (
    id                 bigserial   PRIMARY KEY,
    order_id           bigint      NOT NULL REFERENCES public.payment_orders (id),
    -- Filled from the order when not given (and refused when they name another order's).
    platform           text        NOT NULL DEFAULT '',
    merchant_id        text        NOT NULL DEFAULT '',
    out_trade_no       text        NOT NULL DEFAULT '',
    -- The merchant's refund number (Alipay calls it out_request_no).
    out_refund_no      text        NOT NULL CHECK (out_refund_no <> ''),
    -- WeChat Pay's refund_id; Alipay has none.
    platform_refund_no text        NULL,
    amount_minor       bigint      NOT NULL CHECK (amount_minor > 0),
    currency           text        NOT NULL DEFAULT '',
    status             text        NOT NULL DEFAULT 'PROCESSING'
                       CHECK (status IN ('PROCESSING', 'SUCCESS', 'CLOSED', 'ABNORMAL')),
    succeeded_at       timestamptz NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    -- The re-check schedule and the pass's lease, as for orders.
    next_check_at      timestamptz NULL,
    check_count        integer     NOT NULL DEFAULT 0,
    last_checked_at    timestamptz NULL,
    lease_until        timestamptz NULL,
    lease_owner        text        NULL,
    CONSTRAINT payment_refunds_identity UNIQUE (platform, merchant_id, out_refund_no)
);

-- A refund belongs to its order's shard: the same stable hash of the order's identity, so
-- one shard checks an order and all its refunds.
ALTER TABLE public.payment_refunds ADD COLUMN shard_hash bigint GENERATED ALWAYS AS
    (('x' || substr(md5(platform || ':' || merchant_id || ':' || out_trade_no), 1, 8))::bit(32)::bigint) STORED;

CREATE INDEX payment_refunds_order ON public.payment_refunds (order_id);
CREATE INDEX payment_refunds_due ON public.payment_refunds (platform, merchant_id, created_at, id)
    WHERE status IN ('PROCESSING', 'ABNORMAL');
CREATE INDEX payment_refunds_lease ON public.payment_refunds (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX payment_refunds_out_refund_no ON public.payment_refunds (platform, out_refund_no);

-- The order's identity and currency come from the order: a row inserted with only order_id,
-- out_refund_no, amount_minor, status and created_at is valid, and one that names another
-- order's identity is refused rather than filed under the wrong trade.
CREATE FUNCTION public.payment_refunds_fill() RETURNS trigger LANGUAGE plpgsql
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
    IF (NEW.platform, NEW.merchant_id, NEW.out_trade_no) IS DISTINCT FROM (o.platform, o.merchant_id, o.out_trade_no) THEN
        RAISE EXCEPTION 'payment_refunds: refund % names %/%/% but order % is %/%/%', NEW.out_refund_no,
            NEW.platform, NEW.merchant_id, NEW.out_trade_no, o.id, o.platform, o.merchant_id, o.out_trade_no
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER payment_refunds_fill BEFORE INSERT ON public.payment_refunds
    FOR EACH ROW EXECUTE FUNCTION public.payment_refunds_fill();

-- The sum of the order's SUCCESS refunds, kept by the refund transition in the same
-- statement; never more than was paid.
ALTER TABLE public.payment_orders
    ADD COLUMN refunded_minor bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT payment_orders_refunded_minor CHECK (refunded_minor >= 0 AND
        (refunded_minor = 0 OR refunded_minor <= paid_amount_minor));

-- Events and outbox rows of a refund name it; an order's own rows have no refund_id. The
-- uniqueness moves to (order, type, refund): one row per refund transition, and still one
-- per order transition (a missing refund_id counts as one value, not as distinct NULLs).
ALTER TABLE public.payment_events
    ADD COLUMN refund_id bigint NULL REFERENCES public.payment_refunds (id),
    DROP CONSTRAINT payment_events_event_type_check,
    ADD CONSTRAINT payment_events_event_type_check CHECK (event_type IN ('PAID', 'CLOSED', 'FAILED', 'REFUNDED',
        'REFUND_SUCCESS', 'REFUND_CLOSED', 'REFUND_ABNORMAL')),
    DROP CONSTRAINT payment_events_once;
CREATE UNIQUE INDEX payment_events_once ON public.payment_events (order_id, event_type, COALESCE(refund_id, 0));
CREATE INDEX payment_events_refund ON public.payment_events (refund_id) WHERE refund_id IS NOT NULL;

ALTER TABLE public.fulfillment_outbox
    ADD COLUMN refund_id bigint NULL REFERENCES public.payment_refunds (id),
    DROP CONSTRAINT fulfillment_outbox_once;
CREATE UNIQUE INDEX fulfillment_outbox_once ON public.fulfillment_outbox (order_id, kind, COALESCE(refund_id, 0));

-- Refund findings: one per refund (an order may have several refunds, each with its own
-- finding of one kind), so the refund number joins the finding's identity.
ALTER TABLE public.reconcile_mismatches
    ADD COLUMN out_refund_no text NOT NULL DEFAULT '',
    DROP CONSTRAINT reconcile_mismatches_kind_check,
    ADD CONSTRAINT reconcile_mismatches_kind_check CHECK (kind IN ('AMOUNT_MISMATCH', 'CURRENCY_MISMATCH',
        'MERCHANT_MISMATCH', 'UNKNOWN_ORDER', 'PAID_AFTER_CLOSE', 'DUPLICATE_PAYMENT',
        'LOCAL_PAID_PLATFORM_UNPAID', 'REFUNDED_AT_PLATFORM',
        'UNKNOWN_REFUND', 'REFUND_AMOUNT_MISMATCH', 'OVER_REFUNDED', 'REFUND_ABNORMAL', 'REFUND_NOT_AT_PLATFORM')),
    DROP CONSTRAINT reconcile_mismatches_finding,
    ADD CONSTRAINT reconcile_mismatches_finding UNIQUE (platform, merchant_id, out_trade_no, kind, out_refund_no);
CREATE INDEX reconcile_mismatches_out_refund_no ON public.reconcile_mismatches (platform, out_refund_no)
    WHERE out_refund_no <> '';

-- The run counter of applied refund transitions.
ALTER TABLE public.reconcile_runs ADD COLUMN refunds_repaired integer NOT NULL DEFAULT 0;
