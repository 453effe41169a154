/*
 * End-to-end tests of task logs ("TaskLogs") on the real nodeflow binary
 * over HTTP.
 *
 *   native     POST /v1/ns/{ns}/tasks/{taskId}/logs one line ({"log"}) and
 *              several ({"logs"}, strings or {log, createdTime}); GET reads
 *              them back in order, numbered 1.., paged with after/limit;
 *              a worker's complete and a batch of results carry `logs`.
 *   limits     a line past --task-log-max-bytes is 413, a task past
 *              --task-logs-max-per-task 409, and neither keeps anything;
 *              bad shapes 400 naming the field; unknown tasks and
 *              namespaces 404.
 *   conductor  POST /api/tasks/{taskId}/log with a plain-text body, GET
 *              /api/tasks/{taskId}/log as [{log, taskId, createdTime}],
 *              a TaskResult's `logs` appended, the same limits.
 *   storage    the lines live in a monthly partition, never in DEFAULT,
 *              and the partition manager keeps TaskLogs' months ahead.
 *
 * Every test gets its own database and server.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WAIT_MS = 15000 };

#define NS E2E_NS

TestSuite(native, .fini = e2e_stop);
TestSuite(limits, .fini = e2e_stop);
TestSuite(conductor, .fini = e2e_stop);
TestSuite(storage, .fini = e2e_stop);

/* Small limits so that the tests reach them: 64-byte lines, 5 a task. */
static const char *const small[] = {"--task-log-max-bytes", "64",
				    "--task-logs-max-per-task", "5", NULL};

/* ---------------------------------------------------------- HTTP helpers */

/* An error answer of status whose message contains `says`. */
static void
refused(const char *method, const char *path, const char *body, long status,
	const char *says)
{
	json_t *v = e2e_call(method, path, body, status);
	json_t *err = json_object_get(v, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));
	char *all = json_dumps(v, JSON_COMPACT);
	cr_assert(msg && strstr(all, says), "%s %s: wanted \"%s\" in %s",
		  method, path, says, all);
	free(all);
	json_decref(v);
}

static const char *
str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	cr_assert_not_null(s, "no string %s", k);
	return s;
}

/* Registers task "work" and workflow "wf" (one "work" task), starts n
 * runs and leases their tasks as worker w1; ids_out gets the task ids. */
static void
leased_tasks(int n, char ids_out[][37])
{
	e2e_call_ok("PUT", NS "/task-definitions/work",
		    "{\"name\":\"work\",\"retryCount\":0,"
		    "\"responseTimeoutSeconds\":600}",
		    201);
	e2e_call_ok(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"wf\",\"version\":1,\"tasks\":[{\"name\":\"work\","
		"\"taskReferenceName\":\"w\",\"type\":\"SIMPLE\"}]}",
		201);
	for (int i = 0; i < n; i++)
		e2e_call_ok("POST", NS "/workflows", "{\"name\":\"wf\"}", 201);
	int got = 0;
	int64_t end = th_now_ms() + WAIT_MS;
	while (got < n && th_now_ms() < end) {
		json_t *p = e2e_call("POST", NS "/queues/work/poll",
				     "{\"workerId\":\"w1\",\"count\":10,"
				     "\"waitMs\":1000}",
				     200);
		json_t *t;
		size_t i;
		json_array_foreach (json_object_get(p, "tasks"), i, t) {
			snprintf(ids_out[got++], 37, "%s", str(t, "id"));
		}
		json_decref(p);
	}
	cr_assert_eq(got, n, "leased %d of %d tasks", got, n);
}

static json_t *
logs_of(const char *task, const char *query)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/tasks/%s/logs%s", task, query);
	json_t *v = e2e_call("GET", path, NULL, 200);
	cr_assert_str_eq(str(v, "taskId"), task);
	return v;
}

/* The lines of a task's logs, in the order answered, as one string
 * "a|b|c", checking that seq runs 1, 2, 3… */
static char *
lines_of(const char *task)
{
	json_t *v = logs_of(task, "");
	static char out[4096];
	out[0] = '\0';
	json_t *l;
	size_t i;
	json_array_foreach (json_object_get(v, "items"), i, l) {
		cr_assert_eq(json_integer_value(json_object_get(l, "seq")),
			     (json_int_t)i + 1, "seq of line %zu", i);
		cr_assert_str_eq(str(l, "taskId"), task);
		cr_assert(json_is_string(json_object_get(l, "createdAt")));
		cr_assert(json_is_integer(json_object_get(l, "createdTime")));
		if (i)
			strcat(out, "|");
		strncat(out, str(l, "log"), sizeof(out) - strlen(out) - 2);
	}
	json_decref(v);
	return out;
}

