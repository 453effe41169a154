/*
 * Golden request/response tests of the Conductor-compatible API (/api/...)
 * on the real nodeflow binary over HTTP: for each endpoint its status, its
 * Content-Type (text/plain ids, bare 204s) and the fields of its body in
 * Conductor's shape.
 *
 *   metadata   task definitions (POST a list, PUT one, GET, list, DELETE),
 *              workflow definitions (POST with overwrite, PUT a list, GET
 *              by name and version, list, validate, DELETE); validation
 *              errors in Conductor's error body with their paths.
 *   token      POST /api/token is 404 (no authentication).
 *   start      StartWorkflowRequest and POST /api/workflow/{name}; the id
 *              as text/plain; idempotency RETURN_EXISTING and FAIL; GET
 *              with and without tasks, status, correlated, running.
 *   poll       single poll 204 with no Content-Type, batch [] and a batch
 *              of Conductor Tasks; a long-poll parked until a task comes.
 *   update     POST /api/tasks, update-v2 (the next task, or a bare 204),
 *              IN_PROGRESS back to the queue and with extendLease, FAILED
 *              retried as a new attempt, a finished task's update ignored,
 *              update by reference name, bad TaskResults.
 *   tasks      a task by id, logs, queue sizes.
 *   actions    pause, resume, terminate, restart, retry, skiptask, rerun,
 *              bulk actions with a BulkResponse.
 *   search     query forms, paging, sort, freeText, bad queries.
 *
 * Every test gets its own database and server.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { WAIT_MS = 15000 };

TestSuite(metadata, .init = e2e_setup, .fini = e2e_stop);
TestSuite(token, .init = e2e_setup, .fini = e2e_stop);
TestSuite(start, .init = e2e_setup, .fini = e2e_stop);
TestSuite(poll, .init = e2e_setup, .fini = e2e_stop);
TestSuite(update, .init = e2e_setup, .fini = e2e_stop);
TestSuite(tasks, .init = e2e_setup, .fini = e2e_stop);
TestSuite(actions, .init = e2e_setup, .fini = e2e_stop);
TestSuite(search, .init = e2e_setup, .fini = e2e_stop);

/* ---------------------------------------------------------- HTTP helpers */

struct reply {
	long status;
	char ctype[64];
	char body[32768];
	json_t *json; /* parsed when the body is JSON */
};

/* Sends a request; fills r (r->json parsed when Content-Type is JSON). */
static void
req(const char *method, const char *path, const char *body, struct reply *r)
{
	struct th_response t;
	th_http(e2e_server(), method, path, body, body ? strlen(body) : 0, &t);
	r->status = t.status;
	snprintf(r->ctype, sizeof(r->ctype), "%s", t.content_type);
	snprintf(r->body, sizeof(r->body), "%s", t.body);
	r->json = NULL;
	if (strncmp(t.content_type, "application/json", 16) == 0) {
		r->json = json_loadb(t.body, t.body_len, JSON_DECODE_ANY, NULL);
		cr_assert_not_null(r->json, "%s %s: not JSON: %s", method, path,
				   t.body);
	}
	th_response_free(&t);
}

/* A JSON answer with status; the caller owns the value. */
static json_t *
call(const char *method, const char *path, const char *body, long status)
{
	struct reply r;
	req(method, path, body, &r);
	cr_assert_eq(r.status, status, "%s %s: %ld, wanted %ld: %s", method,
		     path, r.status, status, r.body);
	cr_assert_not_null(r.json, "%s %s: no JSON body (%s): %s", method, path,
			   r.ctype, r.body);
	return r.json;
}

/* An answer with status and no body (and so no Content-Type). */
static void
call_empty(const char *method, const char *path, const char *body, long status)
{
	struct reply r;
	req(method, path, body, &r);
	cr_assert_eq(r.status, status, "%s %s: %ld, wanted %ld: %s", method,
		     path, r.status, status, r.body);
	cr_assert_str_empty(r.body, "%s %s: a body: %s", method, path, r.body);
	cr_assert_str_empty(r.ctype, "%s %s: Content-Type %s", method, path,
			    r.ctype);
	json_decref(r.json);
}

/* A text/plain answer (an id), into out: one that does not fit fails
 * the test rather than being cut. */
static void
call_text(const char *method, const char *path, const char *body, char *out,
	  size_t size)
{
	struct reply r;
	req(method, path, body, &r);
	cr_assert_eq(r.status, 200, "%s %s: %ld: %s", method, path, r.status,
		     r.body);
	cr_assert(strncmp(r.ctype, "text/plain", 10) == 0,
		  "%s %s: Content-Type %s", method, path, r.ctype);
	size_t len = strlen(r.body);
	cr_assert_lt(len, size, "%s %s: an answer of %zu bytes: %.200s", method,
		     path, len, r.body);
	memcpy(out, r.body, len + 1);
}

