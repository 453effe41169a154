#include "store/semaphores_repo.h"

#include "store/sql.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ISO_UTC(col)                          \
	"to_char(" col " AT TIME ZONE 'UTC'," \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

DB_STMT(semaphores_put_stmt,
	"INSERT INTO \"Semaphores\" AS s (\"namespaceId\", \"name\", \"permits\")"
	" VALUES ($1::uuid, $2, $3::int)"
	" ON CONFLICT (\"namespaceId\", \"name\") DO UPDATE SET"
	" \"permits\" = EXCLUDED.\"permits\", \"updatedAt\" = now()"
	" RETURNING (xmax = 0)");

/* $3 NULL: all of the namespace.  Configured ones, and those with live
 * holders. */
DB_STMT(semaphores_list_stmt,
	"WITH n AS (SELECT s.\"name\" FROM \"Semaphores\" s"
	"   WHERE s.\"namespaceId\" = $1::uuid"
	"   AND ($3::text IS NULL OR s.\"name\" = $3::text)"
	"   UNION SELECT h.\"name\" FROM \"SemaphoreHolders\" h"
	"   WHERE h.\"namespaceId\" = $1::uuid AND h.\"leaseExpiresAt\" > now()"
	"   AND ($3::text IS NULL OR h.\"name\" = $3::text))"
	" SELECT coalesce(jsonb_agg(jsonb_build_object('name', n.\"name\","
	"   'permits', coalesce(s.\"permits\", $2::int),"
	"   'configured', s.\"name\" IS NOT NULL,"
	"   'inUse', coalesce(hs.\"cnt\", 0),"
	"   'holders', coalesce(hs.\"list\", '[]'::jsonb),"
	"   'createdAt', " ISO_UTC(
		"s.\"createdAt\"") ","
				   "   'updatedAt', " ISO_UTC(
					   "s.\"updatedAt\"") ") ORDER BY n.\"name\"),"
							      "   '[]')::text, count(*)"
							      " FROM n LEFT JOIN \"Semaphores\" s ON s.\"namespaceId\" = $1::uuid"
							      " AND s.\"name\" = n.\"name\""
							      " LEFT JOIN LATERAL (SELECT count(*) AS \"cnt\","
							      "   jsonb_agg(jsonb_build_object('taskId', h.\"taskId\","
							      "   'workflowId', h.\"workflowId\", 'workerId', h.\"workerId\","
							      "   'acquiredAt', " ISO_UTC(
								      "h.\"acquiredAt\"") ","
											  "   'leaseExpiresAt', " ISO_UTC(
												  "h.\"leaseExpiresAt\"") ")"
															  "   ORDER BY h.\"acquiredAt\", h.\"taskId\") AS \"list\""
															  "   FROM \"SemaphoreHolders\" h WHERE h.\"namespaceId\" = $1::uuid"
															  "   AND h.\"name\" = n.\"name\" AND h.\"leaseExpiresAt\" > now()) hs"
															  " ON true");

DB_STMT(semaphores_delete_stmt,
	"DELETE FROM \"Semaphores\" WHERE \"namespaceId\" = $1::uuid"
	" AND \"name\" = $2");

/* A holder of a task that is no longer in progress: its workflow was
 * terminated, or the task was skipped or canceled, and no result will come
 * to give the permit back. */
DB_STMT(semaphores_sweep_stmt,
	"WITH c AS (SELECT h.\"namespaceId\", h.\"name\", h.\"taskId\""
	"   FROM \"SemaphoreHolders\" h WHERE h.\"leaseExpiresAt\" <= now()"
	"   OR NOT EXISTS (SELECT 1 FROM \"TaskExecutions\" te"
	"   WHERE te.\"workflowId\" = h.\"workflowId\" AND te.\"id\" = h.\"taskId\""
	"   AND te.\"status\" = 'IN_PROGRESS')"
	"   LIMIT $1::int FOR UPDATE SKIP LOCKED)"
	" DELETE FROM \"SemaphoreHolders\" h USING c"
	" WHERE h.\"namespaceId\" = c.\"namespaceId\" AND h.\"name\" = c.\"name\""
	" AND h.\"taskId\" = c.\"taskId\"");

DB_STMT(semaphores_prune_stmt,
	"WITH c AS (SELECT \"namespaceId\", \"queueName\", \"windowStart\""
	"   FROM \"RateLimitBuckets\""
	"   WHERE \"windowStart\" < now() - interval '1 day'"
	"   LIMIT $1::int FOR UPDATE SKIP LOCKED)"
	" DELETE FROM \"RateLimitBuckets\" b USING c"
	" WHERE b.\"namespaceId\" = c.\"namespaceId\""
	" AND b.\"queueName\" = c.\"queueName\""
	" AND b.\"windowStart\" = c.\"windowStart\"");

