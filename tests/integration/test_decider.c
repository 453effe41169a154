/*
 * integration_decider — the decider at the store level, against a real
 * database, with the decide loop's steps run by hand (claim, load, decide,
 * apply) so that races can be driven deterministically:
 *
 *   race         a worker's result that arrives while an evaluation holds
 *                the workflow's "DecideQueues" row waits on that row (seen
 *                in pg_stat_activity, not guessed from timing), and once
 *                the evaluation commits — having dequeued the workflow or
 *                applied a decision — the result enqueues a fresh
 *                evaluation: the completion is never lost.
 *   rerun        evaluating again on the same state writes nothing: no
 *                task, event or queue row, and the version stays; deciding
 *                twice on one loaded state decides the same thing.
 *   batch        the decisions of a batch are written by one statement
 *                (their rows share its command id), each under its own
 *                version guard: one whose execution changed meanwhile
 *                writes nothing and stays queued, the others are applied
 *                with gap-free histories; an evaluation that changed
 *                nothing only leaves the queue.  Batches of a few
 *                workflows and of many (the statements differ) each load,
 *                react to and follow every workflow's own tasks.
 *   claim        the evaluations that have waited longest are claimed
 *                first, postponed ones not before they are due.
 *   identity     a failed attempt 0 is retried as a new row with attempt 1
 *                (not absorbed by ON CONFLICT), while a repeated write of
 *                the same identity is absorbed without a second queue row.
 *   decide       the pure function on hand-built states: the first task,
 *                completion with outputParameters, retries and their
 *                delays, terminal failures, stale attempts, PAUSED and
 *                ended workflows.
 *   lease        the lease statements take their row locks outside their
 *                own plans (PostgreSQL 18.4 crashes a backend otherwise,
 *                docs/operations.md), and polls racing over a queue
 *                shorter than their batch, their rows put back and leased
 *                again, never share a task and write one lease and one
 *                TASK_STARTED event per task leased.
 */
#include "harness.h"

#include "engine/decider.h"
#include "engine/dsl.h"
#include "store/db.h"
#include "store/decide_repo.h"
#include "store/definitions_repo.h"
#include "store/executions_repo.h"
#include "store/queue_repo.h"
#include "store/sql.h"
#include "util/mem.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------- per-test fixtures */

static struct th_db tdb;
static PGconn *sql;  /* assertions */
static struct db *D; /* the evaluator */
static struct db *C; /* the completer */
static char ns_id[37];
static struct task_def step_def; /* what the decider looks up */
static struct wf_def *wf;

static void
setup(void)
{
	th_db_clone(&tdb);
	sql = th_connect(tdb.url);
	struct err e = ERR_INIT;
	cr_assert(db_open(&D, tdb.url, DB_PLAIN, &e), "%s", e.msg);
	cr_assert(db_open(&C, tdb.url, DB_PLAIN, &e), "%s", e.msg);
	cr_assert(defs_namespace_id(D, "default", ns_id, &e), "%s", e.msg);
	task_def_init(&step_def);
}

static void
teardown(void)
{
	if (D)
		db_close(D);
	if (C)
		db_close(C);
	D = C = NULL;
	if (sql)
		PQfinish(sql);
	sql = NULL;
	task_def_free(&step_def);
	if (wf)
		wf_def_free(wf);
	wf = NULL;
	th_db_drop(&tdb);
}

TestSuite(race, .init = setup, .fini = teardown);
TestSuite(rerun, .init = setup, .fini = teardown);
TestSuite(identity, .init = setup, .fini = teardown);
TestSuite(batch, .init = setup, .fini = teardown);
TestSuite(claim, .init = setup, .fini = teardown);
TestSuite(lease, .init = setup, .fini = teardown);

/* Two sequential tasks of definition "step": a reads the workflow input, b
 * reads a's output; the output reads b's. */
static const char two_steps[] =
	"{\"name\":\"two\",\"version\":1,\"tasks\":["
	"{\"name\":\"step\",\"taskReferenceName\":\"a\",\"type\":\"SIMPLE\","
	" \"inputParameters\":{\"x\":\"${workflow.input.x}\"}},"
	"{\"name\":\"step\",\"taskReferenceName\":\"b\",\"type\":\"SIMPLE\","
	" \"inputParameters\":{\"y\":\"${a.output.y}\"}}],"
	"\"outputParameters\":{\"z\":\"${b.output.z}\"}}";

#define QUEUE "default/step"

/* Registers "step" (retry_count retries, no delay) and two_steps. */
static void
register_defs(int retry_count)
{
	struct err e = ERR_INIT;
	bool created;
	step_def.name = xstrdup("step");
	step_def.retry_count = retry_count;
	step_def.retry_delay_seconds = 0;
	step_def.response_timeout_seconds = 60;
	cr_assert(defs_task_put(D, ns_id, &step_def, &created, &e), "%s",
		  e.msg);
	json_t *doc = json_loads(two_steps, 0, NULL);
	struct dsl_errors errs = {0};
	cr_assert(dsl_workflow_parse(doc, &wf, &errs), "definition invalid");
	cr_assert(
		defs_workflow_put(D, ns_id, "two", 1, doc, false, &created, &e),
		"%s", e.msg);
	json_decref(doc);
}

static const struct task_def *
lookup(void *arg, const char *name)
{
	(void)arg;
	return strcmp(name, "step") == 0 ? &step_def : NULL;
}

static void
start_exec(char id[37])
{
	struct exec_start s = {
		.ns_id = ns_id,
		.def_name = "two",
		.def_version = 1,
		.input = "{\"x\":1}",
		.variables = "{}",
	};
	bool created;
	struct err e = ERR_INIT;
	cr_assert(exec_start(D, &s, id, &created, &e), "%s", e.msg);
	cr_assert(created);
}

static long long
q_int(const char *q, const char *param)
{
	const char *params[] = {param};
	return th_int(sql, q, param ? 1 : 0, param ? params : NULL);
}

/* One evaluation in progress: the batch claimed inside db's transaction. */
struct evaluation {
	struct db *db;
	struct decide_batch b;
	json_t **refs;
};

static void
eval_claim(struct evaluation *ev, struct db *db)
{
	struct err e = ERR_INIT;
	memset(ev, 0, sizeof(*ev));
	ev->db = db;
	cr_assert(db_begin(db, &e), "%s", e.msg);
	cr_assert(decide_claim(db, 16, &ev->b, &e), "%s", e.msg);
}

static void
eval_load(struct evaluation *ev)
{
	struct err e = ERR_INIT;
	ev->refs = xcalloc(ev->b.n + 1, sizeof(*ev->refs));
	for (size_t i = 0; i < ev->b.n; i++)
		ev->refs[i] = decider_refs_to_load(wf);
	cr_assert(decide_load_tasks(ev->db, &ev->b, ev->refs, &e), "%s", e.msg);
}

static void
eval_free(struct evaluation *ev)
{
	for (size_t i = 0; ev->refs && i < ev->b.n; i++)
		json_decref(ev->refs[i]);
	free(ev->refs);
	decide_batch_free(&ev->b);
}

/* Decides and applies every claimed workflow as the loop does (apply when
 * something changed, else dequeue), then commits; returns how many
 * decisions changed something. */
