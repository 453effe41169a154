------------------------------------------------------------------------
-- 0009 task logs: the lines a worker logs while it runs a task, kept
-- beside the execution history rather than in it, and an index for the
-- overview's "ended per minute".
------------------------------------------------------------------------

------------------------------------------------------------------------
-- TaskLogs: range-partitioned monthly on "createdAt" like the other
-- history tables, so retention drops a partition instead of DELETEing.
-- The partition manager keeps it (engine/partitions.c); the current month
-- is seeded below so a fresh database never writes to DEFAULT.
--
-- "seq" numbers one task's lines 1, 2, 3... and is allocated under a
-- per-task advisory lock by the writer (store/task_logs_repo.c), which
-- also enforces the per-task cap; the primary key must include
-- "createdAt" and so cannot by itself enforce ("taskId","seq")
-- uniqueness -- the lock is the guarantee, as for "WorkflowEvents".  The
-- primary key's btree ("taskId","seq","createdAt") is the index behind
-- reading a task's lines in order and finding its last "seq".
-- "createdTime" is the worker's own clock (epoch ms, Conductor's field);
-- "createdAt" is the database's.
------------------------------------------------------------------------

CREATE TABLE "TaskLogs" (
    "namespaceId" UUID        NOT NULL,
    "workflowId"  UUID        NOT NULL,
    "taskId"      UUID        NOT NULL,
    "seq"         INTEGER     NOT NULL CHECK ("seq" >= 1),
    "log"         TEXT        NOT NULL,
    "createdTime" BIGINT      NOT NULL,
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("taskId", "seq", "createdAt")
) PARTITION BY RANGE ("createdAt");

CREATE TABLE "TaskLogs_default" PARTITION OF "TaskLogs" DEFAULT;

-- Logs kept before this migration were TASK_LOG events in the workflow
-- history: copy them, creating the months they span first so that none
-- lands in DEFAULT (the history's own events stay as they are).
DO $$
DECLARE
    "first" timestamptz;
    "month" timestamptz := date_trunc('month', now(), 'UTC');
    "m"     timestamptz;
BEGIN
    SELECT date_trunc('month', min(v."at"), 'UTC') INTO "first"
      FROM "WorkflowEvents" v WHERE v."type" = 'TASK_LOG' AND v."taskId" IS NOT NULL;
    "m" := least(coalesce("first", "month"), "month");
    WHILE "m" <= "month" LOOP
        PERFORM "nf_create_range_partition"('TaskLogs', "nf_partition_name"('TaskLogs', "m", 'month'),
                                            "m", date_add("m", interval '1 month', 'UTC'));
        "m" := date_add("m", interval '1 month', 'UTC');
    END LOOP;
    INSERT INTO "TaskLogs" ("namespaceId", "workflowId", "taskId", "seq", "log",
                            "createdTime", "createdAt")
    SELECT v."namespaceId", v."workflowId", v."taskId",
           row_number() OVER (PARTITION BY v."taskId" ORDER BY v."at", v."seq"),
           coalesce(v."data" ->> 'log', ''),
           coalesce(CASE WHEN jsonb_typeof(v."data" -> 'createdTime') = 'number'
                         THEN (v."data" ->> 'createdTime')::numeric::bigint END,
                    (extract(epoch FROM v."at") * 1000)::bigint),
           v."at"
      FROM "WorkflowEvents" v
     WHERE v."type" = 'TASK_LOG' AND v."taskId" IS NOT NULL
       AND v."at" < date_add("month", interval '1 month', 'UTC');
END;
$$;

------------------------------------------------------------------------
-- The overview counts executions completed and failed per minute by when
-- they ENDED: the executions that ended in the window, found through
-- their "endedAt" (partial: running executions are not in it).
------------------------------------------------------------------------

CREATE INDEX "WorkflowExecutions_ended_idx"
    ON "WorkflowExecutions" ("namespaceId", "endedAt") WHERE "endedAt" IS NOT NULL;
