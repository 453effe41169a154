/*
 * End-to-end tests of the live history (server-sent events) on the real
 * nodeflow binary over HTTP, with an SSE reader of libcurl's in a thread.
 *
 *   resume      a client that drops at seq 7 and comes back with
 *               Last-Event-ID: 7 gets 8 onward exactly once, in order,
 *               without gaps, live as a worker completes the tasks; each
 *               event's data is the JSON history endpoint's object.
 *   replicas    a stream on server A sees the events written through
 *               server B (two servers on one database).
 *   namespace   the namespace stream (?name filter) sees a workflow go
 *               RUNNING → COMPLETED; another definition's never shows;
 *               keepalives arrive at the heartbeat.
 *   namespace_resume  a namespace stream dropped after 2 changes, more
 *               changes through another replica, a reconnection to that
 *               replica with Last-Event-ID: exactly the later 4, once
 *               each (a live one as a barrier); together every change
 *               there is.  ?after= resumes alike; a bad id is 400.
 *   namespace_late_commit  a change whose transaction began first and
 *               commits last is sent before a change committed meanwhile
 *               (held back until then), and resuming after it sends the
 *               later one once.
 *   slow        a client that never reads is cut off (metrics, and its
 *               connection ends) while events pile up.
 *   errors      404 JSON for an unknown workflow before any stream; 429
 *               JSON over the per-client and total caps; without Accept
 *               the endpoint stays the JSON one.
 *   shutdown    SIGTERM ends open streams cleanly; the server exits 0.
 *   listener    empty and garbage payloads on the channel are ignored
 *               (counted) and the stream still delivers the next event;
 *               an event written without a notification is delivered by
 *               the heartbeat's re-read.
 *   holders     a server registers in "LiveStreamHolders" (which turns the
 *               history notifications on) by the time its first stream
 *               has opened, and removes itself after the last one closed.
 */
#include "e2e.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	WAIT_MS = 15000,
	MAX_EVENTS = 8192,
};

#define NS "/v1/ns/default"

TestSuite(sse, .fini = e2e_stop);

/* ------------------------------------------------------------ HTTP */

/* A definition `name` of n SIMPLE tasks on queue `task`. */
static void
put_workflow(const struct th_server *s, const char *name, const char *task,
	     int n)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", task);
	json_decref(e2e_callj_on(
		s, "PUT", path, 201,
		json_pack("{s:s,s:i}", "name", task, "retryCount", 0)));
	json_t *tasks = json_array();
	for (int i = 0; i < n; i++) {
		char ref[32];
		snprintf(ref, sizeof(ref), "t%d", i);
		json_array_append_new(tasks,
				      json_pack("{s:s,s:s,s:s}", "name", task,
						"taskReferenceName", ref,
						"type", "SIMPLE"));
	}
	json_decref(e2e_callj_on(s, "POST", NS "/workflow-definitions", 201,
				 json_pack("{s:s,s:i,s:o}", "name", name,
					   "version", 1, "tasks", tasks)));
}

static void
start_workflow(const struct th_server *s, const char *name, char id[37])
{
	json_t *v = e2e_callj_on(s, "POST", NS "/workflows", 201,
				 json_pack("{s:s}", "name", name));
	snprintf(id, 37, "%s", json_string_value(json_object_get(v, "id")));
	json_decref(v);
}

struct poll_probe {
	const struct th_server *s;
	const char *queue;
	char task_id[37];
};

static bool
polled(void *arg)
{
	struct poll_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", p->queue);
	json_t *v = e2e_callj_on(p->s, "POST", path, 200,
				 json_pack("{s:s}", "workerId", "w"));
	json_t *t = json_array_get(json_object_get(v, "tasks"), 0);
	bool got = t != NULL;
	if (got)
		snprintf(p->task_id, sizeof(p->task_id), "%s",
			 json_string_value(json_object_get(t, "id")));
	json_decref(v);
	return got;
}

/* A worker's turn: polls a task of queue and completes it. */
static void
work_one(const struct th_server *s, const char *queue)
{
	struct poll_probe p = {s, queue, ""};
	cr_assert(th_wait_until(WAIT_MS, polled, &p), "no task on %s", queue);
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/complete", queue,
		 p.task_id);
	json_decref(e2e_callj_on(s, "POST", path, 200,
				 json_pack("{s:s,s:{s:s}}", "workerId", "w",
					   "output", "done", p.task_id)));
}

static long long
max_seq(const char *id)
{
	const char *params[] = {id};
	return th_int(e2e_sql(),
		      "SELECT coalesce(max(\"seq\"), 0) FROM \"WorkflowEvents\""
		      " WHERE \"workflowId\" = $1::uuid",
		      1, params);
}

struct metric_want {
	const struct th_server *s;
	const char *line; /* "nodeflow_sse_streams 0\n" */
};

