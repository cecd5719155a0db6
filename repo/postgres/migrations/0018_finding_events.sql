-- Findings are events. Opening a finding, a sighting that changes its evidence and every
-- review move (acknowledge, propose, resolve, approve, reject, withdraw, and the reopen)
-- insert a fulfillment_outbox row in the same transaction, so the relay publishes them to
-- JetStream like the orders' messages (subject prefix + kind: payrecon.finding.opened, ...)
-- and a chat or ticketing consumer hears about a finding without anybody opening the
-- console. The rows are written by triggers, whoever makes the change (the worker's
-- sighting, the reviewer's function, the database's reopen), so no path can forget one.

-- A finding's row names the finding, not an order: the order's (order_id, kind) uniqueness
-- would allow one finding.changed per order ever. Findings are never deleted, so no
-- foreign key is needed to keep the reference true.
ALTER TABLE public.fulfillment_outbox
    ALTER COLUMN order_id DROP NOT NULL,
    ADD COLUMN finding_id bigint NULL,
    ADD CONSTRAINT fulfillment_outbox_about CHECK ((order_id IS NULL) <> (finding_id IS NULL));
-- The relay keeps each finding's messages in the order they were written, as it does an
-- order's (repo/postgres/outbox.go): this finds a finding's earlier undispatched row.
CREATE INDEX fulfillment_outbox_finding_undispatched ON public.fulfillment_outbox (finding_id, id)
    WHERE dispatched_at IS NULL AND finding_id IS NOT NULL;

-- payrecon_finding_message writes one finding.<event> row: the finding as it now stands,
-- plus what the event adds (the review move, the evidence before the change). Times are
-- RFC 3339 in UTC, amounts integer minor units, as in the orders' payloads.
CREATE FUNCTION public.payrecon_finding_message(f public.reconcile_mismatches, p_event text, p_extra jsonb)
    RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO public.fulfillment_outbox (finding_id, kind, payload)
    VALUES (f.id, 'finding.' || p_event, pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
        'finding_id', f.id, 'event', p_event, 'kind', f.kind,
        'platform', f.platform, 'merchant_id', f.merchant_id, 'order_id', f.order_id,
        'out_trade_no', f.out_trade_no, 'platform_trade_no', f.platform_trade_no,
        'out_refund_no', NULLIF(f.out_refund_no, ''),
        'local_amount_minor', f.local_amount_minor, 'platform_amount_minor', f.platform_amount_minor,
        'local_status', f.local_status, 'platform_status', f.platform_status,
        'evidence_version', f.evidence_version, 'seen_count', f.seen_count,
        'first_seen_at', pg_catalog.to_char(f.first_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        'review_status', f.review_status, 'resolution', f.resolution, 'note', f.note,
        'proposed_by', f.proposed_by, 'resolved_by', f.resolved_by, 'approved_by', f.approved_by)
        || COALESCE(p_extra, '{}'::jsonb)));
END $$;
REVOKE ALL ON FUNCTION public.payrecon_finding_message(public.reconcile_mismatches, text, jsonb) FROM PUBLIC;

-- A new finding, and a sighting whose figures differ (the evidence trigger of migration
-- 0008 bumped the version): opened, changed. A repeat with the same figures is no event.
CREATE FUNCTION public.reconcile_mismatch_event() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM public.payrecon_finding_message(NEW, 'opened', NULL);
    ELSIF NEW.evidence_version IS DISTINCT FROM OLD.evidence_version THEN
        PERFORM public.payrecon_finding_message(NEW, 'changed', pg_catalog.jsonb_build_object('previous',
            pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
                'evidence_version', OLD.evidence_version, 'platform_trade_no', OLD.platform_trade_no,
                'local_amount_minor', OLD.local_amount_minor, 'platform_amount_minor', OLD.platform_amount_minor,
                'local_status', OLD.local_status, 'platform_status', OLD.platform_status))));
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION public.reconcile_mismatch_event() FROM PUBLIC;
CREATE TRIGGER reconcile_mismatch_event AFTER INSERT OR UPDATE ON public.reconcile_mismatches
    FOR EACH ROW EXECUTE FUNCTION public.reconcile_mismatch_event();
ALTER TABLE public.reconcile_mismatches ENABLE ALWAYS TRIGGER reconcile_mismatch_event;

-- Every audit row is a review move (or the reopen): its event names the move and who made
-- it. The review functions update the finding before they write the audit row, so the
-- finding read here is the one the move left.
CREATE FUNCTION public.reconcile_mismatch_audit_event() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f public.reconcile_mismatches%ROWTYPE;
BEGIN
    SELECT * INTO f FROM public.reconcile_mismatches WHERE id = NEW.mismatch_id;
    PERFORM public.payrecon_finding_message(f,
        CASE NEW.action
            WHEN 'acknowledge' THEN 'acknowledged' WHEN 'propose' THEN 'proposed'
            WHEN 'resolve' THEN 'resolved' WHEN 'approve' THEN 'resolved'
            WHEN 'reject' THEN 'rejected' WHEN 'withdraw' THEN 'withdrawn'
            WHEN 'reopen' THEN 'reopened' ELSE NEW.action END,
        pg_catalog.jsonb_build_object('audit_id', NEW.id, 'action', NEW.action, 'actor', NEW.actor,
            'from_status', NEW.from_status, 'to_status', NEW.to_status, 'move_note', NEW.note,
            'at', pg_catalog.to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')));
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION public.reconcile_mismatch_audit_event() FROM PUBLIC;
CREATE TRIGGER reconcile_mismatch_audit_event AFTER INSERT ON public.reconcile_mismatch_audit
    FOR EACH ROW EXECUTE FUNCTION public.reconcile_mismatch_audit_event();
ALTER TABLE public.reconcile_mismatch_audit ENABLE ALWAYS TRIGGER reconcile_mismatch_audit_event;
