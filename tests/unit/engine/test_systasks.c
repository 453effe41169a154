/*
 * Unit tests of the system-task runner's table: every task type the
 * engine runs in-process (TASK_EXEC_SYSTEM) has a row in the runner, and
 * every runner row is such a type, so no system task can be accepted by
 * the DSL and then wait forever for a runner.
 */
#include "engine/systasks.h"
#include "engine/task_kind.h"

#include <criterion/criterion.h>

Test(systasks, table_matches_the_task_kinds)
{
	size_t n = 0;
	const char *const *types = systasks_types(&n);
	cr_assert_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		const struct task_kind *k = task_kind_find(types[i]);
		cr_assert_not_null(k, "%s is not a task kind", types[i]);
		cr_assert_eq(k->exec, TASK_EXEC_SYSTEM, "%s", types[i]);
		cr_assert_not(k->needs_task_def, "%s", types[i]);
		cr_assert(systasks_handles(types[i]));
	}
	const char *names[] = {"HTTP", "INLINE", "JSON_JQ_TRANSFORM"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_assert(systasks_handles(names[i]), "%s", names[i]);
	cr_assert_not(systasks_handles("SIMPLE"));
}
