#include "http/http.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "util/mem.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
	STATUS_SLOTS = 600,
	WAKE_BUCKETS = 256,
	CLIENT_BUCKETS = 64,
	/* How often the request deadlines are checked, at most. */
	REAP_EVERY_MS = 200,
	/* How long http_server_stop waits for requests in progress. */
	DRAIN_TIMEOUT_MS = 10000,
};

struct http_server {
	struct MHD_Daemon *daemon;
	/* The handler threads and the requests waiting for one, oldest
	 * first.  MHD's threads only move bytes: a handler that waits (for
	 * the database, for its start group) holds a handler thread, never
	 * a connection's event loop, so it delays no other connection. */
	pthread_mutex_t job_lock;
	pthread_cond_t job_cond;
	struct request_state *jobs;
	struct request_state **jobs_tail;
	bool jobs_closed; /* the handler threads are gone or going */
	unsigned njobs;
	pthread_t *handlers;
	int nhandlers;
	struct metric *m_queued;
	struct metric *m_queue_refused;
	int fd;
	int port;
	struct http_server_opts opts;
	_Atomic(struct metric *) by_status[STATUS_SLOTS];
	struct metric *m_too_large;
	struct metric *m_header_limit;
	struct metric *m_request_timeouts;
	struct metric *m_park_refused;
	/* Open connections, for the deadline of each request's delivery
	 * (--request-timeout-seconds), checked by the parking lot's thread. */
	pthread_mutex_t conn_lock;
	struct conn_track *conns;
	int64_t last_reap_ms;
	atomic_int in_flight; /* requests begun and not yet completed */
	atomic_bool stopping;
	/* The parking lot of long-polls: a list under a lock, a thread that
	 * resumes requests whose deadline passed, and a wake counter per
	 * key bucket (a wake between a handler's look and its park must not
	 * be lost). */
	pthread_mutex_t park_lock;
	pthread_cond_t park_cond; /* CLOCK_MONOTONIC */
	pthread_t park_thread;
	bool park_stop;
	struct parked *parked;     /* oldest first */
	struct parked **park_tail; /* the last one's next, or &parked */
	_Atomic uint64_t wake_seq[WAKE_BUCKETS];
	/* http_mark_empty: per bucket, the key (its hash) last found empty,
	 * at which wake count and when. */
	pthread_mutex_t empty_lock;
	struct {
		uint32_t hash;
		bool set;
		uint64_t seq;
		int64_t at_ms;
	} empty[WAKE_BUCKETS];
	struct metric *m_parked;
	/* Parking places taken (under park_lock): in all, and per client
	 * address. */
	unsigned park_slots;
	struct client_slots *clients[CLIENT_BUCKETS];
	/* Open streams (http_stream_open), ended when the server stops. */
	pthread_mutex_t stream_lock;
	struct http_stream *streams;
};

/* A streamed body: a buffer the writer appends to and the connection's
 * content reader takes from; the connection is suspended while it is
 * empty.  References: the writer's and the MHD response's. */
struct http_stream {
	struct http_stream *prev, *next; /* the server's list */
	struct http_server *s;
	pthread_mutex_t lock;
	struct MHD_Connection *conn;
	int fd;
	char *buf;
	size_t len, off, alloc;
	bool queued;    /* the response exists (the reader may run) */
	bool suspended; /* by the reader, waiting for a write */
	bool ended, aborted;
	bool done; /* the response is gone: writes are refused */
	int refs;
	uint64_t sent;
	http_stream_fn *on_closed, *on_drained;
	void *arg;
};

/* One open connection: its socket, and by when it must have delivered
 * the request it is sending (0: none due — it is being answered). */
struct conn_track {
	struct conn_track *prev, *next;
	int fd;
	_Atomic int64_t deadline_ms;
};

/* The parking places one client address holds. */
struct client_slots {
	struct client_slots *next;
	unsigned n;
	char addr[INET6_ADDRSTRLEN];
};

/* Per request, from MHD's first callback to its completion notice. */
struct request_state {
	struct arena arena;
	struct strbuf body;
	bool too_large;
	int64_t started_ms;
	int64_t park_deadline_ms; /* 0 until the handler first parks */
	bool park_over;           /* resumed by the deadline or shutdown */
	bool park_slot;           /* holds a parking place (client below) */
	char client[INET6_ADDRSTRLEN];
	struct conn_track *track;
	/* Handed to a handler thread: the request, and the answer it leaves
	 * for the connection's thread (answered) when it resumes it. */
	struct MHD_Connection *conn;
	const char *method, *url;
	struct request_state *next_job;
	bool dispatched; /* handed over once: it ran, or waits to run again */
	bool answered;
	struct http_response res;
};

/* A request parked by http_park, waiting for a wake or its deadline. */
struct parked {
	struct parked *next;
	struct MHD_Connection *conn;
	struct request_state *st;
	char key[256];
	int64_t deadline_ms;
	int64_t due_ms;      /* the deadline, or an earlier retry */
	unsigned long takes; /* 0: any number */
};

/* ---------------------------------------------------------------- helpers */

const char *
http_param(const struct http_request *req, const char *name)
{
	for (int i = 0; i < req->nparams; i++)
		if (strcmp(req->param_names[i], name) == 0)
			return req->param_values[i];
	return NULL;
}

const char *
http_query(const struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND,
					   name);
}

struct query_values {
	const char *name;
	const char **out;
	size_t max, n;
};

static enum MHD_Result
collect_value(void *cls, enum MHD_ValueKind kind, const char *key,
	      const char *value)
{
	struct query_values *q = cls;
	(void)kind;
	if (value && strcmp(key, q->name) == 0 && q->n < q->max)
		q->out[q->n++] = value;
	return MHD_YES;
}

