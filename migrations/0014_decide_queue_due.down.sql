DROP INDEX "DecideQueues_due_idx";