static int
eval_finish(struct evaluation *ev)
{
	struct err e = ERR_INIT;
	int changed = 0;
	for (size_t i = 0; i < ev->b.n; i++) {
		struct decision d;
		struct decider_input in = {wf, &ev->b.items[i], lookup, NULL,
					   NULL};
		decide(&in, &d);
		if (d.changed) {
			struct decide_rows rows = {d.update, d.tasks, d.seen,
						   d.cancel, d.events};
			bool applied = false;
			cr_assert(decide_apply(ev->db, &ev->b.items[i], &rows,
					       &applied, &e),
				  "%s", e.msg);
			cr_assert(applied, "the version guard refused");
			changed++;
		} else {
			cr_assert(decide_dequeue(ev->db, ev->b.items[i].id, &e),
				  "%s", e.msg);
		}
		decision_free(&d);
	}
	cr_assert(db_commit(ev->db, &e), "%s", e.msg);
	eval_free(ev);
	return changed;
}

/* A whole evaluation; returns how many workflows it claimed. */
static size_t
evaluate(int *changed)
{
	struct evaluation ev;
	eval_claim(&ev, D);
	eval_load(&ev);
	size_t n = ev.b.n;
	int c = eval_finish(&ev);
	if (changed)
		*changed = c;
	return n;
}

static void
enqueue_again(const char *id)
{
	const char *params[] = {id, ns_id};
	PQclear(th_query(sql,
			 "INSERT INTO \"DecideQueues\" (\"workflowId\","
			 " \"namespaceId\", \"reason\") VALUES ($1::uuid,"
			 " $2::uuid, 'test')",
			 2, params));
}

/* Leases the one task of the queue to worker; its id into id. */
static void
lease_one(const char *worker, char id[37], int *attempt)
{
	struct err e = ERR_INIT;
	char *json;
	size_t n;
	cr_assert(queue_lease(D, QUEUE, worker, 1, 60, &json, &n, &e), "%s",
		  e.msg);
	cr_assert_eq(n, 1, "nothing to lease: %s", json);
	json_t *a = json_loads(json, 0, NULL);
	json_t *t = json_array_get(a, 0);
	snprintf(id, 37, "%s", json_string_value(json_object_get(t, "id")));
	if (attempt)
		*attempt =
			(int)json_integer_value(json_object_get(t, "attempt"));
	json_decref(a);
	free(json);
}

/* ================================================================= race */

struct completer {
	pthread_t t;
	const char *task_id;
	atomic_bool done;
	bool ok;
	struct err e;
};

static void *
completer_main(void *arg)
{
	struct completer *c = arg;
	c->e = (struct err)ERR_INIT;
	c->ok = queue_result(C, QUEUE, c->task_id, "w1", RESULT_COMPLETED,
			     "{\"y\":41}", NULL, &c->e);
	atomic_store(&c->done, true);
	return NULL;
}

struct lock_probe {
	int waiter;
	int holder;
};

/* The waiter's backend waits on a lock the holder's backend holds. */
static bool
waits_on_lock(void *arg)
{
	struct lock_probe *p = arg;
	char w[16], h[16];
	snprintf(w, sizeof(w), "%d", p->waiter);
	snprintf(h, sizeof(h), "%d", p->holder);
	const char *params[] = {w, h};
	return th_int(sql,
		      "SELECT count(*) FROM pg_stat_activity"
		      " WHERE \"pid\" = $1::int AND \"wait_event_type\" ="
		      " 'Lock' AND $2::int = ANY(pg_blocking_pids($1::int))",
		      2, params) == 1;
}

/*
 * The workflow's first task is leased; an evaluation claims the workflow;
 * the result arrives and must block; the evaluation finishes (by applying
 * when apply is set, else as the loop does: nothing changed, so dequeue)
 * and commits; the result then goes through and re-enqueues the workflow.
 */
static void
race(bool apply)
{
	register_defs(0);
	char id[37], tid[37];
	start_exec(id);
	int changed;
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 1, "the first task was not scheduled");
	lease_one("w1", tid, NULL);
	cr_assert_eq(q_int("SELECT count(*) FROM \"DecideQueues\"", NULL), 0);
	enqueue_again(id);

	struct evaluation ev;
	eval_claim(&ev, D);
	cr_assert_eq(ev.b.n, 1);
	cr_assert_str_eq(ev.b.items[0].id, id);
	int64_t version = ev.b.items[0].version;

	struct completer comp = {.task_id = tid};
	cr_assert(pthread_create(&comp.t, NULL, completer_main, &comp) == 0);
	struct lock_probe lp = {PQbackendPID(C->conn), PQbackendPID(D->conn)};
	bool blocked = th_wait_until(10000, waits_on_lock, &lp);
	if (!blocked) {
		pthread_join(comp.t, NULL);
		eval_free(&ev);
		cr_assert_fail("the result did not wait on the claimed "
			       "evaluation (finished: %d, ok: %d %s)",
			       atomic_load(&comp.done), comp.ok, comp.e.msg);
	}
	cr_assert_not(atomic_load(&comp.done));
	/* What it waits on is the "DecideQueues" row: its task is already
	 * updated (invisibly) and its queue row locked. */
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", lp.waiter);
	const char *pp[] = {pid};
	char *query = th_value(
		sql,
		"SELECT \"query\" FROM pg_stat_activity WHERE \"pid\" = $1::int",
		1, pp);
	cr_assert(strstr(query, "DecideQueues"), "%s", query);
	free(query);

	/* The evaluation sees the task still running: nothing to do. */
	eval_load(&ev);
	struct loaded_execution *x = &ev.b.items[0];
	cr_assert_eq(x->n_tasks, 1);
	cr_assert_str_eq(x->tasks[0].status, "IN_PROGRESS");
	if (apply) {
		/* An evaluation that writes: the version moves and the
		 * "DecideQueues" row goes, in decide_write. */
		json_t *empty = json_array();
		struct decide_rows rows = {NULL, empty, empty, empty, empty};
		bool applied = false;
		struct err e = ERR_INIT;
		cr_assert(decide_apply(D, x, &rows, &applied, &e), "%s", e.msg);
		cr_assert(applied);
		json_decref(empty);
		struct err ce = ERR_INIT;
		cr_assert(db_commit(D, &ce), "%s", ce.msg);
		eval_free(&ev);
	} else {
		cr_assert_eq(eval_finish(&ev), 0);
	}

	pthread_join(comp.t, NULL);
	cr_assert(comp.ok, "the result failed: %s", comp.e.msg);
	/* Not lost: the workflow is queued for evaluation again. */
	cr_assert_eq(q_int("SELECT count(*) FROM \"DecideQueues\""
			   " WHERE \"workflowId\" = $1::uuid",
			   id),
		     1);
	cr_assert_eq(q_int("SELECT \"version\" FROM \"WorkflowExecutions\""
			   " WHERE \"id\" = $1::uuid",
			   id),
		     version + (apply ? 1 : 0));

	/* And the next evaluation reacts to it: b is scheduled with a's
	 * output. */
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 1);
	const char *params[] = {id};
	char *input = th_value(sql,
			       "SELECT \"input\"::text FROM \"TaskExecutions\""
			       " WHERE \"workflowId\" = $1::uuid AND"
			       " \"refName\" = 'b'",
			       1, params);
	cr_assert_str_eq(input, "{\"y\": 41}");
	free(input);
	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskQueues\""
			   " WHERE \"workflowId\" = $1::uuid",
			   id),
		     1);
	/* The history stays gap-free through it all. */
	cr_assert_eq(q_int("SELECT count(*) FROM \"WorkflowEvents\""
			   " WHERE \"workflowId\" = $1::uuid",
			   id),
		     q_int("SELECT max(\"seq\") FROM \"WorkflowEvents\""
			   " WHERE \"workflowId\" = $1::uuid",
			   id));
}

