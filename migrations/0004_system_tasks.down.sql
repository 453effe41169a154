DROP INDEX "TaskQueues_system_idx";