size_t
http_query_all(const struct http_request *req, const char *name,
	       const char **out, size_t max)
{
	struct query_values q = {name, out, max, 0};
	MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND,
				  collect_value, &q);
	return q.n;
}

const char *
http_header(const struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

void
http_json(struct http_response *res, int status, const json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	res->status = status;
	res->content_type = "application/json";
	sb_reset(&res->body);
	sb_puts(&res->body, text ? text : "null");
	free(text);
}

void
http_text(struct http_response *res, int status, const char *ctype,
	  const char *text)
{
	res->status = status;
	res->content_type = ctype;
	sb_reset(&res->body);
	sb_puts(&res->body, text);
}

void
http_error(struct http_response *res, const struct err *e)
{
	/* Messages quote what the client sent (a path, a method), which need
	 * not be UTF-8; jansson refuses such a string and the body would be
	 * "null".  Invalid bytes become U+FFFD. */
	struct strbuf msg = STRBUF_INIT;
	for (const char *p = e->msg; *p;) {
		size_t n = utf8_len((const unsigned char *)p);
		if (n) {
			sb_append(&msg, p, n);
			p += n;
		} else {
			sb_puts(&msg, "\xef\xbf\xbd");
			p++;
		}
	}
	json_t *body =
		json_pack("{s:{s:s,s:s}}", "error", "code",
			  err_code_name(e->code), "message", sb_str(&msg));
	http_json(res, err_http_status(e->code), body);
	json_decref(body);
	sb_free(&msg);
}

void
http_fail(struct http_response *res, enum err_code code, const char *fmt, ...)
{
	struct err e = ERR_INIT;
	va_list ap;
	va_start(ap, fmt);
	e.code = code;
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	http_error(res, &e);
}

void
http_add_header(struct http_response *res, const char *name, const char *value)
{
	if (res->nheaders >= HTTP_MAX_HEADERS)
		return;
	res->header_names[res->nheaders] = name;
	res->header_values[res->nheaders] = value;
	res->nheaders++;
}

/* ---------------------------------------------------------------- routing */

bool
http_match(const char *pattern, const char *path, struct http_request *req)
{
	int nparams = 0;
	const char *p = pattern, *u = path;
	while (*p && *u) {
		if (*p == '{') {
			const char *close = strchr(p, '}');
			const char *end = strchr(u, '/');
			size_t len = end ? (size_t)(end - u) : strlen(u);
			if (!close || len == 0 || nparams >= HTTP_MAX_PARAMS)
				return false;
			if (req) {
				req->param_names[nparams] =
					arena_strndup(req->arena, p + 1,
						      (size_t)(close - p - 1));
				req->param_values[nparams] =
					arena_strndup(req->arena, u, len);
			}
			nparams++;
			p = close + 1;
			u += len;
			continue;
		}
		if (*p != *u)
			return false;
		p++;
		u++;
	}
	if (*p || *u)
		return false;
	if (req)
		req->nparams = nparams;
	return true;
}

void
http_dispatch(const struct http_route *routes, size_t nroutes,
	      struct http_request *req, struct http_response *res)
{
	bool path_known = false;
	for (size_t i = 0; i < nroutes; i++) {
		if (!http_match(routes[i].pattern, req->path, NULL))
			continue;
		path_known = true;
		/* HEAD is GET without the body (MHD drops it). */
		if (strcmp(routes[i].method, req->method) != 0 &&
		    !(strcmp(req->method, "HEAD") == 0 &&
		      strcmp(routes[i].method, "GET") == 0))
			continue;
		http_match(routes[i].pattern, req->path, req);
		routes[i].handler(req, res);
		return;
	}
	if (path_known) {
		struct strbuf allow = STRBUF_INIT;
		for (size_t i = 0; i < nroutes; i++) {
			if (http_match(routes[i].pattern, req->path, NULL))
				sb_printf(&allow, "%s%s", allow.len ? ", " : "",
					  routes[i].method);
		}
		http_add_header(res, "Allow",
				arena_strdup(req->arena, sb_str(&allow)));
		sb_free(&allow);
		http_fail(res, ERR_METHOD, "%s is not allowed on %s",
			  req->method, req->path);
		return;
	}
	http_fail(res, ERR_NOT_FOUND, "no route for %s %s", req->method,
		  req->path);
}

/* --------------------------------------------------------------- parking */

static uint32_t
key_hash(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h;
}

static unsigned
bucket(const char *key)
{
	return key_hash(key) % WAKE_BUCKETS;
}

uint64_t
http_wake_seq(const struct http_request *req, const char *key)
{
	struct http_server *s = req->server;
	return atomic_load(&s->wake_seq[bucket(key)]);
}

enum { EMPTY_KNOWN_MS = 1000 };

/* Marks (mark) or checks key's bucket: empty at wake count seq.  The
 * caller read seq just now (http_wake_seq), so a check that finds the
 * look's seq finds that no wake came since that look began: whatever was
 * enqueued after it was announced. */
static bool
empty_at(const struct http_request *req, const char *key, uint64_t seq,
	 bool mark)
{
	struct http_server *s = req->server;
	uint32_t h = key_hash(key);
	unsigned b = h % WAKE_BUCKETS;
	int64_t now = mono_ms();
	pthread_mutex_lock(&s->empty_lock);
	if (mark) {
		s->empty[b].hash = h;
		s->empty[b].set = true;
		s->empty[b].seq = seq;
		s->empty[b].at_ms = now;
	}
	bool known = s->empty[b].set && s->empty[b].hash == h &&
		     s->empty[b].seq == seq &&
		     now - s->empty[b].at_ms < EMPTY_KNOWN_MS;
	pthread_mutex_unlock(&s->empty_lock);
	return known;
}

void
http_mark_empty(const struct http_request *req, const char *key, uint64_t seq)
{
	(void)empty_at(req, key, seq, true);
}

bool
http_known_empty(const struct http_request *req, const char *key, uint64_t seq)
{
	return empty_at(req, key, seq, false);
}

/* The remote address of conn, without its port ("?" when unknown). */
static void
client_address(struct MHD_Connection *conn, char out[INET6_ADDRSTRLEN])
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const char *ok = NULL;
	if (sa && sa->sa_family == AF_INET)
		ok = inet_ntop(AF_INET,
			       &((const struct sockaddr_in *)(const void *)sa)
					->sin_addr,
			       out, INET6_ADDRSTRLEN);
	else if (sa && sa->sa_family == AF_INET6)
		ok = inet_ntop(AF_INET6,
			       &((const struct sockaddr_in6 *)(const void *)sa)
					->sin6_addr,
			       out, INET6_ADDRSTRLEN);
	if (!ok)
		snprintf(out, INET6_ADDRSTRLEN, "?");
}