Test(race, a_result_during_an_evaluation_that_dequeues_is_not_lost)
{
	race(false);
}

Test(race, a_result_during_an_evaluation_that_applies_is_not_lost)
{
	race(true);
}

/*
 * PostgreSQL 18 up to 18.4 re-initialises the run-time partition pruning
 * of a statement's Appends when a row lock rechecks a row that another
 * transaction updated after the statement's snapshot (EvalPlanQual), and
 * can then prune every partition: the decider's write, whose version guard
 * updates the execution's row that leases and results update too (their
 * event counter), marked no task as reacted to while applying the rest of
 * its decision, and the next evaluation reacted to them again (a dynamic
 * JOIN counted its branches twice and completed early).  The write now
 * finds the rows it updates already locked by its own transaction.  Here
 * another transaction updates the execution's row while the write waits
 * for it.
 */
struct writer {
	pthread_t t;
	struct evaluation *ev;
	bool ok;
	struct err e;
};

static void *
writer_main(void *arg)
{
	struct writer *w = arg;
	w->e = (struct err)ERR_INIT;
	struct decision d;
	struct decider_input in = {wf, &w->ev->b.items[0], lookup, NULL, NULL};
	decide(&in, &d);
	struct decide_rows rows = {d.update, d.tasks, d.seen, d.cancel,
				   d.events};
	bool applied = false;
	w->ok = decide_apply(w->ev->db, &w->ev->b.items[0], &rows, &applied,
			     &w->e) &&
		applied && db_commit(w->ev->db, &w->e);
	decision_free(&d);
	return NULL;
}

/* Starts a workflow of two_steps (the task's retries as given) whose
 * first task then completes with output; its id into id. */
static void
first_task_completed(int retries, const char *output, char id[37])
{
	register_defs(retries);
	char tid[37];
	start_exec(id);
	cr_assert_eq(evaluate(NULL), 1);
	lease_one("w1", tid, NULL);
	struct err e = ERR_INIT;
	cr_assert(queue_result(C, QUEUE, tid, "w1", RESULT_COMPLETED, output,
			       NULL, &e),
		  "%s", e.msg);
}

Test(race, a_write_that_waits_for_the_executions_row_marks_what_it_reacted_to)
{
	char id[37];
	first_task_completed(0, "{\"y\":41}", id);
	struct err e = ERR_INIT;

	/* A connection as the decide loop opens its own. */
	struct db *g = NULL;
	cr_assert(db_open(&g, tdb.url, DB_GENERIC_PLANS | DB_KEYED, &e), "%s",
		  e.msg);
	struct evaluation ev;
	eval_claim(&ev, g);
	eval_load(&ev);
	cr_assert_eq(ev.b.n, 1);
	/* Another transaction holds the execution's row, as a lease's event
	 * counter does, and commits a new version of it while the write
	 * waits. */
	PGconn *x = th_connect(tdb.url);
	th_exec(x, "BEGIN");
	const char *params[] = {id};
	PQclear(th_query(x,
			 "UPDATE \"WorkflowExecutions\" SET \"eventSeq\" ="
			 " \"eventSeq\" WHERE \"id\" = $1::uuid",
			 1, params));
	struct writer w = {.ev = &ev};
	cr_assert(pthread_create(&w.t, NULL, writer_main, &w) == 0);
	struct lock_probe lp = {PQbackendPID(g->conn), PQbackendPID(x)};
	bool waited = th_wait_until(10000, waits_on_lock, &lp);
	th_exec(x, "COMMIT");
	pthread_join(w.t, NULL);
	PQfinish(x);
	eval_free(&ev);
	db_close(g);
	cr_assert(waited, "the write did not wait for the execution's row");
	cr_assert(w.ok, "%s", w.e.msg);

	/* Applied: b is scheduled, and a is marked as reacted to. */
	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskExecutions\" WHERE"
			   " \"workflowId\" = $1::uuid AND \"refName\" = 'b'",
			   id),
		     1);
	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskExecutions\" WHERE"
			   " \"workflowId\" = $1::uuid AND \"refName\" = 'a'"
			   " AND \"deciderSeenAt\" IS NOT NULL",
			   id),
		     1, "the write's mark of what it reacted to was lost");
}

/* ================================================================ rerun */

/* Everything an evaluation could write, as one text. */
static char *
state_of(const char *id)
{
	const char *params[] = {id};
	return th_value(
		sql,
		"SELECT (SELECT count(*) FROM \"TaskExecutions\") || '/' ||"
		" (SELECT count(*) FROM \"WorkflowEvents\") || '/' ||"
		" (SELECT count(*) FROM \"TaskQueues\") || '/' ||"
		" (SELECT \"version\" || ':' || \"status\" || ':' ||"
		"  \"eventSeq\" FROM \"WorkflowExecutions\""
		"  WHERE \"id\" = $1::uuid) || '/' || md5(coalesce((SELECT"
		"  string_agg(t::text, ',' ORDER BY t.\"id\") FROM"
		"  \"TaskExecutions\" t), ''))",
		1, params);
}

/* Enqueues the workflow again and evaluates: nothing may change. */
static void
assert_rerun_is_a_no_op(const char *id)
{
	char *before = state_of(id);
	enqueue_again(id);
	int changed = -1;
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 0, "a re-run decided something");
	char *after = state_of(id);
	cr_assert_str_eq(after, before, "a re-run wrote something");
	cr_assert_eq(q_int("SELECT count(*) FROM \"DecideQueues\"", NULL), 0);
	free(before);
	free(after);
}

Test(rerun, evaluating_the_same_state_again_writes_nothing)
{
	register_defs(0);
	char id[37], tid[37];
	start_exec(id);
	int changed;
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 1);
	assert_rerun_is_a_no_op(id);

	/* a running: still nothing. */
	lease_one("w1", tid, NULL);
	assert_rerun_is_a_no_op(id);

	/* a completed: the evaluation schedules b; again, nothing. */
	struct err e = ERR_INIT;
	cr_assert(queue_result(C, QUEUE, tid, "w1", RESULT_COMPLETED,
			       "{\"y\":2}", NULL, &e),
		  "%s", e.msg);
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 1);
	assert_rerun_is_a_no_op(id);

	/* b completed: the workflow completes; again, nothing. */
	lease_one("w1", tid, NULL);
	cr_assert(queue_result(C, QUEUE, tid, "w1", RESULT_COMPLETED,
			       "{\"z\":3}", NULL, &e),
		  "%s", e.msg);
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 1);
	char *st = th_value(sql,
			    "SELECT \"status\" || ' ' || \"output\"::text"
			    " FROM \"WorkflowExecutions\"",
			    0, NULL);
	cr_assert_str_eq(st, "COMPLETED {\"z\": 3}");
	free(st);
	assert_rerun_is_a_no_op(id);
}

