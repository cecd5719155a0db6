-- Statements: each day's trade bill from the platform, reconciled against our orders
-- (`reconciler statement`). Three tables: what finance signs off per day and account, the
-- bill lines that were more than a plain match (so a finding points at its line and a re-run
-- of the day repeats nothing), and the PAID orders a bill did not list (held for a day).

-- One row per account and business day: the settlement figures finance signs off. Money is
-- in fen; fees and the net keep the thousandths of a fen WeChat Pay writes (five decimals of
-- a yuan), so they are in milli-fen.
CREATE TABLE statement_days (
    platform         text        NOT NULL CHECK (platform IN ('alipay', 'wechatpay')),
    merchant_id      text        NOT NULL,
    bill_date        date        NOT NULL,
    payments         integer     NOT NULL DEFAULT 0,
    payments_minor   bigint      NOT NULL DEFAULT 0,
    refunds          integer     NOT NULL DEFAULT 0,
    refunds_minor    bigint      NOT NULL DEFAULT 0,
    -- what the merchant actually received and gave back (Alipay 商家实收, WeChat Pay
    -- 应结订单金额 / 退款金额), which differs from the order amounts where the platform paid part
    received_minor   bigint      NOT NULL DEFAULT 0,
    fees_milli_fen   bigint      NOT NULL DEFAULT 0,
    net_milli_fen    bigint      NOT NULL DEFAULT 0,
    lines            integer     NOT NULL DEFAULT 0,
    lines_matched    integer     NOT NULL DEFAULT 0,
    lines_repaired   integer     NOT NULL DEFAULT 0,
    lines_found      integer     NOT NULL DEFAULT 0,
    held             integer     NOT NULL DEFAULT 0,
    -- the raw bill: its SHA-256 and where it is kept (the --file path, or the archive copy of
    -- a download; empty when the download was not kept)
    bill_sha256      text        NOT NULL DEFAULT '',
    bill_location    text        NOT NULL DEFAULT '',
    run_id           bigint      NULL REFERENCES reconcile_runs (id),
    reconciled_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, merchant_id, bill_date)
);

CREATE INDEX statement_days_date ON statement_days (bill_date);

-- Bill lines that needed more than a set-based match: a repair, a finding, or a payment the
-- bill lists on another day than our paid_at (so the held list of that day leaves it out).
-- A re-run of the day finds its lines here and sends none of them through the apply path
-- again: no second transition, no extra sighting.
CREATE TABLE statement_lines (
    platform          text        NOT NULL,
    merchant_id       text        NOT NULL,
    bill_date         date        NOT NULL,
    line_no           integer     NOT NULL,
    kind              text        NOT NULL CHECK (kind IN ('payment', 'refund')),
    out_trade_no      text        NOT NULL,
    platform_trade_no text        NOT NULL DEFAULT '',
    refund_no         text        NOT NULL DEFAULT '',
    amount_minor      bigint      NOT NULL,
    order_id          bigint      NULL REFERENCES payment_orders (id),
    outcome           text        NOT NULL CHECK (outcome IN ('repaired', 'mismatch', 'unchanged', 'other_day')),
    mismatch_kind     text        NULL,
    mismatch_id       bigint      NULL REFERENCES reconcile_mismatches (id),
    run_id            bigint      NULL REFERENCES reconcile_runs (id),
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, merchant_id, bill_date, line_no)
);

CREATE INDEX statement_lines_order ON statement_lines (order_id) WHERE order_id IS NOT NULL;
CREATE INDEX statement_lines_mismatch ON statement_lines (mismatch_id) WHERE mismatch_id IS NOT NULL;

-- PAID orders whose paid_at falls in a bill's day but which that bill does not list. The next
-- day's bill settles each: listed there (the order fell on the other side of midnight) or
-- reported as LOCAL_PAID_PLATFORM_UNPAID.
CREATE TABLE statement_held (
    platform      text        NOT NULL,
    merchant_id   text        NOT NULL,
    bill_date     date        NOT NULL,
    order_id      bigint      NOT NULL REFERENCES payment_orders (id),
    out_trade_no  text        NOT NULL,
    state         text        NOT NULL DEFAULT 'HELD' CHECK (state IN ('HELD', 'LISTED_NEXT_DAY', 'REPORTED')),
    settled_on    date        NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, merchant_id, bill_date, order_id)
);

-- The held list of a day reads an account's PAID orders by paid_at.
CREATE INDEX IF NOT EXISTS payment_orders_paid_by_account
    ON payment_orders (platform, merchant_id, paid_at) WHERE status = 'PAID';