bool
semaphores_put(struct db *db, const char *ns_id, const char *name, int permits,
	       bool *created, struct err *e)
{
	char p[16];
	snprintf(p, sizeof(p), "%d", permits);
	const char *params[] = {ns_id, name, p};
	PGresult *res = db_exec(db, &semaphores_put_stmt, 3, params, e);
	if (!res)
		return false;
	*created = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return true;
}

static bool
list(struct db *db, const char *ns_id, const char *name, int default_permits,
     char **json_out, size_t *n, struct err *e)
{
	char p[16];
	snprintf(p, sizeof(p), "%d", default_permits);
	const char *params[] = {ns_id, p, name};
	PGresult *res = db_exec(db, &semaphores_list_stmt, 3, params, e);
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	*n = (size_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	return true;
}

bool
semaphores_list(struct db *db, const char *ns_id, int default_permits,
		char **json_out, struct err *e)
{
	size_t n;
	return list(db, ns_id, NULL, default_permits, json_out, &n, e);
}

bool
semaphores_get(struct db *db, const char *ns_id, const char *name,
	       int default_permits, char **json_out, struct err *e)
{
	char *arr;
	size_t n;
	if (!list(db, ns_id, name, default_permits, &arr, &n, e))
		return false;
	if (n == 0) {
		free(arr);
		err_set(e, ERR_NOT_FOUND,
			"semaphore \"%.200s\" is neither configured nor held",
			name);
		return false;
	}
	/* The array's one element: drop the brackets. */
	size_t len = strlen(arr);
	memmove(arr, arr + 1, len - 2);
	arr[len - 2] = '\0';
	*json_out = arr;
	return true;
}

bool
semaphores_delete(struct db *db, const char *ns_id, const char *name,
		  struct err *e)
{
	const char *params[] = {ns_id, name};
	PGresult *res = db_exec(db, &semaphores_delete_stmt, 2, params, e);
	if (!res)
		return false;
	bool deleted = strcmp(PQcmdTuples(res), "0") != 0;
	PQclear(res);
	if (!deleted)
		err_set(e, ERR_NOT_FOUND,
			"semaphore \"%.200s\" is not configured", name);
	return deleted;
}

static bool
sweep(struct db *db, struct db_stmt *stmt, int limit, size_t *n, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {lim};
	PGresult *res = db_exec(db, stmt, 1, params, e);
	if (!res)
		return false;
	*n = (size_t)strtoul(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return true;
}

bool
semaphores_sweep_holders(struct db *db, int limit, size_t *n, struct err *e)
{
	return sweep(db, &semaphores_sweep_stmt, limit, n, e);
}

bool
semaphores_prune_rate_windows(struct db *db, int limit, size_t *n,
			      struct err *e)
{
	return sweep(db, &semaphores_prune_stmt, limit, n, e);
}

/* The window as queue_lease_gated bins it (now(), epoch-aligned). */
DB_STMT(semaphores_rate_window_stmt,
	"WITH w AS (SELECT date_bin(make_interval(secs => $4::int), now(),"
	"   '1970-01-01 00:00:00+00'::timestamptz) AS \"start\")"
	" SELECT CASE WHEN coalesce((SELECT b.\"count\""
	"   FROM \"RateLimitBuckets\" b WHERE b.\"namespaceId\" = $1::uuid"
	"   AND b.\"queueName\" = $2 AND b.\"windowStart\" = w.\"start\"), 0)"
	"   >= $3::int AND EXISTS (SELECT 1 FROM \"TaskQueues\" q"
	"   WHERE q.\"queueName\" = $2 AND q.\"leaseExpiresAt\" IS NULL"
	"   AND q.\"taskType\" = 'SIMPLE')"
	" THEN greatest(1, ceil(extract(epoch FROM w.\"start\""
	"   + make_interval(secs => $4::int) - clock_timestamp()) * 1000))"
	" ELSE 0 END::bigint::text FROM w");

bool
semaphores_rate_window_ms(struct db *db, const char *ns_id, const char *queue,
			  int limit, int seconds, long *ms, struct err *e)
{
	char lim[16], secs[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	snprintf(secs, sizeof(secs), "%d", seconds > 0 ? seconds : 1);
	const char *params[] = {ns_id, queue, lim, secs};
	PGresult *res = db_exec(db, &semaphores_rate_window_stmt, 4, params, e);
	if (!res)
		return false;
	*ms = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}

struct db_stmt *const semaphores_repo_stmts[] = {
	&semaphores_put_stmt,
	&semaphores_list_stmt,
	&semaphores_delete_stmt,
	&semaphores_sweep_stmt,
	&semaphores_prune_stmt,
	&semaphores_rate_window_stmt,
	NULL,
};
