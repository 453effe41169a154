CREATE OR REPLACE FUNCTION "nf_notify_workflow_event"()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('node_flow_workflow_events', NEW."workflowId"::text || ':' || NEW."seq");
    RETURN NULL;
END;
$$;

DROP TABLE "LiveStreamHolders";
