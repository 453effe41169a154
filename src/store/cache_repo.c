#include "store/cache_repo.h"

#include "store/sql.h"

#include <stdio.h>
#include <stdlib.h>

DB_STMT(cache_get_stmt,
	"SELECT \"output\"::text FROM \"TaskOutputCache\""
	" WHERE \"namespaceId\" = $1::uuid AND \"taskDefName\" = $2"
	" AND \"key\" = $3 AND \"expiresAt\" > now()");

bool
cache_get(struct db *db, const char *ns_id, const char *task_def,
	  const char *key, json_t **out, struct err *e)
{
	*out = NULL;
	const char *params[] = {ns_id, task_def, key};
	PGresult *res = db_exec(db, &cache_get_stmt, 3, params, e);
	if (!res)
		return false;
	if (PQntuples(res) == 1)
		*out = json_loads(PQgetvalue(res, 0, 0), JSON_DECODE_ANY, NULL);
	PQclear(res);
	return true;
}

/* Oldest first on the expiry index, a bounded batch per statement. */
DB_STMT(cache_prune_stmt,
	"WITH x AS (SELECT \"namespaceId\", \"taskDefName\", \"key\""
	"   FROM \"TaskOutputCache\" WHERE \"expiresAt\" <= now()"
	"   ORDER BY \"expiresAt\" LIMIT $1::int FOR UPDATE SKIP LOCKED),"
	" d AS (DELETE FROM \"TaskOutputCache\" c USING x"
	"   WHERE c.\"namespaceId\" = x.\"namespaceId\""
	"   AND c.\"taskDefName\" = x.\"taskDefName\" AND c.\"key\" = x.\"key\""
	"   AND c.\"expiresAt\" <= now() RETURNING 1)"
	" SELECT count(*) FROM d");

bool
cache_prune(struct db *db, int limit, long *n, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {lim};
	PGresult *res = db_exec(db, &cache_prune_stmt, 1, params, e);
	if (!res)
		return false;
	*n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}

struct db_stmt *const cache_repo_stmts[] = {
	&cache_get_stmt,
	&cache_prune_stmt,
	NULL,
};
