#include "engine/workers.h"

#include "engine/decide_batch.h"
#include "engine/decide_loop.h"
#include "engine/defcache.h"
#include "engine/queue_signal.h"
#include "engine/worker_polls.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "store/payload_repo.h"
#include "store/semaphores_repo.h"
#include "util/json.h"
#include "util/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_LEASE_SECONDS = 3600 };

void
workers_queue_name(const struct queue_ref *q, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", q->ns_name, q->task);
}

static _Atomic int default_permits = 1;

void
workers_set_semaphore_default_permits(int permits)
{
	default_permits = permits;
}

int
workers_semaphore_default_permits(void)
{
	return default_permits;
}

static double
lease_of(const struct task_def *td)
{
	double s = td ? (double)td->response_timeout_seconds : 0;
	return s > 0 ? s : DEFAULT_LEASE_SECONDS;
}

static double
lease_seconds(struct db *db, const struct queue_ref *q)
{
	struct def_ref d;
	struct err e = ERR_INIT;
	if (!defcache_task(db, q->ns_id, q->task, &d, &e))
		return DEFAULT_LEASE_SECONDS;
	double s = lease_of(d.task);
	defcache_release(&d);
	return s;
}

/* Whether the definition has flow control; fills g. */
static bool
gate_of(const struct queue_ref *q, const struct task_def *td,
	struct queue_gate *g)
{
	*g = (struct queue_gate){.ns_id = q->ns_id,
				 .default_permits = default_permits};
	if (!td)
		return false;
	g->semaphore = td->semaphore;
	g->concurrent_limit = td->concurrent_exec_limit;
	g->rate_limit = td->rate_limit_per_frequency;
	g->rate_seconds = td->rate_limit_frequency_seconds;
	return g->semaphore || g->concurrent_limit > 0 || g->rate_limit > 0;
}

static struct metric *m_looks, *m_empty, *m_skipped;
static struct metric *m_decided, *m_decide_failed, *m_decisions;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void
register_metrics(void)
{
	m_looks = metric_register(METRIC_COUNTER, "nodeflow_queue_looks_total",
				  "",
				  "Times a poll looked for tasks to lease "
				  "(a parked poll looks again on every wake)");
	m_empty = metric_register(METRIC_COUNTER,
				  "nodeflow_queue_looks_empty_total", "",
				  "Looks that found no task to lease");
	m_skipped = metric_register(
		METRIC_COUNTER, "nodeflow_queue_looks_skipped_total", "",
		"Polls that parked without looking: a look since the last "
		"wake of their queue had found it empty");
	m_decided = metric_register(
		METRIC_COUNTER, "nodeflow_result_decided_total", "",
		"Workflows whose next step was decided in the transaction of a "
		"worker's results.");
	m_decide_failed = metric_register(
		METRIC_COUNTER, "nodeflow_result_decide_failures_total", "",
		"Batches of results whose workflows could not be decided with "
		"them (written without, for the deciders).");
	m_decisions =
		metric_register(METRIC_COUNTER, "nodeflow_decisions_total", "",
				"Workflow evaluations applied");
}

/* Appends the JSON array text more to *json (both arrays). */
static void
append_tasks(char **json, const char *more)
{
	json_t *a = json_loads(*json, 0, NULL);
	json_t *b = json_loads(more, 0, NULL);
	if (a && b) {
		json_array_extend(a, b);
		char *text = json_dumps(a, JSON_COMPACT);
		if (text) {
			free(*json);
			*json = text;
		}
	}
	json_decref(a);
	json_decref(b);
}

