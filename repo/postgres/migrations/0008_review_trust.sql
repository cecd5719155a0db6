-- Review that holds up in an audit: an append-only audit trail stamped by the database clock,
-- evidence versions that a reviewer names, and maker-checker for resolutions that move money.
-- The least-privilege roles and their grants are applied by `reconciler migrate` after the
-- migrations (repo/roles.go): roles are cluster-wide and need CREATEROLE, which a migration
-- must not assume.

-- A money-moving resolution waits here for a second person.
ALTER TABLE reconcile_mismatches DROP CONSTRAINT reconcile_mismatches_review_status_check;
ALTER TABLE reconcile_mismatches ADD CONSTRAINT reconcile_mismatches_review_status_check
    CHECK (review_status IN ('OPEN', 'ACKNOWLEDGED', 'PENDING_APPROVAL', 'RESOLVED'));

ALTER TABLE reconcile_mismatches
    -- Bumped by the database whenever a sighting brings different figures; a reviewer's
    -- move names the version they read, and a stale one is refused.
    ADD COLUMN evidence_version bigint NOT NULL DEFAULT 1,
    -- The pending proposal (maker): who, when, on which evidence version.
    ADD COLUMN proposed_by      text        NULL,
    ADD COLUMN proposed_at      timestamptz NULL,
    ADD COLUMN proposed_version bigint      NULL,
    -- The checker who approved a money-moving resolution.
    ADD COLUMN approved_by      text        NULL;

ALTER TABLE reconcile_mismatch_audit
    ADD COLUMN os_user          text   NULL, -- the operating-system user beside the named reviewer (CLI)
    ADD COLUMN evidence_version bigint NULL, -- the version the reviewer saw
    ADD COLUMN resolution       text   NULL;

-- Evidence versions and the reopen, decided by the database in the same statement as the
-- sighting: the worker's upsert names evidence columns only (it may not write review
-- columns), and a BEFORE trigger's changes need no column privilege.
CREATE FUNCTION reconcile_mismatch_evidence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (OLD.platform_trade_no, OLD.local_amount_minor, OLD.platform_amount_minor, OLD.local_status, OLD.platform_status)
       IS DISTINCT FROM
       (NEW.platform_trade_no, NEW.local_amount_minor, NEW.platform_amount_minor, NEW.local_status, NEW.platform_status)
    THEN
        NEW.evidence_version := OLD.evidence_version + 1;
        -- Finance resolved what they saw, not whatever came later.
        IF OLD.review_status = 'RESOLVED' THEN
            NEW.review_status := 'OPEN';
        END IF;
    ELSE
        NEW.evidence_version := OLD.evidence_version;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER reconcile_mismatch_evidence BEFORE UPDATE ON reconcile_mismatches
    FOR EACH ROW EXECUTE FUNCTION reconcile_mismatch_evidence();
ALTER TABLE reconcile_mismatches ENABLE ALWAYS TRIGGER reconcile_mismatch_evidence;

-- The reopen's audit row is written by the table owner's function: the worker that caused it
-- has no right to write audit rows of its own. Fired on any update (not OF review_status):
-- the status now changes in the BEFORE trigger, outside the statement's SET list.
DROP TRIGGER reconcile_mismatch_reopened ON reconcile_mismatches;
CREATE OR REPLACE FUNCTION reconcile_mismatch_reopened() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.review_status = 'RESOLVED' AND NEW.review_status = 'OPEN' THEN
        INSERT INTO reconcile_mismatch_audit (mismatch_id, action, actor, from_status, to_status, note, evidence_version)
        VALUES (NEW.id, 'reopen', 'payrecon', 'RESOLVED', 'OPEN',
                format('new evidence: local %s %s, platform %s %s (was local %s %s, platform %s %s)',
                       NEW.local_status, NEW.local_amount_minor, NEW.platform_status, NEW.platform_amount_minor,
                       OLD.local_status, OLD.local_amount_minor, OLD.platform_status, OLD.platform_amount_minor),
                NEW.evidence_version);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER reconcile_mismatch_reopened AFTER UPDATE ON reconcile_mismatches
    FOR EACH ROW EXECUTE FUNCTION reconcile_mismatch_reopened();
ALTER TABLE reconcile_mismatches ENABLE ALWAYS TRIGGER reconcile_mismatch_reopened;

-- The audit trail is append-only, for everybody: the table owner too (triggers bind the
-- owner, privileges do not), and ENABLE ALWAYS keeps them firing under
-- session_replication_role = replica. Only DDL by the owner could remove them, and no
-- runtime role owns the table.
CREATE FUNCTION reconcile_mismatch_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reconcile_mismatch_audit is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'the audit trail records what happened; add a row instead';
END $$;

CREATE TRIGGER reconcile_mismatch_audit_no_change BEFORE UPDATE OR DELETE ON reconcile_mismatch_audit
    FOR EACH ROW EXECUTE FUNCTION reconcile_mismatch_audit_append_only();
CREATE TRIGGER reconcile_mismatch_audit_no_truncate BEFORE TRUNCATE ON reconcile_mismatch_audit
    FOR EACH STATEMENT EXECUTE FUNCTION reconcile_mismatch_audit_append_only();
ALTER TABLE reconcile_mismatch_audit ENABLE ALWAYS TRIGGER reconcile_mismatch_audit_no_change;
ALTER TABLE reconcile_mismatch_audit ENABLE ALWAYS TRIGGER reconcile_mismatch_audit_no_truncate;

-- Times come from the database clock, whatever the client sends.
CREATE FUNCTION reconcile_mismatch_audit_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.created_at := now();
    RETURN NEW;
END $$;
CREATE TRIGGER reconcile_mismatch_audit_stamp BEFORE INSERT ON reconcile_mismatch_audit
    FOR EACH ROW EXECUTE FUNCTION reconcile_mismatch_audit_stamp();
ALTER TABLE reconcile_mismatch_audit ENABLE ALWAYS TRIGGER reconcile_mismatch_audit_stamp;

-- The review queue's filter by status includes the new one.
CREATE INDEX IF NOT EXISTS reconcile_mismatches_pending_approval
    ON reconcile_mismatches (id) WHERE review_status = 'PENDING_APPROVAL';
