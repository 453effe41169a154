/*
 * integration_migrations — the migration runner against a real database:
 * every migration applied and reverted one at a time on an empty database
 * (each down removes exactly what its up created, and the schema can be
 * rebuilt afterwards), a database ahead of the binary refused, the files in
 * migrations/ matching the embedded list, and concurrent runners applying
 * each migration exactly once.
 */
#include "harness.h"

#include "store/db.h"
#include "store/migrate.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NF_SOURCE_ROOT
#error "NF_SOURCE_ROOT must name the source tree (tests/meson.build)"
#endif

enum { MAX_MIGRATIONS = 64, N_RUNNERS = 4 };

static struct th_db tdb;
static struct db *db;
static PGconn *conn; /* a second, raw connection for catalog assertions */

static void
open_empty(void)
{
	struct err e = ERR_INIT;
	th_db_empty(&tdb);
	cr_assert(db_open(&db, tdb.url, DB_PLAIN, &e), "db_open: %s", e.msg);
	conn = th_connect(tdb.url);
}

static void
open_clone(void)
{
	struct err e = ERR_INIT;
	th_db_clone(&tdb);
	cr_assert(db_open(&db, tdb.url, DB_PLAIN, &e), "db_open: %s", e.msg);
	conn = th_connect(tdb.url);
}

static void
teardown(void)
{
	if (conn)
		PQfinish(conn);
	conn = NULL;
	db_close(db);
	db = NULL;
	th_db_drop(&tdb);
}

/*
 * Every object of schema public except the runner's own "SchemaMigrations"
 * (a relation with its storage parameters, a function with a digest of its
 * body and its settings), the columns of tables (not of each partition) and
 * the column statistics a migration set,
 * one per line, sorted. Period suffixes of range partitions (_p2026_11,
 * _p2026_11_30_16) are masked so that two snapshots taken across an hour
 * boundary still compare equal.
 */
static const char snapshot_sql[] =
	"WITH \"o\"(\"line\") AS ("
	" SELECT 'relation ' || c.\"relname\" || ' ' || c.\"relkind\"::text"
	"   || coalesce(' ' || array_to_string(c.\"reloptions\", ','), '')"
	"   FROM pg_class c WHERE c.\"relnamespace\" = 'public'::regnamespace"
	" UNION ALL"
	" SELECT 'function ' || p.\"oid\"::regprocedure::text || ' '"
	"   || md5(p.\"prosrc\")"
	"   || coalesce(' ' || array_to_string(p.\"proconfig\", ','), '')"
	"   FROM pg_proc p WHERE p.\"pronamespace\" = 'public'::regnamespace"
	" UNION ALL"
	" SELECT 'type ' || t.\"typname\""
	"   FROM pg_type t WHERE t.\"typnamespace\" = 'public'::regnamespace"
	" UNION ALL"
	" SELECT 'constraint ' || c.\"relname\" || '.' || k.\"conname\""
	"   FROM pg_constraint k JOIN pg_class c ON c.\"oid\" = k.\"conrelid\""
	"  WHERE k.\"connamespace\" = 'public'::regnamespace"
	" UNION ALL"
	" SELECT 'trigger ' || c.\"relname\" || '.' || g.\"tgname\""
	"   FROM pg_trigger g JOIN pg_class c ON c.\"oid\" = g.\"tgrelid\""
	"  WHERE c.\"relnamespace\" = 'public'::regnamespace"
	"    AND NOT g.\"tgisinternal\""
	" UNION ALL"
	" SELECT 'column ' || c.\"relname\" || '.' || a.\"attname\""
	"   FROM pg_attribute a JOIN pg_class c ON c.\"oid\" = a.\"attrelid\""
	"  WHERE c.\"relnamespace\" = 'public'::regnamespace"
	"    AND c.\"relkind\" IN ('r', 'p') AND NOT c.\"relispartition\""
	"    AND a.\"attnum\" > 0"
	"    AND NOT a.\"attisdropped\""
	" UNION ALL"
	" SELECT 'statistic ' || c.\"relname\" || '.' || a.\"attname\" || ' '"
	"   || s.\"stadistinct\"::text"
	"   FROM pg_statistic s JOIN pg_class c ON c.\"oid\" = s.\"starelid\""
	"   JOIN pg_attribute a ON a.\"attrelid\" = s.\"starelid\""
	"    AND a.\"attnum\" = s.\"staattnum\""
	"  WHERE c.\"relnamespace\" = 'public'::regnamespace"
	" UNION ALL"
	" SELECT 'extension ' || x.\"extname\" FROM pg_extension x"
	"  WHERE x.\"extname\" <> 'plpgsql')"
	" SELECT coalesce(string_agg(\"masked\", E'\\n' ORDER BY \"masked\"), '')"
	"   FROM (SELECT regexp_replace(\"line\","
	"           '_p[0-9]{4}_[0-9]{2}(_[0-9]{2}_[0-9]{2})?', '_pPERIOD', 'g')"
	"           AS \"masked\""
	"           FROM \"o\""
	"          WHERE \"line\" !~ '(^| |\\.|_)SchemaMigrations') \"s\"";

