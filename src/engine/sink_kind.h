/*
 * sink_kind — the kinds of outbox sinks, as a table: each row checks the
 * configuration a sink of its kind is registered with and turns one event
 * into the HTTP request that delivers it.  A new kind is a new row.
 *
 * `webhook`: {"url", "secret"?, "headers"?} — an HTTP POST of the event
 * envelope (JSON) to url, with
 *     Content-Type: application/json
 *     X-NodeFlow-Event-Id: <the outbox row's id>
 *     X-NodeFlow-Event-Type: <its eventType>
 *     X-NodeFlow-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
 *                           t + "." + body)>   (only with a secret)
 * and the configured extra headers.
 *
 * Threads: any (the table is constant).  Ownership: a prepared request
 * belongs to the caller (sink_request_free).  Failure: check adds to errs;
 * prepare returns false with e set (an unusable stored configuration).
 */
#ifndef NF_ENGINE_SINK_KIND_H
#define NF_ENGINE_SINK_KIND_H

#include "engine/dsl.h"
#include "util/err.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct sink_request {
	char *url;
	struct curl_slist *headers;
};

struct sink_delivery {
	long long event_id;
	const char *event_type;
	const char *body;   /* the exact bytes sent and signed */
	const char *config; /* the sink's stored configuration, JSON text */
	const char *secret; /* NULL: none */
	int64_t now_s;      /* the signature's timestamp */
};

struct sink_kind {
	const char *kind;
	/* Checks the kind's members of a sink body (path prefix "$"); fills
	 * config (an empty object: what is stored, never the secret) and
	 * *secret (NULL: none; free()). */
	void (*check)(const json_t *body, json_t *config, char **secret,
		      struct dsl_errors *errs);
	bool (*prepare)(const struct sink_delivery *d, struct sink_request *out,
			struct err *e);
};

/* The kind named so, or NULL. */
const struct sink_kind *sink_kind_find(const char *kind);
/* The kinds' names, comma-separated, for messages. */
const char *sink_kind_names(void);
void sink_request_free(struct sink_request *r);

/* hex_out (65 bytes) = hex of HMAC-SHA256(secret, "<t>." + body). */
void sink_signature(const char *secret, int64_t t, const char *body,
		    char hex_out[65]);

#endif
