/*
 * End-to-end tests of timeouts (the "Timers" table and the timer sweeper)
 * on the real nodeflow binary over HTTP.
 *
 *   poll         a task nobody polls within pollTimeoutSeconds times out
 *                ("not polled within 1 s") and is retried; a later attempt
 *                polled in time completes the workflow.
 *   retry        a task running past timeoutSeconds under RETRY (its worker
 *                heartbeating, so the lease never runs out first) times
 *                out and is retried.
 *   time_out_wf  the same under TIME_OUT_WF times the workflow out without
 *                retrying.
 *   alert_only   the same under ALERT_ONLY writes TASK_TIMEOUT_ALERT and
 *                changes nothing: the worker still completes the task.
 *   workflow     a workflow past its timeoutSeconds is TIMED_OUT with its
 *                open task cancelled and dequeued; under ALERT_ONLY it only
 *                gets WORKFLOW_TIMEOUT_ALERT.
 *   finished     work finished before its deadlines: the deadlines are
 *                cancelled (no unclaimed timer is left), and due timers
 *                forced on the finished task and workflow are claimed and
 *                change nothing (the sweeper's re-check).
 *
 * Every test gets its own database and server; the server's output is
 * drained by a thread and kept for failure messages.  Waits are deadlines
 * (th_wait_until), never bare sleeps.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	WAIT_MS = 20000, /* a timeout fires well within this */
};

#define NS E2E_NS

TestSuite(timers, .fini = e2e_stop);

/* ---------------------------------------------------------- HTTP helpers */

static long long
int_at(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	cr_assert(json_is_integer(v), "\"%s\" is not an integer: %s", key,
		  e2e_last_body);
	return json_integer_value(v);
}

/* A task definition: body is the TaskDef (stolen). */
static void
put_task_def(json_t *body)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s",
		 json_string_value(json_object_get(body, "name")));
	json_decref(e2e_callj("PUT", path, 201, body));
}

/* A one-task workflow; extra (stolen, may be NULL) is merged into the
 * definition (timeoutSeconds, timeoutPolicy). */
static void
put_workflow(const char *name, const char *task_name, json_t *extra)
{
	json_t *def = json_pack("{s:s,s:i,s:[{s:s,s:s,s:s}]}", "name", name,
				"version", 1, "tasks", "name", task_name,
				"taskReferenceName", "only", "type", "SIMPLE");
	if (extra) {
		json_object_update(def, extra);
		json_decref(extra);
	}
	json_decref(e2e_callj("POST", NS "/workflow-definitions", 201, def));
}

static void
start_workflow(const char *name, char id[37])
{
	json_t *v = e2e_callj("POST", NS "/workflows", 201,
			      json_pack("{s:s,s:{}}", "name", name, "input"));
	snprintf(id, 37, "%s", e2e_str_at(v, "id"));
	json_decref(v);
}

struct poll_probe {
	const char *queue;
	const char *worker;
	json_t *task; /* the task handed out */
};

static bool
polled(void *arg)
{
	struct poll_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", p->queue);
	json_t *v = e2e_callj(
		"POST", path, 200,
		json_pack("{s:s,s:i}", "workerId", p->worker, "count", 1));
	json_t *tasks = json_object_get(v, "tasks");
	cr_assert(json_is_array(tasks), "poll: %s", e2e_last_body);
	if (json_array_size(tasks))
		p->task = json_incref(json_array_get(tasks, 0));
	json_decref(v);
	return p->task != NULL;
}

/* Polls until a task comes; a new reference. */
static json_t *
poll_one(const char *queue, const char *worker)
{
	struct poll_probe p = {queue, worker, NULL};
	cr_assert(th_wait_until(WAIT_MS, polled, &p),
		  "no task on queue %s within %d ms", queue, WAIT_MS);
	return p.task;
}

static long
task_op(const char *op, const char *queue, const char *task_id,
	const char *worker)
{
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/%s", queue,
		 task_id, op);
	char body[256];
	snprintf(body, sizeof(body), "{\"workerId\":\"%s\",\"output\":{}}",
		 worker);
	return e2e_send("POST", path, body);
}

static char *
sql_text(const char *q, const char *param)
{
	const char *params[] = {param};
	return th_value(e2e_sql(), q, 1, params);
}

