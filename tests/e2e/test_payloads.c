/*
 * End-to-end tests of the task output cache and of payload offload, on the
 * real nodeflow binary over HTTP.
 *
 *   cache     a task with cacheConfig runs once: a second workflow with the
 *             same key completes its task from the cache without a queue
 *             row or a poll (event data "cached": true); an expired entry
 *             is a miss; another task definition with the same key never
 *             shares it; cacheConfig is checked at registration (400 with
 *             the JSON path); expired entries are pruned.
 *
 *   payloads  a 5 MB task output is offloaded (the row holds a small
 *             placeholder, "outputRef" names the payload) and reads back
 *             identical through the native API, the Conductor API, a poll
 *             and a downstream task's input expression; it is not cached;
 *             a large workflow input likewise; once the workflow's
 *             partition is dropped the payloads are collected.  An output
 *             above the maximum fails the task with the reason; a start
 *             above it gets 413.  The directory store does the same with
 *             files.  An EVENT's payload above the offload threshold
 *             fails its task (an outbox row keeps its payload inline).
 *
 *   gates and started workflows
 *             a SUB_WORKFLOW's 5 MB input, START_WORKFLOW's and a failure
 *             workflow's: the new execution's row holds a reference, it
 *             reads back through the APIs and in its task's input; HUMAN
 *             outputs given through the native and Conductor routes, and
 *             an asyncComplete task's parked output merged with the
 *             API's, likewise (the replaced parked payload is collected).
 *             A Conductor IN_PROGRESS update's output and a rerun's new
 *             inputs likewise.  Above the maximum: a completion, an
 *             IN_PROGRESS update or a rerun gets 413 and nothing changes,
 *             a parked output or a started input fails its task, a
 *             failure workflow starts without the failed input.
 *
 * Every test gets its own database and server; waits have deadlines.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	/* Generous: the payload tests move megabytes through a sanitizer
	 * build. */
	DECIDE_TIMEOUT_MS = 60000,
};

#define NS E2E_NS

TestSuite(cache, .fini = e2e_stop);
TestSuite(payloads, .fini = e2e_stop);

/* ---------------------------------------------------------- HTTP helpers */

static void
put_task_def(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", name);
	json_decref(
		e2e_callj("PUT", path, 201,
			  json_pack("{s:s,s:i,s:i}", "name", name, "retryCount",
				    0, "responseTimeoutSeconds", 60)));
}

/* A one-task workflow `name` whose SIMPLE task `task` (ref "a") caches
 * under `key` for ttl seconds; its output is the task's. */
static void
put_cached_workflow(const char *name, const char *task, const char *key,
		    int ttl)
{
	json_decref(e2e_callj(
		"POST", NS "/workflow-definitions", 201,
		json_pack("{s:s,s:i,s:[{s:s,s:s,s:{s:s},s:{s:s,s:i}}]}", "name",
			  name, "version", 1, "tasks", "name", task,
			  "taskReferenceName", "a", "inputParameters", "c",
			  "${workflow.input.customerId}", "cacheConfig", "key",
			  key, "ttlInSecond", ttl)));
}

struct poll_probe {
	const char *queue;
	json_t *task;
};

static bool
polled(void *arg)
{
	struct poll_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", p->queue);
	json_t *v =
		e2e_callj("POST", path, 200,
			  json_pack("{s:s,s:i}", "workerId", "w1", "count", 1));
	json_t *tasks = json_object_get(v, "tasks");
	if (json_array_size(tasks) > 0)
		p->task = json_incref(json_array_get(tasks, 0));
	json_decref(v);
	return p->task != NULL;
}

/* Polls until a task comes; a new reference. */
static json_t *
poll_one(const char *queue)
{
	struct poll_probe p = {queue, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled, &p),
		  "no task on queue %s", queue);
	return p.task;
}

static long
complete(const char *queue, const char *task_id, json_t *output)
{
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/complete", queue,
		 task_id);
	json_t *req =
		json_pack("{s:s,s:o}", "workerId", "w1", "output", output);
	char *text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	struct th_response r;
	th_http(e2e_server(), "POST", path, text, strlen(text), &r);
	free(text);
	snprintf(e2e_last_body, sizeof(e2e_last_body), "%s", r.body);
	long status = r.status;
	th_response_free(&r);
	return status;
}

/* Runs one workflow of `name` for customer `c` through a worker on queue
 * `queue` that outputs {"v": v}; waits for COMPLETED. */
static void
run_through_worker(const char *name, const char *queue, const char *c, int v,
		   char id[37])
{
	e2e_start_workflow(name, json_pack("{s:s}", "customerId", c), id);
	json_t *t = poll_one(queue);
	cr_assert_str_eq(e2e_str_at(t, "workflowId"), id);
	cr_assert_eq(complete(queue, e2e_str_at(t, "id"),
			      json_pack("{s:i}", "v", v)),
		     200, "%s", e2e_last_body);
	json_decref(t);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));
}

/* ------------------------------------------------------------------ cache */

Test(cache, hit_completes_without_the_queue)
{
	e2e_start(NULL);
	put_task_def("lookup");
	put_cached_workflow("cached", "lookup",
			    "cust-${workflow.input.customerId}", 3600);
	char first[37], second[37];
	run_through_worker("cached", "lookup", "c1", 42, first);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskOutputCache\""
			    " WHERE \"taskDefName\" = 'lookup'"
			    " AND \"key\" = $1 AND \"output\" = '{\"v\":42}'"
			    " AND \"expiresAt\" > now() + interval '3500 s'",
			    "cust-c1"),
		1);

	/* Same key: completes with no poll at all. */
	e2e_start_workflow("cached", json_pack("{s:s}", "customerId", "c1"),
			   second);
	json_t *wf = e2e_wait_status(second, "COMPLETED", DECIDE_TIMEOUT_MS);
	const json_t *t = e2e_task_of(wf, "a");
	cr_assert_str_eq(e2e_str_at(t, "status"), "COMPLETED");
	json_t *want = json_pack("{s:i}", "v", 42);
	cr_assert(json_equal(json_object_get(t, "output"), want), "%s",
		  e2e_last_body);
	cr_assert(json_equal(json_object_get(wf, "output"), want), "%s",
		  e2e_last_body);
	json_decref(want);
	json_decref(wf);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\""
				 " WHERE \"workflowId\" = $1::uuid",
				 second),
		     0);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
				 " WHERE \"workflowId\" = $1::uuid"
				 " AND \"type\" = 'TASK_COMPLETED'"
				 " AND \"data\" @> '{\"cached\":true}'",
				 second),
		     1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowEvents\""
				 " WHERE \"workflowId\" = $1::uuid"
				 " AND \"type\" = 'TASK_IN_PROGRESS'",
				 second),
		     0);

	/* Another key runs the task. */
	char third[37];
	run_through_worker("cached", "lookup", "c2", 7, third);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskOutputCache\"", NULL),
		2);
}

