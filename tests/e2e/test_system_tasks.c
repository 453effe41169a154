/*
 * End-to-end tests of the system-task runner on the real nodeflow binary
 * over HTTP: INLINE (JavaScript), JSON_JQ_TRANSFORM and HTTP tasks inside
 * workflows, with a local HTTP server started by the test.
 *
 *   inline      an INLINE task feeds a JSON_JQ_TRANSFORM task; both
 *               complete with Conductor's output shapes; value-param works.
 *   endless     an INLINE script that never ends fails its task with the
 *               timeout reason; the server stays healthy and the next
 *               workflow completes.
 *   jq          a jq program that does not compile fails its task with
 *               jq's message in the reason and in the output's `error`; one
 *               that never ends is halted at the time limit.
 *   http        the local server answers 500 then 200: the first attempt
 *               FAILED with the status in its reason, the retry (per the
 *               task definition) COMPLETED with the response (statusCode,
 *               headers, parsed JSON body, reasonPhrase); the request
 *               carried the method, headers and body asked for.
 *   nul         a response body holding \u0000 is stored (the escape
 *               dropped) and the task completes.
 *   refused     a transport error fails the task; with no task definition
 *               it is not retried (Conductor's rule) and the workflow fails.
 *   inflight    four HTTP tasks are in flight at once: the local server
 *               answers none until it holds all four requests.
 *   validation  definitions missing a system task's required inputs are
 *               refused with the path of the task.
 *   example     examples/orders/ run as its README says (the service URL
 *               pointed at the test's server) ends with the output shown.
 */
#include "e2e.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
	WAIT_MS = 30000, /* a workflow ends by then */
};

#define NS E2E_NS

TestSuite(inline, .fini = e2e_stop);
TestSuite(endless, .fini = e2e_stop);
TestSuite(jq, .fini = e2e_stop);
TestSuite(http, .fini = e2e_stop);
TestSuite(nul, .fini = e2e_stop);
TestSuite(validation, .fini = e2e_stop);
TestSuite(example, .fini = e2e_stop);
TestSuite(refused, .fini = e2e_stop);
TestSuite(inflight, .fini = e2e_stop);
TestSuite(async, .fini = e2e_stop);

/* ---------------------------------------------------------- HTTP helpers */

/* Registers a workflow "name" whose tasks are given (a new reference is
 * taken over). */
static void
put_workflow(const char *name, json_t *tasks)
{
	json_decref(e2e_callj("POST", NS "/workflow-definitions", 201,
			      json_pack("{s:s,s:i,s:o}", "name", name,
					"version", 1, "tasks", tasks)));
}

static void
start_workflow(const char *name, json_t *input, char id[37])
{
	json_t *v =
		e2e_callj("POST", NS "/workflows", 201,
			  json_pack("{s:s,s:o}", "name", name, "input", input));
	const char *s = json_string_value(json_object_get(v, "id"));
	cr_assert_not_null(s, "start: %s", e2e_last_body);
	snprintf(id, 37, "%s", s);
	json_decref(v);
}

struct ended_probe {
	const char *id;
	json_t *wf;
};

static bool
ended(void *arg)
{
	struct ended_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s", p->id);
	json_t *v = e2e_call("GET", path, NULL, 200);
	const char *st = json_string_value(json_object_get(v, "status"));
	if (st && strcmp(st, "RUNNING") != 0) {
		json_decref(p->wf);
		p->wf = v;
		return true;
	}
	json_decref(v);
	return false;
}

/* Waits for the workflow to end; returns it (a new reference). */
static json_t *
wait_ended(const char *id, const char *want_status)
{
	struct ended_probe p = {id, NULL};
	bool ok = th_wait_until(WAIT_MS, ended, &p);
	cr_assert(ok, "workflow %s did not end within %d ms; server log:\n%s",
		  id, WAIT_MS, e2e_log());
	const char *st = json_string_value(json_object_get(p.wf, "status"));
	cr_assert_str_eq(st, want_status, "workflow %s: %s", id, e2e_last_body);
	return p.wf;
}