/* A decision with the ids it generated removed (fresh UUIDs each time). */
static char *
decision_text(const struct decision *d)
{
	json_t *tasks = json_deep_copy(d->tasks);
	json_t *events = json_deep_copy(d->events);
	size_t i;
	json_t *v;
	json_array_foreach (tasks, i, v) {
		json_object_del(v, "id");
	}
	json_array_foreach (events, i, v) {
		if (strcmp(json_string_value(json_object_get(v, "type")),
			   "TASK_SCHEDULED") == 0)
			json_object_del(v, "taskId");
	}
	json_t *all = json_pack("{s:b,s:O?,s:o,s:O,s:O,s:o,s:O}", "changed",
				d->changed, "update", d->update, "tasks", tasks,
				"seen", d->seen, "cancel", d->cancel, "events",
				events, "retries", d->retries);
	char *text = json_dumps(all, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(all);
	return text;
}

Test(rerun, deciding_twice_on_one_state_decides_the_same)
{
	char id[37];
	first_task_completed(2, "{\"y\":[1,2]}", id);

	struct evaluation ev;
	eval_claim(&ev, D);
	eval_load(&ev);
	cr_assert_eq(ev.b.n, 1);
	struct decider_input in = {wf, &ev.b.items[0], lookup, NULL, NULL};
	struct decision d1, d2;
	decide(&in, &d1);
	decide(&in, &d2);
	char *t1 = decision_text(&d1), *t2 = decision_text(&d2);
	cr_assert_str_eq(t1, t2);
	cr_assert(strstr(t1, "\"refName\":\"b\""), "%s", t1);
	cr_assert(strstr(t1, "\"y\":[1,2]"), "%s", t1);
	free(t1);
	free(t2);
	decision_free(&d1);
	decision_free(&d2);
	db_rollback(D);
	eval_free(&ev);
}

/* ================================================================ claim */

static void
due_in(const char *id, const char *interval)
{
	const char *params[] = {id, interval};
	PQclear(th_query(sql,
			 "UPDATE \"DecideQueues\" SET \"enqueuedAt\" = now()"
			 " + $2::interval WHERE \"workflowId\" = $1::uuid",
			 2, params));
}

/*
 * The deciders claim the evaluations that have waited longest: a is due
 * a second ago, b three seconds ago, c in an hour.  a's row is rewritten
 * before b's, so a comes first in the table, where a claim in the table's
 * order took it.
 */
Test(claim, the_longest_waiting_evaluations_are_claimed_first)
{
	char a[37], b[37], c[37];
	start_exec(c);
	start_exec(a);
	start_exec(b);
	due_in(c, "1 hour");
	due_in(a, "-1 second");
	due_in(b, "-3 seconds");

	struct err e = ERR_INIT;
	struct decide_batch first = {0}, rest = {0};
	cr_assert(db_begin(D, &e), "%s", e.msg);
	cr_assert(decide_claim(D, 1, &first, &e), "%s", e.msg);
	cr_assert_eq(first.n, 1);
	cr_assert_str_eq(first.items[0].id, b);
	/* Another decider, meanwhile: b is held, c is not due. */
	cr_assert(db_begin(C, &e), "%s", e.msg);
	cr_assert(decide_claim(C, 16, &rest, &e), "%s", e.msg);
	cr_assert_eq(rest.n, 1);
	cr_assert_str_eq(rest.items[0].id, a);
	db_rollback(C);
	db_rollback(D);
	decide_batch_free(&first);
	decide_batch_free(&rest);
}

/* ================================================================ batch */

Test(batch, decisions_are_written_together_each_under_its_version_guard)
{
	register_defs(0);
	char ids[4][37];
	for (int i = 0; i < 4; i++)
		start_exec(ids[i]);
	struct evaluation ev;
	eval_claim(&ev, D);
	cr_assert_eq(ev.b.n, 4);
	eval_load(&ev);
	/* The third changes behind the evaluation (as an operator's action
	 * would): its version guard must refuse it. */
	cr_assert_eq(q_int("WITH u AS (UPDATE \"WorkflowExecutions\" SET"
			   " \"version\" = \"version\" + 1 WHERE \"id\" ="
			   " $1::uuid RETURNING 1) SELECT count(*) FROM u",
			   ids[2]),
		     1);
	struct decision d[4];
	struct decide_item items[4];
	size_t n = 0;
	json_t *dequeue = json_array();
	for (size_t i = 0; i < ev.b.n; i++) {
		struct loaded_execution *x = &ev.b.items[i];
		/* The fourth is taken as an evaluation that changed nothing. */
		if (strcmp(x->id, ids[3]) == 0) {
			json_array_append_new(dequeue, json_string(x->id));
			continue;
		}
		struct decider_input in = {wf, x, lookup, NULL, NULL};
		decide(&in, &d[n]);
		cr_assert(d[n].changed);
		items[n] = (struct decide_item){x,
						{d[n].update, d[n].tasks,
						 d[n].seen, d[n].cancel,
						 d[n].events},
						false};
		n++;
	}
	cr_assert_eq(n, 3);
	struct err e = ERR_INIT;
	cr_assert(decide_apply_batch(D, items, n, dequeue, true, &e), "%s",
		  e.msg);
	json_decref(dequeue);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(items[i].applied,
			     strcmp(items[i].x->id, ids[2]) != 0, "workflow %s",
			     items[i].x->id);
		decision_free(&d[i]);
	}
	cr_assert(db_commit(D, &e), "%s", e.msg);
	eval_free(&ev);

	for (int i = 0; i < 4; i++) {
		bool applied = i < 2;
		cr_assert_eq(q_int("SELECT count(*) FROM \"TaskExecutions\""
				   " WHERE \"workflowId\" = $1::uuid",
				   ids[i]),
			     applied ? 1 : 0, "workflow %d", i);
		cr_assert_eq(q_int("SELECT count(*) FROM \"TaskQueues\""
				   " WHERE \"workflowId\" = $1::uuid",
				   ids[i]),
			     applied ? 1 : 0, "workflow %d", i);
		cr_assert_eq(q_int("SELECT count(*) FROM \"DecideQueues\""
				   " WHERE \"workflowId\" = $1::uuid",
				   ids[i]),
			     i == 2 ? 1 : 0, "workflow %d", i);
		long long events = q_int("SELECT count(*) FROM"
					 " \"WorkflowEvents\" WHERE"
					 " \"workflowId\" = $1::uuid",
					 ids[i]);
		cr_assert_eq(events,
			     q_int("SELECT max(\"seq\") FROM \"WorkflowEvents\""
				   " WHERE \"workflowId\" = $1::uuid",
				   ids[i]),
			     "workflow %d: a gap in its history", i);
		cr_assert(applied ? events > 1 : events == 1,
			  "workflow %d: %lld events", i, events);
	}
	/* One statement: every row it wrote carries its command id. */
	cr_assert_eq(q_int("SELECT count(DISTINCT (\"xmin\"::text,"
			   " \"cmin\"::text)) FROM (SELECT \"xmin\", \"cmin\""
			   " FROM \"TaskExecutions\" UNION ALL SELECT \"xmin\","
			   " \"cmin\" FROM \"TaskQueues\" UNION ALL SELECT"
			   " \"xmin\", \"cmin\" FROM \"WorkflowEvents\" WHERE"
			   " \"type\" <> 'WORKFLOW_STARTED') r",
			   NULL),
		     1);
	/* The one refused is decided by the next evaluation. */
	int changed;
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 1);
	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskQueues\"", NULL), 3);
}

/* Claims, loads, decides and applies up to limit workflows as the loop
 * does: one decide_apply_batch for the batch.  Returns how many it
 * claimed; each claimed workflow must have loaded only tasks of its own. */