static bool
metric_is(void *arg)
{
	struct metric_want *w = arg;
	struct th_response r;
	th_http(w->s, "GET", "/metrics", NULL, 0, &r);
	bool ok = r.status == 200 && strstr(r.body, w->line);
	th_response_free(&r);
	return ok;
}

static void
wait_metric(const struct th_server *s, const char *line)
{
	struct metric_want w = {s, line};
	cr_assert(th_wait_until(WAIT_MS, metric_is, &w), "never saw %s", line);
}

/* ------------------------------------------------------ the SSE reader */

struct sse {
	pthread_t thread;
	char url[512];
	char last_id[96];   /* Last-Event-ID to send, "" for none */
	char interface[32]; /* local address to connect from, "" any */
	long long abort_at; /* drop the connection after this seq (0: no) */
	pthread_mutex_t mu;
	char *raw;
	size_t len, cap, parsed;
	int n;
	long long seqs[MAX_EVENTS];
	char ids[MAX_EVENTS][96]; /* the id: lines as sent ("" for none) */
	char types[MAX_EVENTS][40];
	char *data[MAX_EVENTS];
	int comments;
	atomic_bool stop, done;
	long status;
	int rc; /* curl's: CURLE_OK for a stream that ended cleanly */
	char ctype[128];
};

/* One frame: its id:, event: and data: lines, or a comment. */
static void
sse_frame(struct sse *c, const char *f, size_t len)
{
	long long seq = -1;
	char id[96] = "";
	char type[40] = "";
	char *data = NULL;
	bool comment = false;
	for (const char *p = f; p < f + len;) {
		const char *nl = memchr(p, '\n', (size_t)(f + len - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(f + len - p);
		if (l >= 4 && strncmp(p, "id: ", 4) == 0) {
			seq = strtoll(p + 4, NULL, 10);
			snprintf(id, sizeof(id), "%.*s", (int)(l - 4), p + 4);
		} else if (l >= 7 && strncmp(p, "event: ", 7) == 0)
			snprintf(type, sizeof(type), "%.*s", (int)(l - 7),
				 p + 7);
		else if (l >= 6 && strncmp(p, "data: ", 6) == 0)
			data = strndup(p + 6, l - 6);
		else if (l >= 1 && p[0] == ':')
			comment = true;
		p += l + 1;
	}
	if (comment && !data) {
		c->comments++;
		return;
	}
	if (c->n < MAX_EVENTS) {
		c->seqs[c->n] = seq;
		snprintf(c->ids[c->n], sizeof(c->ids[0]), "%s", id);
		snprintf(c->types[c->n], sizeof(c->types[0]), "%s", type);
		c->data[c->n] = data;
		c->n++;
	} else {
		free(data);
	}
}

static size_t
sse_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct sse *c = arg;
	size_t n = size * nmemb;
	bool abort_now = false;
	pthread_mutex_lock(&c->mu);
	if (c->len + n + 1 > c->cap) {
		c->cap = (c->len + n + 1) * 2;
		c->raw = realloc(c->raw, c->cap);
	}
	memcpy(c->raw + c->len, ptr, n);
	c->len += n;
	c->raw[c->len] = '\0';
	for (;;) {
		char *end = strstr(c->raw + c->parsed, "\n\n");
		if (!end)
			break;
		sse_frame(c, c->raw + c->parsed,
			  (size_t)(end - (c->raw + c->parsed)) + 1);
		c->parsed = (size_t)(end - c->raw) + 2;
		if (c->abort_at && c->n && c->seqs[c->n - 1] == c->abort_at) {
			abort_now = true;
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return abort_now ? 0 : n;
}

static int
sse_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c_, curl_off_t d)
{
	struct sse *c = arg;
	(void)a, (void)b, (void)c_, (void)d;
	return atomic_load(&c->stop) ? 1 : 0;
}

static void *
sse_main(void *arg)
{
	struct sse *c = arg;
	CURL *h = curl_easy_init();
	struct curl_slist *hdr =
		curl_slist_append(NULL, "Accept: text/event-stream");
	char last[128];
	if (c->last_id[0]) {
		snprintf(last, sizeof(last), "Last-Event-ID: %s", c->last_id);
		hdr = curl_slist_append(hdr, last);
	}
	curl_easy_setopt(h, CURLOPT_URL, c->url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sse_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, sse_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (c->interface[0])
		curl_easy_setopt(h, CURLOPT_INTERFACE, c->interface);
	CURLcode rc = curl_easy_perform(h);
	long status = 0;
	char *ct = NULL;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
	pthread_mutex_lock(&c->mu);
	c->status = status;
	c->rc = (int)rc;
	snprintf(c->ctype, sizeof(c->ctype), "%s", ct ? ct : "");
	pthread_mutex_unlock(&c->mu);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	atomic_store(&c->done, true);
	return NULL;
}

static struct sse *
sse_open(const struct th_server *s, const char *path, const char *last_id,
	 long long abort_at, const char *interface)
{
	struct sse *c = calloc(1, sizeof(*c));
	snprintf(c->url, sizeof(c->url), "%s%s", s->base, path);
	snprintf(c->last_id, sizeof(c->last_id), "%s", last_id ? last_id : "");
	snprintf(c->interface, sizeof(c->interface), "%s",
		 interface ? interface : "");
	c->abort_at = abort_at;
	pthread_mutex_init(&c->mu, NULL);
	cr_assert(pthread_create(&c->thread, NULL, sse_main, c) == 0);
	return c;
}

static bool
sse_done(void *arg)
{
	return atomic_load(&((struct sse *)arg)->done);
}

/* Stops the reader (if still going) and frees it. */
static void
sse_close(struct sse *c)
{
	atomic_store(&c->stop, true);
	pthread_join(c->thread, NULL);
	for (int i = 0; i < c->n; i++)
		free(c->data[i]);
	free(c->raw);
	free(c);
}

struct sse_want {
	struct sse *c;
	long long seq;    /* an event with this seq, or */
	const char *type; /* an event of this type, or */
	const char *text; /* data containing this, or */
	int comments;     /* this many comments */
};

static bool
sse_has(void *arg)
{
	struct sse_want *w = arg;
	bool ok = false;
	pthread_mutex_lock(&w->c->mu);
	if (w->comments)
		ok = w->c->comments >= w->comments;
	for (int i = 0; i < w->c->n && !ok; i++) {
		if (w->seq && w->c->seqs[i] == w->seq)
			ok = true;
		if (w->type && strcmp(w->c->types[i], w->type) == 0 &&
		    (!w->text ||
		     (w->c->data[i] && strstr(w->c->data[i], w->text))))
			ok = true;
	}
	pthread_mutex_unlock(&w->c->mu);
	return ok;
}

static void
wait_seq(struct sse *c, long long seq)
{
	struct sse_want w = {c, seq, NULL, NULL, 0};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &w),
		  "the stream never delivered seq %lld (has %d events)", seq,
		  c->n);
}

/* The stream is open: the server's opening comment came. */
static void
wait_open(struct sse *c)
{
	struct sse_want w = {c, 0, NULL, NULL, 1};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &w),
		  "the stream never opened");
}

