#include "store/task_logs_repo.h"

#include "store/sql.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The advisory-lock class of task log appends (the key's first half). */
#define TASK_LOGS_LOCK_CLASS "7361"

/* $1 task id. */
DB_STMT(task_logs_lock_stmt,
	"SELECT pg_advisory_xact_lock(" TASK_LOGS_LOCK_CLASS
	", hashtext($1::text))");

/* The task's "scheduledAt": logs are never older, so it bounds "createdAt"
 * and the planner skips older partitions.  $1 ns, $2 workflow, $3 task. */
#define TASK_SCHEDULED                                        \
	"(SELECT t.\"scheduledAt\" FROM \"TaskExecutions\" t" \
	" WHERE t.\"namespaceId\" = $1::uuid"                 \
	" AND t.\"workflowId\" = $2::uuid AND t.\"id\" = $3::uuid)"

/*
 * $1 ns, $2 workflow, $3 task, $4 [{log, createdTime}…], $5 max lines.
 * Inserts all of $4 or, past the cap or for an unknown task, nothing;
 * answers (task found, lines before, lines inserted).
 */
DB_STMT(task_logs_append_stmt,
	"WITH t AS (SELECT " TASK_SCHEDULED " AS \"at\"),"
	" last AS (SELECT coalesce(max(l.\"seq\"), 0) AS \"n\""
	"   FROM \"TaskLogs\" l WHERE l.\"taskId\" = $3::uuid"
	"   AND l.\"createdAt\" >= (SELECT \"at\" FROM t)),"
	" ins AS (INSERT INTO \"TaskLogs\" (\"namespaceId\", \"workflowId\","
	"   \"taskId\", \"seq\", \"log\", \"createdTime\")"
	"   SELECT $1::uuid, $2::uuid, $3::uuid, (last.\"n\" + x.\"i\")::int,"
	"   x.\"v\" ->> 'log', (x.\"v\" ->> 'createdTime')::bigint"
	"   FROM last, jsonb_array_elements($4::jsonb) WITH ORDINALITY"
	"   AS x(\"v\", \"i\")"
	"   WHERE (SELECT \"at\" FROM t) IS NOT NULL"
	"   AND last.\"n\" + jsonb_array_length($4::jsonb) <= $5::int"
	"   RETURNING 1)"
	" SELECT (SELECT \"at\" FROM t) IS NOT NULL, (SELECT \"n\" FROM last),"
	" (SELECT count(*) FROM ins)");

bool
task_logs_append(struct db *db, const char *ns_id, const char *wf_id,
		 const char *task_id, const char *logs_json, int max_lines,
		 int *count_out, struct err *e)
{
	char max[16];
	snprintf(max, sizeof(max), "%d", max_lines);
	if (!db_begin(db, e))
		return false;
	const char *lp[] = {task_id};
	PGresult *res = db_exec(db, &task_logs_lock_stmt, 1, lp, e);
	if (!res) {
		db_rollback(db);
		return false;
	}
	PQclear(res);
	const char *p[] = {ns_id, wf_id, task_id, logs_json, max};
	res = db_exec(db, &task_logs_append_stmt, 5, p, e);
	if (!res) {
		db_rollback(db);
		return false;
	}
	bool found = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	long before = strtol(PQgetvalue(res, 0, 1), NULL, 10);
	long added = strtol(PQgetvalue(res, 0, 2), NULL, 10);
	PQclear(res);
	if (!found) {
		db_rollback(db);
		err_set(e, ERR_NOT_FOUND, "task %s not found", task_id);
		return false;
	}
	if (added == 0 && strcmp(logs_json, "[]") != 0) {
		db_rollback(db);
		err_set(e, ERR_CONFLICT,
			"task %s holds %ld log lines; at most %d are kept per "
			"task, so these were refused",
			task_id, before, max_lines);
		return false;
	}
	if (!db_commit(db, e))
		return false;
	if (count_out)
		*count_out = (int)(before + added);
	return true;
}

#define LOG_ITEMS(cols)                                                    \
	"SELECT coalesce(jsonb_agg(jsonb_build_object(" cols ") ORDER BY " \
	"l.\"seq\"), '[]')::text FROM (SELECT * FROM \"TaskLogs\" l"       \
	" WHERE l.\"taskId\" = $3::uuid AND l.\"namespaceId\" = $1::uuid"  \
	" AND l.\"seq\" > $4::int AND l.\"createdAt\" >= " TASK_SCHEDULED  \
	" ORDER BY l.\"seq\" LIMIT $5::int) l"

/* $1 ns, $2 workflow, $3 task, $4 after, $5 limit. */
DB_STMT(task_logs_list_stmt,
	LOG_ITEMS("'seq', l.\"seq\", 'log', l.\"log\", 'createdTime',"
		  " l.\"createdTime\", 'createdAt', l.\"createdAt\", 'taskId',"
		  " l.\"taskId\""));

DB_STMT(task_logs_conductor_stmt,
	LOG_ITEMS("'log', l.\"log\", 'taskId', l.\"taskId\", 'createdTime',"
		  " l.\"createdTime\""));

bool
task_logs_list(struct db *db, const char *ns_id, const char *wf_id,
	       const char *task_id, long after, int limit, bool conductor,
	       char **json_out, struct err *e)
{
	char a[24], l[16];
	snprintf(a, sizeof(a), "%ld", after);
	snprintf(l, sizeof(l), "%d", limit);
	const char *p[] = {ns_id, wf_id, task_id, a, l};
	PGresult *res = db_exec(db,
				conductor ? &task_logs_conductor_stmt
					  : &task_logs_list_stmt,
				5, p, e);
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

/* clang-format off */
struct db_stmt *const task_logs_repo_stmts[] = {
	&task_logs_lock_stmt,
	&task_logs_append_stmt,
	&task_logs_list_stmt,
	&task_logs_conductor_stmt,
	NULL,
};
/* clang-format on */
