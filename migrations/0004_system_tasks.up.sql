-- The system-task runner's dequeue path.
--
-- The runner leases rows by "taskType" (HTTP, INLINE, JSON_JQ_TRANSFORM,
-- ...) across every queue, without joining "TaskExecutions": that is why
-- "taskType" sits on the queue row. "TaskQueues_dequeue_idx" leads with
-- "queueName" and cannot answer "the oldest available INLINE row"; this
-- index can. It is partial on available rows of system types only, so
-- worker tasks (SIMPLE, the bulk of the table) and leased or deferred rows
-- never enter it. The runner's statement repeats the predicate
-- ("taskType" <> 'SIMPLE') so the planner can prove the index applies.
CREATE INDEX "TaskQueues_system_idx"
    ON "TaskQueues" ("taskType", "priority" DESC, "id")
    WHERE "leaseExpiresAt" IS NULL AND "taskType" <> 'SIMPLE';
