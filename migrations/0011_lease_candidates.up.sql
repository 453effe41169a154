------------------------------------------------------------------------
-- 0011 lease candidates: the row locks of a lease taken in a function of
-- their own, outside the statement that writes the lease.
--
-- PostgreSQL 18 up to 18.4 can crash a backend (SIGSEGV in run-time
-- partition pruning) when one statement holds both a row-locking node
-- (SELECT ... FOR UPDATE) and an Append that prunes partitions at run
-- time, if the row lock meets a row that a concurrent transaction updated
-- and committed after the statement's snapshot.  The lock's recheck
-- (EvalPlanQual) builds its own executor state for every subplan of the
-- statement and re-initialises the run-time pruning of the parent's
-- Appends inside it; when the locking node runs out of rows it frees that
-- state, and the parent's next pruning (here: "WorkflowExecutions" joined
-- on the execution window, in the events part of the lease) reads freed
-- memory.  Fixed upstream by commit 1b5dd3a (back-patched to 18).
--
-- Every lease is exposed: sixteen workers polling one queue lock the rows
-- that another lease committed a moment earlier all the time.  Here the
-- candidates are chosen and locked by a query of their own (a PL/pgSQL
-- function has its own executor state, with no partition pruning to
-- disturb), and the lease statement reads them as a CTE: the same rows in
-- the same order, FOR UPDATE SKIP LOCKED, one statement per lease.
--
-- With "queue" set: available SIMPLE rows of that queue (the worker's
-- poll).  With "queue" NULL: available rows of the system task type
-- "systemType" across every queue, over "TaskQueues_system_idx" (whose
-- predicate the WHERE repeats).
------------------------------------------------------------------------
CREATE FUNCTION "nf_lease_candidates"("queue" TEXT, "systemType" TEXT,
                                      "n" INTEGER)
RETURNS TABLE ("queueName" TEXT, "id" BIGINT, "priority" INTEGER,
               "semaphore" TEXT)
LANGUAGE plpgsql
AS $$
BEGIN
    IF "queue" IS NOT NULL THEN
        RETURN QUERY
        SELECT q."queueName", q."id", q."priority", q."semaphore"
          FROM "TaskQueues" q
         WHERE q."queueName" = "queue" AND q."leaseExpiresAt" IS NULL
           AND q."taskType" = 'SIMPLE'
         ORDER BY q."priority" DESC, q."id"
         LIMIT "n" FOR UPDATE SKIP LOCKED;
    ELSE
        RETURN QUERY
        SELECT q."queueName", q."id", q."priority", q."semaphore"
          FROM "TaskQueues" q
         WHERE q."taskType" = "systemType" AND q."taskType" <> 'SIMPLE'
           AND q."leaseExpiresAt" IS NULL
         ORDER BY q."priority" DESC, q."id"
         LIMIT "n" FOR UPDATE SKIP LOCKED;
    END IF;
END;
$$;
