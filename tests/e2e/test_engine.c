/*
 * End-to-end tests of the engine core on the real nodeflow binary over
 * HTTP: starting workflows, the decider inside the server, the worker API
 * (poll, complete, fail, heartbeat, release, defer, batched results), the
 * lease sweeper, the executions list, and a SIGKILL in the middle of work.
 *
 *   lifecycle    a three-task sequential workflow with expressions between
 *                its tasks and outputParameters runs to COMPLETED with the
 *                expected output; every task COMPLETED with its input
 *                resolved from the previous output; the history is
 *                gap-free, WORKFLOW_STARTED first, WORKFLOW_COMPLETED last.
 *   retries      failed attempts become new attempts (the failed rows kept
 *                with their reasons) until retryCount runs out, which fails
 *                the workflow naming the task; a terminal failure is never
 *                retried.
 *   workers      eight competing workers: no task handed out twice, every
 *                workflow completes; a task enqueued wakes one of the
 *                long-polls parked for it, not all of them, on the
 *                replica that enqueued it and on another.
 *   idempotency  twenty concurrent starts with one key make one execution
 *                (RETURN_EXISTING: one 201, the same id for all; FAIL: one
 *                201, nineteen 409).
 *   starts       starts arriving together are written in one statement,
 *                each whole; a refused one fails only its own request; a
 *                start decides its first step in its own transaction (the
 *                same rows as the deciders would write), an api-only
 *                replica's too, and one whose first step is refused is
 *                left to the deciders.
 *   listing      keyset paging over rows sharing a millisecond returns each
 *                exactly once in (startedAt DESC, id DESC) order; limit and
 *                cursor validation.
 *   leases       a worker without the lease gets 409 and changes nothing;
 *                heartbeat extends the lease; release makes the task
 *                pollable at once; defer hides it for its delay; a lease
 *                that runs out times the attempt out and it is retried.
 *   errors       bad input of every endpoint: its 4xx, a JSON error body,
 *                and the engine tables unchanged.
 *   crash        SIGKILL of the server in the middle of 300 workflows; a
 *                new server on the same database finishes them all; no task
 *                identity twice, every history gap-free.
 *
 * Every test gets its own database and server.  The server's output is
 * drained by a thread (a full pipe would stall it) and kept for failure
 * messages.  Worker threads never assert: they count what they saw and
 * the test thread asserts on it.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
	DECIDE_TIMEOUT_MS = 10000, /* a next task or status shows up by then */
};

/* ----------------------------------------------------- per-test fixtures */

TestSuite(lifecycle, .fini = e2e_stop);
TestSuite(retries, .fini = e2e_stop);
TestSuite(workers, .fini = e2e_stop);
TestSuite(idempotency, .fini = e2e_stop);
TestSuite(starts, .fini = e2e_stop);
TestSuite(results, .fini = e2e_stop);
TestSuite(listing, .fini = e2e_stop);
TestSuite(leases, .fini = e2e_stop);
TestSuite(errors, .fini = e2e_stop);
TestSuite(crash, .fini = e2e_stop);

/* ---------------------------------------------------------- HTTP helpers */

static long long
int_at(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	cr_assert(json_is_integer(v), "\"%s\" is not an integer: %s", key,
		  e2e_last_body);
	return json_integer_value(v);
}

static char *engine_digest(void);
/* When set, every error_of() checks that the request changed nothing. */
static char *unchanged_digest;

/* An error answer: status, a JSON body {"error":{"code","message"}}.
 * Returns the error object (a new reference). */
static json_t *
error_of(const char *method, const char *path, const char *body, long status,
	 const char *code)
{
	json_t *v = e2e_call(method, path, body, status);
	if (unchanged_digest) {
		char *now = engine_digest();
		cr_assert_str_eq(now, unchanged_digest,
				 "%s %s (%s) changed the engine tables", method,
				 path, body ? body : "");
		free(now);
	}
	cr_assert_not_null(v, "%s %s: an error needs a body", method, path);
	json_t *e = json_object_get(v, "error");
	cr_assert(json_is_object(e), "%s %s: no error object: %s", method, path,
		  e2e_last_body);
	if (code)
		cr_assert_str_eq(e2e_str_at(e, "code"), code, "%s %s: %s",
				 method, path, e2e_last_body);
	cr_assert_gt(strlen(e2e_str_at(e, "message")), 0);
	json_incref(e);
	json_decref(v);
	return e;
}

static void
expect_error(const char *method, const char *path, const char *body,
	     long status, const char *code)
{
	json_decref(error_of(method, path, body, status, code));
}

static bool
has_detail(const json_t *e, const char *path)
{
	const json_t *details = json_object_get(e, "details");
	size_t i;
	const json_t *d;
	json_array_foreach (details, i, d) {
		const char *p = json_string_value(json_object_get(d, "path"));
		if (p && strcmp(p, path) == 0)
			return true;
	}
	return false;
}

/* A 400 invalid_argument whose details name every path of at
 * (NULL-terminated). */
static void
expect_invalid(const char *method, const char *path, const char *body,
	       const char *const *at)
{
	json_t *e = error_of(method, path, body, 400, "invalid_argument");
	for (size_t i = 0; at && at[i]; i++)
		cr_assert(has_detail(e, at[i]), "%s %s: no detail at %s: %s",
			  method, path, at[i], e2e_last_body);
	json_decref(e);
}

/* ------------------------------------------------------- engine helpers */

#define NS E2E_NS

static void
put_task_def(const char *name, int retry_count, int response_timeout)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", name);
	json_t *v = e2e_callj("PUT", path, 201,
			      json_pack("{s:s,s:i,s:s,s:i,s:i}", "name", name,
					"retryCount", retry_count, "retryLogic",
					"FIXED", "retryDelaySeconds", 0,
					"responseTimeoutSeconds",
					response_timeout));
	json_decref(v);
}

/* A one-task workflow named name whose task is task_name. */
static void
put_one_task_workflow(const char *name, const char *task_name)
{
	json_t *v = e2e_callj(
		"POST", NS "/workflow-definitions", 201,
		json_pack("{s:s,s:i,s:[{s:s,s:s,s:s,s:{s:s}}]}", "name", name,
			  "version", 1, "tasks", "name", task_name,
			  "taskReferenceName", "only", "type", "SIMPLE",
			  "inputParameters", "n", "${workflow.input.n}"));
	json_decref(v);
}

struct poll_probe {
	const char *queue;
	const char *worker;
	int count;
	json_t *tasks; /* the last non-empty answer */
};

static bool
polled_something(void *arg)
{
	struct poll_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", p->queue);
	json_t *v = e2e_callj("POST", path, 200,
			      json_pack("{s:s,s:i}", "workerId", p->worker,
					"count", p->count));
	json_t *tasks = json_object_get(v, "tasks");
	cr_assert(json_is_array(tasks), "poll: %s", e2e_last_body);
	if (json_array_size(tasks) == 0) {
		json_decref(v);
		return false;
	}
	p->tasks = json_incref(tasks);
	json_decref(v);
	return true;
}

/* Polls until a task comes (waitMs long-poll is not there yet): the first
 * task, a new reference. */
static json_t *
poll_one(const char *queue, const char *worker, int timeout_ms)
{
	struct poll_probe p = {queue, worker, 1, NULL};
	cr_assert(th_wait_until(timeout_ms, polled_something, &p),
		  "no task on queue %s within %d ms", queue, timeout_ms);
	json_t *t = json_incref(json_array_get(p.tasks, 0));
	json_decref(p.tasks);
	return t;
}

/* One poll; the number of tasks it handed out. */
static size_t
poll_count(const char *queue, const char *worker)
{
	struct poll_probe p = {queue, worker, 10, NULL};
	if (!polled_something(&p))
		return 0;
	size_t n = json_array_size(p.tasks);
	json_decref(p.tasks);
	return n;
}

static long
task_op(const char *op, const char *queue, const char *task_id, json_t *body,
	json_t **out)
{
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/%s", queue,
		 task_id, op);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct th_response r;
	th_http(e2e_server(), "POST", path, text, strlen(text), &r);
	free(text);
	snprintf(e2e_last_body, sizeof(e2e_last_body), "%s", r.body);
	long status = r.status;
	json_t *v = json_loadb(r.body, r.body_len, 0, NULL);
	cr_assert_not_null(v, "%s: body is not JSON: %s", path, r.body);
	th_response_free(&r);
	if (out)
		*out = v;
	else
		json_decref(v);
	return status;
}

static long
complete(const char *queue, const char *task_id, const char *worker,
	 json_t *output)
{
	return task_op(
		"complete", queue, task_id,
		json_pack("{s:s,s:o}", "workerId", worker, "output", output),
		NULL);
}

static long
fail(const char *queue, const char *task_id, const char *worker,
     const char *reason, bool terminal)
{
	return task_op("fail", queue, task_id,
		       json_pack("{s:s,s:s,s:b}", "workerId", worker, "reason",
				 reason, "terminal", terminal),
		       NULL);
}

/* The tasks of a workflow document with refName ref, in order. */
static size_t
tasks_of(const json_t *wf, const char *ref, const json_t *out[], size_t max)
{
	size_t n = 0, i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   ref) == 0 &&
		    n < max)
			out[n++] = t;
	}
	return n;
}

/* The events of a workflow, checked gap-free (seq 1..n) and starting and
 * ending with the given types; a new reference. */
static json_t *
history(const char *id, const char *first, const char *last)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/events", id);
	json_t *v = e2e_call("GET", path, NULL, 200);
	json_t *events = json_incref(json_object_get(v, "events"));
	json_decref(v);
	cr_assert(json_is_array(events) && json_array_size(events) >= 2, "%s",
		  e2e_last_body);
	size_t i;
	json_t *ev;
	json_array_foreach (events, i, ev) {
		cr_assert_eq(int_at(ev, "seq"), (long long)i + 1,
			     "event %zu has seq %lld: %s", i, int_at(ev, "seq"),
			     e2e_last_body);
	}
	size_t n = json_array_size(events);
	cr_assert_str_eq(e2e_str_at(json_array_get(events, 0), "type"), first,
			 "%s", e2e_last_body);
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

static bool
json_eq_text(const json_t *v, const char *text)
{
	json_t *want = json_loads(text, 0, NULL);
	cr_assert_not_null(want, "bad expected JSON %s", text);
	bool eq = json_equal((json_t *)v, want);
	json_decref(want);
	return eq;
}

/* ============================================================ lifecycle */

static const char seq3_wf[] =
	"{\"name\":\"seq3\",\"version\":1,\"tasks\":["
	"{\"name\":\"step\",\"taskReferenceName\":\"a\",\"type\":\"SIMPLE\","
	" \"inputParameters\":{\"x\":\"${workflow.input.x}\"}},"
	"{\"name\":\"step\",\"taskReferenceName\":\"b\",\"type\":\"SIMPLE\","
	" \"inputParameters\":{\"y\":\"${a.output.y}\","
	"  \"label\":\"${workflow.input.label}\"}},"
	"{\"name\":\"step\",\"taskReferenceName\":\"c\",\"type\":\"SIMPLE\","
	" \"inputParameters\":{\"z\":\"${b.output.z}\","
	"  \"text\":\"z is ${b.output.z}\"}}],"
	"\"outputParameters\":{\"result\":\"${c.output.r}\","
	" \"fromA\":\"${a.output.y}\",\"label\":\"${workflow.input.label}\"}}";

Test(lifecycle, three_sequential_tasks_with_expressions)
{
	e2e_start(NULL);
	put_task_def("step", 0, 60);
	e2e_call_ok("POST", NS "/workflow-definitions", seq3_wf, 201);
	char id[37];
	e2e_start_workflow("seq3", json_pack("{s:i,s:s}", "x", 1, "label", "L"),
			   id);

	/* The worker: a → y = x + 1, b → z = y * 10, c → r = text. */
	const char *refs[] = {"a", "b", "c"};
	for (int i = 0; i < 3; i++) {
		json_t *t = poll_one("step", "w1", DECIDE_TIMEOUT_MS);
		cr_assert_str_eq(e2e_str_at(t, "workflowId"), id);
		cr_assert_str_eq(e2e_str_at(t, "refName"), refs[i]);
		cr_assert_eq(int_at(t, "attempt"), 0);
		json_t *in = json_object_get(t, "input");
		json_t *out;
		if (i == 0)
			out = json_pack("{s:I}", "y", int_at(in, "x") + 1);
		else if (i == 1)
			out = json_pack("{s:I}", "z", int_at(in, "y") * 10);
		else
			out = json_pack("{s:s}", "r", e2e_str_at(in, "text"));
		/* Nothing else is pollable while this one runs. */
		cr_assert_eq(poll_count("step", "w2"), 0);
		cr_assert_eq(complete("step", e2e_str_at(t, "id"), "w1", out),
			     200, "%s", e2e_last_body);
		json_decref(t);
	}

	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS);
	cr_assert(json_eq_text(json_object_get(wf, "output"),
			       "{\"result\":\"z is 20\",\"fromA\":2,"
			       "\"label\":\"L\"}"),
		  "output: %s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(wf, "name"), "seq3");
	cr_assert(json_is_string(json_object_get(wf, "endedAt")), "%s",
		  e2e_last_body);
	cr_assert_eq(json_array_size(json_object_get(wf, "tasks")), 3, "%s",
		     e2e_last_body);
	const char *inputs[] = {"{\"x\":1}", "{\"y\":2,\"label\":\"L\"}",
				"{\"z\":20,\"text\":\"z is 20\"}"};
	const char *outputs[] = {"{\"y\":2}", "{\"z\":20}",
				 "{\"r\":\"z is 20\"}"};
	for (int i = 0; i < 3; i++) {
		const json_t *t[4];
		cr_assert_eq(tasks_of(wf, refs[i], t, 4), 1, "%s",
			     e2e_last_body);
		cr_assert_str_eq(e2e_str_at(t[0], "status"), "COMPLETED");
		cr_assert_str_eq(e2e_str_at(t[0], "workerId"), "w1");
		cr_assert_str_eq(e2e_str_at(t[0], "taskDefName"), "step");
		cr_assert(
			json_eq_text(json_object_get(t[0], "input"), inputs[i]),
			"input of %s: %s", refs[i], e2e_last_body);
		cr_assert(json_eq_text(json_object_get(t[0], "output"),
				       outputs[i]),
			  "output of %s: %s", refs[i], e2e_last_body);
	}
	json_decref(wf);

	json_t *events = history(id, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_SCHEDULED"), 3);
	cr_assert_eq(count_type(events, "TASK_STARTED"), 3);
	cr_assert_eq(count_type(events, "TASK_COMPLETED"), 3);
	cr_assert_eq(count_type(events, "WORKFLOW_COMPLETED"), 1);
	json_decref(events);

	/* The queue is empty, nothing is left to evaluate, and the counter
	 * matches the history. */
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\"", NULL),
		     0);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
			    " WHERE \"workflowId\" = $1::uuid",
			    id),
		e2e_sql_int("SELECT \"eventSeq\" FROM \"WorkflowExecutions\""
			    " WHERE \"id\" = $1::uuid",
			    id));
}

/* ============================================================== retries */

Test(retries, failed_attempts_are_retried_as_new_attempts)
{
	e2e_start(NULL);
	put_task_def("flaky", 2, 60);
	put_one_task_workflow("retry2", "flaky");
	char id[37];
	e2e_start_workflow("retry2", json_pack("{s:i}", "n", 7), id);

	for (int attempt = 0; attempt < 3; attempt++) {
		json_t *t = poll_one("flaky", "w1", DECIDE_TIMEOUT_MS);
		cr_assert_eq(int_at(t, "attempt"), attempt);
		cr_assert(
			json_eq_text(json_object_get(t, "input"), "{\"n\":7}"),
			"retry input: %s", e2e_last_body);
		if (attempt < 2) {
			char reason[32];
			snprintf(reason, sizeof(reason), "boom %d", attempt);
			cr_assert_eq(fail("flaky", e2e_str_at(t, "id"), "w1",
					  reason, false),
				     200, "%s", e2e_last_body);
		} else {
			cr_assert_eq(complete("flaky", e2e_str_at(t, "id"),
					      "w1",
					      json_pack("{s:b}", "ok", 1)),
				     200, "%s", e2e_last_body);
		}
		json_decref(t);
	}

	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS);
	const json_t *t[8];
	cr_assert_eq(tasks_of(wf, "only", t, 8), 3, "%s", e2e_last_body);
	const char *want[] = {"FAILED", "FAILED", "COMPLETED"};
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(int_at(t[i], "attempt"), i, "%s", e2e_last_body);
		cr_assert_str_eq(e2e_str_at(t[i], "status"), want[i]);
	}
	cr_assert_str_eq(e2e_str_at(t[0], "reason"), "boom 0");
	cr_assert_str_eq(e2e_str_at(t[1], "reason"), "boom 1");
	cr_assert_str_neq(e2e_str_at(t[0], "id"), e2e_str_at(t[1], "id"));
	cr_assert(json_eq_text(json_object_get(wf, "output"), "{\"ok\":true}"),
		  "%s", e2e_last_body);
	json_decref(wf);

	json_t *events = history(id, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_FAILED"), 2);
	cr_assert_eq(count_type(events, "TASK_SCHEDULED"), 3);
	json_decref(events);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"workflowId\" = $1::uuid",
				 id),
		     3);
}

