/*
 * task_logs — task log lines over HTTP.  The native routes
 *
 *     POST /v1/ns/{ns}/tasks/{taskId}/logs   {"logs":[…]} or {"log":"…"}
 *     GET  /v1/ns/{ns}/tasks/{taskId}/logs   ?after=SEQ&limit=N
 *
 * and the reading and storing of a task result's `logs`, shared by the
 * worker routes (queues.c) and Conductor's (conductor_tasks.c), so every
 * route applies the same limits: a line longer than --task-log-max-bytes
 * is refused with 413, an append that would take a task past
 * --task-logs-max-per-task with 409, and nothing of a refused append is
 * kept.  A result's logs are appended before the result is applied: a
 * result refused after that (a lost lease) leaves them, as they tell of
 * work that happened.
 *
 * Threads: MHD's.  Ownership: task_logs_parse's array is the caller's
 * (json_decref).  Failure: false with e set (the handlers answer it).
 */
#ifndef NF_HTTP_TASK_LOGS_H
#define NF_HTTP_TASK_LOGS_H

#include "http/http.h"
#include "runtime/config.h"
#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>

struct db;

/* Reads logs — an array whose items are a string or {"log": string,
 * "createdTime"?: epoch ms} — into *out, a JSON array of {log,
 * createdTime} (the time now when not given).  path names logs in errors
 * ("$.logs").  ERR_INVALID for a wrong shape, ERR_TOO_LARGE for a line or
 * a count past the limits. */
bool task_logs_parse(const json_t *logs, const char *path,
		     const struct config *cfg, json_t **out, struct err *e);

/* Appends lines (task_logs_parse's) to the task; nothing when empty.
 * wf_id NULL: found from the task id. */
bool task_logs_store(struct db *db, const struct config *cfg, const char *ns_id,
		     const char *wf_id, const char *task_id,
		     const json_t *lines, struct err *e);

void task_logs_post(struct http_request *req, struct http_response *res);
void task_logs_get(struct http_request *req, struct http_response *res);

#endif