Test(cache, expired_entry_is_a_miss)
{
	e2e_start(NULL);
	put_task_def("lookup");
	put_cached_workflow("cached", "lookup", "${workflow.input.customerId}",
			    3600);
	char first[37], second[37];
	run_through_worker("cached", "lookup", "c1", 1, first);
	th_exec(e2e_sql(), "UPDATE \"TaskOutputCache\""
			   " SET \"expiresAt\" = now() - interval '1 second'");
	/* The expired entry is not used: the task is queued again, and its
	 * new output replaces the entry. */
	run_through_worker("cached", "lookup", "c1", 2, second);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskOutputCache\""
			    " WHERE \"key\" = $1 AND \"output\" = '{\"v\":2}'"
			    " AND \"expiresAt\" > now()",
			    "c1"),
		1);
}

Test(cache, task_definitions_never_share)
{
	e2e_start(NULL);
	put_task_def("lookup");
	put_task_def("other");
	put_cached_workflow("cached", "lookup", "${workflow.input.customerId}",
			    3600);
	put_cached_workflow("cached_other", "other",
			    "${workflow.input.customerId}", 3600);
	char first[37], second[37];
	run_through_worker("cached", "lookup", "c1", 1, first);
	/* Same key, another definition: it runs. */
	run_through_worker("cached_other", "other", "c1", 2, second);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskOutputCache\""
				 " WHERE \"key\" = $1",
				 "c1"),
		     2);
}

Test(cache, config_is_checked_at_registration)
{
	e2e_start(NULL);
	put_task_def("lookup");
	static const char *const bad[][2] = {
		{"{\"key\":\"\",\"ttlInSecond\":5}",
		 "$.tasks[0].cacheConfig.key"},
		{"{\"ttlInSecond\":5}", "$.tasks[0].cacheConfig.key"},
		{"{\"key\":\"k\"}", "$.tasks[0].cacheConfig.ttlInSecond"},
		{"{\"key\":\"k\",\"ttlInSecond\":0}",
		 "$.tasks[0].cacheConfig.ttlInSecond"},
		{"{\"key\":\"k\",\"ttlInSecond\":\"x\"}",
		 "$.tasks[0].cacheConfig.ttlInSecond"},
		{"{\"key\":\"${workflow.input\",\"ttlInSecond\":5}",
		 "$.tasks[0].cacheConfig.key"},
		{"{\"key\":\"${nope.output.x}\",\"ttlInSecond\":5}", NULL},
		{"[1]", "$.tasks[0].cacheConfig"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char body[512];
		snprintf(body, sizeof(body),
			 "{\"name\":\"bad\",\"version\":1,\"tasks\":[{\"name\":"
			 "\"lookup\",\"taskReferenceName\":\"a\","
			 "\"cacheConfig\":%s}]}",
			 bad[i][0]);
		json_t *v =
			e2e_call("POST", NS "/workflow-definitions", body, 400);
		json_t *err = json_object_get(v, "error");
		cr_assert_str_eq(e2e_str_at(err, "code"), "invalid_argument");
		if (bad[i][1])
			cr_assert(e2e_has_detail(err, bad[i][1]),
				  "%s: no detail at %s: %s", bad[i][0],
				  bad[i][1], e2e_last_body);
		json_decref(v);
	}
}

static bool
cache_pruned(void *arg)
{
	(void)arg;
	return e2e_sql_int("SELECT count(*) FROM \"TaskOutputCache\""
			   " WHERE \"key\" = 'old'",
			   NULL) == 0;
}

Test(cache, expired_entries_are_pruned)
{
	e2e_open();
	th_exec(e2e_sql(),
		"INSERT INTO \"TaskOutputCache\" (\"namespaceId\","
		" \"taskDefName\", \"key\", \"output\", \"expiresAt\")"
		" SELECT \"id\", 't', 'old', '{}'::jsonb, now() - interval '1 s'"
		" FROM \"Namespaces\" WHERE \"name\" = 'default'"
		" UNION ALL SELECT \"id\", 't', 'new', '{}'::jsonb,"
		" now() + interval '1 hour'"
		" FROM \"Namespaces\" WHERE \"name\" = 'default'");
	e2e_serve(NULL);
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, cache_pruned, NULL),
		  "the expired entry was not pruned");
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskOutputCache\""
				 " WHERE \"key\" = 'new'",
				 NULL),
		     1);
}

/* --------------------------------------------------------------- payloads */

/* n bytes of varied text (no character JSON escapes), malloc'd. */
static char *
big_text(size_t n, unsigned seed)
{
	char *s = malloc(n + 1);
	cr_assert_not_null(s);
	unsigned x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		s[i] = "abcdefghijklmnopqrstuvwxyz0123456789 .,-ABCDEFGHIJKLMNOPQR"
			[(x >> 16) % 58];
	}
	s[n] = '\0';
	return s;
}

/* The grace period covers a payload written before its row commits, which
 * a loaded sanitizer build can take seconds to do. */
static const char *const big_flags[] = {"--max-body-bytes",
					"33554432",
					"--payload-gc-interval-ms",
					"100",
					"--payload-gc-grace-seconds",
					"15",
					NULL};

/* big -> down: down's input copies big's output by expression. */
static void
put_big_workflow(void)
{
	put_task_def("big");
	put_task_def("down");
	json_decref(e2e_callj(
		"POST", NS "/workflow-definitions", 201,
		json_pack("{s:s,s:i,s:[{s:s,s:s,s:{s:s},s:{s:s,s:i}},"
			  "{s:s,s:s,s:{s:s}}],s:{s:s}}",
			  "name", "bigflow", "version", 1, "tasks", "name",
			  "big", "taskReferenceName", "big", "inputParameters",
			  "in", "${workflow.input.note}", "cacheConfig", "key",
			  "k", "ttlInSecond", 3600, "name", "down",
			  "taskReferenceName", "down", "inputParameters",
			  "copy", "${big.output.data}", "outputParameters", "n",
			  "${down.output.n}")));
}

static bool
data_is(const json_t *obj, const char *key, const char *want)
{
	const char *have = json_string_value(json_object_get(obj, key));
	return have && strcmp(have, want) == 0;
}