/* The workflow's tasks, in order of scheduling (attempts of "only"). */
static size_t
tasks_of(const json_t *wf, const json_t *out[], size_t max)
{
	size_t n = 0, i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (n < max)
			out[n++] = t;
	}
	return n;
}

/* The events of a workflow, checked gap-free, the last one of type last;
 * a new reference. */
static json_t *
history(const char *id, const char *last)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/events", id);
	json_t *v = e2e_call("GET", path, NULL, 200);
	json_t *events = json_incref(json_object_get(v, "events"));
	json_decref(v);
	size_t n = json_array_size(events), i;
	json_t *ev;
	cr_assert_gt(n, 1, "%s", e2e_last_body);
	json_array_foreach (events, i, ev) {
		cr_assert_eq(int_at(ev, "seq"), (long long)i + 1,
			     "event %zu has seq %lld: %s", i, int_at(ev, "seq"),
			     e2e_last_body);
	}
	cr_assert_str_eq(e2e_str_at(json_array_get(events, 0), "type"),
			 "WORKFLOW_STARTED");
	cr_assert_str_eq(e2e_str_at(json_array_get(events, n - 1), "type"),
			 last, "%s", e2e_last_body);
	return events;
}

static size_t
count_type(const json_t *events, const char *type)
{
	size_t n = 0, i;
	const json_t *ev;
	json_array_foreach (events, i, ev) {
		if (strcmp(json_string_value(json_object_get(ev, "type")),
			   type) == 0)
			n++;
	}
	return n;
}

/* The first event of a type, or NULL. */
static const json_t *
event_of(const json_t *events, const char *type)
{
	size_t i;
	const json_t *ev;
	json_array_foreach (events, i, ev) {
		if (strcmp(json_string_value(json_object_get(ev, "type")),
			   type) == 0)
			return ev;
	}
	return NULL;
}

struct sql_probe {
	const char *query; /* one $1 */
	const char *param;
	long long want;
	long long seen;
};

static bool
sql_reaches(void *arg)
{
	struct sql_probe *p = arg;
	p->seen = e2e_sql_int(p->query, p->param);
	return p->seen >= p->want;
}

/* A worker that holds a task, heartbeating every 300 ms (so its lease of
 * responseTimeoutSeconds never runs out), until `until` (one $1: the task
 * id) counts at least 1. */
struct hold {
	const char *queue;
	const char *task_id;
	const char *worker;
	const char *until;
	int64_t last_beat;
	long last_status;
};

static bool
held_until(void *arg)
{
	struct hold *h = arg;
	if (th_now_ms() - h->last_beat >= 300) {
		h->last_status =
			task_op("heartbeat", h->queue, h->task_id, h->worker);
		h->last_beat = th_now_ms();
	}
	return e2e_sql_int(h->until, h->task_id) > 0;
}

static void
hold_until(const char *queue, const char *task_id, const char *worker,
	   const char *until)
{
	struct hold h = {queue, task_id, worker, until, 0, 0};
	bool ok = th_wait_until(WAIT_MS, held_until, &h);
	cr_assert(ok,
		  "task %s: %s never held (last heartbeat %ld); server:\n%s",
		  task_id, until, h.last_status, e2e_log());
}

static const char task_status_q[] =
	"SELECT count(*) FROM \"TaskExecutions\" WHERE \"id\" = $1::uuid"
	" AND \"status\" = 'TIMED_OUT'";

/* Timers of a workflow that could still fire. */
static const char unclaimed_q[] =
	"SELECT count(*) FROM \"Timers\" WHERE \"workflowId\" = $1::uuid"
	" AND \"claimedAt\" IS NULL";

/* ================================================================ poll */

