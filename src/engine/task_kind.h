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

#include <stdbool.h>

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
};

/* The row for type (case-sensitive, as Conductor's enum), or NULL. */
const struct task_kind *task_kind_find(const char *type);

#endif
