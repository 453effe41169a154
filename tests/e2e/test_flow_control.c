/*
 * End-to-end tests of flow control on the real nodeflow binary over HTTP:
 * semaphores, rate limits and concurrentExecLimit.
 *
 *   semaphore    2 permits, 10 tasks, 6 worker threads polling two server
 *                replicas of one database at once: never 3 in progress
 *                (what the workers hold, the holders GET lists, and the
 *                tasks' startedAt/endedAt as the server wrote them); all 10
 *                complete.  A worker that vanishes: its permit comes back
 *                when its lease runs out and another task is handed out; a
 *                heartbeat renews the permit with the lease.  A workflow
 *                task's own semaphore gates a definition without one.  A
 *                task definition with a semaphore used by a task the
 *                server runs itself (HTTP) is refused, in either order
 *                of registration, on both APIs.
 *   unconfigured a semaphore nobody configured gates at
 *                --semaphore-default-permits (1 by default) and is listed
 *                with "configured": false while held.
 *   rate         5 per second: the first poll of a window gets 5 of 12,
 *                no window ("RateLimitBuckets") counts more than 5, all 12
 *                are handed out.
 *   concurrency  concurrentExecLimit 2: a poll for 10 gets 2, the
 *                Conductor batch poll then gets none; a completion lets
 *                one more out.
 *   wake         a long-poll (waitMs 30000) held back by a full rate-limit
 *                window is answered when the window ends, and one held back
 *                by a concurrentExecLimit when a task completes (on another
 *                replica), both well before their wait ends (a deadline
 *                shorter than the wait, not a measured time).
 *   api          PUT creates (201) and resizes (200), GET one and the list
 *                in their documented shape, DELETE 204 then 404; bad input
 *                400 naming the field or the path; unknown names 404.
 *
 * Every test gets its own database and server(s).  Worker threads never
 * assert: they record what they saw and the test thread asserts on it.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WAIT_MS = 15000 };

#define NS E2E_NS

TestSuite(semaphore, .fini = e2e_stop);
TestSuite(unconfigured, .fini = e2e_stop);
TestSuite(rate, .fini = e2e_stop);
TestSuite(concurrency, .fini = e2e_stop);
TestSuite(api, .fini = e2e_stop);
TestSuite(wake, .fini = e2e_stop);

static void
start(int replicas, const char *const *flags)
{
	e2e_open();
	for (int i = 0; i < replicas; i++)
		e2e_serve(flags);
}

/* ---------------------------------------------------------- HTTP helpers */

static void
callj_ok(const char *method, const char *path, long status, json_t *body)
{
	json_decref(e2e_callj(method, path, status, body));
}

/* A 400 whose details name path `at`. */
static void
expect_invalid(const char *method, const char *path, const char *body,
	       const char *at)
{
	json_t *v = e2e_call(method, path, body, 400);
	json_t *e = json_object_get(v, "error");
	cr_assert(json_is_object(e), "%s %s: %s", method, path, e2e_last_body);
	cr_assert_str_eq(json_string_value(json_object_get(e, "code")),
			 "invalid_argument", "%s", e2e_last_body);
	bool found = false;
	size_t i;
	json_t *d;
	json_array_foreach (json_object_get(e, "details"), i, d) {
		const char *p = json_string_value(json_object_get(d, "path"));
		found = found || (p && strcmp(p, at) == 0);
	}
	cr_assert(found, "%s %s (%s): no detail at %s: %s", method, path,
		  body ? body : "", at, e2e_last_body);
	json_decref(v);
}

static void
put_semaphore(const char *name, int permits, long status)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/semaphores/%s", name);
	callj_ok("PUT", path, status, json_pack("{s:i}", "permits", permits));
}

/* A task definition from a JSON object (name added). */
static void
put_task_def(const char *name, json_t *def)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", name);
	json_object_set_new(def, "name", json_string(name));
	json_object_set_new(def, "retryDelaySeconds", json_integer(0));
	callj_ok("PUT", path, 201, def);
}

/* A one-task workflow; extra members merged into its task. */
static void
put_workflow(const char *name, const char *task, json_t *extra)
{
	json_t *t = json_pack("{s:s,s:s,s:s}", "name", task,
			      "taskReferenceName", "only", "type", "SIMPLE");
	if (extra) {
		json_object_update(t, extra);
		json_decref(extra);
	}
	callj_ok("POST", NS "/workflow-definitions", 201,
		 json_pack("{s:s,s:i,s:[o]}", "name", name, "version", 1,
			   "tasks", t));
}

static void
start_workflows(const char *name, int n)
{
	for (int i = 0; i < n; i++)
		callj_ok("POST", NS "/workflows", 201,
			 json_pack("{s:s,s:{s:i}}", "name", name, "input", "i",
				   i));
}

/* Tasks of the queue now SCHEDULED in the database (the decider has run). */
static long long
scheduled(const char *task)
{
	const char *p[] = {task};
	return th_int(
		e2e_sql(),
		"SELECT count(*) FROM \"TaskExecutions\""
		" WHERE \"taskDefName\" = $1 AND \"status\" = 'SCHEDULED'",
		1, p);
}

struct scheduled_probe {
	const char *task;
	long long want;
};

static bool
all_scheduled(void *arg)
{
	struct scheduled_probe *p = arg;
	return scheduled(p->task) >= p->want;
}