Test(timers, poll_timeout_times_an_unpolled_task_out_and_it_is_retried)
{
	e2e_start(NULL);
	put_task_def(json_pack("{s:s,s:i,s:s,s:i,s:i,s:i}", "name", "pt",
			       "retryCount", 5, "retryLogic", "FIXED",
			       "retryDelaySeconds", 0, "pollTimeoutSeconds", 1,
			       "responseTimeoutSeconds", 60));
	put_workflow("ptw", "pt", NULL);
	char wf[37];
	start_workflow("ptw", wf);

	/* Nobody polls: attempt 0 times out. */
	struct sql_probe first = {"SELECT count(*) FROM \"TaskExecutions\""
				  " WHERE \"workflowId\" = $1::uuid"
				  " AND \"attempt\" = 0"
				  " AND \"status\" = 'TIMED_OUT'",
				  wf, 1, 0};
	cr_assert(th_wait_until(WAIT_MS, sql_reaches, &first),
		  "attempt 0 never timed out");
	char *reason = sql_text("SELECT \"reasonForIncompletion\" FROM"
				" \"TaskExecutions\" WHERE \"workflowId\" ="
				" $1::uuid AND \"attempt\" = 0",
				wf);
	cr_assert_str_eq(reason, "not polled within 1 s (pollTimeoutSeconds)");
	free(reason);

	/* A worker now: it gets a later attempt (each one it missed timed
	 * out the same way) and completes it. */
	json_t *t = poll_one("pt", "late");
	long long attempt = int_at(t, "attempt");
	cr_assert_geq(attempt, 1);
	cr_assert_eq(task_op("complete", "pt", e2e_str_at(t, "id"), "late"),
		     200, "%s", e2e_last_body);
	json_decref(t);

	json_t *w = e2e_wait_status(wf, "COMPLETED", WAIT_MS);
	const json_t *rows[8];
	size_t n = tasks_of(w, rows, 8);
	cr_assert_eq(n, (size_t)attempt + 1, "%s", e2e_last_body);
	for (size_t i = 0; i + 1 < n; i++) {
		cr_assert_str_eq(e2e_str_at(rows[i], "status"), "TIMED_OUT");
		cr_assert(strstr(e2e_str_at(rows[i], "reason"),
				 "pollTimeoutSeconds"));
		cr_assert_eq(int_at(rows[i], "pollCount"), 0);
	}
	cr_assert_str_eq(e2e_str_at(rows[n - 1], "status"), "COMPLETED");
	json_decref(w);

	json_t *events = history(wf, "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_TIMED_OUT"), (size_t)attempt);
	const json_t *to = event_of(events, "TASK_TIMED_OUT");
	cr_assert_str_eq(e2e_str_at(json_object_get(to, "data"), "timeout"),
			 "scheduleToStart");
	json_decref(events);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\"", NULL),
		     0);
	cr_assert_eq(e2e_sql_int(unclaimed_q, wf), 0);
}

/* =============================================================== retry */

/* A one-task workflow on a task with timeoutSeconds 2 under policy; a
 * worker polls it and holds it, heartbeating.  Returns the task id. */
static void
held_past_timeout(const char *queue, const char *policy, int retry_count,
		  char wf[37], char tid[37])
{
	put_task_def(json_pack("{s:s,s:i,s:s,s:i,s:i,s:s,s:i}", "name", queue,
			       "retryCount", retry_count, "retryLogic", "FIXED",
			       "retryDelaySeconds", 0, "timeoutSeconds", 2,
			       "timeoutPolicy", policy,
			       "responseTimeoutSeconds", 2));
	char wname[64];
	snprintf(wname, sizeof(wname), "%s_wf", queue);
	put_workflow(wname, queue, NULL);
	start_workflow(wname, wf);
	json_t *t = poll_one(queue, "slow");
	snprintf(tid, 37, "%s", e2e_str_at(t, "id"));
	cr_assert_eq(int_at(t, "attempt"), 0);
	json_decref(t);
}

/* How long the attempt ran before it ended, in ms. */
static long long
ran_ms(const char *tid)
{
	return e2e_sql_int(
		"SELECT (extract(epoch FROM \"endedAt\" - \"startedAt\")"
		" * 1000)::bigint FROM \"TaskExecutions\""
		" WHERE \"id\" = $1::uuid",
		tid);
}

