-- Engine tables. Every identifier is double-quoted: Postgres folds unquoted
-- identifiers to lowercase, and these tables are PascalCase with camelCase
-- columns.
--
-- uuidv7() (Postgres 18) keys keep inserts at the right edge of the btree;
-- random v4 keys would scatter them and split pages at this write rate.
--
-- Foreign keys to "Namespaces" are declared only on low-rate tables
-- (definitions, semaphore configuration). On a hot path every insert would
-- take FOR KEY SHARE on the same few "Namespaces" rows, and concurrent
-- lockers of one row churn MultiXacts; partitioned and queue tables carry a
-- plain "namespaceId".

------------------------------------------------------------------------
-- Namespaces
------------------------------------------------------------------------

CREATE TABLE "Namespaces" (
    "id"        UUID        NOT NULL DEFAULT uuidv7() PRIMARY KEY,
    "name"      TEXT        NOT NULL UNIQUE CHECK ("name" <> ''),
    "createdAt" TIMESTAMPTZ NOT NULL DEFAULT now()
);

INSERT INTO "Namespaces" ("name") VALUES ('default');

------------------------------------------------------------------------
-- TaskDefinitions: Conductor TaskDef as real columns. Writers name their
-- columns explicitly; a field without a column would be dropped on write.
------------------------------------------------------------------------

CREATE TABLE "TaskDefinitions" (
    "id"                          UUID        NOT NULL DEFAULT uuidv7() PRIMARY KEY,
    "namespaceId"                 UUID        NOT NULL REFERENCES "Namespaces" ("id"),
    "name"                        TEXT        NOT NULL CHECK ("name" <> ''),
    "description"                 TEXT,
    "retryCount"                  INTEGER     NOT NULL DEFAULT 3 CHECK ("retryCount" >= 0),
    "retryLogic"                  TEXT        NOT NULL DEFAULT 'FIXED'
        CHECK ("retryLogic" IN ('FIXED', 'EXPONENTIAL_BACKOFF', 'LINEAR_BACKOFF')),
    "retryDelaySeconds"           INTEGER     NOT NULL DEFAULT 60 CHECK ("retryDelaySeconds" >= 0),
    "backoffScaleFactor"          INTEGER     NOT NULL DEFAULT 1 CHECK ("backoffScaleFactor" >= 1),
    -- 0 = no cap.
    "maxRetryDelaySeconds"        INTEGER     NOT NULL DEFAULT 0 CHECK ("maxRetryDelaySeconds" >= 0),
    "backoffJitterMs"             INTEGER     NOT NULL DEFAULT 0 CHECK ("backoffJitterMs" >= 0),
    -- Conductor declares the three *TimeoutSeconds budgets as long; 0 = none.
    "timeoutSeconds"              BIGINT      NOT NULL DEFAULT 0 CHECK ("timeoutSeconds" >= 0),
    "timeoutPolicy"               TEXT        NOT NULL DEFAULT 'TIME_OUT_WF'
        CHECK ("timeoutPolicy" IN ('RETRY', 'TIME_OUT_WF', 'ALERT_ONLY')),
    "responseTimeoutSeconds"      BIGINT      NOT NULL DEFAULT 3600 CHECK ("responseTimeoutSeconds" >= 1),
    -- NULL = never times out waiting for a poll.
    "pollTimeoutSeconds"          INTEGER     CHECK ("pollTimeoutSeconds" >= 0),
    "totalTimeoutSeconds"         BIGINT      NOT NULL DEFAULT 0 CHECK ("totalTimeoutSeconds" >= 0),
    -- NULL = unlimited.
    "concurrentExecLimit"         INTEGER     CHECK ("concurrentExecLimit" >= 0),
    "rateLimitPerFrequency"       INTEGER     CHECK ("rateLimitPerFrequency" >= 0),
    "rateLimitFrequencyInSeconds" INTEGER     CHECK ("rateLimitFrequencyInSeconds" >= 0),
    -- Documentation only (Conductor does not enforce them).
    "inputKeys"                   TEXT[]      NOT NULL DEFAULT '{}',
    "outputKeys"                  TEXT[]      NOT NULL DEFAULT '{}',
    -- Default inputs, filling absent/null keys.
    "inputTemplate"               JSONB       NOT NULL DEFAULT '{}',
    "ownerEmail"                  TEXT,
    "secretOutputFields"          TEXT[]      NOT NULL DEFAULT '{}',
    "isolationGroupId"            TEXT,
    "executionNameSpace"          TEXT,
    -- Semaphore name. Deliberately no foreign key: an unconfigured
    -- semaphore does not gate, it is not an error.
    "semaphore"                   TEXT,
    -- {key, ttlInSecond}; NULL = not cached.
    "cacheConfig"                 JSONB,
    "inputSchema"                 JSONB,
    "outputSchema"                JSONB,
    "enforceSchema"               BOOLEAN     NOT NULL DEFAULT false,
    "createdAt"                   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "updatedAt"                   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "createdBy"                   TEXT,
    "updatedBy"                   TEXT,
    CONSTRAINT "TaskDefinitions_namespace_name_key" UNIQUE ("namespaceId", "name"),
    -- Conductor's TaskTimeoutConstraint.
    CONSTRAINT "TaskDefinitions_response_timeout_check"
        CHECK ("timeoutSeconds" = 0 OR "responseTimeoutSeconds" <= "timeoutSeconds")
);

