DROP INDEX "WorkflowExecutions_ended_idx";
DROP TABLE "TaskLogs";
