-- Indexes for the finance review workflow (`reconciler mismatches`) and the period report
-- (`reconciler report`). No column changes: the audit trail holds who acknowledged what.

-- `mismatches show` reads one finding's audit trail in order.
CREATE INDEX IF NOT EXISTS reconcile_mismatch_audit_mismatch
    ON reconcile_mismatch_audit (mismatch_id, id);

-- The period filters (`list --since/--until`, `report --from/--to`) select findings first seen
-- or last seen in a half-open range.
CREATE INDEX IF NOT EXISTS reconcile_mismatches_first_seen
    ON reconcile_mismatches (first_seen_at, id);
CREATE INDEX IF NOT EXISTS reconcile_mismatches_last_seen
    ON reconcile_mismatches (last_seen_at, id);

-- The report lists the runs that started in the period.
CREATE INDEX IF NOT EXISTS reconcile_runs_started
    ON reconcile_runs (started_at, id);

