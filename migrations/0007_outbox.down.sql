DROP INDEX "OutboxEvents_published_idx";
DROP INDEX "OutboxEvents_deadletter_ns_idx";
DROP TRIGGER "OutboxEvents_notify" ON "OutboxEvents";
DROP FUNCTION "nf_notify_outbox"();
DROP TRIGGER "WorkflowEvents_outbox" ON "WorkflowEvents";
DROP FUNCTION "nf_outbox_status_events"();
DROP TABLE "StatusListeners";
DROP TABLE "Sinks";