------------------------------------------------------------------------
-- WorkflowDefinitions: the full WorkflowDef as jsonb, keyed by
-- (namespace, name, version). The primary key's btree also answers
-- "latest version of a name" (ORDER BY "version" DESC LIMIT 1 is a
-- backward scan of it) and the by-name listing, so no second index.
------------------------------------------------------------------------

CREATE TABLE "WorkflowDefinitions" (
    "namespaceId" UUID        NOT NULL REFERENCES "Namespaces" ("id"),
    "name"        TEXT        NOT NULL CHECK ("name" <> ''),
    "version"     INTEGER     NOT NULL DEFAULT 1 CHECK ("version" >= 1),
    "description" TEXT,
    "definition"  JSONB       NOT NULL CHECK (jsonb_typeof("definition") = 'object'),
    "ownerEmail"  TEXT,
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "updatedAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "createdBy"   TEXT,
    "updatedBy"   TEXT,
    PRIMARY KEY ("namespaceId", "name", "version")
);

------------------------------------------------------------------------
-- WorkflowExecutions: range-partitioned monthly on "startedAt". Old
-- executions are dropped a partition at a time instead of DELETEd and
-- vacuumed. A primary key on a partitioned table must include the
-- partition key, hence ("id","startedAt"); a lookup that knows "startedAt"
-- should pass it so the planner prunes to one partition.
------------------------------------------------------------------------

CREATE TABLE "WorkflowExecutions" (
    "id"                    UUID        NOT NULL DEFAULT uuidv7(),
    "namespaceId"           UUID        NOT NULL,
    "defName"               TEXT        NOT NULL,
    "defVersion"            INTEGER     NOT NULL,
    -- Snapshot of the definition when it is not a registered one (inline /
    -- dynamic start); NULL = use "WorkflowDefinitions"(defName, defVersion).
    "definition"            JSONB,
    "status"                TEXT        NOT NULL DEFAULT 'RUNNING'
        CHECK ("status" IN ('RUNNING', 'COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED', 'PAUSED')),
    "input"                 JSONB       NOT NULL DEFAULT '{}',
    "output"                JSONB       NOT NULL DEFAULT '{}',
    "variables"             JSONB       NOT NULL DEFAULT '{}',
    -- Offloaded payload references (external storage keys).
    "inputRef"              TEXT,
    "outputRef"             TEXT,
    "correlationId"         TEXT,
    "idempotencyKey"        TEXT,
    "priority"              INTEGER     NOT NULL DEFAULT 0 CHECK ("priority" BETWEEN 0 AND 99),
    "parentWorkflowId"      UUID,
    "parentTaskId"          UUID,
    "failureWorkflowId"     UUID,
    "reasonForIncompletion" TEXT,
    "failedTaskRef"         TEXT,
    "createdBy"             TEXT,
    -- Optimistic-concurrency counter, bumped on every committed evaluation.
    "version"               BIGINT      NOT NULL DEFAULT 0,
    "startedAt"             TIMESTAMPTZ NOT NULL DEFAULT now(),
    "updatedAt"             TIMESTAMPTZ NOT NULL DEFAULT now(),
    "endedAt"               TIMESTAMPTZ,
    PRIMARY KEY ("id", "startedAt")
) PARTITION BY RANGE ("startedAt");

CREATE TABLE "WorkflowExecutions_default" PARTITION OF "WorkflowExecutions" DEFAULT;

