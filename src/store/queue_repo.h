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

/* queue_lease, except that rows naming a semaphore of their own (see
 * queue_lease_gated) are not leased: they are counted in *passed_over
 * (may be NULL), for the caller to try queue_lease_gated. */
bool queue_lease_ungated(struct db *db, const char *queue, const char *worker,
			 int count, double lease_seconds, char **json_out,
			 size_t *n, size_t *passed_over, struct err *e);

/* What gates a queue's leases (flow control). */
struct queue_gate {
	const char *ns_id;
	const char *semaphore; /* the task definition's, or NULL */
	int default_permits;   /* of a semaphore with no "Semaphores" row */
	int concurrent_limit; /* leased rows of the queue at most; <= 0: none */
	int rate_limit;       /* leases per window; <= 0: none */
	int rate_seconds;     /* the window's length (<= 0: 1 s) */
};

/*
 * queue_lease for a queue with flow control: a row is leased only while
 * its semaphore (the row's own, else g->semaphore) has a free permit, which
 * the lease then holds in "SemaphoreHolders" until the task's result,
 * release or timeout (or its lease runs out); and no more rows than the
 * concurrency limit and the rate limit's current fixed window leave.  Fewer
 * rows, possibly none, when a limit is reached: never an error for that.
 * Serialised per semaphore and per limited queue, across connections and
 * replicas, by advisory transaction locks; runs its own transaction.
 */
bool queue_lease_gated(struct db *db, const char *queue, const char *worker,
		       int count, double lease_seconds,
		       const struct queue_gate *g, char **json_out, size_t *n,
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

/* queue_result_as; *freed (may be NULL) tells whether a semaphore permit
 * was given back; workflow_id (may be NULL; 37 bytes) receives the id of
 * the task's workflow once the result is recorded: the transaction holds
 * its "DecideQueues" row until it ends (a caller deciding it,
 * decide_load). */
bool queue_result_freeing(struct db *db, const char *queue, const char *task_id,
			  const char *worker, bool any_holder,
			  enum task_result_status status, const char *output,
			  const char *reason, bool *freed, char *workflow_id,
			  struct err *e);

/* One item's fate in queue_results. */
enum queue_fate {
	QUEUE_FATE_DONE,       /* recorded */
	QUEUE_FATE_FINISHED,   /* the task had finished already */
	QUEUE_FATE_NOT_LEASED, /* not leased to that worker (or no such task) */
};

/*
 * Many workers' results on one queue in one statement, hence one commit:
 * what queue_result does for each, with the locks taken in the order of
 * (workflow, task) so that two batches never wait on each other in a
 * cycle.  batch is the JSON text (through the funnel) of an array of n
 * objects {"n": its index, "t": task id, "w": worker id, "s": "COMPLETED",
 * "FAILED" or "FAILED_WITH_TERMINAL_ERROR", "o": output object, "r":
 * reason or null}; no task twice and no output above the offload threshold
 * (those go through queue_result_freeing).  fate[n] receives each item's
 * fate; *freed whether a semaphore permit was given back; *workflows
 * (when not NULL; the caller frees it) the ids of the *n_workflows
 * workflows whose tasks were recorded, as a uuid[] literal in id order:
 * the transaction holds their "DecideQueues" rows until it ends (a
 * caller deciding them, decide_load).  False, with nothing recorded, when
 * the statement failed as a whole (e->sqlstate "40P01" for a deadlock the
 * caller may retry item by item).
 */
bool queue_results(struct db *db, const char *queue, const char *batch,
		   size_t n, enum queue_fate *fate, bool *freed,
		   char **workflows, size_t *n_workflows, struct err *e);

/* Runs a worker's statements (a poll's lease, a batch of results) once on
 * a queue no task can be on: a new connection then has the catalog read
 * and the statements planned before a worker waits on it.  Writes
 * nothing. */
bool queue_warm(struct db *db, struct err *e);

/* A system task declared asyncComplete that has done its work: records its
 * output and leaves it IN_PROGRESS with its queue row gone (nothing leases
 * it again, no lease runs out) until the API completes or fails it.
 * *parked is false, and nothing changes, when the task is not declared
 * asyncComplete in its workflow's definition or the lease is not
 * worker's, or the output is above the payload maximum: the caller then
 * records an ordinary result (which fails the task when it is too large).
 * A large output goes to the payload store, as a result's does. */
bool queue_park(struct db *db, const char *queue, const char *task_id,
		const char *worker, const char *output, bool *parked,
		struct err *e);

/* Renews the lease (and the semaphore permit it holds) for lease_seconds
 * from now; ERR_CONFLICT when lost.
 * *expires_out (may be NULL) gets the new expiry as text (free). */
bool queue_heartbeat(struct db *db, const char *queue, const char *task_id,
		     const char *worker, double lease_seconds,
		     char **expires_out, struct err *e);

/* Gives the task back (and its semaphore permit): available again after
 * delay_seconds (0: at once), to any worker; the attempt stays the same.
 * ERR_CONFLICT when lost. */
bool queue_release(struct db *db, const char *queue, const char *task_id,
		   const char *worker, double delay_seconds, struct err *e);

/* The lease sweeper's two passes, each over at most limit rows: deferred
 * rows whose time has come return to the queue; leases that ran out time
 * their attempt out.  The queue names touched are appended to *queues as
 * a JSON array (may be NULL) so waiting polls can be woken. */
bool queue_sweep_deferred(struct db *db, int limit, size_t *n, struct err *e);
bool queue_sweep_expired(struct db *db, int limit, size_t *n, struct err *e);

#endif
