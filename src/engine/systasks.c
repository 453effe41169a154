/*
 * systasks — see systasks.h.
 */
#include "engine/systasks.h"

#include "engine/decide_loop.h"
#include "engine/dsl.h"
#include "engine/jq.h"
#include "engine/js.h"
#include "runtime/log.h"
#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "store/queue_repo.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum {
	MAX_LOOPS = 65,
	POOL_BATCH = 4,              /* tasks one pool loop leases at a time */
	HTTP_BATCH = 32,             /* tasks the HTTP loop leases at a time */
	HTTP_MAX_TIMEOUT_MS = 60000, /* cap of connectionTimeOut, readTimeOut */
	HTTP_LEASE_S = 30,           /* lease of an HTTP task, renewed ... */
	HTTP_RENEW_MS = 10000,       /* ... this often while it is in flight */
	HTTP_DEFAULT_CONNECT_MS = 100, /* Conductor's defaults */
	HTTP_DEFAULT_READ_MS = 150,
	HTTP_MAX_RESPONSE = 8 * 1024 * 1024,
	REASON_MAX = 400,
};

/* A pool kind's work: true = COMPLETED with *output; false = FAILED with
 * e's message as the reason and *output (may be NULL) as the output. */
typedef bool systask_run_fn(const json_t *input, int timeout_ms,
			    json_t **output, struct err *e);

enum systask_exec {
	SYSTASK_POOL, /* run() on a pool loop */
	SYSTASK_HTTP, /* the HTTP loop */
};

struct systask_kind {
	const char *type;
	enum systask_exec exec;
	systask_run_fn *run;
};

static systask_run_fn run_inline, run_jq;

static const struct systask_kind kinds[] = {
	{"INLINE", SYSTASK_POOL, run_inline},
	{"JSON_JQ_TRANSFORM", SYSTASK_POOL, run_jq},
	{"HTTP", SYSTASK_HTTP, NULL},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

static const char *const kind_types[] = {"INLINE", "JSON_JQ_TRANSFORM", "HTTP"};

bool
systasks_handles(const char *type)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (strcmp(kinds[i].type, type) == 0)
			return true;
	return false;
}

const char *const *
systasks_types(size_t *n)
{
	_Static_assert(sizeof(kind_types) / sizeof(kind_types[0]) == N_KINDS,
		       "kind_types lists every row of kinds");
	*n = N_KINDS;
	return kind_types;
}

/* ---- the kinds run on the pool ---------------------------------------- */

static bool
run_inline(const json_t *input, int timeout_ms, json_t **output, struct err *e)
{
	const char *type =
		json_string_value(json_object_get(input, "evaluatorType"));
	const json_t *expr = json_object_get(input, "expression");
	*output = NULL;
	if (!json_is_string(expr)) {
		err_set(e, ERR_INVALID,
			"inputParameters.expression must be a string");
	} else if (!type || strcmp(type, "javascript") == 0 ||
		   strcmp(type, "graaljs") == 0) {
		json_t *v = NULL;
		if (js_eval(json_string_value(expr), input, timeout_ms, &v,
			    e)) {
			*output = json_pack("{s:o}", "result", v);
			return true;
		}
	} else if (strcmp(type, "value-param") == 0) {
		json_t *v = json_object_get(input, json_string_value(expr));
		*output = json_pack("{s:O}", "result", v ? v : json_null());
		return true;
	} else {
		err_set(e, ERR_INVALID,
			"evaluatorType \"%.60s\" is not supported (javascript, "
			"graaljs or value-param)",
			type);
	}
	*output = json_pack("{s:s}", "error", e->msg);
	return false;
}

static bool
run_jq(const json_t *input, int timeout_ms, json_t **output, struct err *e)
{
	return jq_transform(input, timeout_ms, output, e);
}

/* ---- shared -------------------------------------------------------------- */

struct runner {
	struct loop_def def;
	struct loop *loop;
	char *url;
	struct db *db;
	char worker[128];
	int timeout_ms;
	int max_in_flight;
	size_t next_kind; /* pool: round robin over the pool kinds */
	/* HTTP loop only */
	CURLM *multi;
	struct http_call *calls; /* in flight, a list */
	int in_flight;
	int64_t renewed_ms; /* mono_ms of the last lease renewal */
};

