-- Crash recovery: a run records the shard lock it holds and the database session holding it
-- (pid and that backend's start time, so a reused pid is not mistaken for the same session).
-- The next pass that takes the same lock knows the earlier run's process is dead when that
-- session is gone: it marks the run interrupted and frees its leases at once instead of
-- waiting for them to run out.
ALTER TABLE reconcile_runs
    ADD COLUMN IF NOT EXISTS lock_name          text        NULL,
    ADD COLUMN IF NOT EXISTS lock_pid           integer     NULL,
    ADD COLUMN IF NOT EXISTS lock_backend_start timestamptz NULL;

CREATE INDEX IF NOT EXISTS reconcile_runs_running_lock
    ON reconcile_runs (lock_name) WHERE status = 'running';
