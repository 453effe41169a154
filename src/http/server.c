#include "http/http.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "util/mem.h"
#include "util/timeutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
	STATUS_SLOTS = 600,
	/* How long http_server_stop waits for requests in progress. */
	DRAIN_TIMEOUT_MS = 10000,
};

struct http_server {
	struct MHD_Daemon *daemon;
	int fd;
	int port;
	struct http_server_opts opts;
	_Atomic(struct metric *) by_status[STATUS_SLOTS];
	struct metric *m_too_large;
	atomic_int in_flight; /* requests begun and not yet completed */
	atomic_bool stopping;
};

/* Per request, from MHD's first callback to its completion notice. */
struct request_state {
	struct arena arena;
	struct strbuf body;
	bool too_large;
	int64_t started_ms;
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

/* The length of the well-formed UTF-8 sequence at s, or 0 if there is none
 * (a stray byte, an overlong form, a surrogate, beyond U+10FFFF). */
static size_t
utf8_len(const unsigned char *s)
{
	unsigned cp, min;
	size_t n;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2, cp = s[0] & 0x1fu, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3, cp = s[0] & 0x0fu, min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4, cp = s[0] & 0x07u, min = 0x10000;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
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

static void
dispatch(struct http_server *s, struct http_request *req,
	 struct http_response *res)
{
	const struct http_route *routes = s->opts.routes;
	bool path_known = false;
	for (size_t i = 0; i < s->opts.nroutes; i++) {
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
		for (size_t i = 0; i < s->opts.nroutes; i++) {
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

static enum MHD_Result
reply_too_large(struct http_server *s, struct MHD_Connection *conn)
{
	struct http_response res = {0};
	http_fail(&res, ERR_TOO_LARGE, "request body exceeds %zu bytes",
		  s->opts.max_body_bytes);
	metric_add(s->m_too_large, 1);
	return send_response(s, conn, &res);
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
		atomic_fetch_add(&s->in_flight, 1);
		*con_cls = st;
		const char *cl = MHD_lookup_connection_value(
			conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > s->opts.max_body_bytes) {
			st->too_large = true;
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
	if (st->too_large)
		return reply_too_large(s, conn);

	struct http_request req = {
		.method = method,
		.path = url,
		.body = sb_str(&st->body),
		.body_len = st->body.len,
		.arena = &st->arena,
		.app = s->opts.app,
		.conn = conn,
	};
	struct http_response res = {.status = 200};
	dispatch(s, &req, &res);
	int status = res.status;
	enum MHD_Result ok = send_response(s, conn, &res);
	log_debug("http", "%s %s %d %lldms", method, url, status,
		  (long long)(mono_ms() - st->started_ms));
	return ok;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	struct http_server *s = cls;
	(void)conn;
	(void)toe;
	struct request_state *st = *con_cls;
	if (!st)
		return;
	arena_free(&st->arena);
	sb_free(&st->body);
	free(st);
	*con_cls = NULL;
	atomic_fetch_sub(&s->in_flight, 1);
}

static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
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

	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD |
			 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	s->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
		on_mhd_log, s, MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->threads,
		MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_seconds,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
	if (!s->daemon) {
		err_set(e, ERR_UNAVAILABLE,
			"could not start the HTTP server on %s", o->listen);
		close(fd);
		free(s);
		return NULL;
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
	MHD_stop_daemon(s->daemon);
	close(s->fd);
	free(s);
}
