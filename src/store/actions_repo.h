/*
 * actions_repo — operator actions on a workflow: terminate, pause, resume,
 * retry, skip, restart, rerun.  Each is one statement, so one transaction, that
 * changes the execution (bumping its version, so a decision computed before it
 * fails its guard and is made again), its tasks and queue rows as needed, and
 * appends its events.
 *
 * Threads: callers bring their own connection.  Failure: false with e set;
 * ERR_NOT_FOUND for no such execution, ERR_CONFLICT when its status does
 * not allow the action (the message names the status).
 */
#ifndef NF_STORE_ACTIONS_REPO_H
#define NF_STORE_ACTIONS_REPO_H

#include "util/err.h"

#include <stdbool.h>

struct db;

/* RUNNING or PAUSED → TERMINATED; open tasks are cancelled.  Run it inside
 * a transaction: it first locks the execution row, so that tasks a decider
 * batch is committing for the workflow are cancelled too. */
bool action_terminate(struct db *db, const char *ns_id, const char *id,
		      const char *reason, struct err *e);
/* RUNNING → PAUSED: tasks in flight go on; nothing new is scheduled. */
bool action_pause(struct db *db, const char *ns_id, const char *id,
		  struct err *e);
/* PAUSED → RUNNING, and an evaluation of what happened meanwhile. */
bool action_resume(struct db *db, const char *ns_id, const char *id,
		   struct err *e);
/* FAILED or TIMED_OUT → RUNNING with a new attempt of the failed task
 * (the failed attempts stay). */
bool action_retry(struct db *db, const char *ns_id, const char *id,
		  struct err *e);

/* An open attempt of task `ref` → SKIPPED; the workflow goes on past it. */
bool action_skip(struct db *db, const char *ns_id, const char *id,
		 const char *ref, struct err *e);
/* An ended workflow runs again from its first task, under the same id. */
bool action_restart(struct db *db, const char *ns_id, const char *id,
		    struct err *e);
/* An ended workflow runs again from task `ref`: that task and the ones
 * scheduled after it are removed and the task scheduled anew (task_input
 * and workflow_input: JSON text replacing the inputs, or NULL; a large one
 * goes to the payload store, one above the maximum is refused with
 * ERR_TOO_LARGE and nothing changes). */
bool action_rerun(struct db *db, const char *ns_id, const char *id,
		  const char *ref, const char *task_input,
		  const char *workflow_input, struct err *e);

#endif
