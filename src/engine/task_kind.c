#include "engine/task_kind.h"

#include <string.h>

/*
 * Only worker tasks exist so far; operators (SWITCH, FORK_JOIN, DO_WHILE…)
 * and system tasks (HTTP, INLINE, JSON_JQ_TRANSFORM, WAIT…) join as rows
 * when their executors exist, so that a definition using one is refused
 * until then rather than accepted and left stuck.
 */
static const struct task_kind kinds[] = {
	{"SIMPLE", TASK_EXEC_WORKER, true},
};

const struct task_kind *
task_kind_find(const char *type)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].type, type) == 0)
			return &kinds[i];
	return NULL;
}