Test(timers, task_timeout_retry_times_the_attempt_out_and_it_is_retried)
{
	e2e_start(NULL);
	char wf[37], tid[37];
	held_past_timeout("rt", "RETRY", 1, wf, tid);
	hold_until("rt", tid, "slow", task_status_q);

	/* It ran its 2 s (the lease never ran out: it was heartbeating). */
	cr_assert_geq(ran_ms(tid), 2000);
	char *reason = sql_text("SELECT \"reasonForIncompletion\" FROM"
				" \"TaskExecutions\" WHERE \"id\" = $1::uuid",
				tid);
	cr_assert_str_eq(reason, "ran longer than its timeoutSeconds (2 s)");
	free(reason);
	cr_assert_eq(task_op("heartbeat", "rt", tid, "slow"), 409);
	cr_assert_eq(task_op("complete", "rt", tid, "slow"), 409,
		     "a result after the timeout was taken");

	/* Retried: attempt 1, completed in time. */
	json_t *t = poll_one("rt", "quick");
	cr_assert_eq(int_at(t, "attempt"), 1);
	cr_assert_eq(task_op("complete", "rt", e2e_str_at(t, "id"), "quick"),
		     200, "%s", e2e_last_body);
	json_decref(t);
	json_t *w = e2e_wait_status(wf, "COMPLETED", WAIT_MS);
	const json_t *rows[4];
	cr_assert_eq(tasks_of(w, rows, 4), 2, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[0], "status"), "TIMED_OUT");
	cr_assert_str_eq(e2e_str_at(rows[1], "status"), "COMPLETED");
	json_decref(w);

	json_t *events = history(wf, "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_TIMED_OUT"), 1);
	const json_t *data =
		json_object_get(event_of(events, "TASK_TIMED_OUT"), "data");
	cr_assert_str_eq(e2e_str_at(data, "timeout"), "taskTimeout");
	cr_assert_str_eq(e2e_str_at(data, "timeoutPolicy"), "RETRY");
	json_decref(events);
	cr_assert_eq(e2e_sql_int(unclaimed_q, wf), 0);
}

/* ========================================================= time_out_wf */

Test(timers, task_timeout_time_out_wf_times_the_workflow_out)
{
	e2e_start(NULL);
	char wf[37], tid[37];
	held_past_timeout("wt", "TIME_OUT_WF", 3, wf, tid);
	hold_until("wt", tid, "slow", task_status_q);
	cr_assert_geq(ran_ms(tid), 2000);

	json_t *w = e2e_wait_status(wf, "TIMED_OUT", WAIT_MS);
	cr_assert(strstr(e2e_str_at(w, "reason"), "timed out"), "%s",
		  e2e_last_body);
	cr_assert(strstr(e2e_str_at(w, "reason"), "timeoutSeconds (2 s)"), "%s",
		  e2e_last_body);
	const json_t *rows[4];
	/* Not retried, though its retryCount allows 3. */
	cr_assert_eq(tasks_of(w, rows, 4), 1, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[0], "status"), "TIMED_OUT");
	json_decref(w);
	cr_assert_eq(task_op("complete", "wt", tid, "slow"), 409);

	json_t *events = history(wf, "WORKFLOW_TIMED_OUT");
	cr_assert_eq(count_type(events, "TASK_TIMED_OUT"), 1);
	cr_assert_eq(count_type(events, "TASK_SCHEDULED"), 1);
	json_decref(events);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\"", NULL),
		     0);
	cr_assert_eq(e2e_sql_int(unclaimed_q, wf), 0);
}

/* ========================================================== alert_only */

Test(timers, task_timeout_alert_only_alerts_and_changes_nothing)
{
	e2e_start(NULL);
	char wf[37], tid[37];
	held_past_timeout("at", "ALERT_ONLY", 0, wf, tid);
	hold_until("at", tid, "slow",
		   "SELECT count(*) FROM \"WorkflowEvents\""
		   " WHERE \"taskId\" = $1::uuid"
		   " AND \"type\" = 'TASK_TIMEOUT_ALERT'");

	const char *tp[] = {tid};
	char *st = th_value(e2e_sql(),
			    "SELECT \"status\" FROM \"TaskExecutions\""
			    " WHERE \"id\" = $1::uuid",
			    1, tp);
	cr_assert_str_eq(st, "IN_PROGRESS");
	free(st);
	json_t *w = e2e_get_workflow(wf);
	cr_assert_str_eq(e2e_str_at(w, "status"), "RUNNING");
	json_decref(w);

	/* The worker still holds it and finishes it. */
	cr_assert_eq(task_op("heartbeat", "at", tid, "slow"), 200, "%s",
		     e2e_last_body);
	cr_assert_eq(task_op("complete", "at", tid, "slow"), 200, "%s",
		     e2e_last_body);
	w = e2e_wait_status(wf, "COMPLETED", WAIT_MS);
	const json_t *rows[4];
	cr_assert_eq(tasks_of(w, rows, 4), 1, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[0], "status"), "COMPLETED");
	json_decref(w);
	json_t *events = history(wf, "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_TIMEOUT_ALERT"), 1);
	cr_assert_eq(count_type(events, "TASK_TIMED_OUT"), 0);
	json_decref(events);
	cr_assert_eq(e2e_sql_int(unclaimed_q, wf), 0);
}