void
http_client_address(const struct http_request *req, char out[HTTP_ADDR_LEN])
{
	client_address(req->conn, out);
}

static struct client_slots **
client_slot(struct http_server *s, const char *addr)
{
	struct client_slots **cp = &s->clients[bucket(addr) % CLIENT_BUCKETS];
	while (*cp && strcmp((*cp)->addr, addr) != 0)
		cp = &(*cp)->next;
	return cp;
}

/* Takes a parking place for st's request, or answers 429. */
static bool
take_park_slot(struct http_server *s, struct http_request *req,
	       struct request_state *st, struct http_response *res)
{
	client_address(req->conn, st->client);
	unsigned max_all = s->opts.max_parked;
	unsigned max_one = s->opts.max_parked_per_client;
	unsigned mine = 0;
	bool all_full = false, mine_full = false;
	pthread_mutex_lock(&s->park_lock);
	struct client_slots **cp = client_slot(s, st->client);
	mine = *cp ? (*cp)->n : 0;
	all_full = max_all && s->park_slots >= max_all;
	mine_full = max_one && mine >= max_one;
	if (!all_full && !mine_full) {
		if (!*cp) {
			*cp = xcalloc(1, sizeof(**cp));
			snprintf((*cp)->addr, sizeof((*cp)->addr), "%s",
				 st->client);
		}
		(*cp)->n++;
		s->park_slots++;
		st->park_slot = true;
	}
	pthread_mutex_unlock(&s->park_lock);
	if (st->park_slot)
		return true;
	metric_add(s->m_park_refused, 1);
	if (mine_full)
		http_fail(res, ERR_TOO_MANY,
			  "%u requests of %s are waiting already, the most one "
			  "client may park (--max-parked-per-client); retry "
			  "later",
			  mine, st->client);
	else
		http_fail(res, ERR_TOO_MANY,
			  "%u requests are waiting already, the most this "
			  "server parks (--max-parked); retry later",
			  max_all);
	http_add_header(res, "Retry-After", "1");
	return false;
}

static void
release_park_slot(struct http_server *s, struct request_state *st)
{
	pthread_mutex_lock(&s->park_lock);
	struct client_slots **cp = client_slot(s, st->client);
	if (*cp && --(*cp)->n == 0) {
		struct client_slots *gone = *cp;
		*cp = gone->next;
		free(gone);
	}
	s->park_slots--;
	pthread_mutex_unlock(&s->park_lock);
	st->park_slot = false;
}

bool
http_park(struct http_request *req, struct http_response *res, const char *key,
	  int64_t deadline_ms, uint64_t seq)
{
	struct http_server *s = req->server;
	struct request_state *st = req->state;
	if (atomic_load(&s->stopping))
		return false;
	if (st && !st->park_slot && !take_park_slot(s, req, st, res))
		return true; /* res holds the 429 */
	res->parked = true;
	snprintf(res->park_key, sizeof(res->park_key), "%s", key);
	res->park_deadline_ms = deadline_ms;
	res->park_retry_ms = 0;
	res->park_seq = seq;
	res->park_takes = 0;
	return true;
}

bool
http_park_retry(struct http_request *req, struct http_response *res,
		const char *key, int64_t deadline_ms, int64_t retry_ms,
		uint64_t seq, unsigned long takes)
{
	bool parked = http_park(req, res, key, deadline_ms, seq);
	if (parked && res->parked && retry_ms > 0 && retry_ms < deadline_ms)
		res->park_retry_ms = retry_ms;
	if (parked && res->parked)
		res->park_takes = takes;
	return parked;
}

/* Lists st's request as parked, on its handler thread: the connection is
 * suspended already (on_request did so before handing it over).  A wake
 * that came since the handler read its sequence resumes it at once, to
 * run again. */
static void
park(struct http_server *s, struct request_state *st,
     const struct http_response *res)
{
	struct parked *p = xcalloc(1, sizeof(*p));
	p->conn = st->conn;
	p->st = st;
	memcpy(p->key, res->park_key, sizeof(p->key));
	p->deadline_ms = res->park_deadline_ms;
	p->due_ms = res->park_retry_ms ? res->park_retry_ms : p->deadline_ms;
	p->takes = res->park_takes;
	st->park_deadline_ms = res->park_deadline_ms;

	pthread_mutex_lock(&s->park_lock);
	bool missed =
		atomic_load(&s->wake_seq[bucket(p->key)]) != res->park_seq ||
		s->park_stop;
	if (!missed) {
		*s->park_tail = p;
		s->park_tail = &p->next;
		metric_add(s->m_parked, 1);
		pthread_cond_signal(
			&s->park_cond); /* a new earliest deadline */
	}
	pthread_mutex_unlock(&s->park_lock);
	if (missed) {
		MHD_resume_connection(st->conn);
		free(p);
	}
}

