#include "store/migrate.h"

#include "store/sql.h"

#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

/* One key for every migration runner of this schema. */
#define MIGRATE_LOCK_KEY "7203311875500114"

/* The bookkeeping table is the runner's own, created before any migration,
 * so that even the first migration is recorded like every other. */
static const char create_table_sql[] =
	"CREATE TABLE IF NOT EXISTS \"SchemaMigrations\" ("
	" \"name\" TEXT PRIMARY KEY,"
	" \"appliedAt\" TIMESTAMPTZ NOT NULL DEFAULT now())";

DB_STMT(migrate_table_exists,
	"SELECT to_regclass('\"SchemaMigrations\"') IS NOT NULL");

DB_STMT(migrate_list, "SELECT \"name\" FROM \"SchemaMigrations\""
		      " ORDER BY \"appliedAt\", \"name\"");

DB_STMT(migrate_record,
	"INSERT INTO \"SchemaMigrations\" (\"name\") VALUES ($1)");

DB_STMT(migrate_forget, "DELETE FROM \"SchemaMigrations\" WHERE \"name\" = $1");

DB_STMT(migrate_lock, "SELECT pg_advisory_lock($1::bigint)");

DB_STMT(migrate_unlock, "SELECT pg_advisory_unlock($1::bigint)");

struct db_stmt *const migrate_stmts[] = {
	&migrate_table_exists,
	&migrate_list,
	&migrate_record,
	&migrate_forget,
	&migrate_lock,
	&migrate_unlock,
	NULL,
};

static const struct migration *
find_known(const char *name)
{
	for (size_t i = 0; i < migrations_embedded_count; i++)
		if (strcmp(migrations_embedded[i].name, name) == 0)
			return &migrations_embedded[i];
	return NULL;
}

static bool
contains(char **list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

static void
push(char ***list, size_t *n, const char *name)
{
	*list = xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = xstrdup(name);
}

bool
migrate_status(struct db *db, struct migrate_status *st, struct err *e)
{
	memset(st, 0, sizeof(*st));
	PGresult *res = db_exec(db, &migrate_table_exists, 0, NULL, e);
	if (!res)
		return false;
	bool exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (exists) {
		res = db_exec(db, &migrate_list, 0, NULL, e);
		if (!res)
			return false;
		for (int i = 0; i < PQntuples(res); i++)
			push(&st->applied, &st->n_applied,
			     PQgetvalue(res, i, 0));
		PQclear(res);
	}
	for (size_t i = 0; i < migrations_embedded_count; i++) {
		const char *name = migrations_embedded[i].name;
		if (!contains(st->applied, st->n_applied, name))
			push(&st->pending, &st->n_pending, name);
	}
	for (size_t i = 0; i < st->n_applied; i++)
		if (!find_known(st->applied[i]))
			push(&st->unknown, &st->n_unknown, st->applied[i]);
	return true;
}

static void
free_list(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

void
migrate_status_free(struct migrate_status *st)
{
	free_list(st->applied, st->n_applied);
	free_list(st->pending, st->n_pending);
	free_list(st->unknown, st->n_unknown);
	memset(st, 0, sizeof(*st));
}

static void
unlock(struct db *db)
{
	const char *key[] = {MIGRATE_LOCK_KEY};
	struct err ignored = ERR_INIT;
	db_rollback(db);
	(void)db_run(db, &migrate_unlock, 1, key, &ignored);
}

/*
 * The lock comes before the bookkeeping table: two concurrent CREATE TABLE
 * IF NOT EXISTS can both miss the table and then collide on pg_type's
 * unique index (23505), failing one runner on a fresh database.  Under the
 * lock the table is created only when missing, which also spares every
 * later run the "already exists, skipping" notice on stderr.
 */
static bool
lock(struct db *db, struct err *e)
{
	const char *key[] = {MIGRATE_LOCK_KEY};
	if (!db_run(db, &migrate_lock, 1, key, e))
		return false;
	PGresult *res = db_exec(db, &migrate_table_exists, 0, NULL, e);
	bool ok = res != NULL;
	if (ok && strcmp(PQgetvalue(res, 0, 0), "t") != 0)
		ok = db_exec_script(db, create_table_sql, e);
	PQclear(res);
	if (!ok)
		unlock(db);
	return ok;
}

/* One migration, its bookkeeping row included, in one transaction. */
static bool
apply(struct db *db, const char *name, const char *sql, struct db_stmt *book,
      struct err *e)
{
	const char *params[] = {name};
	if (!db_begin(db, e))
		return false;
	if (!db_exec_script(db, sql, e) || !db_run(db, book, 1, params, e) ||
	    !db_commit(db, e)) {
		db_rollback(db);
		return false;
	}
	return true;
}

static void
describe_unknown(const struct migrate_status *st, struct err *e)
{
	char list[256] = "";
	size_t used = 0;
	for (size_t i = 0; i < st->n_unknown && used < sizeof(list) - 1; i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used,
					 "%s%s", i ? ", " : "", st->unknown[i]);
	err_set(e, ERR_CONFLICT,
		"the database has migrations this binary does not know (%s): it "
		"is newer than this binary",
		list);
}

bool
migrate_up(struct db *db, migrate_progress_fn *progress, void *arg,
	   struct err *e)
{
	struct migrate_status st;
	if (!lock(db, e))
		return false;
	bool ok = migrate_status(db, &st, e);
	if (ok && st.n_unknown) {
		describe_unknown(&st, e);
		ok = false;
	}
	for (size_t i = 0; ok && i < st.n_pending; i++) {
		const struct migration *m = find_known(st.pending[i]);
		ok = apply(db, m->name, m->up, &migrate_record, e);
		if (!ok)
			err_prefix(e, "migration %s failed", m->name);
		else if (progress)
			progress(m->name, "up", arg);
	}
	migrate_status_free(&st);
	unlock(db);
	return ok;
}

bool
migrate_down(struct db *db, int steps, migrate_progress_fn *progress, void *arg,
	     struct err *e)
{
	struct migrate_status st;
	if (!lock(db, e))
		return false;
	bool ok = migrate_status(db, &st, e);
	for (int k = 0; ok && k < steps && (size_t)k < st.n_applied; k++) {
		const char *name = st.applied[st.n_applied - 1 - (size_t)k];
		const struct migration *m = find_known(name);
		if (!m) {
			err_set(e, ERR_CONFLICT,
				"cannot revert %s: this binary does not know it",
				name);
			ok = false;
			break;
		}
		ok = apply(db, m->name, m->down, &migrate_forget, e);
		if (!ok)
			err_prefix(e, "reverting migration %s failed", m->name);
		else if (progress)
			progress(m->name, "down", arg);
	}
	migrate_status_free(&st);
	unlock(db);
	return ok;
}