static pthread_mutex_t loops_lock = PTHREAD_MUTEX_INITIALIZER;
static struct runner *runners[MAX_LOOPS];
static size_t n_runners;
static struct metric *m_done, *m_failed;

static bool
ensure_db(struct runner *r, struct err *e)
{
	if (r->db && !db_healthy(r->db)) {
		db_close(r->db);
		r->db = NULL;
	}
	/* Generic plans: custom-planned, the idle look for system tasks
	 * was planned again on about every other call. */
	return r->db || db_open(&r->db, r->url, DB_GENERIC_PLANS | DB_KEYED, e);
}

/* Records a result the way a worker's is recorded (a success of a task
 * leased as asyncComplete is parked instead).  output may be NULL. */
static bool
finish_task(struct runner *r, const char *queue, const char *task_id, bool ok,
	    bool async, const json_t *output, const char *reason, struct err *e)
{
	json_t *empty = NULL;
	if (!output)
		output = empty = json_object();
	char *text = json_db_text(output);
	json_decref(empty);
	char why[REASON_MAX + 1];
	if (reason)
		snprintf(why, sizeof(why), "%s", reason);
	bool parked = false;
	/* asyncComplete (the lease's word): parked unless the store says
	 * otherwise, in which case the ordinary result follows. */
	if (ok && async &&
	    !queue_park(r->db, queue, task_id, r->worker, text, &parked, e)) {
		free(text);
		return false;
	}
	if (parked) { /* asyncComplete: open until the API completes it */
		free(text);
		metric_add(m_done, 1);
		return true;
	}
	bool done = queue_result(r->db, queue, task_id, r->worker,
				 ok ? RESULT_COMPLETED : RESULT_FAILED, text,
				 ok       ? NULL
				 : reason ? why
					  : "failed",
				 e);
	free(text);
	if (done) {
		metric_add(ok ? m_done : m_failed, 1);
		decide_loop_wake();
		return true;
	}
	if (e->code == ERR_CONFLICT) { /* lost the lease: someone else's now */
		log_warn("systasks", "%s", e->msg);
		err_clear(e);
		return true;
	}
	return false;
}

/* ---- the pool ------------------------------------------------------------ */

static enum loop_result
pool_tick(void *arg, struct arena *scratch, struct err *e)
{
	struct runner *r = arg;
	(void)scratch;
	if (!ensure_db(r, e))
		return LOOP_ERROR;
	bool busy = false;
	for (size_t k = 0; k < N_KINDS; k++) {
		const struct systask_kind *kind =
			&kinds[(r->next_kind + k) % N_KINDS];
		if (kind->exec != SYSTASK_POOL)
			continue;
		char *text = NULL;
		size_t n = 0;
		double lease = POOL_BATCH * (r->timeout_ms / 1000.0) + 30;
		if (!queue_lease_system(r->db, kind->type, r->worker,
					POOL_BATCH, lease, &text, &n, e))
			return LOOP_ERROR;
		json_error_t je;
		json_t *tasks = json_loads(text, JSON_ALLOW_NUL, &je);
		free(text);
		size_t i;
		json_t *t;
		bool failed = false;
		json_array_foreach (tasks, i, t) {
			const char *queue = json_string_value(
				json_object_get(t, "queueName"));
			const char *id =
				json_string_value(json_object_get(t, "id"));
			json_t *out = NULL;
			struct err te = ERR_INIT;
			bool ok = kind->run(json_object_get(t, "input"),
					    r->timeout_ms, &out, &te);
			bool async = json_is_true(
				json_object_get(t, "asyncComplete"));
			if (!failed && !finish_task(r, queue, id, ok, async,
						    out, ok ? NULL : te.msg, e))
				failed = true; /* the rest keep their lease */
			json_decref(out);
		}
		json_decref(tasks);
		if (failed)
			return LOOP_ERROR;
		if (n == POOL_BATCH)
			busy = true;
	}
	r->next_kind++;
	return busy ? LOOP_BUSY : LOOP_IDLE;
}

/* ---- HTTP ---------------------------------------------------------------- */

