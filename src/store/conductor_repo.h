/*
 * conductor_repo — the reads the Conductor-compatible API needs that the
 * native API does not: finding a task by its id alone or by reference name,
 * tasks and workflows shaped as Conductor's Task and Workflow JSON (times in
 * epoch milliseconds, retryCount = attempt, seq), the search result of
 * GET /api/workflow/search, correlated and running workflows and queue
 * sizes.  Task logs are task_logs_repo's.
 *
 * Writes go through the same repositories as the native API (queue_repo,
 * actions_repo, executions_repo, task_logs_repo).
 *
 * Finding a task by id alone: "TaskExecutions" is hash-partitioned on
 * "workflowId" with no index on "id".  A task's id is a UUIDv7 minted within
 * moments of its "scheduledAt", so the lookup bounds "scheduledAt" to ten
 * minutes either side of the id's time and PostgreSQL 18 skip-scans
 * "TaskExecutions_recent_by_def_idx" (namespace, task name, scheduledAt) in
 * each of the 16 partitions: the cost grows with the tasks the namespace
 * scheduled in those twenty minutes, not with history.  A task whose id and
 * "scheduledAt" are more than ten minutes apart (clocks that far off) is not
 * found (404).
 *
 * Threads: callers bring their own connection.  Ownership: strings returned
 * through char ** are the caller's (free).  Failure: false with e set;
 * ERR_NOT_FOUND when the task or workflow does not exist in the namespace.
 */
#ifndef NF_STORE_CONDUCTOR_REPO_H
#define NF_STORE_CONDUCTOR_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

struct db;

/* Where a task is: its workflow, name, status and queue row. */
struct cond_task_loc {
	char workflow_id[37];
	char task_id[37];
	char status[32];
	char *def_name;  /* malloc'd */
	char *ref_name;  /* malloc'd */
	char *leased_by; /* malloc'd; NULL when no worker holds it */
	bool queued;     /* it has a "TaskQueues" row */
};
void cond_task_loc_free(struct cond_task_loc *l);

/* By id; wf_id may be NULL (then by the id's time window, see above). */
bool cond_task_locate(struct db *db, const char *ns_id, const char *wf_id,
		      const char *task_id, struct cond_task_loc *out,
		      struct err *e);
/* The latest attempt of reference ref in the workflow. */
bool cond_task_by_ref(struct db *db, const char *ns_id, const char *wf_id,
		      const char *ref, struct cond_task_loc *out,
		      struct err *e);

/* Conductor Task JSON of the tasks named in tasks_json, a JSON array of
 * objects with "id" and "workflowId" (what queue_lease returns), in that
 * order, as a JSON array. */
bool cond_tasks_json(struct db *db, const char *ns_id, const char *tasks_json,
		     char **json_out, struct err *e);

/* Conductor Workflow JSON (with "tasks" when include_tasks). */
bool cond_workflow_json(struct db *db, const char *ns_id, const char *id,
			bool include_tasks, char **json_out, struct err *e);

struct cond_search {
	const char *statuses;      /* JSON array, or NULL */
	const char *workflow_type; /* or NULL */
	const char *workflow_id;   /* or NULL */
	const char *correlation_id;
	const char *start_after_ms; /* startTime > n, or NULL */
	const char *start_before_ms;
	const char *free_text; /* or NULL: everything */
	bool ascending;
	long start, size;
};
/* {"totalHits":n,"results":[WorkflowSummary…]} */
bool cond_search_json(struct db *db, const char *ns_id,
		      const struct cond_search *s, char **json_out,
		      struct err *e);

/* The workflows of name with correlation id, newest first, as an array. */
bool cond_correlated_json(struct db *db, const char *ns_id, const char *name,
			  const char *correlation_id, bool include_closed,
			  bool include_tasks, char **json_out, struct err *e);
/* Ids of the RUNNING workflows of name (version 0: any), as an array. */
bool cond_running_json(struct db *db, const char *ns_id, const char *name,
		       int version, char **json_out, struct err *e);

/* Replaces the output of a task that has not finished (an IN_PROGRESS
 * update's progress); false with ERR_CONFLICT when it has.  A large output
 * goes to the payload store; one above the maximum is refused
 * (ERR_TOO_LARGE) and nothing changes. */
bool cond_task_progress(struct db *db, const char *ns_id, const char *wf_id,
			const char *task_id, const char *output_json,
			struct err *e);

/* Tasks of queue waiting for a worker (deferred ones included). */
bool cond_queue_size(struct db *db, const char *queue, int64_t *n,
		     struct err *e);

#endif