Test(retries, exhausted_retries_fail_the_workflow_naming_the_task)
{
	e2e_start(NULL);
	put_task_def("flaky1", 1, 60);
	put_one_task_workflow("retry1", "flaky1");
	char id[37];
	e2e_start_workflow("retry1", json_object(), id);

	for (int attempt = 0; attempt < 2; attempt++) {
		json_t *t = poll_one("flaky1", "w1", DECIDE_TIMEOUT_MS);
		cr_assert_eq(int_at(t, "attempt"), attempt);
		cr_assert_eq(fail("flaky1", e2e_str_at(t, "id"), "w1",
				  "dependency down", false),
			     200, "%s", e2e_last_body);
		json_decref(t);
	}
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS);
	const char *reason = e2e_str_at(wf, "reason");
	cr_assert(strstr(reason, "only"), "the reason names the task: %s",
		  reason);
	cr_assert(strstr(reason, "dependency down"), "%s", reason);
	const json_t *t[8];
	cr_assert_eq(tasks_of(wf, "only", t, 8), 2, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(t[0], "status"), "FAILED");
	cr_assert_str_eq(e2e_str_at(t[1], "status"), "FAILED");
	json_decref(wf);
	json_decref(history(id, "WORKFLOW_STARTED", "WORKFLOW_FAILED"));
	/* No third attempt is ever offered. */
	cr_assert_eq(poll_count("flaky1", "w1"), 0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\"", NULL),
		     0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"DecideQueues\"", NULL),
		     0);
}

Test(retries, a_terminal_failure_is_not_retried)
{
	e2e_start(NULL);
	put_task_def("fatal", 5, 60);
	put_one_task_workflow("term", "fatal");
	char id[37];
	e2e_start_workflow("term", json_object(), id);

	json_t *t = poll_one("fatal", "w1", DECIDE_TIMEOUT_MS);
	cr_assert_eq(
		fail("fatal", e2e_str_at(t, "id"), "w1", "bad request", true),
		200, "%s", e2e_last_body);
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS);
	cr_assert(strstr(e2e_str_at(wf, "reason"), "only"), "%s",
		  e2e_last_body);
	cr_assert(strstr(e2e_str_at(wf, "reason"), "bad request"), "%s",
		  e2e_last_body);
	const json_t *rows[8];
	cr_assert_eq(tasks_of(wf, "only", rows, 8), 1, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[0], "status"),
			 "FAILED_WITH_TERMINAL_ERROR");
	json_decref(wf);
	cr_assert_eq(poll_count("fatal", "w1"), 0);
}

/* ====================================================== worker threads */

/* What a crowd of worker threads shares. */
struct crowd {
	const char *queue;
	int count;
	atomic_bool stop;
	atomic_bool tolerate_transport; /* the server may be down */
	pthread_mutex_t mu;
	char (*handed)[37]; /* every task id handed out */
	size_t n_handed, cap;
	atomic_int completed;  /* 200 on complete */
	atomic_int conflicts;  /* 409 on complete */
	atomic_int unexpected; /* any other answer */
	atomic_int transport;  /* requests that got no answer */
	char first_unexpected[512];
};

static pthread_mutex_t base_mu = PTHREAD_MUTEX_INITIALIZER;
static char base_url[64];

static void
set_base(const struct th_server *s)
{
	pthread_mutex_lock(&base_mu);
	snprintf(base_url, sizeof(base_url), "%s", s->base);
	pthread_mutex_unlock(&base_mu);
}

struct buf {
	char *p;
	size_t n;
};

static size_t
collect(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t n = size * nmemb;
	b->p = realloc(b->p, b->n + n + 1);
	memcpy(b->p + b->n, ptr, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

/* A request from a worker thread: the status, or -1 when no answer came.
 * Never asserts.  *out (may be NULL) gets the body (free). */
static long
request_within(CURL *h, const char *method, const char *path, const char *body,
	       char **out, long timeout_ms)
{
	char url[512];
	pthread_mutex_lock(&base_mu);
	snprintf(url, sizeof(url), "%s%s", base_url, path);
	pthread_mutex_unlock(&base_mu);
	struct buf b = {calloc(1, 1), 0};
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	struct curl_slist *headers = NULL;
	if (body) {
		headers = curl_slist_append(headers,
					    "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)strlen(body));
	}
	long status = -1;
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(headers);
	if (out && status > 0)
		*out = b.p;
	else
		free(b.p);
	return status;
}

static long
worker_req(CURL *h, const char *method, const char *path, const char *body,
	   char **out)
{
	return request_within(h, method, path, body, out, 10000);
}

struct worker {
	pthread_t t;
	char id[32];
	struct crowd *crowd;
	int got; /* tasks handed to this worker */
};

static void
note_unexpected(struct crowd *c, const char *what, long status,
		const char *body)
{
	atomic_fetch_add(&c->unexpected, 1);
	pthread_mutex_lock(&c->mu);
	if (!c->first_unexpected[0])
		snprintf(c->first_unexpected, sizeof(c->first_unexpected),
			 "%s: %ld %s", what, status, body ? body : "");
	pthread_mutex_unlock(&c->mu);
}

static void
nap_ms(int ms)
{
	struct timespec ts = {0, (long)ms * 1000000};
	nanosleep(&ts, NULL);
}

/* Completes one task, retrying while the server does not answer (it may
 * be down and coming back); gives up only when the crowd stops. */
static void
worker_complete(struct worker *w, CURL *h, const json_t *task)
{
	struct crowd *c = w->crowd;
	const char *tid = json_string_value(json_object_get(task, "id"));
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/complete",
		 c->queue, tid);
	json_t *body =
		json_pack("{s:s,s:{s:s,s:O}}", "workerId", w->id, "output",
			  "by", w->id, "ref", json_object_get(task, "refName"));
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	for (;;) {
		char *resp = NULL;
		long st = worker_req(h, "POST", path, text, &resp);
		if (st == 200) {
			atomic_fetch_add(&c->completed, 1);
		} else if (st == 409) {
			atomic_fetch_add(&c->conflicts, 1);
		} else if (st < 0 ||
			   (st >= 500 && atomic_load(&c->tolerate_transport))) {
			atomic_fetch_add(&c->transport, 1);
			free(resp);
			if (atomic_load(&c->stop))
				break;
			nap_ms(5);
			continue;
		} else {
			note_unexpected(c, "complete", st, resp);
		}
		free(resp);
		break;
	}
	free(text);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct crowd *c = w->crowd;
	CURL *h = curl_easy_init();
	char path[256], body[128];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", c->queue);
	snprintf(body, sizeof(body), "{\"workerId\":\"%s\",\"count\":%d}",
		 w->id, c->count);
	while (!atomic_load(&c->stop)) {
		char *resp = NULL;
		long st = worker_req(h, "POST", path, body, &resp);
		if (st != 200) {
			if (st < 0 ||
			    (st >= 500 && atomic_load(&c->tolerate_transport)))
				atomic_fetch_add(&c->transport, 1);
			else
				note_unexpected(c, "poll", st, resp);
			free(resp);
			nap_ms(5);
			continue;
		}
		json_t *v = json_loads(resp, 0, NULL);
		json_t *tasks = json_object_get(v, "tasks");
		if (!json_is_array(tasks))
			note_unexpected(c, "poll body", st, resp);
		free(resp);
		size_t n = json_array_size(tasks);
		pthread_mutex_lock(&c->mu);
		for (size_t i = 0; i < n; i++) {
			if (c->n_handed == c->cap) {
				c->cap = c->cap ? c->cap * 2 : 256;
				c->handed = realloc(
					c->handed, c->cap * sizeof(*c->handed));
			}
			snprintf(c->handed[c->n_handed++], 37, "%s",
				 json_string_value(json_object_get(
					 json_array_get(tasks, i), "id")));
		}
		pthread_mutex_unlock(&c->mu);
		w->got += (int)n;
		for (size_t i = 0; i < n; i++)
			worker_complete(w, h, json_array_get(tasks, i));
		json_decref(v);
		if (n == 0)
			nap_ms(2);
	}
	curl_easy_cleanup(h);
	return NULL;
}

static void
crowd_start(struct crowd *c, struct worker *ws, int n, const char *queue,
	    int count)
{
	memset(c, 0, sizeof(*c));
	c->queue = queue;
	c->count = count;
	pthread_mutex_init(&c->mu, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	set_base(e2e_server());
	for (int i = 0; i < n; i++) {
		ws[i].crowd = c;
		ws[i].got = 0;
		snprintf(ws[i].id, sizeof(ws[i].id), "worker-%d", i);
		cr_assert(pthread_create(&ws[i].t, NULL, worker_main, &ws[i]) ==
			  0);
	}
}

static void
crowd_stop(struct crowd *c, struct worker *ws, int n)
{
	atomic_store(&c->stop, true);
	for (int i = 0; i < n; i++)
		pthread_join(ws[i].t, NULL);
}

static int
by_id(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* How many ids were handed out more than once. */
static size_t
crowd_duplicates(struct crowd *c, char *example, size_t size)
{
	qsort(c->handed, c->n_handed, sizeof(*c->handed), by_id);
	size_t dups = 0;
	for (size_t i = 1; i < c->n_handed; i++)
		if (strcmp(c->handed[i], c->handed[i - 1]) == 0) {
			if (!dups)
				snprintf(example, size, "%s", c->handed[i]);
			dups++;
		}
	return dups;
}

struct sql_probe {
	const char *query;
	long long want;
	long long seen;
};

static bool
sql_reaches(void *arg)
{
	struct sql_probe *p = arg;
	p->seen = e2e_sql_int(p->query, NULL);
	return p->seen >= p->want;
}

Test(workers, eight_competing_workers_never_share_a_task)
{
	enum { N_WF = 200, N_WORKERS = 8 };
	e2e_start(NULL);
	put_task_def("job", 0, 300);
	put_one_task_workflow("jobs", "job");

	struct crowd c;
	struct worker ws[N_WORKERS];
	crowd_start(&c, ws, N_WORKERS, "job", 5);
	for (int i = 0; i < N_WF; i++) {
		char id[37];
		e2e_start_workflow("jobs", json_pack("{s:i}", "n", i), id);
	}
	struct sql_probe done = {"SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"status\" = 'COMPLETED'",
				 N_WF, 0};
	bool all = th_wait_until(60000, sql_reaches, &done);
	crowd_stop(&c, ws, N_WORKERS);
	cr_assert(all, "%lld of %d workflows completed within 60 s", done.seen,
		  N_WF);

	char dup[37] = "";
	cr_assert_eq(crowd_duplicates(&c, dup, sizeof(dup)), 0,
		     "task %s was handed out twice", dup);
	cr_assert_eq(c.n_handed, N_WF, "%zu tasks handed out", c.n_handed);
	cr_assert_eq(atomic_load(&c.completed), N_WF);
	cr_assert_eq(atomic_load(&c.conflicts), 0);
	cr_assert_eq(atomic_load(&c.unexpected), 0, "%s", c.first_unexpected);
	cr_assert_eq(atomic_load(&c.transport), 0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     N_WF);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"status\" = 'COMPLETED'",
				 NULL),
		     N_WF);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\"", NULL),
		N_WF);
	/* Each task went to the worker that completed it. */
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"output\"->>'by' IS DISTINCT FROM"
				 " \"workerId\" OR \"pollCount\" <> 1",
				 NULL),
		     0);
	free(c.handed);
}

/* A long-poll parked on its own thread for one task of "woken". */
struct parked_poll {
	pthread_t t;
	struct th_server *server;
	int i;
	long status;
	size_t got;
};

enum { PARK_WAIT_MS = 3000 };

static void *
parked_poll_main(void *arg)
{
	struct parked_poll *p = arg;
	char body[128];
	snprintf(body, sizeof(body),
		 "{\"workerId\":\"parked-%d\",\"count\":1,\"waitMs\":%d}", p->i,
		 PARK_WAIT_MS);
	struct th_response r;
	th_http(p->server, "POST", NS "/queues/woken/poll", body, strlen(body),
		&r);
	p->status = r.status;
	json_t *v = json_loadb(r.body, r.body_len, 0, NULL);
	p->got = json_array_size(json_object_get(v, "tasks"));
	json_decref(v);
	th_response_free(&r);
	return NULL;
}

/* A count the server shows, to wait for: a metric of its /metrics
 * (counter or gauge), or a queue's depth (depth_reaches). */
struct gauge_probe {
	const char *name;
	long long want, seen;
};

static bool
metric_reaches(void *arg)
{
	struct gauge_probe *m = arg;
	m->seen = e2e_metric(m->name);
	return m->seen >= m->want;
}

enum { PARKED = 3 };

/*
 * Parks PARKED polls for one task each of "woken" on server `at` (once its
 * queue listener has connected, which wakes every poll), starts one
 * workflow of "wakes" through server 0, waits for every poll's answer, and
 * checks that one poll got the task and that server `at` counted at most
 * PARKED looks for tasks (nodeflow_queue_looks_total) meanwhile: the woken
 * one's, and at the end of their wait the others' (once one of them found
 * the queue empty, those after it know it and skip theirs, so at least
 * the first looks).  None looked as it came: the look just before them
 * found the queue empty and nothing woke it since
 * (nodeflow_queue_looks_skipped_total counts those PARKED and the skipped
 * last looks: every run of a poll either looked or skipped).  Waking every
 * poll would add PARKED - 1 looks, and a process's own notification waking
 * them again as many more.
 */
static void
park_then_start(int at)
{
	put_task_def("woken", 0, 300);
	put_one_task_workflow("wakes", "woken");
	e2e_use(at);
	struct gauge_probe ready = {
		"nodeflow_loop_ticks_total{loop=\"queue-signal\"}", 1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, metric_reaches, &ready),
		  "the queue listener never ran");
	cr_assert_eq(poll_count("woken", "warm"), 0);
	long long looks = e2e_metric("nodeflow_queue_looks_total");
	long long skipped = e2e_metric("nodeflow_queue_looks_skipped_total");
	struct parked_poll ps[PARKED];
	for (int i = 0; i < PARKED; i++) {
		ps[i] = (struct parked_poll){.server = e2e_server(), .i = i};
		cr_assert(pthread_create(&ps[i].t, NULL, parked_poll_main,
					 &ps[i]) == 0);
	}
	struct gauge_probe parked = {"nodeflow_http_parked", PARKED, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, metric_reaches, &parked),
		  "%lld of %d polls parked", parked.seen, PARKED);
	e2e_use(0);
	char id[37];
	e2e_start_workflow("wakes", json_pack("{s:i}", "n", 1), id);
	size_t got = 0;
	for (int i = 0; i < PARKED; i++) {
		pthread_join(ps[i].t, NULL);
		cr_assert_eq(ps[i].status, 200, "poll %d: %ld", i,
			     ps[i].status);
		got += ps[i].got;
	}
	cr_assert_eq(got, 1, "%zu tasks handed out", got);
	e2e_use(at);
	looks = e2e_metric("nodeflow_queue_looks_total") - looks;
	skipped = e2e_metric("nodeflow_queue_looks_skipped_total") - skipped;
	e2e_use(0);
	cr_assert(looks >= 2 && looks <= PARKED, "looks for tasks: %lld",
		  looks);
	cr_assert_eq(looks + skipped, 2 * PARKED,
		     "looks %lld and skipped looks %lld", looks, skipped);
}

/* A task enqueued wakes as many parked long-polls as it needs, not every
 * one, and the server's own queue notification does not wake them again:
 * one of three polls for one task each gets it, the other two look again
 * only when their wait ends. */
Test(workers, a_task_wakes_one_parked_poll_not_all)
{
	e2e_start(NULL);
	park_then_start(0);
}

/* Across replicas: a task one replica's decider enqueues wakes, on
 * another, as many parked polls as it needs (the notification carries the
 * count).  The second replica serves the API only, so every decision is
 * the first's; its polls are woken by the notification alone. */
Test(workers, a_task_wakes_one_poll_parked_on_another_replica)
{
	const char *api_only[] = {"--roles", "api", "--start-decides", "0",
				  NULL};
	e2e_open();
	e2e_serve(NULL);
	e2e_serve(api_only);
	park_then_start(1);
}

/* The wake counter of the server's that a queue of the default namespace
 * shares (http/server.c: FNV-1a of "default/<queue>", 256 buckets). */
static unsigned
wake_bucket(const char *queue)
{
	char key[256];
	snprintf(key, sizeof(key), "default/%s", queue);
	uint32_t h = 2166136261u;
	for (const char *k = key; *k; k++)
		h = (h ^ (unsigned char)*k) * 16777619u;
	return h % 256;
}

/*
 * A look that found one queue empty says nothing of another whose wakes
 * share its counter.  A task is queued again on "shared_a" (a retry, whose
 * request wakes the polls before it answers); then a look finds another
 * queue of the same bucket empty; a long-poll of "shared_a" must still
 * look, and get the task, rather than park on what was known of the other.
 */
Test(workers, an_empty_queue_says_nothing_of_another)
{
	e2e_start(NULL);
	char other[64];
	for (int i = 0;; i++) {
		snprintf(other, sizeof(other), "shared_b%d", i);
		if (wake_bucket(other) == wake_bucket("shared_a"))
			break;
	}
	put_task_def("shared_a", 0, 300);
	put_task_def(other, 0, 300);
	put_one_task_workflow("shares", "shared_a");
	char id[37];
	e2e_start_workflow("shares", json_pack("{s:i}", "n", 1), id);
	json_t *t = poll_one("shared_a", "w1", DECIDE_TIMEOUT_MS);
	cr_assert_eq(fail("shared_a", e2e_str_at(t, "id"), "w1", "once", false),
		     200, "%s", e2e_last_body);
	json_decref(t);
	json_decref(e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS));
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/retry", id);
	json_decref(e2e_call("POST", path, NULL, 200));

	cr_assert_eq(poll_count(other, "w2"), 0);
	long long skipped = e2e_metric("nodeflow_queue_looks_skipped_total");
	json_t *v = e2e_callj("POST", NS "/queues/shared_a/poll", 200,
			      json_pack("{s:s,s:i,s:i}", "workerId", "w1",
					"count", 1, "waitMs", 15000));
	cr_assert_eq(json_array_size(json_object_get(v, "tasks")), 1, "%s",
		     e2e_last_body);
	json_decref(v);
	cr_assert_eq(e2e_metric("nodeflow_queue_looks_skipped_total"), skipped,
		     "the poll parked on another queue's emptiness");
}

