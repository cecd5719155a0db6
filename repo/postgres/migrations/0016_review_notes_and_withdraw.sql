-- Two review rules join the one review move (it is the function of migration 0010 with both
-- added; CREATE OR REPLACE keeps its owner and its grants: none):
-- * an adjustment or a write-off must say why: it is a decision about money someone will
--   ask about at the month's close (reconcile_resolutions.needs_note);
-- * a proposer may withdraw their own proposal while it awaits approval (back to
--   ACKNOWLEDGED, as a rejection sends it), through payrecon_review_withdraw.
ALTER TABLE public.reconcile_resolutions ADD COLUMN IF NOT EXISTS needs_note boolean NOT NULL DEFAULT false;
UPDATE public.reconcile_resolutions SET needs_note = true WHERE name IN ('adjusted', 'written_off');

CREATE OR REPLACE FUNCTION public.payrecon_review_move(p_id bigint, p_action text, p_actor text, p_os_user text,
                                            p_resolution text, p_note text, p_seen_version bigint)
    RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f        public.reconcile_mismatches%ROWTYPE;
    allowed  text[];
    v_to     text;
    v_audit  text;
    v_res    text;
    v_money  boolean;
    v_needs_note boolean;
    v_note   text := NULLIF(pg_catalog.btrim(COALESCE(p_note, '')), '');
    v_audit_res text;
    v_audit_id  bigint;
