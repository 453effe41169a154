/*
 * semaphores_repo — configuring semaphores, reading who holds their
 * permits, and sweeping what flow control leaves behind.
 *
 * A semaphore is configured per namespace by name with a number of
 * permits ("Semaphores").  Its permits are leased by queue_lease_gated
 * (queue_repo.h) into "SemaphoreHolders"; a holder whose lease has run out
 * no longer counts.  A semaphore named by a task but never configured gates
 * at a default number of permits, given by the caller; while it has live
 * holders it is listed, marked "configured": false.
 *
 * The JSON of a semaphore:
 *   {"name", "permits", "configured", "inUse",
 *    "holders": [{"taskId", "workflowId", "workerId", "acquiredAt",
 *                 "leaseExpiresAt"}...],
 *    "createdAt", "updatedAt"}      (timestamps ISO 8601 UTC; null when
 *                                    not configured)
 *
 * Threads: callers bring their own connection.  Ownership: JSON text
 * returned is the caller's (free).  Failure: false with e set; ERR_NOT_FOUND
 * for a semaphore that is neither configured nor held.
 */
#ifndef NF_STORE_SEMAPHORES_REPO_H
#define NF_STORE_SEMAPHORES_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct db;

/* Creates or resizes; *created tells which. */
bool semaphores_put(struct db *db, const char *ns_id, const char *name,
		    int permits, bool *created, struct err *e);
/* Every semaphore of the namespace, configured or held, by name: a JSON
 * array into *json_out. */
bool semaphores_list(struct db *db, const char *ns_id, int default_permits,
		     char **json_out, struct err *e);
/* One semaphore as a JSON object; ERR_NOT_FOUND when neither configured
 * nor held. */
bool semaphores_get(struct db *db, const char *ns_id, const char *name,
		    int default_permits, char **json_out, struct err *e);
/* Removes the configuration (holders keep their permits until they give
 * them back); ERR_NOT_FOUND when not configured. */
bool semaphores_delete(struct db *db, const char *ns_id, const char *name,
		       struct err *e);

/* Deletes up to limit holders whose lease has run out or whose task is no
 * longer in progress (canceled with its workflow, say); *n their number. */
bool semaphores_sweep_holders(struct db *db, int limit, size_t *n,
			      struct err *e);
/* Deletes up to limit rate-limit windows that began more than a day ago. */
bool semaphores_prune_rate_windows(struct db *db, int limit, size_t *n,
				   struct err *e);
/* For a poll of queue (its rows' "queueName") held back: when its rate
 * limit's current window (limit leases per `seconds`, as queue_lease_gated
 * counts them) is full and unleased tasks wait, *ms is the milliseconds
 * until that window ends (at least 1); otherwise 0. */
bool semaphores_rate_window_ms(struct db *db, const char *ns_id,
			       const char *queue, int limit, int seconds,
			       long *ms, struct err *e);

#endif