static void
wait_scheduled(const char *task, long long n)
{
	struct scheduled_probe p = {task, n};
	cr_assert(th_wait_until(WAIT_MS, all_scheduled, &p),
		  "%lld of %lld tasks of %s scheduled", scheduled(task), n,
		  task);
}

/* One poll (waitMs 0): the tasks array, a new reference. */
static json_t *
poll(const char *queue, const char *worker, int count)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", queue);
	json_t *v = e2e_callj(
		"POST", path, 200,
		json_pack("{s:s,s:i}", "workerId", worker, "count", count));
	json_t *tasks = json_incref(json_object_get(v, "tasks"));
	cr_assert(json_is_array(tasks), "%s", e2e_last_body);
	json_decref(v);
	return tasks;
}

static size_t
poll_n(const char *queue, const char *worker, int count)
{
	json_t *t = poll(queue, worker, count);
	size_t n = json_array_size(t);
	json_decref(t);
	return n;
}

static const char *
id_of(const json_t *task)
{
	return json_string_value(json_object_get(task, "id"));
}

static void
complete(const char *queue, const char *worker, const char *task_id)
{
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/complete", queue,
		 task_id);
	callj_ok("POST", path, 200,
		 json_pack("{s:s,s:{}}", "workerId", worker, "output"));
}

/* GET one semaphore (200), a new reference. */
static json_t *
get_semaphore(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/semaphores/%s", name);
	return e2e_call("GET", path, NULL, 200);
}

static long long
in_use(const char *name)
{
	json_t *s = get_semaphore(name);
	long long n = json_integer_value(json_object_get(s, "inUse"));
	json_decref(s);
	return n;
}

/* The most tasks of a definition in progress at once, from the server's
 * own timestamps: for every start, the tasks started by then and not yet
 * ended. */
static long long
max_overlap(const char *task)
{
	const char *p[] = {task};
	return th_int(
		e2e_sql(),
		"SELECT coalesce(max((SELECT count(*) FROM \"TaskExecutions\" b"
		" WHERE b.\"taskDefName\" = $1 AND b.\"startedAt\" <= a.\"startedAt\""
		" AND (b.\"endedAt\" IS NULL OR b.\"endedAt\" > a.\"startedAt\"))),"
		" 0) FROM \"TaskExecutions\" a WHERE a.\"taskDefName\" = $1"
		" AND a.\"startedAt\" IS NOT NULL",
		1, p);
}

/* ------------------------------------------------------- worker threads */

struct buf {
	char *p;
	size_t n;
};

static size_t
collect(char *data, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t add = size * nmemb;
	b->p = realloc(b->p, b->n + add + 1);
	memcpy(b->p + b->n, data, add);
	b->n += add;
	b->p[b->n] = '\0';
	return add;
}