BEGIN
    -- An identity is what the console or the CLI normalised: not empty, one '@' at most
    -- (the CLI may name an operator account), nothing invisible, NFKC-normal. Anything else
    -- is a spelling that could pass for somebody else.
    IF p_actor IS NULL OR p_actor = '' OR pg_catalog.length(p_actor) > 254
       OR p_actor ~ '[[:cntrl:][:space:]\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]'
       OR p_actor IS NOT NFKC NORMALIZED
       OR pg_catalog.length(p_actor) - pg_catalog.length(pg_catalog.replace(p_actor, '@', '')) > 1 THEN
        RAISE EXCEPTION 'mismatch %: the reviewer must be named by a normalised identity', p_id USING ERRCODE = 'PR004';
    END IF;
    SELECT * INTO f FROM public.reconcile_mismatches WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mismatch % not found', p_id USING ERRCODE = 'PR005';
    END IF;

    CASE p_action
        WHEN 'acknowledge' THEN allowed := ARRAY['OPEN'];                 v_to := 'ACKNOWLEDGED'; v_audit := 'acknowledge';
        WHEN 'resolve'     THEN allowed := ARRAY['OPEN', 'ACKNOWLEDGED']; v_to := 'RESOLVED';     v_audit := 'resolve';
        WHEN 'approve'     THEN allowed := ARRAY['PENDING_APPROVAL'];     v_to := 'RESOLVED';     v_audit := 'approve';
        WHEN 'reject'      THEN allowed := ARRAY['PENDING_APPROVAL'];     v_to := 'ACKNOWLEDGED'; v_audit := 'reject';
        WHEN 'withdraw'    THEN allowed := ARRAY['PENDING_APPROVAL'];     v_to := 'ACKNOWLEDGED'; v_audit := 'withdraw';
        ELSE RAISE EXCEPTION 'mismatch %: unknown review action %', p_id, p_action USING ERRCODE = 'PR004';
    END CASE;
    IF NOT f.review_status = ANY (allowed) THEN
        RAISE EXCEPTION 'mismatch % is %: cannot % it (only from %)', p_id, f.review_status, p_action,
            pg_catalog.array_to_string(allowed, ' or ')
            USING ERRCODE = 'PR001', DETAIL = f.review_status;
    END IF;

    IF p_action = 'resolve' THEN
        SELECT name, moves_money, needs_note INTO v_res, v_money, v_needs_note FROM public.reconcile_resolutions WHERE name = p_resolution;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'mismatch %: unknown resolution %', p_id, pg_catalog.quote_literal(COALESCE(p_resolution, ''))
                USING ERRCODE = 'PR004';
        END IF;
        IF v_needs_note AND v_note IS NULL THEN
            RAISE EXCEPTION 'mismatch %: % needs a note saying why', p_id, v_res USING ERRCODE = 'PR004';
        END IF;
        IF v_money THEN
            v_to := 'PENDING_APPROVAL'; v_audit := 'propose';
        END IF;
        v_audit_res := v_res;
    ELSIF p_action IN ('approve', 'reject', 'withdraw') THEN
        v_audit_res := f.resolution; -- what was approved, turned down or taken back
    END IF;
    IF p_action = 'approve' THEN
        -- Both sides are normalised identities; the case-blind comparison also holds a
        -- proposal recorded before identities were normalised ("Alice@Example.com").
        IF pg_catalog.lower(p_actor) = pg_catalog.lower(pg_catalog.btrim(f.proposed_by)) THEN
            RAISE EXCEPTION 'mismatch %: the proposer cannot approve their own resolution (% proposed it; a second person must approve)',
                p_id, f.proposed_by USING ERRCODE = 'PR003';
        END IF;
        -- The checker approves what the maker saw.
        IF f.proposed_version IS DISTINCT FROM f.evidence_version THEN
            RAISE EXCEPTION 'mismatch %: evidence changed, look again (you saw version %, it is now version %)',
                p_id, f.proposed_version, f.evidence_version USING ERRCODE = 'PR002';
        END IF;
    END IF;
    IF p_action = 'withdraw' AND pg_catalog.lower(p_actor) IS DISTINCT FROM pg_catalog.lower(pg_catalog.btrim(f.proposed_by)) THEN
        RAISE EXCEPTION 'mismatch %: only its proposer (%) may withdraw a proposal', p_id, f.proposed_by USING ERRCODE = 'PR004';
    END IF;
    IF p_action = 'reject' AND v_note IS NULL THEN
        RAISE EXCEPTION 'mismatch %: a rejection needs a note saying why', p_id USING ERRCODE = 'PR004';
    END IF;
    IF COALESCE(p_seen_version, 0) <> 0 AND p_seen_version <> f.evidence_version THEN
        RAISE EXCEPTION 'mismatch %: evidence changed, look again (you saw version %, it is now version %)',
            p_id, p_seen_version, f.evidence_version USING ERRCODE = 'PR002';
    END IF;

    UPDATE public.reconcile_mismatches SET
        review_status    = v_to,
        note             = COALESCE(v_note, note),
        resolution       = CASE v_audit WHEN 'resolve' THEN v_res WHEN 'propose' THEN v_res
                               WHEN 'reject' THEN NULL WHEN 'withdraw' THEN NULL ELSE resolution END,
        resolved_by      = CASE v_audit WHEN 'resolve' THEN p_actor WHEN 'approve' THEN proposed_by ELSE resolved_by END,
        resolved_at      = CASE WHEN v_audit IN ('resolve', 'approve') THEN pg_catalog.now() ELSE resolved_at END,
        approved_by      = CASE v_audit WHEN 'approve' THEN p_actor ELSE approved_by END,
        proposed_by      = CASE WHEN v_audit = 'propose' THEN p_actor WHEN v_audit IN ('reject', 'withdraw') THEN NULL ELSE proposed_by END,
        proposed_at      = CASE WHEN v_audit = 'propose' THEN pg_catalog.now() WHEN v_audit IN ('reject', 'withdraw') THEN NULL ELSE proposed_at END,
        proposed_version = CASE WHEN v_audit = 'propose' THEN evidence_version WHEN v_audit IN ('reject', 'withdraw') THEN NULL ELSE proposed_version END
    WHERE id = p_id;

    INSERT INTO public.reconcile_mismatch_audit
        (mismatch_id, action, actor, os_user, from_status, to_status, resolution, evidence_version, note)
    VALUES (p_id, v_audit, p_actor, NULLIF(pg_catalog.btrim(COALESCE(p_os_user, '')), ''), f.review_status, v_to,
            v_audit_res, f.evidence_version, v_note)
    RETURNING id INTO v_audit_id;
    RETURN v_audit_id;
END $$;

CREATE OR REPLACE FUNCTION public.payrecon_review_withdraw(p_id bigint, p_actor text, p_os_user text, p_seen_version bigint, p_note text)
    RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT public.payrecon_review_move(p_id, 'withdraw', p_actor, p_os_user, NULL, p_note, p_seen_version) $$;
REVOKE ALL ON FUNCTION public.payrecon_review_withdraw(bigint, text, text, bigint, text) FROM PUBLIC;