struct http_call {
	struct http_call *next;
	char *queue;
	char *task_id;
	bool async; /* asyncComplete: parked on success */
	char *uri;
	CURL *h;
	struct curl_slist *headers;
	char *body;
	struct strbuf resp;
	json_t *resp_headers; /* name -> [values] */
	char *reason_phrase;
	bool too_large;
	char errbuf[CURL_ERROR_SIZE];
};

static void
call_free(struct http_call *c)
{
	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	curl_slist_free_all(c->headers);
	free(c->queue);
	free(c->task_id);
	free(c->uri);
	free(c->body);
	sb_free(&c->resp);
	json_decref(c->resp_headers);
	free(c->reason_phrase);
	free(c);
}

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct http_call *c = arg;
	size_t len = size * nmemb;
	if (c->resp.len + len > HTTP_MAX_RESPONSE) {
		c->too_large = true;
		return 0; /* aborts the transfer */
	}
	sb_append(&c->resp, data, len);
	return len;
}

/* Text that is valid UTF-8 (a stray byte becomes U+FFFD), as a JSON
 * string. */
static json_t *
utf8_string(const char *s, size_t len)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < len;) {
		size_t n = s[i] ? utf8_len((const unsigned char *)s + i) : 1;
		if (n == 0 || i + n > len) {
			sb_puts(&sb, "\xEF\xBF\xBD");
			i++;
			continue;
		}
		sb_append(&sb, s + i, n);
		i += n;
	}
	json_t *v = json_stringn(sb.ptr ? sb.ptr : "", sb.len);
	sb_free(&sb);
	return v ? v : json_string("");
}

static size_t
on_header(char *data, size_t size, size_t nitems, void *arg)
{
	struct http_call *c = arg;
	size_t len = size * nitems;
	while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
		len--;
	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		/* A status line: a new response (after 100 Continue). */
		json_object_clear(c->resp_headers);
		free(c->reason_phrase);
		c->reason_phrase = NULL;
		const char *sp = memchr(data, ' ', len);
		const char *sp2 =
			sp ? memchr(sp + 1, ' ', len - (size_t)(sp + 1 - data))
			   : NULL;
		if (sp2) {
			size_t n = len - (size_t)(sp2 + 1 - data);
			json_t *s = utf8_string(sp2 + 1, n);
			c->reason_phrase = xstrdup(json_string_value(s));
			json_decref(s);
		}
		return size * nitems;
	}
	const char *colon = memchr(data, ':', len);
	if (!colon || colon == data)
		return size * nitems;
	json_t *name = utf8_string(data, (size_t)(colon - data));
	const char *v = colon + 1;
	while (v < data + len && (*v == ' ' || *v == '\t'))
		v++;
	json_t *value = utf8_string(v, (size_t)(data + len - v));
	const char *key = json_string_value(name);
	json_t *list = json_object_get(c->resp_headers, key);
	if (!list) {
		list = json_array();
		json_object_set_new(c->resp_headers, key, list);
	}
	json_array_append_new(list, value);
	json_decref(name);
	return size * nitems;
}

static const char *
standard_reason(long code)
{
	switch (code) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "";
	}
}

/* A millisecond setting of the request: absent or null = def. */
static bool
get_ms(const json_t *req, const char *key, long def, long *out, struct err *e)
{
	const json_t *v = json_object_get(req, key);
	if (!v || json_is_null(v)) {
		*out = def;
		return true;
	}
	if (json_is_string(v)) { /* "5000" from an expression */
		char *end;
		long n = strtol(json_string_value(v), &end, 10);
		if (*json_string_value(v) && !*end && n >= 0) {
			*out = n;
			goto clamp;
		}
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		err_set(e, ERR_INVALID,
			"%s must be a number of milliseconds (>= 0)", key);
		return false;
	}
	*out = (long)(json_integer_value(v) > HTTP_MAX_TIMEOUT_MS
			      ? HTTP_MAX_TIMEOUT_MS
			      : json_integer_value(v));
clamp:
	if (*out > HTTP_MAX_TIMEOUT_MS)
		*out = HTTP_MAX_TIMEOUT_MS;
	if (*out == 0)
		*out = def;
	return true;
}

