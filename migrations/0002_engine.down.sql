-- Reverse order of 0002_engine.up.sql. Dropping a partitioned parent drops
-- all of its partitions, including any the partition manager created.
DROP TABLE "TaskOutputCache";
DROP TABLE "RateLimitBuckets";
DROP TABLE "SemaphoreHolders";
DROP TABLE "Semaphores";
DROP TRIGGER "WorkflowEvents_notify" ON "WorkflowEvents";
DROP FUNCTION "nf_notify_workflow_event"();
DROP TABLE "WorkflowEvents";
DROP TABLE "OutboxEvents";
DROP TABLE "Timers";
DROP TABLE "DecideQueues";
DROP TABLE "TaskQueues";
DROP TABLE "TaskExecutions";
DROP TABLE "IdempotencyKeys";
DROP TABLE "WorkflowExecutions";
DROP TABLE "WorkflowDefinitions";
DROP TABLE "TaskDefinitions";
DROP TABLE "Namespaces";