static long
req(CURL *h, const char *base, const char *method, const char *path,
    const char *body, char **out)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", base, path);
	struct buf b = {calloc(1, 1), 0};
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	struct curl_slist *headers = NULL;
	if (body) {
		headers = curl_slist_append(headers,
					    "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	}
	long status = -1;
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(headers);
	if (out)
		*out = b.p;
	else
		free(b.p);
	return status;
}

struct crowd {
	const char *queue;
	const char *semaphore;
	int permits;
	int total;
	atomic_int holding; /* tasks the workers hold now */
	atomic_int max_holding;
	atomic_int max_in_use; /* the most "inUse" a GET reported */
	atomic_int completed;
	atomic_int unexpected;
	atomic_bool stop;
	char note[512];
	pthread_mutex_t mu;
};

struct worker {
	pthread_t t;
	char id[32];
	const char *base;
	struct crowd *c;
};

static void
note(struct crowd *c, const char *what, long st, const char *body)
{
	atomic_fetch_add(&c->unexpected, 1);
	pthread_mutex_lock(&c->mu);
	if (!c->note[0])
		snprintf(c->note, sizeof(c->note), "%s: %ld %.300s", what, st,
			 body ? body : "");
	pthread_mutex_unlock(&c->mu);
}

static void
raise_max(atomic_int *max, int v)
{
	int cur = atomic_load(max);
	while (v > cur && !atomic_compare_exchange_weak(max, &cur, v))
		;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct crowd *c = w->c;
	CURL *h = curl_easy_init();
	char poll_path[256], sem_path[256], body[160];
	snprintf(poll_path, sizeof(poll_path), NS "/queues/%s/poll", c->queue);
	snprintf(sem_path, sizeof(sem_path), NS "/semaphores/%s", c->semaphore);
	/* A long-poll: a poll blocked by the semaphore waits here. */
	snprintf(body, sizeof(body),
		 "{\"workerId\":\"%s\",\"count\":3,\"waitMs\":300}", w->id);
	while (!atomic_load(&c->stop) &&
	       atomic_load(&c->completed) < c->total) {
		char *resp = NULL;
		long st = req(h, w->base, "POST", poll_path, body, &resp);
		json_t *v = st == 200 ? json_loads(resp, 0, NULL) : NULL;
		json_t *tasks = json_object_get(v, "tasks");
		if (!json_is_array(tasks)) {
			note(c, "poll", st, resp);
			free(resp);
			json_decref(v);
			break;
		}
		free(resp);
		size_t n = json_array_size(tasks);
		if (n) {
			int now =
				atomic_fetch_add(&c->holding, (int)n) + (int)n;
			raise_max(&c->max_holding, now);
			/* What the server says while these are held. */
			if (req(h, w->base, "GET", sem_path, NULL, &resp) ==
			    200) {
				json_t *s = json_loads(resp, 0, NULL);
				raise_max(&c->max_in_use,
					  (int)json_integer_value(
						  json_object_get(s, "inUse")));
				json_decref(s);
			} else {
				note(c, "get semaphore", 0, resp);
			}
			free(resp);
		}
		for (size_t i = 0; i < n; i++) {
			const char *tid = id_of(json_array_get(tasks, i));
			char path[512], done[160];
			snprintf(path, sizeof(path),
				 NS "/queues/%s/tasks/%s/complete", c->queue,
				 tid);
			snprintf(done, sizeof(done),
				 "{\"workerId\":\"%s\",\"output\":{}}", w->id);
			/* Released before the server hears of it: the count
			 * here never exceeds what the server holds. */
			atomic_fetch_sub(&c->holding, 1);
			st = req(h, w->base, "POST", path, done, &resp);
			if (st == 200)
				atomic_fetch_add(&c->completed, 1);
			else
				note(c, "complete", st, resp);
			free(resp);
		}
		json_decref(v);
	}
	curl_easy_cleanup(h);
	return NULL;
}

/* ------------------------------------------------------------ semaphore */

static bool
sampled_until_done(void *arg)
{
	struct crowd *c = arg;
	raise_max(&c->max_in_use, (int)in_use(c->semaphore));
	return atomic_load(&c->completed) >= c->total ||
	       atomic_load(&c->unexpected) > 0;
}

Test(semaphore, never_more_holders_than_permits)
{
	start(2, NULL);
	put_semaphore("gate", 2, 201);
	put_task_def("gated", json_pack("{s:s,s:i}", "semaphore", "gate",
					"responseTimeoutSeconds", 60));
	put_workflow("gated_wf", "gated", NULL);
	start_workflows("gated_wf", 10);
	wait_scheduled("gated", 10);

	enum { WORKERS = 6 };
	struct crowd c = {.queue = "gated",
			  .semaphore = "gate",
			  .permits = 2,
			  .total = 10};
	pthread_mutex_init(&c.mu, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct worker ws[WORKERS];
	for (int i = 0; i < WORKERS; i++) {
		snprintf(ws[i].id, sizeof(ws[i].id), "w%d", i);
		ws[i].c = &c;
		ws[i].base = e2e_server_at(i % 2)->base;
		cr_assert(pthread_create(&ws[i].t, NULL, worker_main, &ws[i]) ==
			  0);
	}
	/* Meanwhile the test samples the server's count of holders. */
	cr_assert(th_wait_until(60000, sampled_until_done, &c),
		  "%d of 10 completed: %s", atomic_load(&c.completed), c.note);
	atomic_store(&c.stop, true);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(ws[i].t, NULL);
	cr_assert_eq(atomic_load(&c.unexpected), 0, "%s", c.note);
	cr_assert_eq(atomic_load(&c.completed), 10);
	cr_assert_leq(atomic_load(&c.max_holding), 2, "workers held %d",
		      atomic_load(&c.max_holding));
	cr_assert_leq(atomic_load(&c.max_in_use), 2, "inUse reached %d",
		      atomic_load(&c.max_in_use));
	cr_assert_geq(atomic_load(&c.max_in_use), 1);
	long long overlap = max_overlap("gated");
	cr_assert_leq(overlap, 2, "%lld tasks were in progress at once",
		      overlap);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"TaskExecutions\""
			    " WHERE \"taskDefName\" = 'gated'"
			    " AND \"status\" = 'COMPLETED'",
			    0, NULL),
		     10);
	/* Every permit is back. */
	cr_assert_eq(in_use("gate"), 0);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"SemaphoreHolders\"", 0,
			    NULL),
		     0);
}

struct poll_probe {
	const char *queue;
	const char *worker;
	json_t *tasks;
};

static bool
polled_one(void *arg)
{
	struct poll_probe *p = arg;
	json_t *t = poll(p->queue, p->worker, 5);
	if (json_array_size(t) == 0) {
		json_decref(t);
		return false;
	}
	p->tasks = t;
	return true;
}

static bool
timed_out(void *arg)
{
	const char *params[] = {arg};
	char *st = th_value(e2e_sql(),
			    "SELECT \"status\" FROM \"TaskExecutions\""
			    " WHERE \"id\" = $1::uuid",
			    1, params);
	bool done = strcmp(st, "TIMED_OUT") == 0;
	free(st);
	return done;
}

