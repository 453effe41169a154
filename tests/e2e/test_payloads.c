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
 * Every test gets its own database and server; waits have deadlines.
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

#define NS "/v1/ns/default"

static struct th_db db;
static struct th_server server;
static struct th_server *srv;
static PGconn *sql;
static pthread_t drain;
static bool draining;
static char server_log[LOG_SIZE];
static size_t log_len;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void *
drain_main(void *arg)
{
	struct th_server *s = arg;
	char buf[4096];
	for (;;) {
		ssize_t n = read(s->proc.out_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		pthread_mutex_lock(&log_mu);
		if (log_len + (size_t)n >= LOG_SIZE)
			log_len = 0;
		if ((size_t)n < LOG_SIZE - 1 - log_len) {
			memcpy(server_log + log_len, buf, (size_t)n);
			log_len += (size_t)n;
		}
		server_log[log_len] = '\0';
		pthread_mutex_unlock(&log_mu);
	}
	return NULL;
}

static void
start_with(const char *const *flags)
{
	th_db_clone(&db);
	th_server_start(&server, db.url, flags);
	srv = &server;
	log_len = 0;
	cr_assert(pthread_create(&drain, NULL, drain_main, &server) == 0);
	draining = true;
	sql = th_connect(db.url);
}

static void
start(void)
{
	start_with(NULL);
}

static void
cleanup(void)
{
	if (sql) {
		PQfinish(sql);
		sql = NULL;
	}
	if (server.proc.pid > 0) {
		kill(server.proc.pid, SIGKILL);
		waitpid(server.proc.pid, NULL, 0);
		server.proc.pid = 0;
	}
	if (draining) {
		pthread_join(drain, NULL);
		draining = false;
		close(server.proc.out_fd);
	}
	th_db_drop(&db);
}

TestSuite(cache, .fini = cleanup);

/* ---------------------------------------------------------- HTTP helpers */

static char last_body[16384];

static json_t *
call(const char *method, const char *path, const char *body, long status)
{
	struct th_response r;
	th_http(srv, method, path, body, body ? strlen(body) : 0, &r);
	snprintf(last_body, sizeof(last_body), "%s", r.body);
	cr_assert_eq(r.status, status, "%s %s: %ld, wanted %ld: %s", method,
		     path, r.status, status, last_body);
	json_t *v = NULL;
	if (r.body_len) {
		v = json_loadb(r.body, r.body_len, 0, NULL);
		cr_assert_not_null(v, "%s %s: body is not JSON: %s", method,
				   path, last_body);
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

static bool
has_detail(const json_t *err, const char *path)
{
	size_t i;
	const json_t *d;
	json_array_foreach (json_object_get(err, "details"), i, d) {
		const char *p = json_string_value(json_object_get(d, "path"));
		if (p && strcmp(p, path) == 0)
			return true;
	}
	return false;
}

static void
put_task_def(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", name);
	json_decref(callj("PUT", path, 201,
			  json_pack("{s:s,s:i,s:i}", "name", name, "retryCount",
				    0, "responseTimeoutSeconds", 60)));
}

/* A one-task workflow `name` whose SIMPLE task `task` (ref "a") caches
 * under `key` for ttl seconds; its output is the task's. */
static void
put_cached_workflow(const char *name, const char *task, const char *key,
		    int ttl)
{
	json_decref(callj(
		"POST", NS "/workflow-definitions", 201,
		json_pack("{s:s,s:i,s:[{s:s,s:s,s:{s:s},s:{s:s,s:i}}]}", "name",
			  name, "version", 1, "tasks", "name", task,
			  "taskReferenceName", "a", "inputParameters", "c",
			  "${workflow.input.customerId}", "cacheConfig", "key",
			  key, "ttlInSecond", ttl)));
}

static void
start_workflow(const char *name, json_t *input, char id[37])
{
	json_t *v = callj("POST", NS "/workflows", 201,
			  json_pack("{s:s,s:o}", "name", name, "input", input));
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
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, reached_status, &p),
		  "workflow %s stayed %s, wanted %s", id, p.seen, status);
	return get_workflow(id);
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
	json_t *v = callj("POST", path, 200,
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
	char *text = json_dumps(
		json_pack("{s:s,s:o}", "workerId", "w1", "output", output),
		JSON_COMPACT);
	struct th_response r;
	th_http(srv, "POST", path, text, strlen(text), &r);
	free(text);
	snprintf(last_body, sizeof(last_body), "%s", r.body);
	long status = r.status;
	th_response_free(&r);
	return status;
}

/* The first task of wf with refName ref (borrowed). */
static const json_t *
task_of(const json_t *wf, const char *ref)
{
	size_t i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   ref) == 0)
			return t;
	}
	cr_assert_fail("no task %s", ref);
	return NULL;
}

static long long
sql_int(const char *q, const char *param)
{
	const char *params[] = {param};
	return th_int(sql, q, param ? 1 : 0, param ? params : NULL);
}

/* Runs one workflow of `name` for customer `c` through a worker on queue
 * `queue` that outputs {"v": v}; waits for COMPLETED. */