/* Resumes the parked requests that match, oldest first; when n > 0, only
 * until what they take adds up to n.  The lock is not held. */
static void
resume_matching(struct http_server *s, const char *key, unsigned long n,
		bool expired_only, bool mark_over)
{
	struct parked *ready = NULL;
	int64_t now = mono_ms();
	unsigned long taken = 0;
	pthread_mutex_lock(&s->park_lock);
	for (struct parked **pp = &s->parked; *pp && (!n || taken < n);) {
		struct parked *p = *pp;
		bool match = expired_only ? p->due_ms <= now
					  : !key || strcmp(p->key, key) == 0;
		if (match) {
			*pp = p->next;
			if (!p->next)
				s->park_tail = pp;
			p->next = ready;
			ready = p;
			if (mark_over || p->deadline_ms <= now)
				p->st->park_over = true;
			metric_add(s->m_parked, -1);
			taken = p->takes ? taken + p->takes : n;
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&s->park_lock);
	while (ready) {
		struct parked *next = ready->next;
		MHD_resume_connection(ready->conn);
		free(ready);
		ready = next;
	}
}

void
http_server_wake_n(struct http_server *s, const char *key, unsigned long n)
{
	if (!s)
		return;
	if (key) {
		atomic_fetch_add(&s->wake_seq[bucket(key)], 1);
	} else {
		for (int i = 0; i < WAKE_BUCKETS; i++)
			atomic_fetch_add(&s->wake_seq[i], 1);
	}
	resume_matching(s, key, key ? n : 0, false, false);
}

void
http_server_wake(struct http_server *s, const char *key)
{
	http_server_wake_n(s, key, 0);
}

/*
 * Shuts down the sockets of connections past their request deadline (a
 * client sending a byte now and then is never idle, but never done
 * either).  Only shutdown(): MHD sees the end of the stream and closes
 * the connection on its own thread; the socket stays open, and so cannot
 * be reused under us, until MHD's close notice takes it off the list.
 */
static void
reap_slow(struct http_server *s)
{
	int64_t now = mono_ms();
	if (now - s->last_reap_ms < REAP_EVERY_MS)
		return;
	s->last_reap_ms = now;
	int n = 0;
	pthread_mutex_lock(&s->conn_lock);
	for (struct conn_track *t = s->conns; t; t = t->next) {
		int64_t due = atomic_load(&t->deadline_ms);
		if (due && due <= now && t->fd >= 0) {
			atomic_store(&t->deadline_ms, 0);
			shutdown(t->fd, SHUT_RDWR);
			n++;
		}
	}
	pthread_mutex_unlock(&s->conn_lock);
	if (n) {
		metric_add(s->m_request_timeouts, n);
		log_debug("http",
			  "closed %d connections that did not deliver a "
			  "request within %u s",
			  n, s->opts.request_timeout_seconds);
	}
}

/* Resumes requests whose deadline passed, sleeping until the next one;
 * and closes connections too slow to deliver their request. */
static void *
park_timer(void *arg)
{
	struct http_server *s = arg;
	pthread_mutex_lock(&s->park_lock);
	while (!s->park_stop) {
		reap_slow(s);
		int64_t next = mono_ms() + 1000;
		for (struct parked *p = s->parked; p; p = p->next)
			if (p->due_ms < next)
				next = p->due_ms;
		int64_t wait = next - mono_ms();
		if (wait > 0) {
			struct timespec until = mono_deadline(wait);
			pthread_cond_timedwait(&s->park_cond, &s->park_lock,
					       &until);
			continue;
		}
		pthread_mutex_unlock(&s->park_lock);
		resume_matching(s, NULL, 0, true, false);
		pthread_mutex_lock(&s->park_lock);
	}
	pthread_mutex_unlock(&s->park_lock);
	return NULL;
}

/* ------------------------------------------------------------ MHD glue */

static struct metric *
status_metric(struct http_server *s, int status)
{
	if (status < 100 || status >= STATUS_SLOTS)
		status = 500;
	struct metric *m = atomic_load(&s->by_status[status]);
	if (!m) {
		char labels[32];
		snprintf(labels, sizeof(labels), "code=\"%d\"", status);
		m = metric_register(METRIC_COUNTER,
				    "nodeflow_http_requests_total", labels,
				    "HTTP requests answered, by status");
		atomic_store(&s->by_status[status], m);
	}
	return m;
}

static enum MHD_Result
send_response(struct http_server *s, struct MHD_Connection *conn,
	      struct http_response *res)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		res->body.len, (void *)sb_str(&res->body),
		MHD_RESPMEM_MUST_COPY);
	if (res->content_type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					res->content_type);
	for (int i = 0; i < res->nheaders; i++)
		MHD_add_response_header(r, res->header_names[i],
					res->header_values[i]);
	/* While draining, a keep-alive client must not start another request.
	 */
	if (atomic_load(&s->stopping))
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	enum MHD_Result ok = MHD_queue_response(conn, (unsigned)res->status, r);
	MHD_destroy_response(r);
	metric_add(status_metric(s, res->status), 1);
	sb_free(&res->body);
	return ok;
}

/* ---------------------------------------------------------------- streams */

static void
stream_unref(struct http_stream *st)
{
	pthread_mutex_lock(&st->lock);
	bool last = --st->refs == 0;
	pthread_mutex_unlock(&st->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&st->lock);
	free(st->buf);
	free(st);
}

