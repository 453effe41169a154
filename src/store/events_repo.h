/*
 * events_repo — the reads behind the live history streams: a workflow's
 * events after a cursor, in seq order, one row at a time; and, for a batch
 * of notified (workflowId, seq) pairs, the WORKFLOW_* ones with their
 * execution's summary.
 *
 * Threads: as db.h (one thread per connection).  Ownership: strings passed
 * to the callbacks are valid during the call only.  Failure: false with e
 * set; a connection error leaves the connection to the pool to repair.
 */
#ifndef NF_STORE_EVENTS_REPO_H
#define NF_STORE_EVENTS_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

struct db;

/* Whether workflow id exists in namespace ns_id (*found). */
bool events_workflow_exists(struct db *db, const char *ns_id, const char *id,
			    bool *found, struct err *e);

/* One event: its seq, its type, and the object the JSON history endpoint
 * returns for it ({"seq","type","taskId","data","at"}). */
typedef void events_row_fn(int64_t seq, const char *type, const char *json,
			   void *arg);

/* Calls fn for each event of id with seq > after, at most limit, in seq
 * order; *count is how many. */
bool events_read(struct db *db, const char *ns_id, const char *id,
		 int64_t after, int limit, events_row_fn *fn, void *arg,
		 int *count, struct err *e);

/* One workflow status change: the execution's namespace, its definition's
 * name, and {"id","name","version","status","correlationId","reason",
 * "parentWorkflowId","startedAt","updatedAt","endedAt","eventType","seq"}. */
typedef void events_change_fn(const char *ns_id, const char *def_name,
			      const char *json, void *arg);

/* For the n pairs (ids[i], seqs[i]), calls fn for each event whose type is
 * WORKFLOW_*, in the order given. */
bool events_workflow_changes(struct db *db, const char *const *ids,
			     const int64_t *seqs, int n, events_change_fn *fn,
			     void *arg, struct err *e);

#endif