-- Every ordered index is "startedAt" DESC to match the listing's sort, so
-- the first page is read off the index instead of sorting the matched set.
-- The executions list, which defaults to what is running.
CREATE INDEX "WorkflowExecutions_status_idx"
    ON "WorkflowExecutions" ("namespaceId", "status", "startedAt" DESC);
-- Runs of one workflow.
CREATE INDEX "WorkflowExecutions_def_idx"
    ON "WorkflowExecutions" ("namespaceId", "defName", "startedAt" DESC);
-- Unfiltered newest-first listing and the keyset cursor ("startedAt","id").
CREATE INDEX "WorkflowExecutions_recent_idx"
    ON "WorkflowExecutions" ("namespaceId", "startedAt" DESC, "id" DESC);
CREATE INDEX "WorkflowExecutions_correlation_idx"
    ON "WorkflowExecutions" ("namespaceId", "correlationId") WHERE "correlationId" IS NOT NULL;
-- Reading back an idempotent start. Not unique: a unique index here would
-- have to include "startedAt" and would never conflict ("IdempotencyKeys"
-- is the guarantee).
CREATE INDEX "WorkflowExecutions_idempotency_idx"
    ON "WorkflowExecutions" ("namespaceId", "idempotencyKey") WHERE "idempotencyKey" IS NOT NULL;
-- Tracing a sub-workflow back, and drawing the tree.
CREATE INDEX "WorkflowExecutions_parent_idx"
    ON "WorkflowExecutions" ("parentWorkflowId") WHERE "parentWorkflowId" IS NOT NULL;
-- input.x:y / output.x:y search terms, as JSON containment (@>).
CREATE INDEX "WorkflowExecutions_input_gin_idx"
    ON "WorkflowExecutions" USING GIN ("input" jsonb_path_ops);
CREATE INDEX "WorkflowExecutions_output_gin_idx"
    ON "WorkflowExecutions" USING GIN ("output" jsonb_path_ops);
-- Orphaned-payload collection.
CREATE INDEX "WorkflowExecutions_input_ref_idx"
    ON "WorkflowExecutions" ("inputRef") WHERE "inputRef" IS NOT NULL;
CREATE INDEX "WorkflowExecutions_output_ref_idx"
    ON "WorkflowExecutions" ("outputRef") WHERE "outputRef" IS NOT NULL;

------------------------------------------------------------------------
-- IdempotencyKeys: unpartitioned ON PURPOSE. A unique index on a
-- partitioned table must include every partition-key column, and
-- "startedAt" differs on every insert, so such an index never conflicts.
-- Here the constraint actually constrains: INSERT ... ON CONFLICT DO
-- NOTHING, then read back.
------------------------------------------------------------------------

CREATE TABLE "IdempotencyKeys" (
    "namespaceId" UUID        NOT NULL,
    "key"         TEXT        NOT NULL,
    "workflowId"  UUID        NOT NULL,
    -- The execution's "startedAt", so the read-back prunes to one partition.
    "startedAt"   TIMESTAMPTZ NOT NULL,
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- NULL = kept as long as the execution.
    "expiresAt"   TIMESTAMPTZ,
    PRIMARY KEY ("namespaceId", "key")
);

CREATE INDEX "IdempotencyKeys_expires_idx"
    ON "IdempotencyKeys" ("expiresAt") WHERE "expiresAt" IS NOT NULL;

------------------------------------------------------------------------
-- TaskExecutions: hash-partitioned 16 ways on "workflowId", so one
-- workflow's tasks are co-located and the frontier query touches a single
-- partition.
------------------------------------------------------------------------

