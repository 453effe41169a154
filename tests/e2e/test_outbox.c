/*
 * End-to-end tests of the outbox on the real nodeflow binary over HTTP:
 * sinks, status listeners, the relay and the dead letter, against a local
 * HTTP receiver started by the test (it can be told to fail).
 *
 *   retry        an EVENT task's event reaches a webhook sink that fails
 *                twice: three deliveries of the same event id, one success,
 *                each signed with a valid HMAC; the row is published after
 *                three attempts.
 *   dead         a sink that always fails dead-letters the event after
 *                --outbox-max-attempts; it is listed by the dead-letter API
 *                (the dashboard's shape); a replay after the receiver
 *                recovers delivers it.  An event naming no sink is
 *                dead-lettered at once with a clear lastError.
 *   listener     a status listener for COMPLETED hears the completion of the
 *                workflow it listens to and nothing of another.
 *   transaction  the outbox row of a status change is written by the change's
 *                transaction: rolled back, none; committed, one.
 *   replicas     two servers on one database deliver every event exactly
 *                once.
 *   retention    dead-lettered rows older than
 *                --outbox-dead-letter-retention-hours are deleted by the
 *                relay, younger ones kept, as published rows past
 *                --outbox-retention-hours; with 0 the dead letter is kept.
 *   api          sinks and listeners: PUT, GET (never the secret), DELETE,
 *                and the validation errors; a Conductor definition's
 *                workflowStatusListenerEnabled/Sink makes its listener.
 */
#include "e2e.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { WAIT_MS = 30000, MAX_HITS = 512 };

#define NS     "/v1/ns/default"
#define SECRET "s3cret"

static const char *const fast[] = {"--outbox-backoff-ms",
				   "50",
				   "--outbox-backoff-max-ms",
				   "200",
				   "--outbox-interval-ms",
				   "100",
				   "--outbox-max-attempts",
				   "3",
				   NULL};

/* ------------------------------------------------------------- fixtures */

TestSuite(retry, .fini = e2e_stop);
TestSuite(dead, .fini = e2e_stop);
TestSuite(listener, .fini = e2e_stop);
TestSuite(transaction, .fini = e2e_stop);
TestSuite(replicas, .fini = e2e_stop);
TestSuite(api, .fini = e2e_stop);
TestSuite(retention, .fini = e2e_stop);

/* ---------------------------------------------------------- HTTP helpers */

/* A workflow "name" of one EVENT task publishing to sink. */
static void
put_event_workflow(const char *name, const char *sink)
{
	json_decref(
		e2e_callj("POST", NS "/workflow-definitions", 201,
			  json_pack("{s:s,s:i,s:[{s:s,s:s,s:s,s:s,s:{s:s}}]}",
				    "name", name, "version", 1, "tasks", "name",
				    "ev", "taskReferenceName", "ev", "type",
				    "EVENT", "sink", sink, "inputParameters",
				    "k", "${workflow.input.k}")));
}

static void
start_workflow(const char *name, const char *k, char id[37])
{
	json_t *v = e2e_callj(
		"POST", NS "/workflows", 201,
		json_pack("{s:s,s:{s:s}}", "name", name, "input", "k", k));
	const char *s = json_string_value(json_object_get(v, "id"));
	cr_assert_not_null(s, "start: %s", e2e_last_body);
	snprintf(id, 37, "%s", s);
	json_decref(v);
}

static bool
completed(void *arg)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s", (const char *)arg);
	json_t *v = e2e_call("GET", path, NULL, 200);
	bool done = strcmp(json_string_value(json_object_get(v, "status")),
			   "COMPLETED") == 0;
	json_decref(v);
	return done;
}

static void
wait_completed(const char *id)
{
	cr_assert(th_wait_until(WAIT_MS, completed, (void *)id),
		  "workflow %s did not complete", id);
}

/* ------------------------------------------------- the local receiver */

struct hit {
	char path[32];
	long long event_id;
	char event_type[48];
	char signature[160];
	char *body;
	int status; /* what the receiver answered */
};