static void
events_path(char *out, size_t size, const char *id)
{
	snprintf(out, size, NS "/workflows/%s/events", id);
}

/* Asserts c's events are exactly seqs from..to, in order, each with
 * data equal to the JSON endpoint's object for it. */
static void
assert_exactly(const struct th_server *s, struct sse *c, const char *id,
	       long long from, long long to)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/events", id);
	json_t *v = e2e_call_on(s, "GET", path, NULL, 200);
	json_t *all = json_object_get(v, "events");
	pthread_mutex_lock(&c->mu);
	cr_assert_eq(c->n, to - from + 1, "%d events, wanted %lld..%lld", c->n,
		     from, to);
	for (int i = 0; i < c->n; i++) {
		cr_assert_eq(c->seqs[i], from + i, "event %d has seq %lld", i,
			     c->seqs[i]);
		json_t *want = json_array_get(all, (size_t)(from + i - 1));
		json_t *got = json_loads(c->data[i], 0, NULL);
		cr_assert_not_null(got, "data is not JSON: %s", c->data[i]);
		cr_assert(json_equal(got, want), "seq %lld: %s", from + i,
			  c->data[i]);
		cr_assert_str_eq(c->types[i], json_string_value(json_object_get(
						      want, "type")));
		json_decref(got);
	}
	pthread_mutex_unlock(&c->mu);
	json_decref(v);
}

/* --------------------------------------------------------------- tests */

Test(sse, resume)
{
	e2e_start(NULL);
	const struct th_server *s = e2e_server_at(0);
	put_workflow(s, "five", "step", 5);
	char id[37], path[256];
	start_workflow(s, "five", id);
	events_path(path, sizeof(path), id);
	/* The first client drops at seq 7, while the work goes on. */
	struct sse *a = sse_open(s, path, NULL, 7, NULL);
	work_one(s, "step"); /* seqs 2-4 */
	work_one(s, "step"); /* 5-7 */
	cr_assert_geq(max_seq(id), 7);
	cr_assert(th_wait_until(WAIT_MS, sse_done, a),
		  "the first client never reached seq 7");
	assert_exactly(s, a, id, 1, 7);
	sse_close(a);
	/* A task completes while nobody listens. */
	work_one(s, "step");
	struct sse *b = sse_open(s, path, "7", 0, NULL);
	wait_seq(b, max_seq(id));
	/* The rest happens live. */
	for (int i = 3; i < 5; i++)
		work_one(s, "step");
	struct sse_want done = {b, 0, "WORKFLOW_COMPLETED", NULL, 0};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &done),
		  "never saw WORKFLOW_COMPLETED");
	long long last = max_seq(id);
	wait_seq(b, last);
	assert_exactly(s, b, id, 8, last);
	sse_close(b);

	/* ?after=N resumes the same way. */
	snprintf(path + strlen(path), sizeof(path) - strlen(path),
		 "?after=%lld", last - 2);
	struct sse *c = sse_open(s, path, NULL, 0, NULL);
	wait_seq(c, last);
	assert_exactly(s, c, id, last - 1, last);
	sse_close(c);
}

