/*
 * cache_repo — the task output cache ("TaskOutputCache"): look-ups for the
 * decider and the hourly pruning.
 *
 * An entry is (namespace, task definition, key) -> output, valid until its
 * "expiresAt"; an expired entry is a miss even before it is pruned.
 * Entries are written by the statement that records a task's result
 * (queue_repo.h), from the key the decider resolved when it scheduled the
 * task, and never for an offloaded output (a reference would outlive the
 * payload it points at).
 *
 * Threads: callers bring their own connection.  Ownership: a hit is a new
 * reference, the caller's.  Failure: false with e set.
 */
#ifndef NF_STORE_CACHE_REPO_H
#define NF_STORE_CACHE_REPO_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>

struct db;

/* *out: the unexpired output cached for (ns_id, task_def, key), or NULL. */
bool cache_get(struct db *db, const char *ns_id, const char *task_def,
	       const char *key, json_t **out, struct err *e);

/* Deletes up to limit expired entries; *n: how many. */
bool cache_prune(struct db *db, int limit, long *n, struct err *e);

#endif