Test(semaphore, vanished_worker_permit_returns_with_its_lease)
{
	start(1, NULL);
	put_semaphore("solo", 1, 201);
	put_task_def("lonely",
		     json_pack("{s:s,s:i,s:i}", "semaphore", "solo",
			       "responseTimeoutSeconds", 2, "retryCount", 1));
	put_workflow("lonely_wf", "lonely", NULL);
	start_workflows("lonely_wf", 2);
	wait_scheduled("lonely", 2);

	json_t *a = poll("lonely", "doomed", 5);
	cr_assert_eq(json_array_size(a), 1, "%s", e2e_last_body);
	const char *held = id_of(json_array_get(a, 0));
	cr_assert_eq(poll_n("lonely", "other", 5), 0);

	json_t *s = get_semaphore("solo");
	cr_assert_eq(json_integer_value(json_object_get(s, "inUse")), 1);
	json_t *h = json_array_get(json_object_get(s, "holders"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(h, "taskId")), held);
	cr_assert_str_eq(json_string_value(json_object_get(h, "workerId")),
			 "doomed");
	char before[64];
	snprintf(before, sizeof(before), "%s",
		 json_string_value(json_object_get(h, "leaseExpiresAt")));
	json_decref(s);

	/* A heartbeat renews the permit with the lease. */
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/lonely/tasks/%s/heartbeat",
		 held);
	json_t *hb = e2e_callj("POST", path, 200,
			       json_pack("{s:s}", "workerId", "doomed"));
	json_decref(hb);
	s = get_semaphore("solo");
	h = json_array_get(json_object_get(s, "holders"), 0);
	cr_assert_str_gt(
		json_string_value(json_object_get(h, "leaseExpiresAt")), before,
		"%s", e2e_last_body);
	json_decref(s);

	/* The worker vanishes: no result, no heartbeat.  Within the lease
	 * and a sweep, another task is handed out. */
	struct poll_probe p = {"lonely", "survivor", NULL};
	cr_assert(th_wait_until(WAIT_MS, polled_one, &p),
		  "no task after the vanished worker's lease ran out");
	cr_assert_eq(json_array_size(p.tasks), 1);
	cr_assert_str_neq(id_of(json_array_get(p.tasks, 0)), held);
	/* The permit came back when the lease ran out; the sweeper times
	 * the silent attempt out about then. */
	cr_assert(th_wait_until(WAIT_MS, timed_out, (void *)held),
		  "the vanished worker's task was not timed out");
	s = get_semaphore("solo");
	cr_assert_eq(json_integer_value(json_object_get(s, "inUse")), 1);
	h = json_array_get(json_object_get(s, "holders"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(h, "workerId")),
			 "survivor");
	json_decref(s);
	complete("lonely", "survivor", id_of(json_array_get(p.tasks, 0)));
	cr_assert_eq(in_use("solo"), 0);
	json_decref(p.tasks);
	json_decref(a);
}

Test(semaphore, workflow_task_semaphore_gates_ungated_definition)
{
	start(1, NULL);
	put_semaphore("wfsem", 1, 201);
	put_task_def("plain", json_pack("{s:i}", "responseTimeoutSeconds", 60));
	put_workflow("plain_wf", "plain",
		     json_pack("{s:s}", "semaphore", "wfsem"));
	put_workflow("free_wf", "plain", NULL);
	start_workflows("plain_wf", 3);
	start_workflows("free_wf", 2);
	wait_scheduled("plain", 5);

	/* The two ungated tasks and one gated one. */
	json_t *t = poll("plain", "w", 10);
	cr_assert_eq(json_array_size(t), 3, "%s", e2e_last_body);
	cr_assert_eq(in_use("wfsem"), 1);
	cr_assert_eq(poll_n("plain", "w", 10), 0);
	size_t i;
	json_t *task;
	json_array_foreach (t, i, task)
		complete("plain", "w", id_of(task));
	json_decref(t);
	cr_assert_eq(in_use("wfsem"), 0);
	cr_assert_eq(poll_n("plain", "w", 10), 1);
}

Test(semaphore, terminated_workflow_gives_its_permit_back)
{
	start(1, NULL);
	put_semaphore("solo", 1, 201);
	put_task_def("lonely", json_pack("{s:s,s:i}", "semaphore", "solo",
					 "responseTimeoutSeconds", 600));
	put_workflow("lonely_wf", "lonely", NULL);
	start_workflows("lonely_wf", 2);
	wait_scheduled("lonely", 2);
	json_t *a = poll("lonely", "w", 5);
	cr_assert_eq(json_array_size(a), 1, "%s", e2e_last_body);
	cr_assert_eq(poll_n("lonely", "w", 5), 0);
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/terminate",
		 json_string_value(
			 json_object_get(json_array_get(a, 0), "workflowId")));
	callj_ok("POST", path, 200, json_pack("{s:s}", "reason", "stop"));
	/* Long before the 600 s lease runs out, the sweeper takes the
	 * permit back from the canceled task. */
	struct poll_probe p = {"lonely", "w", NULL};
	cr_assert(th_wait_until(WAIT_MS, polled_one, &p),
		  "the terminated workflow's task kept its permit");
	cr_assert_eq(json_array_size(p.tasks), 1);
	json_decref(p.tasks);
	json_decref(a);
}

Test(semaphore, bad_semaphore_fields_are_rejected)
{
	start(1, NULL);
	expect_invalid("PUT", NS "/task-definitions/t",
		       "{\"name\":\"t\",\"semaphore\":\"\"}", "$.semaphore");
	expect_invalid("PUT", NS "/task-definitions/t",
		       "{\"name\":\"t\",\"semaphore\":7}", "$.semaphore");
	expect_invalid("POST", NS "/workflow-definitions",
		       "{\"name\":\"w\",\"tasks\":[{\"name\":\"t\","
		       "\"taskReferenceName\":\"r\",\"semaphore\":\"\"}]}",
		       "$.tasks[0].semaphore");
	/* Tasks the server runs itself are never gated: naming a semaphore
	 * there is refused, not ignored. */
	expect_invalid("POST", NS "/workflow-definitions",
		       "{\"name\":\"w\",\"tasks\":[{\"name\":\"t\","
		       "\"taskReferenceName\":\"r\",\"type\":\"INLINE\","
		       "\"semaphore\":\"s\",\"inputParameters\":{"
		       "\"evaluatorType\":\"javascript\","
		       "\"expression\":\"1\"}}]}",
		       "$.tasks[0].semaphore");
}

