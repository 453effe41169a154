#include "engine/task_kind.h"

#include "engine/subflows.h"

#include <string.h>

/*
 * Only worker tasks exist so far; operators (SWITCH, FORK_JOIN, DO_WHILE…)
 * and system tasks (HTTP, INLINE, JSON_JQ_TRANSFORM, WAIT…) join as rows
 * when their executors exist, so that a definition using one is refused
 * until then rather than accepted and left stuck.
 */
static const struct task_kind kinds[] = {
	{"SIMPLE", TASK_EXEC_WORKER, true, NULL, NULL},
	/* Workflows and gates (engine/subflows.c). */
	{"SUB_WORKFLOW", TASK_EXEC_INLINE, false,
	 subflows_validate_sub_workflow, subflows_schedule},
	{"START_WORKFLOW", TASK_EXEC_INLINE, false,
	 subflows_validate_start_workflow, subflows_schedule},
	{"WAIT", TASK_EXEC_INLINE, false, subflows_validate_wait,
	 subflows_schedule},
	{"HUMAN", TASK_EXEC_INLINE, false, NULL, subflows_schedule},
	{"EVENT", TASK_EXEC_INLINE, false, subflows_validate_event,
	 subflows_schedule},
};

const struct task_kind *
task_kind_find(const char *type)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].type, type) == 0)
			return &kinds[i];
	return NULL;
}
