-- The review's trust held by the database itself. Until now the reviewer role wrote review
-- columns and audit rows directly, so anybody holding its credential could resolve a finding
-- without an audit row, approve their own proposal, or insert a fake approval. From here on a
-- review move is one call of a function owned by the schema owner (SECURITY DEFINER) that
-- checks the rules and writes the audit row in the same statement; `reconciler migrate`
-- takes the reviewer's direct write grants away (repo/roles.go) and lets it only EXECUTE
-- these functions.
--
-- Every SECURITY DEFINER function pins its search_path to pg_catalog, pg_temp and names its
-- tables schema-qualified: a caller's TEMP table or a function planted in a writable schema
-- must never be what the owner's code reads, writes or calls.

-- Who acted in the database: the session's login, whatever role it switched to.
ALTER TABLE public.reconcile_mismatch_audit ADD COLUMN db_user text NULL;

-- The resolutions and which of them move money (maker-checker): the database's copy of
-- reconcile.Resolutions, held equal to it by a test.
CREATE TABLE public.reconcile_resolutions (
    name        text PRIMARY KEY,
    moves_money boolean NOT NULL
);
INSERT INTO public.reconcile_resolutions (name, moves_money) VALUES
    ('refunded', true), ('adjusted', true), ('written_off', true),
    ('accepted', false), ('false_positive', false);

-- The reopen's audit row, written by the owner's function although the worker caused it.
-- Pinned search_path and a qualified table: previously `SET search_path FROM CURRENT` let a
-- worker's TEMP table named reconcile_mismatch_audit take the row, or a planted
-- public.format() run as the owner.
CREATE OR REPLACE FUNCTION public.reconcile_mismatch_reopened() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.review_status = 'RESOLVED' AND NEW.review_status = 'OPEN' THEN
        INSERT INTO public.reconcile_mismatch_audit (mismatch_id, action, actor, from_status, to_status, note, evidence_version)
        VALUES (NEW.id, 'reopen', 'payrecon', 'RESOLVED', 'OPEN',
                pg_catalog.format('new evidence: local %s %s, platform %s %s (was local %s %s, platform %s %s)',
                       NEW.local_status, NEW.local_amount_minor, NEW.platform_status, NEW.platform_amount_minor,
                       OLD.local_status, OLD.local_amount_minor, OLD.platform_status, OLD.platform_amount_minor),
                NEW.evidence_version);
    END IF;
    RETURN NEW;
END $$;

-- The other trigger functions run as whoever fires them, but pin their path all the same:
-- nothing they call should resolve through a caller's schema.
ALTER FUNCTION public.reconcile_mismatch_evidence() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION public.reconcile_mismatch_audit_append_only() SET search_path = pg_catalog, pg_temp;

-- Times and the database login come from the database, whatever the client sends.
CREATE OR REPLACE FUNCTION public.reconcile_mismatch_audit_stamp() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.created_at := pg_catalog.now();
    NEW.db_user := pg_catalog.session_user();
    RETURN NEW;
END $$;

