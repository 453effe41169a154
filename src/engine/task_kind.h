/*
 * task_kind — the table of task types the engine knows, and how each is
 * run.  The decider and the validator look a type up here instead of
 * switching on type names: adding a task type is adding a row (and, for
 * operators and system tasks, the functions the row points at).
 *
 * Threads: the table is constant.  Failure: task_kind_find returns NULL for
 * an unknown type.
 */
#ifndef NF_ENGINE_TASK_KIND_H
#define NF_ENGINE_TASK_KIND_H

#include <jansson.h>
#include <stdbool.h>

struct dsl_errors;
struct loaded_execution;
struct wf_task;

enum task_exec {
	TASK_EXEC_WORKER, /* queued on TaskQueues; polled by an outside worker
			   */
	TASK_EXEC_SYSTEM, /* queued; run in-process by the system-task runner */
	TASK_EXEC_INLINE, /* evaluated by the decider itself (operators) */
};

struct task_kind {
	const char *type; /* "SIMPLE", "HTTP", "SWITCH", ... */
	enum task_exec exec;
	/* Needs a registered TaskDefinition (or an inline taskDefinition). */
	bool needs_task_def;
	/* Checks of the kind's own fields of the task object at path (NULL:
	 * none), called by the definition parser. */
	void (*validate)(const json_t *task, const char *path,
			 struct dsl_errors *errs);
	/* Shapes the row of a newly scheduled task of the kind (its "status",
	 * "output", …; NULL: a worker's SCHEDULED row): see subflows.h. */
	void (*schedule)(const struct wf_task *wt,
			 const struct loaded_execution *x, const json_t *ctx,
			 json_t *row);
};

/* The row for type (case-sensitive, as Conductor's enum), or NULL. */
const struct task_kind *task_kind_find(const char *type);

#endif
