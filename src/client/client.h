/*
 * client — a tiny synchronous HTTP client of a node-flow server, on libcurl's
 * easy interface: one request at a time, a JSON body in, the status, body
 * and content type out.  It knows nothing of the API beyond its base URL;
 * the caller builds paths (with client_escape() for what the user typed) and
 * reads the JSON.
 *
 * Threads: one client belongs to one thread.  client_open() and
 * client_close() also initialise and release libcurl's global state, which
 * is not thread-safe: a process opens one client at a time (the CLI's one).
 * Ownership: the client owns a copy of the base URL; a response's body and
 * content type are owned by it until client_response_free().  Failure:
 * client_request() returns false only when no HTTP answer came (the server
 * is not reachable, a timeout, a malformed URL), with e naming the server:
 * "could not reach node-flow at URL: reason".  Any HTTP status, 4xx and 5xx
 * included, is an answer: true, and the caller reads the status.
 */
#ifndef NF_CLIENT_CLIENT_H
#define NF_CLIENT_CLIENT_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct client;

struct client_response {
	long status;
	char *body; /* NUL-terminated; "" when the answer had none */
	size_t body_len;
	char *content_type; /* "" when absent */
};

/* A client of the server at base_url ("http://HOST:PORT", a trailing '/'
 * ignored). */
struct client *client_open(const char *base_url);
void client_close(struct client *c);
/* The base URL, without a trailing '/'. */
const char *client_base_url(const struct client *c);

/*
 * Sends method to base_url + path (path starts with '/' and is already
 * escaped).  json_body may be NULL (no body); otherwise it is sent as
 * application/json.  Waits at most the client's timeout (60 s, 10 s of it
 * to connect).
 */
bool client_request(struct client *c, const char *method, const char *path,
		    const char *json_body, struct client_response *r,
		    struct err *e);
void client_response_free(struct client_response *r);

/* s percent-encoded for a path segment or a query value (everything but
 * RFC 3986's unreserved characters); the caller frees it. */
char *client_escape(const char *s);

#endif