/* The depth of queue d->name (GET queues: tasks ready to be polled). */
static bool
depth_reaches(void *arg)
{
	struct gauge_probe *d = arg;
	json_t *v = e2e_call("GET", NS "/queues", NULL, 200);
	size_t i;
	json_t *q;
	d->seen = 0;
	json_array_foreach (json_object_get(v, "items"), i, q)
		if (strcmp(e2e_str_at(q, "name"), d->name) == 0)
			d->seen =
				json_integer_value(json_object_get(q, "depth"));
	json_decref(v);
	return d->seen >= d->want;
}

/* Starts n one-task workflows of `def` and waits until their n tasks are
 * ready to be polled. */
static void
queue_tasks(const char *def, const char *queue, int n)
{
	for (int i = 0; i < n; i++) {
		char id[37];
		e2e_start_workflow(def, json_pack("{s:i}", "n", i), id);
	}
	struct gauge_probe d = {queue, n, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, depth_reaches, &d),
		  "%lld of %d tasks queued", d.seen, n);
}

/* A poll for count tasks, waiting up to wait_ms; the tasks it got. */
static size_t
poll_waiting(const char *queue, int count, int wait_ms)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", queue);
	json_t *v = e2e_callj("POST", path, 200,
			      json_pack("{s:s,s:i,s:i}", "workerId", "w1",
					"count", count, "waitMs", wait_ms));
	json_t *tasks = json_object_get(v, "tasks");
	cr_assert(json_is_array(tasks), "poll: %s", e2e_last_body);
	size_t n = json_array_size(tasks);
	json_decref(v);
	return n;
}

/*
 * A look that got fewer tasks than it asked for took all there were: the
 * worker's next poll parks without another look, which would find nothing
 * (a worker that took the last tasks polls again after its results, so
 * without this every batch cost an empty lease statement), and when its
 * wait runs out with no wake it answers without the last look either.  A
 * look that got all it asked for says nothing of what is left: the next
 * poll looks, and gets the task still queued.
 */
Test(workers,
     a_look_that_got_fewer_than_it_asked_for_leaves_the_queue_known_empty)
{
	e2e_start(NULL);
	put_task_def("drained", 0, 300);
	put_one_task_workflow("drains", "drained");
	queue_tasks("drains", "drained", 3);

	cr_assert_eq(poll_waiting("drained", 2, 0), 2);
	long long skipped = e2e_metric("nodeflow_queue_looks_skipped_total");
	cr_assert_eq(poll_waiting("drained", 10, 15000), 1,
		     "the poll after one that got all it asked for");
	cr_assert_eq(e2e_metric("nodeflow_queue_looks_skipped_total"), skipped,
		     "a poll parked although a task was left");

	queue_tasks("drains", "drained", 2);
	cr_assert_eq(poll_waiting("drained", 10, 0), 2);
	long long looks = e2e_metric("nodeflow_queue_looks_total");
	cr_assert_eq(poll_waiting("drained", 10, 300), 0);
	cr_assert_eq(e2e_metric("nodeflow_queue_looks_skipped_total"),
		     skipped + 2,
		     "the poll after the queue was drained looked, as it came "
		     "or when its wait ran out");
	cr_assert_eq(e2e_metric("nodeflow_queue_looks_total"), looks);
}

/*
 * A replica that runs no decider (--roles api) tells the others' deciders
 * of what it enqueues for them: a start there (one that leaves its first
 * step to the deciders, --start-decides 0), and then its task's result
 * (one that leaves what follows to them, --results-decide 0), are decided
 * within the test's deadline although the engine replica looks on its own only
 * once a minute (--decider-interval-ms), so only the decide signal can have
 * woken it.
 */
Test(workers, an_api_only_replica_wakes_another_replicas_decider)
{
	const char *engine[] = {"--decider-interval-ms", "60000", NULL};
	const char *api_only[] = {
		"--roles", "api", "--start-decides", "0", "--results-decide",
		"0",       NULL};
	e2e_open();
	e2e_serve(engine);
	e2e_serve(api_only);
	struct gauge_probe listening = {
		"nodeflow_loop_ticks_total{loop=\"decide-listen\"}", 1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, metric_reaches, &listening),
		  "the engine replica never listened");
	e2e_use(1);
	put_task_def("signalled", 0, 300);
	put_one_task_workflow("signals", "signalled");
	char id[37];
	e2e_start_workflow("signals", json_pack("{s:i}", "n", 1), id);
	json_t *t = poll_one("signalled", "w1", DECIDE_TIMEOUT_MS);
	cr_assert_str_eq(e2e_str_at(t, "workflowId"), id);
	cr_assert_eq(complete("signalled", e2e_str_at(t, "id"), "w1",
			      json_pack("{s:b}", "ok", 1)),
		     200, "%s", e2e_last_body);
	json_decref(t);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));
	cr_assert_geq(e2e_metric("nodeflow_decide_signals_sent_total"), 2);
	e2e_use(0);
}

/* A connection holding the deciders' turn (decide_repo.h), as a decider
 * of another replica would through its batch, until it rolls back. */
static PGconn *
hold_the_turn(void)
{
	PGconn *holder = th_connect(e2e_db()->url);
	th_exec(holder, "BEGIN");
	th_exec(holder, "SELECT pg_advisory_xact_lock(7362, 0)");
	return holder;
}

/*
 * Deciders claim a short queue in turns, across replicas: while the turn
 * is taken (here by the test, as a decider of a third replica would hold
 * it through its batch), both replicas' deciders wait for it rather than
 * each claiming its own start; once it is free, the first to get it
 * claims both starts in one batch (their task rows share a transaction)
 * and the other finds nothing left.  The starts leave their first steps
 * to the deciders (--start-decides 0).
 */
Test(workers, deciders_of_replicas_claim_a_short_queue_in_turns)
{
	const char *flags[] = {"--start-decides", "0", NULL};
	e2e_open();
	e2e_serve(flags);
	e2e_serve(flags);
	put_task_def("turns", 0, 300);
	put_one_task_workflow("turn", "turns");
	PGconn *holder = hold_the_turn();
	char a[37], b[37];
	e2e_use(0);
	e2e_start_workflow("turn", json_pack("{s:i}", "n", 1), a);
	e2e_use(1);
	e2e_start_workflow("turn", json_pack("{s:i}", "n", 2), b);
	e2e_use(0);
	struct sql_probe waiting = {
		"SELECT count(*) FROM pg_stat_activity"
		" WHERE \"datname\" = current_database()"
		" AND \"wait_event\" = 'advisory'"
		" AND \"query\" LIKE '%pg_advisory_xact_lock(7362%'",
		2, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &waiting),
		  "%lld deciders wait for the turn", waiting.seen);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\"", NULL), 0,
		"a decider claimed out of turn");
	th_exec(holder, "ROLLBACK");
	PQfinish(holder);
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", 2, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued),
		  "%lld of 2 tasks queued", queued.seen);
	cr_assert_eq(e2e_sql_int("SELECT count(DISTINCT \"xmin\"::text)"
				 " FROM \"TaskExecutions\"",
				 NULL),
		     1, "the two starts were decided in two batches");
}

/*
 * A turn held past the deciders' wait (a decider stuck mid-batch on a
 * replica cut off from the database) holds nothing up for long: the
 * decider claims without turns, says so, and the start (one that leaves
 * its first step to the deciders) is decided while the turn is still held.
 */
Test(workers, a_turn_held_too_long_is_passed_over)
{
	const char *flags[] = {"--start-decides", "0", NULL};
	e2e_start(flags);
	put_task_def("stuck", 0, 300);
	put_one_task_workflow("stuckturn", "stuck");
	PGconn *holder = hold_the_turn();
	char id[37];
	e2e_start_workflow("stuckturn", json_pack("{s:i}", "n", 1), id);
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", 1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued),
		  "the start was not decided while the turn was held");
	cr_assert(strstr(e2e_log(), "claiming without turns"), "%s", e2e_log());
	th_exec(holder, "ROLLBACK");
	PQfinish(holder);
}

Test(workers, higher_priority_is_handed_out_first)
{
	e2e_start(NULL);
	put_task_def("pq", 0, 60);
	put_one_task_workflow("pw", "pq");
	const int prios[] = {0, 99, 50, 7};
	char ids[4][37];
	for (int i = 0; i < 4; i++) {
		json_t *v = e2e_callj("POST", NS "/workflows", 201,
				      json_pack("{s:s,s:i}", "name", "pw",
						"priority", prios[i]));
		snprintf(ids[i], sizeof(ids[i]), "%s", e2e_str_at(v, "id"));
		json_decref(v);
	}
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", 4, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued));
	const int order[] = {1, 2, 3, 0}; /* 99, 50, 7, 0 */
	for (int i = 0; i < 4; i++) {
		json_t *t = poll_one("pq", "w", DECIDE_TIMEOUT_MS);
		cr_assert_str_eq(e2e_str_at(t, "workflowId"), ids[order[i]],
				 "poll %d did not hand out priority %d", i,
				 prios[order[i]]);
		json_decref(t);
	}
}

/* ========================================================== idempotency */

struct starter {
	pthread_t t;
	pthread_barrier_t *barrier;
	const char *body;
	long status;
	char id[37];
	bool existing;
};

static void *
starter_main(void *arg)
{
	struct starter *s = arg;
	CURL *h = curl_easy_init();
	pthread_barrier_wait(s->barrier);
	char *resp = NULL;
	s->status = request_within(h, "POST", NS "/workflows", s->body, &resp,
				   120000);
	json_t *v = resp ? json_loads(resp, 0, NULL) : NULL;
	const char *id = json_string_value(json_object_get(v, "id"));
	snprintf(s->id, sizeof(s->id), "%s", id ? id : "");
	s->existing = json_is_true(json_object_get(v, "existing"));
	json_decref(v);
	free(resp);
	curl_easy_cleanup(h);
	return NULL;
}

/* n concurrent starts of one body, released together by a barrier. */
static void
start_together(struct starter *ss, int n, const char *body)
{
	pthread_barrier_t barrier;
	pthread_barrier_init(&barrier, NULL, (unsigned)n);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	set_base(e2e_server());
	for (int i = 0; i < n; i++) {
		ss[i] = (struct starter){.barrier = &barrier, .body = body};
		cr_assert(pthread_create(&ss[i].t, NULL, starter_main,
					 &ss[i]) == 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(ss[i].t, NULL);
	pthread_barrier_destroy(&barrier);
}

Test(idempotency, twenty_concurrent_starts_make_one_execution)
{
	enum { N = 20 };
	e2e_start(NULL);
	put_task_def("once", 0, 60);
	put_one_task_workflow("idem", "once");

	struct starter ss[N];
	start_together(ss, N,
		       "{\"name\":\"idem\",\"input\":{\"n\":1},"
		       "\"idempotencyKey\":\"key-R\","
		       "\"idempotencyStrategy\":\"RETURN_EXISTING\"}");
	int created = 0;
	for (int i = 0; i < N; i++) {
		cr_assert(ss[i].status == 201 || ss[i].status == 200,
			  "start %d: %ld", i, ss[i].status);
		if (ss[i].status == 201) {
			created++;
			cr_assert_not(ss[i].existing);
		} else {
			cr_assert(ss[i].existing,
				  "start %d: 200 without "
				  "existing:true",
				  i);
		}
		cr_assert_str_eq(ss[i].id, ss[0].id, "start %d got another id",
				 i);
	}
	cr_assert_eq(created, 1, "%d starts created an execution", created);
	char id_r[37];
	snprintf(id_r, sizeof(id_r), "%s", ss[0].id);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"idempotencyKey\" = $1",
				 "key-R"),
		     1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"IdempotencyKeys\""
				 " WHERE \"key\" = $1",
				 "key-R"),
		     1);

	start_together(ss, N,
		       "{\"name\":\"idem\",\"input\":{\"n\":2},"
		       "\"idempotencyKey\":\"key-F\","
		       "\"idempotencyStrategy\":\"FAIL\"}");
	created = 0;
	int conflicts = 0;
	for (int i = 0; i < N; i++) {
		if (ss[i].status == 201)
			created++;
		else if (ss[i].status == 409)
			conflicts++;
		else
			cr_assert_fail("start %d: %ld", i, ss[i].status);
	}
	cr_assert_eq(created, 1);
	cr_assert_eq(conflicts, N - 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"idempotencyKey\" = $1",
				 "key-F"),
		     1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     2);

	/* A later repeat of either: the same answers, nothing new. */
	json_t *v = e2e_call("POST", NS "/workflows",
			     "{\"name\":\"idem\",\"idempotencyKey\":\"key-R\","
			     "\"idempotencyStrategy\":\"RETURN_EXISTING\"}",
			     200);
	cr_assert_str_eq(e2e_str_at(v, "id"), id_r);
	cr_assert(json_is_true(json_object_get(v, "existing")));
	json_decref(v);
	expect_error("POST", NS "/workflows",
		     "{\"name\":\"idem\",\"idempotencyKey\":\"key-F\"}", 409,
		     "conflict");
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     2);
}

/* =============================================================== starts */

/* A start sent from its own thread, answered into s. */
static void
start_async(struct starter *s, pthread_barrier_t *one, const char *body)
{
	*s = (struct starter){.barrier = one, .body = body};
	cr_assert(pthread_create(&s->t, NULL, starter_main, s) == 0);
}

struct lock_waiters {
	int want;
	long long seen;
};

/* Statements of this database waiting for another transaction. */
static bool
statements_wait_for_a_transaction(void *arg)
{
	struct lock_waiters *w = arg;
	w->seen = e2e_sql_int("SELECT count(*) FROM pg_stat_activity"
			      " WHERE \"datname\" = current_database()"
			      " AND \"wait_event\" = 'transactionid'",
			      NULL);
	return w->seen >= w->want;
}

/* Read with a short timeout, and again on the next try: a connection
 * that arrives with a start's may be accepted by the HTTP thread that
 * then waits in that start, and answered only when it is written. */
static bool
gauge_reaches(void *arg)
{
	struct gauge_probe *g = arg;
	CURL *h = curl_easy_init();
	char *body = NULL;
	g->seen = -1;
	if (request_within(h, "GET", "/metrics", NULL, &body, 1000) == 200)
		g->seen = e2e_metric_in(body, g->name);
	free(body);
	curl_easy_cleanup(h);
	return g->seen == g->want;
}

/*
 * The first of several starts is held in its statement: a test transaction
 * has inserted the idempotency key it uses ("hold"), and its insert waits
 * to learn whether that commits.  The others arrive meanwhile and wait for
 * it, each counted by nodeflow_start_group_waiting.  Then the test's
 * transaction rolls back, which releases the first (the key is free
 * again), and the waiting ones are written together; returns once every
 * start is answered (in ss).  The server writes one group at a time
 * (--start-writers 1): with two, the second start would be written beside
 * the held one.  (A table lock would not do: a new pool connection
 * prepares every statement, and preparing a write waits for a table lock
 * too.)
 */
/* A test transaction takes the idempotency key "hold" and keeps it
 * uncommitted; then s0's start (body, which uses that key) is sent from its
 * own thread and found waiting for the key.  Returns the holder's
 * connection: rolling it back frees the key. */
static PGconn *
start_held(struct starter *s0, pthread_barrier_t *one, const char *body)
{
	PGconn *holder = th_connect(e2e_db()->url);
	th_exec(holder, "BEGIN");
	th_exec(holder, "INSERT INTO \"IdempotencyKeys\" (\"namespaceId\","
			" \"key\", \"workflowId\", \"startedAt\")"
			" SELECT \"id\", 'hold', uuidv7(), now()"
			" FROM \"Namespaces\" WHERE \"name\" = 'default'");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	set_base(e2e_server());
	pthread_barrier_init(one, NULL, 1);
	start_async(s0, one, body);
	struct lock_waiters w = {1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS,
				statements_wait_for_a_transaction, &w),
		  "the first start never waited for the key");
	return holder;
}

/* The flags of a server that writes one group of starts at a time, the
 * one start_behind_a_held_one needs. */
static const char *const one_writer[] = {"--http-threads",
					 "12",
					 "--db-pool-size",
					 "16",
					 "--start-writers",
					 "1",
					 NULL};

static void
start_behind_a_held_one(struct starter *ss, int n, const char *const *bodies)
{
	static pthread_barrier_t one; /* outlives a failed test's threads */
	PGconn *holder = start_held(&ss[0], &one, bodies[0]);
	/* One at a time: connections arriving together may be accepted by
	 * one HTTP thread, the second then waiting for the first's answer. */
	for (int i = 1; i < n; i++) {
		start_async(&ss[i], &one, bodies[i]);
		struct gauge_probe g = {"nodeflow_start_group_waiting", i, 0};
		cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, gauge_reaches, &g),
			  "%lld of %d starts wait for the first", g.seen, i);
	}
	th_exec(holder, "ROLLBACK");
	PQfinish(holder);
	for (int i = 0; i < n; i++)
		pthread_join(ss[i].t, NULL);
	pthread_barrier_destroy(&one);
}

/* Three starts of `def` (inputs n = from, from + 1, from + 2), the first
 * held in its statement until the other two wait behind it; each is
 * answered 201. */
static void
three_behind_a_held_one(struct starter *ss, const char *def, int from)
{
	static char bodies[3][128]; /* outlive a failed test's threads */
	const char *b[3];
	for (int i = 0; i < 3; i++) {
		snprintf(bodies[i], sizeof(bodies[i]),
			 "{\"name\":\"%s\",\"input\":{\"n\":%d}%s}", def,
			 from + i, i ? "" : ",\"idempotencyKey\":\"hold\"");
		b[i] = bodies[i];
	}
	start_behind_a_held_one(ss, 3, b);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ss[i].status, 201, "start %d: %ld", i,
			     ss[i].status);
}

/* On a server started with flags, three starts of a one-task workflow
 * behind a held one (three_behind_a_held_one): how many start statements
 * wrote them and how many of them decided their first step. */
struct held_group {
	long long writes, decided;
};

