#include "engine/decide_loop.h"

#include "engine/decider.h"
#include "engine/defcache.h"
#include "engine/queue_signal.h"
#include "engine/subflows.h"
#include "engine/systasks.h"
#include "engine/task_kind.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/cache_repo.h"
#include "store/db.h"
#include "store/decide_repo.h"
#include "store/timers_repo.h"
#include "util/json.h"
#include "util/mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { IDLE_MS = 200, POSTPONE_MS = 5000, MAX_LOOPS = 16 };

struct decide_loop {
	struct loop_def def;
	struct decide_loop_opts opts;
	char *url;
	struct db *db;
	struct metric *m_decisions;
	struct metric *m_failures;
	bool system_enqueued; /* this batch queued a system task */
	bool guarded;         /* the next batch takes savepoints */
	long long decisions;  /* applied in this batch, counted at commit */
};

static pthread_mutex_t loops_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop *loops[MAX_LOOPS];
static size_t n_loops;

/* The task definitions one evaluation looked up, released after it. */
struct lookups {
	struct db *db;
	const char *ns_id;
	struct def_ref refs[64];
	size_t n;
};

static const struct task_def *
lookup_task_def(void *arg, const char *name)
{
	struct lookups *l = arg;
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->refs[i].task->name, name) == 0)
			return l->refs[i].task;
	if (l->n == sizeof(l->refs) / sizeof(l->refs[0]))
		return NULL;
	struct err e = ERR_INIT;
	if (!defcache_task(l->db, l->ns_id, name, &l->refs[l->n], &e))
		return NULL; /* Conductor's defaults apply */
	return l->refs[l->n++].task;
}

/* A failed look-up is a miss: the task runs. */
static json_t *
lookup_cache(void *arg, const char *name, const char *key)
{
	struct lookups *l = arg;
	json_t *hit = NULL;
	struct err e = ERR_INIT;
	if (!cache_get(l->db, l->ns_id, name, key, &hit, &e))
		return NULL;
	return hit;
}

static void
release_lookups(struct lookups *l)
{
	for (size_t i = 0; i < l->n; i++)
		defcache_release(&l->refs[i]);
	l->n = 0;
}

/* Over budget, a retry waits at least a minute. */
static bool
apply_retry_budget(struct decide_loop *dl, const struct loaded_execution *x,
		   struct decision *d, struct err *e)
{
	size_t i;
	json_t *idx;
	json_array_foreach (d->retries, i, idx) {
		json_t *row = json_array_get(d->tasks,
					     (size_t)json_integer_value(idx));
		const char *def =
			json_string_value(json_object_get(row, "taskDefName"));
		int recent;
		if (!decide_recent_retries(dl->db, x->ns_id, def,
					   dl->opts.retry_budget_per_minute + 1,
					   &recent, e))
			return false;
		if (recent > dl->opts.retry_budget_per_minute) {
			json_int_t delay = json_integer_value(
				json_object_get(row, "delaySeconds"));
			if (delay < 60)
				json_object_set_new(row, "delaySeconds",
						    json_integer(60));
			log_warn(
				"decider",
				"retry budget of task %s exhausted (%d retries in "
				"the last minute): retry of workflow %s delayed",
				def, recent, x->id);
		}
	}
	return true;
}

/* The deadlines the decision armed and cancelled (store/timers_repo.h),
 * in the evaluation's transaction; nothing to do for most evaluations. */
static bool
apply_timers(const struct loaded_execution *x, struct db *db,
	     const struct decision *d, struct err *e)
{
	bool ok = true;
	if (json_array_size(d->timers)) {
		char *text = json_db_text(d->timers);
		ok = timers_arm_tasks(db, x->id, x->ns_id, text, e);
		free(text);
	}
	if (ok && d->disarm_all) {
		ok = timers_disarm(db, x->id, NULL, NULL, e);
	} else if (ok && json_array_size(d->disarm)) {
		char *ids = json_db_text(d->disarm);
		char *since = json_db_text(d->disarm_since);
		ok = timers_disarm(db, x->id, ids, since, e);
		free(ids);
		free(since);
	}
	return ok;
}

/* What the decision's sub-workflow, wait and event rows ask for, and, when
 * it ended the workflow, its parent, children and failure workflow
 * (engine/subflows.h), in the evaluation's transaction. */
static bool
apply_subflows(const struct loaded_execution *x, struct db *db,
	       const struct decision *d, json_t *touched, struct err *e)
{
	if (!subflows_apply(db, x, d->tasks, e))
		return false;
	const char *status =
		json_string_value(json_object_get(d->update, "status"));
	if (!status || strcmp(status, "RUNNING") == 0 ||
	    strcmp(status, "PAUSED") == 0)
		return true;
	/* Only a failure starts the failure workflow: a completed one need
	 * not look its definition up. */
	bool failed = strcmp(status, "FAILED") == 0 ||
		      strcmp(status, "TIMED_OUT") == 0;
	return subflows_workflow_ended(db, x->ns_id, x->id, failed, touched, e);
}

