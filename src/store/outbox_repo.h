/*
 * outbox_repo — "Sinks", "StatusListeners" and the delivery bookkeeping of
 * "OutboxEvents": what the relay claims and records, and the dead letter
 * the API lists and replays.
 *
 * Claiming is a lease, not a held lock: one statement takes deliverable
 * rows with FOR UPDATE SKIP LOCKED and moves their "nextAttemptAt" past the
 * delivery's deadline, then commits, so no transaction stays open while a
 * request is in flight and another relay skips them until the lease runs
 * out.  The moved "nextAttemptAt" is the claim's token: recording the
 * outcome re-checks it, so a relay whose lease ran out (and whose row
 * another relay took) records nothing.
 *
 * Threads: any; a struct db is used by one thread at a time.  Ownership:
 * returned json_t values and claimed items belong to the caller
 * (json_decref, outbox_items_free).  Failure: false with e set; a missing
 * sink or listener is ERR_NOT_FOUND.
 */
#ifndef NF_STORE_OUTBOX_REPO_H
#define NF_STORE_OUTBOX_REPO_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct db;

/* --------------------------------------------------------------- sinks */

/* Creates or replaces a sink; config is the kind's stored configuration,
 * secret may be NULL (none). */
bool outbox_sink_put(struct db *db, const char *ns_id, const char *name,
		     const char *kind, const json_t *config, const char *secret,
		     bool *created, struct err *e);
/* {name, kind, <config members>, hasSecret, createdAt, updatedAt}: never
 * the secret. */
bool outbox_sink_get(struct db *db, const char *ns_id, const char *name,
		     json_t **out, struct err *e);
/* An array of what outbox_sink_get answers, by name. */
bool outbox_sink_list(struct db *db, const char *ns_id, json_t **out,
		      struct err *e);
bool outbox_sink_delete(struct db *db, const char *ns_id, const char *name,
			struct err *e);

/* ----------------------------------------------------- status listeners */

/* The arrays are JSON arrays of strings; event_types is what the trigger
 * matches ("WORKFLOW_…", "TASK_…"). */
bool outbox_listener_put(struct db *db, const char *ns_id,
			 const char *workflow_name, const char *sink,
			 const json_t *workflow_transitions,
			 const json_t *task_transitions,
			 const json_t *event_types, bool *created,
			 struct err *e);
/* {workflowName, sink, workflowTransitions, taskTransitions, createdAt,
 * updatedAt} */
bool outbox_listener_get(struct db *db, const char *ns_id,
			 const char *workflow_name, json_t **out,
			 struct err *e);
bool outbox_listener_list(struct db *db, const char *ns_id, json_t **out,
			  struct err *e);
bool outbox_listener_delete(struct db *db, const char *ns_id,
			    const char *workflow_name, struct err *e);

/* ------------------------------------------------------------ delivery */

struct outbox_item {
	long long id;
	char token[48]; /* the claim's "nextAttemptAt", as text */
	int attempts;   /* before this delivery */
	char *body;     /* the envelope sent: {id, eventType, …, payload} */
	char *event_type;
	char *sink;      /* as the row names it ("" for none) */
	bool sink_found; /* a sink of the namespace answers to it */
	char *sink_name; /* the sink found */
	char *kind;      /* its kind */
	char *config;    /* its configuration (JSON text) */
	char *secret;    /* NULL: none */
};

/* Claims up to limit deliverable rows for lease_ms.  The sink a row names
 * is "NAME", or "PROVIDER:NAME" (the name after the first colon; a sink
 * named by the whole text is the fallback). */
bool outbox_claim(struct db *db, int limit, long lease_ms,
		  struct outbox_item **out, size_t *n, struct err *e);
void outbox_items_free(struct outbox_item *items, size_t n);

/* Records a delivery (false *recorded: the claim was lost). */
bool outbox_published(struct db *db, const struct outbox_item *it,
		      bool *recorded, struct err *e);
/* Records a failed attempt: attempts + 1, lastError, the next attempt
 * delay_ms from now; dead-lettered when attempts reach max_attempts or
 * when dead is set. */
bool outbox_failed(struct db *db, const struct outbox_item *it,
		   const char *error, long delay_ms, int max_attempts,
		   bool dead, bool *dead_lettered, struct err *e);
/* Deletes up to limit rows published more than retention_hours ago. */
bool outbox_prune(struct db *db, long retention_hours, int limit,
		  size_t *deleted, struct err *e);
/* Deletes up to limit rows dead-lettered more than retention_hours ago. */
bool outbox_prune_dead(struct db *db, long retention_hours, int limit,
		       size_t *deleted, struct err *e);

/* --------------------------------------------------------- dead letter */

/* The namespace's dead-lettered rows with an id above after_id (NULL: from
 * the start), in id order: an array of {id, eventType, sink, workflowId,
 * taskId, payload, attempts, lastError, createdAt, deadLetteredAt}, and
 * *more when rows follow the page. */
bool outbox_dead_list(struct db *db, const char *ns_id, const char *after_id,
		      int limit, json_t **items, bool *more, struct err *e);
/* Re-queues dead-lettered rows of the namespace (all, or those of ids, a
 * JSON array of integers): attempts 0, due now, deadLetteredAt cleared;
 * and wakes the relays. */
bool outbox_dead_replay(struct db *db, const char *ns_id, bool all,
			const json_t *ids, long long *replayed, struct err *e);

#endif
