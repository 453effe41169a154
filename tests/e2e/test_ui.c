/*
 * End-to-end tests of the dashboard on the real nodeflow binary:
 *
 *   files        GET / answers the embedded index.html, /ui/{file} the
 *                rest with their types; an ETag revalidates to 304; an
 *                unknown file is 404 JSON; nothing is loaded from elsewhere.
 *   namespaces   GET /v1/namespaces lists every namespace, by name.
 *   queues       GET /v1/ns/{ns}/queues: depth, in-flight and the workers'
 *                last polls (from "WorkerPolls") per queue; 404 for an
 *                unknown namespace.
 *   stats        GET /v1/ns/{ns}/stats: per-minute started, completed and
 *                failed, slowest and most-failing definitions; 400 for a
 *                window out of range.  An execution started before the
 *                window and ended in it counts by the minute it ended.
 *   browser_*    tests/ui/dashboard.test.mjs in Debian's headless chromium
 *                (playwright-core, tests/ui/package-lock.json, installed by
 *                tests/run.sh), one group of its scenarios each: the list
 *                (filters, search, back button, the keyboard, live arrivals
 *                that do not move the rows), the live detail page and
 *                sub-workflow links, the streams as server-sent events and
 *                their reconnection (the banner, Last-Event-ID), the actions
 *                and the definition editor, what a page keeps of a long
 *                loop (bounded), and every page (NODEFLOW_UI_SCREENSHOTS=DIR
 *                saves them).
 *   browser_big  the first page of a list of 100,000 executions.
 *
 * Every test gets its own database and server.  Waits are deadlines.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS     "/v1/ns/default"
#define UI_DIR NF_SOURCE_ROOT "/tests/ui"

enum { WAIT_MS = 20000, NODE_DEADLINE_MS = 170000, OUT_SIZE = 65536 };

/* A scenario takes seconds; the deadlines leave room for a machine that
 * runs several suites at once. */
TestSuite(ui, .init = e2e_setup, .fini = e2e_stop, .timeout = 200);

/* ------------------------------------------------------------- the files */

static char *
header_value(const char *headers, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = headers; p && *p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1;
			while (*v == ' ')
				v++;
			size_t len = strcspn(v, "\r\n");
			return strndup(v, len);
		}
	}
	return NULL;
}

Test(ui, files)
{
	struct th_response r;
	th_http(e2e_server(), "GET", "/", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strncmp(r.content_type, "text/html", 9) == 0, "%s",
		  r.content_type);
	cr_assert(strstr(r.body, "/ui/app.js"));
	char *csp = header_value(r.headers, "Content-Security-Policy");
	cr_assert(csp && strstr(csp, "default-src 'self'"), "%s", r.headers);
	free(csp);
	th_response_free(&r);

	const char *files[][2] = {
		{"/ui/app.js", "text/javascript"},
		{"/ui/style.css", "text/css"},
		{"/ui/favicon.svg", "image/svg+xml"},
		{"/ui/graph.js", "text/javascript"},
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		th_http(e2e_server(), "GET", files[i][0], NULL, 0, &r);
		cr_assert_eq(r.status, 200, "%s", files[i][0]);
		cr_assert(strncmp(r.content_type, files[i][1],
				  strlen(files[i][1])) == 0,
			  "%s: %s", files[i][0], r.content_type);
		cr_assert(r.body_len > 0);
		/* Nothing from elsewhere: no absolute URL is fetched. */
		cr_assert_null(strstr(r.body, "import 'http"), "%s",
			       files[i][0]);
		th_response_free(&r);
	}

	th_http(e2e_server(), "GET", "/ui/app.js", NULL, 0, &r);
	char *etag = header_value(r.headers, "ETag");
	char *cache = header_value(r.headers, "Cache-Control");
	cr_assert(etag && etag[0] == '"', "%s", r.headers);
	cr_assert(cache && strcmp(cache, "no-cache") == 0);
	th_response_free(&r);
	free(cache);

	/* Revalidation: the same ETag answers 304 without a body.  The
	 * harness sends no custom header, so curl is asked directly. */
	char cmd[512], out[256] = "";
	snprintf(cmd, sizeof(cmd),
		 "curl -s -o /dev/null -w '%%{http_code}' -H 'If-None-Match: "
		 "%s' %s/ui/app.js",
		 etag, e2e_server()->base);
	FILE *p = popen(cmd, "r");
	cr_assert(p);
	cr_assert(fgets(out, sizeof(out), p));
	pclose(p);
	cr_assert_str_eq(out, "304");
	free(etag);

	json_t *v = e2e_call("GET", "/ui/nope.js", NULL, 404);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(v, "error"), "code")),
			 "not_found");
	json_decref(v);
	json_decref(e2e_call("POST", "/", "{}", 405));
}