static json_t *
get_path(const char *path)
{
	return e2e_call("GET", path, NULL, 200);
}

struct count_probe {
	const char *q;
	const char *param;
	long long want;
};

static bool
count_is(void *arg)
{
	struct count_probe *p = arg;
	return e2e_sql_int(p->q, p->param) == p->want;
}

/* The round trip shared by both stores; prefix: "pg:" or "dir:". */
static void
round_trip(const char *prefix)
{
	put_big_workflow();
	char *data = big_text(5 * 1024 * 1024, 7);
	char *note = big_text(400 * 1024, 8);
	char id[37];
	e2e_start_workflow("bigflow", json_pack("{s:s}", "note", note), id);

	json_t *t = poll_one("big");
	cr_assert(data_is(json_object_get(t, "input"), "in", note),
		  "the poll's input is not the offloaded workflow input");
	char big_id[37];
	snprintf(big_id, sizeof(big_id), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	cr_assert_eq(complete("big", big_id, json_pack("{s:s}", "data", data)),
		     200, "%s", e2e_last_body);

	/* The downstream task's input was computed from the payload. */
	t = poll_one("down");
	cr_assert(data_is(json_object_get(t, "input"), "copy", data),
		  "the downstream input is not the offloaded output");
	char down_id[37];
	snprintf(down_id, sizeof(down_id), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	cr_assert_eq(complete("down", down_id, json_pack("{s:i}", "n", 1)), 200,
		     "%s", e2e_last_body);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS);

	/* In SQL: small columns, references set, nothing cached. */
	char like[16];
	snprintf(like, sizeof(like), "%s%%", prefix);
	const char *p2[] = {big_id, like};
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"TaskExecutions\""
			    " WHERE \"id\" = $1::uuid AND \"outputRef\" LIKE $2"
			    " AND length(\"output\"::text) < 200",
			    2, p2),
		     1);
	const char *p3[] = {down_id, like};
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"TaskExecutions\""
			    " WHERE \"id\" = $1::uuid AND \"inputRef\" LIKE $2"
			    " AND length(\"input\"::text) < 200",
			    2, p3),
		     1);
	const char *p4[] = {id, like};
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"WorkflowExecutions\""
			    " WHERE \"id\" = $1::uuid AND \"inputRef\" LIKE $2"
			    " AND length(\"input\"::text) < 200",
			    2, p4),
		     1);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskOutputCache\"", NULL),
		0, "an offloaded output was cached");

	/* Native API: the workflow with its tasks. */
	cr_assert(data_is(json_object_get(wf, "input"), "note", note));
	cr_assert(data_is(json_object_get(e2e_task_of(wf, "big"), "output"),
			  "data", data),
		  "native GET: the offloaded output does not read back");
	cr_assert(data_is(json_object_get(e2e_task_of(wf, "down"), "input"),
			  "copy", data));
	json_decref(wf);

	/* Conductor API: the workflow, and the task on its own. */
	char path[256];
	snprintf(path, sizeof(path), "/api/workflow/%s?includeTasks=true", id);
	wf = get_path(path);
	bool found = false;
	size_t i;
	const json_t *ct;
	json_array_foreach (json_object_get(wf, "tasks"), i, ct) {
		if (strcmp(json_string_value(
				   json_object_get(ct, "referenceTaskName")),
			   "big") == 0)
			found = data_is(json_object_get(ct, "outputData"),
					"data", data);
	}
	cr_assert(found, "Conductor GET workflow: no offloaded output");
	cr_assert(data_is(json_object_get(wf, "input"), "note", note));
	json_decref(wf);
	snprintf(path, sizeof(path), "/api/tasks/%s", big_id);
	json_t *task = get_path(path);
	cr_assert(data_is(json_object_get(task, "outputData"), "data", data),
		  "Conductor GET task: no offloaded output");
	json_decref(task);
	free(data);
	free(note);

	/* The partition manager drops the workflow's partition: its
	 * payloads are collected. */
	const char *p1[] = {id};
	char *part =
		th_value(e2e_sql(),
			 "SELECT c.\"relname\" FROM \"WorkflowExecutions\" e"
			 " JOIN pg_class c ON c.\"oid\" = e.\"tableoid\""
			 " WHERE e.\"id\" = $1::uuid",
			 1, p1);
	const char *pp[] = {part};
	free(th_value(e2e_sql(), "SELECT \"nf_drop_partition\"($1)::text", 1,
		      pp));
	free(part);
}

Test(payloads, offloaded_read_back_and_collected)
{
	e2e_start(big_flags);
	round_trip("pg:");
	cr_assert_gt(e2e_sql_int("SELECT count(*) FROM \"Payloads\"", NULL), 2);
	struct count_probe p = {"SELECT count(*) FROM \"Payloads\"", NULL, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, count_is, &p),
		  "payloads left after their partition was dropped: %lld",
		  e2e_sql_int(p.q, NULL));
}

static char store_dir[256];

static long
files_in(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "ls -1 '%s' | wc -l", dir);
	FILE *f = popen(cmd, "r");
	long n = -1;
	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static bool
dir_empty(void *arg)
{
	(void)arg;
	return files_in(store_dir) == 0;
}

Test(payloads, directory_store)
{
	snprintf(store_dir, sizeof(store_dir), "/tmp/nf_payloads_%d",
		 (int)getpid());
	char spec[300];
	snprintf(spec, sizeof(spec), "dir:%s", store_dir);
	const char *flags[] = {"--max-body-bytes",
			       "33554432",
			       "--payload-gc-interval-ms",
			       "100",
			       "--payload-gc-grace-seconds",
			       "15",
			       "--payload-store",
			       spec,
			       NULL};
	e2e_start(flags);
	round_trip("dir:");
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"Payloads\"", NULL), 0);
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, dir_empty, NULL),
		  "%ld files left after their partition was dropped",
		  files_in(store_dir));
	rmdir(store_dir);
}