static size_t
evaluate_batch_of(int limit)
{
	struct err e = ERR_INIT;
	struct evaluation ev = {.db = D};
	cr_assert(db_begin(D, &e), "%s", e.msg);
	cr_assert(decide_claim(D, limit, &ev.b, &e), "%s", e.msg);
	eval_load(&ev);
	size_t n = ev.b.n;
	struct decision *d = xcalloc(n + 1, sizeof(*d));
	struct decide_item *items = xcalloc(n + 1, sizeof(*items));
	for (size_t i = 0; i < n; i++) {
		struct loaded_execution *x = &ev.b.items[i];
		for (size_t k = 0; k < x->n_tasks; k++)
			cr_assert_str_eq(x->tasks[k].workflow_id, x->id);
		struct decider_input in = {wf, x, lookup, NULL, NULL};
		decide(&in, &d[i]);
		cr_assert(d[i].changed, "workflow %s", x->id);
		items[i] = (struct decide_item){x,
						{d[i].update, d[i].tasks,
						 d[i].seen, d[i].cancel,
						 d[i].events},
						false};
	}
	json_t *none = json_array();
	cr_assert(decide_apply_batch(D, items, n, none, true, &e), "%s", e.msg);
	json_decref(none);
	for (size_t i = 0; i < n; i++) {
		cr_assert(items[i].applied, "workflow %s", items[i].x->id);
		decision_free(&d[i]);
	}
	free(d);
	free(items);
	cr_assert(db_commit(D, &e), "%s", e.msg);
	eval_free(&ev);
	return n;
}

/*
 * A batch of a few workflows names each one as a parameter of its own (the
 * generic plan then prunes "TaskExecutions" to their partitions), a larger
 * one names them in an array: either way each workflow's tasks, and only
 * its own, are loaded, reacted to and followed.  The sizes straddle the
 * statements' switch (32).
 */
static void
batch_of(int n)
{
	register_defs(0);
	char(*ids)[37] = xcalloc((size_t)n, sizeof(*ids));
	for (int i = 0; i < n; i++)
		start_exec(ids[i]);
	cr_assert_eq(evaluate_batch_of(n), (size_t)n);
	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskQueues\"", NULL), n);

	/* Each first task completes with its own workflow's id as output. */
	PQclear(th_query(sql,
			 "WITH t AS (UPDATE \"TaskExecutions\" SET \"status\" ="
			 " 'COMPLETED', \"endedAt\" = now(), \"output\" ="
			 " jsonb_build_object('y', \"workflowId\"::text)"
			 " WHERE \"refName\" = 'a' RETURNING \"workflowId\","
			 " \"namespaceId\"), q AS (DELETE FROM \"TaskQueues\")"
			 " INSERT INTO \"DecideQueues\" (\"workflowId\","
			 " \"namespaceId\", \"reason\") SELECT \"workflowId\","
			 " \"namespaceId\", 'test' FROM t",
			 0, NULL));
	cr_assert_eq(evaluate_batch_of(n), (size_t)n);

	for (int i = 0; i < n; i++) {
		/* Its second task got its own first task's output. */
		const char *params[] = {ids[i]};
		PGresult *r =
			th_query(sql,
				 "SELECT \"input\"->>'y' FROM"
				 " \"TaskExecutions\" WHERE \"workflowId\""
				 " = $1::uuid AND \"refName\" = 'b'",
				 1, params);
		cr_assert_eq(PQntuples(r), 1, "workflow %d", i);
		cr_assert_str_eq(PQgetvalue(r, 0, 0), ids[i]);
		PQclear(r);
		/* Its first was marked reacted to. */
		cr_assert_eq(q_int("SELECT count(*) FROM \"TaskExecutions\""
				   " WHERE \"workflowId\" = $1::uuid AND"
				   " \"refName\" = 'a' AND \"deciderSeenAt\""
				   " IS NOT NULL",
				   ids[i]),
			     1, "workflow %d", i);
	}
	cr_assert_eq(q_int("SELECT count(*) FROM \"DecideQueues\"", NULL), 0);
	free(ids);
}

Test(batch, a_few_workflows_each_load_and_follow_their_own_tasks)
{
	batch_of(3);
}

Test(batch, thirty_two_workflows_each_load_and_follow_their_own_tasks)
{
	batch_of(32);
}

Test(batch, thirty_three_workflows_each_load_and_follow_their_own_tasks)
{
	batch_of(33);
}

Test(batch, forty_workflows_each_load_and_follow_their_own_tasks)
{
	batch_of(40);
}

/* ============================================================= identity */

Test(identity, a_retry_is_a_new_attempt_not_a_no_op)
{
	register_defs(2);
	char id[37], tid[37];
	start_exec(id);
	cr_assert_eq(evaluate(NULL), 1);
	int attempt = -1;
	lease_one("w1", tid, &attempt);
	cr_assert_eq(attempt, 0);
	struct err e = ERR_INIT;
	cr_assert(queue_result(C, QUEUE, tid, "w1", RESULT_FAILED, "{}", "boom",
			       &e),
		  "%s", e.msg);

	/* The evaluation decides a retry... */
	struct evaluation ev;
	eval_claim(&ev, D);
	eval_load(&ev);
	struct decider_input in = {wf, &ev.b.items[0], lookup, NULL, NULL};
	struct decision d;
	decide(&in, &d);
	cr_assert_eq(json_array_size(d.tasks), 1);
	json_t *row = json_array_get(d.tasks, 0);
	cr_assert_eq(json_integer_value(json_object_get(row, "attempt")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(row, "refName")),
			 "a");
	cr_assert_eq(json_array_size(d.retries), 1);
	decision_free(&d);
	db_rollback(D);
	eval_free(&ev);

	/* ...and writing it makes a new row beside the failed one. */
	int changed;
	cr_assert_eq(evaluate(&changed), 1);
	cr_assert_eq(changed, 1);
	PGresult *r =
		th_query(sql,
			 "SELECT \"attempt\", \"status\","
			 " coalesce(\"reasonForIncompletion\", ''),"
			 " \"deciderSeenAt\" IS NOT NULL, \"input\"::text"
			 " FROM \"TaskExecutions\" WHERE \"refName\" = 'a'"
			 " ORDER BY \"attempt\"",
			 0, NULL);
	cr_assert_eq(PQntuples(r), 2, "the retry was absorbed");
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "0");
	cr_assert_str_eq(PQgetvalue(r, 0, 1), "FAILED");
	cr_assert_str_eq(PQgetvalue(r, 0, 2), "boom");
	cr_assert_str_eq(PQgetvalue(r, 0, 3), "t");
	cr_assert_str_eq(PQgetvalue(r, 1, 0), "1");
	cr_assert_str_eq(PQgetvalue(r, 1, 1), "SCHEDULED");
	cr_assert_str_eq(PQgetvalue(r, 1, 4), "{\"x\": 1}");
	PQclear(r);
	/* Its queue row is there, available at once (no retry delay). */
	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskQueues\""
			   " WHERE \"leaseExpiresAt\" IS NULL",
			   NULL),
		     1);
	lease_one("w2", tid, &attempt);
	cr_assert_eq(attempt, 1);
	assert_rerun_is_a_no_op(id);
}