CREATE TABLE "TaskExecutions" (
    "id"                    UUID        NOT NULL DEFAULT uuidv7(),
    "workflowId"            UUID        NOT NULL,
    "namespaceId"           UUID        NOT NULL,
    "refName"               TEXT        NOT NULL,
    "taskDefName"           TEXT        NOT NULL,
    "taskType"              TEXT        NOT NULL,
    "iteration"             INTEGER     NOT NULL DEFAULT 0 CHECK ("iteration" >= 0),
    -- Part of the identity: a retry is a new row with attempt + 1 (this is
    -- Conductor's Task.retryCount).
    "attempt"               INTEGER     NOT NULL DEFAULT 0 CHECK ("attempt" >= 0),
    "status"                TEXT        NOT NULL DEFAULT 'SCHEDULED'
        CHECK ("status" IN ('SCHEDULED', 'IN_PROGRESS', 'COMPLETED', 'COMPLETED_WITH_ERRORS',
                            'FAILED', 'FAILED_WITH_TERMINAL_ERROR', 'TIMED_OUT', 'CANCELED',
                            'SKIPPED')),
    "input"                 JSONB       NOT NULL DEFAULT '{}',
    "output"                JSONB       NOT NULL DEFAULT '{}',
    "inputRef"              TEXT,
    "outputRef"             TEXT,
    "reasonForIncompletion" TEXT,
    "workerId"              TEXT,
    -- NULL for tasks the decider runs inline (never queued).
    "queueName"             TEXT,
    "pollCount"             INTEGER     NOT NULL DEFAULT 0 CHECK ("pollCount" >= 0),
    "callbackAfterSeconds"  BIGINT      NOT NULL DEFAULT 0 CHECK ("callbackAfterSeconds" >= 0),
    "startDelaySeconds"     INTEGER     NOT NULL DEFAULT 0 CHECK ("startDelaySeconds" >= 0),
    -- Owning operator task (FORK / DO_WHILE / DYNAMIC ...), if any.
    "parentTaskId"          UUID,
    -- refName of the FORK_JOIN(_DYNAMIC) that spawned this branch, if any.
    "forkRef"               TEXT,
    "subWorkflowId"         UUID,
    "scheduledAt"           TIMESTAMPTZ NOT NULL DEFAULT now(),
    "startedAt"             TIMESTAMPTZ,
    "endedAt"               TIMESTAMPTZ,
    "updatedAt"             TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Evaluation watermark: set when the decider has reacted to this task.
    "deciderSeenAt"         TIMESTAMPTZ,
    PRIMARY KEY ("workflowId", "id")
) PARTITION BY HASH ("workflowId");

DO $$
BEGIN
    FOR "n" IN 0..15 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 16, REMAINDER %s)',
                       format('TaskExecutions_p%s', "n"), 'TaskExecutions', "n");
    END LOOP;
END;
$$;

-- Task identity: what makes the decider safe to re-run (ON CONFLICT DO
-- NOTHING). "attempt" is in it, or a retry would land on the failed
-- attempt's slot, be absorbed, and silently never run.
CREATE UNIQUE INDEX "TaskExecutions_identity_idx"
    ON "TaskExecutions" ("workflowId", "refName", "iteration", "attempt");
-- The pending frontier. Partial, so its size tracks in-flight work rather
-- than total history. Queries must repeat this predicate (or test a status
-- the planner can prove satisfies it) to use the index.
CREATE INDEX "TaskExecutions_frontier_idx"
    ON "TaskExecutions" ("workflowId")
    WHERE "status" NOT IN ('COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED',
                           'FAILED_WITH_TERMINAL_ERROR', 'TIMED_OUT', 'CANCELED', 'SKIPPED');
-- Terminal tasks the decider has not yet reacted to: a handful, not history.
CREATE INDEX "TaskExecutions_unprocessed_idx"
    ON "TaskExecutions" ("workflowId")
    WHERE "endedAt" IS NOT NULL AND "deciderSeenAt" IS NULL;
-- Recent attempts per task definition: the retry-budget check, which would
-- otherwise sequentially scan task history on every retry decision.
CREATE INDEX "TaskExecutions_recent_by_def_idx"
    ON "TaskExecutions" ("namespaceId", "taskDefName", "scheduledAt" DESC);

------------------------------------------------------------------------
-- TaskQueues: hash-partitioned 8 ways on "queueName"; the highest-churn
-- table, deliberately narrow so leasing touches nothing wider.
--
-- There is no "availableAt" column. A delayed row (startDelay,
-- callbackAfterSeconds, retry delay) is enqueued, or deferred, with
-- "leaseExpiresAt" = the time it becomes available and "leasedBy" NULL: it
-- is then outside the partial dequeue index (which every poll would
-- otherwise have to scan past) and inside the lease index, and the lease
-- sweeper returns it to the queue by clearing "leaseExpiresAt", exactly as
-- it does for a silent worker's lease.
------------------------------------------------------------------------

