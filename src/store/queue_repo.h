/*
 * queue_repo — "TaskQueues": handing tasks to workers and taking their
 * results.
 *
 * A queue row is narrow and lives only while its task waits or runs.  Its
 * lease is the task's start-to-close deadline: a poll leases a row for the
 * task definition's responseTimeoutSeconds, a heartbeat renews it, and a
 * lease that runs out means the worker went silent, so the lease sweeper
 * times the attempt out (the decider then retries it as a new attempt).  A
 * row deferred to later (startDelay, a retry's delay, callbackAfterSeconds)
 * carries the time it becomes available in "leaseExpiresAt" with no
 * "leasedBy", which keeps it out of the partial dequeue index until the
 * sweeper returns it.
 *
 * Every statement that finds a row by task also names its queue:
 * ("queueName","taskId") is the unique index, and the hash partition key
 * leads it, so a lookup without the queue would scan all eight partitions.
 *
 * Each operation is one statement, and so one transaction: a result, for
 * instance, updates the task only from a non-terminal state, deletes the
 * queue row only if this worker holds its lease, enqueues the workflow's
 * evaluation (ON CONFLICT DO UPDATE, so it takes the lock an evaluation in
 * progress holds and is never lost) and appends the event — or, when the
 * lease is not this worker's, changes nothing at all.
 *
 * Threads: callers bring their own connection.  Ownership: JSON text
 * returned is the caller's (free).  Failure: false with e set; a lost
 * lease is ERR_CONFLICT.
 */
#ifndef NF_STORE_QUEUE_REPO_H
#define NF_STORE_QUEUE_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct db;

/* Leases up to count available worker (SIMPLE) tasks of queue to worker for
 * lease_seconds; *json_out is a JSON array of the tasks (id, workflowId,
 * refName, taskDefName, iteration, attempt, input, leaseExpiresAt), *n
 * their number. */
bool queue_lease(struct db *db, const char *queue, const char *worker,
		 int count, double lease_seconds, char **json_out, size_t *n,
		 struct err *e);

/* Leases up to count available tasks of the system type task_type (never
 * SIMPLE) from every queue, for the in-process runner; *json_out is a JSON
 * array of the tasks (id, workflowId, namespaceId, queueName, refName,
 * taskDefName, attempt, input, asyncComplete: whether the workflow's
 * definition declares the task asyncComplete, see queue_park).  Worker polls
 * (queue_lease) only ever lease SIMPLE rows, so the two never take each other's
 * work. */
bool queue_lease_system(struct db *db, const char *task_type,
			const char *worker, int count, double lease_seconds,
			char **json_out, size_t *n, struct err *e);

enum task_result_status {
	RESULT_COMPLETED,
	RESULT_FAILED,
	RESULT_FAILED_WITH_TERMINAL_ERROR,
};

/* Records a worker's terminal result (output: JSON text through the
 * funnel; reason may be NULL).  ERR_CONFLICT when the worker does not hold
 * the task's lease or the task is already finished. */
bool queue_result(struct db *db, const char *queue, const char *task_id,
		  const char *worker, enum task_result_status status,
		  const char *output, const char *reason, struct err *e);

/* queue_result, or with any_holder the result of whoever reports it
 * (Conductor's task update): the task may be leased to another worker or
 * to none, as long as it is queued and not finished. */
bool queue_result_as(struct db *db, const char *queue, const char *task_id,
		     const char *worker, bool any_holder,
		     enum task_result_status status, const char *output,
		     const char *reason, struct err *e);

/* A system task declared asyncComplete that has done its work: records its
 * output and leaves it IN_PROGRESS with its queue row gone (nothing leases
 * it again, no lease runs out) until the API completes or fails it.
 * *parked is false, and nothing changes, when the task is not declared
 * asyncComplete in its workflow's definition or the lease is not
 * worker's: the caller then records an ordinary result. */
bool queue_park(struct db *db, const char *queue, const char *task_id,
		const char *worker, const char *output, bool *parked,
		struct err *e);

/* Renews the lease for lease_seconds from now; ERR_CONFLICT when lost.
 * *expires_out (may be NULL) gets the new expiry as text (free). */
bool queue_heartbeat(struct db *db, const char *queue, const char *task_id,
		     const char *worker, double lease_seconds,
		     char **expires_out, struct err *e);

/* Gives the task back: available again after delay_seconds (0: at once),
 * to any worker; the attempt stays the same.  ERR_CONFLICT when lost. */
bool queue_release(struct db *db, const char *queue, const char *task_id,
		   const char *worker, double delay_seconds, struct err *e);

/* The lease sweeper's two passes, each over at most limit rows: deferred
 * rows whose time has come return to the queue; leases that ran out time
 * their attempt out.  The queue names touched are appended to *queues as
 * a JSON array (may be NULL) so waiting polls can be woken. */
bool queue_sweep_deferred(struct db *db, int limit, size_t *n, struct err *e);
bool queue_sweep_expired(struct db *db, int limit, size_t *n, struct err *e);

#endif
