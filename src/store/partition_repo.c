#include "store/partition_repo.h"

#include "store/sql.h"

#include "util/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

DB_STMT(partition_now, "SELECT floor(extract(epoch FROM now()))::bigint");

bool
partition_repo_now(struct db *db, int64_t *out, struct err *e)
{
	PGresult *res = db_exec(db, &partition_now, 0, NULL, e);
	if (!res)
		return false;
	*out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}

/* The bound expression is rendered in this session's TimeZone and DateStyle
 * and cast back in the same session, so it round-trips exactly. */
DB_STMT(partition_list,
	"SELECT c.\"relname\"::text,"
	" extract(epoch FROM b[1]::timestamptz)::bigint,"
	" extract(epoch FROM b[2]::timestamptz)::bigint"
	" FROM \"pg_catalog\".\"pg_inherits\" i"
	" JOIN \"pg_catalog\".\"pg_class\" c ON c.\"oid\" = i.\"inhrelid\""
	" CROSS JOIN LATERAL regexp_match("
	"   pg_get_expr(c.\"relpartbound\", c.\"oid\"),"
	"   'FROM \\(''([^'']*)''\\) TO \\(''([^'']*)''\\)') AS b"
	" WHERE i.\"inhparent\" = to_regclass(quote_ident($1))"
	"   AND b IS NOT NULL"
	" ORDER BY 2");

bool
partition_repo_list(struct db *db, const char *parent,
		    struct partition_list *out, struct err *e)
{
	const char *params[] = {parent};
	out->items = NULL;
	out->n = 0;
	PGresult *res = db_exec(db, &partition_list, 1, params, e);
	if (!res)
		return false;
	int n = PQntuples(res);
	out->items = xcalloc((size_t)n + 1, sizeof(*out->items));
	for (int i = 0; i < n; i++) {
		out->items[i].name = xstrdup(PQgetvalue(res, i, 0));
		out->items[i].lower = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		out->items[i].upper = strtoll(PQgetvalue(res, i, 2), NULL, 10);
	}
	out->n = (size_t)n;
	PQclear(res);
	return true;
}

void
partition_list_free(struct partition_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->items[i].name);
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

DB_STMT(partition_create,
	"WITH n AS (SELECT \"nf_partition_name\"($1, to_timestamp($2::bigint),"
	" $4) AS child)"
	" SELECT child, \"nf_create_range_partition\"($1, child,"
	" to_timestamp($2::bigint), to_timestamp($3::bigint))::text FROM n");

DB_STMT(partition_recover,
	"WITH n AS (SELECT \"nf_partition_name\"($1, to_timestamp($2::bigint),"
	" $4) AS child)"
	" SELECT child, \"nf_recover_default_partition\"($1, child,"
	" to_timestamp($2::bigint), to_timestamp($3::bigint)) FROM n");

static PGresult *
run_range(struct db *db, struct db_stmt *stmt, const char *parent,
	  const char *period, int64_t lower, int64_t upper, struct err *e)
{
	char lo[24], hi[24];
	snprintf(lo, sizeof(lo), "%" PRId64, lower);
	snprintf(hi, sizeof(hi), "%" PRId64, upper);
	const char *params[] = {parent, lo, hi, period};
	return db_exec(db, stmt, 4, params, e);
}

bool
partition_repo_create(struct db *db, const char *parent, const char *period,
		      int64_t lower, int64_t upper, char **name_out,
		      struct err *e)
{
	PGresult *res = run_range(db, &partition_create, parent, period, lower,
				  upper, e);
	if (!res)
		return false;
	*name_out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

bool
partition_repo_recover(struct db *db, const char *parent, const char *period,
		       int64_t lower, int64_t upper, char **name_out,
		       int64_t *moved, struct err *e)
{
	PGresult *res = run_range(db, &partition_recover, parent, period, lower,
				  upper, e);
	if (!res)
		return false;
	*name_out = xstrdup(PQgetvalue(res, 0, 0));
	*moved = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	return true;
}

DB_STMT(partition_drop, "SELECT \"nf_drop_partition\"($1)::text");

bool
partition_repo_drop(struct db *db, const char *name, struct err *e)
{
	const char *params[] = {name};
	return db_run(db, &partition_drop, 1, params, e);
}

DB_STMT(partition_lock_timeout, "SELECT set_config('lock_timeout', $1, true)");

bool
partition_repo_lock_timeout(struct db *db, int ms, struct err *e)
{
	char v[24];
	snprintf(v, sizeof(v), "%dms", ms);
	const char *params[] = {v};
	return db_run(db, &partition_lock_timeout, 1, params, e);
}

struct db_stmt *const partition_repo_stmts[] = {
	&partition_now,
	&partition_list,
	&partition_create,
	&partition_recover,
	&partition_drop,
	&partition_lock_timeout,
	NULL,
};
