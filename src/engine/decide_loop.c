#include "engine/decide_loop.h"

#include "engine/decide_signal.h"
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
#include "util/timeutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* SHARE_AT: a batch this large (or a full one) wakes a resting loop to
 * share what may follow: split over two loops, a batch's work outweighs
 * the cost of a second batch. */
enum { POSTPONE_MS = 5000, MAX_LOOPS = 16, SHARE_AT = 32 };

/* A turn is a batch long (milliseconds).  One that lasts TURN_WAIT_MS is a
 * decider stuck mid-batch (a replica cut off from the database holds its
 * transaction until the server notices): the loop then claims without
 * turns for TURN_SKIP_MS, as every replica's loops did before turns. */
enum { TURN_WAIT_MS = 5000, TURN_SKIP_MS = 60000 };

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
	bool left_queued;     /* this batch left a claimed workflow queued */
	bool backlog;         /* the last batch was large: share, not wait */
	int64_t turns_from;   /* no turns before then (monotonic ms) */
	struct loop *loop;
	atomic_bool working; /* in a tick that claimed work */
};

/* This process's decide loops (under loops_lock), and the next one a wake
 * goes to when all of them are working. */
static pthread_mutex_t loops_lock = PTHREAD_MUTEX_INITIALIZER;
static struct decide_loop *loops[MAX_LOOPS];
static size_t n_loops, next_wake;

/* Wakes one loop other than `except` that is not working, if there is
 * one; the lock is held. */
static bool
wake_resting(const struct decide_loop *except)
{
	for (size_t k = 0; k < n_loops; k++) {
		struct decide_loop *dl = loops[(next_wake + k) % n_loops];
		if (dl != except && !atomic_load(&dl->working)) {
			next_wake = (next_wake + k + 1) % n_loops;
			loop_wake(dl->loop);
			return true;
		}
	}
	return false;
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

enum eval_result {
	EVAL_OK,   /* applied, skipped, or (guarded) postponed */
	EVAL_REDO, /* (unguarded) something failed: redo the batch guarded */
	EVAL_LOST, /* the transaction is lost (a savepoint failed) */
};

/* Runs the decider on one workflow: d is the caller's to free, whatever
 * the result. */
static bool
evaluate(struct decide_loop *dl, const struct loaded_execution *x,
	 const struct wf_def *def, struct decision *d, struct err *e)
{
	if (!def) {
		err_set(e, ERR_INTERNAL, "definition %s version %d unavailable",
			x->def_name, x->def_version);
		return false;
	}
	struct lookups lk = {.db = dl->db, .ns_id = x->ns_id};
	struct decider_input in = {def, x, lookup_task_def, &lk, lookup_cache};
	decide(&in, d);
	bool ok = apply_retry_budget(dl, x, d, e);
	release_lookups(&lk);
	return ok;
}

/* What follows an applied decision in its transaction: its deadlines, its
 * sub-workflows, waits and events, and its ending. */
static bool
after_apply(struct decide_loop *dl, const struct loaded_execution *x,
	    const struct wf_def *def, const struct decision *d, json_t *touched,
	    struct err *e)
{
	return apply_timers(x, dl->db, d, e) &&
	       apply_subflows(x, def, dl->db, d, touched, e);
}

/* An applied evaluation: its queues are signalled after the commit. */
static void
count_applied(struct decide_loop *dl, const struct decision *d, json_t *queues)
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
			queue_signal_add(queues, QUEUE_SIGNAL_SYSTEM, 1);
			dl->system_enqueued = true;
		} else {
			queue_signal_add(queues, q, 1);
		}
	}
	dl->decisions++;
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
 * A batch without savepoints, as nearly all are: every workflow is
 * evaluated, then every decision is written by one statement
 * (decide_apply_batch), then what follows each applied one (after_apply),
 * in the batch's order.  Anything failing redoes the batch guarded.
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
static enum eval_result
evaluate_batch(struct decide_loop *dl, struct decide_batch *b,
	       const struct def_ref *defs, json_t *queues, json_t *touched)
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
			dl->left_queued = true;
			continue;
		}
		ok = evaluate(dl, x, defs[i].wf, &ds[i], &we);
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
	ok = ok && decide_apply_batch(dl->db, items, n, dequeue, &we);
	for (size_t k = 0; ok && k < n; k++) {
		if (!items[k].applied) {
			/* the version changed: evaluated again */
			dl->left_queued = true;
			continue;
		}
		ok = after_apply(dl, items[k].x, defs[at[k]].wf, &ds[at[k]],
				 touched, &we);
		if (ok)
			count_applied(dl, &ds[at[k]], queues);
		else
			failed = items[k].x->id;
	}
	if (ok)
		dl->decisions += (long long)json_array_size(dequeue);
	else
		log_warn("decider",
			 "%s%s: %s (its batch is done again, each evaluation "
			 "apart)",
			 failed ? "workflow " : "a batch of workflows",
			 failed ? failed : "", we.msg);
	for (size_t i = 0; i < b->n; i++)
		decision_free(&ds[i]);
	free(ds);
	free(items);
	free(at);
	json_decref(dequeue);
	json_decref(ending);
	return ok ? EVAL_OK : EVAL_REDO;
}

