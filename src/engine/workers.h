/*
 * workers — what the worker API does: lease tasks of a queue, record
 * results, renew and give back leases.
 *
 * A queue is named by its task definition within a namespace; its rows
 * carry "<namespace>/<task name>" so namespaces never share a queue.  A
 * lease lasts the task definition's responseTimeoutSeconds (Conductor's
 * default of 3600 s without a definition); a heartbeat renews it for as
 * long again.
 *
 * Threads: any (the caller's connection).  Ownership: JSON text returned is
 * the caller's (free).  Failure: false with e set; ERR_CONFLICT when the
 * worker does not hold the task's lease.
 */
#ifndef NF_ENGINE_WORKERS_H
#define NF_ENGINE_WORKERS_H

#include "store/queue_repo.h"
#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct db;

struct queue_ref {
	const char *ns_id;
	const char *ns_name;
	const char *task; /* the queue's task definition name */
};

/* The queue's row name, "<namespace>/<task>", into out. */
void workers_queue_name(const struct queue_ref *q, char *out, size_t size);

/*
 * Leases up to count tasks of the queue.  Flow control (docs/dsl.md): a
 * definition with a semaphore, a concurrentExecLimit or a rate limit is
 * leased through queue_lease_gated; one without is one statement, which
 * passes over rows that carry a workflow task's own semaphore and then
 * leases those through the gate.  A limit makes a poll return fewer tasks,
 * never fail.  *plainly_drained (may be NULL): on a queue without flow
 * control, with nothing passed over, fewer tasks than count were found (none
 * included), so the queue holds no task another look could lease, and only
 * new work, which is always signalled, can change that.
 */
bool workers_poll(struct db *db, const struct queue_ref *q, const char *worker,
		  int count, char **json_out, size_t *n, bool *plainly_drained,
		  struct err *e);
/* A poll that parks without looking (http_known_empty): counted, and the
 * worker's poll noted as a look would. */
void workers_poll_skipped(const struct queue_ref *q, const char *worker);

/*
 * After a poll of q that got nothing, when to look again before its wait
 * ends: the milliseconds until the rate-limit window of q's definition
 * rolls over when that window is full and tasks wait; 0 otherwise (a
 * semaphore permit or a concurrentExecLimit place that comes back wakes
 * the queue's polls through queue_signal instead).  Errors count as 0.
 */
long workers_retry_ms(struct db *db, const struct queue_ref *q);

/* The permits of a semaphore that has no configuration (the server's
 * --semaphore-default-permits; 1 until set).  Set once at start-up. */
void workers_set_semaphore_default_permits(int permits);
int workers_semaphore_default_permits(void);
bool workers_result(struct db *db, const struct queue_ref *q,
		    const char *task_id, const char *worker,
		    enum task_result_status status, const json_t *output,
		    const char *reason, struct err *e);
/* Whether results (workers_result, workers_results) also decide what
 * follows in the workflows they touched, in their own transaction (off
 * until set; the server's --results-decide), and the retry budget those
 * decisions keep to (decide_batch.h).  Set once at start-up. */
void workers_set_results_decide(bool on, int retry_budget_per_minute);

/* One result of a batch (workers_results): the inputs, then its fate. */
struct worker_result {
	const char *task_id;
	const char *worker;
	enum task_result_status status;
	const json_t *output; /* an object */
	const char *reason;   /* or NULL */
	bool ok;              /* out: recorded */
	struct err e;         /* out: why not */
};

/* Many results of one queue, each with the fate workers_result would give
 * it, committed together: one statement and one commit for all the small
 * ones, with the decisions of the workflows they touched
 * (workers_set_results_decide; a batch whose decisions fail is written
 * without them, for the deciders); an output to offload, a task named
 * twice, or a batch the database refused as a whole (a deadlock) is
 * recorded one at a time. */
void workers_results(struct db *db, const struct queue_ref *q,
		     struct worker_result *r, size_t n);
/* workers_result for whoever reports it (Conductor's task update): the
 * task may be leased to another worker or to none. */
bool workers_result_any(struct db *db, const struct queue_ref *q,
			const char *task_id, const char *worker,
			enum task_result_status status, const json_t *output,
			const char *reason, struct err *e);
bool workers_heartbeat(struct db *db, const struct queue_ref *q,
		       const char *task_id, const char *worker,
		       char **expires_out, struct err *e);
bool workers_release(struct db *db, const struct queue_ref *q,
		     const char *task_id, const char *worker,
		     double delay_seconds, struct err *e);

#endif