/* The attempt of the task refName (a borrowed reference). */
static json_t *
task_of(const json_t *wf, const char *ref, int attempt)
{
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   ref) == 0 &&
		    json_integer_value(json_object_get(t, "attempt")) ==
			    attempt)
			return t;
	}
	cr_assert_fail("no task %s attempt %d in %s", ref, attempt,
		       e2e_last_body);
	return NULL;
}

static char *
dump(const json_t *v)
{
	return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
}

static void
expect_json(const json_t *v, const char *want)
{
	char *got = dump(v);
	cr_assert_str_eq(got, want, "got %s, wanted %s", got, want);
	free(got);
}

/* ----------------------------------------------- a local HTTP server */

struct stub {
	int fd;
	int port;
	pthread_t thread;
	atomic_int requests;
	/* answers[i] for request i; the last repeats */
	const char *const *answers;
	size_t n_answers;
	char last_request[8192];
	pthread_mutex_t mu;
	int gather; /* > 0: hold this many requests, then answer them all */
};

static struct stub stub;

/* Reads one request from c into req (NUL-terminated). */
static void
read_request(int c, char *req, size_t size)
{
	size_t len = 0, want = 0;
	for (;;) {
		ssize_t n = read(c, req + len, size - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		req[len] = '\0';
		char *end = strstr(req, "\r\n\r\n");
		if (!end)
			continue;
		if (!want) {
			const char *cl = strcasestr(req, "Content-Length:");
			want = (size_t)(end + 4 - req) +
			       (cl ? strtoul(cl + 15, NULL, 10) : 0);
		}
		if (len >= want || len == size - 1)
			break;
	}
	req[len] = '\0';
}

static void
write_all(int c, const char *a)
{
	size_t alen = strlen(a);
	while (alen) {
		ssize_t n = write(c, a, alen);
		if (n <= 0)
			break;
		a += n;
		alen -= (size_t)n;
	}
}

static void *
stub_gather(struct stub *s)
{
	int held[16];
	int n = 0;
	while (n < s->gather && n < 16) {
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char req[8192];
		read_request(c, req, sizeof(req));
		atomic_fetch_add(&s->requests, 1);
		held[n++] = c;
	}
	for (int i = 0; i < n; i++) {
		write_all(held[i], s->answers[0]);
		close(held[i]);
	}
	return NULL;
}

static void *
stub_main(void *arg)
{
	struct stub *s = arg;
	if (s->gather > 0)
		return stub_gather(s);
	for (;;) {
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char req[8192];
		read_request(c, req, sizeof(req));
		int i = atomic_fetch_add(&s->requests, 1);
		pthread_mutex_lock(&s->mu);
		snprintf(s->last_request, sizeof(s->last_request), "%s", req);
		pthread_mutex_unlock(&s->mu);
		const char *a =
			s->answers[(size_t)i < s->n_answers ? (size_t)i
							    : s->n_answers - 1];
		write_all(c, a);
		close(c);
	}
}

static void
stub_start_gather(const char *const *answers, size_t n, int gather)
{
	memset(&stub, 0, sizeof(stub));
	stub.gather = gather;
	pthread_mutex_init(&stub.mu, NULL);
	stub.answers = answers;
	stub.n_answers = n;
	stub.fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(stub.fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(stub.fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	cr_assert(listen(stub.fd, 16) == 0);
	socklen_t alen = sizeof(a);
	getsockname(stub.fd, (struct sockaddr *)&a, &alen);
	stub.port = ntohs(a.sin_port);
	cr_assert(pthread_create(&stub.thread, NULL, stub_main, &stub) == 0);
}

static void
stub_start(const char *const *answers, size_t n)
{
	stub_start_gather(answers, n, 0);
}

/* An answer with its Content-Length filled in (static storage). */
static const char *
answer(char *buf, size_t size, const char *status, const char *ctype,
       const char *body)
{
	snprintf(buf, size,
		 "HTTP/1.1 %s\r\nContent-Type: %s\r\nX-Stub: yes\r\n"
		 "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
		 status, ctype, strlen(body), body);
	return buf;
}

/* ----------------------------------------------------------------- tests */

Test(inline, script_then_jq)
{
	e2e_start(NULL);
	put_workflow(
		"calc",
		json_pack("[{s:s,s:s,s:s,s:{s:s,s:s,s:s}},"
			  " {s:s,s:s,s:s,s:{s:s,s:s}},"
			  " {s:s,s:s,s:s,s:{s:s,s:s,s:s}}]",
			  "name", "add_one", "taskReferenceName", "js", "type",
			  "INLINE", "inputParameters", "a",
			  "${workflow.input.a}", "evaluatorType", "javascript",
			  "expression",
			  "function e() { return {sum: $.a + 1, who: 'js'} } "
			  "e();",
			  "name", "double", "taskReferenceName", "jq", "type",
			  "JSON_JQ_TRANSFORM", "inputParameters", "x",
			  "${js.output.result}", "queryExpression",
			  ".x.sum * 2, .x.who", "name", "pick",
			  "taskReferenceName", "vp", "type", "INLINE",
			  "inputParameters", "evaluatorType", "value-param",
			  "expression", "v", "v", "${jq.output.result}"));
	char id[37];
	start_workflow("calc", json_pack("{s:i}", "a", 41), id);
	json_t *wf = wait_ended(id, "COMPLETED");
	json_t *js = task_of(wf, "js", 0);
	cr_assert_str_eq(json_string_value(json_object_get(js, "status")),
			 "COMPLETED");
	cr_assert_str_eq(json_string_value(json_object_get(js, "taskType")),
			 "INLINE");
	expect_json(json_object_get(js, "output"),
		    "{\"result\":{\"sum\":42,\"who\":\"js\"}}");
	expect_json(json_object_get(task_of(wf, "jq", 0), "output"),
		    "{\"result\":84,\"resultList\":[84,\"js\"]}");
	expect_json(json_object_get(task_of(wf, "vp", 0), "output"),
		    "{\"result\":84}");
	json_decref(wf);
}

static json_t *
one_inline(const char *ref, const char *expression)
{
	return json_pack("[{s:s,s:s,s:s,s:i,s:{s:s,s:s}}]", "name", ref,
			 "taskReferenceName", ref, "type", "INLINE",
			 "retryCount", 0, "inputParameters", "evaluatorType",
			 "graaljs", "expression", expression);
}

Test(endless, times_out_and_the_server_goes_on)
{
	e2e_start((const char *const[]){"--script-timeout-ms", "300", NULL});
	put_workflow("forever", one_inline("loop", "while (true) {}"));
	put_workflow("fine", one_inline("ok", "(function () { return 7 })"));
	char id[37];
	start_workflow("forever", json_object(), id);
	json_t *wf = wait_ended(id, "FAILED");
	json_t *t = task_of(wf, "loop", 0);
	cr_assert_str_eq(json_string_value(json_object_get(t, "status")),
			 "FAILED");
	cr_assert_str_eq(json_string_value(json_object_get(t, "reason")),
			 "script timed out after 300 ms");
	expect_json(json_object_get(t, "output"),
		    "{\"error\":\"script timed out after 300 ms\"}");
	json_decref(wf);

	/* A thrown error gives its message. */
	put_workflow("thrower", one_inline("boom", "throw new Error('no')"));
	start_workflow("thrower", json_object(), id);
	wf = wait_ended(id, "FAILED");
	cr_assert_str_eq(json_string_value(json_object_get(
				 task_of(wf, "boom", 0), "reason")),
			 "Error: no");
	json_decref(wf);

	json_decref(e2e_call("GET", "/healthz", NULL, 200));
	start_workflow("fine", json_object(), id);
	wf = wait_ended(id, "COMPLETED");
	expect_json(json_object_get(task_of(wf, "ok", 0), "output"),
		    "{\"result\":7}");
	json_decref(wf);
}

static bool
listening(void *arg)
{
	(void)arg;
	return e2e_metric("nodeflow_loop_ticks_total{loop=\"queue-signal\"}") >=
	       1;
}

/*
 * A system task queued by one replica's decider wakes another replica's
 * runner through the queue signal: the first runs no INLINE task
 * (--system-task-threads 0), the second looks on its own once a minute,
 * so the workflow ends within the deadline only if the signal woke it.
 */
Test(inline, another_replicas_runner_is_woken_by_the_queue_signal)
{
	const char *decides[] = {"--system-task-threads", "0", NULL};
	const char *runs[] = {"--system-tasks-interval-ms", "60000",
			      "--decider-interval-ms", "60000", NULL};
	e2e_open();
	e2e_serve(decides);
	e2e_serve(runs);
	e2e_use(1);
	cr_assert(th_wait_until(WAIT_MS, listening, NULL),
		  "the runner's replica never listened");
	e2e_use(0);
	put_workflow("elsewhere",
		     one_inline("js", "(function () { return 5 })"));
	char id[37];
	start_workflow("elsewhere", json_object(), id);
	json_t *wf = wait_ended(id, "COMPLETED");
	expect_json(json_object_get(task_of(wf, "js", 0), "output"),
		    "{\"result\":5}");
	json_decref(wf);
}

Test(jq, program_that_does_not_compile)
{
	e2e_start(NULL);
	put_workflow("badjq", json_pack("[{s:s,s:s,s:s,s:i,s:{s:s,s:i}}]",
					"name", "q", "taskReferenceName", "q",
					"type", "JSON_JQ_TRANSFORM",
					"retryCount", 0, "inputParameters",
					"queryExpression", ".a | {", "a", 1));
	char id[37];
	start_workflow("badjq", json_object(), id);
	json_t *wf = wait_ended(id, "FAILED");
	json_t *t = task_of(wf, "q", 0);
	const char *reason = json_string_value(json_object_get(t, "reason"));
	cr_assert(reason && strstr(reason, "jq program does not compile: "),
		  "%s", e2e_last_body);
	cr_assert(strstr(reason, "syntax error"), "%s", reason);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(t, "output"), "error")),
			 reason);
	const char *wr = json_string_value(json_object_get(wf, "reason"));
	cr_assert(wr && strstr(wr, "jq program does not compile"), "%s",
		  e2e_last_body);
	json_decref(wf);

	/* A program that never ends is halted at the time limit. */
	put_workflow("slowjq",
		     json_pack("[{s:s,s:s,s:s,s:{s:s}}]", "name", "q",
			       "taskReferenceName", "q", "type",
			       "JSON_JQ_TRANSFORM", "inputParameters",
			       "queryExpression", "last(range(1e15))"));
	start_workflow("slowjq", json_object(), id);
	wf = wait_ended(id, "FAILED");
	cr_assert_str_eq(json_string_value(json_object_get(task_of(wf, "q", 0),
							   "reason")),
			 "jq program timed out after 4000 ms");
	json_decref(wf);
}