static struct held_group
group_behind_a_held_one(const char *const *flags, struct starter *ss)
{
	e2e_start(flags);
	put_task_def("hq", 0, 60);
	put_one_task_workflow("hw1", "hq");
	long long writes = e2e_metric("nodeflow_start_writes_total");
	long long decided = e2e_metric("nodeflow_start_decided_total");
	three_behind_a_held_one(ss, "hw1", 0);
	return (struct held_group){
		e2e_metric("nodeflow_start_writes_total") - writes,
		e2e_metric("nodeflow_start_decided_total") - decided};
}

/* Starts that arrive while another is written are written together, in
 * one statement, each whole: its execution, its first event (seq 1), its
 * evaluation (its task is queued; a group this large leaves it to the
 * deciders), its idempotency key (two with the same
 * key in one group: the first takes it, the second is answered with its
 * id) and its timeout's timer. */
Test(starts, concurrent_starts_are_written_together_each_whole)
{
	enum { N = 8 };
	e2e_start(one_writer);
	put_task_def("gs", 0, 60);
	put_one_task_workflow("gw", "gs");
	e2e_call_ok(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"gwt\",\"version\":1,\"timeoutSeconds\":600,"
		"\"tasks\":[{\"name\":\"gs\",\"taskReferenceName\":\"only\","
		"\"type\":\"SIMPLE\"}]}",
		201);
	long long writes = e2e_metric("nodeflow_start_writes_total");
	long long written = e2e_metric("nodeflow_start_writes_starts_total");
	long long decided = e2e_metric("nodeflow_start_decided_total");
	cr_assert_geq(writes, 0, "no nodeflow_start_writes_total");

	const char *bodies[N] = {
		"{\"name\":\"gw\",\"input\":{\"n\":0},"
		"\"idempotencyKey\":\"hold\"}",
		"{\"name\":\"gw\",\"input\":{\"n\":1},\"idempotencyKey\":\"g-k\","
		"\"idempotencyStrategy\":\"RETURN_EXISTING\"}",
		"{\"name\":\"gw\",\"input\":{\"n\":2},\"idempotencyKey\":\"g-k\","
		"\"idempotencyStrategy\":\"RETURN_EXISTING\"}",
		"{\"name\":\"gwt\",\"input\":{\"n\":3}}",
		"{\"name\":\"gw\",\"input\":{\"n\":4},"
		"\"correlationId\":\"say \\\"when\\\"\",\"priority\":7}",
		"{\"name\":\"gw\",\"input\":{\"n\":5}}",
		"{\"name\":\"gw\",\"input\":{\"n\":6}}",
		"{\"name\":\"gw\",\"input\":{\"n\":7}}",
	};
	static struct starter ss[N]; /* outlives a failed test's threads */
	start_behind_a_held_one(ss, N, bodies);

	/* Two statements: the first start's, then the seven's. */
	cr_assert_eq(e2e_metric("nodeflow_start_writes_total") - writes, 2);
	cr_assert_eq(e2e_metric("nodeflow_start_writes_starts_total") - written,
		     N);
	/* The first, alone, decided its first step; the group of seven left
	 * theirs to the deciders. */
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total") - decided, 1);
	int keyed = ss[1].status == 201 ? 1 : 2, other = 3 - keyed;
	for (int i = 0; i < N; i++) {
		if (i == other) {
			cr_assert_eq(ss[i].status, 200, "start %d", i);
			cr_assert(ss[i].existing);
			cr_assert_str_eq(ss[i].id, ss[keyed].id);
			continue;
		}
		cr_assert_eq(ss[i].status, 201, "start %d: %ld", i,
			     ss[i].status);
		for (int k = 0; k < i; k++)
			cr_assert_str_neq(ss[i].id, ss[k].id);
	}
	/* The first of the two in the group took the key. */
	cr_assert_eq(keyed, 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     N - 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
				 " WHERE \"seq\" = 1 AND \"type\" ="
				 " 'WORKFLOW_STARTED'",
				 NULL),
		     N - 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"IdempotencyKeys\""
				 " WHERE \"key\" = 'g-k' AND \"workflowId\" ="
				 " $1::uuid",
				 ss[1].id),
		     1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"Timers\""
				 " WHERE \"kind\" = 'workflowTimeout'"
				 " AND \"workflowId\" = $1::uuid",
				 ss[3].id),
		     1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"Timers\"", NULL), 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"correlationId\" = 'say \"when\"'"
				 " AND \"priority\" = 7 AND \"id\" = $1::uuid",
				 ss[4].id),
		     1);
	json_t *w = e2e_get_workflow(ss[6].id);
	cr_assert_eq(json_integer_value(
			     json_object_get(json_object_get(w, "input"), "n")),
		     6);
	json_decref(w);
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", N - 1,
				   0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued),
		  "%lld of %d tasks queued", queued.seen, N - 1);
}

/*
 * Starts that waited for another group's write leave their first steps to
 * the deciders, however few they are: starts queueing behind a write are a
 * load under which a decider's batch for many costs less than each small
 * group's own decisions.  The first start, which found no write in
 * progress, decides its own.
 */
Test(starts, starts_that_waited_for_a_write_leave_their_first_steps_to_deciders)
{
	enum { N = 3 };
	static struct starter ss[N]; /* outlives a failed test's threads */
	struct held_group g = group_behind_a_held_one(one_writer, ss);

	/* The first start alone, then the two that waited, in one group of
	 * two, left to the deciders. */
	cr_assert_eq(g.writes, 2);
	cr_assert_eq(g.decided, 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\" q"
				 " JOIN \"TaskExecutions\" t ON t.\"id\" ="
				 " q.\"taskId\" WHERE t.\"workflowId\" ="
				 " $1::uuid",
				 ss[0].id),
		     1, "the first start's task was not queued at its answer");
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", N, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued),
		  "%lld of %d tasks queued", queued.seen, N);
}

/*
 * With --start-decides 2, starts that waited for another group's write
 * decide their first steps in their group's transaction, so that each is
 * answered with its first task queued, as the first start, which found no
 * write in progress, is.
 */
Test(starts, with_start_decides_2_a_group_decides_its_first_steps)
{
	enum { N = 3 };
	const char *flags[] = {"--http-threads",
			       "12",
			       "--db-pool-size",
			       "16",
			       "--start-decides",
			       "2",
			       NULL};
	static struct starter ss[N]; /* outlives a failed test's threads */
	struct held_group g = group_behind_a_held_one(flags, ss);

	/* The first start alone, then the two that waited, in one group. */
	cr_assert_eq(g.writes, 2);
	cr_assert_eq(g.decided, N);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\"", NULL),
		     N, "the tasks were not queued at the answers");
	cr_assert_eq(e2e_metric("nodeflow_start_bursts_total"), 0);
}

/*
 * With --start-decides 2, groups that average --start-burst-size starts
 * are a burst: a group then leaves its first steps to the deciders, who
 * decide them after its commit, while a start that found no write in
 * progress still decides its own.  Here the size is one, so sixteen
 * starts one after another make the average; the two that then wait
 * behind a held start are a group left to the deciders.
 */
Test(starts, a_burst_of_starts_leaves_their_first_steps_to_the_deciders)
{
	enum { N = 3, ALONE = 16 };
	const char *flags[] = {"--http-threads",
			       "12",
			       "--db-pool-size",
			       "16",
			       "--start-decides",
			       "2",
			       "--start-burst-size",
			       "1",
			       NULL};
	e2e_start(flags);
	put_task_def("bs", 0, 60);
	put_one_task_workflow("bw", "bs");
	long long decided = e2e_metric("nodeflow_start_decided_total");
	for (int i = 0; i < ALONE; i++) {
		char id[37];
		e2e_start_workflow("bw", json_pack("{s:i}", "n", i), id);
	}
	cr_assert_eq(e2e_metric("nodeflow_start_bursts_total"), 1);
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total") - decided,
		     ALONE, "a start that came alone left its first step");

	static struct starter ss[N]; /* outlives a failed test's threads */
	three_behind_a_held_one(ss, "bw", ALONE);
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total") - decided,
		     ALONE + 1, "the group of two decided its first steps");
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"",
				   ALONE + N, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued),
		  "%lld of %d tasks queued", queued.seen, ALONE + N);
}

/*
 * Two groups are written at once (--start-writers 2): a start
 * held in its statement, its idempotency key taken by a transaction not
 * yet committed, does not hold up the start after it, which is written
 * and answered meanwhile.  The held one is written once the key is free.
 */
Test(starts, a_held_start_does_not_hold_up_the_next)
{
	const char *flags[] = {"--http-threads",
			       "12",
			       "--db-pool-size",
			       "16",
			       "--start-writers",
			       "2",
			       NULL};
	e2e_start(flags);
	put_task_def("hs", 0, 60);
	put_one_task_workflow("hw", "hs");
	long long writes = e2e_metric("nodeflow_start_writes_total");
	static pthread_barrier_t one; /* outlives a failed test's threads */
	static struct starter ss[2];
	PGconn *holder = start_held(&ss[0], &one,
				    "{\"name\":\"hw\",\"input\":{\"n\":0},"
				    "\"idempotencyKey\":\"hold\"}");

	start_async(&ss[1], &one, "{\"name\":\"hw\",\"input\":{\"n\":1}}");
	struct sql_probe written = {
		"SELECT count(*) FROM \"WorkflowExecutions\""
		" WHERE \"input\"->>'n' = '1'",
		1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &written),
		  "the second start waited for the held one");
	pthread_join(ss[1].t, NULL);
	cr_assert_eq(ss[1].status, 201, "%ld", ss[1].status);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     1, "the held start was written before its key was free");

	th_exec(holder, "ROLLBACK");
	PQfinish(holder);
	pthread_join(ss[0].t, NULL);
	pthread_barrier_destroy(&one);
	cr_assert_eq(ss[0].status, 201, "%ld", ss[0].status);
	cr_assert_eq(e2e_metric("nodeflow_start_writes_total") - writes, 2);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     2);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"IdempotencyKeys\""
				 " WHERE \"key\" = 'hold' AND \"workflowId\" ="
				 " $1::uuid",
				 ss[0].id),
		     1);
}

/* A start the database refuses fails only its own request: its group's
 * statement fails as a whole, and each of its starts is written again
 * alone. */
Test(starts, a_refused_start_fails_only_its_own_request)
{
	enum { N = 6 };
	e2e_start(one_writer);
	put_task_def("rs", 0, 60);
	put_one_task_workflow("rsw", "rs");
	th_exec(e2e_sql(), "CREATE FUNCTION \"test_refuse\"() RETURNS trigger"
			   " LANGUAGE plpgsql AS $$ BEGIN"
			   " IF NEW.\"input\"->>'n' = '3' THEN"
			   "   RAISE EXCEPTION 'refused by the test';"
			   " END IF; RETURN NEW; END $$");
	th_exec(e2e_sql(), "CREATE TRIGGER \"test_refuse\" BEFORE INSERT ON"
			   " \"WorkflowExecutions\" FOR EACH ROW"
			   " EXECUTE FUNCTION \"test_refuse\"()");
	long long writes = e2e_metric("nodeflow_start_writes_total");
	const char *bodies[N] = {
		"{\"name\":\"rsw\",\"input\":{\"n\":0},"
		"\"idempotencyKey\":\"hold\"}",
		"{\"name\":\"rsw\",\"input\":{\"n\":1}}",
		"{\"name\":\"rsw\",\"input\":{\"n\":2}}",
		"{\"name\":\"rsw\",\"input\":{\"n\":3}}",
		"{\"name\":\"rsw\",\"input\":{\"n\":4}}",
		"{\"name\":\"rsw\",\"input\":{\"n\":5}}",
	};
	static struct starter ss[N]; /* outlives a failed test's threads */
	start_behind_a_held_one(ss, N, bodies);

	/* The first start's statement, then the group's, refused. */
	cr_assert_eq(e2e_metric("nodeflow_start_writes_total") - writes, 2);
	for (int i = 0; i < N; i++)
		cr_assert_eq(ss[i].status, i == 3 ? 500 : 201, "start %d: %ld",
			     i, ss[i].status);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"input\"->>'n' = '3'",
				 NULL),
		     0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     N - 1);
	/* One statement: the deciders append events meanwhile. */
	cr_assert_eq(e2e_sql_int("SELECT count(*) FILTER (WHERE \"seq\" = 1)"
				 " FROM \"WorkflowEvents\"",
				 NULL),
		     N - 1);
	cr_assert(strstr(e2e_log(), "was refused"), "%s", e2e_log());
}

/* A trigger that refuses the task rows of workflows whose input n is 3. */
static void
refuse_tasks_of_n3(void)
{
	th_exec(e2e_sql(), "CREATE FUNCTION \"test_refuse\"() RETURNS trigger"
			   " LANGUAGE plpgsql AS $$ BEGIN"
			   " IF NEW.\"input\"->>'n' = '3' THEN"
			   "   RAISE EXCEPTION 'refused by the test';"
			   " END IF; RETURN NEW; END $$");
	th_exec(e2e_sql(), "CREATE TRIGGER \"test_refuse\" BEFORE INSERT ON"
			   " \"TaskExecutions\" FOR EACH ROW"
			   " EXECUTE FUNCTION \"test_refuse\"()");
}

/* The trigger of refuse_tasks_of_n3 accepts every row again.  The function
 * is replaced rather than the trigger dropped: DROP TRIGGER locks every
 * partition, in its own order, against the running server's writers (a
 * deadlock); replacing a function locks no table. */
static void
accept_tasks_again(void)
{
	th_exec(e2e_sql(), "CREATE OR REPLACE FUNCTION \"test_refuse\"()"
			   " RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
			   " RETURN NEW; END $$");
}

/*
 * A start decides its workflow's first step in its own transaction: when
 * its answer comes, the first task is queued, and the execution's row, its
 * task, the task's queue row and every event share the start's
 * transaction; no evaluation is left queued for the deciders.
 */
Test(starts, a_start_decides_its_first_step_in_its_own_transaction)
{
	e2e_start(NULL);
	put_task_def("fs", 0, 60);
	put_one_task_workflow("fsw", "fs");
	long long decided = e2e_metric("nodeflow_start_decided_total");
	char id[37];
	e2e_start_workflow("fsw", json_pack("{s:i}", "n", 5), id);
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total") - decided, 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\" q"
				 " JOIN \"TaskExecutions\" t ON t.\"id\" ="
				 " q.\"taskId\" WHERE t.\"workflowId\" ="
				 " $1::uuid AND t.\"refName\" = 'only'"
				 " AND t.\"input\" = '{\"n\":5}'",
				 id),
		     1, "the first task was not queued with its start");
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"DecideQueues\"", NULL),
		     0);
	cr_assert_eq(e2e_sql_int("SELECT count(DISTINCT \"xmin\"::text) FROM"
				 " (SELECT \"xmin\" FROM \"WorkflowExecutions\""
				 " WHERE \"id\" = $1::uuid UNION ALL"
				 " SELECT \"xmin\" FROM \"TaskExecutions\""
				 " WHERE \"workflowId\" = $1::uuid UNION ALL"
				 " SELECT q.\"xmin\" FROM \"TaskQueues\" q"
				 " JOIN \"TaskExecutions\" t ON t.\"id\" ="
				 " q.\"taskId\" WHERE t.\"workflowId\" ="
				 " $1::uuid UNION ALL"
				 " SELECT \"xmin\" FROM \"WorkflowEvents\""
				 " WHERE \"workflowId\" = $1::uuid) r",
				 id),
		     1, "the start and its first step are two transactions");
	cr_assert_eq(
		e2e_sql_int("SELECT \"eventSeq\" FROM"
			    " \"WorkflowExecutions\" WHERE \"id\" = $1::uuid",
			    id),
		e2e_sql_int("SELECT max(\"seq\") FROM \"WorkflowEvents\""
			    " WHERE \"workflowId\" = $1::uuid",
			    id));
	json_t *t = poll_one("fs", "w1", DECIDE_TIMEOUT_MS);
	cr_assert_str_eq(e2e_str_at(t, "workflowId"), id);
	cr_assert_eq(complete("fs", e2e_str_at(t, "id"), "w1",
			      json_pack("{s:b}", "ok", 1)),
		     200, "%s", e2e_last_body);
	json_decref(t);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));
}

