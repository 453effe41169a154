#include "engine/task_kind.h"

#include "engine/operators.h"
#include "engine/subflows.h"
#include "engine/systasks.h"

#include <string.h>

/*
 * Worker tasks (SIMPLE, and DYNAMIC whose name comes from its input), the
 * operators the decider evaluates itself, and the tasks that start
 * workflows or wait (subflows.h), and the system tasks the system-task
 * runner runs in-process (systasks.h).  A type joins as a row when its
 * executor exists, so that a definition using one is refused until then
 * rather than accepted and left stuck.  Every TASK_EXEC_SYSTEM row must be
 * a row of the runner's table too (systasks.c; a unit test checks).
 */
static const struct task_kind kinds[] = {
	{"SIMPLE", TASK_EXEC_WORKER, true, NEST_NONE, NULL, NULL, NULL, NULL,
	 NULL},
	{"NOOP", TASK_EXEC_INLINE, false, NEST_NONE, NULL, op_noop_start, NULL,
	 NULL, NULL},
	{"SET_VARIABLE", TASK_EXEC_INLINE, false, NEST_NONE, NULL,
	 op_set_variable_start, NULL, NULL, NULL},
	{"SWITCH", TASK_EXEC_INLINE, false, NEST_CASES, op_switch_validate,
	 op_switch_start, NULL, op_switch_done, op_switch_child_end},
	{"DECISION", TASK_EXEC_INLINE, false, NEST_CASES, op_switch_validate,
	 op_switch_start, NULL, op_switch_done, op_switch_child_end},
	{"FORK_JOIN", TASK_EXEC_INLINE, false, NEST_FORK, op_fork_validate,
	 NULL, NULL, op_fork_done, op_fork_child_end},
	{"FORK_JOIN_DYNAMIC", TASK_EXEC_INLINE, false, NEST_NONE,
	 op_dynamic_fork_validate, op_dynamic_fork_start, NULL,
	 op_dynamic_fork_done, op_dynamic_fork_child_end},
	{"JOIN", TASK_EXEC_INLINE, false, NEST_NONE, op_join_validate,
	 op_join_start, op_join_opened, NULL, NULL},
	{"EXCLUSIVE_JOIN", TASK_EXEC_INLINE, false, NEST_NONE,
	 op_exclusive_join_validate, op_exclusive_join_start, NULL, NULL, NULL},
	{"DO_WHILE", TASK_EXEC_INLINE, false, NEST_LOOP, op_loop_validate,
	 op_loop_start, op_loop_opened, NULL, op_loop_child_end},
	{"DYNAMIC", TASK_EXEC_WORKER, false, NEST_NONE, op_dynamic_validate,
	 op_dynamic_start, NULL, NULL, NULL},
	{"TERMINATE", TASK_EXEC_INLINE, false, NEST_NONE, op_terminate_validate,
	 op_terminate_start, NULL, op_terminate_done, NULL},
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
	/* System tasks, run by the system-task runner (systasks.h). */
	{"HTTP", TASK_EXEC_SYSTEM, false, NEST_NONE, systasks_validate_http,
	 NULL, NULL, NULL, NULL},
	{"INLINE", TASK_EXEC_SYSTEM, false, NEST_NONE, systasks_validate_inline,
	 NULL, NULL, NULL, NULL},
	{"JSON_JQ_TRANSFORM", TASK_EXEC_SYSTEM, false, NEST_NONE,
	 systasks_validate_jq, NULL, NULL, NULL, NULL},
};

const struct task_kind *
task_kind_find(const char *type)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].type, type) == 0)
			return &kinds[i];
	return NULL;
}