Test(http, fails_then_retries_and_completes)
{
	static char a500[512], a200[512];
	const char *answers[] = {
		answer(a500, sizeof(a500), "500 Internal Server Error",
		       "text/plain", "try again"),
		answer(a200, sizeof(a200), "200 OK", "application/json",
		       "{\"greeting\":\"hello\",\"n\":[1,2]}"),
	};
	stub_start(answers, 2);
	e2e_start(NULL);
	/* One retry, at once. */
	json_decref(
		e2e_callj("PUT", NS "/task-definitions/call_stub", 201,
			  json_pack("{s:s,s:i,s:s,s:i}", "name", "call_stub",
				    "retryCount", 1, "retryLogic", "FIXED",
				    "retryDelaySeconds", 0)));
	char uri[128];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/hello?x=1", stub.port);
	put_workflow("caller",
		     json_pack("[{s:s,s:s,s:s,s:{s:{s:s,s:s,s:{s:s},s:{s:s},"
			       "s:i,s:i}}}]",
			       "name", "call_stub", "taskReferenceName", "call",
			       "type", "HTTP", "inputParameters",
			       "http_request", "uri", uri, "method", "POST",
			       "headers", "X-Token", "${workflow.input.token}",
			       "body", "name", "${workflow.input.name}",
			       "connectionTimeOut", 5000, "readTimeOut",
			       10000));
	char id[37];
	start_workflow("caller",
		       json_pack("{s:s,s:s}", "token", "t0k", "name", "Ada"),
		       id);
	json_t *wf = wait_ended(id, "COMPLETED");
	cr_assert_eq(atomic_load(&stub.requests), 2);

	json_t *first = task_of(wf, "call", 0);
	cr_assert_str_eq(json_string_value(json_object_get(first, "status")),
			 "FAILED");
	const char *reason =
		json_string_value(json_object_get(first, "reason"));
	cr_assert(reason && strstr(reason, "500") &&
			  strstr(reason, "try again"),
		  "%s", e2e_last_body);
	json_t *resp =
		json_object_get(json_object_get(first, "output"), "response");
	cr_assert_eq(json_integer_value(json_object_get(resp, "statusCode")),
		     500);
	expect_json(json_object_get(resp, "body"), "\"try again\"");

	json_t *second = task_of(wf, "call", 1);
	cr_assert_str_eq(json_string_value(json_object_get(second, "status")),
			 "COMPLETED");
	resp = json_object_get(json_object_get(second, "output"), "response");
	cr_assert_eq(json_integer_value(json_object_get(resp, "statusCode")),
		     200);
	cr_assert_str_eq(
		json_string_value(json_object_get(resp, "reasonPhrase")), "OK");
	expect_json(json_object_get(resp, "body"),
		    "{\"greeting\":\"hello\",\"n\":[1,2]}");
	expect_json(json_object_get(json_object_get(resp, "headers"), "X-Stub"),
		    "[\"yes\"]");
	json_decref(wf);

	pthread_mutex_lock(&stub.mu);
	cr_assert(strncmp(stub.last_request, "POST /hello?x=1 HTTP/1.1", 24) ==
			  0,
		  "%s", stub.last_request);
	cr_assert(strstr(stub.last_request, "X-Token: t0k"), "%s",
		  stub.last_request);
	cr_assert(strstr(stub.last_request, "Content-Type: application/json"),
		  "%s", stub.last_request);
	cr_assert(strstr(stub.last_request, "{\"name\":\"Ada\"}"), "%s",
		  stub.last_request);
	pthread_mutex_unlock(&stub.mu);
}

