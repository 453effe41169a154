DROP INDEX "TaskExecutions_output_ref_idx";
DROP INDEX "TaskExecutions_input_ref_idx";
DROP TABLE "Payloads";
ALTER TABLE "TaskExecutions"
    DROP COLUMN "cacheTtlSeconds",
    DROP COLUMN "cacheKey";