static struct {
	int fd;
	int port;
	pthread_t thread;
	pthread_mutex_t mu;
	struct hit hits[MAX_HITS];
	int nhits;
	int flaky_failures; /* /flaky answers 500 this many more times */
	bool down;          /* /down answers 503 while set */
} rx = {.mu = PTHREAD_MUTEX_INITIALIZER};

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
header(const char *req, const char *name, char *out, size_t size)
{
	out[0] = '\0';
	char pat[64];
	snprintf(pat, sizeof(pat), "\r\n%s:", name);
	const char *h = strcasestr(req, pat);
	if (!h)
		return;
	h += strlen(pat);
	while (*h == ' ')
		h++;
	size_t n = strcspn(h, "\r\n");
	snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), h);
}

static void *
rx_main(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(rx.fd, NULL, NULL);
		if (c < 0)
			return NULL;
		static char req[65536];
		read_request(c, req, sizeof(req));
		struct hit h = {0};
		sscanf(req, "POST %31s", h.path);
		char id[32];
		header(req, "X-NodeFlow-Event-Id", id, sizeof(id));
		h.event_id = atoll(id);
		header(req, "X-NodeFlow-Event-Type", h.event_type,
		       sizeof(h.event_type));
		header(req, "X-NodeFlow-Signature", h.signature,
		       sizeof(h.signature));
		const char *b = strstr(req, "\r\n\r\n");
		h.body = strdup(b ? b + 4 : "");
		pthread_mutex_lock(&rx.mu);
		h.status = 200;
		if (strcmp(h.path, "/flaky") == 0 && rx.flaky_failures > 0) {
			rx.flaky_failures--;
			h.status = 500;
		} else if (strcmp(h.path, "/down") == 0 && rx.down) {
			h.status = 503;
		}
		if (rx.nhits < MAX_HITS)
			rx.hits[rx.nhits++] = h;
		else
			free(h.body);
		pthread_mutex_unlock(&rx.mu);
		char answer[256];
		const char *text = h.status == 200   ? "OK"
				   : h.status == 500 ? "Internal Server Error"
						     : "Service Unavailable";
		const char *body = h.status == 200 ? "{}" : "try later";
		snprintf(answer, sizeof(answer),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
			 "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
			 h.status, text, strlen(body), body);
		ssize_t w = write(c, answer, strlen(answer));
		(void)w;
		close(c);
	}
}

static void
rx_start(void)
{
	rx.fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(rx.fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(rx.fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	cr_assert(listen(rx.fd, 64) == 0);
	socklen_t alen = sizeof(a);
	getsockname(rx.fd, (struct sockaddr *)&a, &alen);
	rx.port = ntohs(a.sin_port);
	cr_assert(pthread_create(&rx.thread, NULL, rx_main, NULL) == 0);
}

/* Hits on path answered with status (0: any). */
static int
hits(const char *path, int status)
{
	pthread_mutex_lock(&rx.mu);
	int n = 0;
	for (int i = 0; i < rx.nhits; i++)
		if (strcmp(rx.hits[i].path, path) == 0 &&
		    (!status || rx.hits[i].status == status))
			n++;
	pthread_mutex_unlock(&rx.mu);
	return n;
}

struct hits_probe {
	const char *path;
	int status;
	int want;
};

static bool
hits_reached(void *arg)
{
	struct hits_probe *p = arg;
	return hits(p->path, p->status) >= p->want;
}

static void
wait_hits(const char *path, int status, int want)
{
	struct hits_probe p = {path, status, want};
	cr_assert(th_wait_until(WAIT_MS, hits_reached, &p),
		  "%s: %d hits (status %d), wanted %d", path,
		  hits(path, status), status, want);
}

/* A webhook sink at the receiver's path. */
static void
put_sink(const char *name, const char *path, long status)
{
	char url[128], route[128];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", rx.port, path);
	snprintf(route, sizeof(route), NS "/sinks/%s", name);
	json_decref(e2e_callj("PUT", route, status,
			      json_pack("{s:s,s:s,s:s,s:{s:s}}", "kind",
					"webhook", "url", url, "secret", SECRET,
					"headers", "X-Team", "orders")));
}

static bool
signature_valid(const struct hit *h)
{
	long long t;
	char v1[65];
	if (sscanf(h->signature, "t=%lld,v1=%64s", &t, v1) != 2)
		return false;
	char msg[65536];
	snprintf(msg, sizeof(msg), "%lld.%s", t, h->body);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET),
	     (const unsigned char *)msg, strlen(msg), mac, &len);
	char hex[65];
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	return strcmp(hex, v1) == 0;
}