Test(payloads, above_the_maximum)
{
	const char *flags[] = {"--payload-offload-bytes", "1024",
			       "--payload-max-bytes", "4096", NULL};
	e2e_start(flags);
	put_task_def("lookup");
	json_decref(e2e_callj("POST", NS "/workflow-definitions", 201,
			      json_pack("{s:s,s:i,s:[{s:s,s:s}]}", "name",
					"one", "version", 1, "tasks", "name",
					"lookup", "taskReferenceName", "a")));
	char *text = big_text(10000, 3);
	/* A start above the maximum: 413, nothing started. */
	json_t *req =
		json_pack("{s:s,s:{s:s}}", "name", "one", "input", "x", text);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	json_t *v = e2e_call("POST", NS "/workflows", body, 413);
	free(body);
	const char *msg = e2e_str_at(json_object_get(v, "error"), "message");
	cr_assert(strstr(msg, "exceeds the payload maximum of 4096 bytes"),
		  "%s", msg);
	json_decref(v);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\"",
				 NULL),
		     0);

	/* An output above it fails the task, and so the workflow. */
	char id[37];
	e2e_start_workflow("one", json_object(), id);
	json_t *t = poll_one("lookup");
	cr_assert_eq(complete("lookup", e2e_str_at(t, "id"),
			      json_pack("{s:s}", "x", text)),
		     200, "%s", e2e_last_body);
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS);
	const json_t *a = e2e_task_of(wf, "a");
	cr_assert_str_eq(e2e_str_at(a, "status"), "FAILED_WITH_TERMINAL_ERROR");
	cr_assert(strstr(e2e_str_at(a, "reason"), "output of 10") &&
			  strstr(e2e_str_at(a, "reason"),
				 "exceeds the payload maximum of 4096 bytes"),
		  "%s", e2e_str_at(a, "reason"));
	json_decref(wf);
	free(text);
}

/* A child whose output was offloaded: its parent's SUB_WORKFLOW task reads
 * back whole, through the API and in the parent's next expression. */
Test(payloads, sub_workflow_output_reads_back)
{
	const char *flags[] = {"--payload-offload-bytes", "1024", NULL};
	e2e_start(flags);
	put_task_def("cbig");
	put_task_def("after");
	json_decref(e2e_callj("POST", NS "/workflow-definitions", 201,
			      json_pack("{s:s,s:i,s:[{s:s,s:s}],s:{s:s}}",
					"name", "child", "version", 1, "tasks",
					"name", "cbig", "taskReferenceName",
					"c", "outputParameters", "data",
					"${c.output.data}")));
	json_decref(e2e_callj(
		"POST", NS "/workflow-definitions", 201,
		json_pack("{s:s,s:i,s:[{s:s,s:s,s:s,s:{s:s,s:i}},"
			  "{s:s,s:s,s:{s:s}}]}",
			  "name", "parent", "version", 1, "tasks", "name",
			  "sub", "taskReferenceName", "sub", "type",
			  "SUB_WORKFLOW", "subWorkflowParam", "name", "child",
			  "version", 1, "name", "after", "taskReferenceName",
			  "after", "inputParameters", "copy",
			  "${sub.output.data}")));
	char *data = big_text(20000, 11);
	char id[37];
	e2e_start_workflow("parent", json_object(), id);
	json_t *t = poll_one("cbig");
	cr_assert_eq(complete("cbig", e2e_str_at(t, "id"),
			      json_pack("{s:s}", "data", data)),
		     200, "%s", e2e_last_body);
	json_decref(t);
	t = poll_one("after");
	cr_assert(data_is(json_object_get(t, "input"), "copy", data),
		  "the parent's expression did not read the child's output");
	cr_assert_eq(complete("after", e2e_str_at(t, "id"), json_object()), 200,
		     "%s", e2e_last_body);
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS);
	cr_assert(data_is(json_object_get(e2e_task_of(wf, "sub"), "output"),
			  "data", data),
		  "native GET: the sub-workflow task's output is not the "
		  "child's");
	json_decref(wf);
	free(data);
}

/* ------------------------------------------- gates and started workflows */

/* The task of workflow id with refName ref, once it is IN_PROGRESS (and,
 * with output, has a non-empty output); a new reference. */
struct open_probe {
	const char *id;
	const char *ref;
	bool output;
	json_t *task;
};

static bool
task_open(void *arg)
{
	struct open_probe *p = arg;
	json_t *wf = e2e_get_workflow(p->id);
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   p->ref) != 0 ||
		    strcmp(json_string_value(json_object_get(t, "status")),
			   "IN_PROGRESS") != 0)
			continue;
		if (p->output &&
		    json_object_size(json_object_get(t, "output")) == 0)
			continue;
		p->task = json_incref(t);
		break;
	}
	json_decref(wf);
	return p->task != NULL;
}

static json_t *
wait_open(const char *id, const char *ref, bool output)
{
	struct open_probe p = {id, ref, output, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, task_open, &p),
		  "task %s of %s never waited open", ref, id);
	return p.task;
}

/* Whether the row of task task_id (or of execution id, exec) keeps col
 * out of line: a small placeholder and a "pg:" reference. */
static bool
task_offloaded(const char *task_id, const char *col)
{
	char q[256];
	snprintf(q, sizeof(q),
		 "SELECT count(*) FROM \"TaskExecutions\" WHERE \"id\" = "
		 "$1::uuid AND \"%sRef\" LIKE 'pg:%%' AND length(\"%s\"::text)"
		 " < 200",
		 col, col);
	return e2e_sql_int(q, task_id) == 1;
}

static bool
exec_offloaded(const char *id)
{
	return e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\" WHERE"
			   " \"id\" = $1::uuid AND \"inputRef\" LIKE 'pg:%'"
			   " AND length(\"input\"::text) < 200",
			   id) == 1;
}

static void
put_def_text(const char *text)
{
	json_decref(e2e_call("POST", NS "/workflow-definitions", text, 201));
}

/* Drops the partitions every execution is in; their payloads are then
 * unreferenced. */
static void
drop_all_partitions(void)
{
	PGresult *r = th_query(e2e_sql(),
			       "SELECT DISTINCT c.\"relname\" FROM"
			       " \"WorkflowExecutions\" e JOIN pg_class c"
			       " ON c.\"oid\" = e.\"tableoid\"",
			       0, NULL);
	for (int i = 0; i < PQntuples(r); i++) {
		const char *pp[] = {PQgetvalue(r, i, 0)};
		free(th_value(e2e_sql(),
			      "SELECT \"nf_drop_partition\"($1)::text", 1, pp));
	}
	PQclear(r);
}

static const char child_def[] =
	"{\"name\":\"child\",\"version\":1,\"tasks\":[{\"name\":\"cin\","
	"\"taskReferenceName\":\"cin\",\"inputParameters\":{\"copy\":"
	"\"${workflow.input.data}\"}}]}";

/* A SUB_WORKFLOW's 5 MB input: the child's row holds a reference, the
 * child reads back whole through both APIs and in its task's input, and
 * the payloads are collected once the partition is dropped. */