static void
post_logs(const char *task, const char *body, long status)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/tasks/%s/logs", task);
	e2e_call_ok("POST", path, body, status);
}

/* ---------------------------------------------------------------- native */

Test(native, append_and_read_in_order)
{
	e2e_start(NULL);
	char ids[2][37];
	leased_tasks(2, ids);
	const char *t = ids[0];

	char path[256];
	snprintf(path, sizeof(path), NS "/tasks/%s/logs", t);
	json_t *v = e2e_call("POST", path, "{\"log\":\"starting\"}", 201);
	cr_assert_eq(json_integer_value(json_object_get(v, "appended")), 1);
	cr_assert_eq(json_integer_value(json_object_get(v, "count")), 1);
	json_decref(v);
	v = e2e_call(
		"POST", path,
		"{\"logs\":[\"step 1\",{\"log\":\"step 2\",\"createdTime\":"
		"1700000000000},{\"log\":\"caf\\u00e9 \\u00001\"}]}",
		201);
	cr_assert_eq(json_integer_value(json_object_get(v, "appended")), 3);
	cr_assert_eq(json_integer_value(json_object_get(v, "count")), 4);
	json_decref(v);
	/* A NUL cannot be stored: it is dropped, the line kept. */
	cr_assert_str_eq(lines_of(t), "starting|step 1|step 2|café 1");

	v = logs_of(t, "");
	json_t *items = json_object_get(v, "items");
	cr_assert_eq(json_integer_value(json_object_get(
			     json_array_get(items, 2), "createdTime")),
		     1700000000000LL, "the worker's own time is kept");
	cr_assert(json_is_null(json_object_get(v, "nextAfter")));
	json_decref(v);

	/* Pages. */
	v = logs_of(t, "?after=1&limit=2");
	items = json_object_get(v, "items");
	cr_assert_eq(json_array_size(items), 2);
	cr_assert_str_eq(str(json_array_get(items, 0), "log"), "step 1");
	cr_assert_eq(json_integer_value(json_object_get(v, "nextAfter")), 3);
	json_decref(v);
	v = logs_of(t, "?after=3&limit=2");
	cr_assert_eq(json_array_size(json_object_get(v, "items")), 1);
	cr_assert(json_is_null(json_object_get(v, "nextAfter")));
	json_decref(v);

	/* Another task's lines are its own. */
	cr_assert_str_eq(lines_of(ids[1]), "");

	/* The worker's result carries its last lines. */
	snprintf(path, sizeof(path), NS "/queues/work/tasks/%s/complete", t);
	e2e_call_ok("POST", path,
		    "{\"workerId\":\"w1\",\"output\":{\"ok\":true},"
		    "\"logs\":[\"done\"]}",
		    200);
	cr_assert_str_eq(lines_of(t), "starting|step 1|step 2|café 1|done");

	/* And a batch of results, each its own. */
	char body[512];
	snprintf(body, sizeof(body),
		 "{\"results\":[{\"taskId\":\"%s\",\"workerId\":\"w1\","
		 "\"status\":\"FAILED\",\"reason\":\"no\","
		 "\"logs\":[\"tried\",{\"log\":\"gave up\"}]}]}",
		 ids[1]);
	v = e2e_call("POST", NS "/queues/work/results", body, 200);
	cr_assert(json_is_true(json_object_get(
		json_array_get(json_object_get(v, "results"), 0), "ok")));
	json_decref(v);
	cr_assert_str_eq(lines_of(ids[1]), "tried|gave up");

	/* Logs may still be added to a finished task (Conductor allows it). */
	post_logs(t, "{\"log\":\"after the fact\"}", 201);
	cr_assert_eq(
		th_int(e2e_sql(), "SELECT count(*) FROM \"TaskLogs\"", 0, NULL),
		8);
}

/* ---------------------------------------------------------------- limits */