Test(sse, replicas)
{
	e2e_start(NULL);
	e2e_serve(NULL);
	const struct th_server *a = e2e_server_at(0), *b = e2e_server_at(1);
	put_workflow(b, "pair", "pq", 2);
	char id[37], path[256];
	start_workflow(b, "pair", id);
	events_path(path, sizeof(path), id);
	struct sse *c = sse_open(a, path, NULL, 0, NULL);
	wait_seq(c, 1);
	work_one(b, "pq");
	work_one(b, "pq");
	struct sse_want done = {c, 0, "WORKFLOW_COMPLETED", NULL, 0};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &done),
		  "server A never streamed what B wrote");
	long long last = max_seq(id);
	wait_seq(c, last);
	assert_exactly(a, c, id, 1, last);
	sse_close(c);
}

Test(sse, namespace)
{
	const char *flags[] = {"--sse-heartbeat-seconds", "1", NULL};
	e2e_start(flags);
	const struct th_server *s = e2e_server_at(0);
	put_workflow(s, "watched", "wq", 1);
	put_workflow(s, "other", "oq", 1);
	struct sse *c = sse_open(s, NS "/events?name=watched", NULL, 0, NULL);
	wait_open(c);
	char id[37], other[37];
	start_workflow(s, "other", other);
	start_workflow(s, "watched", id);
	struct sse_want running = {c, 0, "workflow", "\"RUNNING\"", 0};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &running),
		  "never saw RUNNING");
	work_one(s, "wq");
	struct sse_want completed = {c, 0, "workflow", "WORKFLOW_COMPLETED", 0};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &completed),
		  "never saw COMPLETED");
	/* Keepalives at the heartbeat (the opening comment is one). */
	struct sse_want beats = {c, 0, NULL, NULL, 3};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &beats), "no keepalives");
	pthread_mutex_lock(&c->mu);
	cr_assert_eq(c->n, 2, "%d status changes, wanted 2", c->n);
	const char *want_type[] = {"WORKFLOW_STARTED", "WORKFLOW_COMPLETED"};
	const char *want_status[] = {"RUNNING", "COMPLETED"};
	for (int i = 0; i < 2; i++) {
		/* The id: an opaque position, "<xid>-<workflowId>-<seq>". */
		cr_assert(strstr(c->ids[i], id), "id: %s", c->ids[i]);
		json_t *v = json_loads(c->data[i], 0, NULL);
		cr_assert_not_null(v, "%s", c->data[i]);
		cr_assert_str_eq(json_string_value(json_object_get(v, "id")),
				 id);
		cr_assert_str_eq(
			json_string_value(json_object_get(v, "eventType")),
			want_type[i]);
		cr_assert_str_eq(
			json_string_value(json_object_get(v, "status")),
			want_status[i]);
		cr_assert_str_eq(json_string_value(json_object_get(v, "name")),
				 "watched");
		const char *keys[] = {"version",   "correlationId",
				      "reason",    "parentWorkflowId",
				      "startedAt", "updatedAt",
				      "endedAt",   "seq"};
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			cr_assert(json_object_get(v, keys[k]), "no %s: %s",
				  keys[k], c->data[i]);
		json_decref(v);
	}
	pthread_mutex_unlock(&c->mu);
	sse_close(c);

	/* Without the Accept header it is no JSON endpoint: 400. */
	json_t *e = e2e_call_on(s, "GET", NS "/events", NULL, 400);
	cr_assert_not_null(json_object_get(e, "error"));
	json_decref(e);
}

/* Status changes (WORKFLOW_* events) of definition def's workflows. */
static long long
changes_of(const char *def)
{
	const char *params[] = {def};
	return th_int(
		e2e_sql(),
		"SELECT count(*) FROM \"WorkflowEvents\" ev"
		" JOIN \"WorkflowExecutions\" x ON x.\"id\" = ev.\"workflowId\""
		" WHERE x.\"defName\" = $1"
		" AND ev.\"type\" LIKE 'WORKFLOW\\_%'",
		1, params);
}

struct changes_want {
	const char *def;
	long long n;
};

static bool
changes_at_least(void *arg)
{
	struct changes_want *w = arg;
	return changes_of(w->def) >= w->n;
}