Test(payloads, sub_workflow_input_offloaded)
{
	e2e_start(big_flags);
	put_task_def("cin");
	put_def_text(child_def);
	put_def_text("{\"name\":\"psub\",\"version\":1,\"tasks\":[{\"name\":"
		     "\"sub\",\"taskReferenceName\":\"sub\",\"type\":"
		     "\"SUB_WORKFLOW\",\"inputParameters\":{\"data\":"
		     "\"${workflow.input.data}\"},\"subWorkflowParam\":{"
		     "\"name\":\"child\",\"version\":1}}]}");
	char *data = big_text(5 * 1024 * 1024, 21);
	char id[37];
	e2e_start_workflow("psub", json_pack("{s:s}", "data", data), id);

	json_t *t = poll_one("cin");
	cr_assert(data_is(json_object_get(t, "input"), "copy", data),
		  "the child's task did not see the offloaded input");
	char child[37], cin_id[37];
	snprintf(child, sizeof(child), "%s", e2e_str_at(t, "workflowId"));
	snprintf(cin_id, sizeof(cin_id), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	const char *pc[] = {child, id};
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"WorkflowExecutions\""
			    " WHERE \"id\" = $1::uuid"
			    " AND \"parentWorkflowId\" = $2::uuid",
			    2, pc),
		     1);
	cr_assert(exec_offloaded(child),
		  "the child's input is kept in its row");

	json_t *wf = e2e_get_workflow(child);
	cr_assert(data_is(json_object_get(wf, "input"), "data", data),
		  "native GET: the child's input does not read back");
	json_decref(wf);
	char path[256];
	snprintf(path, sizeof(path), "/api/workflow/%s?includeTasks=false",
		 child);
	wf = get_path(path);
	cr_assert(data_is(json_object_get(wf, "input"), "data", data),
		  "Conductor GET: the child's input does not read back");
	json_decref(wf);
	free(data);

	cr_assert_eq(complete("cin", cin_id, json_object()), 200, "%s",
		     e2e_last_body);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));
	drop_all_partitions();
	struct count_probe p = {"SELECT count(*) FROM \"Payloads\"", NULL, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, count_is, &p),
		  "payloads left after their partition was dropped: %lld",
		  e2e_sql_int(p.q, NULL));
}

/* START_WORKFLOW's and a failure workflow's inputs go out of line too. */
Test(payloads, started_and_failure_workflow_inputs_offloaded)
{
	const char *flags[] = {"--payload-offload-bytes", "1024", NULL};
	e2e_start(flags);
	put_task_def("cin");
	put_task_def("work");
	put_def_text(child_def);
	put_def_text(
		"{\"name\":\"starter\",\"version\":1,\"tasks\":[{"
		"\"name\":\"sw\",\"taskReferenceName\":\"sw\",\"type\":"
		"\"START_WORKFLOW\",\"inputParameters\":{\"startWorkflow\":"
		"{\"name\":\"child\",\"version\":1,\"input\":{\"data\":"
		"\"${workflow.input.data}\"}}}}]}");
	put_def_text("{\"name\":\"failing\",\"version\":1,\"failureWorkflow\":"
		     "\"child\",\"tasks\":[{\"name\":\"work\","
		     "\"taskReferenceName\":\"work\"}]}");
	char *data = big_text(20000, 23);

	/* START_WORKFLOW */
	char id[37];
	e2e_start_workflow("starter", json_pack("{s:s}", "data", data), id);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS);
	char started[37];
	snprintf(started, sizeof(started), "%s",
		 e2e_str_at(json_object_get(e2e_task_of(wf, "sw"), "output"),
			    "workflowId"));
	json_decref(wf);
	cr_assert(exec_offloaded(started),
		  "START_WORKFLOW: the started input is kept in its row");
	wf = e2e_get_workflow(started);
	cr_assert(data_is(json_object_get(wf, "input"), "data", data),
		  "START_WORKFLOW: the started input does not read back");
	json_decref(wf);
	json_t *t = poll_one("cin");
	cr_assert_str_eq(e2e_str_at(t, "workflowId"), started);
	cr_assert(data_is(json_object_get(t, "input"), "copy", data),
		  "START_WORKFLOW: its task did not see the input");
	cr_assert_eq(complete("cin", e2e_str_at(t, "id"), json_object()), 200,
		     "%s", e2e_last_body);
	json_decref(t);

	/* failureWorkflow */
	char failing[37];
	e2e_start_workflow("failing", json_pack("{s:s}", "data", data),
			   failing);
	t = poll_one("work");
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/work/tasks/%s/fail",
		 e2e_str_at(t, "id"));
	json_decref(e2e_callj(
		"POST", path, 200,
		json_pack("{s:s,s:s}", "workerId", "w1", "reason", "broken")));
	json_decref(t);
	wf = e2e_wait_status(failing, "FAILED", DECIDE_TIMEOUT_MS);
	char fw[37];
	snprintf(fw, sizeof(fw), "%s", e2e_str_at(wf, "failureWorkflowId"));
	json_decref(wf);
	cr_assert(exec_offloaded(fw),
		  "failure workflow: its input is kept in its row");
	wf = e2e_get_workflow(fw);
	const json_t *in = json_object_get(wf, "input");
	cr_assert(data_is(in, "data", data));
	cr_assert_str_eq(e2e_str_at(in, "workflowId"), failing);
	cr_assert(data_is(
		json_object_get(json_object_get(in, "failedWorkflow"), "input"),
		"data", data));
	json_decref(wf);
	t = poll_one("cin");
	cr_assert_str_eq(e2e_str_at(t, "workflowId"), fw);
	cr_assert(data_is(json_object_get(t, "input"), "copy", data),
		  "failure workflow: its task did not see the input");
	json_decref(t);
	free(data);
}

/* An EVENT's payload stays in its outbox row, so it is held to the offload
 * threshold: below it the event is written, above it the task fails for
 * good with the size and no event is written. */
