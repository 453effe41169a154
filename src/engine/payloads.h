/*
 * payloads — the payload collector: an engine loop that deletes offloaded
 * payloads no execution or task row references any more (their
 * workflow's partition was dropped, or restart or rerun replaced the row)
 * once they are older than the grace period, and prunes the task output
 * cache's expired entries (store/cache_repo.h) every
 * cache_prune_interval_seconds, the first time on its first tick.
 *
 * Safe on every replica at once: the payload table is claimed with SKIP
 * LOCKED, and deleting a file or a cache entry twice is harmless.
 *
 * Threads: its own thread and connection.  Ownership: the loop is the
 * caller's (loop_stop).  Failure: a failed tick is logged and retried with
 * the loop's backoff.
 */
#ifndef NF_ENGINE_PAYLOADS_H
#define NF_ENGINE_PAYLOADS_H

#include "runtime/config.h"
#include "runtime/loop.h"

struct loop *payloads_loop_start(const struct config *cfg);

#endif
