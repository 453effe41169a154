-- Live-history notifications cost nothing while nobody watches.
--
-- A transaction that calls pg_notify takes, at commit, the one lock
-- PostgreSQL keeps for the notification queue, and holds it through its
-- WAL flush: every notifying commit in the cluster waits for the one
-- before it, and group commit is lost.  With a notification per history
-- event that serialised every start, lease, result and decider batch.
--
-- Notifications are hints for open live-history streams and for nothing
-- else, so the trigger keeps its shape (AFTER INSERT, FOR EACH ROW, on the
-- parent, payload "workflowId:seq", raised at commit by whoever writes)
-- and raises the hint only while some server process has a stream open.
-- A process registers here, and keeps its row fresh, while it holds at
-- least one stream; a row whose process died expires on its own.  The
-- cursor every stream reads from makes the hints a writer took before a
-- registration became visible cost latency (until the stream's next
-- heartbeat) and never an event.
CREATE TABLE "LiveStreamHolders" (
    "processId" UUID        PRIMARY KEY,
    "streams"   INTEGER     NOT NULL CHECK ("streams" >= 0),
    "expiresAt" TIMESTAMPTZ NOT NULL
);

CREATE OR REPLACE FUNCTION "nf_notify_workflow_event"()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM "LiveStreamHolders"
                WHERE "expiresAt" > statement_timestamp()) THEN
        PERFORM pg_notify('node_flow_workflow_events', NEW."workflowId"::text || ':' || NEW."seq");
    END IF;
    RETURN NULL;
END;
$$;