static PGconn *
sql(void)
{
	return th_connect(e2e_db()->url);
}

/* ----------------------------------------------------------------- tests */

Test(retry, fails_twice_then_delivers_once_signed)
{
	rx_start();
	rx.flaky_failures = 2;
	e2e_serve((const char *const[]){"--outbox-backoff-ms", "50",
					"--outbox-backoff-max-ms", "200",
					"--outbox-interval-ms", "100", NULL});
	put_sink("flaky", "/flaky", 201);
	put_event_workflow("announce", "webhook:flaky");
	char id[37];
	start_workflow("announce", "v1", id);
	wait_completed(id);
	wait_hits("/flaky", 200, 1);

	PGconn *c = sql();
	const char *p[] = {id};
	cr_assert_eq(th_int(c,
			    "SELECT count(*) FROM \"OutboxEvents\""
			    " WHERE \"workflowId\" = $1::uuid",
			    1, p),
		     1);
	/* Recorded after the answer: wait for the row, not a clock. */
	bool published = false;
	int64_t until = th_now_ms() + WAIT_MS;
	while (!published && th_now_ms() < until) {
		published = th_int(c,
				   "SELECT count(*) FROM \"OutboxEvents\""
				   " WHERE \"workflowId\" = $1::uuid AND"
				   " \"publishedAt\" IS NOT NULL"
				   " AND \"attempts\" = 3",
				   1, p) == 1;
		if (!published)
			usleep(20000);
	}
	cr_assert(published, "the event was not recorded as published after "
			     "3 attempts");
	cr_assert_eq(hits("/flaky", 0), 3);
	cr_assert_eq(hits("/flaky", 200), 1);
	pthread_mutex_lock(&rx.mu);
	long long event = rx.hits[0].event_id;
	cr_assert(event > 0);
	for (int i = 0; i < rx.nhits; i++) {
		struct hit *h = &rx.hits[i];
		cr_assert_eq(h->event_id, event, "one event, delivered again");
		cr_assert_str_eq(h->event_type, "TASK_EVENT");
		cr_assert(signature_valid(h), "bad signature %s on %s",
			  h->signature, h->body);
		json_error_t je;
		json_t *env = json_loads(h->body, 0, &je);
		cr_assert_not_null(env, "%s", h->body);
		cr_assert_eq(json_integer_value(json_object_get(env, "id")),
			     event);
		cr_assert_str_eq(
			json_string_value(json_object_get(env, "sink")),
			"webhook:flaky");
		cr_assert_str_eq(json_string_value(json_object_get(
					 json_object_get(env, "payload"), "k")),
				 "v1");
		cr_assert_str_eq(json_string_value(json_object_get(
					 json_object_get(env, "payload"),
					 "workflowInstanceId")),
				 id);
		json_decref(env);
	}
	pthread_mutex_unlock(&rx.mu);
	PQfinish(c);
}

static bool
dead_listed(void *arg)
{
	json_t **out = arg;
	json_t *v = e2e_call("GET", NS "/outbox/dead-letter", NULL, 200);
	if (json_array_size(json_object_get(v, "items")) >= 2) {
		*out = v;
		return true;
	}
	json_decref(v);
	return false;
}

