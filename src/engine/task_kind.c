#include "engine/task_kind.h"

#include <string.h>

/*
 * A type joins as a row when its executor exists, so that a definition
 * using one is refused until then rather than accepted and left stuck.
 * Every TASK_EXEC_SYSTEM row must be a row of the runner's table too
 * (systasks.c; a unit test checks).
 */
static const struct task_kind kinds[] = {
	{"SIMPLE", TASK_EXEC_WORKER, true},
	/* System tasks, run by the system-task runner (systasks.h). */
	{"HTTP", TASK_EXEC_SYSTEM, false},
	{"INLINE", TASK_EXEC_SYSTEM, false},
	{"JSON_JQ_TRANSFORM", TASK_EXEC_SYSTEM, false},
};

const struct task_kind *
task_kind_find(const char *type)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].type, type) == 0)
			return &kinds[i];
	return NULL;
}
