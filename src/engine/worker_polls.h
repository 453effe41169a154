/*
 * worker_polls — remembers which worker polled which queue, in memory, and
 * writes it to "WorkerPolls" once a second in one statement.
 *
 * Threads: worker_polls_note from any thread (a lock around a small
 * table); the flushing loop runs on its own thread and connection.
 * Failure: a flush that fails keeps its counts for the next one; polls
 * noted while the table is full (more than 4096 distinct workers and
 * queues in one second) are counted in a metric and dropped.
 */
#ifndef NF_ENGINE_WORKER_POLLS_H
#define NF_ENGINE_WORKER_POLLS_H

#include "runtime/loop.h"

void worker_polls_note(const char *ns_id, const char *queue,
		       const char *worker);
struct loop *worker_polls_start(const char *database_url);

#endif
