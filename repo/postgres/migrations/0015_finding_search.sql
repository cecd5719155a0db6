-- The review console's search box, `mismatches list --q` and `mismatches show NUMBER` find a
-- finding by the start of one of its numbers: our out_trade_no, the platform's trade number
-- or the refund's out_refund_no. A prefix LIKE can walk a btree only when the index compares
-- bytes, whatever the database's collation: text_pattern_ops.
CREATE INDEX IF NOT EXISTS reconcile_mismatches_out_trade_no_prefix
    ON public.reconcile_mismatches (out_trade_no text_pattern_ops);
CREATE INDEX IF NOT EXISTS reconcile_mismatches_platform_trade_no_prefix
    ON public.reconcile_mismatches (platform_trade_no text_pattern_ops);
CREATE INDEX IF NOT EXISTS reconcile_mismatches_out_refund_no_prefix
    ON public.reconcile_mismatches (out_refund_no text_pattern_ops) WHERE out_refund_no <> '';