/* ------------------------------------------------------------ summaries */

Test(ui, namespaces)
{
	json_decref(e2e_call("PUT", "/v1/namespaces/zeta", NULL, 201));
	json_decref(e2e_call("PUT", "/v1/namespaces/alpha", NULL, 201));
	json_t *v = e2e_call("GET", "/v1/namespaces", NULL, 200);
	json_t *items = json_object_get(v, "items");
	cr_assert_eq(json_array_size(items), 3, "%s",
		     json_dumps(v, JSON_COMPACT));
	const char *want[] = {"alpha", "default", "zeta"};
	for (size_t i = 0; i < 3; i++) {
		json_t *n = json_array_get(items, i);
		cr_assert_str_eq(json_string_value(json_object_get(n, "name")),
				 want[i]);
		cr_assert(json_is_string(json_object_get(n, "createdAt")));
	}
	json_decref(v);
}

static json_t *
queue_named(json_t *v, const char *name)
{
	json_t *q;
	size_t i;
	json_array_foreach (json_object_get(v, "items"), i, q) {
		if (strcmp(json_string_value(json_object_get(q, "name")),
			   name) == 0)
			return q;
	}
	return NULL;
}

static bool
worker_seen(void *arg)
{
	(void)arg;
	json_t *v = e2e_call("GET", NS "/queues", NULL, 200);
	json_t *q = queue_named(v, "work");
	bool ok = q && json_array_size(json_object_get(q, "workers")) == 1 &&
		  json_integer_value(json_object_get(q, "depth")) == 2 &&
		  json_integer_value(json_object_get(q, "inFlight")) == 1;
	json_decref(v);
	return ok;
}

Test(ui, queues)
{
	json_decref(e2e_call(
		"PUT", NS "/task-definitions/work",
		"{\"name\":\"work\",\"responseTimeoutSeconds\":60}", 201));
	json_decref(e2e_call("PUT", NS "/task-definitions/idle",
			     "{\"name\":\"idle\"}", 201));
	json_decref(
		e2e_call("POST", NS "/workflow-definitions",
			 "{\"name\":\"wf\",\"version\":1,\"tasks\":[{\"name\":"
			 "\"work\",\"taskReferenceName\":\"w\",\"type\":"
			 "\"SIMPLE\"}]}",
			 201));
	for (int i = 0; i < 3; i++)
		json_decref(e2e_call("POST", NS "/workflows",
				     "{\"name\":\"wf\"}", 201));
	/* Three queued; a worker leases one. */
	int leased = 0;
	int64_t end = th_now_ms() + WAIT_MS;
	while (!leased && th_now_ms() < end) {
		json_t *p = e2e_call("POST", NS "/queues/work/poll",
				     "{\"workerId\":\"w-1\",\"count\":1}", 200);
		leased = (int)json_array_size(json_object_get(p, "tasks"));
		json_decref(p);
	}
	cr_assert_eq(leased, 1);
	/* Polls are recorded in batches, every second; the other two tasks
	 * are enqueued as their workflows are first evaluated. */
	cr_assert(th_wait_until(WAIT_MS, worker_seen, NULL));
	json_t *v = e2e_call("GET", NS "/queues", NULL, 200);
	json_t *q = queue_named(v, "work");
	cr_assert_eq(json_integer_value(json_object_get(q, "depth")), 2);
	cr_assert_eq(json_integer_value(json_object_get(q, "inFlight")), 1);
	cr_assert(json_is_false(json_object_get(q, "capped")));
	json_t *w = json_array_get(json_object_get(q, "workers"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(w, "workerId")),
			 "w-1");
	cr_assert(json_is_string(json_object_get(w, "lastPollAt")));
	cr_assert_geq(json_integer_value(json_object_get(w, "pollCount")), 1);
	json_t *idle = queue_named(v, "idle");
	cr_assert(idle, "a task definition without work is a queue too");
	cr_assert_eq(json_integer_value(json_object_get(idle, "depth")), 0);
	cr_assert_eq(json_array_size(json_object_get(idle, "workers")), 0);
	json_decref(v);
	json_decref(e2e_call("GET", "/v1/ns/nope/queues", NULL, 404));
}