struct count_want {
	struct sse *c;
	int n;
};

static bool
sse_count(void *arg)
{
	struct count_want *w = arg;
	pthread_mutex_lock(&w->c->mu);
	bool ok = w->c->n >= w->n;
	pthread_mutex_unlock(&w->c->mu);
	return ok;
}

static void
wait_count(struct sse *c, int n)
{
	struct count_want w = {c, n};
	cr_assert(th_wait_until(WAIT_MS, sse_count, &w),
		  "the stream has %d events, wanted %d", c->n, n);
}

/* Event i of a namespace stream is workflow id's change of type. */
static void
assert_change(struct sse *c, int i, const char *id, const char *type)
{
	json_t *v = json_loads(c->data[i], 0, NULL);
	cr_assert_not_null(v, "%s", c->data[i]);
	cr_assert_str_eq(json_string_value(json_object_get(v, "id")), id,
			 "event %d: %s", i, c->data[i]);
	cr_assert_str_eq(json_string_value(json_object_get(v, "eventType")),
			 type, "event %d: %s", i, c->data[i]);
	/* The id names the workflow and the event's seq. */
	char tail[64];
	snprintf(tail, sizeof(tail), "-%s-%lld", id,
		 (long long)json_integer_value(json_object_get(v, "seq")));
	size_t n = strlen(c->ids[i]), t = strlen(tail);
	cr_assert(n > t && strcmp(c->ids[i] + n - t, tail) == 0,
		  "event %d: id %s", i, c->ids[i]);
	json_decref(v);
}

/* Whether some event of c is workflow id's change of type. */
static int
find_change(struct sse *c, const char *id, const char *type)
{
	int found = -1;
	for (int i = 0; i < c->n; i++)
		if (c->data[i] && strstr(c->data[i], id) &&
		    strstr(c->data[i], type)) {
			cr_assert_eq(found, -1, "%s %s sent twice", id, type);
			found = i;
		}
	return found;
}

Test(sse, namespace_resume)
{
	e2e_start(NULL);
	e2e_serve(NULL);
	const struct th_server *a = e2e_server_at(0), *b = e2e_server_at(1);
	put_workflow(a, "nsr", "nq", 1);
	put_workflow(a, "noise", "zq", 1);
	struct sse *c1 = sse_open(a, NS "/events?name=nsr", NULL, 0, NULL);
	wait_open(c1);
	char w1[37], w2[37], w3[37], w4[37], z[37];
	start_workflow(a, "nsr", w1);
	start_workflow(a, "nsr", w2);
	wait_count(c1, 2);
	char last[96];
	pthread_mutex_lock(&c1->mu);
	cr_assert_eq(c1->n, 2);
	cr_assert(find_change(c1, w1, "WORKFLOW_STARTED") >= 0);
	cr_assert(find_change(c1, w2, "WORKFLOW_STARTED") >= 0);
	snprintf(last, sizeof(last), "%s", c1->ids[1]);
	pthread_mutex_unlock(&c1->mu);
	sse_close(c1);

	/* While nobody listens, through the other replica: both complete,
	 * a third starts, and another definition's workflow starts. */
	work_one(b, "nq");
	work_one(b, "nq");
	start_workflow(b, "nsr", w3);
	start_workflow(b, "noise", z);
	struct changes_want five = {"nsr", 5};
	cr_assert(th_wait_until(WAIT_MS, changes_at_least, &five),
		  "the workflows did not complete");

	/* Back, on the other replica, after the last change seen. */
	struct sse *c2 = sse_open(b, NS "/events?name=nsr", last, 0, NULL);
	wait_count(c2, 3);
	/* A barrier: one more change, live; then exactly those four. */
	start_workflow(a, "nsr", w4);
	struct sse_want fourth = {c2, 0, "workflow", w4, 0};
	cr_assert(th_wait_until(WAIT_MS, sse_has, &fourth),
		  "never saw the fourth change");
	pthread_mutex_lock(&c2->mu);
	cr_assert_eq(c2->n, 4, "%d changes after the last seen, wanted 4",
		     c2->n);
	cr_assert(find_change(c2, w1, "WORKFLOW_COMPLETED") >= 0);
	cr_assert(find_change(c2, w2, "WORKFLOW_COMPLETED") >= 0);
	cr_assert(find_change(c2, w3, "WORKFLOW_STARTED") >= 0);
	cr_assert_eq(find_change(c2, w4, "WORKFLOW_STARTED"), 3);
	cr_assert_eq(find_change(c2, w1, "WORKFLOW_STARTED"), -1);
	cr_assert_eq(find_change(c2, w2, "WORKFLOW_STARTED"), -1);
	for (int i = 0; i < c2->n; i++) {
		cr_assert(strstr(c2->data[i], "\"name\": \"nsr\""), "%s",
			  c2->data[i]);
		cr_assert_str_neq(c2->ids[i], last);
	}
	pthread_mutex_unlock(&c2->mu);
	/* No gap: the two streams together are every change there is. */
	cr_assert_eq(changes_of("nsr"), 2 + 4);
	sse_close(c2);

	/* ?after= resumes the same way (the header wins when both come). */
	char path[256];
	snprintf(path, sizeof(path), NS "/events?name=nsr&after=%s", last);
	struct sse *c3 = sse_open(a, path, NULL, 0, NULL);
	wait_count(c3, 4);
	sse_close(c3);

	/* An id that is no position of this stream: 400, no stream. */
	struct sse *bad = sse_open(a, NS "/events", "7", 0, NULL);
	cr_assert(th_wait_until(WAIT_MS, sse_done, bad));
	cr_assert_eq(bad->status, 400);
	sse_close(bad);
}