Test(identity, a_repeated_write_of_one_identity_is_absorbed)
{
	register_defs(0);
	char id[37];
	start_exec(id);

	/* Two evaluations decide the first task from the same state; the
	 * first writes it. */
	struct evaluation ev;
	eval_claim(&ev, D);
	eval_load(&ev);
	struct loaded_execution *x = &ev.b.items[0];
	struct decider_input in = {wf, x, lookup, NULL, NULL};
	struct decision d1, d2;
	decide(&in, &d1);
	decide(&in, &d2);
	struct err e = ERR_INIT;
	bool applied;
	struct decide_rows r1 = {d1.update, d1.tasks, d1.seen, d1.cancel,
				 d1.events};
	cr_assert(decide_apply(D, x, &r1, &applied, &e), "%s", e.msg);
	cr_assert(applied);

	/* The second, past the version guard (as if it had read the new
	 * version), writes the same identity with another id: absorbed. */
	x->version++;
	struct decide_rows r2 = {d2.update, d2.tasks, d2.seen, d2.cancel,
				 d2.events};
	cr_assert(decide_apply(D, x, &r2, &applied, &e), "%s", e.msg);
	cr_assert(applied);
	cr_assert(db_commit(D, &e), "%s", e.msg);
	decision_free(&d1);
	decision_free(&d2);
	eval_free(&ev);

	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskExecutions\""
			   " WHERE \"workflowId\" = $1::uuid",
			   id),
		     1);
	cr_assert_eq(q_int("SELECT count(*) FROM \"TaskQueues\""
			   " WHERE \"workflowId\" = $1::uuid",
			   id),
		     1);

	/* The version guard itself: a stale version writes nothing. */
	eval_claim(&ev, D);
	cr_assert_eq(ev.b.n, 0);
	db_rollback(D);
	eval_free(&ev);
	enqueue_again(id);
	eval_claim(&ev, D);
	eval_load(&ev);
	x = &ev.b.items[0];
	x->version--;
	json_t *empty = json_array();
	struct decide_rows none = {NULL, empty, empty, empty, empty};
	cr_assert(decide_apply(D, x, &none, &applied, &e), "%s", e.msg);
	cr_assert_not(applied, "a stale version was applied");
	json_decref(empty);
	db_rollback(D);
	eval_free(&ev);
}

/* ================================================================ lease */

/* A statement of the registry, by name. */
static struct db_stmt *
registered(const char *name)
{
	db_registry_init();
	for (size_t i = 0; i < db_registry_size(); i++)
		if (strcmp(db_registry_at(i)->name, name) == 0)
			return db_registry_at(i);
	cr_assert_fail("no statement %s in the registry", name);
	return NULL;
}

/* In PostgreSQL 18.4, a row-locking node whose recheck of a concurrently
 * updated row runs, and which then runs out of rows, leaves the run-time
 * partition pruning of its statement reading freed memory.  Every lease
 * prunes "WorkflowExecutions" at run time, so none may lock in its own
 * plan: "nf_lease_candidates" does, as a query of its own. */
Test(lease, the_lease_statements_lock_no_rows_in_their_own_plans)
{
	static const char *const names[] = {
		"queue_lease_stmt",
		"queue_lease_gated_stmt",
		"queue_lease_system_stmt",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		struct db_stmt *st = registered(names[i]);
		static const char head[] =
			"EXPLAIN (GENERIC_PLAN, FORMAT JSON) ";
		char *text = xmalloc(sizeof(head) + strlen(st->sql));
		memcpy(text, head, sizeof(head) - 1);
		strcpy(text + sizeof(head) - 1, st->sql);
		/* The simple protocol: GENERIC_PLAN takes $n without values. */
		PGresult *r = PQexec(sql, text);
		cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s",
			     names[i], PQerrorMessage(sql));
		const char *plan = PQgetvalue(r, 0, 0);
		cr_expect(strstr(plan, "\"nf_lease_candidates\"") ||
				  strstr(plan, "\"Function Scan\""),
			  "%s does not read nf_lease_candidates: %s", names[i],
			  plan);
		cr_expect_null(strstr(plan, "\"LockRows\""),
			       "%s locks rows in its own plan: %s", names[i],
			       plan);
		PQclear(r);
		free(text);
	}
}

enum { RACE_TASKS = 40, RACE_POLLERS = 8, RACE_ROUNDS = 40 };

/* The racing polls' shared view: which poller holds each task. */
struct race {
	const char *url;
	char ids[RACE_TASKS][37];
	atomic_int holder[RACE_TASKS]; /* 0: nobody, else poller + 1 */
	atomic_long leased;
	atomic_int shared; /* a task leased while another poller held it */
};

struct poller {
	pthread_t t;
	struct race *race;
	int idx;
	char failure[512]; /* the first failure, "" if none */
};

static int
race_task(struct race *r, const char *id)
{
	for (int i = 0; i < RACE_TASKS; i++)
		if (strcmp(r->ids[i], id) == 0)
			return i;
	return -1;
}

/* Leases a whole batch (more than the queue holds), marks what it got as
 * held, then puts every row back: the rows a poll locks are, all the
 * time, rows another poll's lease committed a moment before. */
