/*
 * systasks — the system-task runner: the engine loops that run the task
 * types node-flow executes itself (INLINE, JSON_JQ_TRANSFORM, HTTP) instead
 * of handing them to an outside worker.
 *
 * The decider queues a system task on "TaskQueues" like any worker task
 * ("<namespace>/<name>", the type denormalised onto the row).  The runner
 * leases rows by type across every queue (queue_lease_system, over
 * "TaskQueues_system_idx", no join), runs them, and records each result
 * with queue_result: the very statement a worker's result goes through, so
 * the task's status, output, history events, retries (per its task
 * definition, or Conductor's defaults without one) and the lease sweeper's
 * timeouts behave exactly as for worker tasks.  A runner that dies
 * mid-task leaves a lease that runs out; the attempt then times out and is
 * retried.  A task declared asyncComplete that succeeds is parked instead
 * (queue_park): IN_PROGRESS with its output and no queue row, until the API
 * completes or fails it.
 *
 * Two executors, chosen per type by the runner's table:
 *   - the pool: `threads` loops, each with its own connection, each leasing
 *     a few tasks at a time and running them one by one (scripts: INLINE,
 *     JSON_JQ_TRANSFORM), so at most `threads` scripts run at once;
 *   - the HTTP loop: one thread with libcurl's multi interface, at most
 *     `http_max_in_flight` requests in flight.
 * Adding a type is adding a row to the table (and a function for the pool,
 * or an executor of its own).
 *
 * Threads: systasks_start/stop from the main thread; systasks_wake from
 * any.  Failure: the loop skeleton's log-and-backoff; a task whose result
 * cannot be recorded keeps its lease until it runs out.
 */
#ifndef NF_ENGINE_SYSTASKS_H
#define NF_ENGINE_SYSTASKS_H

#include <jansson.h>
#include <stdbool.h>

struct systasks_opts {
	const char *database_url;
	int threads;            /* pool loops (scripts) */
	int http_max_in_flight; /* HTTP requests in flight at once */
	int interval_ms;        /* idle poll interval */
	int script_timeout_ms;  /* time limit of one script */
};

/* Starts the runner's loops.  Call once. */
void systasks_start(const struct systasks_opts *o);
/* Stops them and waits; HTTP requests in flight are given back to their
 * queue (available again at once, same attempt). */
void systasks_stop(void);
/* New work may be queued: every runner loop looks now. */
void systasks_wake(void);

struct dsl_errors;
struct wf_def;
struct wf_task;

/* The task-kind table's validate hooks (task_kind.h) for INLINE,
 * JSON_JQ_TRANSFORM and HTTP: the inputs each cannot run without, where
 * the definition states them literally (a `${...}` value is only known at
 * run time), reported at the task's inputParameters. */
void systasks_validate_inline(struct wf_task *t, const struct wf_def *def,
			      struct dsl_errors *errs);
void systasks_validate_jq(struct wf_task *t, const struct wf_def *def,
			  struct dsl_errors *errs);
void systasks_validate_http(struct wf_task *t, const struct wf_def *def,
			    struct dsl_errors *errs);

/* Whether the runner executes tasks of this type. */
bool systasks_handles(const char *type);
/* The types the runner executes, for checks: *n gets their number. */
const char *const *systasks_types(size_t *n);

#endif