bool
workers_poll(struct db *db, const struct queue_ref *q, const char *worker,
	     int count, char **json_out, size_t *n, bool *plainly_drained,
	     struct err *e)
{
	bool drained = false;
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	worker_polls_note(q->ns_id, queue, worker);
	struct def_ref d = {0};
	struct err de = ERR_INIT;
	const struct task_def *td =
		defcache_task(db, q->ns_id, q->task, &d, &de) ? d.task : NULL;
	double secs = lease_of(td);
	struct queue_gate g;
	bool ok;
	if (gate_of(q, td, &g)) {
		ok = queue_lease_gated(db, queue, worker, count, secs, &g,
				       json_out, n, e);
	} else {
		/* The hot path: one statement.  Rows carrying a workflow
		 * task's own semaphore are passed over and, only when there
		 * are some, leased through the gate. */
		size_t passed = 0;
		ok = queue_lease_ungated(db, queue, worker, count, secs,
					 json_out, n, &passed, e);
		/* Fewer than asked: the scan ran out of rows before its
		 * limit, so nothing unleased was left but rows other
		 * leases had locked (which they take). */
		drained = ok && *n < (size_t)count && passed == 0;
		if (ok && passed && *n < (size_t)count) {
			char *more;
			size_t m;
			ok = queue_lease_gated(db, queue, worker,
					       count - (int)*n, secs, &g, &more,
					       &m, e);
			if (ok && m) {
				append_tasks(json_out, more);
				*n += m;
			}
			if (ok)
				free(more);
			else {
				free(*json_out);
				*json_out = NULL;
			}
		}
	}
	defcache_release(&d);
	pthread_once(&metrics_once, register_metrics);
	metric_add(m_looks, 1);
	if (ok && *n == 0)
		metric_add(m_empty, 1);
	if (plainly_drained)
		*plainly_drained = drained;
	return ok;
}

void
workers_poll_skipped(const struct queue_ref *q, const char *worker)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	worker_polls_note(q->ns_id, queue, worker);
	pthread_once(&metrics_once, register_metrics);
	metric_add(m_skipped, 1);
}

long
workers_retry_ms(struct db *db, const struct queue_ref *q)
{
	struct def_ref d;
	struct err e = ERR_INIT;
	if (!defcache_task(db, q->ns_id, q->task, &d, &e))
		return 0;
	long ms = 0;
	const struct task_def *td = d.task;
	if (td && td->rate_limit_per_frequency > 0) {
		char queue[512];
		workers_queue_name(q, queue, sizeof(queue));
		if (!semaphores_rate_window_ms(
			    db, q->ns_id, queue, td->rate_limit_per_frequency,
			    td->rate_limit_frequency_seconds, &ms, &e))
			ms = 0;
	}
	defcache_release(&d);
	return ms;
}

/* Whether q's definition has a concurrentExecLimit: a task of it that
 * ends, or is given back, lets another out. */
static bool
has_concurrent_limit(struct db *db, const struct queue_ref *q)
{
	struct def_ref d;
	struct err e = ERR_INIT;
	if (!defcache_task(db, q->ns_id, q->task, &d, &e))
		return false;
	bool yes = d.task && d.task->concurrent_exec_limit > 0;
	defcache_release(&d);
	return yes;
}

/* Wakes polls of q waiting on every replica, enough for `places` tasks
 * (best effort: a lost signal costs a poll its wait). */
static void
signal_queue(struct db *db, const struct queue_ref *q, size_t places)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	json_t *queues = json_object();
	queue_signal_add(queues, queue, places);
	struct err se = ERR_INIT;
	(void)queue_signal_send(db, queues, &se);
	queue_signal_local(queues);
	json_decref(queues);
}

static atomic_bool results_decide = false;
static atomic_int retry_budget = 600;

void
workers_set_results_decide(bool on, int retry_budget_per_minute)
{
	pthread_once(&metrics_once, register_metrics);
	atomic_store(&results_decide, on);
	atomic_store(&retry_budget, retry_budget_per_minute);
}

/*
 * Results may decide what follows them in their own transaction (off by
 * default: a commit saved on every step is a workflow's latency at low
 * load, the 5-task chain's p50 27-28 against 30-41 ms at 25 workflows/s,
 * but the decisions of a few workflows each cost far more than a
 * decider's shared batch, and they keep a worker waiting for its answer:
 * paced at 200 5-task workflows/s the chain's p50 was 0.38-0.57 s against
 * 0.28-0.36 s; docs/benchmarks.md).  The results'
 * statement upserts their workflows' "DecideQueues" rows, so the
 * transaction holds them as a decider's claim would (a decider passes over
 * them, SKIP LOCKED; one that had claimed a row first is waited for), and
 * the deciders' own batch (decide_batch.h) evaluates and writes those
 * workflows, removing the rows again, before the one commit.  A decision
 * whose version guard failed leaves its workflow queued, for the
 * deciders.  When the decisions fail, the results are written again
 * without them, for the deciders: deciding never fails a result.
 */