struct http_stream *
http_stream_open(struct http_request *req, struct http_response *res,
		 const char *ctype, http_stream_fn *on_closed,
		 http_stream_fn *on_drained, void *arg)
{
	struct http_server *s = req->server;
	if (atomic_load(&s->stopping))
		return NULL;
	struct http_stream *st = xcalloc(1, sizeof(*st));
	pthread_mutex_init(&st->lock, NULL);
	st->s = s;
	st->conn = req->conn;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	st->fd = ci ? ci->connect_fd : -1;
	st->refs = 2; /* the caller's, and the response's */
	st->on_closed = on_closed;
	st->on_drained = on_drained;
	st->arg = arg;
	pthread_mutex_lock(&s->stream_lock);
	st->next = s->streams;
	if (s->streams)
		s->streams->prev = st;
	s->streams = st;
	pthread_mutex_unlock(&s->stream_lock);
	res->status = 200;
	res->content_type = ctype;
	res->stream = st;
	return st;
}

/* Resumes the connection if the reader suspended it (lock held). */
static void
stream_kick(struct http_stream *st)
{
	if (st->suspended) {
		st->suspended = false;
		MHD_resume_connection(st->conn);
	}
}

bool
http_stream_write(struct http_stream *st, const char *data, size_t n)
{
	pthread_mutex_lock(&st->lock);
	bool ok = !st->done && !st->ended;
	if (ok && n) {
		if (st->off && st->off == st->len)
			st->off = st->len = 0;
		if (st->len + n > st->alloc) {
			if (st->off) { /* reclaim what was sent */
				memmove(st->buf, st->buf + st->off,
					st->len - st->off);
				st->len -= st->off;
				st->off = 0;
			}
			size_t want = st->alloc ? st->alloc : 4096;
			while (want < st->len + n)
				want *= 2;
			if (want != st->alloc) {
				st->buf = xrealloc(st->buf, want);
				st->alloc = want;
			}
		}
		memcpy(st->buf + st->len, data, n);
		st->len += n;
		stream_kick(st);
	}
	pthread_mutex_unlock(&st->lock);
	return ok;
}

size_t
http_stream_buffered(struct http_stream *st)
{
	pthread_mutex_lock(&st->lock);
	size_t n = st->len - st->off;
	pthread_mutex_unlock(&st->lock);
	return n;
}

uint64_t
http_stream_sent(struct http_stream *st)
{
	pthread_mutex_lock(&st->lock);
	uint64_t n = st->sent;
	pthread_mutex_unlock(&st->lock);
	return n;
}

void
http_stream_end(struct http_stream *st, bool abort)
{
	pthread_mutex_lock(&st->lock);
	if (!st->done && !(st->ended && (st->aborted || !abort))) {
		st->ended = true;
		if (abort) {
			st->aborted = true;
			free(st->buf);
			st->buf = NULL;
			st->len = st->off = st->alloc = 0;
			if (st->queued && !st->suspended && st->fd >= 0) {
				/* Blocked on a client that does not read:
				 * reset the connection rather than wait for
				 * it (MHD sees the error and closes it on
				 * its own thread; the descriptor stays
				 * open until the response is gone). */
				struct linger lg = {1, 0};
				setsockopt(st->fd, SOL_SOCKET, SO_LINGER, &lg,
					   sizeof(lg));
				shutdown(st->fd, SHUT_RDWR);
			}
		}
		stream_kick(st);
	}
	pthread_mutex_unlock(&st->lock);
}

void
http_stream_release(struct http_stream *st)
{
	if (st)
		stream_unref(st);
}

/* MHD's content reader: what is buffered, else the end, else suspend. */
static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_stream *st = cls;
	(void)pos;
	ssize_t n;
	pthread_mutex_lock(&st->lock);
	if (st->len > st->off) {
		size_t take = st->len - st->off;
		if (take > max)
			take = max;
		memcpy(buf, st->buf + st->off, take);
		st->off += take;
		st->sent += take;
		n = (ssize_t)take;
	} else if (st->ended) {
		n = st->aborted ? MHD_CONTENT_READER_END_WITH_ERROR
				: MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		st->suspended = true;
		MHD_suspend_connection(st->conn);
		n = 0;
	}
	pthread_mutex_unlock(&st->lock);
	if (n == 0 && st->on_drained)
		st->on_drained(st->arg);
	return n;
}

/* MHD is done with the response: the stream is over. */
static void
stream_free(void *cls)
{
	struct http_stream *st = cls;
	struct http_server *s = st->s;
	pthread_mutex_lock(&st->lock);
	st->done = true;
	st->suspended = false;
	free(st->buf);
	st->buf = NULL;
	st->len = st->off = st->alloc = 0;
	pthread_mutex_unlock(&st->lock);
	pthread_mutex_lock(&s->stream_lock);
	if (st->prev)
		st->prev->next = st->next;
	else
		s->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	pthread_mutex_unlock(&s->stream_lock);
	if (st->on_closed)
		st->on_closed(st->arg);
	stream_unref(st);
}

/* Ends every open stream cleanly (the server is stopping). */
static void
end_streams(struct http_server *s)
{
	pthread_mutex_lock(&s->stream_lock);
	for (struct http_stream *st = s->streams; st; st = st->next)
		http_stream_end(st, false);
	pthread_mutex_unlock(&s->stream_lock);
}

static enum MHD_Result
send_stream(struct http_server *s, struct MHD_Connection *conn,
	    struct http_response *res)
{
	struct http_stream *st = res->stream;
	struct MHD_Response *r = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				res->content_type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	for (int i = 0; i < res->nheaders; i++)
		MHD_add_response_header(r, res->header_names[i],
					res->header_values[i]);
	pthread_mutex_lock(&st->lock);
	st->queued = true;
	pthread_mutex_unlock(&st->lock);
	enum MHD_Result ok = MHD_queue_response(conn, (unsigned)res->status, r);
	MHD_destroy_response(r); /* stream_free runs when MHD is done too */
	metric_add(status_metric(s, res->status), 1);
	sb_free(&res->body);
	return ok;
}