static char *
snapshot(void)
{
	return th_value(conn, snapshot_sql, 0, NULL);
}

/* What the progress callback saw; a snapshot is taken after each "up". */
struct progress {
	size_t n;
	char names[MAX_MIGRATIONS][128];
	char dirs[MAX_MIGRATIONS][8];
	char *snaps[MAX_MIGRATIONS];
	bool take_snapshots;
};

static void
record(const char *name, const char *direction, void *arg)
{
	struct progress *p = arg;
	cr_assert(p->n < MAX_MIGRATIONS);
	snprintf(p->names[p->n], sizeof(p->names[0]), "%s", name);
	snprintf(p->dirs[p->n], sizeof(p->dirs[0]), "%s", direction);
	if (p->take_snapshots)
		p->snaps[p->n] = snapshot();
	p->n++;
}

static void
progress_free(struct progress *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->snaps[i]);
	memset(p, 0, sizeof(*p));
}

static void
expect_status(size_t n_applied_known, const char *what)
{
	struct migrate_status st;
	struct err e = ERR_INIT;
	cr_assert(migrate_status(db, &st, &e), "migrate_status: %s", e.msg);
	cr_assert_eq(st.n_unknown, 0, "%s: unknown migrations", what);
	cr_assert_eq(st.n_applied, n_applied_known, "%s: %zu applied, not %zu",
		     what, st.n_applied, n_applied_known);
	for (size_t i = 0; i < st.n_applied; i++)
		cr_assert_str_eq(st.applied[i], migrations_embedded[i].name,
				 "%s: applied[%zu]", what, i);
	cr_assert_eq(st.n_pending, migrations_embedded_count - n_applied_known,
		     "%s: %zu pending", what, st.n_pending);
	for (size_t i = 0; i < st.n_pending; i++)
		cr_assert_str_eq(st.pending[i],
				 migrations_embedded[n_applied_known + i].name,
				 "%s: pending[%zu]", what, i);
	migrate_status_free(&st);
}