Test(limits, sizes_counts_and_shapes)
{
	e2e_start(small);
	char ids[1][37];
	leased_tasks(1, ids);
	const char *t = ids[0];
	char path[256];
	snprintf(path, sizeof(path), NS "/tasks/%s/logs", t);

	/* 64 bytes is the longest line; é is two. */
	char body[512];
	snprintf(body, sizeof(body), "{\"log\":\"%s\"}",
		 "0123456789012345678901234567890123456789012345678901234567890"
		 "123");
	e2e_call_ok("POST", path, body, 201);
	snprintf(body, sizeof(body), "{\"log\":\"%s\"}",
		 "0123456789012345678901234567890123456789012345678901234567890"
		 "12\\u00e9");
	refused("POST", path, body, 413, "$.log is 65 bytes");
	snprintf(body, sizeof(body), "{\"logs\":[\"ok\",\"%s\"]}",
		 "0123456789012345678901234567890123456789012345678901234567890"
		 "12\\u00e9");
	refused("POST", path, body, 413, "$.logs[1] is 65 bytes");
	refused("POST", path,
		"{\"logs\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\"]}", 413,
		"a task keeps at most 5");

	/* Shapes. */
	refused("POST", path, "{}", 400, "$.log");
	refused("POST", path, "{\"log\":5}", 400, "$.log must be a string");
	refused("POST", path, "{\"logs\":\"x\"}", 400,
		"$.logs must be an array");
	refused("POST", path, "{\"logs\":[]}", 400, "$.logs is empty");
	refused("POST", path, "{\"logs\":[{\"text\":\"x\"}]}", 400,
		"$.logs[0]");
	refused("POST", path,
		"{\"logs\":[{\"log\":\"x\",\"createdTime\":\"soon\"}]}", 400,
		"$.logs[0].createdTime");
	refused("POST", path, "{\"log\":\"a\",\"logs\":[\"b\"]}", 400,
		"not both");
	refused("POST", path, "[\"a\"]", 400, "");
	refused("GET", "/v1/ns/default/tasks/x/logs?limit=0", NULL, 404, "");
	snprintf(body, sizeof(body), NS "/tasks/%s/logs?limit=0", t);
	refused("GET", body, NULL, 400, "limit");

	/* Four more fit; the sixth line of the task is refused, whole. */
	e2e_call_ok("POST", path, "{\"logs\":[\"2\",\"3\"]}", 201);
	refused("POST", path, "{\"logs\":[\"4\",\"5\",\"6\"]}", 409,
		"at most 5 are kept");
	e2e_call_ok("POST", path, "{\"logs\":[\"4\",\"5\"]}", 201);
	refused("POST", path, "{\"log\":\"6\"}", 409, "holds 5 log lines");
	json_t *v = logs_of(t, "");
	cr_assert_eq(json_array_size(json_object_get(v, "items")), 5);
	json_decref(v);

	/* A result whose logs break a limit changes nothing: the task stays
	 * leased and open. */
	snprintf(path, sizeof(path), NS "/queues/work/tasks/%s/complete", t);
	refused("POST", path, "{\"workerId\":\"w1\",\"logs\":[\"7\"]}", 409,
		"at most 5");
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"TaskExecutions\""
			    " WHERE \"status\" = 'IN_PROGRESS'",
			    0, NULL),
		     1);
	refused("POST", NS "/queues/work/results",
		"{\"results\":[{\"taskId\":\"00000000-0000-7000-8000-"
		"000000000000\",\"workerId\":\"w1\",\"status\":\"COMPLETED\","
		"\"logs\":[5]}]}",
		400, "$.results[0].logs[0]");

	/* Unknown tasks and namespaces. */
	refused("POST", NS "/tasks/01900000-0000-7000-8000-000000000000/logs",
		"{\"log\":\"x\"}", 404, "not found");
	refused("GET", NS "/tasks/01900000-0000-7000-8000-000000000000/logs",
		NULL, 404, "not found");
	refused("POST", NS "/tasks/nope/logs", "{\"log\":\"x\"}", 404,
		"not found");
	char other[256];
	snprintf(other, sizeof(other), "/v1/ns/nope/tasks/%s/logs", t);
	refused("GET", other, NULL, 404, "");
}

/* ------------------------------------------------------------- conductor */

static long
raw(const char *method, const char *path, const char *body, char *out,
    size_t size)
{
	struct th_response r;
	th_http(e2e_server(), method, path, body, body ? strlen(body) : 0, &r);
	snprintf(out, size, "%s", r.body);
	long status = r.status;
	th_response_free(&r);
	return status;
}

