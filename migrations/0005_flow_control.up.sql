-- Flow control: semaphores that gate, rate limits, concurrentExecLimit.
--
-- A workflow task may name a semaphore of its own, overriding its task
-- definition's. The decider writes that override on the queue row when it
-- schedules the task; a poll gates rows by coalesce("semaphore", the
-- definition's), and a lease that acquires a permit writes the semaphore it
-- holds here, so a result, heartbeat, release or timeout finds the holder
-- row by its primary key ("namespaceId", "name", "taskId"). Nullable and
-- without a default: adding it rewrites nothing, and a row without one
-- costs nothing.
--
-- "Semaphores" and the "semaphore" column of "TaskDefinitions" keep their
-- comments' wording from 0002, which no longer holds: a semaphore nobody
-- configured now gates at the server's --semaphore-default-permits.
ALTER TABLE "TaskQueues" ADD COLUMN "semaphore" TEXT;

COMMENT ON COLUMN "TaskQueues"."semaphore" IS
    'The semaphore gating this row: the workflow task''s override until leased, the one held once leased (NULL: none).';
COMMENT ON TABLE "Semaphores" IS
    'Configured semaphores. A semaphore named by a task but not configured here gates at --semaphore-default-permits.';