Test(migrations, up_and_down_one_at_a_time, .init = open_empty,
     .fini = teardown)
{
	size_t n = migrations_embedded_count;
	struct err e = ERR_INIT;
	struct progress up = {.take_snapshots = true};

	cr_assert(n > 0 && n <= MAX_MIGRATIONS);
	char *empty = snapshot();
	cr_assert_str_eq(empty, "", "a fresh database has objects:\n%s", empty);
	expect_status(0, "before up");

	cr_assert(migrate_up(db, record, &up, &e), "migrate_up: %s", e.msg);
	cr_assert_eq(up.n, n, "progress saw %zu migrations, not %zu", up.n, n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(up.names[i], migrations_embedded[i].name);
		cr_assert_str_eq(up.dirs[i], "up");
		cr_assert_str_neq(up.snaps[i], i ? up.snaps[i - 1] : "",
				  "%s created nothing", up.names[i]);
	}
	expect_status(n, "after up");

	for (size_t k = n; k-- > 0;) {
		const char *name = migrations_embedded[k].name;
		struct progress down = {0};
		cr_assert(migrate_down(db, 1, record, &down, &e),
			  "migrate_down %s: %s", name, e.msg);
		cr_assert_eq(down.n, 1, "one step reverted %zu migrations",
			     down.n);
		cr_assert_str_eq(down.names[0], name);
		cr_assert_str_eq(down.dirs[0], "down");
		expect_status(k, name);
		/* Exactly the objects of this migration are gone: the schema
		 * is what it was before its up ran. */
		char *now = snapshot();
		cr_assert_str_eq(now, k ? up.snaps[k - 1] : empty,
				 "reverting %s left a different schema", name);
		free(now);
	}

	/* Nothing of the engine is left: no table but the runner's own, no
	 * nf_* function. */
	PGresult *r =
		th_query(conn,
			 "SELECT c.\"relname\" FROM pg_class c"
			 " WHERE c.\"relnamespace\" = 'public'::regnamespace"
			 "   AND c.\"relkind\" IN ('r', 'p', 'v', 'm', 'f')"
			 "   AND c.\"relname\" <> 'SchemaMigrations'"
			 " UNION ALL "
			 "SELECT p.\"proname\" FROM pg_proc p"
			 " WHERE p.\"pronamespace\" = 'public'::regnamespace"
			 "   AND p.\"proname\" LIKE 'nf\\_%'",
			 0, NULL);
	cr_assert_eq(PQntuples(r), 0, "left after the last down: %s ...",
		     PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	cr_assert_eq(th_int(conn, "SELECT count(*) FROM \"SchemaMigrations\"",
			    0, NULL),
		     0);

	/* The downs really are reversible: the same schema comes back. */
	struct progress again = {.take_snapshots = true};
	cr_assert(migrate_up(db, record, &again, &e), "second up: %s", e.msg);
	cr_assert_eq(again.n, n);
	cr_assert_str_eq(again.snaps[n - 1], up.snaps[n - 1],
			 "the second up built a different schema");
	expect_status(n, "after the second up");

	progress_free(&again);
	progress_free(&up);
	free(empty);
}

Test(migrations, database_ahead_of_binary_is_refused, .init = open_clone,
     .fini = teardown)
{
	size_t n = migrations_embedded_count;
	const char *last = migrations_embedded[n - 1].name;
	const char *future = "9999_from_the_future";
	struct err e = ERR_INIT;
	struct progress p = {0};

	/* Leave one migration pending, so that "applies nothing" shows. */
	cr_assert(migrate_down(db, 1, NULL, NULL, &e), "down: %s", e.msg);
	const char *params[] = {future};
	PQclear(th_query(
		conn, "INSERT INTO \"SchemaMigrations\" (\"name\") VALUES ($1)",
		1, params));
	char *before = snapshot();

	struct migrate_status st;
	cr_assert(migrate_status(db, &st, &e), "migrate_status: %s", e.msg);
	cr_assert_eq(st.n_unknown, 1);
	cr_assert_str_eq(st.unknown[0], future);
	cr_assert_eq(st.n_pending, 1);
	cr_assert_str_eq(st.pending[0], last);
	cr_assert_eq(st.n_applied, n);
	migrate_status_free(&st);

	cr_assert_not(migrate_up(db, record, &p, &e),
		      "migrate_up applied onto a newer database");
	cr_assert_eq(e.code, ERR_CONFLICT, "code %s: %s", err_code_name(e.code),
		     e.msg);
	cr_assert(strstr(e.msg, future), "the message does not name %s: %s",
		  future, e.msg);
	cr_assert_eq(p.n, 0, "progress reported %s", p.names[0]);

	char *after = snapshot();
	cr_assert_str_eq(after, before,
			 "a refused migrate_up changed the schema");
	cr_assert(migrate_status(db, &st, &e), "migrate_status: %s", e.msg);
	cr_assert_eq(st.n_pending, 1);
	cr_assert_str_eq(st.pending[0], last);
	migrate_status_free(&st);
	free(after);
	free(before);
}

/* ------------------------------------------------- migrations/ on disk */

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool
has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n > k && strcmp(s + n - k, suffix) == 0;
}

static char *
read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	cr_assert(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)size + 1);
	cr_assert(fread(buf, 1, (size_t)size, f) == (size_t)size);
	buf[size] = '\0';
	fclose(f);
	return buf;
}

