------------------------------------------------------------------------
-- 0013 lease candidates, keyed: the candidates of a lease are read in the
-- dequeue index's order, whatever the size of the queue the function's
-- plan was made on.
--
-- A PL/pgSQL function keeps the plan of its query for the session, and a
-- server's pooled connections make theirs early, usually while the queues
-- are drained (the pool runs a poll's statements once before it serves).
-- Made on an empty queue, the cheapest plan of the candidates' query is a
-- scan of the whole queue partition and a sort, and a generic plan keeps
-- it until an analyse of the partition invalidates it: every lease then
-- read and sorted every row of its queue (16,000 rows for 3 tasks in the
-- test plans/a_workers_lease_and_results_read_only_their_queue_rows).
-- With whole scans and sorts off, the one plan left is the ordered scan
-- of "TaskQueues_dequeue_idx" (a worker's queue) or of
-- "TaskQueues_system_idx" (a system task type), which stops at the
-- LIMIT.  The settings hold only while the function runs.
------------------------------------------------------------------------
ALTER FUNCTION "nf_lease_candidates"(TEXT, TEXT, INTEGER)
    SET "enable_seqscan" = off;
ALTER FUNCTION "nf_lease_candidates"(TEXT, TEXT, INTEGER)
    SET "enable_sort" = off;