static void *
poller_main(void *arg)
{
	struct poller *p = arg;
	struct race *r = p->race;
	struct db *db = NULL;
	struct err e = ERR_INIT;
	char worker[32];
	snprintf(worker, sizeof(worker), "racer-%d", p->idx);
	PGconn *back = PQconnectdb(r->url);
	if (PQstatus(back) != CONNECTION_OK ||
	    !db_open(&db, r->url, DB_PLAIN, &e)) {
		snprintf(p->failure, sizeof(p->failure), "connect: %s %s",
			 PQerrorMessage(back), e.msg);
		PQfinish(back);
		return NULL;
	}
	for (int round = 0; round < RACE_ROUNDS && !p->failure[0]; round++) {
		char *json = NULL;
		size_t n = 0;
		if (!queue_lease(db, QUEUE, worker, 100, 60, &json, &n, &e)) {
			snprintf(p->failure, sizeof(p->failure),
				 "lease in round %d: %s", round, e.msg);
			break;
		}
		json_t *a = json_loads(json, 0, NULL);
		int got[RACE_TASKS], k = 0;
		for (size_t i = 0; i < json_array_size(a) && k < RACE_TASKS;
		     i++) {
			int t = race_task(r,
					  json_string_value(json_object_get(
						  json_array_get(a, i), "id")));
			int none = 0;
			if (t < 0)
				snprintf(p->failure, sizeof(p->failure),
					 "leased an unknown task: %s", json);
			else if (!atomic_compare_exchange_strong(
					 &r->holder[t], &none, p->idx + 1))
				atomic_fetch_add(&r->shared, 1);
			else
				got[k++] = t;
		}
		atomic_fetch_add(&r->leased, (long)n);
		json_decref(a);
		free(json);
		for (int i = 0; i < k; i++)
			atomic_store(&r->holder[got[i]], 0);
		const char *params[] = {QUEUE, worker};
		PGresult *res = PQexecParams(
			back,
			"UPDATE \"TaskQueues\" SET \"leaseExpiresAt\" = NULL,"
			" \"leasedBy\" = NULL WHERE \"queueName\" = $1"
			" AND \"leasedBy\" = $2",
			2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			snprintf(p->failure, sizeof(p->failure),
				 "putting back in round %d: %s", round,
				 PQerrorMessage(back));
		PQclear(res);
	}
	db_close(db);
	PQfinish(back);
	return NULL;
}

Test(lease, polls_racing_over_a_short_queue_never_share_a_task)
{
	register_defs(0);
	static struct race r;
	memset(&r, 0, sizeof(r));
	r.url = tdb.url;
	for (int i = 0; i < RACE_TASKS; i++) {
		char id[37];
		start_exec(id);
	}
	while (evaluate(NULL) > 0)
		;
	PGresult *q = th_query(sql,
			       "SELECT \"taskId\"::text FROM \"TaskQueues\""
			       " WHERE \"queueName\" = 'default/step'",
			       0, NULL);
	cr_assert_eq(PQntuples(q), RACE_TASKS);
	for (int i = 0; i < RACE_TASKS; i++)
		snprintf(r.ids[i], sizeof(r.ids[i]), "%s", PQgetvalue(q, i, 0));
	PQclear(q);

	static struct poller p[RACE_POLLERS];
	for (int i = 0; i < RACE_POLLERS; i++) {
		p[i] = (struct poller){.race = &r, .idx = i};
		cr_assert(pthread_create(&p[i].t, NULL, poller_main, &p[i]) ==
			  0);
	}
	for (int i = 0; i < RACE_POLLERS; i++)
		pthread_join(p[i].t, NULL);
	for (int i = 0; i < RACE_POLLERS; i++)
		cr_assert_str_empty(p[i].failure, "poller %d: %s", i,
				    p[i].failure);
	cr_assert_eq(atomic_load(&r.shared), 0,
		     "%d tasks leased while another poll held them",
		     atomic_load(&r.shared));
	long leased = atomic_load(&r.leased);
	cr_assert_gt(leased, 0);
	/* Every lease counted on its row and told in its history. */
	cr_assert_eq(q_int("SELECT sum(\"leaseCount\") FROM \"TaskQueues\""
			   " WHERE \"queueName\" = $1",
			   QUEUE),
		     leased);
	cr_assert_eq(q_int("SELECT count(*) FROM \"WorkflowEvents\""
			   " WHERE \"type\" = $1",
			   "TASK_STARTED"),
		     leased);
}

/* =============================================================== decide */

/* The pure function, no database: states built by hand. */

static struct wf_def *
parse_wf(const char *text)
{
	json_t *doc = json_loads(text, 0, NULL);
	cr_assert_not_null(doc, "bad JSON: %s", text);
	struct wf_def *def = NULL;
	struct dsl_errors errs = {0};
	cr_assert(dsl_workflow_parse(doc, &def, &errs), "invalid: %s", text);
	json_decref(doc);
	return def;
}

static struct decide_batch
one_execution(const char *status, int64_t version, const char *input)
{
	struct decide_batch b = {xcalloc(1, sizeof(*b.items)), 1};
	struct loaded_execution *x = &b.items[0];
	snprintf(x->id, sizeof(x->id), "%s",
		 "01900000-0000-7000-8000-000000000001");
	snprintf(x->ns_id, sizeof(x->ns_id), "%s",
		 "01900000-0000-7000-8000-000000000002");
	x->ns_name = xstrdup("default");
	x->status = xstrdup(status);
	x->version = version;
	x->def_name = xstrdup("two");
	x->def_version = 1;
	x->input = json_loads(input, 0, NULL);
	x->variables = json_object();
	x->started_at = xstrdup("2026-01-01 00:00:00+00");
	return b;
}

static struct loaded_task *
add_task(struct loaded_execution *x, const char *ref, int attempt,
	 const char *status, bool seen, const char *output)
{
	x->tasks = xrealloc(x->tasks, (x->n_tasks + 1) * sizeof(*x->tasks));
	struct loaded_task *t = &x->tasks[x->n_tasks++];
	memset(t, 0, sizeof(*t));
	snprintf(t->id, sizeof(t->id),
		 "01900000-0000-7000-8000-0000000001%02zu", x->n_tasks);
	snprintf(t->workflow_id, sizeof(t->workflow_id), "%s", x->id);
	t->ref = xstrdup(ref);
	t->task_def_name = xstrdup("step");
	t->task_type = xstrdup("SIMPLE");
	t->attempt = attempt;
	t->status = xstrdup(status);
	t->input = json_object();
	t->output = output ? json_loads(output, 0, NULL) : json_object();
	t->terminal = strcmp(status, "SCHEDULED") != 0 &&
		      strcmp(status, "IN_PROGRESS") != 0;
	t->seen = seen;
	t->scheduled_at = xstrdup("2026-01-01 00:00:01+00");
	if (t->terminal) {
		char at[64];
		snprintf(at, sizeof(at), "2026-01-01 00:00:%02zu+00",
			 x->n_tasks + 1);
		t->ended_at = xstrdup(at);
	}
	return t;
}

struct fixture {
	struct wf_def *def;
	struct task_def td;
	struct decide_batch b;
	struct decision d;
};

static const struct task_def *
fixture_lookup(void *arg, const char *name)
{
	struct fixture *f = arg;
	return strcmp(name, "step") == 0 ? &f->td : NULL;
}

static void
fixture_init(struct fixture *f, const char *status, int64_t version)
{
	memset(f, 0, sizeof(*f));
	f->def = parse_wf(two_steps);
	task_def_init(&f->td);
	f->td.name = xstrdup("step");
	f->td.retry_count = 2;
	f->td.retry_delay_seconds = 7;
	f->b = one_execution(status, version, "{\"x\":5}");
}

static void
fixture_decide(struct fixture *f)
{
	struct decider_input in = {f->def, &f->b.items[0], fixture_lookup, f,
				   NULL};
	decide(&in, &f->d);
}

static void
fixture_free(struct fixture *f)
{
	decision_free(&f->d);
	decide_batch_free(&f->b);
	task_def_free(&f->td);
	wf_def_free(f->def);
}

static const char *
event_type(const struct decision *d, size_t i)
{
	return json_string_value(
		json_object_get(json_array_get(d->events, i), "type"));
}

Test(decide, a_new_workflow_schedules_its_first_task)
{
	struct fixture f;
	fixture_init(&f, "RUNNING", 0);
	fixture_decide(&f);
	cr_assert(f.d.changed);
	cr_assert_null(f.d.update);
	cr_assert_eq(json_array_size(f.d.tasks), 1);
	json_t *row = json_array_get(f.d.tasks, 0);
	char *text = json_dumps(row, JSON_SORT_KEYS | JSON_COMPACT);
	cr_assert(strstr(text, "\"refName\":\"a\""), "%s", text);
	cr_assert(strstr(text, "\"attempt\":0"), "%s", text);
	cr_assert(strstr(text, "\"input\":{\"x\":5}"), "%s", text);
	cr_assert(strstr(text, "\"queueName\":\"default/step\""), "%s", text);
	cr_assert(strstr(text, "\"delaySeconds\":0"), "%s", text);
	free(text);
	cr_assert_eq(json_array_size(f.d.events), 1);
	cr_assert_str_eq(event_type(&f.d, 0), "TASK_SCHEDULED");
	cr_assert_eq(json_array_size(f.d.retries), 0);
	fixture_free(&f);
}

Test(decide, an_evaluated_workflow_with_nothing_new_changes_nothing)
{
	struct fixture f;
	fixture_init(&f, "RUNNING", 1);
	add_task(&f.b.items[0], "a", 0, "IN_PROGRESS", false, NULL);
	fixture_decide(&f);
	cr_assert_not(f.d.changed);
	cr_assert_eq(json_array_size(f.d.tasks), 0);
	cr_assert_eq(json_array_size(f.d.events), 0);
	fixture_free(&f);
}

Test(decide, a_completed_task_schedules_the_next_with_its_output)
{
	struct fixture f;
	fixture_init(&f, "RUNNING", 1);
	struct loaded_task *a = add_task(&f.b.items[0], "a", 0, "COMPLETED",
					 false, "{\"y\":{\"deep\":true}}");
	fixture_decide(&f);
	cr_assert(f.d.changed);
	cr_assert_eq(json_array_size(f.d.seen), 1);
	cr_assert_str_eq(json_string_value(json_array_get(f.d.seen, 0)), a->id);
	cr_assert_eq(json_array_size(f.d.tasks), 1);
	json_t *row = json_array_get(f.d.tasks, 0);
	cr_assert_str_eq(json_string_value(json_object_get(row, "refName")),
			 "b");
	json_t *want = json_loads("{\"y\":{\"deep\":true}}", 0, NULL);
	cr_assert(json_equal(json_object_get(row, "input"), want));
	json_decref(want);
	cr_assert_null(f.d.update);
	fixture_free(&f);
}

Test(decide, the_last_task_completes_the_workflow_with_its_output)
{
	struct fixture f;
	fixture_init(&f, "RUNNING", 2);
	add_task(&f.b.items[0], "a", 0, "COMPLETED", true, "{\"y\":1}");
	add_task(&f.b.items[0], "b", 0, "COMPLETED", false, "{\"z\":\"end\"}");
	fixture_decide(&f);
	cr_assert(f.d.changed);
	cr_assert_eq(json_array_size(f.d.tasks), 0);
	cr_assert_not_null(f.d.update);
	cr_assert_str_eq(
		json_string_value(json_object_get(f.d.update, "status")),
		"COMPLETED");
	json_t *want = json_loads("{\"z\":\"end\"}", 0, NULL);
	cr_assert(json_equal(json_object_get(f.d.update, "output"), want));
	json_decref(want);
	size_t n = json_array_size(f.d.events);
	cr_assert_str_eq(event_type(&f.d, n - 1), "WORKFLOW_COMPLETED");
	fixture_free(&f);
}

Test(decide, a_failure_is_retried_after_the_retry_delay_until_it_runs_out)
{
	struct fixture f;
	fixture_init(&f, "RUNNING", 1);
	add_task(&f.b.items[0], "a", 0, "FAILED", true, NULL);
	add_task(&f.b.items[0], "a", 1, "TIMED_OUT", false, NULL);
	fixture_decide(&f);
	cr_assert_eq(json_array_size(f.d.tasks), 1);
	json_t *row = json_array_get(f.d.tasks, 0);
	cr_assert_eq(json_integer_value(json_object_get(row, "attempt")), 2);
	cr_assert_eq(json_integer_value(json_object_get(row, "delaySeconds")),
		     7);
	cr_assert_eq(json_array_size(f.d.retries), 1);
	cr_assert_null(f.d.update);
	fixture_free(&f);

	/* retryCount 2: attempt 2 failing is the end. */
	fixture_init(&f, "RUNNING", 1);
	add_task(&f.b.items[0], "a", 2, "FAILED", false, NULL);
	f.b.items[0].tasks[0].reason = xstrdup("no luck");
	fixture_decide(&f);
	cr_assert_eq(json_array_size(f.d.tasks), 0);
	cr_assert_not_null(f.d.update);
	cr_assert_str_eq(
		json_string_value(json_object_get(f.d.update, "status")),
		"FAILED");
	cr_assert_str_eq(
		json_string_value(json_object_get(f.d.update, "failedRef")),
		"a");
	const char *reason =
		json_string_value(json_object_get(f.d.update, "reason"));
	cr_assert(strstr(reason, "a") && strstr(reason, "no luck"), "%s",
		  reason);
	fixture_free(&f);
}

Test(decide, a_terminal_error_fails_at_once)
{
	struct fixture f;
	fixture_init(&f, "RUNNING", 1);
	add_task(&f.b.items[0], "a", 0, "FAILED_WITH_TERMINAL_ERROR", false,
		 NULL);
	fixture_decide(&f);
	cr_assert_eq(json_array_size(f.d.tasks), 0);
	cr_assert_str_eq(
		json_string_value(json_object_get(f.d.update, "status")),
		"FAILED");
	size_t n = json_array_size(f.d.events);
	cr_assert_str_eq(event_type(&f.d, n - 1), "WORKFLOW_FAILED");
	fixture_free(&f);
}

Test(decide, a_stale_attempt_is_only_acknowledged)
{
	struct fixture f;
	fixture_init(&f, "RUNNING", 3);
	/* Attempt 0's result is processed after attempt 1 exists. */
	add_task(&f.b.items[0], "a", 0, "FAILED", false, NULL);
	add_task(&f.b.items[0], "a", 1, "IN_PROGRESS", false, NULL);
	fixture_decide(&f);
	cr_assert(f.d.changed);
	cr_assert_eq(json_array_size(f.d.seen), 1);
	cr_assert_eq(json_array_size(f.d.tasks), 0);
	cr_assert_null(f.d.update);
	cr_assert_eq(json_array_size(f.d.events), 0);
	fixture_free(&f);
}

Test(decide, paused_and_ended_workflows)
{
	struct fixture f;
	fixture_init(&f, "PAUSED", 1);
	add_task(&f.b.items[0], "a", 0, "COMPLETED", false, NULL);
	fixture_decide(&f);
	cr_assert_not(f.d.changed);
	fixture_free(&f);

	/* Ended: late results are acknowledged, nothing else. */
	fixture_init(&f, "TERMINATED", 2);
	add_task(&f.b.items[0], "a", 0, "COMPLETED", false, NULL);
	fixture_decide(&f);
	cr_assert(f.d.changed);
	cr_assert_eq(json_array_size(f.d.seen), 1);
	cr_assert_eq(json_array_size(f.d.tasks), 0);
	cr_assert_null(f.d.update);
	cr_assert_eq(json_array_size(f.d.events), 0);
	fixture_free(&f);
}

Test(decide, retry_delays_follow_the_retry_logic)
{
	struct task_def d;
	task_def_init(&d);
	d.retry_delay_seconds = 5;
	cr_assert_eq(decider_retry_delay(&d, 1), 5);
	cr_assert_eq(decider_retry_delay(&d, 4), 5);
	d.retry_logic = RETRY_EXPONENTIAL_BACKOFF;
	d.retry_delay_seconds = 2;
	cr_assert_eq(decider_retry_delay(&d, 1), 2);
	cr_assert_eq(decider_retry_delay(&d, 2), 4);
	cr_assert_eq(decider_retry_delay(&d, 3), 8);
	cr_assert_eq(decider_retry_delay(&d, 1000), 86400);
	d.max_retry_delay_seconds = 6;
	cr_assert_eq(decider_retry_delay(&d, 3), 6);
	d.max_retry_delay_seconds = 0;
	d.retry_logic = RETRY_LINEAR_BACKOFF;
	d.retry_delay_seconds = 3;
	d.backoff_scale_factor = 2;
	cr_assert_eq(decider_retry_delay(&d, 2), 12);
	cr_assert_eq(decider_retry_delay(NULL, 1), 60);
	task_def_free(&d);
}

Test(decide, refs_to_load_cover_expressions_and_the_last_task)
{
	struct wf_def *def = parse_wf(two_steps);
	json_t *refs = decider_refs_to_load(def);
	char *text = json_dumps(refs, JSON_COMPACT);
	/* b's input reads a; the output reads b; b is the last task. */
	cr_assert(strstr(text, "\"a\"") && strstr(text, "\"b\""), "%s", text);
	cr_assert_eq(json_array_size(refs), 2, "%s", text);
	free(text);
	json_decref(refs);
	wf_def_free(def);
}