static bool
dead_empty(void *arg)
{
	(void)arg;
	json_t *v = e2e_call("GET", NS "/outbox/dead-letter", NULL, 200);
	bool empty = json_array_size(json_object_get(v, "items")) == 1;
	json_decref(v);
	return empty;
}

Test(dead, dead_letters_lists_and_replays)
{
	rx_start();
	rx.down = true;
	e2e_serve(fast);
	put_sink("down", "/down", 201);
	put_event_workflow("to_down", "down");
	put_event_workflow("to_nowhere", "webhook:nosuch");
	char a[37], b[37];
	start_workflow("to_down", "x", a);
	start_workflow("to_nowhere", "y", b);

	json_t *v = NULL;
	cr_assert(th_wait_until(WAIT_MS, dead_listed, &v),
		  "nothing dead-lettered: %s", e2e_last_body);
	json_t *items = json_object_get(v, "items");
	cr_assert_eq(json_array_size(items), 2);
	cr_assert(json_is_null(json_object_get(v, "nextCursor")));
	json_t *down = NULL, *nowhere = NULL;
	size_t i;
	json_t *it;
	json_array_foreach (items, i, it) {
		const char *wf =
			json_string_value(json_object_get(it, "workflowId"));
		if (strcmp(wf, a) == 0)
			down = it;
		else if (strcmp(wf, b) == 0)
			nowhere = it;
	}
	cr_assert_not_null(down, "%s", e2e_last_body);
	cr_assert_not_null(nowhere, "%s", e2e_last_body);
	/* The dashboard's shape, exactly. */
	const char *keys[] = {
		"id",        "eventType",     "sink",     "workflowId",
		"taskId",    "payload",       "attempts", "lastError",
		"createdAt", "deadLetteredAt"};
	cr_assert_eq(json_object_size(down), 10, "%s", e2e_last_body);
	for (size_t k = 0; k < 10; k++)
		cr_assert_not_null(json_object_get(down, keys[k]), "%s",
				   keys[k]);
	cr_assert(json_is_integer(json_object_get(down, "id")));
	cr_assert_eq(json_integer_value(json_object_get(down, "attempts")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(down, "sink")),
			 "down");
	cr_assert_str_eq(json_string_value(json_object_get(down, "eventType")),
			 "TASK_EVENT");
	cr_assert(strstr(json_string_value(json_object_get(down, "lastError")),
			 "HTTP 503: try later"),
		  "%s", e2e_last_body);
	cr_assert_eq(hits("/down", 503), 3);
	cr_assert_eq(json_integer_value(json_object_get(nowhere, "attempts")),
		     1);
	cr_assert(
		strstr(json_string_value(json_object_get(nowhere, "lastError")),
		       "no sink named \"webhook:nosuch\""),
		"%s", e2e_last_body);

	/* Paging: one at a time. */
	json_t *p1 =
		e2e_call("GET", NS "/outbox/dead-letter?limit=1", NULL, 200);
	const char *cur = json_string_value(json_object_get(p1, "nextCursor"));
	cr_assert_not_null(cur, "%s", e2e_last_body);
	char path[128];
	snprintf(path, sizeof(path), NS "/outbox/dead-letter?limit=1&cursor=%s",
		 cur);
	json_t *p2 = e2e_call("GET", path, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(p2, "items")), 1);
	cr_assert(json_is_null(json_object_get(p2, "nextCursor")));
	cr_assert_neq(
		json_integer_value(json_object_get(
			json_array_get(json_object_get(p1, "items"), 0), "id")),
		json_integer_value(json_object_get(
			json_array_get(json_object_get(p2, "items"), 0),
			"id")));
	json_decref(p1);
	json_decref(p2);
	json_decref(e2e_call("GET", NS "/outbox/dead-letter?cursor=abc", NULL,
			     400));
	json_decref(
		e2e_call("POST", NS "/outbox/dead-letter/replay", "{}", 400));

	/* The receiver recovers; the event is replayed and delivered. */
	pthread_mutex_lock(&rx.mu);
	rx.down = false;
	pthread_mutex_unlock(&rx.mu);
	json_t *r = e2e_callj(
		"POST", NS "/outbox/dead-letter/replay", 200,
		json_pack("{s:[O]}", "ids", json_object_get(down, "id")));
	cr_assert_eq(json_integer_value(json_object_get(r, "replayed")), 1);
	json_decref(r);
	wait_hits("/down", 200, 1);
	cr_assert(th_wait_until(WAIT_MS, dead_empty, NULL),
		  "still dead-lettered: %s", e2e_last_body);
	json_decref(v);
}

