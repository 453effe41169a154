------------------------------------------------------------------------
-- 0015 queue-name statistics: a "TaskQueues" partition that has never
-- been analysed with rows in it looks, to the planner, as if any one
-- queue name held 1/200 of its rows.
--
-- Without column statistics a generic plan's `"queueName" = $1` selects
-- 1/200 of the partition, so a scan of the whole queue in the order of
-- ("queueName", ...) looks cheaper than finding a batch's rows by their
-- keys.  A pooled connection makes its plans for leases and results when
-- it first runs them, or again after any table they touch is vacuumed;
-- made on a queue of 3,000 tasks no analyse had seen, a batch of 100
-- results read the whole queue for each task (1,007,256 queue rows on
-- 16,000), and such a plan is kept until the partition is analysed.
--
-- Each partition starts with the statistic an analyse gives a partition
-- that holds one queue (n_distinct 1): any one queue name selects the
-- whole partition, and a batch's keys are always the cheaper way in.  An
-- analyse of an empty partition keeps it; an analyse with rows replaces
-- it with what it measured.
------------------------------------------------------------------------
DO $$
BEGIN
    FOR "n" IN 0..7 LOOP
        PERFORM pg_restore_attribute_stats(
            'schemaname', current_schema()::text,
            'relname', format('TaskQueues_p%s', "n"),
            'attname', 'queueName',
            'inherited', false,
            'null_frac', 0::real,
            'avg_width', 24,
            'n_distinct', 1::real);
    END LOOP;
END;
$$;
