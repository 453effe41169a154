/*
 * operators — the task kinds the decider runs itself (SWITCH, FORK_JOIN,
 * JOIN, DO_WHILE, SET_VARIABLE, TERMINATE, NOOP…): the functions their
 * rows in the task-kind table point at (task_kind.h), and the services of
 * one evaluation (decider.c) they are written against.
 *
 * An operator finishes inline by setting run->status in its `start`: the
 * decider writes the row in that status (decide_repo.h, "status") and,
 * when it is terminal, reacts to it in the same evaluation, so a chain of
 * operators runs in one evaluation.  An operator that waits (JOIN,
 * DO_WHILE) is written IN_PROGRESS and finished later with decider_finish.
 *
 * Threads: those of the decider (pure functions of one evaluation).
 * Ownership: run->output belongs to the run (the decider takes it); the
 * decider_* functions borrow their arguments unless they say otherwise.
 * Failure: an operator that cannot do its work sets run->status FAILED
 * with a reason (the workflow fails unless the task is optional).
 */
#ifndef NF_ENGINE_OPERATORS_H
#define NF_ENGINE_OPERATORS_H

#include "engine/dsl.h"
#include "store/decide_repo.h"

#include <jansson.h>
#include <stdbool.h>

/* The row of a task being scheduled, as its kind's start decides it. */
struct op_run {
	json_t *input;    /* resolved inputParameters (the kind may edit) */
	int iteration;    /* DO_WHILE iteration of the task (0 outside) */
	const char *name; /* taskDefName written (DYNAMIC replaces it) */
	const char *type; /* taskType written */
	/* NULL: SCHEDULED (queued unless inline); else IN_PROGRESS or a
	 * terminal status. */
	const char *status;
	json_t *output; /* owned by the run; NULL = {} */
	char reason[512];
	/* Members added to the row as they are (owned by the run; NULL:
	 * none): what the decide loop writes beside the task (subflows.h). */
	json_t *extra;
};

/* ------------------------------------------- services of an evaluation */

const struct wf_def *decider_def(struct eval *ev);
/* The execution being evaluated. */
const struct loaded_execution *decider_execution(struct eval *ev);
/* The expression context ({workflow: …, <ref>: …}) as it stands now. */
json_t *decider_context(struct eval *ev);
/* The latest attempt (and iteration) of ref known to this evaluation. */
const struct loaded_task *decider_latest(struct eval *ev, const char *ref);
/* Whether t ended in a way its workflow goes on from (COMPLETED,
 * COMPLETED_WITH_ERRORS, SKIPPED): a FAILED or TIMED_OUT attempt may still
 * be retried, or fail the workflow. */
bool decider_succeeded(const struct loaded_task *t);
/* Schedules wt (attempt 0) in iteration; fork_ref marks a dynamic fork
 * branch (NULL otherwise). */
void decider_schedule(struct eval *ev, const struct wf_task *wt, int iteration,
		      const char *fork_ref);
/* Schedules a new attempt of wt after old (an operator that failed and
 * is needed again: a JOIN whose failed branch was retried). */
void decider_reopen(struct eval *ev, const struct wf_task *wt,
		    const struct loaded_task *old);
/* How many tasks of the dynamic fork fork_ref are open in iteration. */
size_t decider_open_in_fork(struct eval *ev, const char *fork_ref,
			    int iteration);
/* Continues after wt (with last's iteration; last's output is the default
 * workflow output at the end). */
void decider_advance(struct eval *ev, const struct wf_task *wt,
		     const struct loaded_task *last);
/* Rewrites the open task t: status IN_PROGRESS (progress) or terminal.
 * input/output are stolen (NULL: unchanged).  A terminal one is reacted
 * to in this evaluation, unless join_fork is set: its output is then built
 * by the store (decide_repo.h "joinFork") and the next evaluation reacts. */
void decider_finish(struct eval *ev, const struct loaded_task *t,
		    const char *status, json_t *input, json_t *output,
		    const char *reason, const char *join_fork);
/* Ends the workflow in status (COMPLETED, FAILED, TERMINATED), cancelling
 * what is open; output stolen (NULL: none). */
void decider_end_workflow(struct eval *ev, const char *status, json_t *output,
			  const char *reason, const char *failed_ref);