Test(listener, hears_the_completed_workflow_only)
{
	rx_start();
	e2e_serve(fast);
	put_sink("hooks", "/status", 201);
	const char *names[] = {"listened", "unheard"};
	for (int i = 0; i < 2; i++)
		json_decref(e2e_callj(
			"POST", NS "/workflow-definitions", 201,
			json_pack("{s:s,s:i,s:[{s:s,s:s,s:s,s:{s:s,s:s}}]}",
				  "name", names[i], "version", 1, "tasks",
				  "name", "js", "taskReferenceName", "js",
				  "type", "INLINE", "inputParameters",
				  "evaluatorType", "javascript", "expression",
				  "1 + 1")));
	json_t *l = e2e_callj("PUT", NS "/status-listeners/listened", 201,
			      json_pack("{s:s,s:[s]}", "sink", "hooks",
					"workflowTransitions", "COMPLETED"));
	cr_assert_str_eq(json_string_value(json_object_get(l, "sink")),
			 "hooks");
	json_decref(l);
	char a[37], b[37];
	start_workflow("unheard", "-", b);
	start_workflow("listened", "-", a);
	wait_completed(a);
	wait_completed(b);
	wait_hits("/status", 200, 1);

	pthread_mutex_lock(&rx.mu);
	cr_assert_eq(rx.nhits, 1);
	struct hit *h = &rx.hits[0];
	cr_assert_str_eq(h->event_type, "WORKFLOW_COMPLETED");
	cr_assert(signature_valid(h));
	json_error_t je;
	json_t *env = json_loads(h->body, 0, &je);
	json_t *payload = json_object_get(env, "payload");
	cr_assert_str_eq(
		json_string_value(json_object_get(payload, "workflowId")), a);
	cr_assert_str_eq(
		json_string_value(json_object_get(payload, "workflowName")),
		"listened");
	cr_assert_str_eq(
		json_string_value(json_object_get(payload, "workflowStatus")),
		"COMPLETED");
	json_decref(env);
	pthread_mutex_unlock(&rx.mu);

	/* Nothing was written for the other: no row, not only no request. */
	PGconn *c = sql();
	const char *p[] = {b};
	cr_assert_eq(th_int(c,
			    "SELECT count(*) FROM \"OutboxEvents\""
			    " WHERE \"workflowId\" = $1::uuid",
			    1, p),
		     0);
	PQfinish(c);
}

static bool
task_scheduled(void *arg)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s", (const char *)arg);
	json_t *v = e2e_call("GET", path, NULL, 200);
	bool yes = json_array_size(json_object_get(v, "tasks")) == 1;
	json_decref(v);
	return yes;
}