static bool
listed(const json_t *ids, const char *id)
{
	size_t i;
	json_t *v;
	json_array_foreach (ids, i, v)
		if (strcmp(json_string_value(v), id) == 0)
			return true;
	return false;
}

enum eval_result {
	EVAL_OK,   /* applied, skipped, or (guarded) postponed */
	EVAL_REDO, /* (unguarded) something failed: redo the batch guarded */
	EVAL_LOST, /* the transaction is lost (a savepoint failed) */
};

/*
 * Evaluates and applies one workflow.  Batches are optimistic: nothing
 * fails in nearly all of them, so an evaluation takes no savepoint of its
 * own (two round trips fewer each).  When one does fail, the batch is
 * rolled back and done again `guarded`: each evaluation under a savepoint,
 * a failed one rolled back to it and postponed while the others commit.
 * A version guard that fails writes nothing, guarded or not (the
 * evaluation is simply done again in a later batch).
 */
static enum eval_result
evaluate_one(struct decide_loop *dl, const struct loaded_execution *x,
	     const struct wf_def *def, bool guarded, json_t *queues,
	     json_t *touched, struct err *e)
{
	/* An earlier evaluation of this batch changed it (a child of it
	 * ended): what was loaded is stale.  It stays queued (that change
	 * enqueued it) for the next batch. */
	if (listed(touched, x->id))
		return EVAL_OK;
	if (guarded && !decide_savepoint(dl->db, e))
		return EVAL_LOST;
	struct err we = ERR_INIT;
	bool ok = true;
	if (!def) {
		ok = false;
		err_set(&we, ERR_INTERNAL,
			"definition %s version %d unavailable", x->def_name,
			x->def_version);
	}
	struct lookups lk = {.db = dl->db, .ns_id = x->ns_id};
	struct decision d = {0};
	if (ok) {
		struct decider_input in = {def, x, lookup_task_def, &lk,
					   lookup_cache};
		decide(&in, &d);
		ok = apply_retry_budget(dl, x, &d, &we);
	}
	bool applied = true;
	if (ok && d.changed) {
		struct decide_rows rows = {d.update, d.tasks, d.seen, d.cancel,
					   d.events};
		ok = decide_apply(dl->db, x, &rows, &applied, &we) &&
		     (!applied ||
		      (apply_timers(x, dl->db, &d, &we) &&
		       apply_subflows(x, dl->db, &d, touched, &we)));
	} else if (ok) {
		ok = decide_dequeue(dl->db, x->id, &we);
	}
	if (ok && applied) {
		size_t i;
		json_t *row;
		json_array_foreach (d.tasks, i, row) {
			json_t *q = json_object_get(row, "queueName");
			if (q)
				json_array_append(queues, q);
			const char *type = json_string_value(
				json_object_get(row, "taskType"));
			const struct task_kind *k =
				type ? task_kind_find(type) : NULL;
			if (k && k->exec == TASK_EXEC_SYSTEM)
				dl->system_enqueued = true;
		}
		dl->decisions++;
	}
	decision_free(&d);
	release_lookups(&lk);
	if (!guarded) {
		if (ok)
			return EVAL_OK;
		log_warn("decider",
			 "workflow %s: %s (its batch is done again, each "
			 "evaluation apart)",
			 x->id, we.msg);
		return EVAL_REDO;
	}
	if (ok && applied)
		return decide_release_savepoint(dl->db, e) ? EVAL_OK
							   : EVAL_LOST;

	decide_rollback_savepoint(dl->db);
	if (!ok) {
		/* Leave it queued, due again later; the rest of the batch
		 * goes on. */
		metric_add(dl->m_failures, 1);
		log_error("decider", "workflow %s: %s (evaluation postponed)",
			  x->id, we.msg);
		if (!decide_postpone(dl->db, x->id, POSTPONE_MS, "failed", e))
			return EVAL_LOST;
	}
	/* Not applied: the version changed; it stays queued and is evaluated
	 * again in a later batch. */
	return decide_release_savepoint(dl->db, e) ? EVAL_OK : EVAL_LOST;
}

/* Oldest id first.  Every batch then takes the row locks of its executions
 * in one order (a parent's UUIDv7 is older than its children's), as
 * terminate does (the parent, then its children): they queue behind each
 * other instead of deadlocking. */
