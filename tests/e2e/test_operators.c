/*
 * End-to-end tests of the operators the decider evaluates itself, on the
 * real nodeflow binary over HTTP with a worker driven by the test:
 *
 *   inline     SET_VARIABLE and NOOP run in the evaluation that schedules
 *              them, a worker task after them sees the variables; the
 *              first evaluation already schedules it.
 *
 * Every test gets its own database and server; the server's output is
 * drained by a thread and kept for failure messages.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	DECIDE_TIMEOUT_MS = 15000,
	LOG_SIZE = 32768,
};

static struct th_db db;
static struct th_server srv_s;
static struct th_server *srv;
static PGconn *sql;
static pthread_t drain;
static bool draining;
static char server_log[LOG_SIZE];
static size_t log_len;

static void *
drain_main(void *arg)
{
	(void)arg;
	char buf[4096];
	for (;;) {
		ssize_t n = read(srv_s.proc.out_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		if (log_len + (size_t)n >= LOG_SIZE) {
			size_t keep = LOG_SIZE / 2;
			memmove(server_log, server_log + log_len - keep, keep);
			log_len = keep;
		}
		if ((size_t)n < LOG_SIZE - 1 - log_len) {
			memcpy(server_log + log_len, buf, (size_t)n);
			log_len += (size_t)n;
		}
		server_log[log_len] = '\0';
	}
	return NULL;
}

static void
cleanup(void)
{
	if (sql) {
		PQfinish(sql);
		sql = NULL;
	}
	if (srv_s.proc.pid > 0) {
		kill(srv_s.proc.pid, SIGKILL);
		waitpid(srv_s.proc.pid, NULL, 0);
		srv_s.proc.pid = 0;
	}
	if (draining) {
		pthread_join(drain, NULL);
		draining = false;
		close(srv_s.proc.out_fd);
	}
	th_db_drop(&db);
}

TestSuite(inline_rows, .fini = cleanup);
TestSuite(switch_op, .fini = cleanup);
TestSuite(fork, .fini = cleanup);
TestSuite(loop, .fini = cleanup);
TestSuite(misc, .fini = cleanup);

static void
start(void)
{
	th_db_clone(&db);
	th_server_start(&srv_s, db.url, NULL);
	srv = &srv_s;
	cr_assert(pthread_create(&drain, NULL, drain_main, NULL) == 0);
	draining = true;
	sql = th_connect(db.url);
}

/* ---------------------------------------------------------- HTTP helpers */

#define MAYBE_UNUSED __attribute__((unused))

static char last_body[65536];

static json_t *
call(const char *method, const char *path, const char *body, long status)
{
	struct th_response r;
	th_http(srv, method, path, body, body ? strlen(body) : 0, &r);
	snprintf(last_body, sizeof(last_body), "%s", r.body);
	cr_assert_eq(r.status, status, "%s %s: %ld, wanted %ld: %s", method,
		     path, r.status, status, r.body);
	json_t *v = NULL;
	if (r.body_len) {
		json_error_t je;
		v = json_loadb(r.body, r.body_len, 0, &je);
		cr_assert_not_null(v, "%s %s: body is not JSON: %s", method,
				   path, r.body);
	}
	th_response_free(&r);
	return v;
}

static json_t *
callj(const char *method, const char *path, long status, json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	json_t *v = call(method, path, text, status);
	free(text);
	return v;
}

static const char *
str_at(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	cr_assert(json_is_string(v), "\"%s\" is not a string: %s", key,
		  last_body);
	return json_string_value(v);
}

MAYBE_UNUSED static long long
int_at(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	cr_assert(json_is_integer(v), "\"%s\" is not an integer: %s", key,
		  last_body);
	return json_integer_value(v);
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

#define NS "/v1/ns/default"

static void
put_task_def(const char *name, int retry_count)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", name);
	json_decref(callj("PUT", path, 201,
			  json_pack("{s:s,s:i,s:s,s:i,s:i}", "name", name,
				    "retryCount", retry_count, "retryLogic",
				    "FIXED", "retryDelaySeconds", 0,
				    "responseTimeoutSeconds", 60)));
}

static void
put_workflow(const char *text)
{
	json_decref(call("POST", NS "/workflow-definitions", text, 201));
}

static void
start_workflow(const char *name, const char *input, char id[37])
{
	char body[8192];
	snprintf(body, sizeof(body), "{\"name\":\"%s\",\"input\":%s}", name,
		 input);
	json_t *v = call("POST", NS "/workflows", body, 201);
	snprintf(id, 37, "%s", str_at(v, "id"));
	json_decref(v);
}

static json_t *
get_workflow(const char *id)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s", id);
	return call("GET", path, NULL, 200);
}

struct poll_probe {
	const char *queue;
	int count;
	json_t *tasks;
};

static bool
polled_something(void *arg)
{
	struct poll_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", p->queue);
	json_t *v = callj(
		"POST", path, 200,
		json_pack("{s:s,s:i}", "workerId", "w1", "count", p->count));
	json_t *tasks = json_object_get(v, "tasks");
	cr_assert(json_is_array(tasks), "poll: %s", last_body);
	if (json_array_size(tasks) == 0) {
		json_decref(v);
		return false;
	}
	p->tasks = json_incref(tasks);
	json_decref(v);
	return true;
}

/* Polls until a task comes: the first task, a new reference. */
static json_t *
poll_one(const char *queue)
{
	struct poll_probe p = {queue, 1, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p),
		  "no task on queue %s: %s", queue, server_log);
	json_t *t = json_incref(json_array_get(p.tasks, 0));
	json_decref(p.tasks);
	return t;
}

