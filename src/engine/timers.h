/*
 * timers — the timer sweeper engine loop, over the "Timers" table
 * (store/timers_repo.h): it claims due timers and acts on each in the same
 * transaction, after re-checking the state the timer was armed to watch.
 *
 *   scheduleToStart  a task not polled within its pollTimeoutSeconds times
 *                    out; the decider retries it per its retryCount.
 *   taskTimeout      a task running longer than its timeoutSeconds (from
 *                    its first start) gets its timeoutPolicy: RETRY times
 *                    the attempt out (retried), TIME_OUT_WF times the
 *                    attempt and then the workflow out, ALERT_ONLY writes an
 *                    event and a log line and counts a metric.
 *   workflowTimeout  a workflow running longer than its timeoutSeconds:
 *                    TIME_OUT_WF times it out (open tasks cancelled),
 *                    ALERT_ONLY alerts.
 * Other kinds (startToClose is the queue lease; wait has no task kind yet)
 * are claimed and ignored.
 *
 * Each timer is acted on under a savepoint: one whose action fails is
 * unclaimed and due again a few seconds later, and the rest of the batch
 * goes on.  Safe on every replica at once (SKIP LOCKED).
 *
 * Threads: its own thread and connection.  Failure: the loop skeleton's
 * log-and-backoff.
 */
#ifndef NF_ENGINE_TIMERS_H
#define NF_ENGINE_TIMERS_H

#include "runtime/loop.h"

struct loop *timers_start(const char *database_url, int interval_ms);

#endif
