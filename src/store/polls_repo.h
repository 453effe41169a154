/*
 * polls_repo — "WorkerPolls": the last poll of each worker on each queue.
 *
 * Written in batches (engine/worker_polls.c buffers polls in memory and
 * flushes them every second), one upsert for many polls, never one write
 * per poll: polling is the hottest request there is.
 *
 * Threads: the caller's connection.  Failure: false with e set.
 */
#ifndef NF_STORE_POLLS_REPO_H
#define NF_STORE_POLLS_REPO_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>

struct db;

/* rows: a JSON array of {ns, queue, worker, count}; "lastPollAt" becomes
 * the database's now(). */
bool polls_record(struct db *db, const json_t *rows, struct err *e);

#endif