/* A detail at path `at` whose message mentions `words`. */
static void
expect_invalid_saying(const char *method, const char *path, const char *body,
		      const char *at, const char *words)
{
	json_t *v = e2e_call(method, path, body, 400);
	bool found = false;
	size_t i;
	json_t *d;
	/* node-flow's error.details, or Conductor's validationErrors. */
	json_t *list = json_object_get(json_object_get(v, "error"), "details");
	if (!list)
		list = json_object_get(v, "validationErrors");
	json_array_foreach (list, i, d) {
		const char *p = json_string_value(json_object_get(d, "path"));
		const char *m =
			json_string_value(json_object_get(d, "message"));
		found = found ||
			(p && m && strcmp(p, at) == 0 && strstr(m, words));
	}
	cr_assert(found, "%s %s: no detail at %s saying %s: %s", method, path,
		  at, words, e2e_last_body);
	json_decref(v);
}

#define HTTP_TASK(name, ref)                                        \
	"{\"name\":\"" name "\",\"taskReferenceName\":\"" ref "\"," \
	"\"type\":\"HTTP\",\"inputParameters\":{\"http_request\":{" \
	"\"uri\":\"http://127.0.0.1:9/\",\"method\":\"GET\"}}}"

Test(semaphore, system_task_named_like_a_gated_definition_is_refused)
{
	start(1, NULL);
	/* A registered definition with a semaphore, used by an HTTP task
	 * (nested in a SWITCH too): the server runs it, ungated. */
	put_task_def("fetch", json_pack("{s:s}", "semaphore", "s"));
	const char *wf =
		"{\"name\":\"w\",\"tasks\":[{\"name\":\"pick\","
		"\"taskReferenceName\":\"pick\",\"type\":\"SWITCH\","
		"\"evaluatorType\":\"value-param\",\"expression\":\"k\","
		"\"inputParameters\":{\"k\":\"a\"},\"decisionCases\":{\"a\":[" HTTP_TASK(
			"fetch", "inner") "]}}," HTTP_TASK("fetch",
							   "outer") "]}";
	expect_invalid_saying("POST", NS "/workflow-definitions", wf,
			      "$.tasks[1].name", "semaphore s,");
	expect_invalid_saying("POST", NS "/workflow-definitions", wf,
			      "$.tasks[0].decisionCases['a'][0].name",
			      "worker (SIMPLE) tasks only");
	/* The Conductor metadata API says the same. */
	char conductor[4096];
	snprintf(conductor, sizeof(conductor), "[%s]", wf);
	expect_invalid_saying("PUT", "/api/metadata/workflow", conductor,
			      "$[0].tasks[1].name", "semaphore s");
	/* As a worker task it is gated, and fine. */
	callj_ok("POST", NS "/workflow-definitions", 201,
		 json_pack("{s:s,s:[{s:s,s:s}]}", "name", "w_worker", "tasks",
			   "name", "fetch", "taskReferenceName", "f"));

	/* The other order: the workflow first, then the semaphore. */
	json_decref(e2e_call(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"w2\",\"tasks\":[" HTTP_TASK("probe", "p") "]}",
		201));
	json_decref(e2e_call("PUT", NS "/task-definitions/probe",
			     "{\"name\":\"probe\"}", 201));
	expect_invalid_saying("PUT", NS "/task-definitions/probe",
			      "{\"semaphore\":\"s\"}", "$.semaphore",
			      "workflow w2 version 1");
	expect_invalid_saying("POST", "/api/metadata/taskdefs",
			      "[{\"name\":\"ok\"},{\"name\":\"probe\","
			      "\"semaphore\":\"s\"}]",
			      "$[1].semaphore", "$.tasks[0]");
	/* Nothing of a refused list was stored. */
	json_decref(e2e_call("GET", NS "/task-definitions/ok", NULL, 404));
	json_t *d = e2e_call("GET", NS "/task-definitions/probe", NULL, 200);
	cr_assert(json_object_get(d, "semaphore") == NULL ||
			  json_is_null(json_object_get(d, "semaphore")),
		  "%s", e2e_last_body);
	json_decref(d);
}

/* concurrentExecLimit and the rate limit hold back worker tasks only: a
 * task the server runs itself under a definition that has one is refused
 * both ways, never run unlimited. */
