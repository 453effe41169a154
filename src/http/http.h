/*
 * http — the HTTP listener on libmicrohttpd, the request and response types
 * handlers see, and the JSON error body every failure uses.
 *
 * MHD's epoll threads (one per sixteen handler threads) read requests and
 * send answers; a request, once read, is handed to one of `--http-threads`
 * handler threads, its connection suspended until the handler answers.  A
 * handler that waits (for the database, for its start group) so holds a
 * handler thread, never an event loop other connections share; a request
 * that waits for work (a long-poll, an SSE stream) parks its connection
 * and holds no thread at all.  A request body is collected up to
 * `--max-body-bytes`; a larger one is answered 413 without being read into
 * memory.  The limits that protect the server (docs/operations.md) are
 * enforced here: a request line and headers over `--max-header-bytes` (414
 * or 431) or with more than `--max-headers` headers (431); a connection
 * silent for `--idle-timeout-seconds`, or that has not delivered a whole
 * request `--request-timeout-seconds` after it opened or got its previous
 * answer, is closed; parked requests are capped per client address and in
 * all (429 with Retry-After); a new request that finds `--http-queue`
 * requests waiting for a handler thread is answered 503 at once (a parked
 * request woken to run again always waits its turn); so are connections
 * (`--max-connections`,
 * `--max-connections-per-client`), and the process's file-descriptor
 * limit is raised to hold them.  Routing is a table of {method, path pattern,
 * handler}; a pattern's
 * `{name}` segments bind path parameters.  A path that matches no route gets
 * 404 and a path matched under another method 405, each with the JSON error
 * body {"error":{"code":"…","message":"…"}}.
 *
 * Threads: handlers run on the handler threads, several at once; they must
 * only use thread-safe shared state (the pool, metrics).  Ownership: everything
 * a handler allocates from req->arena is freed when the request ends; the
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
#include <stdint.h>

enum { HTTP_MAX_PARAMS = 8, HTTP_MAX_HEADERS = 8, HTTP_ADDR_LEN = 46 };

struct http_request {
	const char *method;
	const char *path;
	const char *body; /* NUL-terminated; "" when there is none */
	size_t body_len;
	const char *param_names[HTTP_MAX_PARAMS];
	const char *param_values[HTTP_MAX_PARAMS];
	int nparams;
	struct arena *arena;
	void *app;    /* the application context given to http_server_start */
	void *conn;   /* the MHD connection, for query and header lookups */
	void *server; /* the struct http_server, for http_park */
	void *state;  /* the server's per-request state, for http_park */
	/* A parked request runs its handler again when woken or when its
	 * deadline passes: the deadline it set (0 on the first run), and
	 * whether that has passed (or the server is stopping). */
	int64_t wait_deadline_ms;
	bool wait_over;
};