/* query with every "$W" replaced by id (a UUID the server gave). */
static char *
for_workflow(const char *query, const char *id)
{
	size_t n = strlen(query) + 1;
	for (const char *p = query; (p = strstr(p, "$W")); p += 2)
		n += 34;
	char *out = malloc(n), *o = out;
	cr_assert_not_null(out);
	for (const char *p = query; *p;) {
		if (p[0] == '$' && p[1] == 'W') {
			o += sprintf(o, "%s", id);
			p += 2;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	return out;
}

/* The rows of workflow a that differ from those of workflow b, or b's
 * from a's, by what query (a SELECT over the workflow $W) returns for
 * each. */
static long long
rows_differing(const char *query, const char *a, const char *b)
{
	char *qa = for_workflow(query, a), *qb = for_workflow(query, b);
	char sql[8192];
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM ((%s EXCEPT ALL %s)"
		 " UNION ALL (%s EXCEPT ALL %s)) d",
		 qa, qb, qb, qa);
	free(qa);
	free(qb);
	return e2e_sql_int(sql, NULL);
}

/* Every row workflows a and b wrote compares equal (times and ids
 * aside). */
static void
same_rows(const char *a, const char *b)
{
	cr_assert_eq(
		rows_differing(
			"SELECT \"refName\", \"taskDefName\", \"taskType\","
			" \"iteration\", \"attempt\", \"status\", \"input\","
			" \"output\", \"queueName\", \"forkRef\","
			" \"reasonForIncompletion\", \"deciderSeenAt\" IS NULL,"
			" \"startedAt\" IS NULL, \"endedAt\" IS NULL"
			" FROM \"TaskExecutions\" WHERE \"workflowId\" ="
			" '$W'::uuid",
			a, b),
		0, "the tasks differ");
	cr_assert_eq(rows_differing("SELECT q.\"queueName\", q.\"taskType\","
				    " q.\"priority\", t.\"refName\""
				    " FROM \"TaskQueues\" q JOIN"
				    " \"TaskExecutions\" t ON t.\"id\" ="
				    " q.\"taskId\" WHERE t.\"workflowId\" ="
				    " '$W'::uuid",
				    a, b),
		     0, "the queue rows differ");
	cr_assert_eq(rows_differing("SELECT v.\"seq\", v.\"type\","
				    " t.\"refName\", v.\"data\" - 'taskId'"
				    " FROM \"WorkflowEvents\" v LEFT JOIN"
				    " \"TaskExecutions\" t ON t.\"id\" ="
				    " v.\"taskId\" WHERE v.\"workflowId\" ="
				    " '$W'::uuid",
				    a, b),
		     0, "the histories differ");
	cr_assert_eq(rows_differing("SELECT \"status\", \"version\","
				    " \"eventSeq\", \"variables\", \"output\""
				    " FROM \"WorkflowExecutions\" WHERE"
				    " \"id\" = '$W'::uuid",
				    a, b),
		     0, "the executions differ");
}

/*
 * A first step decided at start is the one the deciders would have
 * decided: the same workflow started on a replica that decides at start
 * and on one that leaves it to the deciders (--start-decides 0) has the
 * same tasks (operators run, a fork's branches queued with their inputs),
 * queue rows, timers, events in the same order, counters and variables.
 */
Test(starts, a_first_step_decided_at_start_is_the_deciders_first_step)
{
	const char *deciders[] = {"--start-decides", "0", NULL};
	e2e_open();
	e2e_serve(NULL);
	e2e_serve(deciders);
	e2e_call_ok("PUT", NS "/task-definitions/tw_left",
		    "{\"name\":\"tw_left\",\"pollTimeoutSeconds\":300,"
		    "\"responseTimeoutSeconds\":60}",
		    201);
	put_task_def("tw_right", 0, 60);
	put_task_def("tw_after", 0, 60);
	e2e_call_ok(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"twin\",\"version\":1,\"timeoutSeconds\":600,"
		"\"variables\":{\"greeting\":\"hi\"},\"tasks\":["
		"{\"name\":\"remember\",\"taskReferenceName\":\"remember\","
		"\"type\":\"SET_VARIABLE\","
		"\"inputParameters\":{\"who\":\"${workflow.input.who}\"}},"
		"{\"name\":\"route\",\"taskReferenceName\":\"route\","
		"\"type\":\"SWITCH\",\"evaluatorType\":\"value-param\","
		"\"expression\":\"kind\","
		"\"inputParameters\":{\"kind\":\"${workflow.input.kind}\"},"
		"\"decisionCases\":{\"both\":["
		"{\"name\":\"fork\",\"taskReferenceName\":\"fork\","
		"\"type\":\"FORK_JOIN\",\"forkTasks\":["
		"[{\"name\":\"tw_left\",\"taskReferenceName\":\"left\","
		"\"type\":\"SIMPLE\",\"inputParameters\":{\"who\":"
		"\"${workflow.variables.who}\",\"n\":\"${workflow.input.n}\"}}],"
		"[{\"name\":\"tw_right\",\"taskReferenceName\":\"right\","
		"\"type\":\"SIMPLE\",\"inputParameters\":{\"case\":"
		"\"${route.output.selectedCase}\"}}]]},"
		"{\"name\":\"join\",\"taskReferenceName\":\"join\","
		"\"type\":\"JOIN\",\"joinOn\":[\"left\",\"right\"]}]},"
		"\"defaultCase\":[]},"
		"{\"name\":\"tw_after\",\"taskReferenceName\":\"after\","
		"\"type\":\"SIMPLE\"}]}",
		201);
	char a[37], b[37];
	e2e_use(0);
	e2e_start_workflow("twin",
			   json_pack("{s:s,s:s,s:i}", "who", "ada", "kind",
				     "both", "n", 3),
			   a);
	e2e_use(1);
	e2e_start_workflow("twin",
			   json_pack("{s:s,s:s,s:i}", "who", "ada", "kind",
				     "both", "n", 3),
			   b);
	e2e_use(0);
	struct sql_probe settled = {"SELECT count(*) FROM \"TaskQueues\"", 4,
				    0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &settled),
		  "%lld of 4 branch tasks queued", settled.seen);
	struct sql_probe decided = {"SELECT 1 - count(*) FROM \"DecideQueues\"",
				    1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &decided),
		  "an evaluation is still queued");

	long long tasks = e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				      " WHERE \"workflowId\" = $1::uuid",
				      a);
	cr_assert_eq(tasks, 6, "remember, route, fork, left, right, join");
	same_rows(a, b);
	cr_assert_eq(rows_differing("SELECT tm.\"kind\", tm.\"payload\","
				    " t.\"refName\" FROM \"Timers\" tm LEFT"
				    " JOIN \"TaskExecutions\" t ON t.\"id\" ="
				    " tm.\"taskId\" WHERE tm.\"workflowId\" ="
				    " '$W'::uuid",
				    a, b),
		     0, "the timers differ");
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"Timers\" WHERE"
				 " \"workflowId\" = $1::uuid",
				 a),
		     2, "the workflow's timeout and left's scheduleToStart");
	cr_assert_eq(
		e2e_sql_int("SELECT \"eventSeq\" FROM"
			    " \"WorkflowExecutions\" WHERE \"id\" = $1::uuid",
			    a),
		e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
			    " WHERE \"workflowId\" = $1::uuid",
			    a));
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total"), 1);
	e2e_use(1);
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total"), 0);
	e2e_use(0);
}

/* After decisions the database refused were left to the deciders (and
 * logged): the deciders try, are refused too, and postpone the one
 * evaluation. */
static void
deciders_postpone_the_refused(void)
{
	cr_assert(strstr(e2e_log(), "were not decided"), "%s", e2e_log());
	struct sql_probe postponed = {
		"SELECT count(*) FROM \"DecideQueues\" WHERE \"reason\" ="
		" 'failed' AND \"enqueuedAt\" > now()",
		1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &postponed),
		  "the deciders did not postpone the refused evaluation");
}

/*
 * A first step the database refuses (a trigger refuses one workflow's
 * task) fails no start: the group is written without its decisions, for
 * the deciders, which postpone the refused one and decide it once it is
 * accepted; another start is decided at start meanwhile.
 */
Test(starts, a_start_whose_first_step_is_refused_is_left_to_the_deciders)
{
	e2e_start(NULL);
	put_task_def("rf", 0, 60);
	put_one_task_workflow("rfw", "rf");
	refuse_tasks_of_n3();
	long long failed = e2e_metric("nodeflow_start_decide_failures_total");
	long long decided = e2e_metric("nodeflow_start_decided_total");
	char refused[37], other[37];
	e2e_start_workflow("rfw", json_pack("{s:i}", "n", 3), refused);
	cr_assert_eq(
		e2e_metric("nodeflow_start_decide_failures_total") - failed, 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"id\" = $1::uuid AND \"status\" ="
				 " 'RUNNING'",
				 refused),
		     1, "the start was not written");
	deciders_postpone_the_refused();
	e2e_start_workflow("rfw", json_pack("{s:i}", "n", 4), other);
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total") - decided, 1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"workflowId\" = $1::uuid",
				 other),
		     1);
	accept_tasks_again();
	struct sql_probe both = {"SELECT count(*) FROM \"TaskQueues\"", 2, 0};
	cr_assert(th_wait_until(30000, sql_reaches, &both),
		  "%lld of 2 tasks queued", both.seen);
}

/*
 * A replica that runs no decider (--roles api) decides its starts' first
 * steps itself: the task is queued when the start is answered, and no
 * decide signal was needed for it.
 */
Test(starts, an_api_only_replica_decides_its_starts_first_steps)
{
	const char *engine[] = {"--decider-interval-ms", "60000", NULL};
	const char *api_only[] = {"--roles", "api", NULL};
	e2e_open();
	e2e_serve(engine);
	e2e_serve(api_only);
	e2e_use(1);
	put_task_def("ao", 0, 60);
	put_one_task_workflow("aow", "ao");
	char id[37];
	e2e_start_workflow("aow", json_pack("{s:i}", "n", 1), id);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\" q"
				 " JOIN \"TaskExecutions\" t ON t.\"id\" ="
				 " q.\"taskId\" WHERE t.\"workflowId\" ="
				 " $1::uuid",
				 id),
		     1);
	cr_assert_eq(e2e_metric("nodeflow_start_decided_total"), 1);
	cr_assert_eq(e2e_metric("nodeflow_decide_signals_sent_total"), 0);
	json_t *t = poll_one("ao", "w1", DECIDE_TIMEOUT_MS);
	cr_assert_str_eq(e2e_str_at(t, "workflowId"), id);
	json_decref(t);
	e2e_use(0);
}

/* ============================================================== results */

/* A workflow of two SIMPLE tasks: "a" on queue qa, then "b" on queue qb,
 * whose input carries the workflow's n and a's output v. */
static void
put_two_task_workflow(const char *name, const char *qa, const char *qb)
{
	json_t *v = e2e_callj(
		"POST", NS "/workflow-definitions", 201,
		json_pack("{s:s,s:i,s:[{s:s,s:s,s:s,s:{s:s}},"
			  "{s:s,s:s,s:s,s:{s:s,s:s}}]}",
			  "name", name, "version", 1, "tasks", "name", qa,
			  "taskReferenceName", "a", "type", "SIMPLE",
			  "inputParameters", "n", "${workflow.input.n}", "name",
			  qb, "taskReferenceName", "b", "type", "SIMPLE",
			  "inputParameters", "n", "${workflow.input.n}", "got",
			  "${a.output.v}"));
	json_decref(v);
}

/* Leases n tasks of queue for worker, polling until all came: a new
 * array. */
static json_t *
lease_n(const char *queue, const char *worker, size_t n)
{
	json_t *all = json_array();
	while (json_array_size(all) < n) {
		struct poll_probe p = {queue, worker,
				       (int)(n - json_array_size(all)), NULL};
		cr_assert(
			th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p),
			"%zu of %zu tasks on queue %s", json_array_size(all), n,
			queue);
		json_array_extend(all, p.tasks);
		json_decref(p.tasks);
	}
	return all;
}

/* The task of tasks whose workflow is id (borrowed). */
static const json_t *
task_of(const json_t *tasks, const char *id)
{
	size_t i;
	const json_t *t;
	json_array_foreach (tasks, i, t)
		if (strcmp(e2e_str_at(t, "workflowId"), id) == 0)
			return t;
	cr_assert_fail("no task of workflow %s", id);
	return NULL;
}

/* The results {"v": the task's input n} of every task of tasks, by
 * worker: a JSON array. */
static json_t *
results_of(const json_t *tasks, const char *worker)
{
	json_t *results = json_array();
	size_t i;
	const json_t *t;
	json_array_foreach (tasks, i, t)
		json_array_append_new(
			results,
			json_pack("{s:s,s:s,s:s,s:{s:O?}}", "taskId",
				  e2e_str_at(t, "id"), "workerId", worker,
				  "status", "COMPLETED", "output", "v",
				  json_object_get(json_object_get(t, "input"),
						  "n")));
	return results;
}

/* The results of tasks (COMPLETED, output {"v": the task's input n}),
 * reported by worker in one request on queue; each must be recorded. */
static void
report_all(const char *queue, const char *worker, const json_t *tasks)
{
	json_t *results = results_of(tasks, worker);
	size_t i;
	const json_t *t;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/results", queue);
	json_t *v = e2e_callj("POST", path, 200,
			      json_pack("{s:o}", "results", results));
	json_array_foreach (json_object_get(v, "results"), i, t)
		cr_assert(json_is_true(json_object_get(t, "ok")),
			  "result %zu: %s", i, e2e_last_body);
	json_decref(v);
}

/* The distinct transactions that last wrote workflow id's rows: its
 * execution, every task, every queue row and the events after its first
 * TASK_STARTED (from the first lease on). */
static long long
writers_since_first_lease(const char *id)
{
	return e2e_sql_int(
		"SELECT count(DISTINCT \"xmin\"::text) FROM"
		" (SELECT \"xmin\" FROM \"WorkflowExecutions\""
		" WHERE \"id\" = $1::uuid UNION ALL"
		" SELECT \"xmin\" FROM \"TaskExecutions\""
		" WHERE \"workflowId\" = $1::uuid UNION ALL"
		" SELECT q.\"xmin\" FROM \"TaskQueues\" q"
		" JOIN \"TaskExecutions\" t ON t.\"id\" = q.\"taskId\""
		" WHERE t.\"workflowId\" = $1::uuid UNION ALL"
		" SELECT \"xmin\" FROM \"WorkflowEvents\""
		" WHERE \"workflowId\" = $1::uuid AND \"seq\" >"
		" (SELECT min(\"seq\") FROM \"WorkflowEvents\""
		" WHERE \"workflowId\" = $1::uuid"
		" AND \"type\" = 'TASK_STARTED')) r",
		id);
}

/* A server whose results decide what follows them (off by default). */
static const char *const results_decide[] = {"--results-decide", "1", NULL};

/*
 * A worker's batch of results decides what follows in the workflows it
 * touched, in its own transaction: when its answer comes, each
 * workflow's next task is queued, and the finished task, the next one,
 * its queue row, the execution and the events since share the results'
 * transaction; no evaluation is left queued for the deciders.  A single
 * result does the same: the workflow it ends has ended when it is
 * answered.
 */
Test(results, a_batch_of_results_decides_the_next_step_in_its_own_transaction)
{
	e2e_start(results_decide);
	put_task_def("ra", 0, 60);
	put_task_def("rb", 0, 60);
	put_two_task_workflow("rab", "ra", "rb");
	char ids[3][37];
	for (int k = 0; k < 3; k++)
		e2e_start_workflow("rab", json_pack("{s:i}", "n", 10 + k),
				   ids[k]);
	json_t *tasks = lease_n("ra", "w1", 3);
	long long decided = e2e_metric("nodeflow_result_decided_total");
	report_all("ra", "w1", tasks);
	json_decref(tasks);
	cr_assert_eq(e2e_metric("nodeflow_result_decided_total") - decided, 3);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"DecideQueues\"", NULL),
		     0);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\" q"
					 " JOIN \"TaskExecutions\" t ON"
					 " t.\"id\" = q.\"taskId\" WHERE"
					 " t.\"workflowId\" = $1::uuid AND"
					 " t.\"refName\" = 'b' AND"
					 " (t.\"input\"->>'got')::int ="
					 " (t.\"input\"->>'n')::int",
					 ids[k]),
			     1, "b was not queued with a's result");
		cr_assert_eq(writers_since_first_lease(ids[k]), 1,
			     "a's result and b's scheduling are two "
			     "transactions");
		cr_assert_eq(e2e_sql_int("SELECT \"eventSeq\" FROM"
					 " \"WorkflowExecutions\" WHERE"
					 " \"id\" = $1::uuid",
					 ids[k]),
			     e2e_sql_int("SELECT max(\"seq\") FROM"
					 " \"WorkflowEvents\" WHERE"
					 " \"workflowId\" = $1::uuid",
					 ids[k]));
	}
	json_t *t = lease_n("rb", "w1", 3);
	const json_t *b0 = task_of(t, ids[0]);
	cr_assert_eq(complete("rb", e2e_str_at(b0, "id"), "w1",
			      json_pack("{s:b}", "ok", 1)),
		     200, "%s", e2e_last_body);
	json_decref(t);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"id\" = $1::uuid AND \"status\" ="
				 " 'COMPLETED'",
				 ids[0]),
		     1, "the single result did not end its workflow");
	cr_assert_eq(e2e_metric("nodeflow_result_decided_total") - decided, 4);
	json_t *events =
		history(ids[0], "WORKFLOW_STARTED", "WORKFLOW_COMPLETED");
	json_decref(events);
}

/*
 * By default a result only queues its workflow: the deciders decide what
 * follows, in a transaction of their own, between the result and the
 * next task's lease.
 */
Test(results, by_default_the_deciders_decide_after_a_result)
{
	e2e_start(NULL);
	put_task_def("ra", 0, 60);
	put_task_def("rb", 0, 60);
	put_two_task_workflow("rab", "ra", "rb");
	char id[37];
	e2e_start_workflow("rab", json_pack("{s:i}", "n", 1), id);
	json_t *tasks = lease_n("ra", "w1", 1);
	report_all("ra", "w1", tasks);
	json_decref(tasks);
	json_decref(lease_n("rb", "w1", 1));
	cr_assert_eq(e2e_metric("nodeflow_result_decided_total"), 0);
	cr_assert_eq(writers_since_first_lease(id), 3,
		     "the result, the deciders' step and the lease of b are "
		     "not three transactions");
}

/* A workflow of a SIMPLE task "a" (queue da), a SET_VARIABLE of its
 * output, a fork of "l" (dl) and "r" (dr), and their JOIN. */
static void
put_fork_workflow(const char *name)
{
	char body[2048];
	snprintf(body, sizeof(body),
		 "{\"name\":\"%s\",\"version\":1,\"tasks\":["
		 "{\"name\":\"da\",\"taskReferenceName\":\"a\","
		 "\"type\":\"SIMPLE\","
		 "\"inputParameters\":{\"n\":\"${workflow.input.n}\"}},"
		 "{\"name\":\"keep\",\"taskReferenceName\":\"keep\","
		 "\"type\":\"SET_VARIABLE\","
		 "\"inputParameters\":{\"v\":\"${a.output.v}\"}},"
		 "{\"name\":\"fork\",\"taskReferenceName\":\"fork\","
		 "\"type\":\"FORK_JOIN\",\"forkTasks\":["
		 "[{\"name\":\"dl\",\"taskReferenceName\":\"l\","
		 "\"type\":\"SIMPLE\",\"inputParameters\":"
		 "{\"n\":\"${workflow.variables.v}\"}}],"
		 "[{\"name\":\"dr\",\"taskReferenceName\":\"r\","
		 "\"type\":\"SIMPLE\",\"inputParameters\":"
		 "{\"n\":\"${a.output.v}\"}}]]},"
		 "{\"name\":\"join\",\"taskReferenceName\":\"join\","
		 "\"type\":\"JOIN\",\"joinOn\":[\"l\",\"r\"]}]}",
		 name);
	e2e_call_ok("POST", NS "/workflow-definitions", body, 201);
}