/* ============================================================ workflow */

Test(timers, workflow_timeout_times_the_workflow_out_and_cancels_its_tasks)
{
	e2e_start(NULL);
	put_task_def(json_pack("{s:s,s:i,s:i}", "name", "long", "retryCount", 0,
			       "responseTimeoutSeconds", 60));
	put_workflow("wto", "long",
		     json_pack("{s:i,s:s}", "timeoutSeconds", 2,
			       "timeoutPolicy", "TIME_OUT_WF"));
	put_workflow("walert", "long",
		     json_pack("{s:i,s:s}", "timeoutSeconds", 1,
			       "timeoutPolicy", "ALERT_ONLY"));
	char wf[37], alerted[37];
	start_workflow("wto", wf);
	json_t *t = poll_one("long", "holder");
	char tid[37];
	snprintf(tid, sizeof(tid), "%s", e2e_str_at(t, "id"));
	json_decref(t);

	/* ALERT_ONLY: an event, still running. */
	start_workflow("walert", alerted);
	struct sql_probe alert = {"SELECT count(*) FROM \"WorkflowEvents\""
				  " WHERE \"workflowId\" = $1::uuid"
				  " AND \"type\" = 'WORKFLOW_TIMEOUT_ALERT'",
				  alerted, 1, 0};
	cr_assert(th_wait_until(WAIT_MS, sql_reaches, &alert),
		  "no WORKFLOW_TIMEOUT_ALERT");

	/* TIME_OUT_WF: the held task is cancelled and dequeued. */
	json_t *w = e2e_wait_status(wf, "TIMED_OUT", WAIT_MS);
	cr_assert(strstr(e2e_str_at(w, "reason"), "timeoutSeconds (2 s)"), "%s",
		  e2e_last_body);
	const json_t *rows[4];
	cr_assert_eq(tasks_of(w, rows, 4), 1, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[0], "status"), "CANCELED");
	json_decref(w);
	cr_assert_eq(task_op("complete", "long", tid, "holder"), 409);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\""
				 " WHERE \"workflowId\" = $1::uuid",
				 wf),
		     0);
	cr_assert_geq(
		e2e_sql_int("SELECT (extract(epoch FROM \"endedAt\" -"
			    " \"startedAt\") * 1000)::bigint FROM"
			    " \"WorkflowExecutions\" WHERE \"id\" = $1::uuid",
			    wf),
		2000);
	json_t *events = history(wf, "WORKFLOW_TIMED_OUT");
	cr_assert_eq(count_type(events, "TASK_CANCELED"), 1);
	json_decref(events);

	w = e2e_get_workflow(alerted);
	cr_assert_str_eq(e2e_str_at(w, "status"), "RUNNING");
	json_decref(w);
	events = history(alerted, "WORKFLOW_TIMEOUT_ALERT");
	json_decref(events);
	/* And it runs on to completion. */
	t = poll_one("long", "holder");
	cr_assert_str_eq(e2e_str_at(t, "workflowId"), alerted);
	cr_assert_eq(task_op("complete", "long", e2e_str_at(t, "id"), "holder"),
		     200, "%s", e2e_last_body);
	json_decref(t);
	json_decref(e2e_wait_status(alerted, "COMPLETED", WAIT_MS));
}

/* ============================================================ finished */

/* The history's length and its timeout events, as one string. */
static char *
digest(const char *wf)
{
	return sql_text(
		"SELECT (SELECT count(*) FROM \"WorkflowEvents\""
		" WHERE \"workflowId\" = $1::uuid) || '/' ||"
		" (SELECT string_agg(\"status\" || \"attempt\", ',' ORDER BY"
		" \"attempt\") FROM \"TaskExecutions\" WHERE \"workflowId\" ="
		" $1::uuid) || '/' || (SELECT \"status\" || \"version\" FROM"
		" \"WorkflowExecutions\" WHERE \"id\" = $1::uuid)",
		wf);
}

