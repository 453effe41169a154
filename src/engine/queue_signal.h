/*
 * queue_signal — telling every replica that work was enqueued, so the
 * long-polls parked there look again within milliseconds.
 *
 * queue_signal_send raises one "node_flow_task_queues" notification per
 * batch of queues (one per decider transaction, never one per task:
 * NOTIFY serialises committing transactions).  queue_signal_start runs a
 * loop that LISTENs and calls back once per queue named ("*" means every
 * queue: the callback gets NULL).  A notification lost while reconnecting
 * costs a poll its wait and nothing else.
 *
 * Threads: the listening loop has its own thread and connection; the
 * callback runs there and must not block.  Failure: send returns false with
 * e set; the loop logs and reconnects with backoff.
 */
#ifndef NF_ENGINE_QUEUE_SIGNAL_H
#define NF_ENGINE_QUEUE_SIGNAL_H

#include "runtime/loop.h"

#include <jansson.h>

struct db;

/* queues: a JSON array of queue names (duplicates are fine). */
bool queue_signal_send(struct db *db, const json_t *queues, struct err *e);
/* Signals every queue. */
bool queue_signal_send_all(struct db *db, struct err *e);

typedef void queue_signal_fn(const char *queue, void *arg);
struct loop *queue_signal_start(const char *url, queue_signal_fn *fn,
				void *arg);

#endif