Test(nul, response_body_with_nul_completes)
{
	static char a200[512];
	const char *answers[] = {
		answer(a200, sizeof(a200), "200 OK", "application/json",
		       "{\"text\":\"a\\u0000b\",\"ok\":true}"),
	};
	stub_start(answers, 1);
	e2e_start(NULL);
	char uri[128];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/nul", stub.port);
	/* The flat form: the request's keys at the top level. */
	put_workflow("nul",
		     json_pack("[{s:s,s:s,s:s,s:i,s:{s:s,s:i,s:i}}]", "name",
			       "get_nul", "taskReferenceName", "get", "type",
			       "HTTP", "retryCount", 0, "inputParameters",
			       "uri", uri, "connectionTimeOut", 5000,
			       "readTimeOut", 10000));
	char id[37];
	start_workflow("nul", json_object(), id);
	json_t *wf = wait_ended(id, "COMPLETED");
	json_t *resp = json_object_get(
		json_object_get(task_of(wf, "get", 0), "output"), "response");
	expect_json(json_object_get(resp, "body"),
		    "{\"ok\":true,\"text\":\"ab\"}");
	cr_assert_eq(atomic_load(&stub.requests), 1);
	json_decref(wf);
}

Test(validation, required_inputs)
{
	e2e_start(NULL);
	const char *bodies[] = {
		"{\"name\":\"v1\",\"tasks\":[{\"name\":\"a\","
		"\"taskReferenceName\":\"a\",\"type\":\"INLINE\","
		"\"inputParameters\":{\"evaluatorType\":\"javascript\"}}]}",
		"{\"name\":\"v2\",\"tasks\":[{\"name\":\"a\","
		"\"taskReferenceName\":\"a\",\"type\":\"INLINE\","
		"\"inputParameters\":{\"evaluatorType\":\"python\","
		"\"expression\":\"1\"}}]}",
		"{\"name\":\"v3\",\"tasks\":[{\"name\":\"a\","
		"\"taskReferenceName\":\"a\",\"type\":\"JSON_JQ_TRANSFORM\","
		"\"inputParameters\":{}}]}",
		"{\"name\":\"v4\",\"tasks\":[{\"name\":\"a\","
		"\"taskReferenceName\":\"a\",\"type\":\"HTTP\","
		"\"inputParameters\":{\"http_request\":{\"method\":\"GET\"}}}]}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		json_t *v = e2e_call("POST", NS "/workflow-definitions",
				     bodies[i], 400);
		cr_assert(strstr(e2e_last_body, "$.tasks[0].inputParameters"),
			  "%s", e2e_last_body);
		json_decref(v);
	}
}

