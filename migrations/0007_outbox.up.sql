------------------------------------------------------------------------
-- 0007 outbox: sinks, status listeners, and the trigger that writes the
-- outbox rows of status changes.
------------------------------------------------------------------------

-- A sink is a named destination in a namespace.  "kind" is one of the
-- kinds the engine knows (engine/sink_kind.c); "config" is what that kind
-- needs except the secret (a webhook's url and extra headers), which is
-- kept apart so that no read of the configuration can echo it.
CREATE TABLE "Sinks" (
    "namespaceId" UUID        NOT NULL REFERENCES "Namespaces" ("id"),
    "name"        TEXT        NOT NULL CHECK ("name" <> ''),
    "kind"        TEXT        NOT NULL CHECK ("kind" <> ''),
    "config"      JSONB       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof("config") = 'object'),
    "secret"      TEXT,
    "createdAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "updatedAt"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("namespaceId", "name")
);

-- Which sink hears which transitions of the executions of one workflow
-- definition (by name, every version).  "eventTypes" is what the trigger
-- matches: the transitions as "WorkflowEvents" types ('WORKFLOW_' || w,
-- 'TASK_' || t), computed by the writer.
CREATE TABLE "StatusListeners" (
    "namespaceId"         UUID        NOT NULL REFERENCES "Namespaces" ("id"),
    "workflowName"        TEXT        NOT NULL CHECK ("workflowName" <> ''),
    "sink"                TEXT        NOT NULL CHECK ("sink" <> ''),
    "workflowTransitions" TEXT[]      NOT NULL DEFAULT '{}',
    "taskTransitions"     TEXT[]      NOT NULL DEFAULT '{}',
    "eventTypes"          TEXT[]      NOT NULL DEFAULT '{}',
    "createdAt"           TIMESTAMPTZ NOT NULL DEFAULT now(),
    "updatedAt"           TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY ("namespaceId", "workflowName")
);

-- Status changes reach the outbox from the history: every writer of a
-- change appends its "WorkflowEvents" rows in the change's transaction, so
-- a trigger there writes the outbox rows in that same transaction and no
-- writer can forget them; a change that rolls back takes its outbox rows
-- with it.  FOR EACH STATEMENT with a transition table: one call per
-- inserting statement (a decider batch appends many events in one), and
-- with no listener anywhere the call ends at one probe of an empty table.
-- Otherwise only the events whose type some listener of their namespace
-- hears look up their execution (by id, every partition's primary key).
CREATE FUNCTION "nf_outbox_status_events"()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM "StatusListeners") THEN
        RETURN NULL;
    END IF;
    INSERT INTO "OutboxEvents" ("namespaceId", "eventType", "sink",
                                "workflowId", "taskId", "payload")
    SELECT e."namespaceId", e."type", l."sink", e."workflowId", e."taskId",
           jsonb_build_object('type', e."type", 'seq', e."seq",
                              'workflowId', e."workflowId",
                              'workflowName', w."defName",
                              'workflowVersion', w."defVersion",
                              'correlationId', w."correlationId",
                              'workflowStatus', w."status",
                              'taskId', e."taskId", 'data', e."data",
                              'at', e."at")
    FROM (SELECT n.* FROM "nf_new_events" n
          WHERE EXISTS (SELECT 1 FROM "StatusListeners" s
                        WHERE s."namespaceId" = n."namespaceId"
                        AND n."type" = ANY (s."eventTypes"))) e
    JOIN "WorkflowExecutions" w ON w."id" = e."workflowId"
    JOIN "StatusListeners" l ON l."namespaceId" = e."namespaceId"
        AND l."workflowName" = w."defName" AND e."type" = ANY (l."eventTypes")
    ORDER BY e."workflowId", e."seq";
    RETURN NULL;
END;
$$;

-- Declared on the parent: PostgreSQL runs a statement trigger of a
-- partitioned table once per statement, its transition table holding the
-- rows of every partition (including partitions created later).
CREATE TRIGGER "WorkflowEvents_outbox"
    AFTER INSERT ON "WorkflowEvents"
    REFERENCING NEW TABLE AS "nf_new_events"
    FOR EACH STATEMENT EXECUTE FUNCTION "nf_outbox_status_events"();

-- Conductor's WorkflowDef "workflowStatusListenerEnabled" with a
-- "workflowStatusListenerSink": registering such a definition makes (or
-- updates) the listener of its name, hearing the workflow's terminal
-- transitions (the task transitions an existing listener names are kept).
-- Disabling it later leaves the listener: DELETE it through the API.
CREATE FUNCTION "nf_definition_status_listener"()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW."definition"->>'workflowStatusListenerEnabled' = 'true'
       AND coalesce(NEW."definition"->>'workflowStatusListenerSink', '') <> '' THEN
        INSERT INTO "StatusListeners" ("namespaceId", "workflowName", "sink",
                                       "workflowTransitions", "eventTypes")
        VALUES (NEW."namespaceId", NEW."name",
                NEW."definition"->>'workflowStatusListenerSink',
                '{COMPLETED,FAILED,TERMINATED,TIMED_OUT}',
                '{WORKFLOW_COMPLETED,WORKFLOW_FAILED,WORKFLOW_TERMINATED,WORKFLOW_TIMED_OUT}')
        ON CONFLICT ("namespaceId", "workflowName") DO UPDATE SET
            "sink" = EXCLUDED."sink",
            "workflowTransitions" = EXCLUDED."workflowTransitions",
            "eventTypes" = EXCLUDED."eventTypes" || ARRAY(
                SELECT t FROM unnest("StatusListeners"."eventTypes") AS t
                WHERE t LIKE 'TASK\_%'),
            "updatedAt" = now();
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER "WorkflowDefinitions_status_listener"
    AFTER INSERT OR UPDATE OF "definition" ON "WorkflowDefinitions"
    FOR EACH ROW EXECUTE FUNCTION "nf_definition_status_listener"();

-- New outbox rows wake the relays of every replica.  A hint only (the
-- relay also looks on its own every --outbox-interval-ms); identical
-- notifications of one transaction are folded into one at commit, and
-- nothing is sent for a transaction that rolls back.
CREATE FUNCTION "nf_notify_outbox"()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('node_flow_outbox', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER "OutboxEvents_notify"
    AFTER INSERT ON "OutboxEvents"
    FOR EACH ROW EXECUTE FUNCTION "nf_notify_outbox"();

-- The dead letter listed page by page, in id order.
CREATE INDEX "OutboxEvents_deadletter_ns_idx"
    ON "OutboxEvents" ("namespaceId", "id") WHERE "deadLetteredAt" IS NOT NULL;

-- Pruning published rows in the order they were published.
CREATE INDEX "OutboxEvents_published_idx"
    ON "OutboxEvents" ("publishedAt") WHERE "publishedAt" IS NOT NULL;