static bool
two_ended(void *arg)
{
	(void)arg;
	json_t *v = e2e_call("GET", NS "/workflows?status=COMPLETED,FAILED",
			     NULL, 200);
	bool ok = json_array_size(json_object_get(v, "items")) == 2;
	json_decref(v);
	return ok;
}

static bool
two_ended_any(void *arg)
{
	(void)arg;
	return th_int(e2e_sql(),
		      "SELECT count(*) FROM \"WorkflowExecutions\""
		      " WHERE \"endedAt\" IS NOT NULL",
		      0, NULL) == 2;
}

Test(ui, stats)
{
	json_decref(e2e_call(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"ok\",\"version\":1,\"tasks\":[{\"name\":\"n\","
		"\"taskReferenceName\":\"n\",\"type\":\"NOOP\"}]}",
		201));
	json_decref(e2e_call(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"bad\",\"version\":1,\"tasks\":[{\"name\":\"t\","
		"\"taskReferenceName\":\"t\",\"type\":\"TERMINATE\","
		"\"inputParameters\":{\"terminationStatus\":\"FAILED\"}}]}",
		201));
	json_decref(e2e_call(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"gate\",\"version\":1,\"tasks\":[{\"name\":\"g\","
		"\"taskReferenceName\":\"g\",\"type\":\"WAIT\"}]}",
		201));
	json_decref(
		e2e_call("POST", NS "/workflows", "{\"name\":\"ok\"}", 201));
	json_decref(
		e2e_call("POST", NS "/workflows", "{\"name\":\"bad\"}", 201));
	json_decref(
		e2e_call("POST", NS "/workflows", "{\"name\":\"gate\"}", 201));
	cr_assert(th_wait_until(WAIT_MS, two_ended, NULL));

	json_t *v = e2e_call("GET", NS "/stats?minutes=5", NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(v, "minutes")), 5);
	cr_assert(json_is_false(json_object_get(v, "sampled")));
	json_t *buckets = json_object_get(v, "buckets");
	cr_assert_eq(json_array_size(buckets), 5);
	long started = 0, completed = 0, failed = 0;
	json_t *b;
	size_t i;
	json_array_foreach (buckets, i, b) {
		cr_assert(json_is_string(json_object_get(b, "at")));
		started += json_integer_value(json_object_get(b, "started"));
		completed +=
			json_integer_value(json_object_get(b, "completed"));
		failed += json_integer_value(json_object_get(b, "failed"));
	}
	cr_assert_eq(started, 3);
	cr_assert_eq(completed, 1);
	cr_assert_eq(failed, 1);
	json_t *mf = json_object_get(v, "mostFailing");
	cr_assert_eq(json_array_size(mf), 1);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(mf, 0), "name")),
			 "bad");
	cr_assert_eq(json_integer_value(
			     json_object_get(json_array_get(mf, 0), "failed")),
		     1);
	json_t *slow = json_object_get(v, "slowest");
	cr_assert_eq(json_array_size(slow), 2, "ended ones only");
	cr_assert(json_is_number(
		json_object_get(json_array_get(slow, 0), "avgSeconds")));
	json_decref(v);

	v = e2e_call("GET", NS "/stats", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(v, "buckets")), 60);
	json_decref(v);
	json_decref(e2e_call("GET", NS "/stats?minutes=0", NULL, 400));
	json_decref(e2e_call("GET", NS "/stats?minutes=1441", NULL, 400));
	json_decref(e2e_call("GET", "/v1/ns/nope/stats", NULL, 404));
}