Test(payloads, event_payload_held_to_the_offload_threshold)
{
	const char *flags[] = {"--payload-offload-bytes", "1024", NULL};
	e2e_start(flags);
	put_def_text("{\"name\":\"ev\",\"version\":1,\"tasks\":[{\"name\":"
		     "\"pub\",\"taskReferenceName\":\"pub\",\"type\":"
		     "\"EVENT\",\"sink\":\"webhook:hooks\",\"inputParameters\":"
		     "{\"data\":\"${workflow.input.data}\"}}]}");
	const char *q = "SELECT count(*) FROM \"OutboxEvents\""
			" WHERE \"workflowId\" = $1::uuid";

	char *small = big_text(200, 31);
	char id[37];
	e2e_start_workflow("ev", json_pack("{s:s}", "data", small), id);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));
	cr_assert_eq(e2e_sql_int(q, id), 1);
	free(small);

	char *large = big_text(2000, 37);
	e2e_start_workflow("ev", json_pack("{s:s}", "data", large), id);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS);
	const json_t *t = e2e_task_of(wf, "pub");
	cr_assert_str_eq(e2e_str_at(t, "status"), "FAILED_WITH_TERMINAL_ERROR");
	cr_assert(strstr(e2e_str_at(t, "reason"), "event payload of 2") &&
			  strstr(e2e_str_at(t, "reason"),
				 "exceeds the payload offload threshold of "
				 "1024 bytes"),
		  "%s", e2e_str_at(t, "reason"));
	json_decref(wf);
	cr_assert_eq(e2e_sql_int(q, id), 0,
		     "an event above the threshold was "
		     "written");
	free(large);
}

/* Outputs given to HUMAN tasks through the native and the Conductor
 * routes are offloaded and read back (APIs, the next task's expressions);
 * collected with their partition. */
Test(payloads, human_outputs_offloaded)
{
	const char *flags[] = {"--payload-offload-bytes",
			       "1024",
			       "--payload-gc-interval-ms",
			       "100",
			       "--payload-gc-grace-seconds",
			       "2",
			       NULL};
	e2e_start(flags);
	put_task_def("after");
	put_def_text(
		"{\"name\":\"hum\",\"version\":1,\"tasks\":[{\"name\":"
		"\"h\",\"taskReferenceName\":\"h\",\"type\":\"HUMAN\"},"
		"{\"name\":\"h2\",\"taskReferenceName\":\"h2\",\"type\":"
		"\"HUMAN\"},{\"name\":\"after\",\"taskReferenceName\":"
		"\"after\",\"inputParameters\":{\"a\":\"${h.output.data}\","
		"\"b\":\"${h2.output.data}\",\"n\":\"${h2.output.n}\"}}]}");
	char *d1 = big_text(20000, 31), *d2 = big_text(30000, 32);
	char id[37];
	e2e_start_workflow("hum", json_object(), id);

	/* Native route. */
	json_t *t = wait_open(id, "h", false);
	char h_id[37];
	snprintf(h_id, sizeof(h_id), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tasks/h/complete", id);
	json_decref(e2e_callj("POST", path, 200,
			      json_pack("{s:{s:s}}", "output", "data", d1)));
	cr_assert(task_offloaded(h_id, "output"),
		  "native completion: the output is kept in its row");

	/* Conductor route: the body is the output. */
	t = wait_open(id, "h2", false);
	char h2_id[37];
	snprintf(h2_id, sizeof(h2_id), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	snprintf(path, sizeof(path), "/api/tasks/%s/h2/COMPLETED", id);
	json_t *req = json_pack("{s:s,s:i}", "data", d2, "n", 5);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	struct th_response r;
	th_http(e2e_server(), "POST", path, body, strlen(body), &r);
	free(body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	th_response_free(&r);
	cr_assert(task_offloaded(h2_id, "output"),
		  "Conductor completion: the output is kept in its row");

	t = poll_one("after");
	const json_t *in = json_object_get(t, "input");
	cr_assert(data_is(in, "a", d1) && data_is(in, "b", d2),
		  "the next task's expressions did not read the outputs");
	cr_assert_eq(json_integer_value(json_object_get(in, "n")), 5);
	cr_assert_eq(complete("after", e2e_str_at(t, "id"), json_object()), 200,
		     "%s", e2e_last_body);
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS);
	cr_assert(data_is(json_object_get(e2e_task_of(wf, "h"), "output"),
			  "data", d1),
		  "native GET: the HUMAN output does not read back");
	json_decref(wf);
	snprintf(path, sizeof(path), "/api/tasks/%s", h2_id);
	t = get_path(path);
	cr_assert(data_is(json_object_get(t, "outputData"), "data", d2),
		  "Conductor GET task: the HUMAN output does not read back");
	json_decref(t);
	free(d1);
	free(d2);

	drop_all_partitions();
	struct count_probe p = {"SELECT count(*) FROM \"Payloads\"", NULL, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, count_is, &p),
		  "payloads left after their partition was dropped: %lld",
		  e2e_sql_int(p.q, NULL));
}

/* An asyncComplete INLINE task parks with a large output: offloaded, read
 * back, merged with the output the API gives; the payload the merge
 * replaced is collected while the workflow stays. */
Test(payloads, async_complete_output_offloaded)
{
	const char *flags[] = {"--payload-offload-bytes",
			       "1024",
			       "--payload-gc-interval-ms",
			       "100",
			       "--payload-gc-grace-seconds",
			       "2",
			       NULL};
	e2e_start(flags);
	put_task_def("after");
	put_def_text(
		"{\"name\":\"asy\",\"version\":1,\"tasks\":[{\"name\":"
		"\"inl\",\"taskReferenceName\":\"inl\",\"type\":\"INLINE\","
		"\"asyncComplete\":true,\"inputParameters\":{"
		"\"evaluatorType\":\"javascript\",\"expression\":\"$.v\","
		"\"v\":\"${workflow.input.data}\"}},{\"name\":\"after\","
		"\"taskReferenceName\":\"after\",\"inputParameters\":{"
		"\"r\":\"${inl.output.result}\",\"ok\":"
		"\"${inl.output.approved}\"}}]}");
	char *data = big_text(20000, 41);
	char id[37];
	e2e_start_workflow("asy", json_pack("{s:s}", "data", data), id);
	json_t *t = wait_open(id, "inl", true);
	cr_assert(data_is(json_object_get(t, "output"), "result", data),
		  "the parked output does not read back");
	char inl_id[37];
	snprintf(inl_id, sizeof(inl_id), "%s", e2e_str_at(t, "id"));
	json_decref(t);
	cr_assert(task_offloaded(inl_id, "output"),
		  "the parked output is kept in its row");
	const char *pi[] = {inl_id};
	char *parked = th_value(e2e_sql(),
				"SELECT \"outputRef\" FROM \"TaskExecutions\""
				" WHERE \"id\" = $1::uuid",
				1, pi);

	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tasks/inl/complete", id);
	json_decref(e2e_callj("POST", path, 200,
			      json_pack("{s:{s:b}}", "output", "approved", 1)));
	t = poll_one("after");
	const json_t *in = json_object_get(t, "input");
	cr_assert(data_is(in, "r", data), "the merged output lost the result");
	cr_assert(json_is_true(json_object_get(in, "ok")), "%s", e2e_last_body);
	cr_assert_eq(complete("after", e2e_str_at(t, "id"), json_object()), 200,
		     "%s", e2e_last_body);
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS);
	const json_t *out = json_object_get(e2e_task_of(wf, "inl"), "output");
	cr_assert(data_is(out, "result", data) &&
			  json_is_true(json_object_get(out, "approved")),
		  "native GET: the merged output does not read back");
	json_decref(wf);
	cr_assert(task_offloaded(inl_id, "output"));
	const char *pr[] = {inl_id, parked};
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"TaskExecutions\""
			    " WHERE \"id\" = $1::uuid AND \"outputRef\" <> $2",
			    2, pr),
		     1);
	/* The parked payload is nobody's now. */
	char q[160];
	snprintf(
		q, sizeof(q),
		"SELECT count(*) FROM \"Payloads\" WHERE 'pg:' || \"id\" = $1");
	struct count_probe p = {q, parked, 0};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, count_is, &p),
		  "the replaced parked payload was not collected");
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"Payloads\" p"
			    " JOIN \"TaskExecutions\" t ON t.\"outputRef\" ="
			    " 'pg:' || p.\"id\" WHERE t.\"id\" = $1::uuid",
			    inl_id),
		1, "the merged output's payload went too");
	free(parked);
	free(data);
}

