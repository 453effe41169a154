/*
 * subflows_repo — the rows workflows write about other workflows, and the
 * gates that wait on the world: starting executions from a decision
 * (sub-workflows, START_WORKFLOW, failure workflows), telling a parent that
 * its child ended, finding a workflow's running children and its tree,
 * WAIT timers, EVENT outbox rows, and completing a gated task (WAIT, HUMAN)
 * through the API.
 *
 * Rows written on behalf of a decision are guarded by the task that asked
 * for them: a start, a wait timer or an outbox row whose task id is not in
 * "TaskExecutions" (the identity index absorbed a repeated decision) is
 * not written.
 *
 * A child's end reaches its parent in the transaction that ends the child
 * (subflows_child_ended): the parent's open SUB_WORKFLOW task (found by
 * "subWorkflowId" in the parent's frontier) completes or fails, the
 * parent's evaluation is enqueued and the task's event appended.  Locks:
 * the child's execution (held by whoever ended it), then the parent's task,
 * "DecideQueues" row and execution, the order of every writer.
 *
 * Threads: callers bring their own connection.  Ownership: returned
 * strings and arrays are the caller's (free).  Failure: false with e set;
 * ERR_NOT_FOUND and ERR_CONFLICT as each function says.
 */
#ifndef NF_STORE_SUBFLOWS_REPO_H
#define NF_STORE_SUBFLOWS_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct db;

/*
 * Starts executions in namespace ns_id: starts_json is a JSON array of
 * {id, defName, defVersion, definition (snapshot or null), input,
 * variables, correlationId, priority, parentWorkflowId, parentTaskId,
 * timeoutSeconds, timeoutPolicy, guardTaskId, inputRef}: input is bound as
 * it is, so an offloaded one is its placeholder with inputRef its
 * reference (the caller offloads, see payload_repo.h).  Each gets its first
 * evaluation, its WORKFLOW_STARTED event and, with a timeout, its
 * workflowTimeout timer.  An entry with guardTaskId is written only when
 * that task of guard_workflow_id exists; an entry with a parent also sets
 * the parent task's "subWorkflowId".  *started: how many were written.
 */
bool subflows_start_executions(struct db *db, const char *ns_id,
			       const char *guard_workflow_id,
			       const char *starts_json, int *started,
			       struct err *e);

/* Ends open tasks of workflow_id from results_json, a JSON array of
 * {taskId, status, output, reason}, enqueues the workflow's evaluation and
 * appends a TASK_<status> event for each. */
bool subflows_finish_tasks(struct db *db, const char *workflow_id,
			   const char *results_json, struct err *e);

/* Arms `wait` timers: waits_json is a JSON array of {taskId, seconds} or
 * {taskId, fireAt} (timestamptz text). */
bool subflows_arm_waits(struct db *db, const char *workflow_id,
			const char *ns_id, const char *waits_json,
			struct err *e);

/* Writes "OutboxEvents" rows: events_json is a JSON array of {taskId,
 * sink, payload}. */
bool subflows_outbox(struct db *db, const char *workflow_id, const char *ns_id,
		     const char *events_json, struct err *e);

/* The ended workflow child_id, if it has a parent, completes (COMPLETED) or
 * fails (any other end) the parent's open task that runs it.
 * parent_out gets the parent's id when a task was ended, "" otherwise.
 * With kids, also the ids of child_id's own RUNNING or PAUSED children
 * (*kids: n_kids of them, each 37 bytes, free), through the parent index. */
bool subflows_child_ended(struct db *db, const char *child_id,
			  char parent_out[37], char (**kids)[37],
			  size_t *n_kids, struct err *e);

/* What the end of a workflow needs to start its failure workflow. */
struct subflows_ended {
	char ns_id[37];
	char status[16];
	char *def_name;
	int def_version;
	char *definition; /* snapshot JSON text, or NULL */
	char *input;      /* JSON text */
	char *correlation_id;
	char *reason;
	char *failed_ref;
	char *failed_task_id;
	int priority;
	bool has_failure_workflow; /* one was started already */
};

bool subflows_ended_load(struct db *db, const char *id,
			 struct subflows_ended *out, struct err *e);
void subflows_ended_free(struct subflows_ended *x);

bool subflows_set_failure_workflow(struct db *db, const char *id,
				   const char *failure_id, struct err *e);

/* The tree under workflow id (breadth first, at most limit + 1 rows, depth
 * at most max_depth) as a JSON array of {id, parentWorkflowId,
 * parentTaskId, parentTaskRefName, name, version, status, reason,
 * startedAt, endedAt, depth}.  ERR_NOT_FOUND for no such workflow. */
bool subflows_tree_rows(struct db *db, const char *ns_id, const char *id,
			int max_depth, int limit, char **json_out,
			struct err *e);

/*
 * Completes (status COMPLETED, FAILED or FAILED_WITH_TERMINAL_ERROR) the
 * open attempt of gated task `ref` (WAIT or HUMAN, or any task its
 * definition declares asyncComplete) of workflow id, and enqueues the
 * workflow's evaluation.  output (may be NULL) is merged over the output
 * the task has (read back if it was offloaded), and the result goes to the
 * payload store when it is large.  ERR_TOO_LARGE (nothing changed): the
 * result is above the payload maximum.  ERR_NOT_FOUND: no such workflow or
 * task; ERR_CONFLICT: the task is of another type, or not open, or the
 * workflow has ended.
 */
bool subflows_complete_gate(struct db *db, const char *ns_id, const char *id,
			    const char *ref, const char *status,
			    const char *output, const char *reason,
			    struct err *e);

/* The latest attempt of a FAILED or TIMED_OUT workflow's failed task: its
 * type and, for a SUB_WORKFLOW, its child and the child's status (sub_id
 * "" otherwise).  *found is false when there is none. */
bool subflows_failed_task(struct db *db, const char *ns_id, const char *id,
			  char sub_id[37], char child_status[16], bool *found,
			  struct err *e);

#endif
