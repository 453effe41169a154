DROP TABLE "WorkerPolls";
ALTER TABLE "WorkflowExecutions" DROP COLUMN "eventSeq";
