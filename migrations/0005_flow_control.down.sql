COMMENT ON TABLE "Semaphores" IS NULL;
ALTER TABLE "TaskQueues" DROP COLUMN "semaphore";