struct http_response {
	/* Set by http_park: no answer now. */
	bool parked;
	char park_key[256];
	int64_t park_deadline_ms;
	int64_t park_retry_ms; /* 0: none */
	uint64_t park_seq;
	unsigned long park_takes; /* 0: any number */
	int status;
	const char *content_type;
	struct strbuf body;
	const char *header_names[HTTP_MAX_HEADERS];
	const char *header_values[HTTP_MAX_HEADERS];
	int nheaders;
	/* Set by http_stream_open: the body is a stream. */
	struct http_stream *stream;
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
/* Every value of a repeated query argument (?a=1&a=2), at most max, in
 * order; returns how many. */
size_t http_query_all(const struct http_request *req, const char *name,
		      const char **out, size_t max);
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

/*
 * Long-poll without a thread: instead of answering, park the request until
 * http_server_wake(key) or the monotonic deadline (mono_ms()).  The
 * handler then runs again with req->wait_deadline_ms set, and
 * req->wait_over once the deadline has passed or the server stops.  Read
 * http_wake_seq(key) before looking for work and pass it here: a wake that
 * came in between resumes the request at once, so none is missed.
 * A request's first park takes one of the parking places its client
 * address has (`--max-parked-per-client`) and one of the server's
 * (`--max-parked`), held until it is answered; when none is left, res is
 * set to 429 (JSON, Retry-After) and the request is not parked.
 * Returns true when the request parked or res holds that 429: return
 * without answering.  False when it cannot park (the server is stopping):
 * answer now.  Release every resource (a database connection) first.
 */
bool http_park(struct http_request *req, struct http_response *res,
	       const char *key, int64_t deadline_ms, uint64_t seq);
uint64_t http_wake_seq(const struct http_request *req, const char *key);
/*
 * What a look left nothing behind, remembered so the next poll need not
 * look: http_mark_empty(key, seq) after a look that read seq before it
 * (http_wake_seq) and left key plainly empty (it took all it found, and
 * found fewer than it asked for); http_known_empty(key, seq),
 * given the seq read just now, is true while no wake of key's bucket came
 * since such a look (seq is still the one it read), for at most a second
 * after it.  A poll that
 * knows key is empty parks at once with that seq: any wake since resumes
 * it.  Work on a queue is always announced by a wake (this process's
 * enqueues, other replicas' notifications, a reconnection's wake-all), so
 * the look it skips would have found nothing; the second bounds what an
 * unannounced change could cost.
 */
void http_mark_empty(const struct http_request *req, const char *key,
		     uint64_t seq);
bool http_known_empty(const struct http_request *req, const char *key,
		      uint64_t seq);
/* http_park for a request that takes at most `takes` items when it looks
 * again (0: any number; see http_server_wake_n), and that also runs its
 * handler again at retry_ms (a monotonic time before deadline_ms; 0: none)
 * without a wake: req->wait_over stays false and req->wait_deadline_ms is
 * still deadline_ms.  For a poll that knows when what holds it back ends
 * (a rate-limit window). */
bool http_park_retry(struct http_request *req, struct http_response *res,
		     const char *key, int64_t deadline_ms, int64_t retry_ms,
		     uint64_t seq, unsigned long takes);

/*
 * Streams (server-sent events) without a thread: http_stream_open makes
 * the response a body of unknown length (chunked), answered at once with
 * status 200 and content type ctype; what http_stream_write appends is
 * sent as the client takes it.  While nothing is buffered the connection
 * is suspended (no thread, no timeout); a write resumes it.  When the
 * stream is over — ended, aborted, the client gone, or the server
 * stopping (which ends every stream cleanly) — on_closed(arg) is called
 * once, on an MHD thread, and must not block; on_drained(arg) (may be
 * NULL) likewise each time the connection has taken every byte written,
 * which lets a writer hold back until its client keeps up.  The caller
 * holds one
 * reference, dropped with http_stream_release (any time, any thread).
 * Returns NULL when the server is stopping: answer normally.
 */
struct http_stream;
typedef void http_stream_fn(void *arg);
struct http_stream *http_stream_open(struct http_request *req,
				     struct http_response *res,
				     const char *ctype,
				     http_stream_fn *on_closed,
				     http_stream_fn *on_drained, void *arg);
/* Appends n bytes (any thread); false once the stream is over. */
bool http_stream_write(struct http_stream *st, const char *data, size_t n);
/* Bytes written and not yet taken by the connection. */
size_t http_stream_buffered(struct http_stream *st);
/* Bytes the connection has taken since the stream opened. */
uint64_t http_stream_sent(struct http_stream *st);
/* Ends the stream: cleanly once what is buffered is sent, or (abort) at
 * once, dropping the buffer and closing the connection. */
void http_stream_end(struct http_stream *st, bool abort);
void http_stream_release(struct http_stream *st);

/* The client's address, without its port ("?" when unknown). */
void http_client_address(const struct http_request *req,
			 char out[HTTP_ADDR_LEN]);

struct http_server_opts {
	const char *listen; /* "HOST:PORT" */
	int threads;
	size_t max_body_bytes;
	unsigned idle_timeout_seconds;
	size_t max_header_bytes; /* request line and headers */
	unsigned max_headers;
	unsigned request_timeout_seconds;
	unsigned max_connections;
	unsigned max_connections_per_client; /* 0 = no limit */
	unsigned max_parked;                 /* in all; 0 = no limit */
	unsigned max_parked_per_client; /* per remote address; 0 = no limit */
	unsigned max_queued; /* waiting for a handler thread; 0 = no limit */
	const struct http_route *routes;
	size_t nroutes;
	void *app;
};

struct http_server;

struct http_server *http_server_start(const struct http_server_opts *o,
				      struct err *e);
/* The port actually bound (useful with port 0). */
int http_server_port(const struct http_server *s);
/* Resumes the requests parked under key (NULL: every parked request).
 * Any thread. */
void http_server_wake(struct http_server *s, const char *key);
/* For n new items under key: resumes the requests parked there longest,
 * until what they take adds up to n (n 0: all of them, as
 * http_server_wake).  Requests between their look and their park look
 * again either way.  Any thread. */
void http_server_wake_n(struct http_server *s, const char *key,
			unsigned long n);
/* Stops accepting, lets requests in progress finish (for up to 10 s; a
 * response sent meanwhile carries "Connection: close"), closes every
 * connection and frees. */
void http_server_stop(struct http_server *s);

/* Matches a path against a pattern, filling req's parameters (exposed for
 * tests). */
bool http_match(const char *pattern, const char *path,
		struct http_request *req);
/* Routes req (method, path and arena set) to the first route matching
 * both, or answers 405 with Allow (the path matches under other methods)
 * or 404 (exposed for tests and the routing fuzzer). */
void http_dispatch(const struct http_route *routes, size_t nroutes,
		   struct http_request *req, struct http_response *res);

#endif