Test(concurrency, system_task_named_like_a_limited_definition_is_refused)
{
	start(1, NULL);
	put_task_def("fetch", json_pack("{s:i}", "concurrentExecLimit", 2));
	put_task_def("shape", json_pack("{s:i,s:i}", "rateLimitPerFrequency", 5,
					"rateLimitFrequencyInSeconds", 10));
	expect_invalid_saying(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"w\",\"tasks\":[" HTTP_TASK("fetch", "f") "]}",
		"$.tasks[0].name", "concurrentExecLimit 2,");
	const char *jq = "{\"name\":\"w\",\"tasks\":[{\"name\":\"shape\","
			 "\"taskReferenceName\":\"s\","
			 "\"type\":\"JSON_JQ_TRANSFORM\",\"inputParameters\":"
			 "{\"queryExpression\":\".\"}}]}";
	expect_invalid_saying("POST", NS "/workflow-definitions", jq,
			      "$.tasks[0].name", "rateLimitPerFrequency 5,");
	char conductor[1024];
	snprintf(conductor, sizeof(conductor), "[%s]", jq);
	expect_invalid_saying("PUT", "/api/metadata/workflow", conductor,
			      "$[0].tasks[0].name",
			      "worker (SIMPLE) tasks only");
	/* As worker tasks they are limited, and fine. */
	callj_ok("POST", NS "/workflow-definitions", 201,
		 json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}]}", "name", "w_worker",
			   "tasks", "name", "fetch", "taskReferenceName", "f",
			   "name", "shape", "taskReferenceName", "s"));

	/* The other order: the workflow first, then the limits. */
	json_decref(e2e_call(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"w2\",\"tasks\":[" HTTP_TASK("probe", "p") "]}",
		201));
	json_decref(e2e_call("PUT", NS "/task-definitions/probe",
			     "{\"name\":\"probe\"}", 201));
	expect_invalid_saying("PUT", NS "/task-definitions/probe",
			      "{\"concurrentExecLimit\":3}",
			      "$.concurrentExecLimit", "workflow w2 version 1");
	expect_invalid_saying("PUT", NS "/task-definitions/probe",
			      "{\"concurrentExecLimit\":3,"
			      "\"rateLimitPerFrequency\":4}",
			      "$.rateLimitPerFrequency",
			      "rateLimitPerFrequency 4 cannot hold back");
	expect_invalid_saying("POST", "/api/metadata/taskdefs",
			      "[{\"name\":\"ok\"},{\"name\":\"probe\","
			      "\"rateLimitPerFrequency\":1}]",
			      "$[1].rateLimitPerFrequency", "$.tasks[0]");
	/* 0 is no limit, as in Conductor: accepted. */
	json_decref(e2e_call("PUT", NS "/task-definitions/probe",
			     "{\"concurrentExecLimit\":0,"
			     "\"rateLimitPerFrequency\":0}",
			     200));
	/* Nothing of a refused list was stored. */
	json_decref(e2e_call("GET", NS "/task-definitions/ok", NULL, 404));
	json_t *d = e2e_call("GET", NS "/task-definitions/probe", NULL, 200);
	cr_assert_null(json_object_get(d, "concurrentExecLimit"), "%s",
		       e2e_last_body);
	cr_assert_null(json_object_get(d, "rateLimitPerFrequency"), "%s",
		       e2e_last_body);
	json_decref(d);
}

/* ---------------------------------------------------------- unconfigured */

Test(unconfigured, gates_at_the_default_and_is_listed_while_held)
{
	start(1, NULL);
	put_task_def("orphan", json_pack("{s:s,s:i}", "semaphore", "nobody",
					 "responseTimeoutSeconds", 60));
	put_workflow("orphan_wf", "orphan", NULL);
	start_workflows("orphan_wf", 3);
	wait_scheduled("orphan", 3);

	json_t *t = poll("orphan", "w", 10);
	cr_assert_eq(json_array_size(t), 1,
		     "an unconfigured semaphore must "
		     "gate at 1 permit: %s",
		     e2e_last_body);
	json_t *list = e2e_call("GET", NS "/semaphores", NULL, 200);
	json_t *items = json_object_get(list, "items");
	cr_assert_eq(json_array_size(items), 1, "%s", e2e_last_body);
	json_t *s = json_array_get(items, 0);
	cr_assert_str_eq(json_string_value(json_object_get(s, "name")),
			 "nobody");
	cr_assert(json_is_false(json_object_get(s, "configured")), "%s",
		  e2e_last_body);
	cr_assert_eq(json_integer_value(json_object_get(s, "permits")), 1);
	cr_assert_eq(json_integer_value(json_object_get(s, "inUse")), 1);
	cr_assert(json_is_null(json_object_get(s, "createdAt")));
	json_t *h = json_array_get(json_object_get(s, "holders"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(h, "taskId")),
			 id_of(json_array_get(t, 0)));
	json_decref(list);

	complete("orphan", "w", id_of(json_array_get(t, 0)));
	json_decref(t);
	json_decref(e2e_call("GET", NS "/semaphores/nobody", NULL, 404));
	list = e2e_call("GET", NS "/semaphores", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(list, "items")), 0, "%s",
		     e2e_last_body);
	json_decref(list);
	cr_assert_eq(poll_n("orphan", "w", 10), 1);
}

Test(unconfigured, default_permits_option)
{
	const char *flags[] = {"--semaphore-default-permits", "2", NULL};
	start(1, flags);
	put_task_def("orphan", json_pack("{s:s,s:i}", "semaphore", "nobody",
					 "responseTimeoutSeconds", 60));
	put_workflow("orphan_wf", "orphan", NULL);
	start_workflows("orphan_wf", 4);
	wait_scheduled("orphan", 4);
	cr_assert_eq(poll_n("orphan", "w", 10), 2);
	json_t *s = get_semaphore("nobody");
	cr_assert_eq(json_integer_value(json_object_get(s, "permits")), 2);
	cr_assert_eq(json_integer_value(json_object_get(s, "inUse")), 2);
	json_decref(s);
	/* Configuring it takes over from the default. */
	put_semaphore("nobody", 3, 201);
	cr_assert_eq(poll_n("orphan", "w", 10), 1);
}

/* ------------------------------------------------------------------ rate */