static bool
two_gates_open(void *arg)
{
	(void)arg;
	return th_int(e2e_sql(),
		      "SELECT count(*) FROM \"TaskExecutions\""
		      " WHERE \"refName\" = 'g' AND \"status\" = 'IN_PROGRESS'",
		      0, NULL) == 2;
}

/* An execution started before the window and ended in it is counted as
 * completed (or failed) in the minute it ended, and not as started. */
Test(ui, stats_count_by_end)
{
	json_decref(e2e_call(
		"POST", NS "/workflow-definitions",
		"{\"name\":\"gate\",\"version\":1,\"tasks\":[{\"name\":\"g\","
		"\"taskReferenceName\":\"g\",\"type\":\"WAIT\"}]}",
		201));
	json_t *a =
		e2e_call("POST", NS "/workflows", "{\"name\":\"gate\"}", 201);
	json_t *b =
		e2e_call("POST", NS "/workflows", "{\"name\":\"gate\"}", 201);
	char ida[37], idb[37];
	snprintf(ida, sizeof(ida), "%s",
		 json_string_value(json_object_get(a, "id")));
	snprintf(idb, sizeof(idb), "%s",
		 json_string_value(json_object_get(b, "id")));
	json_decref(a);
	json_decref(b);
	cr_assert(th_wait_until(WAIT_MS, two_gates_open, NULL));
	/* Both started 20 minutes ago: outside a 2-minute window. */
	th_exec(e2e_sql(),
		"UPDATE \"WorkflowExecutions\""
		" SET \"startedAt\" = \"startedAt\" - interval '20 minutes'");
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tasks/g/complete", ida);
	json_decref(e2e_call("POST", path, "{}", 200));
	snprintf(path, sizeof(path), NS "/workflows/%s/terminate", idb);
	json_decref(e2e_call("POST", path, "{\"reason\":\"enough\"}", 200));
	cr_assert(th_wait_until(WAIT_MS, two_ended_any, NULL));

	json_t *v = e2e_call("GET", NS "/stats?minutes=2", NULL, 200);
	long started = 0, completed = 0, failed = 0;
	json_t *bk;
	size_t i;
	json_array_foreach (json_object_get(v, "buckets"), i, bk) {
		started += json_integer_value(json_object_get(bk, "started"));
		completed +=
			json_integer_value(json_object_get(bk, "completed"));
		failed += json_integer_value(json_object_get(bk, "failed"));
	}
	char *text = json_dumps(v, JSON_COMPACT);
	cr_assert_eq(started, 0, "%s", text);
	cr_assert_eq(completed, 1, "%s", text);
	cr_assert_eq(failed, 1, "%s", text);
	json_t *slow = json_array_get(json_object_get(v, "slowest"), 0);
	cr_assert_eq(json_integer_value(json_object_get(slow, "count")), 2,
		     "%s", text);
	cr_assert_geq(json_number_value(json_object_get(slow, "avgSeconds")),
		      1200.0, "%s", text);
	json_t *mf = json_array_get(json_object_get(v, "mostFailing"), 0);
	cr_assert_eq(json_integer_value(json_object_get(mf, "total")), 2, "%s",
		     text);
	cr_assert_eq(json_integer_value(json_object_get(mf, "failed")), 1, "%s",
		     text);
	free(text);
	json_decref(v);
}

/* -------------------------------------------------------------- browser */

/* Runs dashboard.test.mjs with the scenarios under a deadline; returns its
 * exit status (-1 when killed) with its output in out. */
