/*
 * conductor_workflows — Conductor's workflow API: start (StartWorkflowRequest
 * or name plus input), get, status, correlated and running lookups, the
 * operator actions (pause, resume, terminate, retry, restart, rerun, skip),
 * their bulk forms, and search.
 *
 * Search reads Conductor's query forms joined by AND: `workflowType = 'x'`,
 * `workflowId = 'x'`, `correlationId = 'x'`, `status = 'X'`,
 * `status IN (A, B)`, `startTime > ms`, `startTime < ms`; freeText `*` (or
 * none) matches everything, other text a workflow whose name, id or
 * correlation id is that text or whose input or output JSON contains it.
 * Pages by start and size; sort by startTime only.
 *
 * Threads: MHD's.  Failure: Conductor's error body (http/conductor.h).
 */
#ifndef NF_HTTP_CONDUCTOR_WORKFLOWS_H
#define NF_HTTP_CONDUCTOR_WORKFLOWS_H

#include "http/http.h"

#include <jansson.h>
#include <stdbool.h>

struct cond_search;

http_handler cond_workflow_start;
http_handler cond_workflow_start_named;
http_handler cond_workflow_get;
http_handler cond_workflow_status;
http_handler cond_workflow_correlated;
http_handler cond_workflow_running;
http_handler cond_workflow_put_action;  /* PUT {id}/pause, {id}/resume */
http_handler cond_workflow_post_action; /* POST {id}/retry|restart|rerun,
					   {name}/correlated */
http_handler cond_workflow_skip;
http_handler cond_workflow_terminate;
http_handler cond_workflow_bulk;
http_handler cond_workflow_search;

/* Parses a search query into s (strings allocated in the strbufs of
 * store, freed by the caller with json_decref(*store)); false with a
 * message naming the clause in msg.  Exposed for the unit tests. */
bool cond_parse_query(const char *query, struct cond_search *s, json_t **store,
		      char *msg, size_t msg_size);

#endif