Test(sse, namespace_late_commit)
{
	e2e_start(NULL);
	const struct th_server *s = e2e_server_at(0);
	put_workflow(s, "late", "lq", 1);
	char w1[37], w2[37], w3[37], path[256];
	struct sse *c = sse_open(s, NS "/events?name=late", NULL, 0, NULL);
	wait_open(c);
	start_workflow(s, "late", w1);
	wait_count(c, 1);
	/* A transaction that began first writes a status change of w1, and
	 * commits last. */
	PGconn *t = th_connect(e2e_db()->url);
	th_exec(t, "BEGIN");
	const char *params[] = {w1};
	PQclear(th_query(
		t,
		"INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
		" \"seq\", \"type\") SELECT e.\"id\", e.\"namespaceId\", 900,"
		" 'WORKFLOW_PAUSED' FROM \"WorkflowExecutions\" e"
		" WHERE e.\"id\" = $1::uuid",
		1, params));
	/* Meanwhile w2 starts and commits: its own stream has it, the
	 * namespace stream holds it back behind the open transaction. */
	start_workflow(s, "late", w2);
	events_path(path, sizeof(path), w2);
	struct sse *own = sse_open(s, path, NULL, 0, NULL);
	wait_seq(own, 1);
	sse_close(own);
	pthread_mutex_lock(&c->mu);
	cr_assert_eq(c->n, 1, "a change was sent before an older one");
	pthread_mutex_unlock(&c->mu);
	th_exec(t, "COMMIT");
	PQfinish(t);
	/* Both, the older transaction's first. */
	wait_count(c, 3);
	pthread_mutex_lock(&c->mu);
	cr_assert_eq(c->n, 3);
	assert_change(c, 0, w1, "WORKFLOW_STARTED");
	assert_change(c, 1, w1, "WORKFLOW_PAUSED");
	assert_change(c, 2, w2, "WORKFLOW_STARTED");
	char first[96];
	snprintf(first, sizeof(first), "%s", c->ids[1]);
	pthread_mutex_unlock(&c->mu);
	sse_close(c);

	/* Resuming after the first sends the second, then what is new. */
	struct sse *d = sse_open(s, NS "/events?name=late", first, 0, NULL);
	wait_count(d, 1);
	start_workflow(s, "late", w3);
	wait_count(d, 2);
	pthread_mutex_lock(&d->mu);
	cr_assert_eq(d->n, 2);
	assert_change(d, 0, w2, "WORKFLOW_STARTED");
	assert_change(d, 1, w3, "WORKFLOW_STARTED");
	pthread_mutex_unlock(&d->mu);
	sse_close(d);
}

/* A raw connection asking for a stream, with a tiny receive buffer, that
 * never reads. */
static int
idle_client(const struct th_server *s, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	int small = 4096;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)s->port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Accept: text/event-stream\r\n\r\n",
			 path);
	cr_assert(write(fd, req, (size_t)n) == n);
	return fd;
}

struct drained {
	int fd;
	size_t bytes;
};

/* Reads what is there; true once the server closed the connection. */
static bool
drained_to_end(void *arg)
{
	struct drained *d = arg;
	char buf[65536];
	for (;;) {
		struct pollfd p = {d->fd, POLLIN, 0};
		if (poll(&p, 1, 0) <= 0)
			return false;
		ssize_t n = read(d->fd, buf, sizeof(buf));
		if (n <= 0)
			return true; /* EOF or reset */
		d->bytes += (size_t)n;
	}
}