CREATE TABLE "TaskQueues" (
    "id"             BIGSERIAL   NOT NULL,
    "queueName"      TEXT        NOT NULL,
    "taskId"         UUID        NOT NULL,
    "workflowId"     UUID        NOT NULL,
    "namespaceId"    UUID        NOT NULL,
    -- Denormalised, written once at enqueue: the system-task runner finds
    -- its work without joining the widest table.
    "taskType"       TEXT        NOT NULL,
    "priority"       INTEGER     NOT NULL DEFAULT 0,
    -- NULL = available. Set = leased until then (or deferred until then
    -- when "leasedBy" is NULL).
    "leaseExpiresAt" TIMESTAMPTZ,
    "leasedBy"       TEXT,
    "leaseCount"     INTEGER     NOT NULL DEFAULT 0 CHECK ("leaseCount" >= 0),
    "enqueuedAt"     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("queueName", "id")
) PARTITION BY HASH ("queueName");

-- Stock autovacuum lets dead tuples pile up faster than they are reclaimed
-- and dequeue latency degrades; fillfactor 70 leaves room for HOT updates
-- so a lease stamp need not move the row. Storage parameters cannot be set
-- on a partitioned parent, hence per partition.
DO $$
BEGIN
    FOR "n" IN 0..7 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 8, REMAINDER %s)',
                       format('TaskQueues_p%s', "n"), 'TaskQueues', "n");
        EXECUTE format('ALTER TABLE %I SET (autovacuum_vacuum_scale_factor = 0.01, '
                       'autovacuum_vacuum_cost_limit = 2000, fillfactor = 70)',
                       format('TaskQueues_p%s', "n"));
    END LOOP;
END;
$$;

-- The dequeue path. Partial on unleased rows, so leased (and deferred)
-- work leaves the index entirely rather than being scanned past on every
-- poll.
CREATE INDEX "TaskQueues_dequeue_idx"
    ON "TaskQueues" ("queueName", "priority" DESC, "id") WHERE "leaseExpiresAt" IS NULL;
-- Drives the lease-expiry sweeper (and releases deferred rows).
CREATE INDEX "TaskQueues_lease_idx"
    ON "TaskQueues" ("leaseExpiresAt") WHERE "leaseExpiresAt" IS NOT NULL;
-- ("queueName","taskId"), not ("taskId"): the partition key must be in it,
-- so every lookup by task must also carry its queue name.
CREATE UNIQUE INDEX "TaskQueues_task_idx"
    ON "TaskQueues" ("queueName", "taskId");

------------------------------------------------------------------------
-- DecideQueues: the primary key IS the dedupe, many completions collapse
-- into one pending evaluation. "reason" is written by ON CONFLICT DO
-- UPDATE and read by nobody: it gives the conflict something to update,
-- and therefore a lock to take. Do not delete it.
------------------------------------------------------------------------

CREATE TABLE "DecideQueues" ( "workflowId" UUID PRIMARY KEY, "namespaceId" UUID NOT NULL, "enqueuedAt" TIMESTAMPTZ NOT NULL DEFAULT now(), "reason" TEXT );

ALTER TABLE "DecideQueues" SET (autovacuum_vacuum_scale_factor = 0.01,
                                autovacuum_vacuum_cost_limit = 2000, fillfactor = 70);

------------------------------------------------------------------------
-- Timers: range-partitioned hourly on "fireAt". The poller scans only the
-- leading partition; old partitions are dropped, not deleted, so millions
-- of pending timers stay cheap. The sweeper re-checks state before acting.
------------------------------------------------------------------------

CREATE TABLE "Timers" (
    "id"          UUID        NOT NULL DEFAULT uuidv7(),
    "namespaceId" UUID        NOT NULL,
    "workflowId"  UUID        NOT NULL,
    -- NULL for workflow-level timers (workflowTimeout).
    "taskId"      UUID,
    "kind"        TEXT        NOT NULL
        CHECK ("kind" IN ('scheduleToStart', 'startToClose', 'taskTimeout', 'workflowTimeout', 'wait')),
    "fireAt"      TIMESTAMPTZ NOT NULL,
    "claimedAt"   TIMESTAMPTZ,
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "payload"     JSONB,
    PRIMARY KEY ("id", "fireAt")
) PARTITION BY RANGE ("fireAt");

CREATE TABLE "Timers_default" PARTITION OF "Timers" DEFAULT;

-- Due and unclaimed: the sweeper's index range scan (with SKIP LOCKED).
CREATE INDEX "Timers_due_idx"
    ON "Timers" ("fireAt") WHERE "claimedAt" IS NULL;
