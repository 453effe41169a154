-- The namespace event stream's resume (GET /v1/ns/{ns}/events with
-- Last-Event-ID): one order of the WORKFLOW_* events of a namespace that
-- every replica reads alike and that a late commit cannot fall behind.
--
-- "at" cannot give it: it is the writing transaction's start, and a
-- transaction that started earlier may commit later, behind a position a
-- reader has already sent. The writing transaction's id can: a reader
-- sends only events whose transaction is older than its snapshot's xmin
-- (every such transaction has ended, so it sees all of them there will
-- ever be), in ("xid", "workflowId", "seq") order, so whatever commits
-- later has an xid at or past that xmin, after every position sent.
-- ("workflowId", "seq") is unique, so the order is total.
--
-- Rows written before this migration have no "xid" and are not streamed
-- (a new stream starts at the present anyway). The column is added
-- without a default and the default set after, so the table is not
-- rewritten.
ALTER TABLE "WorkflowEvents" ADD COLUMN "xid" xid8;
ALTER TABLE "WorkflowEvents" ALTER COLUMN "xid" SET DEFAULT pg_current_xact_id();

CREATE INDEX "WorkflowEvents_ns_status_idx"
    ON "WorkflowEvents" ("namespaceId", "xid", "workflowId", "seq")
    WHERE "type" LIKE 'WORKFLOW\_%';