Test(conductor, log_routes_and_task_results)
{
	e2e_start(small);
	char ids[1][37];
	leased_tasks(1, ids);
	const char *t = ids[0];
	char path[256], out[4096];
	snprintf(path, sizeof(path), "/api/tasks/%s/log", t);

	/* The body is the line itself: raw text, or a JSON string. */
	cr_assert_eq(raw("POST", path, "plain text line", out, sizeof(out)),
		     200, "%s", out);
	cr_assert_eq(raw("POST", path, "\"a json string\"", out, sizeof(out)),
		     200, "%s", out);

	/* A TaskResult's logs are appended. */
	char body[1024];
	snprintf(body, sizeof(body),
		 "{\"taskId\":\"%s\",\"status\":\"IN_PROGRESS\","
		 "\"callbackAfterSeconds\":60,\"workerId\":\"w1\","
		 "\"logs\":[{\"log\":\"from result\",\"createdTime\":42,"
		 "\"taskId\":\"%s\"}]}",
		 t, t);
	cr_assert_eq(raw("POST", "/api/tasks", body, out, sizeof(out)), 200,
		     "%s", out);

	json_t *v = e2e_call("GET", path, NULL, 200);
	cr_assert(json_is_array(v));
	cr_assert_eq(json_array_size(v), 3, "%s", json_dumps(v, 0));
	const char *want[] = {"plain text line", "a json string",
			      "from result"};
	for (size_t i = 0; i < 3; i++) {
		json_t *l = json_array_get(v, i);
		cr_assert_str_eq(str(l, "log"), want[i]);
		cr_assert_str_eq(str(l, "taskId"), t);
		cr_assert(json_is_integer(json_object_get(l, "createdTime")));
		cr_assert_eq(json_object_size(l), 3,
			     "Conductor's TaskExecLog: log, taskId, "
			     "createdTime");
	}
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(v, 2),
							"createdTime")),
		     42);
	json_decref(v);
	/* The native route reads the same lines. */
	cr_assert_str_eq(lines_of(t),
			 "plain text line|a json string|from result");

	/* Limits: a long line 413, the sixth line 409, bad logs 400. */
	char big[200];
	memset(big, 'x', 100);
	big[100] = '\0';
	cr_assert_eq(raw("POST", path, big, out, sizeof(out)), 413, "%s", out);
	cr_assert(strstr(out, "the log is 100 bytes; a log line is at most 64"),
		  "%s", out);
	cr_assert_eq(raw("POST", path, "4", out, sizeof(out)), 200, "%s", out);
	cr_assert_eq(raw("POST", path, "5", out, sizeof(out)), 200, "%s", out);
	cr_assert_eq(raw("POST", path, "6", out, sizeof(out)), 409, "%s", out);
	cr_assert(strstr(out, "at most 5"), "%s", out);
	const char *tp[] = {t};
	char *before = th_value(e2e_sql(),
				"SELECT \"status\" FROM \"TaskExecutions\""
				" WHERE \"id\" = $1::uuid",
				1, tp);
	snprintf(body, sizeof(body),
		 "{\"taskId\":\"%s\",\"status\":\"COMPLETED\","
		 "\"workerId\":\"w1\",\"logs\":[\"one too many\"]}",
		 t);
	cr_assert_eq(raw("POST", "/api/tasks", body, out, sizeof(out)), 409,
		     "%s", out);
	char *after = th_value(e2e_sql(),
			       "SELECT \"status\" FROM \"TaskExecutions\""
			       " WHERE \"id\" = $1::uuid",
			       1, tp);
	cr_assert_str_eq(after, before, "a refused result changes nothing");
	cr_assert_str_neq(after, "COMPLETED");
	free(before);
	free(after);
	snprintf(body, sizeof(body),
		 "{\"taskId\":\"%s\",\"status\":\"COMPLETED\","
		 "\"logs\":[{\"log\":7}]}",
		 t);
	cr_assert_eq(raw("POST", "/api/tasks", body, out, sizeof(out)), 400,
		     "%s", out);
	cr_assert(strstr(out, "$.logs[0]"), "%s", out);

	/* Unknown task. */
	cr_assert_eq(raw("GET",
			 "/api/tasks/01900000-0000-7000-8000-000000000000/log",
			 NULL, out, sizeof(out)),
		     404, "%s", out);
	cr_assert_eq(raw("POST",
			 "/api/tasks/01900000-0000-7000-8000-000000000000/log",
			 "x", out, sizeof(out)),
		     404, "%s", out);
}

/* --------------------------------------------------------------- storage */

static bool
months_ahead(void *arg)
{
	(void)arg;
	/* The current month (seeded) and three ahead, plus DEFAULT. */
	return th_int(e2e_sql(),
		      "SELECT count(*) FROM pg_inherits"
		      " WHERE \"inhparent\" = '\"TaskLogs\"'::regclass",
		      0, NULL) >= 5;
}

Test(storage, partitions_not_default)
{
	e2e_start(NULL);
	char ids[1][37];
	leased_tasks(1, ids);
	post_logs(ids[0], "{\"logs\":[\"a\",\"b\"]}", 201);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"TaskLogs_default\"", 0,
			    NULL),
		     0, "no line in DEFAULT");
	char *part = th_value(e2e_sql(),
			      "SELECT DISTINCT tableoid::regclass::text"
			      " FROM \"TaskLogs\"",
			      0, NULL);
	char *want =
		th_value(e2e_sql(),
			 "SELECT format('%I', \"nf_partition_name\"('TaskLogs',"
			 " date_trunc('month', now(), 'UTC'), 'month'))",
			 0, NULL);
	cr_assert_str_eq(part, want);
	free(part);
	free(want);
	/* The partition manager runs at start-up: TaskLogs is one of its
	 * tables. */
	cr_assert(th_wait_until(WAIT_MS, months_ahead, NULL),
		  "TaskLogs has no partitions ahead");
}
