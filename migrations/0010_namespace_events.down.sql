DROP INDEX "WorkflowEvents_ns_status_idx";
ALTER TABLE "WorkflowEvents" DROP COLUMN "xid";