static bool
header_ok(const char *s)
{
	for (; *s; s++)
		if (*s == '\r' || *s == '\n')
			return false;
	return true;
}

static bool
has_header(const json_t *headers, const char *name)
{
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)headers, k, v)
		if (strcasecmp(k, name) == 0)
			return true;
	return false;
}

/* Builds the request of a task from its input (Conductor's `http_request`
 * object, or the same keys at the top level). */
static struct http_call *
call_build(const json_t *input, struct err *e)
{
	const json_t *req = json_object_get(input, "http_request");
	if (!json_is_object(req))
		req = input;
	const char *uri = json_string_value(json_object_get(req, "uri"));
	if (!uri || !*uri) {
		err_set(e, ERR_INVALID,
			"http_request.uri is missing (a string is needed)");
		return NULL;
	}
	if (strncasecmp(uri, "http://", 7) != 0 &&
	    strncasecmp(uri, "https://", 8) != 0) {
		err_set(e, ERR_INVALID,
			"http_request.uri must be an http:// or https:// URL, "
			"not \"%.200s\"",
			uri);
		return NULL;
	}
	const json_t *m = json_object_get(req, "method");
	char method[16] = "GET";
	if (m && !json_is_null(m)) {
		const char *s = json_string_value(m);
		size_t n = s ? strlen(s) : 0;
		bool ok = n > 0 && n < sizeof(method);
		for (size_t i = 0; ok && i < n; i++)
			ok = isalpha((unsigned char)s[i]);
		if (!ok) {
			err_set(e, ERR_INVALID,
				"http_request.method must be an HTTP method "
				"such as GET or POST");
			return NULL;
		}
		for (size_t i = 0; i <= n; i++)
			method[i] = (char)toupper((unsigned char)s[i]);
	}
	long connect_ms, read_ms;
	if (!get_ms(req, "connectionTimeOut", HTTP_DEFAULT_CONNECT_MS,
		    &connect_ms, e) ||
	    !get_ms(req, "readTimeOut", HTTP_DEFAULT_READ_MS, &read_ms, e))
		return NULL;
	const json_t *headers = json_object_get(req, "headers");
	if (headers && !json_is_null(headers) && !json_is_object(headers)) {
		err_set(e, ERR_INVALID,
			"http_request.headers must be an object");
		return NULL;
	}

	struct http_call *c = xcalloc(1, sizeof(*c));
	c->uri = xstrdup(uri);
	c->resp_headers = json_object();
	const char *ct = json_string_value(json_object_get(req, "contentType"));
	const char *accept = json_string_value(json_object_get(req, "accept"));
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)headers, k, v) {
		char *text =
			json_is_string(v)
				? xstrdup(json_string_value(v))
				: json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		struct strbuf sb = STRBUF_INIT;
		sb_printf(&sb, "%s: %s", k, text ? text : "");
		free(text);
		bool ok = header_ok(sb_str(&sb)) && *k && !strchr(k, ':');
		if (ok)
			c->headers = curl_slist_append(c->headers, sb_str(&sb));
		sb_free(&sb);
		if (!ok) {
			err_set(e, ERR_INVALID,
				"http_request.headers.%.100s is not a valid "
				"header",
				k);
			call_free(c);
			return NULL;
		}
	}
	const json_t *body = json_object_get(req, "body");
	if (body && !json_is_null(body)) {
		c->body = json_is_string(body)
				  ? xstrdup(json_string_value(body))
				  : json_dumps(body,
					       JSON_ENCODE_ANY | JSON_COMPACT);
		if (!has_header(headers, "Content-Type")) {
			struct strbuf sb = STRBUF_INIT;
			sb_printf(&sb, "Content-Type: %s",
				  ct ? ct : "application/json");
			if (header_ok(sb_str(&sb)))
				c->headers = curl_slist_append(c->headers,
							       sb_str(&sb));
			sb_free(&sb);
		}
	}
	if (!has_header(headers, "Accept")) {
		struct strbuf sb = STRBUF_INIT;
		sb_printf(&sb, "Accept: %s",
			  accept ? accept : "application/json");
		if (header_ok(sb_str(&sb)))
			c->headers = curl_slist_append(c->headers, sb_str(&sb));
		sb_free(&sb);
	}

	CURL *h = c->h = curl_easy_init();
	if (!h) {
		err_set(e, ERR_INTERNAL, "could not create an HTTP request");
		call_free(c);
		return NULL;
	}
	curl_easy_setopt(h, CURLOPT_URL, c->uri);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, connect_ms + read_ms);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(h, CURLOPT_PRIVATE, c);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "node-flow/" NODEFLOW_VERSION);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	if (strcmp(method, "GET") == 0 && !c->body) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	}
	if (c->body || strcmp(method, "POST") == 0 ||
	    strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body ? c->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE,
				 (long)(c->body ? strlen(c->body) : 0));
	}
	return c;
}

