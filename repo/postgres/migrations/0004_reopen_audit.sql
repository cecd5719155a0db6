-- A RESOLVED finding that the apply path reopens (its evidence changed) leaves an audit row,
-- so the trail finance reads shows why it is back. The reopen happens inside the upsert of
-- the apply path; a trigger records it in the same statement.
CREATE FUNCTION reconcile_mismatch_reopened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.review_status = 'RESOLVED' AND NEW.review_status = 'OPEN' THEN
        INSERT INTO reconcile_mismatch_audit (mismatch_id, action, actor, from_status, to_status, note)
        VALUES (NEW.id, 'reopen', 'payrecon', 'RESOLVED', 'OPEN',
                format('new evidence: local %s %s, platform %s %s (was local %s %s, platform %s %s)',
                       NEW.local_status, NEW.local_amount_minor, NEW.platform_status, NEW.platform_amount_minor,
                       OLD.local_status, OLD.local_amount_minor, OLD.platform_status, OLD.platform_amount_minor));
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER reconcile_mismatch_reopened AFTER UPDATE OF review_status ON reconcile_mismatches
    FOR EACH ROW EXECUTE FUNCTION reconcile_mismatch_reopened();