/* Waits until no evaluation is queued. */
static void
deciders_settle(void)
{
	struct sql_probe settled = {
		"SELECT 1 - least(count(*), 1) FROM \"DecideQueues\"", 1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &settled),
		  "an evaluation is still queued");
}

/*
 * What results decide is what the deciders decide after them: the same
 * workflow (a task, a SET_VARIABLE of its output, a fork, a JOIN) driven
 * by the same results on a server that decides with results and on one
 * that leaves it to the deciders (--results-decide 0) has the same tasks,
 * queue rows, events in the same order, counters and variables, after
 * each step.
 */
Test(results, a_step_decided_with_its_result_is_the_deciders_step)
{
	const char *deciders[] = {"--results-decide", "0", NULL};
	e2e_open();
	e2e_serve(results_decide);
	e2e_serve(deciders);
	put_task_def("da", 0, 60);
	put_task_def("dl", 0, 60);
	put_task_def("dr", 0, 60);
	put_fork_workflow("rfork");
	char a[37], b[37];
	e2e_start_workflow("rfork", json_pack("{s:i}", "n", 7), a);
	e2e_start_workflow("rfork", json_pack("{s:i}", "n", 7), b);
	const char *wfs[] = {a, b};
	json_t *first = lease_n("da", "w1", 2);
	for (int k = 0; k < 2; k++) {
		json_t *one = json_pack("[O]", task_of(first, wfs[k]));
		e2e_use(k);
		report_all("da", "w1", one);
		json_decref(one);
	}
	json_decref(first);
	e2e_use(0);
	deciders_settle();
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\"", NULL),
		     4, "l and r of each");
	same_rows(a, b);

	json_t *l = lease_n("dl", "w1", 2), *r = lease_n("dr", "w1", 2);
	for (int k = 0; k < 2; k++) {
		json_t *lk = json_pack("[O]", task_of(l, wfs[k]));
		json_t *rk = json_pack("[O]", task_of(r, wfs[k]));
		e2e_use(k);
		report_all("dl", "w1", lk);
		/* One evaluation for each result, as deciding with it gives:
		 * the deciders would otherwise take both in one when the
		 * second comes before they look (version 3 against 4). */
		deciders_settle();
		report_all("dr", "w1", rk);
		json_decref(lk);
		json_decref(rk);
	}
	json_decref(l);
	json_decref(r);
	e2e_use(0);
	json_decref(e2e_wait_status(a, "COMPLETED", DECIDE_TIMEOUT_MS));
	json_decref(e2e_wait_status(b, "COMPLETED", DECIDE_TIMEOUT_MS));
	deciders_settle();
	same_rows(a, b);
	cr_assert_eq(e2e_metric("nodeflow_result_decided_total"), 3);
	e2e_use(1);
	cr_assert_eq(e2e_metric("nodeflow_result_decided_total"), 0);
	e2e_use(0);
}

/*
 * A next step the database refuses (a trigger refuses the task rows of
 * workflows whose n is 3) fails no result: the results are written
 * without their decisions, for the deciders, which postpone the refused
 * one and decide it once it is accepted; the other workflow of the batch
 * is decided by the deciders meanwhile.
 */
Test(results, results_whose_next_step_is_refused_are_left_to_the_deciders)
{
	e2e_start(results_decide);
	put_task_def("xa", 0, 60);
	put_task_def("xb", 0, 60);
	put_two_task_workflow("xab", "xa", "xb");
	char refused[37], other[37];
	e2e_start_workflow("xab", json_pack("{s:i}", "n", 3), refused);
	e2e_start_workflow("xab", json_pack("{s:i}", "n", 4), other);
	json_t *tasks = lease_n("xa", "w1", 2);
	refuse_tasks_of_n3();
	long long failed = e2e_metric("nodeflow_result_decide_failures_total");
	report_all("xa", "w1", tasks);
	json_decref(tasks);
	cr_assert_eq(e2e_metric("nodeflow_result_decide_failures_total") -
			     failed,
		     1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"refName\" = 'a' AND \"status\" ="
				 " 'COMPLETED'",
				 NULL),
		     2, "the results were not recorded");
	deciders_postpone_the_refused();
	json_t *b = lease_n("xb", "w1", 1);
	cr_assert_str_eq(e2e_str_at(json_array_get(b, 0), "workflowId"), other);
	json_decref(b);
	accept_tasks_again();
	json_decref(lease_n("xb", "w1", 1));
}

/* A batch of results sent to path on a thread of its own, once every
 * sender has reached the barrier go. */
struct batch_sender {
	pthread_t t;
	pthread_barrier_t *go;
	const char *path;
	char *body;
	long status;
	char *answer;
};

static void *
batch_sender_main(void *arg)
{
	struct batch_sender *b = arg;
	CURL *h = curl_easy_init();
	pthread_barrier_wait(b->go);
	b->status = worker_req(h, "POST", b->path, b->body, &b->answer);
	curl_easy_cleanup(h);
	return NULL;
}

/* The results body for every task of tasks, by worker w1. */
static char *
results_body(const json_t *tasks)
{
	json_t *body = json_pack("{s:o}", "results", results_of(tasks, "w1"));
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	return text;
}

/*
 * Two batches of results for the two branches of the same forks, sent at
 * once: each decides the workflows it touched in its own transaction, the
 * second waiting for the first's, so every JOIN completes exactly once,
 * every workflow ends, and every history stays gap-free.
 */
Test(results, two_batches_racing_on_the_same_forks_join_each_once)
{
	enum { K = 12 };
	e2e_start(results_decide);
	put_task_def("da", 0, 60);
	put_task_def("dl", 0, 60);
	put_task_def("dr", 0, 60);
	put_fork_workflow("race");
	char ids[K][37];
	for (int k = 0; k < K; k++)
		e2e_start_workflow("race", json_pack("{s:i}", "n", k), ids[k]);
	json_t *first = lease_n("da", "w1", K);
	report_all("da", "w1", first);
	json_decref(first);
	json_t *l = lease_n("dl", "w1", K), *r = lease_n("dr", "w1", K);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, 2);
	set_base(e2e_server());
	struct batch_sender b[2] = {
		{.go = &go,
		 .path = NS "/queues/dl/results",
		 .body = results_body(l)},
		{.go = &go,
		 .path = NS "/queues/dr/results",
		 .body = results_body(r)},
	};
	json_decref(l);
	json_decref(r);
	for (int i = 0; i < 2; i++)
		cr_assert(pthread_create(&b[i].t, NULL, batch_sender_main,
					 &b[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(b[i].t, NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(b[i].status, 200, "%s",
			     b[i].answer ? b[i].answer : "");
		json_t *v = json_loads(b[i].answer, 0, NULL);
		size_t j;
		json_t *it;
		json_array_foreach (json_object_get(v, "results"), j, it)
			cr_assert(json_is_true(json_object_get(it, "ok")), "%s",
				  b[i].answer);
		json_decref(v);
		free(b[i].body);
		free(b[i].answer);
	}
	for (int k = 0; k < K; k++)
		json_decref(e2e_wait_status(ids[k], "COMPLETED",
					    DECIDE_TIMEOUT_MS));
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"refName\" = 'join' AND \"status\""
				 " = 'COMPLETED'",
				 NULL),
		     K);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"refName\" = 'join'",
				 NULL),
		     K);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM (SELECT \"workflowId\""
				 " FROM \"WorkflowEvents\" GROUP BY 1"
				 " HAVING count(*) <> max(\"seq\")"
				 " OR count(DISTINCT \"seq\") <> count(*)) g",
				 NULL),
		     0, "a history has a gap or a repeat");
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
				 " WHERE \"type\" = 'WORKFLOW_COMPLETED'",
				 NULL),
		     K);
}

/* ============================================================== listing */

/* 12 executions in one millisecond: microseconds 0,0,0 (one instant
 * thrice), 100, 200, 300, 300, 400, 500, 600, 700, 999.  Every third has
 * input {"a":1} (the others {"a":2}), every fourth is COMPLETED, every
 * second has correlationId "even". */
static void
insert_same_millisecond(void)
{
	th_exec(e2e_sql(),
		"WITH b AS (SELECT date_trunc('milliseconds', now())"
		"   - interval '1 minute' AS t),"
		" o AS (SELECT * FROM unnest(ARRAY[0,0,0,100,200,300,300,400,"
		"   500,600,700,999]) WITH ORDINALITY AS o(us, i))"
		" INSERT INTO \"WorkflowExecutions\" (\"id\", \"namespaceId\","
		"   \"defName\", \"defVersion\", \"status\", \"input\","
		"   \"correlationId\", \"startedAt\")"
		" SELECT uuidv7(), n.\"id\", 'paging', 1,"
		"   CASE WHEN o.i % 4 = 0 THEN 'COMPLETED' ELSE 'RUNNING' END,"
		"   CASE WHEN o.i % 3 = 0 THEN '{\"a\":1}'::jsonb"
		"   ELSE '{\"a\":2}'::jsonb END,"
		"   CASE WHEN o.i % 2 = 0 THEN 'even' END,"
		"   b.t + make_interval(secs => o.us / 1000000.0)"
		" FROM b, o, \"Namespaces\" n WHERE n.\"name\" = 'default'");
}

/* Pages through query (a path with '?'), limit per page; checks each
 * page's size and that the ids come exactly in the order of want_sql. */
static void
page_through(const char *query, int limit, const char *want_sql)
{
	PGresult *want = th_query(e2e_sql(), want_sql, 0, NULL);
	int n = PQntuples(want);
	cr_assert_gt(n, 0);
	char *cursor = NULL;
	int seen = 0, pages = 0;
	for (;;) {
		char path[1024];
		snprintf(path, sizeof(path), "%s&limit=%d%s%s", query, limit,
			 cursor ? "&cursor=" : "", cursor ? cursor : "");
		json_t *v = e2e_call("GET", path, NULL, 200);
		json_t *items = json_object_get(v, "items");
		cr_assert(json_is_array(items), "%s", e2e_last_body);
		size_t k = json_array_size(items);
		cr_assert_leq(k, (size_t)limit);
		pages++;
		cr_assert_leq(pages, n + 1, "paging does not end: %s",
			      e2e_last_body);
		for (size_t i = 0; i < k; i++) {
			const char *id =
				e2e_str_at(json_array_get(items, i), "id");
			cr_assert_lt(seen, n, "more rows than %d: %s", n, id);
			cr_assert_str_eq(id, PQgetvalue(want, seen, 0),
					 "row %d of %s (limit %d)", seen, query,
					 limit);
			seen++;
		}
		json_t *next = json_object_get(v, "nextCursor");
		free(cursor);
		cursor = NULL;
		if (json_is_null(next)) {
			json_decref(v);
			break;
		}
		cr_assert(json_is_string(next), "%s", e2e_last_body);
		cr_assert_eq(k, (size_t)limit,
			     "a short page with a next cursor");
		cursor = strdup(json_string_value(next));
		json_decref(v);
	}
	cr_assert_eq(seen, n, "%s limit %d: %d of %d rows", query, limit, seen,
		     n);
	PQclear(want);
}

Test(listing, rows_sharing_a_millisecond_are_each_paged_once)
{
	e2e_start(NULL);
	insert_same_millisecond();
	/* The setup is what the trap needs: one millisecond, some instants
	 * shared exactly. */
	cr_assert_eq(
		e2e_sql_int("SELECT count(DISTINCT date_trunc('milliseconds',"
			    " \"startedAt\")) FROM \"WorkflowExecutions\"",
			    NULL),
		1);
	cr_assert_eq(e2e_sql_int("SELECT count(DISTINCT \"startedAt\")"
				 " FROM \"WorkflowExecutions\"",
				 NULL),
		     9);

	const char *all = "SELECT \"id\"::text FROM \"WorkflowExecutions\""
			  " ORDER BY \"startedAt\" DESC, \"id\" DESC";
	const int limits[] = {5, 4, 1, 11, 12, 13, 500};
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		page_through(NS "/workflows?x=1", limits[i], all);
	page_through(NS "/workflows?name=paging", 5, all);
	page_through(NS "/workflows?status=RUNNING", 5,
		     "SELECT \"id\"::text FROM \"WorkflowExecutions\""
		     " WHERE \"status\" = 'RUNNING'"
		     " ORDER BY \"startedAt\" DESC, \"id\" DESC");
	page_through(NS "/workflows?status=RUNNING,COMPLETED", 5, all);
	page_through(NS "/workflows?correlationId=even", 2,
		     "SELECT \"id\"::text FROM \"WorkflowExecutions\""
		     " WHERE \"correlationId\" = 'even'"
		     " ORDER BY \"startedAt\" DESC, \"id\" DESC");
	page_through(NS "/workflows?status=COMPLETED&q=input.a:2", 1,
		     "SELECT \"id\"::text FROM \"WorkflowExecutions\""
		     " WHERE \"input\"->>'a' = '2' AND \"status\" ="
		     " 'COMPLETED' ORDER BY \"startedAt\" DESC, \"id\" DESC");
	page_through(NS "/workflows?q=input.a:1", 2,
		     "SELECT \"id\"::text FROM \"WorkflowExecutions\""
		     " WHERE \"input\"->>'a' = '1'"
		     " ORDER BY \"startedAt\" DESC, \"id\" DESC");

	/* Nothing matches: an empty page, no cursor. */
	json_t *v = e2e_call("GET", NS "/workflows?name=nothing", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(v, "items")), 0);
	cr_assert(json_is_null(json_object_get(v, "nextCursor")));
	json_decref(v);
}