/*
 * Evaluates and applies one workflow under its own savepoint (a batch done
 * again guarded, after a failure): a failed one is rolled back to it and
 * postponed while the others commit.  A version guard that fails writes
 * nothing (the evaluation is simply done again in a later batch).
 */
static enum eval_result
evaluate_one(struct decide_loop *dl, const struct loaded_execution *x,
	     const struct wf_def *def, json_t *queues, json_t *touched,
	     struct err *e)
{
	/* An earlier evaluation of this batch changed it (a child of it
	 * ended): what was loaded is stale.  It stays queued (that change
	 * enqueued it) for the next batch. */
	if (listed(touched, x->id)) {
		dl->left_queued = true;
		return EVAL_OK;
	}
	if (!decide_savepoint(dl->db, e))
		return EVAL_LOST;
	struct err we = ERR_INIT;
	struct decision d = {0};
	bool ok = evaluate(dl, x, def, &d, &we);
	bool applied = true;
	if (ok && d.changed) {
		struct decide_rows rows = {d.update, d.tasks, d.seen, d.cancel,
					   d.events};
		ok = decide_apply(dl->db, x, &rows, &applied, &we) &&
		     (!applied || after_apply(dl, x, def, &d, touched, &we));
	} else if (ok) {
		ok = decide_dequeue(dl->db, x->id, &we);
	}
	if (ok && applied)
		count_applied(dl, &d, queues);
	decision_free(&d);
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
	if (ok)
		dl->left_queued = true;
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

/*
 * A short queue is claimed in turns, across replicas: three replicas'
 * deciders each claiming at once split it into three batches, each with
 * its statements and commit.  A backlog is shared at once.  Called in a
 * new transaction; when the turn is not had in time, that transaction is
 * lost and a new one begins without it.
 */
static bool
take_turn(struct decide_loop *dl, struct err *e)
{
	if (dl->backlog || mono_ms() < dl->turns_from)
		return true;
	struct err te = ERR_INIT;
	if (decide_take_turn(dl->db, TURN_WAIT_MS, &te))
		return true;
	if (te.code != ERR_CONFLICT) {
		*e = te;
		return false;
	}
	log_warn("decider",
		 "the deciders' turn was held over %d ms (a decider stuck "
		 "mid-batch?): claiming without turns for %d s",
		 TURN_WAIT_MS, TURN_SKIP_MS / 1000);
	dl->turns_from = mono_ms() + TURN_SKIP_MS;
	db_rollback(dl->db);
	return db_begin(dl->db, e);
}

static enum loop_result
run_batch(struct decide_loop *dl, struct err *e)
{
	if (dl->db && !db_healthy(dl->db)) {
		db_close(dl->db);
		dl->db = NULL;
	}
	/* Generic plans: the batch's statements, custom-planned, were
	 * planned again on every batch (the task load, over every partition
	 * of "TaskExecutions", at several times its running cost). */
	if (!dl->db) {
		if (!db_open(&dl->db, dl->url, DB_GENERIC_PLANS | DB_KEYED, e))
			return LOOP_ERROR;
		struct err we = ERR_INIT;
		if (!decide_warm(dl->db, &we)) /* only slower without it */
			log_warn("decider", "could not plan ahead: %s", we.msg);
	}

	struct decide_batch b = {0};
	if (!db_begin(dl->db, e) || !take_turn(dl, e) ||
	    !decide_claim(dl->db, dl->opts.batch_size, &b, e)) {
		db_rollback(dl->db);
		return LOOP_ERROR;
	}
	if (b.n == 0) {
		dl->backlog = false;
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
	json_t *queues = json_object();
	json_t *touched = json_array();
	bool guarded = dl->guarded;
	dl->guarded = false;
	bool ok = decide_load_tasks(dl->db, &b, refs, e);
	bool redo = false;
	if (ok && !guarded)
		redo = evaluate_batch(dl, &b, defs, queues, touched) ==
		       EVAL_REDO;
	for (size_t i = 0; ok && guarded && i < b.n; i++)
		ok = evaluate_one(dl, &b.items[i], defs[i].wf, queues, touched,
				  e) != EVAL_LOST;
	if (redo) { /* at once, each evaluation apart */
		db_rollback(dl->db);
		dl->guarded = true;
		dl->system_enqueued = false;
		json_object_clear(queues);
	}
	if (ok && !redo && json_object_size(queues)) {
		/* Other replicas' polls: one notification for the whole
		 * batch, delivered at its commit. */
		ok = queue_signal_send(dl->db, queues, e);
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
	else if (ok)
		queue_signal_local(queues); /* parked polls here */

	for (size_t i = 0; i < b.n; i++) {
		defcache_release(&defs[i]);
		json_decref(refs[i]);
	}
	free(defs);
	free(refs);
	json_decref(queues);
	json_decref(touched);
	bool full = b.n == (size_t)dl->opts.batch_size;
	bool share = full || b.n >= SHARE_AT;
	dl->backlog = share;
	decide_batch_free(&b);
	/* A full batch, or one that left work queued, may have more behind
	 * it: claim again at once.  A short one took all there was: anything
	 * queued since woke this loop (the wake is kept while it works), or,
	 * queued by another replica, is that replica's deciders' or found at
	 * the next idle look.  An empty claim after every batch cost a
	 * transaction per batch under a steady load. */
	bool more = redo || dl->left_queued || full;
	dl->left_queued = false;
	if (!ok && !redo)
		return LOOP_ERROR;
	if (share) { /* a backlog: a resting loop shares it */
		pthread_mutex_lock(&loops_lock);
		(void)wake_resting(dl);
		pthread_mutex_unlock(&loops_lock);
	}
	return more ? LOOP_BUSY : LOOP_IDLE;
}

/* Marked working while it runs: a wake then waits for this batch to end
 * (the loop claims again at once) rather than starting a second loop on
 * the little that came meanwhile, so a steady load is decided in batches
 * one loop gathers, not in one-workflow batches each loop takes; a large
 * batch brings in a second loop (SHARE_AT). */
static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct decide_loop *dl = arg;
	(void)scratch;
	atomic_store(&dl->working, true);
	enum loop_result r = run_batch(dl, e);
	atomic_store(&dl->working, false);
	return r;
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
		.interval_ms = o->interval_ms,
		.max_backoff_ms = 10000,
	};
	dl->m_decisions =
		metric_register(METRIC_COUNTER, "nodeflow_decisions_total", "",
				"Workflow evaluations applied");
	dl->m_failures = metric_register(
		METRIC_COUNTER, "nodeflow_decision_failures_total", "",
		"Workflow evaluations that failed and were postponed");
	pthread_mutex_lock(&loops_lock);
	dl->loop = loop_start(&dl->def, dl);
	if (n_loops < MAX_LOOPS)
		loops[n_loops++] = dl;
	pthread_mutex_unlock(&loops_lock);
}

void
decide_loops_stop(void)
{
	pthread_mutex_lock(&loops_lock);
	size_t n = n_loops;
	struct loop *stopping[MAX_LOOPS];
	for (size_t i = 0; i < n; i++)
		stopping[i] = loops[i]->loop;
	n_loops = 0;
	pthread_mutex_unlock(&loops_lock);
	for (size_t i = 0; i < n; i++)
		loop_stop(stopping[i]);
}

void
decide_loop_wake(void)
{
	pthread_mutex_lock(&loops_lock);
	if (n_loops == 0) { /* an api-only replica: the engine replicas' */
		pthread_mutex_unlock(&loops_lock);
		decide_signal_raise();
		return;
	}
	bool working = false;
	for (size_t i = 0; i < n_loops && !working; i++) {
		if (atomic_load(&loops[i]->working)) {
			/* It claims again as soon as its batch is done. */
			loop_wake(loops[i]->loop);
			working = true;
		}
	}
	if (!working)
		(void)wake_resting(NULL);
	pthread_mutex_unlock(&loops_lock);
}
