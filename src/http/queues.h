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

http_handler queues_poll;
http_handler queues_complete;
http_handler queues_fail;
http_handler queues_heartbeat;
http_handler queues_release;
http_handler queues_defer;
http_handler queues_results;

#endif