Test(listing, limit_and_cursor_are_validated)
{
	e2e_start(NULL);
	insert_same_millisecond();
	json_t *v = e2e_call("GET", NS "/workflows?limit=5", NULL, 200);
	const char *good = e2e_str_at(v, "nextCursor");
	char path[512];
	snprintf(path, sizeof(path), NS "/workflows?limit=5&cursor=%s", good);
	e2e_call_ok("GET", path, NULL, 200);
	/* The cursor with a character that is not base64url, truncated,
	 * extended. */
	char bad[256];
	snprintf(bad, sizeof(bad), "%s", good);
	bad[3] = '*';
	const char *const cases[] = {
		NS "/workflows?limit=0",
		NS "/workflows?limit=501",
		NS "/workflows?limit=-1",
		NS "/workflows?limit=abc",
		NS "/workflows?limit=5x",
		NS "/workflows?limit=",
		NS "/workflows?cursor=",
		NS "/workflows?cursor=!!!!",
		NS "/workflows?cursor=bm90IGEgY3Vyc29y", /* "not a cursor" */
		NS "/workflows?cursor=A",
		NS "/workflows?status=BOGUS",
		NS "/workflows?status=running",
		NS "/workflows?q=foo",
		NS "/workflows?q=input.:1",
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_error("GET", cases[i], NULL, 400, "invalid_argument");
	snprintf(path, sizeof(path), NS "/workflows?cursor=%s", bad);
	expect_error("GET", path, NULL, 400, "invalid_argument");
	snprintf(path, sizeof(path), NS "/workflows?cursor=%.*s", 10, good);
	expect_error("GET", path, NULL, 400, "invalid_argument");
	snprintf(path, sizeof(path), NS "/workflows?cursor=%sAAAA", good);
	expect_error("GET", path, NULL, 400, "invalid_argument");
	json_decref(v);
}

/* =============================================================== leases */

/* One workflow of one task on queue (task def with retryCount retries and
 * responseTimeoutSeconds rts); returns the task leased to worker. */
static json_t *
leased_task(const char *queue, int retries, int rts, const char *worker,
	    char wf_id[37])
{
	put_task_def(queue, retries, rts);
	put_one_task_workflow("lw", queue);
	e2e_start_workflow("lw", json_pack("{s:i}", "n", 1), wf_id);
	return poll_one(queue, worker, DECIDE_TIMEOUT_MS);
}

/* The task's row and its queue row, as one text (for "nothing changed"). */
static char *
task_state(const char *task_id)
{
	const char *params[] = {task_id};
	return th_value(
		e2e_sql(),
		"SELECT (SELECT t::text FROM \"TaskExecutions\" t"
		"  WHERE t.\"id\" = $1::uuid) || '|' || coalesce((SELECT"
		"  q::text FROM \"TaskQueues\" q WHERE q.\"taskId\" = $1::uuid),"
		"  'none') || '|' || (SELECT count(*) FROM \"WorkflowEvents\")"
		"  || '|' || (SELECT count(*) FROM \"DecideQueues\")",
		1, params);
}

Test(leases, a_worker_without_the_lease_gets_409_and_changes_nothing)
{
	e2e_start(NULL);
	char wf[37];
	json_t *t = leased_task("lq", 0, 60, "A", wf);
	char tid[37];
	snprintf(tid, sizeof(tid), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	char *before = task_state(tid);

	json_t *e = NULL;
	cr_assert_eq(task_op("complete", "lq", tid,
			     json_pack("{s:s,s:{}}", "workerId", "B", "output"),
			     &e),
		     409, "%s", e2e_last_body);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(e, "error"), "code")),
			 "conflict");
	json_decref(e);
	cr_assert_eq(fail("lq", tid, "B", "x", false), 409);
	cr_assert_eq(fail("lq", tid, "B", "x", true), 409);
	cr_assert_eq(task_op("heartbeat", "lq", tid,
			     json_pack("{s:s}", "workerId", "B"), NULL),
		     409);
	cr_assert_eq(task_op("release", "lq", tid,
			     json_pack("{s:s}", "workerId", "B"), NULL),
		     409);
	cr_assert_eq(task_op("defer", "lq", tid,
			     json_pack("{s:s,s:i}", "workerId", "B",
				       "delaySeconds", 5),
			     NULL),
		     409);
	/* The batch: one result per task, B's refused. */
	char body[512];
	snprintf(body, sizeof(body),
		 "{\"results\":[{\"taskId\":\"%s\",\"workerId\":\"B\","
		 "\"status\":\"COMPLETED\",\"output\":{}}]}",
		 tid);
	json_t *v = e2e_call("POST", NS "/queues/lq/results", body, 200);
	json_t *r0 = json_array_get(json_object_get(v, "results"), 0);
	cr_assert(json_is_false(json_object_get(r0, "ok")), "%s",
		  e2e_last_body);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(r0, "error"), "code")),
			 "conflict");
	json_decref(v);
	/* The same task on another queue is not the same lease either. */
	cr_assert_eq(complete("other", tid, "A", json_object()), 409);
	char *after = task_state(tid);
	cr_assert_str_eq(after, before, "a refused result changed something");
	free(after);
	free(before);

	cr_assert_eq(complete("lq", tid, "A", json_pack("{s:i}", "v", 1)), 200,
		     "%s", e2e_last_body);
	cr_assert_eq(complete("lq", tid, "A", json_pack("{s:i}", "v", 2)), 409);
	cr_assert_eq(fail("lq", tid, "A", "late", false), 409);
	json_t *w = e2e_wait_status(wf, "COMPLETED", DECIDE_TIMEOUT_MS);
	cr_assert(json_eq_text(json_object_get(w, "output"), "{\"v\":1}"), "%s",
		  e2e_last_body);
	json_decref(w);
	json_decref(history(wf, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED"));
}

Test(leases, batched_results_each_stand_alone)
{
	e2e_start(NULL);
	put_task_def("bq", 0, 60);
	put_one_task_workflow("bw", "bq");
	char ids[3][37];
	for (int i = 0; i < 3; i++)
		e2e_start_workflow("bw", json_pack("{s:i}", "n", i), ids[i]);
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", 3, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued));
	struct poll_probe p = {"bq", "A", 3, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p));
	cr_assert_eq(json_array_size(p.tasks), 3, "%s", e2e_last_body);
	const char *t[3];
	for (int i = 0; i < 3; i++)
		t[i] = e2e_str_at(json_array_get(p.tasks, i), "id");
	char body[2048];
	snprintf(body, sizeof(body),
		 "{\"results\":["
		 "{\"taskId\":\"%s\",\"workerId\":\"A\",\"status\":"
		 "\"COMPLETED\",\"output\":{\"k\":1}},"
		 "{\"taskId\":\"%s\",\"workerId\":\"B\",\"status\":"
		 "\"COMPLETED\",\"output\":{}},"
		 "{\"taskId\":\"%s\",\"workerId\":\"A\",\"status\":"
		 "\"FAILED_WITH_TERMINAL_ERROR\",\"reason\":\"no\"}]}",
		 t[0], t[1], t[2]);
	json_t *v = e2e_call("POST", NS "/queues/bq/results", body, 200);
	json_t *rs = json_object_get(v, "results");
	cr_assert_eq(json_array_size(rs), 3, "%s", e2e_last_body);
	const bool ok[] = {true, false, true};
	for (int i = 0; i < 3; i++) {
		json_t *r = json_array_get(rs, (size_t)i);
		cr_assert_str_eq(e2e_str_at(r, "taskId"), t[i]);
		cr_assert_eq(json_is_true(json_object_get(r, "ok")), ok[i],
			     "result %d: %s", i, e2e_last_body);
	}
	json_decref(v);
	/* Map tasks to workflows (the poll's order is by task id). */
	for (int i = 0; i < 3; i++) {
		const char *wf = e2e_str_at(json_array_get(p.tasks, (size_t)i),
					    "workflowId");
		const char *want = i == 0   ? "COMPLETED"
				   : i == 2 ? "FAILED"
					    : NULL;
		if (want)
			json_decref(
				e2e_wait_status(wf, want, DECIDE_TIMEOUT_MS));
		else
			cr_assert_eq(
				e2e_sql_int("SELECT count(*) FROM"
					    " \"TaskQueues\" WHERE \"leasedBy\""
					    " = 'A' AND \"taskId\" = $1::uuid",
					    t[i]),
				1);
	}
	json_decref(p.tasks);
}

/* A decision the database refuses (here a trigger refuses one workflow's
 * task) does not hold back the others decided with it: they are applied,
 * it is postponed and counted, and decided again later.  The starts leave
 * their first steps to the deciders (--start-decides 0). */
Test(workers, a_refused_decision_does_not_hold_back_its_batch)
{
	const char *flags[] = {"--start-decides", "0", NULL};
	e2e_start(flags);
	put_task_def("rq", 0, 60);
	put_one_task_workflow("rw", "rq");
	refuse_tasks_of_n3();
	char ids[6][37];
	for (int i = 0; i < 6; i++)
		e2e_start_workflow("rw", json_pack("{s:i}", "n", i), ids[i]);
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", 5, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued),
		  "%lld of 5 tasks queued", queued.seen);
	struct sql_probe postponed = {
		"SELECT count(*) FROM \"DecideQueues\" WHERE \"reason\" ="
		" 'failed' AND \"enqueuedAt\" > now()",
		1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &postponed),
		  "the refused evaluation was not postponed");
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"workflowId\" = $1::uuid",
				 ids[3]),
		     0);
	cr_assert_geq(e2e_metric("nodeflow_decision_failures_total"), 1,
		      "the refused evaluation was not counted");
	/* Accepted again, it is decided once its postponement ends. */
	accept_tasks_again();
	struct sql_probe all = {"SELECT count(*) FROM \"TaskQueues\"", 6, 0};
	cr_assert(th_wait_until(30000, sql_reaches, &all),
		  "%lld of 6 tasks queued", all.seen);
}

/* A batch is one transaction: its results share one commit (one "endedAt",
 * the transaction's clock); a task named twice is recorded once, the
 * second answered with a conflict, as if sent after the batch. */
Test(leases, a_batch_commits_once_and_records_a_task_once)
{
	e2e_start(NULL);
	put_task_def("cq", 0, 60);
	put_one_task_workflow("cw", "cq");
	char ids[4][37];
	for (int i = 0; i < 4; i++)
		e2e_start_workflow("cw", json_pack("{s:i}", "n", i), ids[i]);
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"", 4, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued));
	struct poll_probe p = {"cq", "A", 4, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p));
	cr_assert_eq(json_array_size(p.tasks), 4, "%s", e2e_last_body);
	const char *t[4], *wf[4];
	for (int i = 0; i < 4; i++) {
		t[i] = e2e_str_at(json_array_get(p.tasks, (size_t)i), "id");
		wf[i] = e2e_str_at(json_array_get(p.tasks, (size_t)i),
				   "workflowId");
	}
	char body[2048];
	snprintf(body, sizeof(body),
		 "{\"results\":["
		 "{\"taskId\":\"%s\",\"workerId\":\"A\",\"status\":"
		 "\"COMPLETED\",\"output\":{\"k\":0}},"
		 "{\"taskId\":\"%s\",\"workerId\":\"A\",\"status\":"
		 "\"COMPLETED\",\"output\":{\"k\":1}},"
		 "{\"taskId\":\"%s\",\"workerId\":\"A\",\"status\":"
		 "\"COMPLETED\",\"output\":{\"k\":9}},"
		 "{\"taskId\":\"%s\",\"workerId\":\"A\",\"status\":"
		 "\"FAILED\",\"reason\":\"no\"},"
		 "{\"taskId\":\"%s\",\"workerId\":\"A\",\"status\":"
		 "\"COMPLETED\",\"output\":{\"k\":3}}]}",
		 t[0], t[1], t[0], t[2], t[3]);
	json_t *v = e2e_call("POST", NS "/queues/cq/results", body, 200);
	json_t *rs = json_object_get(v, "results");
	cr_assert_eq(json_array_size(rs), 5, "%s", e2e_last_body);
	const bool ok[] = {true, true, false, true, true};
	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(json_is_true(json_object_get(json_array_get(rs, i),
							  "ok")),
			     ok[i], "result %zu: %s", i, e2e_last_body);
	json_t *dup = json_object_get(json_array_get(rs, 2), "error");
	cr_assert_str_eq(e2e_str_at(dup, "code"), "conflict");
	json_decref(v);

	const char *params[] = {t[0], t[1], t[2], t[3]};
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(DISTINCT \"endedAt\") FROM"
			    " \"TaskExecutions\" WHERE \"id\" IN ($1::uuid,"
			    " $2::uuid, $3::uuid, $4::uuid)",
			    4, params),
		     1, "the batch's results were not committed together");
	json_t *w = e2e_wait_status(wf[0], "COMPLETED", DECIDE_TIMEOUT_MS);
	cr_assert(json_eq_text(json_object_get(w, "output"), "{\"k\":0}"), "%s",
		  e2e_last_body);
	json_decref(w);
	json_decref(e2e_wait_status(wf[1], "COMPLETED", DECIDE_TIMEOUT_MS));
	json_decref(e2e_wait_status(wf[2], "FAILED", DECIDE_TIMEOUT_MS));
	json_decref(e2e_wait_status(wf[3], "COMPLETED", DECIDE_TIMEOUT_MS));
	/* One completion event for the task named twice. */
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
				 " WHERE \"taskId\" = $1::uuid"
				 " AND \"type\" = 'TASK_COMPLETED'",
				 t[0]),
		     1);
	json_decref(p.tasks);
}

/* Two workers report batches at once whose tasks belong to the same
 * workflows (both branches of each fork), listed in opposite orders:
 * every result is recorded, none refused, every workflow completes. */
Test(leases, crossing_batches_of_one_workflows_tasks_all_land)
{
	enum { WF = 12 };
	e2e_start(NULL);
	put_task_def("xq", 0, 60);
	e2e_call_ok(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"xw\",\"version\":1,\"tasks\":["
		"{\"name\":\"f\",\"taskReferenceName\":\"f\","
		"\"type\":\"FORK_JOIN\",\"forkTasks\":["
		"[{\"name\":\"xq\",\"taskReferenceName\":\"a\"}],"
		"[{\"name\":\"xq\",\"taskReferenceName\":\"b\"}]]},"
		"{\"name\":\"j\",\"taskReferenceName\":\"j\",\"type\":\"JOIN\","
		"\"joinOn\":[\"a\",\"b\"]}]}",
		201);
	char ids[WF][37];
	for (int i = 0; i < WF; i++)
		e2e_start_workflow("xw", json_pack("{s:i}", "n", i), ids[i]);
	struct sql_probe queued = {"SELECT count(*) FROM \"TaskQueues\"",
				   2 * WF, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &queued));
	struct poll_probe p = {"xq", "W", 2 * WF, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p));
	cr_assert_eq(json_array_size(p.tasks), 2 * WF, "%s", e2e_last_body);

	/* Batch 0 holds branch a of every workflow in one order and branch
	 * b in the other; batch 1 the rest, reversed. */
	char body[2][4096];
	const json_t *task[2][WF];
	size_t na = 0, nb = 0;
	size_t i;
	const json_t *tk;
	json_array_foreach (p.tasks, i, tk) {
		if (strcmp(e2e_str_at(tk, "refName"), "a") == 0)
			task[0][na++] = tk;
		else
			task[1][nb++] = tk;
	}
	cr_assert_eq(na, WF);
	cr_assert_eq(nb, WF);
	for (int k = 0; k < 2; k++) {
		size_t at = (size_t)snprintf(body[k], sizeof(body[k]),
					     "{\"results\":[");
		for (int j = 0; j < WF; j++) {
			/* k 0: a[0..5], b[11..6]; k 1: b[5..0], a[6..11] */
			const json_t *x =
				j < WF / 2 ? task[k][k ? WF / 2 - 1 - j : j]
					   : task[1 - k]
						 [k ? j : 3 * WF / 2 - 1 - j];
			at += (size_t)snprintf(
				body[k] + at, sizeof(body[k]) - at,
				"%s{\"taskId\":\"%s\",\"workerId\":\"W\","
				"\"status\":\"COMPLETED\",\"output\":"
				"{\"j\":%d}}",
				j ? "," : "", e2e_str_at(x, "id"), j);
		}
		snprintf(body[k] + at, sizeof(body[k]) - at, "]}");
	}
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, 2);
	set_base(e2e_server());
	struct batch_sender b[2];
	for (int k = 0; k < 2; k++) {
		b[k] = (struct batch_sender){.go = &go,
					     .path = NS "/queues/xq/results",
					     .body = body[k]};
		cr_assert(pthread_create(&b[k].t, NULL, batch_sender_main,
					 &b[k]) == 0);
	}
	for (int k = 0; k < 2; k++)
		pthread_join(b[k].t, NULL);
	pthread_barrier_destroy(&go);
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(b[k].status, 200, "batch %d: %ld %s", k,
			     b[k].status, b[k].answer ? b[k].answer : "");
		json_t *v = json_loads(b[k].answer, 0, NULL);
		json_t *rs = json_object_get(v, "results");
		cr_assert_eq(json_array_size(rs), WF, "%s", b[k].answer);
		json_array_foreach (rs, i, tk)
			cr_assert(json_is_true(json_object_get(tk, "ok")),
				  "batch %d item %zu: %s", k, i, b[k].answer);
		json_decref(v);
		free(b[k].answer);
	}
	for (int k = 0; k < WF; k++)
		json_decref(e2e_wait_status(ids[k], "COMPLETED",
					    DECIDE_TIMEOUT_MS));
	json_decref(p.tasks);
}

static bool
is_before(const char *a, const char *b)
{
	const char *params[] = {a, b};
	return th_int(e2e_sql(),
		      "SELECT ($1::timestamptz < $2::timestamptz)::int", 2,
		      params) == 1;
}

struct reappear_probe {
	const char *queue;
	const char *task_id;
	int64_t at;
};

static bool
reappeared(void *arg)
{
	struct reappear_probe *p = arg;
	struct poll_probe pp = {p->queue, "C", 1, NULL};
	if (!polled_something(&pp))
		return false;
	p->at = th_now_ms();
	cr_assert_str_eq(e2e_str_at(json_array_get(pp.tasks, 0), "id"),
			 p->task_id);
	json_decref(pp.tasks);
	return true;
}

Test(leases, heartbeat_release_and_defer)
{
	e2e_start(NULL);
	char wf[37];
	json_t *t = leased_task("hq", 0, 30, "A", wf);
	char tid[37], l1[64];
	snprintf(tid, sizeof(tid), "%s", e2e_str_at(t, "id"));
	snprintf(l1, sizeof(l1), "%s", e2e_str_at(t, "leaseExpiresAt"));
	json_decref(t);
	const char *tp[] = {tid};
	/* The lease lasts responseTimeoutSeconds. */
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT (\"leaseExpiresAt\" BETWEEN now() +"
			    " interval '25 s' AND now() + interval '31 s')::int"
			    " FROM \"TaskQueues\" WHERE \"taskId\" = $1::uuid",
			    1, tp),
		     1);

	/* Heartbeat: a later expiry, written to the row. */
	json_t *hb = NULL;
	cr_assert_eq(task_op("heartbeat", "hq", tid,
			     json_pack("{s:s}", "workerId", "A"), &hb),
		     200, "%s", e2e_last_body);
	char l2[64];
	snprintf(l2, sizeof(l2), "%s", e2e_str_at(hb, "leaseExpiresAt"));
	json_decref(hb);
	cr_assert(is_before(l1, l2), "heartbeat: %s is not after %s", l2, l1);
	const char *eq[] = {tid, l2};
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT (\"leaseExpiresAt\" = $2::timestamptz)::int"
			    " FROM \"TaskQueues\" WHERE \"taskId\" = $1::uuid",
			    2, eq),
		     1);

	/* Release: pollable again at once, by anyone, the same attempt. */
	cr_assert_eq(task_op("release", "hq", tid,
			     json_pack("{s:s}", "workerId", "A"), NULL),
		     200, "%s", e2e_last_body);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"TaskExecutions\""
			    " WHERE \"id\" = $1::uuid AND \"status\" ="
			    " 'SCHEDULED'",
			    1, tp),
		     1);
	struct poll_probe pb = {"hq", "B", 1, NULL};
	cr_assert(polled_something(&pb), "a released task is not pollable");
	cr_assert_str_eq(e2e_str_at(json_array_get(pb.tasks, 0), "id"), tid);
	cr_assert_eq(int_at(json_array_get(pb.tasks, 0), "attempt"), 0);
	json_decref(pb.tasks);
	cr_assert_eq(complete("hq", tid, "A", json_object()), 409,
		     "the old holder kept the lease");

	/* Defer: invisible for its delay, then back. */
	int64_t t0 = th_now_ms();
	cr_assert_eq(task_op("defer", "hq", tid,
			     json_pack("{s:s,s:i}", "workerId", "B",
				       "delaySeconds", 1),
			     NULL),
		     200, "%s", e2e_last_body);
	cr_assert_eq(poll_count("hq", "C"), 0,
		     "a deferred task was handed out");
	struct reappear_probe rp = {"hq", tid, 0};
	cr_assert(th_wait_until(5000, reappeared, &rp),
		  "the deferred task did not come back within 5 s");
	cr_assert_geq(rp.at - t0, 900, "back after %lld ms",
		      (long long)(rp.at - t0));

	cr_assert_eq(complete("hq", tid, "B", json_object()), 409);
	cr_assert_eq(complete("hq", tid, "C", json_pack("{s:s}", "by", "C")),
		     200, "%s", e2e_last_body);
	json_t *w = e2e_wait_status(wf, "COMPLETED", DECIDE_TIMEOUT_MS);
	const json_t *rows[4];
	cr_assert_eq(tasks_of(w, "only", rows, 4), 1, "%s", e2e_last_body);
	cr_assert_eq(int_at(rows[0], "attempt"), 0);
	cr_assert_str_eq(e2e_str_at(rows[0], "workerId"), "C");
	cr_assert_eq(int_at(rows[0], "pollCount"), 3);
	json_decref(w);
	json_t *events = history(wf, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_RELEASED"), 2);
	cr_assert_eq(count_type(events, "TASK_STARTED"), 3);
	json_decref(events);
}

