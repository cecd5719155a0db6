-- payrecon schema: the contract in README.md ("Schema") plus the columns the worker needs.
-- Every column outside the contract's minimal insert has a default, so an order inserted
-- with only platform, merchant_id, out_trade_no, amount_minor, status and created_at is valid
-- and due for the next run.

CREATE TABLE payment_orders (
    id                bigserial PRIMARY KEY,
    platform          text        NOT NULL CHECK (platform IN ('alipay', 'wechatpay')),
    merchant_id       text        NOT NULL,
    out_trade_no      text        NOT NULL,
    amount_minor      bigint      NOT NULL CHECK (amount_minor > 0),
    currency          text        NOT NULL DEFAULT 'CNY',
    status            text        NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'PAID', 'CLOSED', 'FAILED', 'REFUNDED')),
    platform_trade_no text        NULL,
    paid_amount_minor bigint      NULL,
    paid_at           timestamptz NULL,
    expires_at        timestamptz NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    version           bigint      NOT NULL DEFAULT 0,
    -- Re-check schedule: NULL means due now. check_count is the number of consecutive checks
    -- that left the order pending (the backoff exponent).
    next_check_at     timestamptz NULL,
    check_count       integer     NOT NULL DEFAULT 0,
    last_checked_at   timestamptz NULL,
    -- Lease taken by a pass (FOR UPDATE SKIP LOCKED claim) so overlapping runs never query
    -- the same order at once. Expires by itself when its holder dies.
    lease_until       timestamptz NULL,
    lease_owner       text        NULL,
    CONSTRAINT payment_orders_identity UNIQUE (platform, merchant_id, out_trade_no)
);

CREATE UNIQUE INDEX payment_orders_platform_trade_no
    ON payment_orders (platform, platform_trade_no) WHERE platform_trade_no IS NOT NULL;

-- The run's claiming query scans pending orders by next check; a partial index keeps it
-- proportional to the pending set, not to the whole table.
CREATE INDEX payment_orders_due ON payment_orders (created_at, id) WHERE status = 'PENDING';
CREATE INDEX payment_orders_created ON payment_orders (created_at, id);
CREATE INDEX payment_orders_out_trade_no ON payment_orders (platform, out_trade_no);

CREATE TABLE payment_events (
    id                bigserial PRIMARY KEY,
    order_id          bigint      NOT NULL REFERENCES payment_orders (id),
    platform          text        NOT NULL,
    platform_trade_no text        NULL,
    event_type        text        NOT NULL CHECK (event_type IN ('PAID', 'CLOSED', 'FAILED', 'REFUNDED')),
    source            text        NOT NULL CHECK (source IN ('notify', 'reconcile', 'backfill', 'statement')),
    amount_minor      bigint      NULL,
    raw_digest        text        NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_events_once UNIQUE (order_id, event_type)
);

CREATE TABLE fulfillment_outbox (
    id            bigserial PRIMARY KEY,
    order_id      bigint      NOT NULL REFERENCES payment_orders (id),
    kind          text        NOT NULL,
    payload       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    dispatched_at timestamptz NULL,
    CONSTRAINT fulfillment_outbox_once UNIQUE (order_id, kind)
);

CREATE INDEX fulfillment_outbox_undispatched ON fulfillment_outbox (id) WHERE dispatched_at IS NULL;

CREATE TABLE reconcile_mismatches (
    id                    bigserial PRIMARY KEY,
    order_id              bigint      NULL REFERENCES payment_orders (id),
    platform              text        NOT NULL,
    merchant_id           text        NOT NULL DEFAULT '',
    out_trade_no          text        NOT NULL,
    platform_trade_no     text        NULL,
    kind                  text        NOT NULL CHECK (kind IN ('AMOUNT_MISMATCH', 'CURRENCY_MISMATCH',
                              'MERCHANT_MISMATCH', 'UNKNOWN_ORDER', 'PAID_AFTER_CLOSE', 'DUPLICATE_PAYMENT',
                              'LOCAL_PAID_PLATFORM_UNPAID', 'REFUNDED_AT_PLATFORM')),
    local_amount_minor    bigint      NULL,
    platform_amount_minor bigint      NULL,
    local_status          text        NULL,
    platform_status       text        NULL,
    detail                jsonb       NOT NULL DEFAULT '{}'::jsonb,
    first_seen_at         timestamptz NOT NULL DEFAULT now(),
    last_seen_at          timestamptz NOT NULL DEFAULT now(),
    seen_count            integer     NOT NULL DEFAULT 1,
    review_status         text        NOT NULL DEFAULT 'OPEN'
                          CHECK (review_status IN ('OPEN', 'ACKNOWLEDGED', 'RESOLVED')),
    resolution            text        NULL,
    note                  text        NULL,
    resolved_by           text        NULL,
    resolved_at           timestamptz NULL,
    CONSTRAINT reconcile_mismatches_finding UNIQUE (platform, merchant_id, out_trade_no, kind)
);

CREATE INDEX reconcile_mismatches_review ON reconcile_mismatches (review_status, last_seen_at);

-- Every review action on a finding, for the audit trail finance needs.
CREATE TABLE reconcile_mismatch_audit (
    id          bigserial PRIMARY KEY,
    mismatch_id bigint      NOT NULL REFERENCES reconcile_mismatches (id),
    action      text        NOT NULL,
    actor       text        NOT NULL DEFAULT '',
    from_status text        NULL,
    to_status   text        NULL,
    note        text        NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE reconcile_runs (
    id                bigserial PRIMARY KEY,
    mode              text        NOT NULL CHECK (mode IN ('once', 'scheduled', 'backfill', 'statement')),
    started_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz NULL,
    status            text        NOT NULL DEFAULT 'running'
                      CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted')),
    window_from       timestamptz NULL,
    window_to         timestamptz NULL,
    shard             text        NOT NULL DEFAULT '0/1',
    cursor            text        NULL,
    dry_run           boolean     NOT NULL DEFAULT false,
    error             text        NULL,
    scanned           integer     NOT NULL DEFAULT 0,
    repaired          integer     NOT NULL DEFAULT 0,
    closed            integer     NOT NULL DEFAULT 0,
    unchanged         integer     NOT NULL DEFAULT 0,
    still_pending     integer     NOT NULL DEFAULT 0,
    mismatches        integer     NOT NULL DEFAULT 0,
    claimed_elsewhere integer     NOT NULL DEFAULT 0,
    errors            integer     NOT NULL DEFAULT 0
);
