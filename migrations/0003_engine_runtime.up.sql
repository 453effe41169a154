-- What the running engine needs beyond the tables of 0002.

-- The execution's event counter. Every writer of "WorkflowEvents" first
-- locks the execution's row (the version-guarded update of the decider,
-- or this counter's own update), so allocating "seq" from this column is
-- gap-free per workflow and costs no scan of the events' partitions; a
-- rollback returns the numbers with the rows.
ALTER TABLE "WorkflowExecutions"
    ADD COLUMN "eventSeq" BIGINT NOT NULL DEFAULT 0 CHECK ("eventSeq" >= 0);

-- The last poll of each worker on each queue (observability: "is anyone
-- polling this queue?"). Written in buffered batches, one upsert for many
-- polls, never one write per poll.
CREATE TABLE "WorkerPolls" (
    "namespaceId" UUID        NOT NULL,
    "queueName"   TEXT        NOT NULL,
    "workerId"    TEXT        NOT NULL,
    "lastPollAt"  TIMESTAMPTZ NOT NULL,
    "pollCount"   BIGINT      NOT NULL DEFAULT 0 CHECK ("pollCount" >= 0),
    PRIMARY KEY ("namespaceId", "queueName", "workerId")
);

ALTER TABLE "WorkerPolls" SET (autovacuum_vacuum_scale_factor = 0.01,
                               autovacuum_vacuum_cost_limit = 2000, fillfactor = 70);