Test(migrations, every_file_on_disk_is_embedded_in_order)
{
	const char *dir = NF_SOURCE_ROOT "/migrations";
	char *ups[MAX_MIGRATIONS], *downs[MAX_MIGRATIONS];
	size_t n_up = 0, n_down = 0;

	DIR *d = opendir(dir);
	cr_assert(d, "cannot open %s", dir);
	for (struct dirent *ent; (ent = readdir(d));) {
		const char *f = ent->d_name;
		if (has_suffix(f, ".up.sql")) {
			cr_assert(n_up < MAX_MIGRATIONS);
			ups[n_up++] = strndup(f, strlen(f) - strlen(".up.sql"));
		} else if (has_suffix(f, ".down.sql")) {
			cr_assert(n_down < MAX_MIGRATIONS);
			downs[n_down++] =
				strndup(f, strlen(f) - strlen(".down.sql"));
		} else {
			cr_assert(f[0] == '.' || strcmp(f, "meson.build") == 0,
				  "unexpected file migrations/%s", f);
		}
	}
	closedir(d);
	qsort(ups, n_up, sizeof(*ups), compare_names);
	qsort(downs, n_down, sizeof(*downs), compare_names);

	cr_assert(n_up > 0);
	for (size_t i = 0; i < n_up || i < n_down; i++) {
		cr_assert(i < n_up, "%s.down.sql has no .up.sql", downs[i]);
		cr_assert(i < n_down, "%s.up.sql has no .down.sql", ups[i]);
		cr_assert_str_eq(ups[i], downs[i],
				 "%s.up.sql and %s.down.sql do not pair up",
				 ups[i], downs[i]);
	}
	cr_assert_eq(n_up, migrations_embedded_count,
		     "%zu migrations on disk, %zu embedded (is every file "
		     "listed in migrations/meson.build?)",
		     n_up, migrations_embedded_count);

	for (size_t i = 0; i < n_up; i++) {
		const struct migration *m = &migrations_embedded[i];
		cr_assert_str_eq(m->name, ups[i],
				 "embedded migration %zu is %s, on disk %s", i,
				 m->name, ups[i]);
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s.up.sql", dir, ups[i]);
		char *text = read_file(path);
		cr_assert_str_eq(m->up, text, "%s differs from the binary",
				 path);
		free(text);
		snprintf(path, sizeof(path), "%s/%s.down.sql", dir, ups[i]);
		text = read_file(path);
		cr_assert_str_eq(m->down, text, "%s differs from the binary",
				 path);
		free(text);
		free(ups[i]);
		free(downs[i]);
	}
}

/* ---------------------------------------------------- concurrent runners */

struct runner {
	const char *url;
	pthread_barrier_t *start;
	bool ok;
	struct err e;
	size_t applied; /* migrations this runner reported applying */
	char names[MAX_MIGRATIONS][128];
};

static void
count_applied(const char *name, const char *direction, void *arg)
{
	struct runner *r = arg;
	if (strcmp(direction, "up") == 0 && r->applied < MAX_MIGRATIONS)
		snprintf(r->names[r->applied++], sizeof(r->names[0]), "%s",
			 name);
}

static void *
run_migrate(void *arg)
{
	struct runner *r = arg;
	struct db *own = NULL;
	r->e = (struct err)ERR_INIT;
	pthread_barrier_wait(r->start);
	r->ok = db_open(&own, r->url, DB_PLAIN, &r->e) &&
		migrate_up(own, count_applied, r, &r->e);
	db_close(own);
	return NULL;
}

Test(migrations, concurrent_runners_apply_each_migration_once,
     .init = open_empty, .fini = teardown)
{
	pthread_barrier_t start;
	pthread_t threads[N_RUNNERS];
	static struct runner runners[N_RUNNERS];

	pthread_barrier_init(&start, NULL, N_RUNNERS);
	for (int i = 0; i < N_RUNNERS; i++) {
		runners[i] = (struct runner){.url = tdb.url, .start = &start};
		cr_assert(pthread_create(&threads[i], NULL, run_migrate,
					 &runners[i]) == 0);
	}
	for (int i = 0; i < N_RUNNERS; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&start);

	size_t reported[MAX_MIGRATIONS] = {0};
	for (int i = 0; i < N_RUNNERS; i++) {
		cr_assert(runners[i].ok, "runner %d failed: %s (SQLSTATE %s)",
			  i, runners[i].e.msg, runners[i].e.sqlstate);
		for (size_t k = 0; k < runners[i].applied; k++) {
			size_t m = 0;
			while (m < migrations_embedded_count &&
			       strcmp(migrations_embedded[m].name,
				      runners[i].names[k]) != 0)
				m++;
			cr_assert(m < migrations_embedded_count,
				  "unknown migration %s", runners[i].names[k]);
			reported[m]++;
		}
	}
	for (size_t m = 0; m < migrations_embedded_count; m++) {
		const char *name = migrations_embedded[m].name;
		cr_assert_eq(reported[m], 1, "%s was applied %zu times", name,
			     reported[m]);
		const char *params[] = {name};
		cr_assert_eq(th_int(conn,
				    "SELECT count(*) FROM \"SchemaMigrations\""
				    " WHERE \"name\" = $1",
				    1, params),
			     1, "%s is not recorded exactly once", name);
	}
	cr_assert_eq(th_int(conn, "SELECT count(*) FROM \"SchemaMigrations\"",
			    0, NULL),
		     (long long)migrations_embedded_count);
	expect_status(migrations_embedded_count, "after concurrent runs");
}