/* A Conductor error body: status, message containing what. */
static void
call_error(const char *method, const char *path, const char *body, long status,
	   const char *what)
{
	json_t *v = call(method, path, body, status);
	cr_assert_eq(json_integer_value(json_object_get(v, "status")), status,
		     "%s %s: %s", method, path, json_dumps(v, 0));
	const char *msg = json_string_value(json_object_get(v, "message"));
	cr_assert(msg && strstr(msg, what), "%s %s: message %s lacks %s",
		  method, path, msg, what);
	json_decref(v);
}

static const char *
str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

static long long
num(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* ------------------------------------------------------------- fixtures */

/* The bodies of void answers are empty; call() wants JSON, so those go
 * through call_empty. */
static void
define_all(void)
{
	call_empty("POST", "/api/metadata/taskdefs",
		   "[{\"name\":\"c_work\",\"retryCount\":1,"
		   "\"retryDelaySeconds\":0,\"timeoutSeconds\":0,"
		   "\"responseTimeoutSeconds\":600,\"ownerApp\":\"x\"},"
		   "{\"name\":\"c_other\",\"retryCount\":0,"
		   "\"retryDelaySeconds\":0}]",
		   200);
	call_empty("POST", "/api/metadata/workflow?overwrite=true",
		   "{\"name\":\"c_flow\",\"version\":1,\"schemaVersion\":2,"
		   "\"ownerEmail\":\"a@b.c\",\"tasks\":["
		   "{\"name\":\"c_work\",\"taskReferenceName\":\"one\","
		   "\"type\":\"SIMPLE\",\"inputParameters\":"
		   "{\"x\":\"${workflow.input.x}\"}},"
		   "{\"name\":\"c_other\",\"taskReferenceName\":\"two\","
		   "\"type\":\"SIMPLE\",\"inputParameters\":"
		   "{\"y\":\"${one.output.y}\"}}],"
		   "\"outputParameters\":{\"z\":\"${two.output.z}\"}}",
		   200);
}

static void
start_flow(const char *body, char id[64])
{
	call_text("POST", "/api/workflow", body, id, 64);
	cr_assert_eq(strlen(id), 36, "id %s", id);
}

/* Polls type until a task comes (the decider schedules asynchronously). */
#define poll_one(type, worker) poll_one_at(type, worker, __LINE__)
static json_t *
poll_one_at(const char *type, const char *worker, int line)
{
	char path[256];
	snprintf(path, sizeof(path),
		 "/api/tasks/poll/batch/%s?workerid=%s&count=1&timeout=%d",
		 type, worker, WAIT_MS);
	json_t *a = call("GET", path, NULL, 200);
	cr_assert_eq(json_array_size(a), 1, "line %d: %s: %s", line, path,
		     json_dumps(a, 0));
	json_t *t = json_incref(json_array_get(a, 0));
	json_decref(a);
	return t;
}

struct status_wait {
	const char *id;
	const char *status;
};

static bool
has_status(void *arg)
{
	struct status_wait *w = arg;
	char path[128];
	snprintf(path, sizeof(path), "/api/workflow/%s?includeTasks=false",
		 w->id);
	json_t *v = call("GET", path, NULL, 200);
	bool ok = strcmp(str(v, "status"), w->status) == 0;
	json_decref(v);
	return ok;
}

static void
wait_status(const char *id, const char *status)
{
	struct status_wait w = {id, status};
	cr_assert(th_wait_until(WAIT_MS, has_status, &w), "%s never became %s",
		  id, status);
}

static void
result(const json_t *task, const char *path, const char *status,
       const char *extra, char *out, size_t size)
{
	char body[2048];
	snprintf(body, sizeof(body),
		 "{\"taskId\":\"%s\",\"workflowInstanceId\":\"%s\","
		 "\"status\":\"%s\",\"workerId\":\"w1\"%s%s}",
		 str(task, "taskId"), str(task, "workflowInstanceId"), status,
		 extra ? "," : "", extra ? extra : "");
	call_text("POST", path, body, out, size);
}

/* ------------------------------------------------------------- metadata */

Test(metadata, task_and_workflow_definitions)
{
	define_all();
	json_t *d = call("GET", "/api/metadata/taskdefs/c_work", NULL, 200);
	cr_assert_str_eq(str(d, "name"), "c_work");
	cr_assert_eq(num(d, "retryCount"), 1);
	cr_assert_eq(num(d, "responseTimeoutSeconds"), 600);
	cr_assert_null(json_object_get(d, "ownerApp"));
	json_decref(d);
	call_empty("PUT", "/api/metadata/taskdefs",
		   "{\"name\":\"c_work\",\"retryCount\":2}", 200);
	d = call("GET", "/api/metadata/taskdefs/c_work", NULL, 200);
	cr_assert_eq(num(d, "retryCount"), 2);
	json_decref(d);
	d = call("GET", "/api/metadata/taskdefs", NULL, 200);
	cr_assert(json_is_array(d) && json_array_size(d) == 2);
	json_decref(d);

	/* Every problem, with its path in the list. */
	json_t *e = call("POST", "/api/metadata/taskdefs",
			 "[{\"name\":\"ok\"},{\"retryCount\":-1}]", 400);
	json_t *ve = json_object_get(e, "validationErrors");
	cr_assert(json_array_size(ve) >= 1, "%s", json_dumps(e, 0));
	cr_assert(strncmp(str(json_array_get(ve, 0), "path"), "$[1]", 4) == 0,
		  "%s", json_dumps(e, 0));
	json_decref(e);
	call_error("GET", "/api/metadata/taskdefs/ok", NULL, 404, "ok");

	d = call("GET", "/api/metadata/workflow/c_flow", NULL, 200);
	cr_assert_str_eq(str(d, "name"), "c_flow");
	cr_assert_eq(num(d, "version"), 1);
	cr_assert_eq(json_array_size(json_object_get(d, "tasks")), 2);
	json_decref(d);
	call_error("POST", "/api/metadata/workflow",
		   "{\"name\":\"c_flow\",\"version\":1,\"tasks\":[{\"name\":"
		   "\"c_work\",\"taskReferenceName\":\"a\"}]}",
		   409, "c_flow");
	call_empty("PUT", "/api/metadata/workflow",
		   "[{\"name\":\"c_flow\",\"version\":2,\"tasks\":[{\"name\":"
		   "\"c_work\",\"taskReferenceName\":\"a\"}]}]",
		   200);
	d = call("GET", "/api/metadata/workflow/c_flow", NULL, 200);
	cr_assert_eq(num(d, "version"), 2);
	json_decref(d);
	d = call("GET", "/api/metadata/workflow/c_flow?version=1", NULL, 200);
	cr_assert_eq(num(d, "version"), 1);
	json_decref(d);
	d = call("GET", "/api/metadata/workflow", NULL, 200);
	cr_assert_eq(json_array_size(d), 2);
	json_decref(d);

	call_empty("POST", "/api/metadata/workflow/validate",
		   "{\"name\":\"v\",\"tasks\":[{\"name\":\"c_work\","
		   "\"taskReferenceName\":\"a\"}]}",
		   200);
	e = call("POST", "/api/metadata/workflow/validate",
		 "{\"name\":\"v\",\"tasks\":[{\"name\":\"nope\","
		 "\"taskReferenceName\":\"a\"},{\"name\":\"c_work\"}]}",
		 400);
	cr_assert(json_array_size(json_object_get(e, "validationErrors")) >= 2,
		  "%s", json_dumps(e, 0));
	json_decref(e);
	call_error("GET", "/api/metadata/workflow/v", NULL, 404, "v");

	call_empty("DELETE", "/api/metadata/workflow/c_flow/2", NULL, 200);
	d = call("GET", "/api/metadata/workflow/c_flow", NULL, 200);
	cr_assert_eq(num(d, "version"), 1);
	json_decref(d);
	call_error("DELETE", "/api/metadata/workflow/c_flow/x", NULL, 400,
		   "version");
	call_empty("DELETE", "/api/metadata/taskdefs/c_other", NULL, 200);
	call_error("GET", "/api/metadata/taskdefs/c_other", NULL, 404,
		   "c_other");
	call_error("POST", "/api/metadata/taskdefs", "{\"name\":\"x\"}", 400,
		   "array");
	call_error("POST", "/api/metadata/taskdefs", "[{", 400, "");
}

/* ---------------------------------------------------------------- token */

Test(token, is_not_found)
{
	call_error("POST", "/api/token",
		   "{\"keyId\":\"a\",\"keySecret\":\"b\"}", 404,
		   "authentication");
}

/* ---------------------------------------------------------------- start */

Test(start, start_get_status_correlated_running)
{
	define_all();
	char id[64], id2[64], same[64];
	start_flow("{\"name\":\"c_flow\",\"version\":1,\"input\":{\"x\":7},"
		   "\"correlationId\":\"corr-1\",\"priority\":5,"
		   "\"idempotencyKey\":\"k1\",\"idempotencyStrategy\":"
		   "\"RETURN_EXISTING\",\"createdBy\":null,\"unknown\":1}",
		   id);
	start_flow("{\"name\":\"c_flow\",\"idempotencyKey\":\"k1\","
		   "\"idempotencyStrategy\":\"RETURN_EXISTING\"}",
		   same);
	cr_assert_str_eq(same, id);
	call_error("POST", "/api/workflow",
		   "{\"name\":\"c_flow\",\"idempotencyKey\":\"k1\"}", 409,
		   "k1");
	call_error("POST", "/api/workflow",
		   "{\"name\":\"c_flow\",\"idempotencyKey\":\"k2\","
		   "\"idempotencyStrategy\":\"FAIL_ON_RUNNING\"}",
		   400, "idempotencyStrategy");
	call_error("POST", "/api/workflow", "{\"name\":\"nope\"}", 404, "nope");
	call_error("POST", "/api/workflow", "{\"version\":1}", 400, "$.name");
	call_text("POST", "/api/workflow/c_flow?correlationId=corr-1",
		  "{\"x\":8}", id2, sizeof(id2));
	cr_assert_eq(strlen(id2), 36);

	/* Both are queued; take them until the first one's comes. */
	json_t *t = poll_one("c_work", "w1");
	if (strcmp(str(t, "workflowInstanceId"), id) != 0) {
		json_decref(t);
		t = poll_one("c_work", "w1");
	}
	cr_assert_str_eq(str(t, "workflowInstanceId"), id);

	char path[256];
	snprintf(path, sizeof(path), "/api/workflow/%s", id);
	json_t *w = call("GET", path, NULL, 200);
	cr_assert_str_eq(str(w, "workflowId"), id);
	cr_assert_str_eq(str(w, "workflowName"), "c_flow");
	cr_assert_eq(num(w, "workflowVersion"), 1);
	cr_assert_str_eq(str(w, "status"), "RUNNING");
	cr_assert_str_eq(str(w, "correlationId"), "corr-1");
	cr_assert_eq(num(w, "priority"), 5);
	cr_assert_eq(num(json_object_get(w, "input"), "x"), 7);
	cr_assert_gt(num(w, "startTime"), 1000000000000LL);
	cr_assert_eq(num(w, "endTime"), 0);
	json_t *tasks = json_object_get(w, "tasks");
	cr_assert_eq(json_array_size(tasks), 1, "%s", json_dumps(w, 0));
	json_t *t0 = json_array_get(tasks, 0);
	cr_assert_str_eq(str(t0, "referenceTaskName"), "one");
	cr_assert_str_eq(str(t0, "taskType"), "c_work");
	cr_assert_str_eq(str(t0, "status"), "IN_PROGRESS");
	cr_assert_eq(num(t0, "seq"), 1);
	cr_assert_eq(num(t0, "retryCount"), 0);
	cr_assert_eq(num(t0, "pollCount"), 1);
	cr_assert_str_eq(str(t0, "workerId"), "w1");
	cr_assert_eq(num(json_object_get(t0, "inputData"), "x"), 7);
	json_decref(w);

	snprintf(path, sizeof(path), "/api/workflow/%s?includeTasks=false", id);
	w = call("GET", path, NULL, 200);
	cr_assert_null(json_object_get(w, "tasks"));
	json_decref(w);
	snprintf(path, sizeof(path),
		 "/api/workflow/%s/status?includeOutput=true", id);
	w = call("GET", path, NULL, 200);
	cr_assert_str_eq(str(w, "status"), "RUNNING");
	cr_assert_str_eq(str(w, "workflowId"), id);
	cr_assert_not_null(json_object_get(w, "output"));
	cr_assert_null(json_object_get(w, "variables"));
	json_decref(w);
	call_error("GET", "/api/workflow/01a22e22-07e9-7c30-a58c-84b823886953",
		   NULL, 404, "not found");
	call_error("GET", "/api/workflow/nope", NULL, 404, "nope");
	call_error("GET", "/api/workflow/nope?includeTasks=x", NULL, 404,
		   "nope");

	w = call("GET", "/api/workflow/c_flow/correlated/corr-1", NULL, 200);
	cr_assert_eq(json_array_size(w), 2, "%s", json_dumps(w, 0));
	cr_assert_null(json_object_get(json_array_get(w, 0), "tasks"));
	json_decref(w);
	w = call("POST", "/api/workflow/c_flow/correlated?includeTasks=true",
		 "[\"corr-1\",\"corr-2\"]", 200);
	cr_assert_eq(json_array_size(json_object_get(w, "corr-1")), 2);
	cr_assert_eq(json_array_size(json_object_get(w, "corr-2")), 0);
	json_decref(w);
	w = call("GET", "/api/workflow/running/c_flow", NULL, 200);
	cr_assert_eq(json_array_size(w), 2);
	json_decref(w);
	w = call("GET", "/api/workflow/running/c_flow?version=9", NULL, 200);
	cr_assert_eq(json_array_size(w), 0);
	json_decref(w);
	json_decref(t);
}

/* ----------------------------------------------------------------- poll */

struct long_poll {
	json_t *answer;
};

static void *
long_poll_main(void *arg)
{
	struct long_poll *lp = arg;
	struct th_response r;
	char path[128];
	snprintf(path, sizeof(path),
		 "/api/tasks/poll/batch/c_work?workerid=lp&count=3&timeout=%d",
		 WAIT_MS);
	th_http(e2e_server(), "GET", path, NULL, 0, &r);
	lp->answer = json_loadb(r.body, r.body_len, 0, NULL);
	th_response_free(&r);
	return NULL;
}

Test(poll, single_batch_and_long_poll)
{
	define_all();
	call_empty("GET", "/api/tasks/poll/c_work?workerid=w1", NULL, 204);
	json_t *a = call("GET", "/api/tasks/poll/batch/c_work?timeout=0", NULL,
			 200);
	cr_assert(json_is_array(a) && json_array_size(a) == 0);
	json_decref(a);
	call_error("GET", "/api/tasks/poll/batch/c_work?count=0", NULL, 400,
		   "count");
	call_error("GET", "/api/tasks/poll/batch/c_work?timeout=x", NULL, 400,
		   "timeout");

	/* A parked batch poll is answered when the task is scheduled. */
	struct long_poll lp = {0};
	pthread_t th;
	cr_assert(pthread_create(&th, NULL, long_poll_main, &lp) == 0);
	char id[64];
	start_flow("{\"name\":\"c_flow\",\"input\":{\"x\":1}}", id);
	pthread_join(th, NULL);
	cr_assert_eq(json_array_size(lp.answer), 1);
	json_t *t = json_array_get(lp.answer, 0);
	cr_assert_str_eq(str(t, "workflowInstanceId"), id);
	cr_assert_str_eq(str(t, "status"), "IN_PROGRESS");
	cr_assert_str_eq(str(t, "workerId"), "lp");
	cr_assert_str_eq(str(t, "taskDefName"), "c_work");
	cr_assert_str_eq(str(t, "workflowType"), "c_flow");
	cr_assert_eq(num(t, "pollCount"), 1);
	cr_assert_eq(strlen(str(t, "taskId")), 36);
	json_decref(lp.answer);

	/* The single poll answers one Task object. */
	start_flow("{\"name\":\"c_flow\",\"input\":{\"x\":2}}", id);
	struct th_response r;
	json_t *one = NULL;
	int64_t until = th_now_ms() + WAIT_MS;
	while (!one && th_now_ms() < until) {
		th_http(e2e_server(), "GET",
			"/api/tasks/poll/c_work?workerid=w2", NULL, 0, &r);
		if (r.status == 200)
			one = json_loadb(r.body, r.body_len, 0, NULL);
		else
			cr_assert_eq(r.status, 204);
		th_response_free(&r);
	}
	cr_assert(json_is_object(one));
	cr_assert_eq(num(json_object_get(one, "inputData"), "x"), 2);
	json_decref(one);
}

/* --------------------------------------------------------------- update */

Test(update, results_v2_in_progress_failed_and_by_ref)
{
	define_all();
	char id[64], out[128];
	start_flow("{\"name\":\"c_flow\",\"input\":{\"x\":1}}", id);
	json_t *t = poll_one("c_work", "w1");

	/* IN_PROGRESS: with extendLease the lease is renewed; without it the
	 * task goes back to its queue. */
	result(t, "/api/tasks", "IN_PROGRESS",
	       "\"extendLease\":true,\"outputData\":{\"progress\":50}", out,
	       sizeof(out));
	cr_assert_str_eq(out, str(t, "taskId"));
	char tpath[128];
	snprintf(tpath, sizeof(tpath), "/api/tasks/%s", str(t, "taskId"));
	json_t *progress = call("GET", tpath, NULL, 200);
	cr_assert_str_eq(str(progress, "status"), "IN_PROGRESS");
	cr_assert_eq(num(json_object_get(progress, "outputData"), "progress"),
		     50);
	json_decref(progress);
	result(t, "/api/tasks", "IN_PROGRESS", "\"callbackAfterSeconds\":0",
	       out, sizeof(out));
	json_decref(t);
	t = poll_one("c_work", "w1");
	cr_assert_eq(num(t, "pollCount"), 2);

	/* FAILED: retried as a new attempt. */
	result(t, "/api/tasks", "FAILED",
	       "\"reasonForIncompletion\":\"boom\",\"outputData\":null,"
	       "\"logs\":[{\"log\":\"went wrong\",\"createdTime\":5}]",
	       out, sizeof(out));
	json_t *t2 = poll_one("c_work", "w1");
	cr_assert_eq(num(t2, "retryCount"), 1);
	cr_assert_str_neq(str(t2, "taskId"), str(t, "taskId"));
	/* A finished task's update is ignored, and still answered. */
	result(t, "/api/tasks", "COMPLETED", NULL, out, sizeof(out));

	/* update-v2: the next task of the type, or a bare 204. */
	char id2[64];
	start_flow("{\"name\":\"c_flow\",\"input\":{\"x\":2}}", id2);
	/* Wait until the second workflow's task is queued. */
	int64_t until = th_now_ms() + WAIT_MS;
	long long queued = 0;
	while (queued == 0 && th_now_ms() < until) {
		json_t *n = call("GET", "/api/tasks/queue/size?taskType=c_work",
				 NULL, 200);
		queued = json_integer_value(n);
		json_decref(n);
	}
	cr_assert_eq(queued, 1);
	char body[1024];
	snprintf(body, sizeof(body),
		 "{\"taskId\":\"%s\",\"workflowInstanceId\":\"%s\","
		 "\"status\":\"COMPLETED\",\"outputData\":{\"y\":\"Y\"},"
		 "\"workerId\":\"w1\"}",
		 str(t2, "taskId"), id);
	json_t *next = call("POST", "/api/tasks/update-v2", body, 200);
	cr_assert_str_eq(str(next, "workflowInstanceId"), id2);
	cr_assert_str_eq(str(next, "status"), "IN_PROGRESS");
	snprintf(body, sizeof(body),
		 "{\"taskId\":\"%s\",\"workflowInstanceId\":\"%s\","
		 "\"status\":\"COMPLETED\",\"outputData\":{\"y\":\"Y2\"}}",
		 str(next, "taskId"), id2);
	json_decref(next);
	/* The other type's task is next; none of c_work waits. */
	call_empty("POST", "/api/tasks/update-v2", body, 204);

	/* By reference name, without a poll. */
	/* Its task "two" exists once polled (the other workflow's may come
	 * first). */
	json_t *two = poll_one("c_other", "w9");
	if (strcmp(str(two, "workflowInstanceId"), id) != 0) {
		json_decref(two);
		two = poll_one("c_other", "w9");
	}
	cr_assert_str_eq(str(two, "workflowInstanceId"), id);
	char path[256];
	snprintf(path, sizeof(path), "/api/tasks/%s/two/COMPLETED?workerid=x",
		 id);
	call_text("POST", path, "{\"z\":\"done\"}", out, sizeof(out));
	wait_status(id, "COMPLETED");
	snprintf(path, sizeof(path), "/api/workflow/%s", id);
	json_t *w = call("GET", path, NULL, 200);
	cr_assert_str_eq(str(json_object_get(w, "output"), "z"), "done");
	json_t *tasks = json_object_get(w, "tasks");
	cr_assert_eq(json_array_size(tasks), 3, "%s", json_dumps(w, 0));
	json_t *failed = json_array_get(tasks, 0);
	cr_assert_str_eq(str(failed, "status"), "FAILED");
	cr_assert_str_eq(str(failed, "reasonForIncompletion"), "boom");
	cr_assert(json_is_true(json_object_get(failed, "retried")));
	cr_assert_eq(num(json_array_get(tasks, 2), "seq"), 3);
	cr_assert_gt(num(w, "endTime"), 0);
	json_decref(w);
	snprintf(path, sizeof(path), "/api/tasks/%s/two/RUNNING", id);
	call_error("POST", path, "{}", 400, "status");

	/* Bad TaskResults. */
	call_error("POST", "/api/tasks", "{\"status\":\"COMPLETED\"}", 400,
		   "$.taskId");
	call_error("POST", "/api/tasks",
		   "{\"taskId\":\"x\",\"status\":\"DONE\"}", 400, "$.taskId");
	call_error("POST", "/api/tasks",
		   "{\"taskId\":\"01a22e22-08ab-7000-a156-fe21abafbe5d\","
		   "\"status\":\"COMPLETED\"}",
		   404, "not found");
	call_error("POST", "/api/tasks", "", 400, "TaskResult");
	call_error("POST", "/api/tasks/update-v2", "[1]", 400, "TaskResult");
	json_decref(two);
	json_decref(t);
	json_decref(t2);
}

/* ---------------------------------------------------------------- tasks */

Test(tasks, by_id_logs_and_queue_sizes)
{
	define_all();
	char id[64];
	start_flow("{\"name\":\"c_flow\",\"input\":{\"x\":1}}", id);
	start_flow("{\"name\":\"c_flow\",\"input\":{\"x\":2}}", id);
	json_t *t = poll_one("c_work", "w1");
	char path[256];
	snprintf(path, sizeof(path), "/api/tasks/%s", str(t, "taskId"));
	json_t *g = call("GET", path, NULL, 200);
	cr_assert_str_eq(str(g, "taskId"), str(t, "taskId"));
	cr_assert_str_eq(str(g, "referenceTaskName"), "one");
	cr_assert_str_eq(str(g, "status"), "IN_PROGRESS");
	json_decref(g);
	call_error("GET", "/api/tasks/01a22e22-08ab-7000-a156-fe21abafbe5d",
		   NULL, 404, "not found");

	snprintf(path, sizeof(path), "/api/tasks/%s/log", str(t, "taskId"));
	call_empty("POST", path, "\"first line\"", 200);
	call_empty("POST", path, "second line", 200);
	json_t *logs = call("GET", path, NULL, 200);
	cr_assert_eq(json_array_size(logs), 2, "%s", json_dumps(logs, 0));
	cr_assert_str_eq(str(json_array_get(logs, 0), "log"), "first line");
	cr_assert_str_eq(str(json_array_get(logs, 1), "taskId"),
			 str(t, "taskId"));
	json_decref(logs);

	json_t *n =
		call("GET", "/api/tasks/queue/size?taskType=c_work", NULL, 200);
	cr_assert_eq(json_integer_value(n), 1);
	json_decref(n);
	n = call("GET",
		 "/api/tasks/queue/sizes?taskType=c_work&taskType=c_other",
		 NULL, 200);
	cr_assert_eq(num(n, "c_work"), 1);
	cr_assert_eq(num(n, "c_other"), 0);
	json_decref(n);
	call_error("GET", "/api/tasks/queue/size", NULL, 400, "taskType");
	json_decref(t);
}

/* -------------------------------------------------------------- actions */

Test(actions, operator_actions_and_bulk)
{
	define_all();
	char id[64], path[256], out[64];
	start_flow("{\"name\":\"c_flow\",\"input\":{\"x\":1}}", id);
	/* Paused once its first task is out (a pause before the first
	 * decision is another matter: docs/conductor.md). */
	json_t *t = poll_one("c_work", "w1");
	snprintf(path, sizeof(path), "/api/workflow/%s/pause", id);
	call_empty("PUT", path, NULL, 200);
	wait_status(id, "PAUSED");
	call_error("PUT", path, NULL, 409, "");
	snprintf(path, sizeof(path), "/api/workflow/%s/resume", id);
	call_empty("PUT", path, NULL, 200);
	wait_status(id, "RUNNING");

	snprintf(path, sizeof(path), "/api/workflow/%s/skiptask/two", id);
	call_error("PUT", path, NULL, 409, "");
	json_decref(t);

	snprintf(path, sizeof(path), "/api/workflow/%s?reason=enough", id);
	call_empty("DELETE", path, NULL, 200);
	wait_status(id, "TERMINATED");
	snprintf(path, sizeof(path), "/api/workflow/%s/restart", id);
	call_empty("POST", path, NULL, 204);
	wait_status(id, "RUNNING");

	/* Fail it (c_work allows one retry), then retry it. */
	for (int i = 0; i < 2; i++) {
		t = poll_one("c_work", "w1");
		result(t, "/api/tasks", "FAILED", NULL, out, sizeof(out));
		json_decref(t);
	}
	wait_status(id, "FAILED");
	snprintf(path, sizeof(path), "/api/workflow/%s/retry", id);
	call_empty("POST", path, NULL, 204);
	wait_status(id, "RUNNING");
	t = poll_one("c_work", "w1");
	result(t, "/api/tasks", "COMPLETED", "\"outputData\":{\"y\":1}", out,
	       sizeof(out));
	json_t *two = poll_one("c_other", "w1");
	result(two, "/api/tasks", "COMPLETED", "\"outputData\":{\"z\":1}", out,
	       sizeof(out));
	wait_status(id, "COMPLETED");

	/* Rerun from the second task. */
	char body[512];
	snprintf(body, sizeof(body),
		 "{\"reRunFromTaskId\":\"%s\",\"taskInput\":{\"y\":\"again\"}}",
		 str(two, "taskId"));
	snprintf(path, sizeof(path), "/api/workflow/%s/rerun", id);
	call_text("POST", path, body, out, sizeof(out));
	cr_assert_str_eq(out, id);
	wait_status(id, "RUNNING");
	json_t *again = poll_one("c_other", "w1");
	cr_assert_str_eq(str(json_object_get(again, "inputData"), "y"),
			 "again");
	json_decref(again);
	json_decref(two);
	json_decref(t);
	snprintf(path, sizeof(path), "/api/workflow/%s/frobnicate", id);
	call_error("POST", path, NULL, 404, "frobnicate");

	/* Bulk: one success, one unknown. */
	snprintf(body, sizeof(body),
		 "[\"%s\",\"01a22e22-07e9-7c30-a58c-84b823886953\",\"x\"]", id);
	json_t *b = call("PUT", "/api/workflow/bulk/pause", body, 200);
	cr_assert_eq(
		json_array_size(json_object_get(b, "bulkSuccessfulResults")), 1,
		"%s", json_dumps(b, 0));
	cr_assert_eq(json_object_size(json_object_get(b, "bulkErrorResults")),
		     2, "%s", json_dumps(b, 0));
	json_decref(b);
	b = call("PUT", "/api/workflow/bulk/resume", body, 200);
	cr_assert_eq(
		json_array_size(json_object_get(b, "bulkSuccessfulResults")),
		1);
	json_decref(b);
	b = call("POST", "/api/workflow/bulk/terminate?reason=bulk", body, 200);
	cr_assert_eq(
		json_array_size(json_object_get(b, "bulkSuccessfulResults")),
		1);
	json_decref(b);
	wait_status(id, "TERMINATED");
	call_error("POST", "/api/workflow/bulk/pause", "[]", 404, "pause");
	call_error("PUT", "/api/workflow/bulk/pause", "{}", 400, "array");
}

/* --------------------------------------------------------------- search */

Test(search, query_forms_paging_sort_free_text)
{
	define_all();
	char ids[3][64];
	for (int i = 0; i < 3; i++) {
		char body[256];
		snprintf(body, sizeof(body),
			 "{\"name\":\"c_flow\",\"input\":{\"x\":\"needle%d\"},"
			 "\"correlationId\":\"s-%d\"}",
			 i, i);
		start_flow(body, ids[i]);
	}
	json_t *r = call("GET",
			 "/api/workflow/search?query=workflowType%20%3D%20"
			 "%27c_flow%27%20AND%20status%20IN%20(RUNNING,PAUSED)",
			 NULL, 200);
	cr_assert_eq(num(r, "totalHits"), 3, "%s", json_dumps(r, 0));
	json_t *first = json_array_get(json_object_get(r, "results"), 0);
	cr_assert_str_eq(str(first, "workflowId"), ids[2]);
	cr_assert_str_eq(str(first, "workflowType"), "c_flow");
	cr_assert_eq(num(first, "version"), 1);
	cr_assert(strchr(str(first, "startTime"), 'T'));
	cr_assert(strstr(str(first, "input"), "needle2"));
	json_decref(r);

	r = call("GET",
		 "/api/workflow/search?start=1&size=1&sort=startTime:ASC", NULL,
		 200);
	cr_assert_eq(num(r, "totalHits"), 3);
	cr_assert_eq(json_array_size(json_object_get(r, "results")), 1);
	cr_assert_str_eq(str(json_array_get(json_object_get(r, "results"), 0),
			     "correlationId"),
			 "s-1");
	json_decref(r);

	r = call("GET", "/api/workflow/search?freeText=needle1", NULL, 200);
	cr_assert_eq(num(r, "totalHits"), 1);
	json_decref(r);
	r = call("GET",
		 "/api/workflow/search?freeText=*&query=status%3DCOMPLETED",
		 NULL, 200);
	cr_assert_eq(num(r, "totalHits"), 0);
	json_decref(r);
	r = call("GET",
		 "/api/workflow/search?query=startTime%20%3E%204102444800000",
		 NULL, 200);
	cr_assert_eq(num(r, "totalHits"), 0);
	json_decref(r);
	r = call("GET", "/api/workflow/search?query=startTime%20%3E%201", NULL,
		 200);
	cr_assert_eq(num(r, "totalHits"), 3);
	json_decref(r);
	r = call("GET", "/api/workflow/search?query=correlationId%3D%27s-0%27",
		 NULL, 200);
	cr_assert_eq(num(r, "totalHits"), 1);
	json_decref(r);

	call_error("GET", "/api/workflow/search?query=status%20IN%20(NOPE)",
		   NULL, 400, "status IN");
	call_error("GET", "/api/workflow/search?query=owner%3D1", NULL, 400,
		   "owner");
	call_error("GET", "/api/workflow/search?sort=endTime:ASC", NULL, 400,
		   "sort");
	call_error("GET", "/api/workflow/search?size=-1", NULL, 400, "size");
}