Test(transaction, rolled_back_change_writes_no_outbox_row)
{
	rx_start();
	e2e_serve((const char *const[]){"--outbox-max-in-flight", "0", NULL});
	put_sink("hooks", "/status", 201);
	json_decref(e2e_callj("PUT", NS "/task-definitions/work", 201,
			      json_pack("{s:s}", "name", "work")));
	json_decref(e2e_callj("POST", NS "/workflow-definitions", 201,
			      json_pack("{s:s,s:i,s:[{s:s,s:s}]}", "name",
					"held", "version", 1, "tasks", "name",
					"work", "taskReferenceName", "work")));
	json_decref(e2e_callj("PUT", NS "/status-listeners/held", 201,
			      json_pack("{s:s,s:[s],s:[s]}", "sink", "hooks",
					"workflowTransitions", "TERMINATED",
					"taskTransitions", "CANCELED")));
	char id[37];
	start_workflow("held", "-", id);
	cr_assert(th_wait_until(WAIT_MS, task_scheduled, id), "%s",
		  e2e_last_body);
	const char *p[] = {id};
	PGconn *c = sql();
	const char *count = "SELECT count(*) FROM \"OutboxEvents\""
			    " WHERE \"workflowId\" = $1::uuid";
	/* A change made and rolled back: its event, and its outbox row,
	 * are gone. */
	th_exec(c, "BEGIN");
	PQclear(th_query(c,
			 "INSERT INTO \"WorkflowEvents\" (\"workflowId\","
			 " \"namespaceId\", \"seq\", \"type\")"
			 " SELECT \"id\", \"namespaceId\", 1000,"
			 " 'WORKFLOW_TERMINATED' FROM \"WorkflowExecutions\""
			 " WHERE \"id\" = $1::uuid",
			 1, p));
	cr_assert_eq(th_int(c, count, 1, p), 1, "written in the change");
	th_exec(c, "ROLLBACK");
	cr_assert_eq(th_int(c, count, 1, p), 0);
	/* A request that fails writes nothing either. */
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/resume", id);
	struct th_response r;
	th_http(e2e_server_at(0), "POST", path, NULL, 0, &r);
	cr_assert_geq(r.status, 400, "%s", r.body);
	th_response_free(&r);
	cr_assert_eq(th_int(c, count, 1, p), 0);
	/* The real change: the terminate and its cancelled task, one row
	 * each, committed with it. */
	snprintf(path, sizeof(path), NS "/workflows/%s/terminate", id);
	th_http(e2e_server_at(0), "POST", path, "{}", 2, &r);
	cr_assert_lt(r.status, 300, "%s", r.body);
	th_response_free(&r);
	cr_assert_eq(th_int(c, count, 1, p), 2);
	cr_assert_eq(th_int(c,
			    "SELECT count(*) FROM \"OutboxEvents\""
			    " WHERE \"workflowId\" = $1::uuid AND \"eventType\""
			    " IN ('WORKFLOW_TERMINATED', 'TASK_CANCELED')",
			    1, p),
		     2);
	PQfinish(c);
}

Test(replicas, two_relays_deliver_each_event_once)
{
	rx_start();
	const char *const flags[] = {"--outbox-max-in-flight", "2",
				     "--outbox-interval-ms", "50", NULL};
	e2e_serve(flags);
	e2e_serve(flags);
	put_sink("hooks", "/many", 201);
	put_event_workflow("many", "hooks");
	enum { N = 24 };
	char ids[N][37];
	for (int i = 0; i < N; i++)
		start_workflow("many", "-", ids[i]);
	wait_hits("/many", 200, N);
	for (int i = 0; i < N; i++)
		wait_completed(ids[i]);
	PGconn *c = sql();
	int64_t until = th_now_ms() + WAIT_MS;
	while (th_int(c,
		      "SELECT count(*) FROM \"OutboxEvents\""
		      " WHERE \"publishedAt\" IS NULL",
		      0, NULL) > 0 &&
	       th_now_ms() < until)
		usleep(20000);
	cr_assert_eq(th_int(c,
			    "SELECT count(*) FROM \"OutboxEvents\""
			    " WHERE \"publishedAt\" IS NOT NULL"
			    " AND \"attempts\" = 1",
			    0, NULL),
		     N);
	PQfinish(c);
	pthread_mutex_lock(&rx.mu);
	cr_assert_eq(rx.nhits, N, "%d deliveries of %d events", rx.nhits, N);
	for (int i = 0; i < rx.nhits; i++)
		for (int j = i + 1; j < rx.nhits; j++)
			cr_assert_neq(rx.hits[i].event_id, rx.hits[j].event_id,
				      "event %lld delivered twice",
				      rx.hits[i].event_id);
	pthread_mutex_unlock(&rx.mu);
}

