#include "engine/task_kind.h"

#include "engine/operators.h"
#include "engine/subflows.h"

#include <string.h>

/*
 * Worker tasks, the operators the decider evaluates itself, and the tasks
 * that start workflows or wait (subflows.h).  System tasks (HTTP, INLINE,
 * JSON_JQ_TRANSFORM…) join as rows when their
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
	/* Workflows and gates (engine/subflows.c): written IN_PROGRESS (or
	 * finished at once), with what the decide loop writes beside them. */
	{"SUB_WORKFLOW", TASK_EXEC_INLINE, false, NEST_NONE,
	 subflows_validate_sub_workflow, subflows_kind_start, NULL, NULL, NULL},
	{"START_WORKFLOW", TASK_EXEC_INLINE, false, NEST_NONE,
	 subflows_validate_start_workflow, subflows_kind_start, NULL, NULL,
	 NULL},
	{"WAIT", TASK_EXEC_INLINE, false, NEST_NONE, subflows_validate_wait,
	 subflows_kind_start, NULL, NULL, NULL},
	{"HUMAN", TASK_EXEC_INLINE, false, NEST_NONE, NULL, subflows_kind_start,
	 NULL, NULL, NULL},
	{"EVENT", TASK_EXEC_INLINE, false, NEST_NONE, subflows_validate_event,
	 subflows_kind_start, NULL, NULL, NULL},
};

const struct task_kind *
task_kind_find(const char *type)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].type, type) == 0)
			return &kinds[i];
	return NULL;
}