static int
by_id(const void *a, const void *b)
{
	return strcmp(((const struct loaded_execution *)a)->id,
		      ((const struct loaded_execution *)b)->id);
}

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct decide_loop *dl = arg;
	(void)scratch;
	if (dl->db && !db_healthy(dl->db)) {
		db_close(dl->db);
		dl->db = NULL;
	}
	if (!dl->db && !db_open(&dl->db, dl->url, DB_PLAIN, e))
		return LOOP_ERROR;

	struct decide_batch b = {0};
	if (!db_begin(dl->db, e) ||
	    !decide_claim(dl->db, dl->opts.batch_size, &b, e)) {
		db_rollback(dl->db);
		return LOOP_ERROR;
	}
	if (b.n == 0) {
		bool ok = db_commit(dl->db, e);
		decide_batch_free(&b);
		return ok ? LOOP_IDLE : LOOP_ERROR;
	}
	qsort(b.items, b.n, sizeof(*b.items), by_id);

	struct def_ref *defs = xcalloc(b.n, sizeof(*defs));
	json_t **refs = xcalloc(b.n, sizeof(*refs));
	for (size_t i = 0; i < b.n; i++) {
		struct err de = ERR_INIT;
		bool have =
			b.items[i].definition
				? defcache_snapshot(b.items[i].definition,
						    &defs[i], &de)
				: defcache_workflow(dl->db, b.items[i].ns_id,
						    b.items[i].def_name,
						    b.items[i].def_version,
						    &defs[i], &de);
		if (have)
			refs[i] = decider_refs_to_load(defs[i].wf);
		else
			refs[i] = json_array();
	}
	json_t *queues = json_array();
	json_t *touched = json_array();
	bool guarded = dl->guarded;
	dl->guarded = false;
	bool ok = decide_load_tasks(dl->db, &b, refs, e);
	bool redo = false;
	for (size_t i = 0; ok && !redo && i < b.n; i++) {
		enum eval_result r = evaluate_one(dl, &b.items[i], defs[i].wf,
						  guarded, queues, touched, e);
		ok = r != EVAL_LOST;
		redo = r == EVAL_REDO;
	}
	if (redo) { /* at once, each evaluation apart */
		db_rollback(dl->db);
		dl->guarded = true;
		dl->system_enqueued = false;
		json_array_clear(queues);
	}
	ok = ok && !redo && db_commit(dl->db, e);
	if (ok)
		metric_add(dl->m_decisions, dl->decisions);
	dl->decisions = 0;
	if (ok && dl->system_enqueued) /* this process's runner looks now */
		systasks_wake();
	dl->system_enqueued = false;
	if (!ok && !redo)
		db_rollback(dl->db);
	else if (ok && json_array_size(queues)) {
		/* Parked polls here are woken directly; other replicas' by one
		 * notification for the whole batch. */
		if (dl->opts.on_enqueued)
			dl->opts.on_enqueued(queues, dl->opts.arg);
		struct err se = ERR_INIT;
		if (!queue_signal_send(dl->db, queues, &se))
			log_warn("decider", "could not signal queues: %s",
				 se.msg);
	}

	for (size_t i = 0; i < b.n; i++) {
		defcache_release(&defs[i]);
		json_decref(refs[i]);
	}
	free(defs);
	free(refs);
	json_decref(queues);
	json_decref(touched);
	decide_batch_free(&b);
	/* Busy until a claim comes back empty: work may have arrived meanwhile.
	 */
	return ok || redo ? LOOP_BUSY : LOOP_ERROR;
}

static void
finish(void *arg)
{
	struct decide_loop *dl = arg;
	db_close(dl->db);
	free(dl->url);
	free(dl);
}

void
decide_loop_start(const struct decide_loop_opts *o)
{
	struct decide_loop *dl = xcalloc(1, sizeof(*dl));
	dl->opts = *o;
	dl->url = xstrdup(o->database_url);
	dl->def = (struct loop_def){
		.name = "decider",
		.tick = tick,
		.finish = finish,
		.interval_ms = IDLE_MS,
		.max_backoff_ms = 10000,
	};
	dl->m_decisions =
		metric_register(METRIC_COUNTER, "nodeflow_decisions_total", "",
				"Workflow evaluations applied");
	dl->m_failures = metric_register(
		METRIC_COUNTER, "nodeflow_decision_failures_total", "",
		"Workflow evaluations that failed and were postponed");
	struct loop *l = loop_start(&dl->def, dl);
	pthread_mutex_lock(&loops_lock);
	if (n_loops < MAX_LOOPS)
		loops[n_loops++] = l;
	pthread_mutex_unlock(&loops_lock);
}

void
decide_loops_stop(void)
{
	pthread_mutex_lock(&loops_lock);
	size_t n = n_loops;
	struct loop *stopping[MAX_LOOPS];
	memcpy(stopping, loops, n * sizeof(*loops));
	n_loops = 0;
	pthread_mutex_unlock(&loops_lock);
	for (size_t i = 0; i < n; i++)
		loop_stop(stopping[i]);
}

void
decide_loop_wake_all(void)
{
	pthread_mutex_lock(&loops_lock);
	for (size_t i = 0; i < n_loops; i++)
		loop_wake(loops[i]);
	pthread_mutex_unlock(&loops_lock);
}