-- payrecon_review_move is the one review move: the state machine, the evidence version,
-- maker-checker and the audit row, under the finding's row lock. It is not executable by
-- any runtime role; the per-action functions below are. Refusals carry SQLSTATEs of class
-- PR that repo maps to reconcile's errors:
--   PR001 the status does not allow the move    PR002 the evidence changed
--   PR003 the proposer approving                 PR004 the request is incomplete
--   PR005 no such finding
CREATE FUNCTION public.payrecon_review_move(p_id bigint, p_action text, p_actor text, p_os_user text,
                                            p_resolution text, p_note text, p_seen_version bigint)
    RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f        public.reconcile_mismatches%ROWTYPE;
    allowed  text[];
    v_to     text;
    v_audit  text;
    v_res    text;
    v_money  boolean;
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
        ELSE RAISE EXCEPTION 'mismatch %: unknown review action %', p_id, p_action USING ERRCODE = 'PR004';
    END CASE;
    IF NOT f.review_status = ANY (allowed) THEN
        RAISE EXCEPTION 'mismatch % is %: cannot % it (only from %)', p_id, f.review_status, p_action,
            pg_catalog.array_to_string(allowed, ' or ')
            USING ERRCODE = 'PR001', DETAIL = f.review_status;
    END IF;

    IF p_action = 'resolve' THEN
        SELECT name, moves_money INTO v_res, v_money FROM public.reconcile_resolutions WHERE name = p_resolution;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'mismatch %: unknown resolution %', p_id, pg_catalog.quote_literal(COALESCE(p_resolution, ''))
                USING ERRCODE = 'PR004';
        END IF;
        IF v_money THEN
            v_to := 'PENDING_APPROVAL'; v_audit := 'propose';
        END IF;
        v_audit_res := v_res;
    ELSIF p_action IN ('approve', 'reject') THEN
        v_audit_res := f.resolution; -- what was approved or turned down
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
                               WHEN 'reject' THEN NULL ELSE resolution END,
        resolved_by      = CASE v_audit WHEN 'resolve' THEN p_actor WHEN 'approve' THEN proposed_by ELSE resolved_by END,
        resolved_at      = CASE WHEN v_audit IN ('resolve', 'approve') THEN pg_catalog.now() ELSE resolved_at END,
        approved_by      = CASE v_audit WHEN 'approve' THEN p_actor ELSE approved_by END,
        proposed_by      = CASE v_audit WHEN 'propose' THEN p_actor WHEN 'reject' THEN NULL ELSE proposed_by END,
        proposed_at      = CASE v_audit WHEN 'propose' THEN pg_catalog.now() WHEN 'reject' THEN NULL ELSE proposed_at END,
        proposed_version = CASE v_audit WHEN 'propose' THEN evidence_version WHEN 'reject' THEN NULL ELSE proposed_version END
    WHERE id = p_id;

    INSERT INTO public.reconcile_mismatch_audit
        (mismatch_id, action, actor, os_user, from_status, to_status, resolution, evidence_version, note)
    VALUES (p_id, v_audit, p_actor, NULLIF(pg_catalog.btrim(COALESCE(p_os_user, '')), ''), f.review_status, v_to,
            v_audit_res, f.evidence_version, v_note)
    RETURNING id INTO v_audit_id;
    RETURN v_audit_id;
END $$;

-- One function per move, so a grant names exactly the moves a role may make.
CREATE FUNCTION public.payrecon_review_acknowledge(p_id bigint, p_actor text, p_os_user text, p_seen_version bigint, p_note text)
    RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT public.payrecon_review_move(p_id, 'acknowledge', p_actor, p_os_user, NULL, p_note, p_seen_version) $$;

-- Resolves at once (accepted, false_positive) or proposes (a resolution that moves money).
CREATE FUNCTION public.payrecon_review_resolve(p_id bigint, p_actor text, p_os_user text, p_seen_version bigint, p_resolution text, p_note text)
    RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT public.payrecon_review_move(p_id, 'resolve', p_actor, p_os_user, p_resolution, p_note, p_seen_version) $$;

CREATE FUNCTION public.payrecon_review_approve(p_id bigint, p_actor text, p_os_user text, p_seen_version bigint, p_note text)
    RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT public.payrecon_review_move(p_id, 'approve', p_actor, p_os_user, NULL, p_note, p_seen_version) $$;

CREATE FUNCTION public.payrecon_review_reject(p_id bigint, p_actor text, p_os_user text, p_seen_version bigint, p_note text)
    RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT public.payrecon_review_move(p_id, 'reject', p_actor, p_os_user, NULL, p_note, p_seen_version) $$;

-- A new function is executable by PUBLIC unless revoked: nobody but the roles migrate
-- grants may call these, and nobody at all calls the inner move directly.
REVOKE ALL ON FUNCTION public.payrecon_review_move(bigint, text, text, text, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.payrecon_review_acknowledge(bigint, text, text, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.payrecon_review_resolve(bigint, text, text, bigint, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.payrecon_review_approve(bigint, text, text, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.payrecon_review_reject(bigint, text, text, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.reconcile_mismatch_reopened() FROM PUBLIC;