Test(sse, slow)
{
	const char *flags[] = {"--sse-buffer-bytes", "65536",
			       "--sse-heartbeat-seconds", "1", NULL};
	e2e_start(flags);
	const struct th_server *s = e2e_server_at(0);
	put_workflow(s, "idle", "never", 1);
	char id[37], path[256];
	start_workflow(s, "idle", id);
	events_path(path, sizeof(path), id);
	int fd = idle_client(s, path);
	wait_metric(s, "nodeflow_sse_streams 1\n");
	/* 4000 events of 1 KB each (seqs 1001-5000): far more than the
	 * socket buffers and the stream's cap hold. */
	const char *params[] = {id};
	PQclear(th_query(
		e2e_sql(),
		"INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
		" \"seq\", \"type\", \"data\")"
		" SELECT e.\"id\", e.\"namespaceId\", 1000 + g, 'FILLER',"
		" jsonb_build_object('pad', repeat('x', 1000))"
		" FROM \"WorkflowExecutions\" e, generate_series(1, 4000) g"
		" WHERE e.\"id\" = $1::uuid",
		1, params));
	wait_metric(s, "nodeflow_sse_cutoffs_total 1\n");
	wait_metric(s, "nodeflow_sse_streams 0\n");
	struct drained d = {fd, 0};
	cr_assert(th_wait_until(WAIT_MS, drained_to_end, &d),
		  "the cut-off connection never ended");
	cr_assert_lt(d.bytes, (size_t)4000 * 1000,
		     "the whole history arrived (%zu bytes)", d.bytes);
	close(fd);
	/* A client that reads gets the whole 4 MB history through the same
	 * 64 KB cap: the reads wait for it, it is not cut off. */
	struct sse *c = sse_open(s, path, NULL, 0, NULL);
	wait_seq(c, 5000);
	pthread_mutex_lock(&c->mu);
	for (int i = 1; i < c->n; i++)
		cr_assert_gt(c->seqs[i], c->seqs[i - 1], "out of order at %d",
			     i);
	long long all = th_int(e2e_sql(),
			       "SELECT count(*) FROM \"WorkflowEvents\""
			       " WHERE \"workflowId\" = $1::uuid",
			       1, params);
	cr_assert_eq(c->n, all, "%d events of %lld", c->n, all);
	pthread_mutex_unlock(&c->mu);
	sse_close(c);
	wait_metric(s, "nodeflow_sse_cutoffs_total 1\n");
}

static void
expect_refusal(struct sse *c, long status, const char *code)
{
	cr_assert(th_wait_until(WAIT_MS, sse_done, c), "no answer");
	pthread_mutex_lock(&c->mu);
	cr_assert_eq(c->status, status, "%ld: %s", c->status,
		     c->raw ? c->raw : "");
	cr_assert(strncmp(c->ctype, "application/json", 16) == 0, "%s",
		  c->ctype);
	json_t *v = json_loads(c->raw, 0, NULL);
	cr_assert_not_null(v, "%s", c->raw);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(v, "error"), "code")),
			 code);
	json_decref(v);
	pthread_mutex_unlock(&c->mu);
}

Test(sse, errors)
{
	const char *flags[] = {"--sse-max-streams",
			       "3",
			       "--sse-heartbeat-seconds",
			       "1",
			       "--sse-max-streams-per-client",
			       "2",
			       NULL};
	e2e_start(flags);
	const struct th_server *s = e2e_server_at(0);
	put_workflow(s, "caps", "cq", 1);
	char id[37], path[256];
	start_workflow(s, "caps", id);

	/* Unknown workflows: 404 JSON, no stream. */
	struct sse *c = sse_open(
		s, NS "/workflows/01900000-0000-7000-8000-000000000000/events",
		NULL, 0, NULL);
	expect_refusal(c, 404, "not_found");
	sse_close(c);
	c = sse_open(s, NS "/workflows/nope/events", NULL, 0, NULL);
	expect_refusal(c, 404, "not_found");
	sse_close(c);
	c = sse_open(s, "/v1/ns/nowhere/events", NULL, 0, NULL);
	expect_refusal(c, 404, "not_found");
	sse_close(c);

	/* Two streams per client address, three in all. */
	events_path(path, sizeof(path), id);
	struct sse *one = sse_open(s, path, NULL, 0, NULL);
	struct sse *two = sse_open(s, NS "/events", NULL, 0, NULL);
	wait_open(one);
	wait_open(two);
	c = sse_open(s, path, NULL, 0, NULL);
	expect_refusal(c, 429, "too_many_requests");
	sse_close(c);
	struct sse *three = sse_open(s, path, NULL, 0, "127.0.0.2");
	wait_open(three);
	c = sse_open(s, path, NULL, 0, "127.0.0.3");
	expect_refusal(c, 429, "too_many_requests");
	sse_close(c);
	wait_metric(s, "nodeflow_sse_refused_total 2\n");
	/* A place freed is a place taken (a closed connection is noticed
	 * at the latest by the next keepalive). */
	sse_close(one);
	wait_metric(s, "nodeflow_sse_streams 2\n");
	c = sse_open(s, path, NULL, 0, NULL);
	wait_open(c);
	sse_close(c);
	sse_close(two);
	sse_close(three);

	/* Without Accept: the JSON history. */
	json_t *v = e2e_call_on(s, "GET", path, NULL, 200);
	cr_assert(json_is_array(json_object_get(v, "events")));
	json_decref(v);
	/* A Last-Event-ID that is no seq: 400. */
	c = sse_open(s, path, "seven", 0, NULL);
	expect_refusal(c, 400, "invalid_argument");
	sse_close(c);
}