-- Cancellation: a finished task's deadlines by ("workflowId","taskId"), a
-- finished workflow's by ("workflowId"). Adding a lower bound on "fireAt"
-- (e.g. the task's "scheduledAt") lets the planner skip older partitions.
CREATE INDEX "Timers_owner_idx"
    ON "Timers" ("workflowId", "taskId");

------------------------------------------------------------------------
-- OutboxEvents: transactional outbox with delivery bookkeeping.
------------------------------------------------------------------------

CREATE TABLE "OutboxEvents" (
    "id"             BIGSERIAL   PRIMARY KEY,
    "namespaceId"    UUID        NOT NULL,
    "eventType"      TEXT        NOT NULL,
    -- Destination ("provider:dest"); NULL = the default sink for eventType.
    "sink"           TEXT,
    "workflowId"     UUID,
    "taskId"         UUID,
    "payload"        JSONB       NOT NULL DEFAULT '{}',
    "createdAt"      TIMESTAMPTZ NOT NULL DEFAULT now(),
    "attempts"       INTEGER     NOT NULL DEFAULT 0 CHECK ("attempts" >= 0),
    "nextAttemptAt"  TIMESTAMPTZ NOT NULL DEFAULT now(),
    "lastError"      TEXT,
    "publishedAt"    TIMESTAMPTZ,
    "deadLetteredAt" TIMESTAMPTZ
);

-- The relay's hot path: deliverable events only. Dead-lettered and
-- published rows leave the index entirely, so the dead letter can be kept
-- (inspectable, replayable) without the hot path paying for it.
CREATE INDEX "OutboxEvents_deliverable_idx"
    ON "OutboxEvents" ("nextAttemptAt", "id") WHERE "publishedAt" IS NULL AND "deadLetteredAt" IS NULL;
CREATE INDEX "OutboxEvents_deadletter_idx"
    ON "OutboxEvents" ("deadLetteredAt") WHERE "deadLetteredAt" IS NOT NULL;

------------------------------------------------------------------------
-- WorkflowEvents: per-workflow history, range-partitioned monthly on "at".
--
-- "seq" is gap-free per workflow and allocated from the database, never
-- from a clock (two events in one transaction can share a timestamp): the
-- writer takes the next numbers from the execution's "eventSeq" counter
-- (migration 0003) in the transaction that inserts the events, which also
-- holds the execution's row lock, so writers of one workflow serialise.
-- A rollback discards the allocation with the rows, so no gap. The
-- primary key cannot enforce ("workflowId","seq") uniqueness on its own:
-- it must include "at" and a workflow's events can span months, so the row
-- lock is the guarantee. The primary key's btree is the
-- ("workflowId","seq") index behind the history view and the SSE resume.
------------------------------------------------------------------------

CREATE TABLE "WorkflowEvents" (
    "workflowId"  UUID        NOT NULL,
    "namespaceId" UUID        NOT NULL,
    "seq"         BIGINT      NOT NULL CHECK ("seq" >= 1),
    "type"        TEXT        NOT NULL,
    "taskId"      UUID,
    "data"        JSONB       NOT NULL DEFAULT '{}',
    "at"          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("workflowId", "seq", "at")
) PARTITION BY RANGE ("at");

CREATE TABLE "WorkflowEvents_default" PARTITION OF "WorkflowEvents" DEFAULT;

-- The payload is "workflowId:seq" and nothing else: a notification is
-- capped at 8000 bytes and event data is unbounded; subscribers read the
-- rows from their own cursor.
CREATE FUNCTION "nf_notify_workflow_event"()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('node_flow_workflow_events', NEW."workflowId"::text || ':' || NEW."seq");
    RETURN NULL;
END;
$$;

-- FOR EACH ROW (a statement-level trigger would see NEW unassigned and
-- notify with an empty payload), declared on the PARENT so Postgres clones
-- it onto every partition, including those created later; a per-partition
-- trigger would stop at the next roll-over. Being a trigger, no writer can
-- forget it, and NOTIFY is delivered at commit, so nothing that rolls back
-- is announced.
CREATE TRIGGER "WorkflowEvents_notify"
    AFTER INSERT ON "WorkflowEvents"
    FOR EACH ROW EXECUTE FUNCTION "nf_notify_workflow_event"();

------------------------------------------------------------------------
-- Concurrency control
------------------------------------------------------------------------

-- An unconfigured semaphore deliberately does not gate.
CREATE TABLE "Semaphores" (
    "namespaceId" UUID        NOT NULL REFERENCES "Namespaces" ("id"),
    "name"        TEXT        NOT NULL CHECK ("name" <> ''),
    "permits"     INTEGER     NOT NULL CHECK ("permits" >= 0),
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "updatedAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("namespaceId", "name")
);

-- Permits are leased, not held, so a crashed worker cannot drain one per
-- crash: a holder whose "leaseExpiresAt" has passed does not count.
CREATE TABLE "SemaphoreHolders" (
    "namespaceId"    UUID        NOT NULL,
    "name"           TEXT        NOT NULL,
    "taskId"         UUID        NOT NULL,
    "workflowId"     UUID,
    "workerId"       TEXT,
    "acquiredAt"     TIMESTAMPTZ NOT NULL DEFAULT now(),
    "leaseExpiresAt" TIMESTAMPTZ NOT NULL,
    PRIMARY KEY ("namespaceId", "name", "taskId")
);

-- Counting live holders, the hot path of every acquire:
--   count(*) WHERE "namespaceId" = $1 AND "name" = $2 AND "leaseExpiresAt" > now()
-- is an index-only range scan of this index.
CREATE INDEX "SemaphoreHolders_count_idx"
    ON "SemaphoreHolders" ("namespaceId", "name", "leaseExpiresAt");
-- Expiry sweep.
CREATE INDEX "SemaphoreHolders_expires_idx"
    ON "SemaphoreHolders" ("leaseExpiresAt");

-- A separate table rather than counting queue rows: those are deleted on
-- acknowledgement, and that is exactly the history a rate limit needs.
-- Fixed windows: one upsert on the hot path, at the cost of up to a 2x
-- burst at a boundary.
CREATE TABLE "RateLimitBuckets" (
    "namespaceId" UUID        NOT NULL,
    "queueName"   TEXT        NOT NULL,
    "windowStart" TIMESTAMPTZ NOT NULL,
    "count"       INTEGER     NOT NULL DEFAULT 0 CHECK ("count" >= 0),
    PRIMARY KEY ("namespaceId", "queueName", "windowStart")
);

-- Pruning of past windows. "count" is not indexed, so the upsert stays HOT.
CREATE INDEX "RateLimitBuckets_window_idx"
    ON "RateLimitBuckets" ("windowStart");

ALTER TABLE "RateLimitBuckets" SET (autovacuum_vacuum_scale_factor = 0.01,
                                    autovacuum_vacuum_cost_limit = 2000, fillfactor = 70);

------------------------------------------------------------------------
-- TaskOutputCache: per task definition, so unrelated tasks never share
-- results. Offloaded outputs are not cached: a blob reference would
-- outlive what it points at.
------------------------------------------------------------------------

CREATE TABLE "TaskOutputCache" (
    "namespaceId" UUID        NOT NULL,
    "taskDefName" TEXT        NOT NULL,
    "key"         TEXT        NOT NULL,
    "output"      JSONB       NOT NULL,
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "expiresAt"   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY ("namespaceId", "taskDefName", "key")
);

-- Hourly pruning.
CREATE INDEX "TaskOutputCache_expires_idx"
    ON "TaskOutputCache" ("expiresAt");

------------------------------------------------------------------------
-- Seed the current period's partitions (UTC) so a fresh database never
-- writes to DEFAULT: rows in DEFAULT cannot be dropped by detaching a
-- partition, and would make creating this period's partition fail. The
-- server's partition manager creates the following periods ahead.
------------------------------------------------------------------------

DO $$
DECLARE
    "month" timestamptz := date_trunc('month', now(), 'UTC');
    "hour"  timestamptz := date_trunc('hour', now(), 'UTC');
    "t"     text;
BEGIN
    FOREACH "t" IN ARRAY ARRAY['WorkflowExecutions', 'WorkflowEvents'] LOOP
        PERFORM "nf_create_range_partition"("t", "nf_partition_name"("t", "month", 'month'),
                                            "month", date_add("month", interval '1 month', 'UTC'));
    END LOOP;
    PERFORM "nf_create_range_partition"('Timers', "nf_partition_name"('Timers', "hour", 'hour'),
                                        "hour", "hour" + interval '1 hour');
END;
$$;
