/*
 * registry — the list of every module's statements.
 *
 * A repository module declares its statements with DB_STMT() beside the
 * functions that run them and exports them as a NULL-terminated
 * `<module>_stmts[]` array; adding a module means adding one line here.
 * The registry is what a new connection prepares (DB_PREPARE_ALL) and what
 * the registry test prepares against a freshly migrated database.
 */
#include "store/sql.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern struct db_stmt *const actions_repo_stmts[];
extern struct db_stmt *const cache_repo_stmts[];
extern struct db_stmt *const conductor_repo_stmts[];
extern struct db_stmt *const dashboard_repo_stmts[];
extern struct db_stmt *const db_stmts[];
extern struct db_stmt *const decide_repo_stmts[];
extern struct db_stmt *const definitions_repo_stmts[];
extern struct db_stmt *const events_repo_stmts[];
extern struct db_stmt *const executions_repo_stmts[];
extern struct db_stmt *const migrate_stmts[];
extern struct db_stmt *const notify_stmts[];
extern struct db_stmt *const notify_outbox_stmts[];
extern struct db_stmt *const outbox_repo_stmts[];
extern struct db_stmt *const partition_repo_stmts[];
extern struct db_stmt *const payload_repo_stmts[];
extern struct db_stmt *const polls_repo_stmts[];
extern struct db_stmt *const queue_repo_stmts[];
extern struct db_stmt *const semaphores_repo_stmts[];
extern struct db_stmt *const subflows_repo_stmts[];
extern struct db_stmt *const task_logs_repo_stmts[];
extern struct db_stmt *const timers_repo_stmts[];

/* One module a line, in name order. */
/* clang-format off */
static struct db_stmt *const *const modules[] = {
	actions_repo_stmts,
	cache_repo_stmts,
	conductor_repo_stmts,
	dashboard_repo_stmts,
	db_stmts,
	decide_repo_stmts,
	definitions_repo_stmts,
	events_repo_stmts,
	executions_repo_stmts,
	migrate_stmts,
	notify_stmts,
	notify_outbox_stmts,
	outbox_repo_stmts,
	partition_repo_stmts,
	payload_repo_stmts,
	polls_repo_stmts,
	queue_repo_stmts,
	semaphores_repo_stmts,
	subflows_repo_stmts,
	task_logs_repo_stmts,
	timers_repo_stmts,
};
/* clang-format on */

static struct db_stmt **all;
static size_t count;

static void
collect(void)
{
	size_t n = 0;
	for (size_t m = 0; m < sizeof(modules) / sizeof(modules[0]); m++)
		for (size_t i = 0; modules[m][i]; i++)
			n++;
	all = calloc(n ? n : 1, sizeof(*all));
	if (!all)
		abort();
	for (size_t m = 0; m < sizeof(modules) / sizeof(modules[0]); m++) {
		for (size_t i = 0; modules[m][i]; i++) {
			struct db_stmt *s = modules[m][i];
			for (size_t j = 0; j < count; j++) {
				if (strcmp(all[j]->name, s->name) == 0) {
					fprintf(stderr,
						"fatal: statement %s registered twice\n",
						s->name);
					abort();
				}
			}
			s->id = (unsigned)count;
			all[count++] = s;
		}
	}
}

void
db_registry_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, collect);
}

size_t
db_registry_size(void)
{
	return count;
}

struct db_stmt *
db_registry_at(size_t i)
{
	return all[i];
}