/* The decisions of the n workflows of ids (a uuid[] literal) whose rows
 * the caller's transaction holds, then its commit.  False: the caller
 * rolls back. */
static bool
decide_and_commit(struct db *db, const char *ids, size_t n, struct err *e)
{
	struct decide_run r;
	decide_run_init(&r, db, atomic_load(&retry_budget));
	bool ok = decide_batch_held(&r, ids, n, e) == DECIDE_OK;
	if (ok && json_object_size(r.queues))
		ok = queue_signal_send(db, r.queues, e);
	ok = ok && db_commit(db, e);
	if (ok) {
		metric_add(m_decided, (long long)n);
		metric_add(m_decisions, r.decisions);
		decide_run_signal(&r);
		if (r.left_queued)
			decide_loop_wake();
	}
	decide_run_free(&r);
	return ok;
}

static void
undecided(size_t n, struct err *e)
{
	metric_add(m_decide_failed, 1);
	log_warn("results",
		 "the workflows of %zu result(s) were not decided with them "
		 "(%s): the deciders decide them",
		 n, e->msg);
	*e = (struct err)ERR_INIT;
}

/* A batch's results (queue_results), with their workflows' decisions
 * when they can be (*decided). */
static bool
write_results(struct db *db, const char *queue, const char *text, size_t m,
	      enum queue_fate *fate, bool *freed, bool *decided, struct err *e)
{
	pthread_once(&metrics_once, register_metrics);
	*decided = false;
	if (atomic_load(&results_decide)) {
		/* The decisions' statements were written for their generic
		 * plans, which the pool's connections would replan on every
		 * call. */
		if (!db_begin_generic(db, e))
			return false;
		char *ids = NULL;
		size_t n_ids = 0;
		if (!queue_results(db, queue, text, m, fate, freed, &ids,
				   &n_ids, e)) {
			db_rollback(db);
			return false;
		}
		*decided = decide_and_commit(db, ids, n_ids, e);
		free(ids);
		if (*decided)
			return true;
		db_rollback(db);
		undecided(m, e);
	}
	return queue_results(db, queue, text, m, fate, freed, NULL, NULL, e);
}

/* One result (queue_result_freeing), with its workflow's decisions when
 * they can be (*decided). */
static bool
write_result(struct db *db, const char *queue, const char *task_id,
	     const char *worker, bool any_holder,
	     enum task_result_status status, const char *output,
	     const char *reason, bool *freed, bool *decided, struct err *e)
{
	pthread_once(&metrics_once, register_metrics);
	*decided = false;
	if (atomic_load(&results_decide)) {
		char wf[37] = "", ids[40];
		if (!db_begin_generic(db, e))
			return false;
		if (!queue_result_freeing(db, queue, task_id, worker,
					  any_holder, status, output, reason,
					  freed, wf, e)) {
			db_rollback(db);
			return false;
		}
		snprintf(ids, sizeof(ids), "{%s}", wf);
		*decided = decide_and_commit(db, ids, 1, e);
		if (*decided)
			return true;
		db_rollback(db);
		undecided(1, e);
	}
	return queue_result_freeing(db, queue, task_id, worker, any_holder,
				    status, output, reason, freed, NULL, e);
}

static bool
result(struct db *db, const struct queue_ref *q, const char *task_id,
       const char *worker, bool any_holder, enum task_result_status status,
       const json_t *output, const char *reason, struct err *e)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	char *text = json_db_text(output);
	bool freed = false, decided = false;
	bool ok = write_result(db, queue, task_id, worker, any_holder, status,
			       text, reason, &freed, &decided, e);
	free(text);
	if (ok && !decided)
		decide_loop_wake();
	if (ok && (freed || has_concurrent_limit(db, q))) {
		/* A permit, or a place under the concurrentExecLimit, came
		 * back: polls of this queue waiting on it look again (other
		 * queues sharing the semaphore look at their next poll, or at
		 * the end of their wait). */
		signal_queue(db, q, 1);
	}
	return ok;
}

bool
workers_result(struct db *db, const struct queue_ref *q, const char *task_id,
	       const char *worker, enum task_result_status status,
	       const json_t *output, const char *reason, struct err *e)
{
	return result(db, q, task_id, worker, false, status, output, reason, e);
}

