/*
 * subflows — tasks that reach beyond their own workflow, and gates:
 * SUB_WORKFLOW (a child execution the task waits for), START_WORKFLOW
 * (fire and forget), a definition's failureWorkflow, WAIT (a duration, a
 * point in time, or a signal through the API), HUMAN (a signal through the
 * API) and EVENT (a row of "OutboxEvents").
 *
 * The decider stays pure: scheduling one of these tasks (subflows_schedule)
 * only shapes its row — status, output, and what must be written beside it
 * ("start", "wait", "outbox").  The decide loop then calls subflows_apply in
 * the evaluation's transaction, which resolves the definitions a start
 * names, writes the child executions, wait timers and outbox rows, and ends
 * a task whose start could not be made (definition not found) as FAILED.
 *
 * Whenever a workflow ends — decided, terminated, timed out — the writer
 * calls subflows_workflow_ended in the same transaction: its parent's
 * SUB_WORKFLOW task completes or fails (and the parent is enqueued), its
 * running children are terminated (recursively), and a FAILED or TIMED_OUT
 * workflow starts its failureWorkflow.
 *
 * Threads: any (callers bring their own connection).  Ownership: JSON
 * returned is the caller's.  Failure: false with e set.
 */
#ifndef NF_ENGINE_SUBFLOWS_H
#define NF_ENGINE_SUBFLOWS_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct db;
struct dsl_errors;
struct eval;
struct loaded_execution;
struct op_run;
struct wf_def;
struct wf_task;

/* ------------------------------------------------------------ validation */

/* Checks of a task's own fields (task_kind.c points each row at one);
 * problems go to errs at their JSON paths. */
void subflows_validate_sub_workflow(struct wf_task *t, const struct wf_def *def,
				    struct dsl_errors *errs);
void subflows_validate_start_workflow(struct wf_task *t,
				      const struct wf_def *def,
				      struct dsl_errors *errs);
void subflows_validate_wait(struct wf_task *t, const struct wf_def *def,
			    struct dsl_errors *errs);
void subflows_validate_event(struct wf_task *t, const struct wf_def *def,
			     struct dsl_errors *errs);

/* A SUB_WORKFLOW's or EVENT's fields other than inputParameters that
 * hold expressions, as one template {"subWorkflowParam": {name, version,
 * priority, workflowDefinition when it is a string}, "sink"} (a new
 * reference), or NULL for another kind or none.  An inline workflowDefinition
 * object is not part of it: its expressions are the child's. */
json_t *subflows_expr_fields(const json_t *task);

/* A WAIT duration: "30s", "2m", "1h 30m", "2 days 3 hours", "1d2h3m4s"
 * (units d/day/days, h/hr/hrs/hour/hours, m/min/mins/minute/minutes,
 * s/sec/secs/second/seconds; case-insensitive).  False when s is not one. */
bool subflows_parse_duration(const char *s, int64_t *seconds);
/* A WAIT point in time, as Conductor reads it: "yyyy-MM-dd HH:mm",
 * "yyyy-MM-dd HH:mm z", "yyyy-MM-dd" (also with ":ss" and a "T"), where z
 * is Z, UTC, GMT, an offset (+05:30, -0800, GMT+2) or a common
 * abbreviation (PST, CET…); without a zone the time is UTC.  Epoch
 * seconds, or false. */
bool subflows_parse_until(const char *s, int64_t *epoch_seconds);

/* ------------------------------------------------------------ scheduling */

/*
 * The `start` of these kinds (operators.h): decides the row of a task being
 * scheduled — "status" (IN_PROGRESS, COMPLETED, or FAILED… with a
 * reason), "output" — and adds to it what subflows_apply carries out:
 * "start" (a child or a fired-and-forgotten execution: {id, name, version,
 * workflowDefinition, input, correlationId, priority, parent}), "wait"
 * ({seconds} or {fireAt}) and "outbox" ({sink, payload}).
 */
void subflows_kind_start(struct eval *ev, const struct wf_task *wt,
			 struct op_run *run);

/* Carries out the instructions of the rows of one applied decision (tasks:
 * the decision's rows), in its transaction. */
bool subflows_apply(struct db *db, const struct loaded_execution *x,
		    const json_t *tasks, struct err *e);

/* ------------------------------------------------------------ endings */

/* Workflow id of namespace ns_id has ended in the caller's transaction
 * (see above); failure_workflow: start its failureWorkflow if it has one
 * and failed or timed out (not after a terminate).  The ids of the
 * workflows this enqueued for evaluation (parents, failure workflows) are
 * appended to enqueued (a JSON array; may be NULL): deciders should be
 * woken after commit, and a decider batch must not apply a decision it
 * computed for one of them before this changed it. */
bool subflows_workflow_ended(struct db *db, const char *ns_id, const char *id,
			     bool failure_workflow, json_t *enqueued,
			     struct err *e);

/* Terminate with the cascade to running children, in one transaction. */
bool subflows_terminate(struct db *db, const char *ns_id, const char *id,
			const char *reason, struct err *e);

/* Retry of a FAILED or TIMED_OUT workflow, in one transaction: when its
 * failed task ran a sub-workflow, that child is retried (recursively) or,
 * if it cannot be, restarted, under the same id, and the new attempt of
 * the task waits for it. */
bool subflows_retry(struct db *db, const char *ns_id, const char *id,
		    struct err *e);

/* GET …/tree: {"tree": {id, name, version, status, …, "children": […]},
 * "size", "truncated"}. */
bool subflows_tree(struct db *db, const char *ns_id, const char *id,
		   int max_depth, int limit, json_t **out, struct err *e);

#endif
