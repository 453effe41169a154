-- The output cache's and the payload store's columns, table and indexes.
--
-- "cacheKey"/"cacheTtlSeconds": a task scheduled with cacheConfig carries
-- its resolved key, so the statement that records its result (the worker's
-- and the system-task runner's alike) fills "TaskOutputCache" in the same
-- transaction. NULL for every task that is not cached.
ALTER TABLE "TaskExecutions"
    ADD COLUMN "cacheKey"        TEXT,
    ADD COLUMN "cacheTtlSeconds" INTEGER CHECK ("cacheTtlSeconds" > 0);

------------------------------------------------------------------------
-- Payloads: inputs and outputs above the offload threshold, stored out of
-- their row (whose "inputRef"/"outputRef" holds the id, and whose column a
-- small placeholder). Unpartitioned: a payload outlives nothing but the
-- rows that reference it, and the collector deletes those no row
-- references any more (the "inputRef"/"outputRef" partial indexes answer
-- the anti-join), after a grace period that covers a payload written just
-- before the row that will reference it commits.
------------------------------------------------------------------------

CREATE TABLE "Payloads" (
    "id"          UUID        NOT NULL DEFAULT uuidv7(),
    "namespaceId" UUID        NOT NULL,
    "data"        TEXT        NOT NULL,
    "size"        BIGINT      NOT NULL CHECK ("size" >= 0),
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("id")
);

-- The collector's scan: payloads past the grace period, oldest first.
CREATE INDEX "Payloads_created_idx" ON "Payloads" ("createdAt");

-- The collector's anti-join on the task side (the execution side's indexes
-- are in 0002_engine).
CREATE INDEX "TaskExecutions_input_ref_idx"
    ON "TaskExecutions" ("inputRef") WHERE "inputRef" IS NOT NULL;
CREATE INDEX "TaskExecutions_output_ref_idx"
    ON "TaskExecutions" ("outputRef") WHERE "outputRef" IS NOT NULL;