/* Outbox rows of the default namespace, written before a server starts:
 * dead-lettered 40 days and 1 day ago, published 40 days and 1 hour ago. */
static void
seed_aged_rows(void)
{
	e2e_open();
	PGconn *c = sql();
	th_exec(c, "INSERT INTO \"OutboxEvents\" (\"namespaceId\","
		   " \"eventType\", \"sink\", \"attempts\", \"lastError\","
		   " \"deadLetteredAt\", \"publishedAt\", \"payload\")"
		   " SELECT n.\"id\", 'TASK_EVENT', 'hooks', 1, v.e,"
		   " now() - v.dead, now() - v.pub,"
		   " jsonb_build_object('age', v.age)"
		   " FROM \"Namespaces\" n, (VALUES"
		   " ('dead-old', interval '40 days', NULL::interval, 'x'),"
		   " ('dead-new', interval '1 day', NULL, 'x'),"
		   " ('pub-old', NULL, interval '40 days', NULL),"
		   " ('pub-new', NULL, interval '1 hour', NULL))"
		   " AS v(age, dead, pub, e)"
		   " WHERE n.\"name\" = 'default'");
	PQfinish(c);
}

struct aged {
	const char *age;
};

static bool
aged_gone(void *arg)
{
	struct aged *a = arg;
	PGconn *c = sql();
	const char *p[] = {a->age};
	long long n = th_int(c,
			     "SELECT count(*) FROM \"OutboxEvents\""
			     " WHERE \"payload\"->>'age' = $1",
			     1, p);
	PQfinish(c);
	return n == 0;
}

static long long
aged_count(const char *age)
{
	PGconn *c = sql();
	const char *p[] = {age};
	long long n = th_int(c,
			     "SELECT count(*) FROM \"OutboxEvents\""
			     " WHERE \"payload\"->>'age' = $1",
			     1, p);
	PQfinish(c);
	return n;
}

Test(retention, old_dead_letters_are_pruned)
{
	seed_aged_rows();
	e2e_serve((const char *const[]){"--outbox-interval-ms", "100", NULL});
	struct aged a = {"dead-old"};
	cr_assert(th_wait_until(WAIT_MS, aged_gone, &a),
		  "a row dead-lettered 40 days ago is still there");
	a.age = "pub-old";
	cr_assert(th_wait_until(WAIT_MS, aged_gone, &a),
		  "a row published 40 days ago is still there");
	/* One pass deletes both kinds; the young rows stay. */
	cr_assert_eq(aged_count("dead-new"), 1);
	cr_assert_eq(aged_count("pub-new"), 1);
	json_t *v = e2e_call("GET", NS "/outbox/dead-letter", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(v, "items")), 1, "%s",
		     e2e_last_body);
	json_decref(v);
}

Test(retention, zero_keeps_the_dead_letter)
{
	seed_aged_rows();
	e2e_serve((const char *const[]){"--outbox-interval-ms", "100",
					"--outbox-dead-letter-retention-hours",
					"0", NULL});
	struct aged a = {"pub-old"};
	cr_assert(th_wait_until(WAIT_MS, aged_gone, &a),
		  "a row published 40 days ago is still there");
	/* The pass that pruned the published row looked at the dead letter
	 * first. */
	cr_assert_eq(aged_count("dead-old"), 1);
	cr_assert_eq(aged_count("dead-new"), 1);
	cr_assert_eq(aged_count("pub-new"), 1);
}

