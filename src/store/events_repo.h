/*
 * events_repo — the reads behind the live history streams: a workflow's
 * events after a cursor, in seq order, one row at a time; a namespace's
 * status changes after a position; and which namespaces a batch of
 * notified (workflowId, seq) pairs has status changes in.
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

/*
 * A namespace's workflow status changes (its WORKFLOW_* events) in one
 * order every replica reads alike: by the id of the transaction that
 * wrote each ("xid"), then workflow id, then seq.  A reader takes an event
 * only once its transaction is older than every transaction still running
 * (its snapshot's xmin): a change that commits later is then always after
 * every position already read, so a position resumes with no gap and no
 * duplicate.  The position is also the stream's event id:
 * "<xid>-<workflowId>-<seq>", opaque to clients.
 */
struct events_ns_pos {
	uint64_t xid;
	char wf_id[37];
	int64_t seq;
};

enum { EVENTS_NS_POS_LEN = 20 + 1 + 36 + 1 + 20 + 1 };

/* The position of "now": before every change a transaction still running
 * (or yet to start) writes. */
bool events_ns_now(struct db *db, struct events_ns_pos *pos, struct err *e);
/* Formats pos into out (EVENTS_NS_POS_LEN); parses one, false when text is
 * no position. */
void events_ns_pos_format(const struct events_ns_pos *pos, char *out);
bool events_ns_pos_parse(const char *text, struct events_ns_pos *pos);

/* One status change: its position; whether it may be sent (its
 * transaction is older than every running one: once one is not, none
 * after it is); its execution's definition name (NULL when the execution
 * is gone); and {"id","name","version","status","correlationId","reason",
 * "parentWorkflowId","startedAt","updatedAt","endedAt","eventType","seq"},
 * the execution as it is now (NULL when gone). */
typedef void events_ns_fn(const struct events_ns_pos *pos, bool settled,
			  const char *def_name, const char *json, void *arg);

/* Calls fn for the namespace's changes after `after`, at most limit, in
 * order; *count is how many. */
bool events_ns_read(struct db *db, const char *ns_id,
		    const struct events_ns_pos *after, int limit,
		    events_ns_fn *fn, void *arg, int *count, struct err *e);

/* For the n notified pairs (ids[i], seqs[i]), calls fn once per namespace
 * that has a WORKFLOW_* event among them. */
typedef void events_ns_id_fn(const char *ns_id, void *arg);
bool events_changed_namespaces(struct db *db, const char *const *ids,
			       const int64_t *seqs, int n, events_ns_id_fn *fn,
			       void *arg, struct err *e);

#endif