static enum MHD_Result
reply_too_large(struct http_server *s, struct MHD_Connection *conn)
{
	struct http_response res = {0};
	http_fail(&res, ERR_TOO_LARGE, "request body exceeds %zu bytes",
		  s->opts.max_body_bytes);
	metric_add(s->m_too_large, 1);
	return send_response(s, conn, &res);
}

/* The request's delivery is over (it is being answered): no deadline. */
static void
request_received(struct request_state *st)
{
	if (st->track)
		atomic_store(&st->track->deadline_ms, 0);
}

struct header_tally {
	size_t bytes;
	unsigned count;
};

static enum MHD_Result
tally_value(void *cls, enum MHD_ValueKind kind, const char *key,
	    const char *value)
{
	struct header_tally *t = cls;
	(void)kind;
	t->count++;
	t->bytes += (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 4;
	return MHD_YES;
}

/* 414 or 431 when the request line or the headers are over the limits:
 * the sizes are counted as MHD parsed them (path, query arguments, names
 * and values, each with its separators). */
static bool
headers_refused(struct http_server *s, struct MHD_Connection *conn,
		const char *url, const char *method, enum MHD_Result *ret)
{
	struct header_tally line = {strlen(method) + strlen(url) + 11, 0};
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, tally_value,
				  &line);
	struct header_tally h = {0, 0};
	MHD_get_connection_values(conn, MHD_HEADER_KIND, tally_value, &h);
	size_t max = s->opts.max_header_bytes;
	struct http_response res = {0};
	if (max && line.bytes > max)
		http_fail(&res, ERR_URI_TOO_LONG,
			  "the request line is longer than %zu bytes "
			  "(--max-header-bytes)",
			  max);
	else if (s->opts.max_headers && h.count > s->opts.max_headers)
		http_fail(&res, ERR_HEADERS_TOO_LARGE,
			  "the request has %u headers, more than %u "
			  "(--max-headers)",
			  h.count, s->opts.max_headers);
	else if (max && line.bytes + h.bytes > max)
		http_fail(&res, ERR_HEADERS_TOO_LARGE,
			  "the request line and headers are longer than %zu "
			  "bytes (--max-header-bytes)",
			  max);
	else
		return false;
	metric_add(s->m_header_limit, 1);
	*ret = send_response(s, conn, &res);
	return true;
}

static struct conn_track *
track_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* Runs st's request on a handler thread, then resumes its connection
 * with the answer, or parks it. */
static void
run_request(struct http_server *s, struct request_state *st)
{
	struct http_request req = {
		.method = st->method,
		.path = st->url,
		.body = sb_str(&st->body),
		.body_len = st->body.len,
		.arena = &st->arena,
		.app = s->opts.app,
		.conn = st->conn,
		.server = s,
		.state = st,
		.wait_deadline_ms = st->park_deadline_ms,
		.wait_over = st->park_over || atomic_load(&s->stopping) ||
			     (st->park_deadline_ms &&
			      mono_ms() >= st->park_deadline_ms),
	};
	st->res = (struct http_response){.status = 200};
	http_dispatch(s->opts.routes, s->opts.nroutes, &req, &st->res);
	if (st->res.parked) {
		sb_free(&st->res.body);
		park(s, st, &st->res);
		return;
	}
	st->answered = true;
	MHD_resume_connection(st->conn); /* on_request answers */
}

static void *
handler_thread(void *arg)
{
	struct http_server *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->job_lock);
		while (!s->jobs && !s->jobs_closed)
			pthread_cond_wait(&s->job_cond, &s->job_lock);
		struct request_state *st = s->jobs;
		if (st) {
			s->jobs = st->next_job;
			if (!s->jobs)
				s->jobs_tail = &s->jobs;
			s->njobs--;
			metric_add(s->m_queued, -1);
		}
		pthread_mutex_unlock(&s->job_lock);
		if (!st)
			return NULL; /* closed, and nothing left to run */
		run_request(s, st);
	}
}

/* Sends the answer a handler thread left in st (on the connection's
 * thread, which MHD requires). */