static int
run_dashboard(const char *const *scenarios, char *out, size_t size)
{
	struct stat st;
	cr_assert(stat(UI_DIR "/node_modules/playwright-core", &st) == 0,
		  "playwright-core is not installed in " UI_DIR
		  "/node_modules (tests/run.sh installs it)");
	cr_assert(access("/usr/bin/chromium", X_OK) == 0 || getenv("CHROMIUM"),
		  "chromium is not installed (tools/bootstrap.sh deps)");
	int fds[2];
	cr_assert(pipe(fds) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		if (chdir(UI_DIR) != 0)
			_exit(126);
		setenv("NODEFLOW_URL", e2e_server()->base, 1);
		const char *argv[16] = {"node", "dashboard.test.mjs"};
		int n = 2;
		for (; scenarios[n - 2] && n < 15; n++)
			argv[n] = scenarios[n - 2];
		argv[n] = NULL;
		execvp("node", (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	size_t len = 0;
	out[0] = '\0';
	int64_t deadline = th_now_ms() + NODE_DEADLINE_MS;
	bool killed = false;
	for (;;) {
		int64_t left = deadline - th_now_ms();
		if (left <= 0) {
			kill(pid, SIGKILL);
			killed = true;
			break;
		}
		struct pollfd p = {fds[0], POLLIN, 0};
		int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (r <= 0)
			continue;
		char buf[4096];
		ssize_t got = read(fds[0], buf, sizeof(buf));
		if (got <= 0)
			break;
		if (len + (size_t)got >= size) {
			size_t keep = size / 2;
			memmove(out, out + len - keep, keep);
			len = keep;
		}
		memcpy(out + len, buf, (size_t)got);
		len += (size_t)got;
		out[len] = '\0';
	}
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (killed)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void
browser(const char *const *scenarios)
{
	static char out[OUT_SIZE];
	int rc = run_dashboard(scenarios, out, sizeof(out));
	printf("%s", out);
	cr_assert_eq(rc, 0, "dashboard.test.mjs exited %d:\n%s", rc, out);
}

Test(ui, browser_list)
{
	const char *s[] = {"list", NULL};
	browser(s);
}

Test(ui, browser_live)
{
	const char *s[] = {"live", "between", NULL};
	browser(s);
}

Test(ui, browser_links)
{
	const char *s[] = {"subflow", "sse", "reconnect", NULL};
	browser(s);
}

Test(ui, browser_actions)
{
	const char *s[] = {"retry", "definitions", NULL};
	browser(s);
}

Test(ui, browser_bounded)
{
	const char *s[] = {"ended", "bounded", NULL};
	browser(s);
}

Test(ui, browser_pages)
{
	const char *s[] = {"pages", NULL};
	browser(s);
}

Test(ui, browser_big)
{
	th_exec(e2e_sql(),
		"INSERT INTO \"WorkflowExecutions\" (\"namespaceId\","
		" \"defName\", \"defVersion\", \"status\","
		" \"startedAt\", \"updatedAt\", \"endedAt\")"
		" SELECT n.\"id\", 'bulk_' || (g % 7), 1,"
		" CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,"
		" now() - g * interval '1 second',"
		" now(), now() - g * interval '1 second' + interval '2 seconds'"
		" FROM \"Namespaces\" n, generate_series(1, 100000) g"
		" WHERE n.\"name\" = 'default'");
	th_exec(e2e_sql(), "ANALYZE \"WorkflowExecutions\"");
	const char *s[] = {"big", NULL};
	browser(s);
	/* The statistics read the last hour of it (the window has moved on
	 * since the rows were written, by as long as the browser took). */
	json_t *v = e2e_call("GET", NS "/stats", NULL, 200);
	long started = 0;
	json_t *b;
	size_t i;
	json_array_foreach (json_object_get(v, "buckets"), i, b)
		started += json_integer_value(json_object_get(b, "started"));
	cr_assert_geq(started, 2000);
	cr_assert_leq(started, 3601);
	json_decref(v);
}