/* Polls up to count tasks at once (waiting for at least one). */
MAYBE_UNUSED static json_t *
poll_many(const char *queue, int count)
{
	struct poll_probe p = {queue, count, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p),
		  "no task on queue %s: %s", queue, server_log);
	return p.tasks;
}

static long
task_op(const char *op, const char *queue, const char *task_id, json_t *body)
{
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/%s", queue,
		 task_id, op);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct th_response r;
	th_http(srv, "POST", path, text, strlen(text), &r);
	free(text);
	snprintf(last_body, sizeof(last_body), "%s", r.body);
	long status = r.status;
	th_response_free(&r);
	return status;
}

static void
complete(const char *queue, const json_t *task, json_t *output)
{
	cr_assert_eq(task_op("complete", queue, str_at(task, "id"),
			     json_pack("{s:s,s:o}", "workerId", "w1", "output",
				       output)),
		     200, "%s", last_body);
}

MAYBE_UNUSED static void
fail(const char *queue, const json_t *task, const char *reason)
{
	cr_assert_eq(task_op("fail", queue, str_at(task, "id"),
			     json_pack("{s:s,s:s,s:b}", "workerId", "w1",
				       "reason", reason, "terminal", 1)),
		     200, "%s", last_body);
}

struct status_probe {
	const char *id;
	const char *want;
	char seen[32];
};

static bool
reached_status(void *arg)
{
	struct status_probe *p = arg;
	json_t *v = get_workflow(p->id);
	snprintf(p->seen, sizeof(p->seen), "%s", str_at(v, "status"));
	json_decref(v);
	return strcmp(p->seen, p->want) == 0;
}

static json_t *
wait_status(const char *id, const char *status)
{
	struct status_probe p = {id, status, ""};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS * 4, reached_status, &p),
		  "workflow %s stayed %s, wanted %s: %s", id, p.seen, status,
		  server_log);
	return get_workflow(id);
}

/* The latest task of wf with refName ref (NULL if none). */
static const json_t *
task_of(const json_t *wf, const char *ref)
{
	const json_t *found = NULL;
	size_t i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   ref) == 0)
			found = t;
	}
	return found;
}

MAYBE_UNUSED static size_t
count_ref(const json_t *wf, const char *ref)
{
	size_t n = 0, i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   ref) == 0)
			n++;
	}
	return n;
}

static const char *
status_of(const json_t *wf, const char *ref)
{
	const json_t *t = task_of(wf, ref);
	cr_assert_not_null(t, "no task %s: %s", ref, last_body);
	return str_at(t, "status");
}

static long long
sql_int(const char *q, const char *param)
{
	const char *params[] = {param};
	return th_int(sql, q, param ? 1 : 0, param ? params : NULL);
}

/* ============================================================= inline */

static const char chain_wf[] =
	"{\"name\":\"chain\",\"version\":1,\"tasks\":["
	"{\"name\":\"setv\",\"taskReferenceName\":\"setv\","
	" \"type\":\"SET_VARIABLE\","
	" \"inputParameters\":{\"x\":\"${workflow.input.x}\",\"k\":\"v\"}},"
	"{\"name\":\"nop\",\"taskReferenceName\":\"nop\",\"type\":\"NOOP\"},"
	"{\"name\":\"work\",\"taskReferenceName\":\"work\","
	" \"inputParameters\":{\"x\":\"${workflow.variables.x}\","
	"  \"k\":\"${workflow.variables.k}\"}},"
	"{\"name\":\"nop2\",\"taskReferenceName\":\"nop2\",\"type\":\"NOOP\"}],"
	"\"outputParameters\":{\"vars\":\"${workflow.variables}\","
	" \"w\":\"${work.output.r}\"}}";

Test(inline_rows, operators_chain_in_one_evaluation)
{
	start();
	put_task_def("work", 0);
	put_workflow(chain_wf);
	char id[37];
	start_workflow("chain", "{\"x\":5}", id);
	json_t *t = poll_one("work");
	cr_assert(json_eq_text(json_object_get(t, "input"),
			       "{\"x\":5,\"k\":\"v\"}"),
		  "%s", last_body);
	/* One evaluation wrote SET_VARIABLE, NOOP and the worker task. */
	cr_assert_eq(sql_int("SELECT \"version\" FROM \"WorkflowExecutions\""
			     " WHERE \"id\" = $1::uuid",
			     id),
		     1);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskExecutions\""
			     " WHERE \"workflowId\" = $1::uuid AND"
			     " \"queueName\" IS NULL AND \"deciderSeenAt\""
			     " IS NOT NULL AND \"endedAt\" IS NOT NULL"
			     " AND \"startedAt\" IS NOT NULL",
			     id),
		     2);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskQueues\" q JOIN"
			     " \"TaskExecutions\" t ON t.\"id\" = q.\"taskId\""
			     " WHERE t.\"taskType\" IN ('NOOP','SET_VARIABLE')",
			     NULL),
		     0);
	complete("work", t, json_pack("{s:i}", "r", 9));
	json_decref(t);
	json_t *wf = wait_status(id, "COMPLETED");
	cr_assert(json_eq_text(json_object_get(wf, "output"),
			       "{\"vars\":{\"x\":5,\"k\":\"v\"},\"w\":9}"),
		  "%s", last_body);
	cr_assert_str_eq(status_of(wf, "setv"), "COMPLETED");
	cr_assert_str_eq(status_of(wf, "nop2"), "COMPLETED");
	json_decref(wf);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"DecideQueues\"", NULL), 0);
}
