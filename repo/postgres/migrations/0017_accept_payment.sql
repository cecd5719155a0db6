-- A resolution that acts: accept_payment takes a payment the merchant decided to keep into
-- the books. A PAID_AFTER_CLOSE (the buyer paid an order we had closed) or an
-- AMOUNT_MISMATCH the merchant accepts is, once a second person approves, the order's move
-- to PAID: the same conditional update, payment event and fulfilment outbox row as the
-- apply path's transition (repo/postgres/store.go applyTransitionSQL), with source
-- `review`, in the approval's own transaction. The worker's state machine never moves a
-- CLOSED order to PAID by itself; only this approved decision does.

-- The event's source names the review.
ALTER TABLE public.payment_events
    DROP CONSTRAINT payment_events_source_check,
    ADD CONSTRAINT payment_events_source_check
        CHECK (source IN ('notify', 'reconcile', 'backfill', 'statement', 'review'));

-- Which findings a resolution may settle (NULL: any). The console offers accept_payment only
-- where it applies, and the resolve function refuses it elsewhere.
ALTER TABLE public.reconcile_resolutions ADD COLUMN IF NOT EXISTS for_kinds text[] NULL;
INSERT INTO public.reconcile_resolutions (name, moves_money, needs_note, for_kinds)
VALUES ('accept_payment', true, false, ARRAY['PAID_AFTER_CLOSE', 'AMOUNT_MISMATCH'])
ON CONFLICT (name) DO NOTHING;

-- payrecon_accept_payment moves the finding's order to PAID with the platform's trade
-- number and amount. Exactly once: an order already PAID (or REFUNDED) by this very trade
-- was taken in before (an approval retried after a reopen) and is left alone; one paid by
-- another trade is refused, and the approval with it. Not executable by any runtime role:
-- only payrecon_review_approve calls it, after the approval itself was allowed.
CREATE FUNCTION public.payrecon_accept_payment(p_id bigint) RETURNS boolean LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f       public.reconcile_mismatches%ROWTYPE;
    o       public.payment_orders%ROWTYPE;
    v_paid  timestamptz;
BEGIN
    SELECT * INTO f FROM public.reconcile_mismatches WHERE id = p_id;
    IF f.order_id IS NULL OR f.platform_trade_no IS NULL OR f.platform_amount_minor IS NULL THEN
        RAISE EXCEPTION 'mismatch %: accept_payment needs the order, the platform trade number and the amount paid', p_id
            USING ERRCODE = 'PR004';
    END IF;
    SELECT * INTO o FROM public.payment_orders WHERE id = f.order_id FOR UPDATE;
    IF o.status IN ('PAID', 'REFUNDED') THEN
        IF o.platform_trade_no = f.platform_trade_no THEN
            RETURN false;
        END IF;
        RAISE EXCEPTION 'mismatch %: order % (%) is already % by trade %: the payment % cannot be taken in; reject the proposal',
            p_id, o.id, o.out_trade_no, o.status, o.platform_trade_no, f.platform_trade_no
            USING ERRCODE = 'PR001', DETAIL = o.status;
    END IF;
    -- The platform's paid time, when the sighting carried it (reconcile.Applier records it).
    IF pg_catalog.jsonb_typeof(f.detail -> 'paid_at') = 'string' THEN
        v_paid := (f.detail ->> 'paid_at')::timestamptz;
    END IF;

    UPDATE public.payment_orders SET
        status            = 'PAID',
        platform_trade_no = f.platform_trade_no,
        paid_amount_minor = f.platform_amount_minor,
        paid_at           = v_paid,
        updated_at        = pg_catalog.now(),
        version           = version + 1,
        next_check_at     = NULL,
        lease_until       = NULL,
        lease_owner       = NULL
    WHERE id = o.id AND status = o.status;
    INSERT INTO public.payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor)
    VALUES (o.id, o.platform, f.platform_trade_no, 'PAID', 'review', f.platform_amount_minor);
    -- The fulfilment message the apply path writes for a newly paid order
    -- (reconcile.paidOutbox), naming the finding that decided it.
    INSERT INTO public.fulfillment_outbox (order_id, kind, payload)
    VALUES (o.id, 'order.paid', pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
        'order_id', o.id, 'platform', o.platform, 'merchant_id', o.merchant_id,
        'out_trade_no', o.out_trade_no, 'platform_trade_no', f.platform_trade_no,
        'amount_minor', f.platform_amount_minor, 'currency', o.currency, 'source', 'review',
        'paid_at', pg_catalog.to_char(v_paid AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        'finding_id', f.id)));
    RETURN true;
END $$;
REVOKE ALL ON FUNCTION public.payrecon_accept_payment(bigint) FROM PUBLIC;

-- A resolution offered for a finding it does not fit is refused before the move.
CREATE OR REPLACE FUNCTION public.payrecon_review_resolve(p_id bigint, p_actor text, p_os_user text, p_seen_version bigint, p_resolution text, p_note text)
    RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_kinds text[];
    v_kind  text;
    v_refund text;
BEGIN
    SELECT r.for_kinds INTO v_kinds FROM public.reconcile_resolutions r WHERE r.name = p_resolution;
    IF v_kinds IS NOT NULL THEN
        SELECT kind, out_refund_no INTO v_kind, v_refund FROM public.reconcile_mismatches WHERE id = p_id;
        IF FOUND AND (NOT v_kind = ANY (v_kinds) OR v_refund <> '') THEN
            RAISE EXCEPTION 'mismatch %: % settles only a payment finding of kind %, not %', p_id, p_resolution,
                pg_catalog.array_to_string(v_kinds, ' or '),
                CASE WHEN v_refund <> '' THEN 'a refund''s ' || v_kind ELSE v_kind END
                USING ERRCODE = 'PR004';
        END IF;
    END IF;
    RETURN public.payrecon_review_move(p_id, 'resolve', p_actor, p_os_user, p_resolution, p_note, p_seen_version);
END $$;

-- The approval acts: an approved accept_payment takes the payment in, in the same
-- transaction as the approval and its audit row.
CREATE OR REPLACE FUNCTION public.payrecon_review_approve(p_id bigint, p_actor text, p_os_user text, p_seen_version bigint, p_note text)
    RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_audit bigint;
BEGIN
    v_audit := public.payrecon_review_move(p_id, 'approve', p_actor, p_os_user, NULL, p_note, p_seen_version);
    IF (SELECT resolution FROM public.reconcile_mismatches WHERE id = p_id) = 'accept_payment' THEN
        PERFORM public.payrecon_accept_payment(p_id);
    END IF;
    RETURN v_audit;
END $$;