static void
run_through_worker(const char *name, const char *queue, const char *c, int v,
		   char id[37])
{
	start_workflow(name, json_pack("{s:s}", "customerId", c), id);
	json_t *t = poll_one(queue);
	cr_assert_str_eq(str_at(t, "workflowId"), id);
	cr_assert_eq(
		complete(queue, str_at(t, "id"), json_pack("{s:i}", "v", v)),
		200, "%s", last_body);
	json_decref(t);
	json_decref(wait_status(id, "COMPLETED"));
}

/* ------------------------------------------------------------------ cache */

Test(cache, hit_completes_without_the_queue)
{
	start();
	put_task_def("lookup");
	put_cached_workflow("cached", "lookup",
			    "cust-${workflow.input.customerId}", 3600);
	char first[37], second[37];
	run_through_worker("cached", "lookup", "c1", 42, first);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskOutputCache\""
			     " WHERE \"taskDefName\" = 'lookup'"
			     " AND \"key\" = $1 AND \"output\" = '{\"v\":42}'"
			     " AND \"expiresAt\" > now() + interval '3500 s'",
			     "cust-c1"),
		     1);

	/* Same key: completes with no poll at all. */
	start_workflow("cached", json_pack("{s:s}", "customerId", "c1"),
		       second);
	json_t *wf = wait_status(second, "COMPLETED");
	const json_t *t = task_of(wf, "a");
	cr_assert_str_eq(str_at(t, "status"), "COMPLETED");
	json_t *want = json_pack("{s:i}", "v", 42);
	cr_assert(json_equal(json_object_get(t, "output"), want), "%s",
		  last_body);
	cr_assert(json_equal(json_object_get(wf, "output"), want), "%s",
		  last_body);
	json_decref(want);
	json_decref(wf);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskQueues\""
			     " WHERE \"workflowId\" = $1::uuid",
			     second),
		     0);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"WorkflowEvents\""
			     " WHERE \"workflowId\" = $1::uuid"
			     " AND \"type\" = 'TASK_COMPLETED'"
			     " AND \"data\" @> '{\"cached\":true}'",
			     second),
		     1);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"WorkflowEvents\""
			     " WHERE \"workflowId\" = $1::uuid"
			     " AND \"type\" = 'TASK_IN_PROGRESS'",
			     second),
		     0);

	/* Another key runs the task. */
	char third[37];
	run_through_worker("cached", "lookup", "c2", 7, third);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskOutputCache\"", NULL),
		     2);
}

Test(cache, expired_entry_is_a_miss)
{
	start();
	put_task_def("lookup");
	put_cached_workflow("cached", "lookup", "${workflow.input.customerId}",
			    3600);
	char first[37], second[37];
	run_through_worker("cached", "lookup", "c1", 1, first);
	th_exec(sql, "UPDATE \"TaskOutputCache\""
		     " SET \"expiresAt\" = now() - interval '1 second'");
	/* The expired entry is not used: the task is queued again, and its
	 * new output replaces the entry. */
	run_through_worker("cached", "lookup", "c1", 2, second);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskOutputCache\""
			     " WHERE \"key\" = $1 AND \"output\" = '{\"v\":2}'"
			     " AND \"expiresAt\" > now()",
			     "c1"),
		     1);
}

Test(cache, task_definitions_never_share)
{
	start();
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
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskOutputCache\""
			     " WHERE \"key\" = $1",
			     "c1"),
		     2);
}

Test(cache, config_is_checked_at_registration)
{
	start();
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
		json_t *v = call("POST", NS "/workflow-definitions", body, 400);
		json_t *err = json_object_get(v, "error");
		cr_assert_str_eq(str_at(err, "code"), "invalid_argument");
		if (bad[i][1])
			cr_assert(has_detail(err, bad[i][1]),
				  "%s: no detail at %s: %s", bad[i][0],
				  bad[i][1], last_body);
		json_decref(v);
	}
}

static bool
cache_pruned(void *arg)
{
	(void)arg;
	return sql_int("SELECT count(*) FROM \"TaskOutputCache\""
		       " WHERE \"key\" = 'old'",
		       NULL) == 0;
}

Test(cache, expired_entries_are_pruned)
{
	th_db_clone(&db);
	sql = th_connect(db.url);
	th_exec(sql,
		"INSERT INTO \"TaskOutputCache\" (\"namespaceId\","
		" \"taskDefName\", \"key\", \"output\", \"expiresAt\")"
		" SELECT \"id\", 't', 'old', '{}'::jsonb, now() - interval '1 s'"
		" FROM \"Namespaces\" WHERE \"name\" = 'default'"
		" UNION ALL SELECT \"id\", 't', 'new', '{}'::jsonb,"
		" now() + interval '1 hour'"
		" FROM \"Namespaces\" WHERE \"name\" = 'default'");
	th_server_start(&server, db.url, NULL);
	srv = &server;
	cr_assert(pthread_create(&drain, NULL, drain_main, &server) == 0);
	draining = true;
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, cache_pruned, NULL),
		  "the expired entry was not pruned");
	cr_assert_eq(sql_int("SELECT count(*) FROM \"TaskOutputCache\""
			     " WHERE \"key\" = 'new'",
			     NULL),
		     1);
}
