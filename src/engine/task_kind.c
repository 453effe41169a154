#include "engine/task_kind.h"

#include "engine/operators.h"

#include <string.h>

/*
 * Worker tasks and the operators the decider evaluates itself.  System
 * tasks (HTTP, INLINE, JSON_JQ_TRANSFORM, WAIT…) join as rows when their
 * executors exist, so that a definition using one is refused until then
 * rather than accepted and left stuck.
 */
static const struct task_kind kinds[] = {
	{"SIMPLE", TASK_EXEC_WORKER, true, NEST_NONE, NULL, NULL, NULL, NULL,
	 NULL},
	{"NOOP", TASK_EXEC_INLINE, false, NEST_NONE, NULL, op_noop_start, NULL,
	 NULL, NULL},
	{"SET_VARIABLE", TASK_EXEC_INLINE, false, NEST_NONE, NULL,
	 op_set_variable_start, NULL, NULL, NULL},
};

const struct task_kind *
task_kind_find(const char *type)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].type, type) == 0)
			return &kinds[i];
	return NULL;
}
