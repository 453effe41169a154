/*
 * sweeper — the lease sweeper engine loop, over "TaskQueues_lease_idx":
 * rows deferred until now return to their queue, and leases that ran out
 * (a silent worker, past the task's responseTimeoutSeconds) time their
 * attempt out and enqueue the workflow's evaluation, which retries it.
 * About once a second it also deletes semaphore holders that no longer
 * hold (lease run out, task no longer in progress), and about once a
 * minute rate-limit windows older than a day.
 *
 * Threads: its own thread and connection.  Failure: the loop skeleton's
 * log-and-backoff.
 */
#ifndef NF_ENGINE_SWEEPER_H
#define NF_ENGINE_SWEEPER_H

#include "runtime/loop.h"

/* on_released is called (may be NULL) when deferred rows became available,
 * so waiting polls can look again. */
struct loop *sweeper_start(const char *database_url, int interval_ms,
			   void (*on_released)(void *arg), void *arg);

#endif