Test(timers, deadlines_of_finished_work_are_cancelled_and_never_fire)
{
	e2e_start(NULL);
	/* Deadlines long enough that a loaded machine never reaches them:
	 * what is tested is their cancellation, and stale ones firing. */
	put_task_def(json_pack("{s:s,s:i,s:i,s:i,s:s,s:i}", "name", "ft",
			       "retryCount", 2, "pollTimeoutSeconds", 60,
			       "timeoutSeconds", 120, "timeoutPolicy",
			       "TIME_OUT_WF", "responseTimeoutSeconds", 60));
	put_workflow("fw", "ft",
		     json_pack("{s:i,s:s}", "timeoutSeconds", 180,
			       "timeoutPolicy", "TIME_OUT_WF"));
	char wf[37];
	start_workflow("fw", wf);
	/* Armed: the workflow's deadline, and the task's two. */
	struct sql_probe armed = {"SELECT count(*) FROM \"Timers\""
				  " WHERE \"workflowId\" = $1::uuid",
				  wf, 3, 0};
	cr_assert(th_wait_until(WAIT_MS, sql_reaches, &armed),
		  "%lld timers armed", armed.seen);
	json_t *t = poll_one("ft", "quick");
	char tid[37];
	snprintf(tid, sizeof(tid), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	cr_assert_eq(task_op("complete", "ft", tid, "quick"), 200, "%s",
		     e2e_last_body);
	json_decref(e2e_wait_status(wf, "COMPLETED", WAIT_MS));

	/* Cancelled when the task finished and the workflow ended (any that
	 * fired meanwhile were claimed and found nothing to do). */
	cr_assert_eq(e2e_sql_int(unclaimed_q, wf), 0);

	/* Deadlines that outlived their work: due timers of every kind on
	 * the finished task and workflow (0 s: as overdue as can be) fire
	 * and change nothing. */
	char *before = digest(wf);
	const char *p[] = {wf, tid};
	PQclear(th_query(
		e2e_sql(),
		"INSERT INTO \"Timers\" (\"namespaceId\", \"workflowId\","
		" \"taskId\", \"kind\", \"fireAt\", \"payload\")"
		" SELECT e.\"namespaceId\", e.\"id\", k.\"task\", k.\"kind\","
		" now() - interval '1 second', jsonb_build_object('seconds', 0,"
		" 'policy', 'TIME_OUT_WF', 'stale', true)"
		" FROM \"WorkflowExecutions\" e,"
		" (VALUES ($2::uuid, 'scheduleToStart'),"
		" ($2::uuid, 'taskTimeout'), (NULL::uuid, 'workflowTimeout'))"
		" AS k(\"task\", \"kind\") WHERE e.\"id\" = $1::uuid",
		2, p));
	struct sql_probe fired = {"SELECT count(*) FROM \"Timers\""
				  " WHERE \"workflowId\" = $1::uuid"
				  " AND \"claimedAt\" IS NOT NULL"
				  " AND \"payload\" ? 'stale'",
				  wf, 3, 0};
	cr_assert(th_wait_until(WAIT_MS, sql_reaches, &fired),
		  "%lld of 3 stale timers fired", fired.seen);
	char *after = digest(wf);
	cr_assert_str_eq(after, before, "a stale timer changed finished work");
	free(before);
	free(after);
	cr_assert_eq(e2e_sql_int(unclaimed_q, wf), 0, "a stale timer re-armed");

	json_t *w = e2e_get_workflow(wf);
	cr_assert_str_eq(e2e_str_at(w, "status"), "COMPLETED");
	const json_t *rows[4];
	cr_assert_eq(tasks_of(w, rows, 4), 1, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[0], "status"), "COMPLETED");
	json_decref(w);
	json_t *events = history(wf, "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_TIMED_OUT"), 0);
	cr_assert_eq(count_type(events, "TASK_TIMEOUT_ALERT"), 0);
	cr_assert_eq(count_type(events, "WORKFLOW_TIMED_OUT"), 0);
	json_decref(events);
}