Test(rate, at_most_five_per_window)
{
	start(1, NULL);
	put_task_def("rated",
		     json_pack("{s:i,s:i,s:i}", "rateLimitPerFrequency", 5,
			       "rateLimitFrequencyInSeconds", 1,
			       "responseTimeoutSeconds", 60));
	put_workflow("rated_wf", "rated", NULL);
	start_workflows("rated_wf", 12);
	wait_scheduled("rated", 12);

	/* The first poll of a window gets exactly the window's 5. */
	json_t *t = poll("rated", "w", 10);
	cr_assert_eq(json_array_size(t), 5, "%s", e2e_last_body);
	size_t got = 5, i;
	json_t *task;
	json_array_foreach (t, i, task)
		complete("rated", "w", id_of(task));
	json_decref(t);
	int64_t deadline = th_now_ms() + WAIT_MS;
	while (got < 12 && th_now_ms() < deadline) {
		/* A long-poll: blocked by the limit, it waits. */
		json_t *v =
			e2e_callj("POST", NS "/queues/rated/poll", 200,
				  json_pack("{s:s,s:i,s:i}", "workerId", "w",
					    "count", 10, "waitMs", 200));
		json_t *ts = json_object_get(v, "tasks");
		cr_assert_leq(json_array_size(ts), 5, "%s", e2e_last_body);
		got += json_array_size(ts);
		json_array_foreach (ts, i, task)
			complete("rated", "w", id_of(task));
		json_decref(v);
	}
	cr_assert_eq(got, 12);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT max(\"count\") FROM \"RateLimitBuckets\""
			    " WHERE \"queueName\" = 'default/rated'",
			    0, NULL),
		     5);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT sum(\"count\") FROM \"RateLimitBuckets\""
			    " WHERE \"queueName\" = 'default/rated'",
			    0, NULL),
		     12);
	cr_assert_geq(th_int(e2e_sql(),
			     "SELECT count(*) FROM \"RateLimitBuckets\""
			     " WHERE \"queueName\" = 'default/rated'",
			     0, NULL),
		      3);
}

/* ----------------------------------------------------------- concurrency */

Test(concurrency, limit_caps_tasks_in_progress)
{
	start(1, NULL);
	put_task_def("capped", json_pack("{s:i,s:i}", "concurrentExecLimit", 2,
					 "responseTimeoutSeconds", 60));
	put_workflow("capped_wf", "capped", NULL);
	start_workflows("capped_wf", 10);
	wait_scheduled("capped", 10);

	json_t *t = poll("capped", "w", 10);
	cr_assert_eq(json_array_size(t), 2, "%s", e2e_last_body);
	cr_assert_eq(poll_n("capped", "w", 10), 0);
	/* The Conductor poll shares the limit. */
	json_t *c = e2e_call("GET",
			     "/api/tasks/poll/batch/capped?workerid=c&count=10",
			     NULL, 200);
	cr_assert(json_is_array(c) && json_array_size(c) == 0, "%s",
		  e2e_last_body);
	json_decref(c);
	complete("capped", "w", id_of(json_array_get(t, 0)));
	cr_assert_eq(poll_n("capped", "w", 10), 1);
	json_decref(t);
}

/* ------------------------------------------------------------------ wake */

/* One long-poll on its own thread. */
struct long_poll {
	pthread_t t;
	const char *base;
	const char *queue;
	char *body;
	long status;
	atomic_bool done;
};

static void *
long_poll_main(void *arg)
{
	struct long_poll *lp = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", lp->queue);
	CURL *h = curl_easy_init();
	lp->status = req(h, lp->base, "POST", path,
			 "{\"workerId\":\"late\",\"count\":1,"
			 "\"waitMs\":30000}",
			 &lp->body);
	curl_easy_cleanup(h);
	atomic_store(&lp->done, true);
	return NULL;
}

static void
long_poll_start(struct long_poll *lp, const char *queue)
{
	lp->base = e2e_server()->base;
	lp->queue = queue;
	lp->body = NULL;
	atomic_store(&lp->done, false);
	cr_assert(pthread_create(&lp->t, NULL, long_poll_main, lp) == 0);
}

static bool
long_poll_done(void *arg)
{
	struct long_poll *lp = arg;
	return atomic_load(&lp->done);
}

static bool
one_parked(void *arg)
{
	(void)arg;
	struct th_response r;
	th_http(e2e_server_at(0), "GET", "/metrics", NULL, 0, &r);
	bool ok = r.status == 200 && strstr(r.body, "nodeflow_http_parked 1\n");
	th_response_free(&r);
	return ok;
}

/* Waits (a deadline well inside its 30 s wait) for the long-poll to be
 * answered with one task; returns the task's id (malloc'd). */
static char *
long_poll_task(struct long_poll *lp, const char *why)
{
	cr_assert(th_wait_until(WAIT_MS, long_poll_done, lp),
		  "the long-poll was not answered when %s", why);
	pthread_join(lp->t, NULL);
	cr_assert_eq(lp->status, 200, "%s", lp->body);
	json_t *v = json_loads(lp->body, 0, NULL);
	json_t *ts = json_object_get(v, "tasks");
	cr_assert_eq(json_array_size(ts), 1, "%s", lp->body);
	char *id = strdup(id_of(json_array_get(ts, 0)));
	json_decref(v);
	free(lp->body);
	return id;
}