/* ------------------------------------------------------- asyncComplete */

struct open_probe {
	const char *id;
	const char *ref;
	json_t *task; /* the open task with an output, once seen */
};

static bool
open_with_output(void *arg)
{
	struct open_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s", p->id);
	json_t *wf = e2e_call("GET", path, NULL, 200);
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		const char *st =
			json_string_value(json_object_get(t, "status"));
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   p->ref) == 0 &&
		    strcmp(st, "IN_PROGRESS") == 0 &&
		    json_object_size(json_object_get(t, "output")) > 0) {
			p->task = json_incref(t);
			break;
		}
	}
	json_decref(wf);
	return p->task != NULL;
}

Test(async, http_stays_open_until_completed_through_the_api)
{
	static char a200[512];
	const char *answers[] = {
		answer(a200, sizeof(a200), "200 OK", "application/json",
		       "{\"accepted\":true}"),
	};
	stub_start(answers, 1);
	e2e_start(NULL);
	char uri[128];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/submit", stub.port);
	put_workflow("submit",
		     json_pack("[{s:s,s:s,s:s,s:b,s:{s:{s:s,s:s,s:i,s:i}}},"
			       " {s:s,s:s,s:s,s:{s:s,s:s,s:s}}]",
			       "name", "submit_job", "taskReferenceName",
			       "submit", "type", "HTTP", "asyncComplete", 1,
			       "inputParameters", "http_request", "uri", uri,
			       "method", "GET", "connectionTimeOut", 5000,
			       "readTimeOut", 10000, "name", "after",
			       "taskReferenceName", "after", "type", "INLINE",
			       "inputParameters", "evaluatorType", "javascript",
			       "expression", "$.v", "v",
			       "${submit.output.jobId}"));
	char id[37];
	start_workflow("submit", json_object(), id);
	struct open_probe p = {id, "submit", NULL};
	bool ok = th_wait_until(WAIT_MS, open_with_output, &p);
	cr_assert(ok, "task submit never waited with its response; log:\n%s",
		  e2e_log());
	json_t *resp =
		json_object_get(json_object_get(p.task, "output"), "response");
	cr_assert_eq(json_integer_value(json_object_get(resp, "statusCode")),
		     200, "%s", e2e_last_body);
	json_decref(p.task);
	cr_assert_eq(atomic_load(&stub.requests), 1);

	/* Still open: the workflow waits on it. */
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s", id);
	json_t *wf = e2e_call("GET", path, NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(wf, "status")),
			 "RUNNING");
	json_decref(wf);

	snprintf(path, sizeof(path), NS "/workflows/%s/tasks/submit/complete",
		 id);
	json_decref(
		e2e_callj("POST", path, 200,
			  json_pack("{s:{s:s}}", "output", "jobId", "j-42")));
	wf = wait_ended(id, "COMPLETED");
	json_t *t = task_of(wf, "submit", 0);
	cr_assert_str_eq(json_string_value(json_object_get(t, "status")),
			 "COMPLETED");
	/* The given output merged over the response. */
	json_t *out = json_object_get(t, "output");
	cr_assert_str_eq(json_string_value(json_object_get(out, "jobId")),
			 "j-42");
	cr_assert_not_null(json_object_get(out, "response"), "%s",
			   e2e_last_body);
	expect_json(json_object_get(task_of(wf, "after", 0), "output"),
		    "{\"result\":\"j-42\"}");
	json_decref(wf);
	cr_assert_eq(atomic_load(&stub.requests), 1);

	/* A task not declared asyncComplete is no gate. */
	snprintf(path, sizeof(path), NS "/workflows/%s/tasks/after/complete",
		 id);
	json_decref(e2e_call("POST", path, "{}", 409));
	cr_assert(strstr(e2e_last_body, "asyncComplete"), "%s", e2e_last_body);
}