/* Merges vars into the workflow's variables. */
void decider_set_variables(struct eval *ev, const json_t *vars);
/* A task of a dynamic fork (not in the definition): a task owned by the
 * evaluation whose list holds only it and is owned by fork. */
const struct wf_task *decider_dynamic_task(struct eval *ev,
					   const struct wf_task *fork,
					   const char *name, const char *ref,
					   const char *type,
					   const json_t *input);

/* -------------------------------------------------- the kinds' functions */

void op_noop_start(struct eval *ev, const struct wf_task *wt,
		   struct op_run *run);
void op_set_variable_start(struct eval *ev, const struct wf_task *wt,
			   struct op_run *run);

/* SWITCH and DECISION: the case value (value-param: the input parameter
 * `expression` names; javascript/graaljs: the script's value) picks
 * decisionCases[value], else defaultCase; none: what follows runs. */
void op_switch_validate(struct wf_task *t, const struct wf_def *def,
			struct dsl_errors *errs);
void op_switch_start(struct eval *ev, const struct wf_task *wt,
		     struct op_run *run);
void op_switch_done(struct eval *ev, const struct wf_task *wt,
		    const struct loaded_task *t);
void op_switch_child_end(struct eval *ev, const struct wf_task *wt,
			 const struct loaded_task *last);

/* FORK_JOIN starts every branch and opens the JOIN after it; the JOIN
 * completes once its joinOn tasks ended (output: ref -> output). */
void op_fork_validate(struct wf_task *t, const struct wf_def *def,
		      struct dsl_errors *errs);
void op_fork_done(struct eval *ev, const struct wf_task *wt,
		  const struct loaded_task *t);
void op_fork_child_end(struct eval *ev, const struct wf_task *wt,
		       const struct loaded_task *last);
void op_join_validate(struct wf_task *t, const struct wf_def *def,
		      struct dsl_errors *errs);
void op_join_start(struct eval *ev, const struct wf_task *wt,
		   struct op_run *run);
void op_join_opened(struct eval *ev, const struct wf_task *wt,
		    const struct loaded_task *t);

/* FORK_JOIN_DYNAMIC: branches from its input; its JOIN counts finished
 * branches (output "finished") and the store builds its final output. */
void op_dynamic_fork_validate(struct wf_task *t, const struct wf_def *def,
			      struct dsl_errors *errs);
void op_dynamic_fork_start(struct eval *ev, const struct wf_task *wt,
			   struct op_run *run);
void op_dynamic_fork_done(struct eval *ev, const struct wf_task *wt,
			  const struct loaded_task *t);
void op_dynamic_fork_child_end(struct eval *ev, const struct wf_task *wt,
			       const struct loaded_task *last);

/* EXCLUSIVE_JOIN: the output of the first joinOn task that ran. */
void op_exclusive_join_validate(struct wf_task *t, const struct wf_def *def,
				struct dsl_errors *errs);
void op_exclusive_join_start(struct eval *ev, const struct wf_task *wt,
			     struct op_run *run);

/* DO_WHILE: loopOver runs in iterations 1, 2, … while items last and
 * loopCondition holds; output {iteration, "<n>": {ref: output}}. */
void op_loop_validate(struct wf_task *t, const struct wf_def *def,
		      struct dsl_errors *errs);
void op_loop_start(struct eval *ev, const struct wf_task *wt,
		   struct op_run *run);
void op_loop_opened(struct eval *ev, const struct wf_task *wt,
		    const struct loaded_task *t);
void op_loop_child_end(struct eval *ev, const struct wf_task *wt,
		       const struct loaded_task *last);

/* DYNAMIC: a worker task named by input[dynamicTaskNameParam]. */
void op_dynamic_validate(struct wf_task *t, const struct wf_def *def,
			 struct dsl_errors *errs);
void op_dynamic_start(struct eval *ev, const struct wf_task *wt,
		      struct op_run *run);

/* TERMINATE: ends the workflow in terminationStatus with workflowOutput. */
void op_terminate_validate(struct wf_task *t, const struct wf_def *def,
			   struct dsl_errors *errs);
void op_terminate_start(struct eval *ev, const struct wf_task *wt,
			struct op_run *run);
void op_terminate_done(struct eval *ev, const struct wf_task *wt,
		       const struct loaded_task *t);

#endif