static json_t *
post_raw(const char *path, const char *body, long status)
{
	return e2e_call("POST", path, body, status);
}

/* POST of body (taken) to a route that answers text; its status. */
static long
post_text(const char *path, json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct th_response r;
	th_http(e2e_server(), "POST", path, text, strlen(text), &r);
	free(text);
	snprintf(e2e_last_body, sizeof(e2e_last_body), "%s", r.body);
	long status = r.status;
	th_response_free(&r);
	return status;
}

/* Above --payload-max-bytes: a gate's completion is refused with 413 (the
 * task stays open), an asyncComplete task's parked output and a started
 * workflow's input fail their task, and a failure workflow starts without
 * the failed workflow's input. */
Test(payloads, gates_and_starts_above_the_maximum)
{
	const char *flags[] = {"--payload-offload-bytes", "1024",
			       "--payload-max-bytes", "4096", NULL};
	e2e_start(flags);
	put_task_def("work");
	put_task_def("cin");
	put_def_text(child_def);
	char *big = big_text(10000, 51), *d = big_text(2000, 52);

	/* HUMAN, native and Conductor: 413, nothing changes. */
	put_def_text("{\"name\":\"hum1\",\"version\":1,\"tasks\":[{\"name\":"
		     "\"h\",\"taskReferenceName\":\"h\",\"type\":\"HUMAN\"}]}");
	char id[37];
	e2e_start_workflow("hum1", json_object(), id);
	json_decref(wait_open(id, "h", false));
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tasks/h/complete", id);
	json_t *v = e2e_callj("POST", path, 413,
			      json_pack("{s:{s:s}}", "output", "x", big));
	json_t *err = json_object_get(v, "error");
	cr_assert_str_eq(e2e_str_at(err, "code"), "payload_too_large");
	cr_assert(strstr(e2e_str_at(err, "message"), "task output of 10") &&
			  strstr(e2e_str_at(err, "message"),
				 "exceeds the payload maximum of 4096 bytes"),
		  "%s", e2e_last_body);
	json_decref(v);
	char cpath[256];
	snprintf(cpath, sizeof(cpath), "/api/tasks/%s/h/COMPLETED", id);
	json_t *req = json_pack("{s:s}", "x", big);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	v = post_raw(cpath, body, 413);
	free(body);
	cr_assert(strstr(e2e_last_body, "exceeds the payload maximum of 4096"),
		  "%s", e2e_last_body);
	json_decref(v);
	json_decref(wait_open(id, "h", false));
	json_decref(e2e_callj("POST", path, 200,
			      json_pack("{s:{s:s}}", "output", "x", "small")));
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));

	/* asyncComplete: an output above the maximum is not parked. */
	put_def_text(
		"{\"name\":\"asy1\",\"version\":1,\"tasks\":[{\"name\":"
		"\"inl\",\"taskReferenceName\":\"inl\",\"type\":\"INLINE\","
		"\"asyncComplete\":true,\"inputParameters\":{"
		"\"evaluatorType\":\"javascript\",\"expression\":"
		"\"$.v + $.v + $.v\",\"v\":\"${workflow.input.d}\"}}]}");
	e2e_start_workflow("asy1", json_pack("{s:s}", "d", d), id);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS);
	const json_t *t = e2e_task_of(wf, "inl");
	cr_assert_str_eq(e2e_str_at(t, "status"), "FAILED_WITH_TERMINAL_ERROR");
	cr_assert(strstr(e2e_str_at(t, "reason"), "output of 60") &&
			  strstr(e2e_str_at(t, "reason"),
				 "exceeds the payload maximum of 4096 bytes"),
		  "%s", e2e_str_at(t, "reason"));
	json_decref(wf);

	/* SUB_WORKFLOW and START_WORKFLOW: the task fails, nothing starts. */
	put_def_text("{\"name\":\"psub1\",\"version\":1,\"tasks\":[{\"name\":"
		     "\"sub\",\"taskReferenceName\":\"sub\",\"type\":"
		     "\"SUB_WORKFLOW\",\"inputParameters\":{\"a\":"
		     "\"${workflow.input.d}\",\"b\":\"${workflow.input.d}\","
		     "\"c\":\"${workflow.input.d}\"},\"subWorkflowParam\":{"
		     "\"name\":\"child\",\"version\":1}}]}");
	put_def_text(
		"{\"name\":\"sw1\",\"version\":1,\"tasks\":[{\"name\":"
		"\"sw\",\"taskReferenceName\":\"sw\",\"type\":"
		"\"START_WORKFLOW\",\"inputParameters\":{\"startWorkflow\":"
		"{\"name\":\"child\",\"input\":{\"a\":"
		"\"${workflow.input.d}\",\"b\":\"${workflow.input.d}\","
		"\"c\":\"${workflow.input.d}\"}}}}]}");
	static const char *const starters[][2] = {{"psub1", "sub"},
						  {"sw1", "sw"}};
	for (size_t i = 0; i < 2; i++) {
		e2e_start_workflow(starters[i][0], json_pack("{s:s}", "d", d),
				   id);
		wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS);
		t = e2e_task_of(wf, starters[i][1]);
		cr_assert_str_eq(e2e_str_at(t, "status"),
				 "FAILED_WITH_TERMINAL_ERROR");
		cr_assert(strstr(e2e_str_at(t, "reason"),
				 "workflow input of 60") &&
				  strstr(e2e_str_at(t, "reason"),
					 "exceeds the payload maximum of "
					 "4096 bytes"),
			  "%s: %s", starters[i][0], e2e_str_at(t, "reason"));
		json_decref(wf);
	}
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
				 " WHERE \"defName\" = 'child'",
				 NULL),
		     0, "a workflow started with an input above the maximum");

	/* A failure workflow whose input would hold the failed workflow's
	 * twice: it starts without it. */
	put_def_text("{\"name\":\"failing\",\"version\":1,\"failureWorkflow\":"
		     "\"child\",\"tasks\":[{\"name\":\"work\","
		     "\"taskReferenceName\":\"work\"}]}");
	char *d3 = big_text(3000, 53);
	char failing[37];
	e2e_start_workflow("failing", json_pack("{s:s}", "data", d3), failing);
	json_t *w = poll_one("work");
	snprintf(path, sizeof(path), NS "/queues/work/tasks/%s/fail",
		 e2e_str_at(w, "id"));
	json_decref(e2e_callj(
		"POST", path, 200,
		json_pack("{s:s,s:s}", "workerId", "w1", "reason", "broken")));
	json_decref(w);
	wf = e2e_wait_status(failing, "FAILED", DECIDE_TIMEOUT_MS);
	char fw[37];
	snprintf(fw, sizeof(fw), "%s", e2e_str_at(wf, "failureWorkflowId"));
	json_decref(wf);
	wf = e2e_get_workflow(fw);
	const json_t *in = json_object_get(wf, "input");
	cr_assert_str_eq(e2e_str_at(in, "workflowId"), failing);
	cr_assert_null(json_object_get(in, "data"), "%s", e2e_last_body);
	cr_assert_null(
		json_object_get(json_object_get(in, "failedWorkflow"), "input"),
		"%s", e2e_last_body);
	cr_assert(strstr(e2e_str_at(in, "inputOmitted"),
			 "exceeds the payload maximum of 4096 bytes"),
		  "%s", e2e_last_body);
	json_decref(wf);
	free(d3);
	free(big);
	free(d);
}

