/*
 * task_kind — the table of task types the engine knows, and how each is
 * run.  The decider and the validator look a type up here instead of
 * switching on type names: adding a task type is adding a row (and, for
 * operators and system tasks, the functions the row points at).
 *
 * An operator's row says which nested task lists it holds (`nest`: parsed
 * by dsl.c, each list knowing its owner) and points at its functions
 * (operators.h): `validate` checks its own fields at registration; `start`
 * decides the row of a task being scheduled (an inline kind finishes or
 * opens it there); `opened` runs once an inline task was written
 * IN_PROGRESS (a DO_WHILE schedules its first iteration); `done` runs when
 * the decider reacts to its successful end (default: the next task of its
 * list); `child_end` runs when one of its nested lists ran to its end.
 *
 * Threads: the table is constant.  Failure: task_kind_find returns NULL for
 * an unknown type.
 */
#ifndef NF_ENGINE_TASK_KIND_H
#define NF_ENGINE_TASK_KIND_H

#include <stdbool.h>

enum task_exec {
	TASK_EXEC_WORKER, /* queued on TaskQueues; polled by an outside worker
			   */
	TASK_EXEC_SYSTEM, /* queued; run in-process by the system-task runner */
	TASK_EXEC_INLINE, /* evaluated by the decider itself (operators) */
};

/* The nested task lists a kind holds (dsl.c parses them). */
enum task_nest {
	NEST_NONE,
	NEST_CASES, /* decisionCases {case: [tasks]} + defaultCase [tasks] */
	NEST_FORK,  /* forkTasks [[tasks], ...] */
	NEST_LOOP,  /* loopOver [tasks] */
};

struct eval;
struct wf_task;
struct wf_def;
struct loaded_task;
struct op_run;
struct dsl_errors;

struct task_kind {
	const char *type; /* "SIMPLE", "HTTP", "SWITCH", ... */
	enum task_exec exec;
	/* Needs a registered TaskDefinition (or an inline taskDefinition). */
	bool needs_task_def;
	enum task_nest nest;
	void (*validate)(struct wf_task *t, const struct wf_def *def,
			 struct dsl_errors *errs);
	void (*start)(struct eval *ev, const struct wf_task *wt,
		      struct op_run *run);
	void (*opened)(struct eval *ev, const struct wf_task *wt,
		       const struct loaded_task *t);
	void (*done)(struct eval *ev, const struct wf_task *wt,
		     const struct loaded_task *t);
	void (*child_end)(struct eval *ev, const struct wf_task *wt,
			  const struct loaded_task *last);
};

/* The row for type (case-sensitive, as Conductor's enum), or NULL. */
const struct task_kind *task_kind_find(const char *type);

#endif
