/*
 * queue_signal — telling the long-polls parked on every replica that work
 * was enqueued, so they look again within milliseconds, and no more of
 * them than the work can use.
 *
 * A signal names queues, each with how many tasks were enqueued on it (a
 * JSON object of queue name to count, built with queue_signal_add).
 * queue_signal_local hands it to this process's parked polls through the
 * callback given to queue_signal_start; queue_signal_send raises one
 * "node_flow_task_queues" notification carrying it to the other replicas
 * (one per batch, never one per task: NOTIFY serialises committing
 * transactions).  Sent inside a transaction, it is delivered at commit.
 * The payload's first line names the sending process, so a process's
 * listener passes over its own signals (queue_signal_local delivered them
 * already); each further line is a queue name, a tab and the count.  A
 * line without a count, and "*", wake every poll waiting there.  System
 * tasks, which no poll takes, are counted under QUEUE_SIGNAL_SYSTEM: the
 * receivers wake their system-task runners.  A
 * notification lost while reconnecting costs a poll its wait and nothing
 * else; after a reconnection every local poll looks again.
 *
 * Threads: queue_signal_start is called once, before any signal is
 * sent; send and local from any thread.  The listening loop has its own
 * thread and connection; the callback runs on it (remote signals) or on
 * the caller's thread (local ones) and must not block.  Failure: send
 * returns false with e set; the loop logs and reconnects with backoff.
 */
#ifndef NF_ENGINE_QUEUE_SIGNAL_H
#define NF_ENGINE_QUEUE_SIGNAL_H

#include "runtime/loop.h"

#include <jansson.h>

struct db;

/* The name a signal counts system tasks under (any type, any queue): no
 * queue's, a queue's name being "<namespace>/<name>". */
#define QUEUE_SIGNAL_SYSTEM "system"

/* Called per queue named, with the tasks enqueued on it (0: unknown, wake
 * every poll); queue NULL means every queue. */
typedef void queue_signal_fn(const char *queue, unsigned long tasks, void *arg);

/* Counts `tasks` more enqueued on queue in queues (a JSON object). */
void queue_signal_add(json_t *queues, const char *queue, unsigned long tasks);
/* Notifies the other replicas of what queues counts (nothing when it is
 * empty). */
bool queue_signal_send(struct db *db, const json_t *queues, struct err *e);
/* Notifies the other replicas that any queue may have work. */
bool queue_signal_send_all(struct db *db, struct err *e);
/* Wakes this process's polls (nothing before queue_signal_start). */
void queue_signal_local(const json_t *queues);

/* Listens for the other replicas' signals; fn also receives the local
 * ones. */
struct loop *queue_signal_start(const char *url, queue_signal_fn *fn,
				void *arg);

#endif