Test(leases, an_expired_lease_times_the_attempt_out_and_it_is_retried)
{
	e2e_start(NULL);
	char wf[37];
	json_t *t = leased_task("eq", 1, 1, "A", wf);
	char tid[37];
	snprintf(tid, sizeof(tid), "%s", e2e_str_at(t, "id"));
	cr_assert_eq(int_at(t, "attempt"), 0);
	json_decref(t);

	/* A never answers; the sweeper times attempt 0 out and the decider
	 * schedules attempt 1. */
	json_t *t1 = poll_one("eq", "B", 15000);
	cr_assert_eq(int_at(t1, "attempt"), 1, "%s", e2e_last_body);
	cr_assert_str_neq(e2e_str_at(t1, "id"), tid);
	const char *tp[] = {tid};
	char *st = th_value(e2e_sql(),
			    "SELECT \"status\" FROM \"TaskExecutions\""
			    " WHERE \"id\" = $1::uuid",
			    1, tp);
	cr_assert_str_eq(st, "TIMED_OUT");
	free(st);
	cr_assert_eq(complete("eq", tid, "A", json_object()), 409,
		     "a result after the lease ran out was taken");
	cr_assert_eq(complete("eq", e2e_str_at(t1, "id"), "B",
			      json_pack("{s:i}", "done", 1)),
		     200, "%s", e2e_last_body);
	json_decref(t1);

	json_t *w = e2e_wait_status(wf, "COMPLETED", DECIDE_TIMEOUT_MS);
	const json_t *rows[4];
	cr_assert_eq(tasks_of(w, "only", rows, 4), 2, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[0], "status"), "TIMED_OUT");
	cr_assert(strstr(e2e_str_at(rows[0], "reason"), "A"), "%s",
		  e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rows[1], "status"), "COMPLETED");
	json_decref(w);
	json_t *events = history(wf, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED");
	cr_assert_eq(count_type(events, "TASK_TIMED_OUT"), 1);
	json_decref(events);
}

/* =============================================================== errors */

/* Everything a rejected request must leave as it was. */
static char *
engine_digest(void)
{
	return th_value(
		e2e_sql(),
		"SELECT (SELECT count(*) FROM \"WorkflowExecutions\") || '/' ||"
		" (SELECT count(*) FROM \"TaskExecutions\") || '/' ||"
		" (SELECT count(*) FROM \"TaskQueues\") || '/' ||"
		" (SELECT count(*) FROM \"WorkflowEvents\") || '/' ||"
		" (SELECT count(*) FROM \"IdempotencyKeys\") || '/' ||"
		" (SELECT count(*) FROM \"DecideQueues\") || '|' ||"
		" md5(coalesce((SELECT string_agg(q::text, ',' ORDER BY q.\"id\")"
		"  FROM \"TaskQueues\" q), '') || coalesce((SELECT"
		"  string_agg(t::text, ',' ORDER BY t.\"id\") FROM"
		"  \"TaskExecutions\" t), '') || coalesce((SELECT"
		"  string_agg(e.\"version\" || e.\"status\" || e.\"eventSeq\","
		"  ',' ORDER BY e.\"id\") FROM \"WorkflowExecutions\" e), ''))",
		0, NULL);
}

Test(errors, bad_input_is_4xx_with_a_json_body_and_changes_nothing)
{
	e2e_start(NULL);
	put_task_def("eq", 0, 60);
	put_one_task_workflow("ew", "eq");
	char wf[37];
	e2e_start_workflow("ew", json_pack("{s:i}", "n", 1), wf);
	/* Quiet: the first task queued, nothing left to evaluate. */
	struct sql_probe quiet = {
		"SELECT (SELECT count(*) FROM \"TaskQueues\") -"
		" (SELECT count(*) FROM \"DecideQueues\")",
		1, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, sql_reaches, &quiet));
	char tid[37];
	char *v = th_value(e2e_sql(),
			   "SELECT \"taskId\"::text FROM \"TaskQueues\"", 0,
			   NULL);
	snprintf(tid, sizeof(tid), "%s", v);
	free(v);
	char *before = engine_digest();
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\"", NULL),
		1);
	unchanged_digest = before;

	/* ---- start */
	const char *W = NS "/workflows";
	expect_error("POST", W, "{bad", 400, "bad_json");
	expect_error("POST", W, "", 400, "invalid_argument");
	expect_error("POST", W, "[]", 400, "invalid_argument");
	expect_error("POST", W, "\"ew\"", 400, "invalid_argument");
	expect_invalid("POST", W, "{}", (const char *[]){"$.name", NULL});
	expect_invalid("POST", W, "{\"name\":\"\"}",
		       (const char *[]){"$.name", NULL});
	expect_error("POST", W, "{\"name\":\"nope\"}", 404, "not_found");
	expect_error("POST", W, "{\"name\":\"ew\",\"version\":2}", 404,
		     "not_found");
	expect_invalid(
		"POST", W,
		"{\"name\":5,\"version\":\"1\",\"input\":[1],"
		"\"correlationId\":7,\"idempotencyKey\":{},"
		"\"priority\":\"high\",\"idempotencyStrategy\":\"MAYBE\"}",
		(const char *[]){"$.name", "$.version", "$.input",
				 "$.correlationId", "$.idempotencyKey",
				 "$.priority", "$.idempotencyStrategy", NULL});
	expect_invalid("POST", W, "{\"name\":\"ew\",\"priority\":100}",
		       (const char *[]){"$.priority", NULL});
	expect_invalid("POST", W, "{\"name\":\"ew\",\"priority\":-1}",
		       (const char *[]){"$.priority", NULL});
	expect_invalid("POST", W, "{\"name\":\"ew\",\"priority\":1.5}",
		       (const char *[]){"$.priority", NULL});
	expect_invalid("POST", W, "{\"name\":\"ew\",\"version\":0}",
		       (const char *[]){"$.version", NULL});
	expect_error("POST", "/v1/ns/nope/workflows", "{\"name\":\"ew\"}", 404,
		     "not_found");

	/* ---- reads */
	char path[512];
	expect_error("GET", NS "/workflows/not-a-uuid", NULL, 404, "not_found");
	expect_error("GET", NS "/workflows/not-a-uuid/events", NULL, 404,
		     "not_found");
	expect_error("GET",
		     NS "/workflows/01a22d73-0898-7af6-bf11-7e6f709fd086", NULL,
		     404, "not_found");
	snprintf(path, sizeof(path), "/v1/ns/nope/workflows/%s", wf);
	expect_error("GET", path, NULL, 404, "not_found");
	snprintf(path, sizeof(path), "/v1/ns/nope/workflows/%s/events", wf);
	expect_error("GET", path, NULL, 404, "not_found");
	snprintf(path, sizeof(path), NS "/workflows/%s/events?after=-1", wf);
	expect_error("GET", path, NULL, 400, "invalid_argument");
	snprintf(path, sizeof(path), NS "/workflows/%s/events?limit=0", wf);
	expect_error("GET", path, NULL, 400, "invalid_argument");
	expect_error("GET", "/v1/ns/nope/workflows", NULL, 404, "not_found");
	expect_error("GET", NS "/workflows?status=BOGUS", NULL, 400,
		     "invalid_argument");
	expect_error("GET", NS "/workflows?limit=0", NULL, 400,
		     "invalid_argument");
	expect_error("GET", NS "/workflows?cursor=zzz", NULL, 400,
		     "invalid_argument");

	/* ---- poll */
	const char *P = NS "/queues/eq/poll";
	expect_invalid("POST", P, "{}", (const char *[]){"$.workerId", NULL});
	expect_invalid("POST", P, "{\"count\":1}",
		       (const char *[]){"$.workerId", NULL});
	expect_invalid("POST", P, "{\"workerId\":\"w\",\"count\":0}",
		       (const char *[]){"$.count", NULL});
	expect_invalid("POST", P, "{\"workerId\":\"w\",\"count\":1001}",
		       (const char *[]){"$.count", NULL});
	expect_invalid("POST", P, "{\"workerId\":\"w\",\"count\":\"5\"}",
		       (const char *[]){"$.count", NULL});
	expect_invalid("POST", P, "{\"workerId\":7,\"count\":-3}",
		       (const char *[]){"$.workerId", "$.count", NULL});
	expect_invalid("POST", P, "{\"workerId\":\"w\",\"waitMs\":-1}",
		       (const char *[]){"$.waitMs", NULL});
	expect_error("POST", P, "{\"workerId\":", 400, "bad_json");
	expect_error("POST", P, "", 400, "invalid_argument");
	expect_error("POST", "/v1/ns/nope/queues/eq/poll",
		     "{\"workerId\":\"w\",\"count\":1}", 404, "not_found");

	/* ---- task operations */
	const char *ops[] = {"complete", "fail", "heartbeat", "release",
			     "defer"};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		snprintf(path, sizeof(path), NS "/queues/eq/tasks/nope/%s",
			 ops[i]);
		expect_error("POST", path,
			     "{\"workerId\":\"w\",\"delaySeconds\":1}", 404,
			     "not_found");
		snprintf(path, sizeof(path), NS "/queues/eq/tasks/%s/%s", tid,
			 ops[i]);
		expect_invalid("POST", path, "{\"delaySeconds\":1}",
			       (const char *[]){"$.workerId", NULL});
		expect_error("POST", path, "{\"workerId\"", 400, "bad_json");
		/* Well formed, but nobody holds the lease: 409. */
		expect_error("POST", path,
			     "{\"workerId\":\"w\",\"delaySeconds\":1}", 409,
			     "conflict");
		snprintf(path, sizeof(path),
			 "/v1/ns/nope/queues/eq/tasks/%s/%s", tid, ops[i]);
		expect_error("POST", path,
			     "{\"workerId\":\"w\",\"delaySeconds\":1}", 404,
			     "not_found");
	}
	snprintf(path, sizeof(path), NS "/queues/eq/tasks/%s/complete", tid);
	expect_invalid("POST", path, "{\"workerId\":\"w\",\"output\":[1]}",
		       (const char *[]){"$.output", NULL});
	expect_invalid("POST", path, "{\"workerId\":\"w\",\"reason\":5}",
		       (const char *[]){"$.reason", NULL});
	snprintf(path, sizeof(path), NS "/queues/eq/tasks/%s/fail", tid);
	expect_invalid("POST", path,
		       "{\"workerId\":\"w\",\"terminal\":\"yes\"}",
		       (const char *[]){"$.terminal", NULL});
	snprintf(path, sizeof(path), NS "/queues/eq/tasks/%s/defer", tid);
	expect_invalid("POST", path, "{\"workerId\":\"w\"}",
		       (const char *[]){"$.delaySeconds", NULL});
	expect_invalid("POST", path, "{\"workerId\":\"w\",\"delaySeconds\":-1}",
		       (const char *[]){"$.delaySeconds", NULL});
	expect_invalid("POST", path,
		       "{\"workerId\":\"w\",\"delaySeconds\":\"1\"}",
		       (const char *[]){"$.delaySeconds", NULL});

	/* ---- batched results */
	const char *R = NS "/queues/eq/results";
	expect_invalid("POST", R, "{}", (const char *[]){"$.results", NULL});
	expect_invalid("POST", R, "{\"results\":[]}",
		       (const char *[]){"$.results", NULL});
	expect_invalid("POST", R, "{\"results\":{}}",
		       (const char *[]){"$.results", NULL});
	expect_invalid("POST", R, "{\"results\":[5]}",
		       (const char *[]){"$.results[0]", NULL});
	snprintf(path, sizeof(path),
		 "{\"results\":[{\"taskId\":\"%s\",\"workerId\":\"w\","
		 "\"status\":\"COMPLETED\"},{\"taskId\":\"nope\","
		 "\"workerId\":\"w\",\"status\":\"DONE\"}]}",
		 tid);
	expect_invalid("POST", R, path, (const char *[]){"$.results[1]", NULL});
	expect_error("POST", R, "{\"results\":[", 400, "bad_json");
	expect_error("POST", "/v1/ns/nope/queues/eq/results",
		     "{\"results\":[]}", 404, "not_found");

	unchanged_digest = NULL;
	char *after = engine_digest();
	cr_assert_str_eq(after, before,
			 "a rejected request changed the engine tables");
	free(after);
	free(before);

	/* And the task is still there for a worker. */
	json_t *t = poll_one("eq", "w", DECIDE_TIMEOUT_MS);
	cr_assert_str_eq(e2e_str_at(t, "id"), tid);
	json_decref(t);
}

/* ================================================================ crash */

Test(crash, sigkill_in_the_middle_loses_nothing, .timeout = 240)
{
	enum { N_WF = 300, N_WORKERS = 8 };
	e2e_start(NULL);
	/* A short lease, so tasks leased by a poll whose answer died with
	 * the server come back as a new attempt. */
	put_task_def("cstep", 5, 3);
	e2e_call_ok("POST", NS "/workflow-definitions",
		    "{\"name\":\"crash2\",\"version\":1,\"tasks\":["
		    "{\"name\":\"cstep\",\"taskReferenceName\":\"a\","
		    " \"inputParameters\":{\"n\":\"${workflow.input.n}\"}},"
		    "{\"name\":\"cstep\",\"taskReferenceName\":\"b\","
		    " \"inputParameters\":{\"by\":\"${a.output.by}\"}}]}",
		    201);
	for (int i = 0; i < N_WF; i++) {
		char id[37];
		e2e_start_workflow("crash2", json_pack("{s:i}", "n", i), id);
	}

	struct crowd c;
	struct worker ws[N_WORKERS];
	crowd_start(&c, ws, N_WORKERS, "cstep", 5);
	atomic_store(&c.tolerate_transport, true);

	/* Kill it with a third of the workflows done (a's and b's in
	 * flight). */
	struct sql_probe some = {"SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"status\" = 'COMPLETED'",
				 N_WF / 3, 0};
	bool progressed = th_wait_until(60000, sql_reaches, &some);
	int status = e2e_kill(0);
	if (!progressed)
		crowd_stop(&c, ws, N_WORKERS);
	cr_assert(progressed, "only %lld workflows completed before the kill",
		  some.seen);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "status %d", status);
	long long at_kill =
		e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
			    " WHERE \"status\" = 'COMPLETED'",
			    NULL);

	/* A new server on the same database; the workers carry on. */
	e2e_use(e2e_serve(NULL));
	set_base(e2e_server());
	struct sql_probe done = {"SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"status\" = 'COMPLETED'",
				 N_WF, 0};
	bool all = th_wait_until(60000, sql_reaches, &done);
	crowd_stop(&c, ws, N_WORKERS);
	cr_assert(all,
		  "%lld of %d workflows completed (%lld at the kill); "
		  "server:\n%s",
		  done.seen, N_WF, at_kill, e2e_log());
	cr_assert_lt(at_kill, N_WF, "the kill came after the end");
	cr_log_info("crash: %lld of %d workflows done at the kill; %d "
		    "completions, %d refused (409), %d requests unanswered, "
		    "%lld attempts timed out",
		    at_kill, N_WF, atomic_load(&c.completed),
		    atomic_load(&c.conflicts), atomic_load(&c.transport),
		    e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				" WHERE \"status\" = 'TIMED_OUT'",
				NULL));
	cr_assert_eq(atomic_load(&c.unexpected), 0, "%s", c.first_unexpected);
	char dup[37] = "";
	cr_assert_eq(crowd_duplicates(&c, dup, sizeof(dup)), 0,
		     "task %s was handed out twice", dup);

	/* No task identity twice; one completed attempt per reference. */
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM (SELECT 1 FROM"
				 " \"TaskExecutions\" GROUP BY \"workflowId\","
				 " \"refName\", \"iteration\", \"attempt\""
				 " HAVING count(*) > 1) d",
				 NULL),
		     0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"status\" = 'COMPLETED'",
				 NULL),
		     2 * N_WF);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM (SELECT 1 FROM"
				 " \"TaskExecutions\" WHERE \"status\" ="
				 " 'COMPLETED' GROUP BY \"workflowId\","
				 " \"refName\" HAVING count(*) <> 1) d",
				 NULL),
		     0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"status\" <> 'COMPLETED'",
				 NULL),
		     0);
	/* Every history gap-free, its counter at its end, the last event
	 * WORKFLOW_COMPLETED, started and completed once. */
	cr_assert_eq(
		e2e_sql_int(
			"SELECT count(*) FROM \"WorkflowExecutions\" e"
			" LEFT JOIN (SELECT \"workflowId\", count(*) AS n,"
			"  count(DISTINCT \"seq\") AS d, min(\"seq\") AS lo,"
			"  max(\"seq\") AS hi FROM \"WorkflowEvents\""
			"  GROUP BY \"workflowId\") h"
			" ON h.\"workflowId\" = e.\"id\""
			" WHERE h.n IS NULL OR h.n <> h.d OR h.lo <> 1"
			" OR h.hi <> h.n OR e.\"eventSeq\" <> h.n",
			NULL),
		0);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\" v"
			    " JOIN \"WorkflowExecutions\" e ON e.\"id\" ="
			    " v.\"workflowId\" AND v.\"seq\" = e.\"eventSeq\""
			    " WHERE v.\"type\" = 'WORKFLOW_COMPLETED'",
			    NULL),
		N_WF);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
				 " WHERE \"type\" IN ('WORKFLOW_STARTED',"
				 " 'WORKFLOW_COMPLETED')",
				 NULL),
		     2 * N_WF);
	/* Nothing left behind. */
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\"", NULL),
		     0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"endedAt\" IS NULL OR"
				 " \"deciderSeenAt\" IS NULL",
				 NULL),
		     0);
	free(c.handed);
}
