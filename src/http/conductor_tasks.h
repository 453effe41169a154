/*
 * conductor_tasks — Conductor's worker API: polls (one task, or a batch
 * with a long-poll that parks like the native poll), task results
 * (POST /api/tasks, /api/tasks/update-v2, by reference name), a task by
 * id, task logs and queue sizes.
 *
 * A result is accepted from whoever sends it while the task is queued and
 * not finished (Conductor does not tie results to the polling worker); a
 * result for a finished task changes nothing and is answered as accepted,
 * as Conductor does.  IN_PROGRESS keeps the output sent as the task's
 * progress; with extendLease it renews the lease, without it the task goes
 * back to its queue after callbackAfterSeconds.
 *
 * Threads: MHD's.  Failure: Conductor's error body (http/conductor.h).
 */
#ifndef NF_HTTP_CONDUCTOR_TASKS_H
#define NF_HTTP_CONDUCTOR_TASKS_H

#include "http/http.h"

http_handler cond_tasks_poll;
http_handler cond_tasks_poll_batch;
http_handler cond_tasks_update;
http_handler cond_tasks_update_v2;
http_handler cond_tasks_update_by_ref;
http_handler cond_tasks_get;
http_handler cond_tasks_log_add;
http_handler cond_tasks_logs;
http_handler cond_tasks_queue_size;
http_handler cond_tasks_queue_sizes;

#endif