Test(async, a_non_boolean_is_refused)
{
	e2e_start(NULL);
	json_decref(e2e_call("POST", NS "/workflow-definitions",
			     "{\"name\":\"ab\",\"tasks\":[{\"name\":\"a\","
			     "\"taskReferenceName\":\"a\",\"type\":\"INLINE\","
			     "\"asyncComplete\":\"yes\",\"inputParameters\":{"
			     "\"evaluatorType\":\"javascript\","
			     "\"expression\":\"1\"}}]}",
			     400));
	cr_assert(strstr(e2e_last_body, "$.tasks[0].asyncComplete"), "%s",
		  e2e_last_body);
}

static json_t *
load_file(const char *path)
{
	json_error_t je;
	json_t *v = json_load_file(path, 0, &je);
	cr_assert_not_null(v, "%s: %s (run from the repository root)", path,
			   je.text);
	return v;
}

Test(example, orders)
{
	e2e_start(NULL);
	json_decref(
		e2e_callj("POST", NS "/workflow-definitions", 201,
			  load_file("examples/orders/orders.workflow.json")));
	json_t *input = load_file("examples/orders/input.json");
	char url[128];
	snprintf(url, sizeof(url), "%s/healthz", e2e_server()->base);
	json_object_set_new(input, "serviceUrl", json_string(url));
	char id[37];
	start_workflow("orders", input, id);
	json_t *wf = wait_ended(id, "COMPLETED");
	expect_json(json_object_get(wf, "output"),
		    "{\"large\":[\"lamp\",\"desk\"],\"serviceStatus\":200,"
		    "\"total\":210}");
	json_decref(wf);
}