/* A Conductor IN_PROGRESS update's output and a rerun's new inputs are
 * offloaded and read back; above the maximum each is refused with 413. */
Test(payloads, progress_and_rerun_inputs_offloaded)
{
	const char *flags[] = {"--payload-offload-bytes", "1024",
			       "--payload-max-bytes", "4096", NULL};
	e2e_start(flags);
	put_task_def("lookup");
	put_def_text("{\"name\":\"one2\",\"version\":1,\"tasks\":[{\"name\":"
		     "\"lookup\",\"taskReferenceName\":\"a\","
		     "\"inputParameters\":{\"x\":\"${workflow.input.x}\"}}]}");
	char *d = big_text(2000, 61), *big = big_text(10000, 62);
	char id[37];
	e2e_start_workflow("one2", json_pack("{s:s}", "x", "small"), id);
	json_t *t = poll_one("lookup");
	char task_id[37];
	snprintf(task_id, sizeof(task_id), "%s", e2e_str_at(t, "id"));
	json_decref(t);

	/* IN_PROGRESS with progress: offloaded, read back; too large: 413. */
	cr_assert_eq(post_text("/api/tasks",
			       json_pack("{s:s,s:s,s:s,s:b,s:{s:s}}", "taskId",
					 task_id, "workflowInstanceId", id,
					 "status", "IN_PROGRESS", "extendLease",
					 1, "outputData", "p", d)),
		     200, "%s", e2e_last_body);
	cr_assert(task_offloaded(task_id, "output"),
		  "IN_PROGRESS: the progress is kept in its row");
	char path[256];
	snprintf(path, sizeof(path), "/api/tasks/%s", task_id);
	t = get_path(path);
	cr_assert(data_is(json_object_get(t, "outputData"), "p", d),
		  "Conductor GET task: the progress does not read back");
	json_decref(t);
	cr_assert_eq(post_text("/api/tasks",
			       json_pack("{s:s,s:s,s:s,s:b,s:{s:s}}", "taskId",
					 task_id, "workflowInstanceId", id,
					 "status", "IN_PROGRESS", "extendLease",
					 1, "outputData", "p", big)),
		     413, "%s", e2e_last_body);
	cr_assert(strstr(e2e_last_body, "exceeds the payload maximum of 4096"),
		  "%s", e2e_last_body);
	json_t *v;
	cr_assert_eq(complete("lookup", task_id, json_object()), 200, "%s",
		     e2e_last_body);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));

	/* Rerun with new inputs: offloaded, read back. */
	snprintf(path, sizeof(path), NS "/workflows/%s/rerun", id);
	json_decref(e2e_callj("POST", path, 200,
			      json_pack("{s:s,s:{s:s},s:{s:s}}", "taskRefName",
					"a", "workflowInput", "x", d,
					"taskInput", "y", d)));
	cr_assert(exec_offloaded(id),
		  "rerun: the workflow input is in its row");
	t = poll_one("lookup");
	snprintf(task_id, sizeof(task_id), "%s", e2e_str_at(t, "id"));
	cr_assert(data_is(json_object_get(t, "input"), "y", d),
		  "rerun: the task input does not read back");
	json_decref(t);
	cr_assert(task_offloaded(task_id, "input"),
		  "rerun: the task input is kept in its row");
	json_t *wf = e2e_get_workflow(id);
	cr_assert(data_is(json_object_get(wf, "input"), "x", d),
		  "rerun: the workflow input does not read back");
	json_decref(wf);
	cr_assert_eq(complete("lookup", task_id, json_object()), 200, "%s",
		     e2e_last_body);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS));

	/* Too large: 413, the workflow stays as it was. */
	v = e2e_callj("POST", path, 413,
		      json_pack("{s:s,s:{s:s}}", "taskRefName", "a",
				"workflowInput", "x", big));
	cr_assert(strstr(e2e_str_at(json_object_get(v, "error"), "message"),
			 "workflow input of 10"),
		  "%s", e2e_last_body);
	json_decref(v);
	wf = e2e_get_workflow(id);
	cr_assert_str_eq(e2e_str_at(wf, "status"), "COMPLETED");
	cr_assert(data_is(json_object_get(wf, "input"), "x", d));
	json_decref(wf);
	free(d);
	free(big);
}
