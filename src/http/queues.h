/*
 * queues (http) — the worker API under /v1/ns/{ns}/queues/{queue}: poll
 * (lease tasks), and per task complete, fail, heartbeat, release and
 * defer, plus a batch of results in one request.  {queue} is the task
 * definition's name.
 *
 * A result for a task whose lease this worker no longer holds answers 409
 * and changes nothing.
 *
 * Threads: MHD's.  Failure: every error is a JSON body (http/api.h).
 */
#ifndef NF_HTTP_QUEUES_H
#define NF_HTTP_QUEUES_H

#include "http/http.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct db;
struct err;
struct queue_ref;

http_handler queues_poll;
http_handler queues_complete;
http_handler queues_fail;
http_handler queues_heartbeat;
http_handler queues_release;
http_handler queues_defer;
http_handler queues_results;

/*
 * One look of a worker's long-poll at queue q (this API's and Conductor's,
 * http/conductor_tasks.h): a lease (workers_poll) of up to count tasks,
 * unless the poll may wait (waits), or waited until its wait ran out
 * (req->wait_over), and a look since the queue's last wake left it plainly
 * empty (http_known_empty), when nothing is leased and the database is not
 * asked.  A look that leaves the queue plainly empty
 * (it found fewer tasks than it asked for, workers_poll) is remembered for
 * the next (http_mark_empty): the worker that took the last tasks polls
 * again without a look that would find nothing.  key is the queue's wake key
 * and seq the wake count read before (http_wake_seq).  *json_out (the
 * caller's to free) is the leased tasks' JSON array, "[]" when none, and *n
 * their number.  When nothing was
 * leased and the poll may wait, *retry_at is when to look again before a
 * wake (a monotonic time; 0: on a wake only, workers_retry_ms).  On
 * failure, false with e set.
 */
bool queues_look(struct http_request *req, struct db *db,
		 const struct queue_ref *q, const char *key, uint64_t seq,
		 bool waits, const char *worker, int count, char **json_out,
		 size_t *n, int64_t *retry_at, struct err *e);

#endif
