/*
 * http — the HTTP listener on libmicrohttpd, the request and response types
 * handlers see, and the JSON error body every failure uses.
 *
 * MHD runs an epoll thread pool (`--http-threads`) with suspend/resume
 * enabled, so a request that waits (a long-poll, an SSE stream) will park
 * its connection instead of a thread.  A request body is collected up to
 * `--max-body-bytes`; a larger one is answered 413 without being read into
 * memory.  Routing is a table of {method, path pattern, handler}; a pattern's
 * `{name}` segments bind path parameters.  A path that matches no route gets
 * 404 and a path matched under another method 405, each with the JSON error
 * body {"error":{"code":"…","message":"…"}}.
 *
 * Threads: handlers run on MHD's threads, several at once; they must only
 * use thread-safe shared state (the pool, metrics).  Ownership: everything a
 * handler allocates from req->arena is freed when the request ends; the
 * response body buffer belongs to the response.  Failure: start returns
 * NULL with e set (bad listen address, port taken).
 */
#ifndef NF_HTTP_HTTP_H
#define NF_HTTP_HTTP_H

#include "util/arena.h"
#include "util/err.h"
#include "util/strbuf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum { HTTP_MAX_PARAMS = 8, HTTP_MAX_HEADERS = 8 };

struct http_request {
	const char *method;
	const char *path;
	const char *body; /* NUL-terminated; "" when there is none */
	size_t body_len;
	const char *param_names[HTTP_MAX_PARAMS];
	const char *param_values[HTTP_MAX_PARAMS];
	int nparams;
	struct arena *arena;
	void *app;  /* the application context given to http_server_start */
	void *conn; /* the MHD connection, for query and header lookups */
};

struct http_response {
	int status;
	const char *content_type;
	struct strbuf body;
	const char *header_names[HTTP_MAX_HEADERS];
	const char *header_values[HTTP_MAX_HEADERS];
	int nheaders;
};

typedef void http_handler(struct http_request *req, struct http_response *res);

struct http_route {
	const char *method;
	const char *pattern; /* "/v1/ns/{ns}/workflows/{id}" */
	http_handler *handler;
};

/* A path parameter, or NULL. */
const char *http_param(const struct http_request *req, const char *name);
/* A query-string argument, or NULL. */
const char *http_query(const struct http_request *req, const char *name);
/* A request header, or NULL. */
const char *http_header(const struct http_request *req, const char *name);

/* Sets status and a JSON body (takes no reference of v). */
void http_json(struct http_response *res, int status, const json_t *v);
/* Sets a plain-text body. */
void http_text(struct http_response *res, int status, const char *ctype,
	       const char *text);
/* The error body for e, with the status its code maps to. */
void http_error(struct http_response *res, const struct err *e);
/* Shorthand: an error of code with a formatted message. */
void http_fail(struct http_response *res, enum err_code code, const char *fmt,
	       ...) __attribute__((format(printf, 3, 4)));
/* Adds a response header (name and value must outlive the response, e.g.
 * literals or req->arena strings). */
void http_add_header(struct http_response *res, const char *name,
		     const char *value);

struct http_server_opts {
	const char *listen; /* "HOST:PORT" */
	int threads;
	size_t max_body_bytes;
	unsigned idle_timeout_seconds;
	const struct http_route *routes;
	size_t nroutes;
	void *app;
};

struct http_server;

struct http_server *http_server_start(const struct http_server_opts *o,
				      struct err *e);
/* The port actually bound (useful with port 0). */
int http_server_port(const struct http_server *s);
/* Stops accepting, lets requests in progress finish (for up to 10 s; a
 * response sent meanwhile carries "Connection: close"), closes every
 * connection and frees. */
void http_server_stop(struct http_server *s);

/* Matches a path against a pattern, filling req's parameters (exposed for
 * tests). */
bool http_match(const char *pattern, const char *path,
		struct http_request *req);

#endif
