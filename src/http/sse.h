/*
 * sse — live history over server-sent events: a workflow's history, then
 * its new events as they are written (GET /v1/ns/{ns}/workflows/{id}/events
 * with Accept: text/event-stream), and a namespace's workflow status
 * changes (GET /v1/ns/{ns}/events).
 *
 * One hub per server process.  It runs the event listener (one LISTEN
 * node_flow_workflow_events connection) and one thread that does the
 * reading: a notification marks the streams of its workflow, and the
 * thread reads each marked stream's events from that stream's own cursor
 * (seq > the last sent, in seq order, in batches) on a pool connection
 * released as soon as the pass is done.  A notification is only a hint:
 * every stream is also re-read at each heartbeat, so one that was lost
 * costs latency, never an event.  A namespace stream reads its
 * namespace's status changes after its own position (store/events_repo.h:
 * in writing-transaction order, each once every older transaction has
 * ended; the position is the event's id, so Last-Event-ID resumes on any
 * replica); notifications mark the streams of the namespaces they have
 * status changes in (looked up only while a namespace stream is open),
 * and a stream held back by a running transaction looks again shortly.
 * An idle stream
 * holds no thread and no connection: its HTTP connection is suspended
 * (http_stream_open).
 *
 * Limits: a stream whose unsent bytes would pass --sse-buffer-bytes (a
 * client that does not read) is cut off; streams are capped in all and
 * per client address (429).  Every stream ends when the server stops.
 *
 * Threads: handlers run on MHD's threads; the hub's own thread and the
 * listener's do the rest.  Ownership: the hub is the composition root's
 * (sse_start, sse_stop before http_server_stop, sse_free after it).
 */
#ifndef NF_HTTP_SSE_H
#define NF_HTTP_SSE_H

#include "http/http.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct db;
struct db_pool;

struct sse_opts {
	const char *database_url; /* for the listener's connection */
	struct db_pool *pool;     /* for the reads */
	int heartbeat_seconds;
	size_t buffer_bytes;
	unsigned max_streams;            /* 0: no limit */
	unsigned max_streams_per_client; /* 0: no limit */
};

struct sse_hub;

struct sse_hub *sse_start(const struct sse_opts *o);
/* Stops the listener and the reading thread; the streams stay open until
 * the HTTP server ends them. */
void sse_stop(struct sse_hub *h);
void sse_free(struct sse_hub *h);

/* Whether the request asks for an event stream (Accept). */
bool sse_wanted(const struct http_request *req);

/* Streams workflow id's history after seq `after` (or Last-Event-ID) in
 * namespace ns_id, then follows it; answers 404 when there is no such
 * workflow, 429 over the caps.  The caller has checked the namespace. */
void sse_workflow_stream(struct sse_hub *h, struct http_request *req,
			 struct http_response *res, struct db *db,
			 const char *ns_id, const char *id, int64_t after);

/* GET /v1/ns/{ns}/events: the namespace's workflow status changes
 * (?name=DEF filters by definition) from the present, or after the
 * position of Last-Event-ID / ?after (400 when it is none). */
void sse_namespace_events(struct http_request *req, struct http_response *res);

#endif
