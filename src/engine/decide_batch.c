#include "engine/decide_batch.h"

#include "engine/decider.h"
#include "engine/defcache.h"
#include "engine/queue_signal.h"
#include "engine/subflows.h"
#include "engine/systasks.h"
#include "engine/task_kind.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/cache_repo.h"
#include "store/decide_repo.h"
#include "store/timers_repo.h"
#include "util/json.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

/* A failed evaluation is due again this much later (ms). */
enum { POSTPONE_MS = 5000 };

void
decide_run_init(struct decide_run *r, struct db *db,
		int retry_budget_per_minute)
{
	*r = (struct decide_run){
		.db = db,
		.retry_budget_per_minute = retry_budget_per_minute,
		.queues = json_object(),
		.touched = json_array(),
	};
}

void
decide_run_reset(struct decide_run *r)
{
	json_object_clear(r->queues);
	json_array_clear(r->touched);
	r->system_enqueued = false;
	r->left_queued = false;
	r->decisions = 0;
}

void
decide_run_free(struct decide_run *r)
{
	json_decref(r->queues);
	json_decref(r->touched);
	r->queues = r->touched = NULL;
}

void
decide_run_signal(const struct decide_run *r)
{
	if (r->system_enqueued) /* this process's runner looks now */
		systasks_wake();
	queue_signal_local(r->queues); /* parked polls here */
}

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
apply_retry_budget(struct decide_run *r, const struct loaded_execution *x,
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
		if (!decide_recent_retries(r->db, x->ns_id, def,
					   r->retry_budget_per_minute + 1,
					   &recent, e))
			return false;
		if (recent > r->retry_budget_per_minute) {
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
apply_subflows(const struct loaded_execution *x, const struct wf_def *def,
	       struct db *db, const struct decision *d, json_t *touched,
	       struct err *e)
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
	/* A top-level workflow that started no child has no parent to tell
	 * and no child to end: looking cost a statement per workflow. */
	if (!failed && !x->parent_id[0] && !def->starts_children)
		return true;
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

/* Runs the decider on one workflow: d is the caller's to free, whatever
 * the result. */
static bool
evaluate(struct decide_run *r, const struct loaded_execution *x,
	 const struct wf_def *def, struct decision *d, struct err *e)
{
	if (!def) {
		err_set(e, ERR_INTERNAL, "definition %s version %d unavailable",
			x->def_name, x->def_version);
		return false;
	}
	struct lookups lk = {.db = r->db, .ns_id = x->ns_id};
	struct decider_input in = {def, x, lookup_task_def, &lk, lookup_cache};
	decide(&in, d);
	bool ok = apply_retry_budget(r, x, d, e);
	release_lookups(&lk);
	return ok;
}

/* What follows an applied decision in its transaction: its deadlines, its
 * sub-workflows, waits and events, and its ending. */
static bool
after_apply(struct decide_run *r, const struct loaded_execution *x,
	    const struct wf_def *def, const struct decision *d, struct err *e)
{
	return apply_timers(x, r->db, d, e) &&
	       apply_subflows(x, def, r->db, d, r->touched, e);
}

/* An applied evaluation: its queues are signalled after the commit. */
static void
count_applied(struct decide_run *r, const struct decision *d)
{
	size_t i;
	json_t *row;
	json_array_foreach (d->tasks, i, row) {
		const char *q =
			json_string_value(json_object_get(row, "queueName"));
		if (!q)
			continue;
		const char *type =
			json_string_value(json_object_get(row, "taskType"));
		const struct task_kind *k = type ? task_kind_find(type) : NULL;
		if (k && k->exec == TASK_EXEC_SYSTEM) {
			/* for every replica's runners, not for polls */
			queue_signal_add(r->queues, QUEUE_SIGNAL_SYSTEM, 1);
			r->system_enqueued = true;
		} else {
			queue_signal_add(r->queues, q, 1);
		}
	}
	r->decisions++;
}

/* Whether the decision ends its workflow (subflows_workflow_ended follows:
 * its running children are terminated). */
static bool
ends_workflow(const struct decision *d)
{
	const char *status =
		json_string_value(json_object_get(d->update, "status"));
	return status && strcmp(status, "RUNNING") != 0 &&
	       strcmp(status, "PAUSED") != 0;
}

/*
 * Every workflow is evaluated, then every decision is written by one
 * statement (decide_apply_batch), then what follows each applied one
 * (after_apply), in the batch's order.
 *
 * Writing before the after-steps is what one workflow at a time would do,
 * but for one case: a workflow whose decision ends it terminates its
 * running children, which come later in the batch (a child's UUIDv7 is
 * younger).  Their decisions would be written before the terminate and
 * their after-steps (starting their own children…) run after it, so they
 * are not evaluated here: they stay queued for the next batch, as their
 * version guard would have had it (terminate changes the version).  A
 * parent, earlier in the batch, is written before its child's ending
 * completes its task and queues it again, as it was one at a time.
 */
enum decide_result
decide_batch_run(struct decide_run *r, const struct decide_batch *b,
		 const struct wf_def *const *wfs, struct err *e)
{
	struct decision *ds = xcalloc(b->n, sizeof(*ds));
	struct decide_item *items = xcalloc(b->n, sizeof(*items));
	size_t *at = xcalloc(b->n, sizeof(*at));
	json_t *dequeue = json_array(), *ending = json_array();
	size_t n = 0;
	struct err we = ERR_INIT;
	const char *failed = NULL;
	bool ok = true;
	for (size_t i = 0; ok && i < b->n; i++) {
		const struct loaded_execution *x = &b->items[i];
		if (x->parent_id[0] && listed(ending, x->parent_id)) {
			json_array_append_new(ending, json_string(x->id));
			r->left_queued = true;
			continue;
		}
		ok = evaluate(r, x, wfs[i], &ds[i], &we);
		if (!ok) {
			failed = x->id;
		} else if (!ds[i].changed) {
			json_array_append_new(dequeue, json_string(x->id));
		} else {
			if (ends_workflow(&ds[i]))
				json_array_append_new(ending,
						      json_string(x->id));
			items[n] = (struct decide_item){
				x,
				{ds[i].update, ds[i].tasks, ds[i].seen,
				 ds[i].cancel, ds[i].events},
				false};
			at[n++] = i;
		}
	}
	ok = ok &&
	     decide_apply_batch(r->db, items, n, dequeue, !r->own_rows, &we);
	for (size_t k = 0; ok && k < n; k++) {
		if (!items[k].applied) {
			/* the version changed: evaluated again */
			r->left_queued = true;
			continue;
		}
		ok = after_apply(r, items[k].x, wfs[at[k]], &ds[at[k]], &we);
		if (ok)
			count_applied(r, &ds[at[k]]);
		else
			failed = items[k].x->id;
	}
	if (ok)
		r->decisions += (long long)json_array_size(dequeue);
	else if (failed)
		err_set(e, we.code, "workflow %s: %s", failed, we.msg);
	else
		*e = we;
	for (size_t i = 0; i < b->n; i++)
		decision_free(&ds[i]);
	free(ds);
	free(items);
	free(at);
	json_decref(dequeue);
	json_decref(ending);
	return ok ? DECIDE_OK : DECIDE_REDO;
}

/*
 * A version guard that fails writes nothing (the evaluation is simply done
 * again in a later batch).
 */
enum decide_result
decide_batch_one(struct decide_run *r, const struct loaded_execution *x,
		 const struct wf_def *def, struct err *e)
{
	/* An earlier evaluation of this batch changed it (a child of it
	 * ended): what was loaded is stale.  It stays queued (that change
	 * enqueued it) for the next batch. */
	if (listed(r->touched, x->id)) {
		r->left_queued = true;
		return DECIDE_OK;
	}
	if (!decide_savepoint(r->db, e))
		return DECIDE_LOST;
	struct err we = ERR_INIT;
	struct decision d = {0};
	bool ok = evaluate(r, x, def, &d, &we);
	bool applied = true;
	if (ok && d.changed) {
		struct decide_rows rows = {d.update, d.tasks, d.seen, d.cancel,
					   d.events};
		ok = decide_apply(r->db, x, &rows, &applied, &we) &&
		     (!applied || after_apply(r, x, def, &d, &we));
	} else if (ok) {
		ok = decide_dequeue(r->db, x->id, &we);
	}
	if (ok && applied)
		count_applied(r, &d);
	decision_free(&d);
	if (ok && applied)
		return decide_release_savepoint(r->db, e) ? DECIDE_OK
							  : DECIDE_LOST;

	decide_rollback_savepoint(r->db);
	if (!ok) {
		/* Leave it queued, due again later; the rest of the batch
		 * goes on. */
		if (r->m_failures)
			metric_add(r->m_failures, 1);
		log_error("decider", "workflow %s: %s (evaluation postponed)",
			  x->id, we.msg);
		if (!decide_postpone(r->db, x->id, POSTPONE_MS, "failed", e))
			return DECIDE_LOST;
	}
	/* Not applied: the version changed; it stays queued and is evaluated
	 * again in a later batch. */
	if (ok)
		r->left_queued = true;
	return decide_release_savepoint(r->db, e) ? DECIDE_OK : DECIDE_LOST;
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

enum decide_result
decide_batch_decide(struct decide_run *r, struct decide_batch *b, bool guarded,
		    struct err *e)
{
	if (b->n > 1)
		qsort(b->items, b->n, sizeof(*b->items), by_id);
	struct def_ref *defs = xcalloc(b->n + 1, sizeof(*defs));
	const struct wf_def **wfs = xcalloc(b->n + 1, sizeof(*wfs));
	json_t **refs = xcalloc(b->n + 1, sizeof(*refs));
	for (size_t i = 0; i < b->n; i++) {
		const struct loaded_execution *x = &b->items[i];
		struct err de = ERR_INIT;
		bool have = x->definition ? defcache_snapshot(x->definition,
							      &defs[i], &de)
					  : defcache_workflow(r->db, x->ns_id,
							      x->def_name,
							      x->def_version,
							      &defs[i], &de);
		wfs[i] = have ? defs[i].wf : NULL;
		refs[i] =
			have ? decider_refs_to_load(defs[i].wf) : json_array();
	}
	enum decide_result res = DECIDE_LOST;
	if (decide_load_tasks(r->db, b, refs, e)) {
		res = DECIDE_OK;
		if (!guarded)
			res = decide_batch_run(r, b, wfs, e);
		for (size_t i = 0; guarded && res == DECIDE_OK && i < b->n; i++)
			res = decide_batch_one(r, &b->items[i], wfs[i], e);
	}
	for (size_t i = 0; i < b->n; i++) {
		defcache_release(&defs[i]);
		json_decref(refs[i]);
	}
	free(defs);
	free(wfs);
	free(refs);
	return res;
}

enum decide_result
decide_batch_held(struct decide_run *r, const char *ids, size_t n,
		  struct err *e)
{
	if (n == 0)
		return DECIDE_OK;
	struct decide_batch b = {0};
	enum decide_result res = DECIDE_LOST;
	if (decide_load(r->db, ids, n, &b, e))
		res = decide_batch_decide(r, &b, false, e);
	decide_batch_free(&b);
	return res;
}
