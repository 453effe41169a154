/*
 * executions_repo — workflow executions: starting one, reading one with its
 * tasks, the keyset-paginated list, and the history of events.
 *
 * Reads are shaped into JSON by PostgreSQL itself (jsonb_build_object), so
 * an execution travels from the table to the HTTP response as text, with
 * timestamps at full microsecond precision.
 *
 * Threads: callers bring their own connection.  Ownership: strings returned
 * through char ** are the caller's (free).  Failure: false with e set;
 * ERR_NOT_FOUND when the execution does not exist in that namespace.
 */
#ifndef NF_STORE_EXECUTIONS_REPO_H
#define NF_STORE_EXECUTIONS_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct db;

struct exec_start {
	const char *ns_id;
	const char *def_name;
	int def_version;
	const char *definition; /* JSON snapshot, or NULL: the registered one */
	const char *input;      /* JSON text, through the json funnel */
	const char *variables;  /* JSON text */
	const char *correlation_id;  /* may be NULL */
	const char *idempotency_key; /* may be NULL */
	int priority;
	const char *parent_workflow_id; /* may be NULL */
	const char *parent_task_id;     /* may be NULL */
	/* The definition's timeoutSeconds (0: none) and timeoutPolicy
	 * (TIME_OUT_WF or ALERT_ONLY): a workflowTimeout timer. */
	int64_t timeout_seconds;
	const char *timeout_policy;
	/* Set when input is already the payload store's placeholder for an
	 * offloaded input (payload_offload), this being its reference. */
	const char *input_ref;
};

/*
 * Starts written by one statement, so one transaction: for each, the
 * execution, its idempotency key (INSERT … ON CONFLICT DO NOTHING: the
 * key's table is unpartitioned, so its primary key really constrains), its
 * first "DecideQueues" row, its first event and, with a timeout, its
 * workflowTimeout timer.  Their inputs have been through payload_offload:
 * this writes no payload.  out[i] tells whether s[i] was written and its
 * id; one not written had its idempotency key taken, by an earlier start
 * or by an earlier one of s[] (the first of two with the same key takes
 * it): exec_start_existing names the owner.  Fails as a whole, writing
 * nothing.
 */
struct exec_started {
	char id[37];
	bool created;
	char started_at[48]; /* "startedAt" as text */
	char ns_name[64];    /* the namespace's name ("" if longer) */
};
bool exec_start_many(struct db *db, const struct exec_start *const *s, size_t n,
		     struct exec_started *out, struct err *e);

/* exec_start_many of no start: plans it on a new connection (see
 * queue_warm).  Writes nothing. */
bool exec_warm(struct db *db, struct err *e);

/* x = *s with its input offloaded when large (unless input_ref is set):
 * x->input becomes the payload store's placeholder (*stored, to free) and
 * x->input_ref its reference (ref).  Too large an input: false,
 * ERR_TOO_LARGE, nothing written. */
bool exec_start_offload(struct db *db, const struct exec_start *s,
			struct exec_start *x, char **stored, char ref[48],
			struct err *e);

/* One start: its input offloaded when large (unless input_ref is set),
 * then exec_start_many of one.  When the key already exists nothing is
 * written, *created is false and id_out is the existing execution's id. */
bool exec_start(struct db *db, const struct exec_start *s, char id_out[37],
		bool *created, struct err *e);

/* The execution that holds s's idempotency key, committed (ERR_CONFLICT
 * when the start that took it has not committed yet). */
bool exec_start_existing(struct db *db, const struct exec_start *s,
			 char id_out[37], struct err *e);

/* The execution as JSON (with "tasks" when include_tasks). */
bool exec_get_json(struct db *db, const char *ns_id, const char *id,
		   bool include_tasks, char **json_out, struct err *e);

struct exec_filter {
	const char *statuses; /* JSON array of statuses, or NULL */
	const char *def_name;
	const char *correlation_id;
	const char *started_after;  /* timestamptz text, inclusive */
	const char *started_before; /* timestamptz text, exclusive */
	const char *input_contains; /* JSON object for @>, or NULL */
	const char *output_contains;
	/* Keyset cursor: the last row of the previous page. */
	const char *after_started_at; /* "startedAt"::text, full precision */
	const char *after_id;
	int limit;
};

/* A page, newest first, as a JSON array; *next_started_at and *next_id are set
 * (malloc'd) when there is a further page, else NULL. */
bool exec_list_json(struct db *db, const char *ns_id,
		    const struct exec_filter *f, char **json_out,
		    char **next_started_at, char **next_id, struct err *e);

/* Events with seq > after_seq, in order, at most limit, as a JSON array. */
bool exec_events_json(struct db *db, const char *ns_id, const char *id,
		      int64_t after_seq, int limit, char **json_out,
		      struct err *e);

#endif