/* The task's output and outcome once its transfer is done. */
static void
call_outcome(struct http_call *c, CURLcode rc, json_t **output, bool *ok,
	     struct strbuf *reason)
{
	*output = NULL;
	*ok = false;
	if (rc != CURLE_OK) {
		const char *why = c->too_large
					  ? "the response is larger than 8 MiB"
				  : c->errbuf[0] ? c->errbuf
						 : curl_easy_strerror(rc);
		sb_printf(reason, "could not call %.200s: %s", c->uri, why);
		*output = json_pack("{s:s}", "error", sb_str(reason));
		return;
	}
	long code = 0;
	curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
	json_t *body = NULL;
	if (c->resp.len) {
		json_error_t je;
		body = json_loadb(c->resp.ptr, c->resp.len,
				  JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
		if (!body)
			body = utf8_string(c->resp.ptr, c->resp.len);
	}
	const char *phrase = c->reason_phrase && *c->reason_phrase
				     ? c->reason_phrase
				     : standard_reason(code);
	*output = json_pack("{s:{s:i,s:O,s:o,s:s}}", "response", "statusCode",
			    (int)code, "headers", c->resp_headers, "body",
			    body ? body : json_null(), "reasonPhrase", phrase);
	*ok = code >= 200 && code < 300;
	if (!*ok) {
		sb_printf(reason, "%.200s answered %ld %s", c->uri, code,
			  phrase);
		if (c->resp.len) {
			json_t *s = utf8_string(
				c->resp.ptr,
				c->resp.len > 200 ? 200 : c->resp.len);
			sb_printf(reason, ": %s", json_string_value(s));
			json_decref(s);
		}
	}
}

static void
call_unlink(struct runner *r, struct http_call *c)
{
	for (struct http_call **p = &r->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	r->in_flight--;
}

/*
 * Renews the lease of every request in flight.  The lease is short, so the
 * requests of a runner that died are retried soon after; a live runner
 * keeps its own for as long as they take.  A lease already lost (the
 * sweeper timed the attempt out) stays lost: the result will be refused.
 */
static bool
renew_leases(struct runner *r, struct err *e)
{
	for (struct http_call *c = r->calls; c; c = c->next) {
		struct err he = ERR_INIT;
		if (!queue_heartbeat(r->db, c->queue, c->task_id, r->worker,
				     HTTP_LEASE_S, NULL, &he) &&
		    he.code != ERR_CONFLICT && he.code != ERR_NOT_FOUND) {
			*e = he;
			return false;
		}
	}
	return true;
}

static enum loop_result
http_tick(void *arg, struct arena *scratch, struct err *e)
{
	struct runner *r = arg;
	(void)scratch;
	if (!ensure_db(r, e))
		return LOOP_ERROR;
	int room = r->max_in_flight - r->in_flight;
	if (room > 0) {
		char *text = NULL;
		size_t n = 0;
		double lease = HTTP_LEASE_S;
		if (r->in_flight == 0)
			r->renewed_ms = mono_ms();
		if (!queue_lease_system(r->db, "HTTP", r->worker,
					room < HTTP_BATCH ? room : HTTP_BATCH,
					lease, &text, &n, e))
			return LOOP_ERROR;
		json_error_t je;
		json_t *tasks = json_loads(text, JSON_ALLOW_NUL, &je);
		free(text);
		size_t i;
		json_t *t;
		bool failed = false;
		json_array_foreach (tasks, i, t) {
			const char *queue = json_string_value(
				json_object_get(t, "queueName"));
			const char *id =
				json_string_value(json_object_get(t, "id"));
			struct err be = ERR_INIT;
			struct http_call *c =
				call_build(json_object_get(t, "input"), &be);
			if (!c) {
				json_t *out =
					json_pack("{s:s}", "error", be.msg);
				if (!failed &&
				    !finish_task(r, queue, id, false, false,
						 out, be.msg, e))
					failed = true;
				json_decref(out);
				continue;
			}
			c->queue = xstrdup(queue);
			c->task_id = xstrdup(id);
			c->async = json_is_true(
				json_object_get(t, "asyncComplete"));
			c->next = r->calls;
			r->calls = c;
			r->in_flight++;
			curl_multi_add_handle(r->multi, c->h);
		}
		json_decref(tasks);
		if (failed)
			return LOOP_ERROR;
	}
	if (r->in_flight == 0)
		return LOOP_IDLE;
	if (mono_ms() - r->renewed_ms >= HTTP_RENEW_MS) {
		if (!renew_leases(r, e))
			return LOOP_ERROR;
		r->renewed_ms = mono_ms();
	}

	int running = 0;
	curl_multi_perform(r->multi, &running);
	curl_multi_poll(r->multi, NULL, 0, r->def.interval_ms, NULL);
	curl_multi_perform(r->multi, &running);
	CURLMsg *msg;
	int left;
	bool failed = false;
	while ((msg = curl_multi_info_read(r->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct http_call *c = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &c);
		CURLcode rc = msg->data.result;
		curl_multi_remove_handle(r->multi, c->h);
		call_unlink(r, c);
		json_t *out = NULL;
		bool ok = false;
		struct strbuf reason = STRBUF_INIT;
		call_outcome(c, rc, &out, &ok, &reason);
		if (!failed &&
		    !finish_task(r, c->queue, c->task_id, ok, c->async, out,
				 ok ? NULL : sb_str(&reason), e))
			failed = true; /* its lease runs out: retried */
		sb_free(&reason);
		json_decref(out);
		call_free(c);
	}
	return failed ? LOOP_ERROR : LOOP_BUSY;
}

/* ---- loops ----------------------------------------------------------------
 */

static void
runner_finish(void *arg)
{
	struct runner *r = arg;
	/* Requests in flight go back to their queue, same attempt. */
	for (struct http_call *c = r->calls, *next; c; c = next) {
		next = c->next;
		struct err e = ERR_INIT;
		if (r->db && !queue_release(r->db, c->queue, c->task_id,
					    r->worker, 0, &e))
			log_warn("systasks", "could not give task %s back: %s",
				 c->task_id, e.msg);
		curl_multi_remove_handle(r->multi, c->h);
		call_free(c);
	}
	r->calls = NULL;
	if (r->multi)
		curl_multi_cleanup(r->multi);
	r->multi = NULL;
	db_close(r->db);
	r->db = NULL;
}

static void
runner_add(const struct systasks_opts *o, const char *name,
	   enum loop_result (*tick)(void *, struct arena *, struct err *),
	   int index)
{
	struct runner *r = xcalloc(1, sizeof(*r));
	r->url = xstrdup(o->database_url);
	r->timeout_ms = o->script_timeout_ms;
	r->max_in_flight = o->http_max_in_flight;
	char host[64] = "";
	gethostname(host, sizeof(host) - 1);
	snprintf(r->worker, sizeof(r->worker), "%s:%d:%s-%d", host,
		 (int)getpid(), name, index);
	if (tick == http_tick) {
		r->multi = curl_multi_init();
		if (!r->multi) {
			log_error("systasks", "could not start libcurl");
			abort();
		}
	}
	r->def = (struct loop_def){
		.name = name,
		.tick = tick,
		.finish = runner_finish,
		.interval_ms = o->interval_ms,
		.max_backoff_ms = 10000,
	};
	pthread_mutex_lock(&loops_lock);
	if (n_runners < MAX_LOOPS) {
		runners[n_runners++] = r;
		r->loop = loop_start(&r->def, r);
	} else {
		free(r->url);
		free(r);
	}
	pthread_mutex_unlock(&loops_lock);
}

void
systasks_start(const struct systasks_opts *o)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	m_done = metric_register(METRIC_COUNTER,
				 "nodeflow_system_tasks_completed_total", "",
				 "System tasks the runner completed");
	m_failed = metric_register(METRIC_COUNTER,
				   "nodeflow_system_tasks_failed_total", "",
				   "System tasks the runner failed");
	for (int i = 0; i < o->threads; i++)
		runner_add(o, "systasks", pool_tick, i);
	if (o->http_max_in_flight > 0)
		runner_add(o, "systasks-http", http_tick, 0);
}

void
systasks_stop(void)
{
	pthread_mutex_lock(&loops_lock);
	size_t n = n_runners;
	struct runner *list[MAX_LOOPS];
	memcpy(list, runners, n * sizeof(*list));
	n_runners = 0;
	pthread_mutex_unlock(&loops_lock);
	for (size_t i = 0; i < n; i++) {
		if (list[i]->multi)
			curl_multi_wakeup(list[i]->multi);
		loop_stop(list[i]->loop);
		free(list[i]->url);
		free(list[i]);
	}
}

void
systasks_wake(void)
{
	pthread_mutex_lock(&loops_lock);
	for (size_t i = 0; i < n_runners; i++) {
		loop_wake(runners[i]->loop);
		if (runners[i]->multi)
			curl_multi_wakeup(runners[i]->multi);
	}
	pthread_mutex_unlock(&loops_lock);
}

/* ------------------------------------------------------------ validation */

/* A literal string parameter (not computed by a `${...}` expression). */
static const char *
literal_param(const json_t *params, const char *key)
{
	const char *s = json_string_value(json_object_get(params, key));
	return s && !strstr(s, "${") ? s : NULL;
}

static char *
inputs_path(const struct wf_task *t)
{
	struct strbuf sb = STRBUF_INIT;
	sb_printf(&sb, "%s.inputParameters", t->path);
	return sb_steal(&sb);
}

void
systasks_validate_inline(struct wf_task *t, const struct wf_def *def,
			 struct dsl_errors *errs)
{
	(void)def;
	const json_t *in = t->input_parameters;
	char *path = inputs_path(t);
	const json_t *et = json_object_get(in, "evaluatorType");
	const char *type = literal_param(in, "evaluatorType");
	if (!json_is_string(json_object_get(in, "expression")))
		dsl_errors_add(errs, path,
			       "INLINE needs \"expression\", a string");
	if (et && !json_is_string(et))
		dsl_errors_add(errs, path,
			       "\"evaluatorType\" must be a string");
	else if (type && strcmp(type, "javascript") != 0 &&
		 strcmp(type, "graaljs") != 0 &&
		 strcmp(type, "value-param") != 0)
		dsl_errors_add(errs, path,
			       "evaluatorType \"%.60s\" is not supported "
			       "(javascript, graaljs or value-param)",
			       type);
	free(path);
}

void
systasks_validate_jq(struct wf_task *t, const struct wf_def *def,
		     struct dsl_errors *errs)
{
	(void)def;
	if (json_is_string(
		    json_object_get(t->input_parameters, "queryExpression")))
		return;
	char *path = inputs_path(t);
	dsl_errors_add(errs, path,
		       "JSON_JQ_TRANSFORM needs \"queryExpression\", a string");
	free(path);
}

void
systasks_validate_http(struct wf_task *t, const struct wf_def *def,
		       struct dsl_errors *errs)
{
	(void)def;
	const json_t *in = t->input_parameters;
	const json_t *req = json_object_get(in, "http_request");
	const json_t *uri =
		json_object_get(json_is_object(req) ? req : in, "uri");
	char *path = inputs_path(t);
	if (req && !json_is_object(req) && !json_is_string(req))
		dsl_errors_add(errs, path,
			       "\"http_request\" must be an object");
	else if (!json_is_string(req) && !json_is_string(uri))
		dsl_errors_add(
			errs, path,
			"HTTP needs \"http_request\": {\"uri\": ...} (or "
			"\"uri\" at the top level)");
	free(path);
}