static const char *const status_names[] = {
	[RESULT_COMPLETED] = "COMPLETED",
	[RESULT_FAILED] = "FAILED",
	[RESULT_FAILED_WITH_TERMINAL_ERROR] = "FAILED_WITH_TERMINAL_ERROR",
};

static bool
named_before(const struct worker_result *r, size_t k)
{
	for (size_t j = 0; j < k; j++)
		if (strcmp(r[j].task_id, r[k].task_id) == 0)
			return true;
	return false;
}

void
workers_results(struct db *db, const struct queue_ref *q,
		struct worker_result *r, size_t n)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	/* The batch: every item but those recorded one at a time. */
	json_t *batch = json_array();
	size_t *index = xcalloc(n ? n : 1, sizeof(*index));
	bool *alone = xcalloc(n ? n : 1, sizeof(*alone));
	size_t m = 0;
	long offload = payload_offload_bytes();
	for (size_t k = 0; k < n; k++) {
		r[k].ok = false;
		r[k].e = (struct err)ERR_INIT;
		/* The encoded size, without encoding it twice (an output this
		 * large or near it takes the single path, which decides). */
		bool big = (long)json_dumpb(r[k].output, NULL, 0,
					    JSON_COMPACT) > offload;
		if (big || named_before(r, k)) {
			alone[k] = true;
			continue;
		}
		json_array_append_new(
			batch,
			json_pack("{s:I,s:s,s:s,s:s,s:O,s:s?}", "n",
				  (json_int_t)m, "t", r[k].task_id, "w",
				  r[k].worker, "s", status_names[r[k].status],
				  "o", r[k].output, "r", r[k].reason));
		index[m++] = k;
	}
	bool freed = false, any = false, decided = false;
	if (m) {
		enum queue_fate *fate = xcalloc(m, sizeof(*fate));
		char *text = json_db_text(batch);
		struct err e = ERR_INIT;
		if (write_results(db, queue, text, m, fate, &freed, &decided,
				  &e)) {
			for (size_t j = 0; j < m; j++) {
				struct worker_result *x = &r[index[j]];
				x->ok = fate[j] == QUEUE_FATE_DONE;
				any = any || x->ok;
				if (fate[j] == QUEUE_FATE_FINISHED)
					err_set(&x->e, ERR_CONFLICT,
						"task %s is already finished",
						x->task_id);
				else if (fate[j] == QUEUE_FATE_NOT_LEASED)
					err_set(&x->e, ERR_CONFLICT,
						"task %s is not leased to "
						"worker %.80s on queue %.120s "
						"(its lease was lost or it "
						"does not exist)",
						x->task_id, x->worker, queue);
			}
		} else {
			/* Refused as a whole (a deadlock with another
			 * batch, a lost connection): one at a time, each
			 * with its own answer. */
			for (size_t j = 0; j < m; j++)
				alone[index[j]] = true;
		}
		free(text);
		free(fate);
	}
	json_decref(batch);
	free(index);
	if (any && !decided)
		decide_loop_wake();
	if (freed || (any && has_concurrent_limit(db, q)))
		signal_queue(db, q, n); /* as result() does */
	for (size_t k = 0; k < n; k++)
		if (alone[k])
			r[k].ok = result(db, q, r[k].task_id, r[k].worker,
					 false, r[k].status, r[k].output,
					 r[k].reason, &r[k].e);
	free(alone);
}

bool
workers_result_any(struct db *db, const struct queue_ref *q,
		   const char *task_id, const char *worker,
		   enum task_result_status status, const json_t *output,
		   const char *reason, struct err *e)
{
	return result(db, q, task_id, worker, true, status, output, reason, e);
}

bool
workers_heartbeat(struct db *db, const struct queue_ref *q, const char *task_id,
		  const char *worker, char **expires_out, struct err *e)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	return queue_heartbeat(db, queue, task_id, worker, lease_seconds(db, q),
			       expires_out, e);
}

bool
workers_release(struct db *db, const struct queue_ref *q, const char *task_id,
		const char *worker, double delay_seconds, struct err *e)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	bool ok = queue_release(db, queue, task_id, worker, delay_seconds, e);
	if (ok && has_concurrent_limit(db, q))
		signal_queue(db, q, 1);
	return ok;
}