Test(sse, listener)
{
	const char *flags[] = {"--sse-heartbeat-seconds", "1", NULL};
	e2e_start(flags);
	const struct th_server *s = e2e_server_at(0);
	put_workflow(s, "two", "lq", 2);
	char id[37], path[256];
	start_workflow(s, "two", id);
	events_path(path, sizeof(path), id);
	struct sse *c = sse_open(s, path, NULL, 0, NULL);
	wait_seq(c, 1);
	/* What a statement-level trigger referencing NEW would send, and
	 * other payloads that are no "workflowId:seq". */
	th_exec(e2e_sql(), "NOTIFY node_flow_workflow_events, ''");
	th_exec(e2e_sql(), "NOTIFY node_flow_workflow_events, 'garbage'");
	char bad[128];
	snprintf(bad, sizeof(bad),
		 "SELECT pg_notify('node_flow_workflow_events', '%s:x')", id);
	PQclear(th_query(e2e_sql(), bad, 0, NULL));
	wait_metric(s, "nodeflow_listener_ignored_total 3\n");
	/* The listener lives: the next events stream. */
	long long before = max_seq(id);
	work_one(s, "lq");
	wait_seq(c, before + 1);
	/* An event written without a notification (triggers off in this
	 * session) arrives by the heartbeat's re-read. */
	th_exec(e2e_sql(), "SET session_replication_role = replica");
	const char *params[] = {id};
	PQclear(th_query(
		e2e_sql(),
		"INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
		" \"seq\", \"type\") SELECT e.\"id\", e.\"namespaceId\", 500,"
		" 'SILENT' FROM \"WorkflowExecutions\" e"
		" WHERE e.\"id\" = $1::uuid",
		1, params));
	th_exec(e2e_sql(), "SET session_replication_role = DEFAULT");
	wait_seq(c, 500);
	sse_close(c);
}

struct holders_probe {
	long long want;
};

static bool
holders_are(void *arg)
{
	struct holders_probe *p = arg;
	return th_int(e2e_sql(),
		      "SELECT coalesce(sum(\"streams\"), 0) FROM"
		      " \"LiveStreamHolders\" WHERE \"expiresAt\" > now()",
		      0, NULL) == p->want;
}

Test(sse, holders)
{
	/* A closed client is noticed at the next heartbeat's write. */
	const char *flags[] = {"--sse-heartbeat-seconds", "1", NULL};
	e2e_start(flags);
	const struct th_server *s = e2e_server_at(0);
	put_workflow(s, "one", "hq", 1);
	char id[37], path[256];
	start_workflow(s, "one", id);
	struct holders_probe none = {0}, one = {1}, two = {2};
	cr_assert(holders_are(&none), "registered with no stream open");
	events_path(path, sizeof(path), id);
	struct sse *a = sse_open(s, path, NULL, 0, NULL);
	wait_open(a);
	/* Registered before the stream answered: what its client does next
	 * is announced. */
	cr_assert(holders_are(&one), "no registration once the stream is open");
	struct sse *b = sse_open(s, NS "/events", NULL, 0, NULL);
	wait_open(b);
	cr_assert(th_wait_until(WAIT_MS, holders_are, &two),
		  "the second stream is not counted");
	sse_close(a);
	sse_close(b);
	cr_assert(th_wait_until(WAIT_MS, holders_are, &none),
		  "still registered after the last stream closed");
}

Test(sse, shutdown)
{
	e2e_start(NULL);
	struct th_server *s = e2e_server_at(0);
	put_workflow(s, "stopping", "sq", 1);
	char id[37], path[256];
	start_workflow(s, "stopping", id);
	events_path(path, sizeof(path), id);
	struct sse *c = sse_open(s, path, NULL, 0, NULL);
	struct sse *n = sse_open(s, NS "/events", NULL, 0, NULL);
	wait_seq(c, 1);
	wait_open(n);
	/* SIGTERM: both streams end cleanly and the server exits 0. */
	cr_assert_eq(th_server_stop(s), 0);
	cr_assert(th_wait_until(WAIT_MS, sse_done, c), "the stream went on");
	cr_assert(th_wait_until(WAIT_MS, sse_done, n), "the stream went on");
	cr_assert_eq(c->status, 200);
	cr_assert_eq(n->status, 200);
	cr_assert_eq(c->rc, CURLE_OK, "%s", curl_easy_strerror(c->rc));
	cr_assert_eq(n->rc, CURLE_OK, "%s", curl_easy_strerror(n->rc));
	sse_close(c);
	sse_close(n);
}