static enum MHD_Result
answer(struct http_server *s, struct MHD_Connection *conn,
       struct request_state *st)
{
	st->answered = false;
	if (st->res.stream)
		return send_stream(s, conn, &st->res);
	int status = st->res.status;
	enum MHD_Result ok = send_response(s, conn, &st->res);
	log_debug("http", "%s %s %d %lldms", st->method, st->url, status,
		  (long long)(mono_ms() - st->started_ms));
	return ok;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
	   const char *method, const char *version, const char *upload_data,
	   size_t *upload_data_size, void **con_cls)
{
	struct http_server *s = cls;
	struct request_state *st = *con_cls;
	(void)version;

	if (!st) {
		st = xcalloc(1, sizeof(*st));
		st->started_ms = mono_ms();
		st->track = track_of(conn);
		atomic_fetch_add(&s->in_flight, 1);
		*con_cls = st;
		enum MHD_Result ret;
		if (headers_refused(s, conn, url, method, &ret)) {
			st->too_large = true; /* the body is not read */
			request_received(st);
			return ret;
		}
		const char *cl = MHD_lookup_connection_value(
			conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > s->opts.max_body_bytes) {
			st->too_large = true;
			request_received(st);
			return reply_too_large(s, conn);
		}
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (!st->too_large &&
		    st->body.len + *upload_data_size <= s->opts.max_body_bytes)
			sb_append(&st->body, upload_data, *upload_data_size);
		else
			st->too_large = true;
		*upload_data_size = 0;
		return MHD_YES;
	}
	request_received(st);
	if (st->too_large)
		return reply_too_large(s, conn);
	if (st->answered)
		return answer(s, conn, st);
	/* Hand the request to a handler thread: the connection is suspended
	 * until it has an answer (or parks), and this thread goes on with
	 * the other connections. */
	st->conn = conn;
	st->method = method;
	st->url = url;
	st->next_job = NULL;
	unsigned max = s->opts.max_queued;
	pthread_mutex_lock(&s->job_lock);
	bool open = !s->jobs_closed;
	bool full = open && !st->dispatched && max && s->njobs >= max;
	if (open && !full) {
		MHD_suspend_connection(conn);
		*s->jobs_tail = st;
		s->jobs_tail = &st->next_job;
		s->njobs++;
		st->dispatched = true;
		metric_add(s->m_queued, 1);
		pthread_cond_signal(&s->job_cond);
	}
	pthread_mutex_unlock(&s->job_lock);
	if (open && !full)
		return MHD_YES;
	struct http_response res = {0};
	if (full) {
		metric_add(s->m_queue_refused, 1);
		http_fail(&res, ERR_UNAVAILABLE,
			  "%u requests are waiting for a handler thread "
			  "already, the most this server queues "
			  "(--http-queue); retry later",
			  max);
	} else {
		http_fail(&res, ERR_UNAVAILABLE, "the server is stopping");
	}
	http_add_header(&res, "Retry-After", "1");
	return send_response(s, conn, &res);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	struct http_server *s = cls;
	(void)toe;
	struct request_state *st = *con_cls;
	if (!st)
		return;
	/* Answered: the next request on this connection is due in time. */
	if (st->track && s->opts.request_timeout_seconds)
		atomic_store(&st->track->deadline_ms,
			     mono_ms() +
				     1000 * (int64_t)s->opts
						     .request_timeout_seconds);
	(void)conn;
	if (st->answered) { /* the connection went before its answer */
		if (st->res.stream)
			stream_free(st->res.stream); /* it was never queued */
		sb_free(&st->res.body);
	}
	if (st->park_slot)
		release_park_slot(s, st);
	arena_free(&st->arena);
	sb_free(&st->body);
	free(st);
	*con_cls = NULL;
	atomic_fetch_sub(&s->in_flight, 1);
}

/* Lists each connection as it opens, with its first request's deadline. */
static void
on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
	      enum MHD_ConnectionNotificationCode code)
{
	struct http_server *s = cls;
	struct conn_track *t = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		t = xcalloc(1, sizeof(*t));
		t->fd = ci ? ci->connect_fd : -1;
		if (s->opts.request_timeout_seconds)
			atomic_store(
				&t->deadline_ms,
				mono_ms() +
					1000 * (int64_t)s->opts
							.request_timeout_seconds);
		pthread_mutex_lock(&s->conn_lock);
		t->next = s->conns;
		if (s->conns)
			s->conns->prev = t;
		s->conns = t;
		pthread_mutex_unlock(&s->conn_lock);
		*socket_context = t;
		return;
	}
	if (!t)
		return;
	pthread_mutex_lock(&s->conn_lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		s->conns = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&s->conn_lock);
	free(t);
	*socket_context = NULL;
}

__attribute__((format(printf, 2, 0))) static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	/* An event stream's client going away is how such streams end. */
	if (strstr(msg, "is no longer available for sending"))
		log_debug("http", "%s", msg);
	else
		log_warn("http", "%s", msg);
}

