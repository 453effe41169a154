/*
 * workflows (http) — the executions API under /v1/ns/{ns}/workflows:
 * start, read one with its tasks, the list with filters, search terms and
 * keyset pagination, the history of events, operator actions, the
 * sub-workflow tree, and completing gated tasks (WAIT, HUMAN).
 *
 * Threads: MHD's.  Failure: every error is a JSON body (http/api.h).
 */
#ifndef NF_HTTP_WORKFLOWS_H
#define NF_HTTP_WORKFLOWS_H

#include "http/http.h"

struct dsl_errors;
struct start_request;

http_handler workflows_start;
http_handler workflows_get;
http_handler workflows_list;
http_handler workflows_events;
http_handler workflows_action;
http_handler workflows_tree;
http_handler workflows_task_signal;

/* Reads a start request's common fields (name, version from min_version
 * up, input, correlationId, idempotencyKey, priority, idempotencyStrategy)
 * from body into r, adding each problem to errs at its JSON path; r's
 * strings point into body.  Shared by the native and the Conductor start. */
void workflows_read_start(const json_t *body, int min_version,
			  struct start_request *r, struct dsl_errors *errs);

/* Exposed for tests: cursor text <-> ("startedAt", id). */
char *workflows_cursor_encode(const char *started_at, const char *id);
bool workflows_cursor_decode(const char *cursor, char **started_at, char **id);
/* Parses search terms "input.a.b:value output.x:y" into containment
 * objects (new references, or NULL when there is no term of that side). */
bool workflows_search_terms(const char *q, json_t **input, json_t **output,
			    struct err *e);

#endif