Test(refused, transport_error_fails_without_retry)
{
	/* A port nobody listens on. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	socklen_t alen = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &alen);
	close(fd);
	e2e_start(NULL);
	char uri[128];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/", ntohs(a.sin_port));
	put_workflow("refused",
		     json_pack("[{s:s,s:s,s:s,s:{s:{s:s,s:i}}}]", "name",
			       "nobody", "taskReferenceName", "call", "type",
			       "HTTP", "inputParameters", "http_request", "uri",
			       uri, "connectionTimeOut", 5000));
	char id[37];
	start_workflow("refused", json_object(), id);
	json_t *wf = wait_ended(id, "FAILED");
	cr_assert_eq(json_array_size(json_object_get(wf, "tasks")), 1, "%s",
		     e2e_last_body);
	json_t *t = task_of(wf, "call", 0);
	const char *reason = json_string_value(json_object_get(t, "reason"));
	cr_assert(reason && strstr(reason, "could not call http://127.0.0.1:"),
		  "%s", e2e_last_body);
	json_decref(wf);
}

Test(inflight, four_requests_at_once)
{
	static char a200[256];
	const char *answers[] = {
		answer(a200, sizeof(a200), "200 OK", "text/plain", "together"),
	};
	stub_start_gather(answers, 1, 4);
	e2e_start(NULL);
	char uri[128];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/", stub.port);
	put_workflow("fan", json_pack("[{s:s,s:s,s:s,s:{s:s,s:i,s:i}}]", "name",
				      "wait", "taskReferenceName", "call",
				      "type", "HTTP", "inputParameters", "uri",
				      uri, "connectionTimeOut", 5000,
				      "readTimeOut", WAIT_MS));
	char ids[4][37];
	for (int i = 0; i < 4; i++)
		start_workflow("fan", json_object(), ids[i]);
	for (int i = 0; i < 4; i++) {
		json_t *wf = wait_ended(ids[i], "COMPLETED");
		expect_json(
			json_object_get(
				json_object_get(
					json_object_get(task_of(wf, "call", 0),
							"output"),
					"response"),
				"body"),
			"\"together\"");
		json_decref(wf);
	}
}

/* A request in flight holds a short lease, renewed while it lasts: the
 * requests of a runner that died are retried after that short lease, not
 * after the longest timeout an HTTP task may have. */
static PGconn *lease_conn;
static const char *lease_wf;
static char lease_seen[64];

static bool
lease_renewed(void *arg)
{
	(void)arg;
	const char *params[] = {lease_wf, lease_seen};
	return th_int(lease_conn,
		      "SELECT count(*) FROM \"TaskQueues\""
		      " WHERE \"workflowId\" = $1::uuid"
		      "   AND \"leaseExpiresAt\" > $2::timestamptz",
		      2, params) == 1;
}

static bool
one_request(void *arg)
{
	(void)arg;
	return atomic_load(&stub.requests) >= 1;
}

Test(inflight, a_long_request_keeps_a_short_renewed_lease)
{
	static char a200[256];
	const char *answers[] = {
		answer(a200, sizeof(a200), "200 OK", "text/plain", "late"),
	};
	stub_start_gather(answers, 1, 2); /* held until a second arrives */
	e2e_start(NULL);
	char uri[128];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/", stub.port);
	put_workflow("slowcall",
		     json_pack("[{s:s,s:s,s:s,s:{s:s,s:i,s:i}}]", "name",
			       "wait", "taskReferenceName", "call", "type",
			       "HTTP", "inputParameters", "uri", uri,
			       "connectionTimeOut", 5000, "readTimeOut",
			       50000));
	char first[37], second[37];
	start_workflow("slowcall", json_object(), first);
	cr_assert(th_wait_until(WAIT_MS, one_request, NULL),
		  "the request never arrived");

	lease_conn = th_connect(e2e_db()->url);
	lease_wf = first;
	const char *params[] = {first};
	long long left =
		th_int(lease_conn,
		       "SELECT ceil(extract(epoch FROM"
		       " \"leaseExpiresAt\" - now()))::bigint"
		       " FROM \"TaskQueues\" WHERE \"workflowId\" = $1::uuid"
		       "   AND \"leasedBy\" IS NOT NULL",
		       1, params);
	cr_assert(left > 0 && left <= 31,
		  "an HTTP task in flight is leased for %lld s", left);
	char *seen =
		th_value(lease_conn,
			 "SELECT \"leaseExpiresAt\"::text FROM \"TaskQueues\""
			 " WHERE \"workflowId\" = $1::uuid",
			 1, params);
	snprintf(lease_seen, sizeof(lease_seen), "%s", seen);
	free(seen);
	cr_assert(th_wait_until(WAIT_MS, lease_renewed, NULL),
		  "the lease of a request in flight was not renewed");
	PQfinish(lease_conn);

	start_workflow("slowcall", json_object(), second); /* releases both */
	json_t *wf = wait_ended(first, "COMPLETED");
	json_decref(wf);
	wf = wait_ended(second, "COMPLETED");
	json_decref(wf);
}