/* Binds the listening socket ourselves, so that errors name the address. */
static int
bind_listener(const char *listen_addr, struct err *e)
{
	char host[256];
	const char *colon = strrchr(listen_addr, ':');
	if (!colon || colon == listen_addr || !colon[1]) {
		err_set(e, ERR_INVALID,
			"listen address \"%s\" is not HOST:PORT", listen_addr);
		return -1;
	}
	size_t hlen = (size_t)(colon - listen_addr);
	if (listen_addr[0] == '[' && hlen >= 2 &&
	    listen_addr[hlen - 1] == ']') {
		listen_addr++; /* [::1]:8080 */
		hlen -= 2;
	}
	if (hlen >= sizeof(host)) {
		err_set(e, ERR_INVALID, "listen host is too long");
		return -1;
	}
	memcpy(host, listen_addr, hlen);
	host[hlen] = '\0';

	struct addrinfo hints = {0}, *ai = NULL;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	int rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0) {
		err_set(e, ERR_INVALID,
			"could not resolve listen address %s: %s", listen_addr,
			gai_strerror(rc));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    listen(fd, 1024) != 0) {
		err_set(e, ERR_UNAVAILABLE, "could not listen on %s: %s",
			listen_addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

static int
bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Raises the soft limit on open files to hold max_connections (and what
 * else the process opens), up to the hard limit; returns the connections
 * that fit. */
static unsigned
fit_connections(unsigned max_connections)
{
	struct rlimit rl;
	const rlim_t spare = 256; /* database, log, listen socket… */
	rlim_t want = (rlim_t)max_connections + spare;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return max_connections;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want
				      ? want
				      : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rl.rlim_cur = was;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		unsigned fit = rl.rlim_cur > 2 * spare
				       ? (unsigned)(rl.rlim_cur - spare)
				       : (unsigned)(rl.rlim_cur / 2);
		log_warn("http",
			 "open files are limited to %llu: accepting %u "
			 "connections, not %u (--max-connections)",
			 (unsigned long long)rl.rlim_cur, fit, max_connections);
		return fit;
	}
	return max_connections;
}

struct http_server *
http_server_start(const struct http_server_opts *o, struct err *e)
{
	int fd = bind_listener(o->listen, e);
	if (fd < 0)
		return NULL;
	struct http_server *s = xcalloc(1, sizeof(*s));
	s->opts = *o;
	s->fd = fd;
	s->port = bound_port(fd);
	s->m_too_large = metric_register(
		METRIC_COUNTER, "nodeflow_http_body_too_large_total", "",
		"Requests refused because their body was too large");
	s->m_parked = metric_register(METRIC_GAUGE, "nodeflow_http_parked", "",
				      "Long-polls parked, waiting for work");
	s->m_header_limit = metric_register(
		METRIC_COUNTER, "nodeflow_http_header_limit_total", "",
		"Requests refused for their request line or headers (414, 431)");
	s->m_request_timeouts = metric_register(
		METRIC_COUNTER, "nodeflow_http_request_timeouts_total", "",
		"Connections closed for not delivering a request in time");
	s->m_park_refused = metric_register(
		METRIC_COUNTER, "nodeflow_http_park_refused_total", "",
		"Long-polls refused because too many wait already (429)");
	pthread_mutex_init(&s->park_lock, NULL);
	pthread_mutex_init(&s->empty_lock, NULL);
	s->park_tail = &s->parked;
	pthread_mutex_init(&s->conn_lock, NULL);
	pthread_mutex_init(&s->stream_lock, NULL);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->park_cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&s->job_lock, NULL);
	pthread_cond_init(&s->job_cond, NULL);
	s->jobs_tail = &s->jobs;
	s->m_queued = metric_register(
		METRIC_GAUGE, "nodeflow_http_queued", "",
		"Requests received and waiting for a handler thread");
	s->m_queue_refused = metric_register(
		METRIC_COUNTER, "nodeflow_http_queue_refused_total", "",
		"Requests refused because too many waited for a handler thread "
		"(503)");

	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD |
			 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	/* MHD's memory per connection holds the request line and headers:
	 * room for twice our own limit, so that our JSON 414/431 answers
	 * first; only a request far over it meets MHD's own refusal. */
	unsigned max_conns = o->max_connections ? o->max_connections : 4096;
	if (max_conns < 4 * (unsigned)o->threads)
		max_conns = 4 * (unsigned)o->threads; /* a share per thread */
	size_t memory = 2 * o->max_header_bytes + 8192;
	if (memory < 32768)
		memory = 32768;
	/* MHD's threads parse and send; one carries thousands of requests a
	 * second, so one per sixteen handler threads. */
	unsigned io_threads = ((unsigned)o->threads + 15) / 16;
	/* A pool of one is no pool: MHD ignores it with a warning. */
	struct MHD_OptionItem pool[] = {
		{io_threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
		 (intptr_t)io_threads, NULL},
		{MHD_OPTION_END, 0, NULL},
	};
	s->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
		on_mhd_log, s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_ARRAY,
		pool, MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_seconds,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
		MHD_OPTION_CONNECTION_LIMIT, fit_connections(max_conns),
		MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		o->max_connections_per_client, MHD_OPTION_END);
	if (!s->daemon) {
		err_set(e, ERR_UNAVAILABLE,
			"could not start the HTTP server on %s", o->listen);
		close(fd);
		free(s);
		return NULL;
	}
	if (pthread_create(&s->park_thread, NULL, park_timer, s) != 0) {
		fprintf(stderr, "fatal: could not start the long-poll timer\n");
		abort();
	}
	s->nhandlers = o->threads > 0 ? o->threads : 1;
	s->handlers = xcalloc((size_t)s->nhandlers, sizeof(*s->handlers));
	for (int i = 0; i < s->nhandlers; i++)
		if (pthread_create(&s->handlers[i], NULL, handler_thread, s) !=
		    0) {
			fprintf(stderr,
				"fatal: could not start an HTTP handler "
				"thread\n");
			abort();
		}
	return s;
}

int
http_server_port(const struct http_server *s)
{
	return s->port;
}

void
http_server_stop(struct http_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stopping, true);
	MHD_quiesce_daemon(s->daemon); /* stop accepting */
	/* Parked long-polls answer now (empty), and no more park. */
	pthread_mutex_lock(&s->park_lock);
	s->park_stop = true;
	pthread_cond_signal(&s->park_cond);
	pthread_mutex_unlock(&s->park_lock);
	pthread_join(s->park_thread, NULL);
	resume_matching(s, NULL, 0, false, true);
	end_streams(s);
	/* MHD_stop_daemon shuts every connection down at once, answered or
	 * not: first let the requests in progress finish, up to a deadline. */
	int64_t until = mono_ms() + DRAIN_TIMEOUT_MS;
	while (atomic_load(&s->in_flight) > 0 && mono_ms() < until) {
		struct timespec nap = {0, 5 * 1000000};
		nanosleep(&nap, NULL);
	}
	int left = atomic_load(&s->in_flight);
	if (left > 0)
		log_warn("http",
			 "%d requests still in progress after %d ms; "
			 "closing them",
			 left, DRAIN_TIMEOUT_MS);
	/* The handler threads run what is queued and end; a request that
	 * comes after is refused on its connection's thread.  Every
	 * connection they suspended is resumed by then, as MHD requires
	 * before it stops. */
	pthread_mutex_lock(&s->job_lock);
	s->jobs_closed = true;
	pthread_cond_broadcast(&s->job_cond);
	pthread_mutex_unlock(&s->job_lock);
	for (int i = 0; i < s->nhandlers; i++)
		pthread_join(s->handlers[i], NULL);
	free(s->handlers);
	MHD_stop_daemon(s->daemon);
	close(s->fd);
	pthread_cond_destroy(&s->park_cond);
	pthread_mutex_destroy(&s->park_lock);
	pthread_mutex_destroy(&s->empty_lock);
	pthread_mutex_destroy(&s->conn_lock);
	pthread_mutex_destroy(&s->stream_lock);
	pthread_cond_destroy(&s->job_cond);
	pthread_mutex_destroy(&s->job_lock);
	for (int i = 0; i < CLIENT_BUCKETS; i++)
		while (s->clients[i]) {
			struct client_slots *next = s->clients[i]->next;
			free(s->clients[i]);
			s->clients[i] = next;
		}
	free(s);
}