Test(api, sinks_and_listeners)
{
	rx_start();
	e2e_serve(NULL);
	put_sink("hooks", "/x", 201);
	put_sink("hooks", "/y", 200);
	json_t *v = e2e_call("GET", NS "/sinks/hooks", NULL, 200);
	cr_assert_null(json_object_get(v, "secret"), "%s", e2e_last_body);
	cr_assert(json_is_true(json_object_get(v, "hasSecret")));
	cr_assert(strstr(json_string_value(json_object_get(v, "url")), "/y"));
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(v, "headers"), "X-Team")),
			 "orders");
	json_decref(v);
	v = e2e_call("GET", NS "/sinks", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(v, "items")), 1);
	cr_assert(!strstr(e2e_last_body, SECRET), "%s", e2e_last_body);
	json_decref(v);

	json_decref(e2e_callj("PUT", NS "/sinks/bad", 400,
			      json_pack("{s:s}", "kind", "carrier-pigeon")));
	cr_assert(strstr(e2e_last_body, "$.kind"), "%s", e2e_last_body);
	json_decref(e2e_callj("PUT", NS "/sinks/bad", 400,
			      json_pack("{s:s,s:s}", "kind", "webhook", "url",
					"ftp://example")));
	cr_assert(strstr(e2e_last_body, "$.url"), "%s", e2e_last_body);
	json_decref(e2e_callj("PUT", NS "/sinks/bad", 400,
			      json_pack("{s:s,s:s,s:{s:s}}", "kind", "webhook",
					"url", "http://example", "headers",
					"X-NodeFlow-Signature", "forged")));
	cr_assert(strstr(e2e_last_body, "$.headers"), "%s", e2e_last_body);

	json_decref(e2e_callj("PUT", NS "/status-listeners/wf", 400,
			      json_pack("{s:s,s:[s]}", "sink", "nosuch",
					"workflowTransitions", "COMPLETED")));
	cr_assert(strstr(e2e_last_body, "$.sink"), "%s", e2e_last_body);
	json_decref(e2e_callj("PUT", NS "/status-listeners/wf", 400,
			      json_pack("{s:s,s:[s]}", "sink", "hooks",
					"workflowTransitions", "DONE")));
	cr_assert(strstr(e2e_last_body, "$.workflowTransitions"), "%s",
		  e2e_last_body);
	json_decref(e2e_callj("PUT", NS "/status-listeners/wf", 201,
			      json_pack("{s:s,s:[s,s],s:[s]}", "sink", "hooks",
					"workflowTransitions", "COMPLETED",
					"FAILED", "taskTransitions",
					"IN_PROGRESS")));
	v = e2e_call("GET", NS "/status-listeners", NULL, 200);
	json_t *one = json_array_get(json_object_get(v, "items"), 0);
	cr_assert_str_eq(
		json_string_value(json_object_get(one, "workflowName")), "wf");
	cr_assert_eq(
		json_array_size(json_object_get(one, "workflowTransitions")),
		2);
	json_decref(v);
	json_decref(e2e_call("DELETE", NS "/status-listeners/wf", NULL, 204));
	json_decref(e2e_call("GET", NS "/status-listeners/wf", NULL, 404));
	/* Conductor's workflowStatusListenerEnabled/Sink make the listener
	 * of the definition's name. */
	json_decref(e2e_callj(
		"POST", NS "/workflow-definitions", 201,
		json_pack("{s:s,s:i,s:b,s:s,s:[{s:s,s:s,s:s,s:s}]}", "name",
			  "conductorish", "version", 1,
			  "workflowStatusListenerEnabled", 1,
			  "workflowStatusListenerSink", "webhook:hooks",
			  "tasks", "name", "ev", "taskReferenceName", "ev",
			  "type", "EVENT", "sink", "hooks")));
	v = e2e_call("GET", NS "/status-listeners/conductorish", NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(v, "sink")),
			 "webhook:hooks");
	char *wt = json_dumps(json_object_get(v, "workflowTransitions"),
			      JSON_COMPACT);
	cr_assert_str_eq(wt, "[\"COMPLETED\",\"FAILED\",\"TERMINATED\","
			     "\"TIMED_OUT\"]");
	free(wt);
	json_decref(v);

	json_decref(e2e_call("DELETE", NS "/sinks/hooks", NULL, 204));
	json_decref(e2e_call("GET", NS "/sinks/hooks", NULL, 404));
	json_decref(e2e_call("DELETE", NS "/sinks/hooks", NULL, 404));
}