Test(wake, rate_window_end_answers_a_waiting_poll)
{
	start(1, NULL);
	put_task_def("slow_rate",
		     json_pack("{s:i,s:i,s:i}", "rateLimitPerFrequency", 1,
			       "rateLimitFrequencyInSeconds", 4,
			       "responseTimeoutSeconds", 60));
	put_workflow("slow_rate_wf", "slow_rate", NULL);
	start_workflows("slow_rate_wf", 2);
	wait_scheduled("slow_rate", 2);

	/* The window's one task; the second waits for the next window. */
	cr_assert_eq(poll_n("slow_rate", "w", 2), 1, "%s", e2e_last_body);
	struct long_poll lp;
	long_poll_start(&lp, "slow_rate");
	char *id = long_poll_task(&lp, "the rate-limit window ended");
	complete("slow_rate", "late", id);
	free(id);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT max(\"count\") FROM \"RateLimitBuckets\""
			    " WHERE \"queueName\" = 'default/slow_rate'",
			    0, NULL),
		     1);
}

Test(wake, completion_answers_a_poll_held_by_concurrent_exec_limit)
{
	start(2, NULL);
	put_task_def("one_at_a_time",
		     json_pack("{s:i,s:i}", "concurrentExecLimit", 1,
			       "responseTimeoutSeconds", 60));
	put_workflow("one_wf", "one_at_a_time", NULL);
	start_workflows("one_wf", 2);
	wait_scheduled("one_at_a_time", 2);

	json_t *t = poll("one_at_a_time", "w", 2);
	cr_assert_eq(json_array_size(t), 1, "%s", e2e_last_body);
	struct long_poll lp;
	long_poll_start(&lp, "one_at_a_time");
	cr_assert(th_wait_until(WAIT_MS, one_parked, NULL),
		  "the second poll did not wait");
	/* Completed through the other replica. */
	e2e_use(1);
	complete("one_at_a_time", "w", id_of(json_array_get(t, 0)));
	e2e_use(0);
	json_decref(t);
	char *id = long_poll_task(&lp, "the task in progress completed");
	complete("one_at_a_time", "late", id);
	free(id);
}

/* ------------------------------------------------------------------- api */

Test(api, lifecycle_and_shapes)
{
	start(1, NULL);
	json_t *v = e2e_callj("PUT", NS "/semaphores/db-writers", 201,
			      json_pack("{s:i}", "permits", 3));
	cr_assert_str_eq(json_string_value(json_object_get(v, "name")),
			 "db-writers");
	cr_assert_eq(json_integer_value(json_object_get(v, "permits")), 3);
	cr_assert(json_is_true(json_object_get(v, "configured")));
	cr_assert_eq(json_integer_value(json_object_get(v, "inUse")), 0);
	cr_assert(json_is_array(json_object_get(v, "holders")));
	cr_assert(json_is_string(json_object_get(v, "createdAt")));
	cr_assert(json_is_string(json_object_get(v, "updatedAt")));
	json_decref(v);
	v = e2e_callj(
		"PUT", NS "/semaphores/db-writers", 200,
		json_pack("{s:i,s:s}", "permits", 5, "name", "db-writers"));
	cr_assert_eq(json_integer_value(json_object_get(v, "permits")), 5);
	json_decref(v);
	put_semaphore("alpha", 0, 201);

	v = e2e_call("GET", NS "/semaphores", NULL, 200);
	json_t *items = json_object_get(v, "items");
	cr_assert_eq(json_array_size(items), 2, "%s", e2e_last_body);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(items, 0), "name")),
			 "alpha");
	json_decref(v);
	v = get_semaphore("db-writers");
	cr_assert_eq(json_integer_value(json_object_get(v, "permits")), 5);
	json_decref(v);

	json_decref(e2e_call("DELETE", NS "/semaphores/db-writers", NULL, 204));
	json_decref(e2e_call("DELETE", NS "/semaphores/db-writers", NULL, 404));
	json_decref(e2e_call("GET", NS "/semaphores/db-writers", NULL, 404));
	json_decref(e2e_call("GET", "/v1/ns/nope/semaphores", NULL, 404));
	json_decref(e2e_call("PUT", "/v1/ns/nope/semaphores/x",
			     "{\"permits\":1}", 404));
}

Test(api, validation)
{
	start(1, NULL);
	const char *p = NS "/semaphores/s";
	expect_invalid("PUT", p, "{}", "$.permits");
	expect_invalid("PUT", p, "{\"permits\":-1}", "$.permits");
	expect_invalid("PUT", p, "{\"permits\":1.5}", "$.permits");
	expect_invalid("PUT", p, "{\"permits\":\"2\"}", "$.permits");
	expect_invalid("PUT", p, "{\"permits\":2000000}", "$.permits");
	expect_invalid("PUT", p, "{\"permits\":1,\"name\":\"t\"}", "$.name");
	char longname[300];
	memset(longname, 'n', 201);
	longname[201] = '\0';
	char path[400];
	snprintf(path, sizeof(path), NS "/semaphores/%s", longname);
	expect_invalid("PUT", path, "{\"permits\":1}", "path.name");
	expect_invalid("GET", NS "/semaphores/a%01b", NULL, "path.name");
	json_t *v = e2e_call("PUT", p, "[1]", 400);
	json_decref(v);
	v = e2e_call("PUT", p, "{\"permits\":", 400);
	json_decref(v);
	cr_assert_eq(th_int(e2e_sql(), "SELECT count(*) FROM \"Semaphores\"", 0,
			    NULL),
		     0);
}
