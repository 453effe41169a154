/*
 * Integration tests of the partition manager (src/engine/partitions.c and
 * the SQL helpers of migration 0001) against a real PostgreSQL 18:
 *   - a DEFAULT partition that already holds rows of a future period (not a
 *     truncated database): the manager creates the partition, moves exactly
 *     the in-range rows and leaves the rest in a still-attached DEFAULT;
 *   - the spec's bug: with rows in DEFAULT a plain "nf_create_range_partition"
 *     fails with 23514, and the manager recovers anyway;
 *   - four concurrent passes claim every creation and every drop exactly
 *     once, also while recovering populated DEFAULT partitions;
 *   - retention drops exactly the expired partitions, boundary included;
 *   - a session TimeZone/DateStyle far from UTC changes nothing;
 *   - a second pass right after the first does nothing;
 *   - around midnight of a new month, a new year and after a leap day
 *     (clocks the tests choose): the recovery on partitions made before
 *     midnight, and a pass one second after another across it.
 * `nodeflow partitions ensure` is the e2e tests' business; this is the
 * library.
 */
#include "engine/partitions.h"
#include "harness.h"
#include "store/db.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ helpers */

struct names {
	char **v;
	size_t n;
};

static bool
names_has(const struct names *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return true;
	return false;
}

static void
names_add(struct names *s, const char *name)
{
	s->v = realloc(s->v, (s->n + 1) * sizeof(*s->v));
	cr_assert(s->v);
	s->v[s->n++] = strdup(name);
}

static void
names_free(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static const char *const PARENTS[] = {"WorkflowExecutions", "WorkflowEvents",
				      "Timers"};

/* Every partition of the three range-partitioned parents, DEFAULT included. */
static void
list_partitions(PGconn *c, struct names *out)
{
	PGresult *r = th_query(
		c,
		"SELECT c.\"relname\"::text"
		" FROM \"pg_catalog\".\"pg_inherits\" i"
		" JOIN \"pg_catalog\".\"pg_class\" c ON c.\"oid\" = i.\"inhrelid\""
		" WHERE i.\"inhparent\" IN (to_regclass('\"WorkflowExecutions\"'),"
		"   to_regclass('\"WorkflowEvents\"'), to_regclass('\"Timers\"'))"
		" ORDER BY 1",
		0, NULL);
	out->v = NULL;
	out->n = 0;
	for (int i = 0; i < PQntuples(r); i++)
		names_add(out, PQgetvalue(r, i, 0));
	PQclear(r);
}

static int64_t
db_now(PGconn *c)
{
	return th_int(c, "SELECT floor(extract(epoch FROM now()))::bigint", 0,
		      NULL);
}

static void
epoch_text(int64_t t, char out[24])
{
	snprintf(out, 24, "%" PRId64, t);
}

/* The schema's name for parent's partition starting at lower (malloc'd). */
static char *
part_name(PGconn *c, const char *parent, enum partition_period p, int64_t lower)
{
	char lo[24];
	epoch_text(lower, lo);
	const char *params[] = {parent, lo,
				p == PERIOD_HOUR ? "hour" : "month"};
	return th_value(
		c,
		"SELECT \"nf_partition_name\"($1, to_timestamp($2::bigint),"
		" $3)",
		3, params);
}

/* Creates parent's partition of the period starting at lower with the SQL
 * helpers, as an operator or an older release would have; returns its
 * name (malloc'd). */
static char *
create_partition(PGconn *c, const char *parent, enum partition_period p,
		 int64_t lower)
{
	char *name = part_name(c, parent, p, lower);
	char lo[24], hi[24];
	epoch_text(lower, lo);
	epoch_text(partition_period_add(p, lower, 1), hi);
	const char *params[] = {parent, name, lo, hi};
	PGresult *r =
		th_query(c,
			 "SELECT \"nf_create_range_partition\"($1, $2,"
			 " to_timestamp($3::bigint), to_timestamp($4::bigint))",
			 4, params);
	PQclear(r);
	return name;
}

/* One row of parent whose partition key is epoch + usec microseconds. */
static void
insert_at(PGconn *c, const char *parent, int64_t epoch, int64_t usec)
{
	static const char *const sql[] = {
		"INSERT INTO \"WorkflowExecutions\""
		" (\"namespaceId\", \"defName\", \"defVersion\", \"startedAt\")"
		" VALUES (uuidv7(), 'partition-test', 1,"
		" to_timestamp($1::bigint) + $2::bigint * interval '1 microsecond')",
		"INSERT INTO \"WorkflowEvents\""
		" (\"workflowId\", \"namespaceId\", \"seq\", \"type\", \"at\")"
		" VALUES (uuidv7(), uuidv7(), 1, 'partition-test',"
		" to_timestamp($1::bigint) + $2::bigint * interval '1 microsecond')",
		"INSERT INTO \"Timers\""
		" (\"namespaceId\", \"workflowId\", \"kind\", \"fireAt\")"
		" VALUES (uuidv7(), uuidv7(), 'wait',"
		" to_timestamp($1::bigint) + $2::bigint * interval '1 microsecond')",
	};
	size_t i = 0;
	while (strcmp(PARENTS[i], parent) != 0)
		i++;
	char t[24], u[24];
	epoch_text(epoch, t);
	epoch_text(usec, u);
	const char *params[] = {t, u};
	PQclear(th_query(c, sql[i], 2, params));
}

/* Rows of parent that physically live in partition child. */
static long long
rows_in(PGconn *c, const char *parent, const char *child)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM \"%s\""
		 " WHERE \"tableoid\" = to_regclass(quote_ident($1))",
		 parent);
	const char *params[] = {child};
	return th_int(c, sql, 1, params);
}

static long long
rows_total(PGconn *c, const char *parent)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%s\"", parent);
	return th_int(c, sql, 0, NULL);
}

/* Whether parent_default exists and is attached as parent's DEFAULT. */
static bool
default_attached(PGconn *c, const char *parent)
{
	char def[96];
	snprintf(def, sizeof(def), "%s_default", parent);
	const char *params[] = {parent, def};
	return th_int(c,
		      "SELECT count(*) FROM \"pg_catalog\".\"pg_partitioned_table\""
		      " WHERE \"partrelid\" = to_regclass(quote_ident($1))"
		      "   AND \"partdefid\" = to_regclass(quote_ident($2))",
		      2, params) == 1;
}

/* How many partitions of parent have exactly the bounds [lower, upper). */
static long long
partitions_with_bounds(PGconn *c, const char *parent, int64_t lower,
		       int64_t upper)
{
	char lo[24], hi[24];
	epoch_text(lower, lo);
	epoch_text(upper, hi);
	const char *params[] = {parent, lo, hi};
	/* pg_get_expr and format('%L') render in this same session. */
	return th_int(
		c,
		"SELECT count(*) FROM \"pg_catalog\".\"pg_inherits\" i"
		" JOIN \"pg_catalog\".\"pg_class\" c ON c.\"oid\" = i.\"inhrelid\""
		" WHERE i.\"inhparent\" = to_regclass(quote_ident($1))"
		"   AND pg_get_expr(c.\"relpartbound\", c.\"oid\") ="
		"       format('FOR VALUES FROM (%L) TO (%L)',"
		"              to_timestamp($2::bigint), to_timestamp($3::bigint))",
		3, params);
}

static struct db *
open_db(const char *url)
{
	struct db *db;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, url, DB_PLAIN, &e), "db_open: %s", e.msg);
	return db;
}

static void
ensure(struct db *db, const struct partition_table *t, size_t n, int64_t now,
       struct partition_report *r)
{
	struct err e = ERR_INIT;
	cr_assert(partitions_ensure(db, t, n, now, r, &e),
		  "partitions_ensure: %s (SQLSTATE %s)", e.msg, e.sqlstate);
}

/* The report's created list is exactly after minus before. */
static void
assert_created_is_difference(const struct partition_report *r,
			     const struct names *before,
			     const struct names *after)
{
	for (size_t i = 0; i < r->n_created; i++) {
		cr_assert_not(names_has(before, r->created[i]),
			      "%s reported created but existed before",
			      r->created[i]);
		cr_assert(names_has(after, r->created[i]),
			  "%s reported created but does not exist",
			  r->created[i]);
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(r->created[i], r->created[j]);
	}
	size_t added = 0;
	for (size_t i = 0; i < after->n; i++)
		if (!names_has(before, after->v[i]))
			added++;
	cr_assert_eq(added, r->n_created,
		     "%zu partitions appeared, %zu reported created", added,
		     r->n_created);
}

/* ------------------------------------------- DEFAULT holding rows */

Test(partitions, moves_rows_of_a_future_period_out_of_a_populated_default)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	struct db *db = open_db(d.url);

	int64_t now = db_now(c);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t m8 = partition_period_add(PERIOD_MONTH, m0, 8);
	int64_t m9 = partition_period_add(PERIOD_MONTH, m0, 9);
	int64_t m20 = partition_period_add(PERIOD_MONTH, m0, 20);
	int64_t h0 = partition_period_start(PERIOD_HOUR, now);
	int64_t h30 = partition_period_add(PERIOD_HOUR, h0, 30);
	int64_t h31 = partition_period_add(PERIOD_HOUR, h0, 31);
	int64_t h200 = partition_period_add(PERIOD_HOUR, h0, 200);

	char *ex8 = part_name(c, "WorkflowExecutions", PERIOD_MONTH, m8);
	char *ex9 = part_name(c, "WorkflowExecutions", PERIOD_MONTH, m9);
	char *ev8 = part_name(c, "WorkflowEvents", PERIOD_MONTH, m8);
	char *ti30 = part_name(c, "Timers", PERIOD_HOUR, h30);

	struct names before;
	list_partitions(c, &before);
	cr_assert_not(names_has(&before, ex8));
	cr_assert_not(names_has(&before, ev8));
	cr_assert_not(names_has(&before, ti30));

	/* Rows of a period nobody created yet land in DEFAULT: the first
	 * microsecond, the middle and the last microsecond of it, then rows
	 * of later periods that must stay where they are (one of them on the
	 * new partition's exclusive upper bound). */
	insert_at(c, "WorkflowExecutions", m8, 0);
	insert_at(c, "WorkflowExecutions", m8 + 10 * 86400, 123456);
	insert_at(c, "WorkflowExecutions", m9, -1);
	insert_at(c, "WorkflowExecutions", m9, 0);
	insert_at(c, "WorkflowExecutions", m20 + 5 * 86400, 0);
	insert_at(c, "WorkflowEvents", m8 + 86400, 0);
	insert_at(c, "WorkflowEvents", m9, -1);
	insert_at(c, "WorkflowEvents", m9, 0);
	insert_at(c, "WorkflowEvents", m20, 0);
	insert_at(c, "Timers", h30, 0);
	insert_at(c, "Timers", h31, -1);
	insert_at(c, "Timers", h31, 0);
	insert_at(c, "Timers", h200, 0);

	long long totals[3];
	for (int i = 0; i < 3; i++) {
		char def[96];
		snprintf(def, sizeof(def), "%s_default", PARENTS[i]);
		totals[i] = rows_total(c, PARENTS[i]);
		cr_assert_eq(rows_in(c, PARENTS[i], def), totals[i],
			     "%s: rows not in DEFAULT", PARENTS[i]);
	}
	cr_assert_eq(totals[0], 5);
	cr_assert_eq(totals[1], 4);
	cr_assert_eq(totals[2], 4);

	/* The configured months-ahead 3 does not reach them: nothing moves. */
	struct partition_table near[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 3, 12},
		{"WorkflowEvents", PERIOD_MONTH, 3, 12},
		{"Timers", PERIOD_HOUR, 24, 48},
	};
	struct partition_report r;
	ensure(db, near, 3, now, &r);
	cr_assert_eq(r.rows_moved, 0);
	cr_assert_eq(r.n_dropped, 0);
	partition_report_free(&r);
	names_free(&before);
	list_partitions(c, &before);

	/* Far enough ahead to cover them. */
	struct partition_table far[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 8, 12},
		{"WorkflowEvents", PERIOD_MONTH, 8, 12},
		{"Timers", PERIOD_HOUR, 30, 48},
	};
	ensure(db, far, 3, now, &r);
	cr_assert_eq(r.rows_moved, 3 + 2 + 2, "rows_moved %lld",
		     (long long)r.rows_moved);
	cr_assert_eq(r.n_dropped, 0);

	struct names after;
	list_partitions(c, &after);
	assert_created_is_difference(&r, &before, &after);
	struct names created = {r.created, r.n_created};
	cr_assert(names_has(&created, ex8));
	cr_assert(names_has(&created, ev8));
	cr_assert(names_has(&created, ti30));
	cr_assert_not(names_has(&after, ex9), "created beyond months-ahead");
	/* Months 4..8 for both monthly tables, hours 25..30: all new. */
	cr_assert_geq(r.n_created, 5 + 5 + 6);
	partition_report_free(&r);

	/* The in-range rows live in the new partitions, the others stayed. */
	cr_assert_eq(rows_in(c, "WorkflowExecutions", ex8), 3);
	cr_assert_eq(
		rows_in(c, "WorkflowExecutions", "WorkflowExecutions_default"),
		2);
	cr_assert_eq(rows_in(c, "WorkflowEvents", ev8), 2);
	cr_assert_eq(rows_in(c, "WorkflowEvents", "WorkflowEvents_default"), 2);
	cr_assert_eq(rows_in(c, "Timers", ti30), 2);
	cr_assert_eq(rows_in(c, "Timers", "Timers_default"), 2);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(rows_total(c, PARENTS[i]), totals[i], "%s",
			     PARENTS[i]);
		cr_assert(default_attached(c, PARENTS[i]),
			  "%s: DEFAULT not attached", PARENTS[i]);
	}
	/* The moved rows kept their exact keys, to the microsecond. */
	{
		char lo[24];
		epoch_text(m8, lo);
		const char *params[] = {lo};
		cr_assert_eq(
			th_int(c,
			       "SELECT count(*) FROM \"WorkflowExecutions\""
			       " WHERE \"startedAt\" IN (to_timestamp($1::bigint),"
			       "   to_timestamp($1::bigint) + interval '10 days'"
			       "     + interval '123456 microseconds')",
			       1, params),
			2);
	}

	/* Both ends route as they should afterwards. */
	insert_at(c, "WorkflowExecutions", m8, 1);
	insert_at(c, "WorkflowExecutions", m9, 1);
	cr_assert_eq(rows_in(c, "WorkflowExecutions", ex8), 4);
	cr_assert_eq(
		rows_in(c, "WorkflowExecutions", "WorkflowExecutions_default"),
		3);

	/* And again: nothing left to do. */
	ensure(db, far, 3, now, &r);
	cr_assert_eq(r.n_created, 0);
	cr_assert_eq(r.n_dropped, 0);
	cr_assert_eq(r.rows_moved, 0);
	partition_report_free(&r);

	names_free(&after);
	names_free(&before);
	free(ex8);
	free(ex9);
	free(ev8);
	free(ti30);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}

static void assert_periods_covered_once(PGconn *c,
					const struct partition_table *tables,
					size_t n, int64_t now);

/* Seconds since the epoch of a UTC date and time. */
static int64_t
utc(int year, int month, int day, int hour, int min, int sec)
{
	struct tm tm = {.tm_year = year - 1900,
			.tm_mon = month - 1,
			.tm_mday = day,
			.tm_hour = hour,
			.tm_min = min,
			.tm_sec = sec};
	return (int64_t)timegm(&tm);
}

/*
 * The recovery of a populated DEFAULT, on a database whose partitions a
 * pass at `made` created (0: the template's, made when the run began), run
 * at `now` (0: the database's clock).  A run that begins before midnight
 * of a month's last day and gets here after it has a template a month
 * behind: the pass then also creates the month the template lacks, and
 * only that.
 */
static void
plain_create_then_recover(int64_t made, int64_t now)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	struct db *db = open_db(d.url);

	struct partition_table t = {"WorkflowExecutions", PERIOD_MONTH, 3, 12};
	struct partition_report r;
	if (made) {
		ensure(db, &t, 1, made, &r);
		partition_report_free(&r);
	}
	if (!now)
		now = db_now(c);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t m1 = partition_period_add(PERIOD_MONTH, m0, 1);
	int64_t m40 = partition_period_add(PERIOD_MONTH, m0, 40);

	/* The state the spec's bug produced: no partition for the current
	 * month, so the current month's rows went to DEFAULT. */
	char *cur = part_name(c, "WorkflowExecutions", PERIOD_MONTH, m0);
	{
		const char *params[] = {cur};
		PQclear(th_query(c, "SELECT \"nf_drop_partition\"($1)::text", 1,
				 params));
	}
	insert_at(c, "WorkflowExecutions", m0, 0);
	insert_at(c, "WorkflowExecutions", now, 0);
	insert_at(c, "WorkflowExecutions", m1, -1);
	insert_at(c, "WorkflowExecutions", m40, 0);
	cr_assert_eq(
		rows_in(c, "WorkflowExecutions", "WorkflowExecutions_default"),
		4);

	/* Plain creation is refused: the recovery path is really needed. */
	char lo[24], hi[24];
	epoch_text(m0, lo);
	epoch_text(m1, hi);
	const char *params[] = {"WorkflowExecutions", cur, lo, hi};
	cr_assert_str_eq(
		th_sqlstate_of(
			c,
			"SELECT \"nf_create_range_partition\"($1, $2,"
			" to_timestamp($3::bigint), to_timestamp($4::bigint))",
			4, params),
		"23514");

	struct names before, after;
	list_partitions(c, &before);
	cr_assert_not(names_has(&before, cur));

	/* The periods of the window other than the current one that are
	 * missing: the pass creates them too. */
	size_t missing = 0;
	for (int k = 1; k <= t.ahead; k++)
		missing += partitions_with_bounds(
				   c, "WorkflowExecutions",
				   partition_period_add(PERIOD_MONTH, m0, k),
				   partition_period_add(PERIOD_MONTH, m0,
							k + 1)) == 0;
	ensure(db, &t, 1, now, &r);
	cr_assert_eq(r.n_created, 1 + missing, "created %zu, %zu missing",
		     r.n_created, missing);
	struct names created = {r.created, r.n_created};
	cr_assert(names_has(&created, cur), "%s not created", cur);
	cr_assert_eq(r.rows_moved, 3);
	cr_assert_eq(r.n_dropped, 0);
	list_partitions(c, &after);
	assert_created_is_difference(&r, &before, &after);
	partition_report_free(&r);
	assert_periods_covered_once(c, &t, 1, now);

	cr_assert_eq(rows_in(c, "WorkflowExecutions", cur), 3);
	cr_assert_eq(
		rows_in(c, "WorkflowExecutions", "WorkflowExecutions_default"),
		1);
	cr_assert_eq(rows_total(c, "WorkflowExecutions"), 4);
	cr_assert(default_attached(c, "WorkflowExecutions"));
	cr_assert_eq(partitions_with_bounds(c, "WorkflowExecutions", m0, m1),
		     1);

	names_free(&before);
	names_free(&after);
	free(cur);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}

Test(partitions, plain_create_fails_on_populated_default_and_manager_recovers)
{
	plain_create_then_recover(0, 0);
}

/* Twenty minutes into a month, with partitions made ten minutes before it
 * began. */
Test(partitions, recovers_in_a_new_month_with_partitions_of_the_last)
{
	plain_create_then_recover(utc(2030, 11, 30, 23, 50, 0),
				  utc(2030, 12, 1, 0, 20, 0));
}

Test(partitions, recovers_in_a_new_year_with_partitions_of_the_last)
{
	plain_create_then_recover(utc(2030, 12, 31, 23, 50, 0),
				  utc(2031, 1, 1, 0, 20, 0));
}

/* ---------------------------------------------------- concurrent runs */

enum { RUNNERS = 4 };

struct runner {
	const char *url;
	pthread_barrier_t *barrier;
	const struct partition_table *tables;
	size_t n_tables;
	int64_t now;
	bool opened;
	bool ok;
	struct err e;
	struct partition_report r;
};

/* No Criterion assertion off the test's thread: results are checked after
 * the join. */
static void *
run_ensure(void *arg)
{
	struct runner *w = arg;
	struct db *db = NULL;
	w->e = (struct err)ERR_INIT;
	memset(&w->r, 0, sizeof(w->r));
	w->opened = db_open(&db, w->url, DB_PLAIN, &w->e);
	pthread_barrier_wait(w->barrier);
	if (w->opened) {
		w->ok = partitions_ensure(db, w->tables, w->n_tables, w->now,
					  &w->r, &w->e);
		db_close(db);
	}
	return NULL;
}

/* Runs RUNNERS passes at once, each on its own connection, and merges
 * their reports, asserting that no name is claimed twice. */
static void
run_concurrently(const char *url, const struct partition_table *tables,
		 size_t n, int64_t now, struct names *created,
		 struct names *dropped, int64_t *moved)
{
	pthread_barrier_t barrier;
	pthread_barrier_init(&barrier, NULL, RUNNERS);
	struct runner w[RUNNERS];
	pthread_t th[RUNNERS];
	for (int i = 0; i < RUNNERS; i++) {
		w[i] = (struct runner){.url = url,
				       .barrier = &barrier,
				       .tables = tables,
				       .n_tables = n,
				       .now = now};
		cr_assert_eq(pthread_create(&th[i], NULL, run_ensure, &w[i]),
			     0);
	}
	for (int i = 0; i < RUNNERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&barrier);

	*created = (struct names){NULL, 0};
	*dropped = (struct names){NULL, 0};
	*moved = 0;
	for (int i = 0; i < RUNNERS; i++) {
		cr_assert(w[i].opened, "runner %d: db_open: %s", i, w[i].e.msg);
		cr_assert(w[i].ok, "runner %d: %s (SQLSTATE %s)", i, w[i].e.msg,
			  w[i].e.sqlstate);
		for (size_t k = 0; k < w[i].r.n_created; k++) {
			cr_assert_not(names_has(created, w[i].r.created[k]),
				      "%s reported created twice (runner %d)",
				      w[i].r.created[k], i);
			names_add(created, w[i].r.created[k]);
		}
		for (size_t k = 0; k < w[i].r.n_dropped; k++) {
			cr_assert_not(names_has(dropped, w[i].r.dropped[k]),
				      "%s reported dropped twice (runner %d)",
				      w[i].r.dropped[k], i);
			names_add(dropped, w[i].r.dropped[k]);
		}
		*moved += w[i].r.rows_moved;
		partition_report_free(&w[i].r);
	}
}

/* Every period from the current one to the last ahead has exactly one
 * partition: none missing, none twice. */
static void
assert_periods_covered_once(PGconn *c, const struct partition_table *tables,
			    size_t n, int64_t now)
{
	for (size_t t = 0; t < n; t++) {
		int64_t cur = partition_period_start(tables[t].period, now);
		for (int k = 0; k <= tables[t].ahead; k++) {
			int64_t lo =
				partition_period_add(tables[t].period, cur, k);
			int64_t hi = partition_period_add(tables[t].period, cur,
							  k + 1);
			cr_assert_eq(partitions_with_bounds(c, tables[t].parent,
							    lo, hi),
				     1, "%s period %d", tables[t].parent, k);
		}
		cr_assert(default_attached(c, tables[t].parent));
	}
}

Test(partitions, concurrent_runs_claim_each_creation_once)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);

	struct partition_table tables[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 6, 12},
		{"WorkflowEvents", PERIOD_MONTH, 6, 12},
		{"Timers", PERIOD_HOUR, 48, 48},
	};
	int64_t now = db_now(c);
	struct names before, after, created, dropped;
	int64_t moved;
	list_partitions(c, &before);

	run_concurrently(d.url, tables, 3, now, &created, &dropped, &moved);
	cr_assert_eq(dropped.n, 0);
	cr_assert_eq(moved, 0);

	list_partitions(c, &after);
	/* The union of the reports is exactly what appeared. */
	struct partition_report u = {.created = created.v,
				     .n_created = created.n};
	assert_created_is_difference(&u, &before, &after);
	/* Months 4..6 of two tables and hours 25..48 at the very least (the
	 * template holds the default 3 months and 24 hours). */
	cr_assert_geq(created.n, 3 + 3 + 24, "only %zu created", created.n);
	assert_periods_covered_once(c, tables, 3, now);

	names_free(&created);
	names_free(&dropped);
	names_free(&before);
	names_free(&after);
	PQfinish(c);
	th_db_drop(&d);
}

Test(partitions, concurrent_runs_drop_and_recover_each_partition_once)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);

	struct partition_table tables[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 8, 12},
		{"WorkflowEvents", PERIOD_MONTH, 8, 12},
		{"Timers", PERIOD_HOUR, 30, 48},
	};
	int64_t now = db_now(c);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t h0 = partition_period_start(PERIOD_HOUR, now);
	int64_t m8 = partition_period_add(PERIOD_MONTH, m0, 8);
	int64_t h30 = partition_period_add(PERIOD_HOUR, h0, 30);

	/* Expired partitions for every runner to race on... */
	struct names expired = {NULL, 0};
	for (int k = 20; k < 32; k++) {
		char *name = create_partition(
			c, "WorkflowExecutions", PERIOD_MONTH,
			partition_period_add(PERIOD_MONTH, m0, -k));
		names_add(&expired, name);
		free(name);
	}
	for (int k = 100; k < 180; k++) {
		char *name = create_partition(
			c, "Timers", PERIOD_HOUR,
			partition_period_add(PERIOD_HOUR, h0, -k));
		names_add(&expired, name);
		free(name);
	}
	/* ...and DEFAULT partitions holding rows of periods to create. */
	insert_at(c, "WorkflowExecutions", m8, 0);
	insert_at(c, "WorkflowExecutions", m8 + 86400, 0);
	insert_at(c, "WorkflowExecutions", m8 + 2 * 86400, 0);
	insert_at(c, "WorkflowEvents", m8, 0);
	insert_at(c, "WorkflowEvents", m8 + 3600, 0);
	insert_at(c, "Timers", h30, 0);
	insert_at(c, "Timers", h30 + 60, 0);

	struct names before, after, created, dropped;
	int64_t moved;
	list_partitions(c, &before);

	run_concurrently(d.url, tables, 3, now, &created, &dropped, &moved);
	cr_assert_eq(moved, 3 + 2 + 2, "moved %lld", (long long)moved);
	cr_assert_eq(dropped.n, expired.n, "dropped %zu of %zu", dropped.n,
		     expired.n);
	for (size_t i = 0; i < expired.n; i++)
		cr_assert(names_has(&dropped, expired.v[i]), "%s not dropped",
			  expired.v[i]);

	list_partitions(c, &after);
	for (size_t i = 0; i < expired.n; i++)
		cr_assert_not(names_has(&after, expired.v[i]));
	/* Created: exactly what appeared; everything else is untouched. */
	for (size_t i = 0; i < created.n; i++)
		cr_assert(names_has(&after, created.v[i]) &&
				  !names_has(&before, created.v[i]),
			  "%s", created.v[i]);
	cr_assert_eq(after.n, before.n - expired.n + created.n);
	assert_periods_covered_once(c, tables, 3, now);

	char *ex8 = part_name(c, "WorkflowExecutions", PERIOD_MONTH, m8);
	char *ev8 = part_name(c, "WorkflowEvents", PERIOD_MONTH, m8);
	char *ti30 = part_name(c, "Timers", PERIOD_HOUR, h30);
	cr_assert_eq(rows_in(c, "WorkflowExecutions", ex8), 3);
	cr_assert_eq(rows_in(c, "WorkflowEvents", ev8), 2);
	cr_assert_eq(rows_in(c, "Timers", ti30), 2);
	for (int i = 0; i < 3; i++) {
		char def[96];
		snprintf(def, sizeof(def), "%s_default", PARENTS[i]);
		cr_assert_eq(rows_in(c, PARENTS[i], def), 0, "%s", PARENTS[i]);
	}

	free(ex8);
	free(ev8);
	free(ti30);
	names_free(&expired);
	names_free(&created);
	names_free(&dropped);
	names_free(&before);
	names_free(&after);
	PQfinish(c);
	th_db_drop(&d);
}

/* ------------------------------------------------------------ retention */

/* Creates parent's partition at lower unless it exists; returns its name. */
static char *
old_partition(PGconn *c, const struct names *existing, const char *parent,
	      enum partition_period p, int64_t lower)
{
	char *name = part_name(c, parent, p, lower);
	if (names_has(existing, name))
		return name;
	free(name);
	return create_partition(c, parent, p, lower);
}

Test(partitions, retention_drops_exactly_the_expired_partitions)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	struct db *db = open_db(d.url);

	/* An explicit clock: everything below is computed from it. */
	int64_t now = db_now(c);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t h0 = partition_period_start(PERIOD_HOUR, now);
	struct partition_table tables[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 3, 12},
		{"WorkflowEvents", PERIOD_MONTH, 3, 3},
		{"Timers", PERIOD_HOUR, 24, 48},
	};

	struct names existing;
	list_partitions(c, &existing);
#define MONTH(k) partition_period_add(PERIOD_MONTH, m0, (k))
#define HOUR(k)  partition_period_add(PERIOD_HOUR, h0, (k))
	/* Expired, the boundary ones among them: a partition whose upper
	 * bound equals the cutoff goes... */
	char *expired[] = {
		old_partition(c, &existing, "WorkflowExecutions", PERIOD_MONTH,
			      MONTH(-30)),
		old_partition(c, &existing, "WorkflowExecutions", PERIOD_MONTH,
			      MONTH(-13)),
		old_partition(c, &existing, "WorkflowEvents", PERIOD_MONTH,
			      MONTH(-10)),
		old_partition(c, &existing, "WorkflowEvents", PERIOD_MONTH,
			      MONTH(-4)),
		old_partition(c, &existing, "Timers", PERIOD_HOUR, HOUR(-200)),
		old_partition(c, &existing, "Timers", PERIOD_HOUR, HOUR(-49)),
	};
	/* ...and one ending one period later stays, as does anything newer. */
	char *kept[] = {
		old_partition(c, &existing, "WorkflowExecutions", PERIOD_MONTH,
			      MONTH(-12)),
		old_partition(c, &existing, "WorkflowExecutions", PERIOD_MONTH,
			      MONTH(-6)),
		old_partition(c, &existing, "WorkflowEvents", PERIOD_MONTH,
			      MONTH(-3)),
		old_partition(c, &existing, "WorkflowEvents", PERIOD_MONTH,
			      MONTH(-2)),
		old_partition(c, &existing, "Timers", PERIOD_HOUR, HOUR(-48)),
		old_partition(c, &existing, "Timers", PERIOD_HOUR, HOUR(-5)),
		/* Current and future ones. */
		part_name(c, "WorkflowExecutions", PERIOD_MONTH, m0),
		part_name(c, "WorkflowEvents", PERIOD_MONTH, MONTH(1)),
		part_name(c, "Timers", PERIOD_HOUR, h0),
		part_name(c, "Timers", PERIOD_HOUR, HOUR(3)),
	};
	enum { N_EXPIRED = sizeof(expired) / sizeof(expired[0]) };
	enum { N_KEPT = sizeof(kept) / sizeof(kept[0]) };
	/* A row in a partition that goes, and one in a partition that stays. */
	insert_at(c, "WorkflowExecutions", MONTH(-30), 0);
	insert_at(c, "WorkflowExecutions", MONTH(-12), 0);
	/* The current and future partitions may come from the template or
	 * from this pass; make sure they exist before it, so that "kept"
	 * means kept. */
	struct partition_report r;
	ensure(db,
	       (struct partition_table[]){
		       {"WorkflowExecutions", PERIOD_MONTH, 3, 1200},
		       {"WorkflowEvents", PERIOD_MONTH, 3, 1200},
		       {"Timers", PERIOD_HOUR, 24, 87600}},
	       3, now, &r);
	cr_assert_eq(r.n_dropped, 0, "long retention dropped %s",
		     r.n_dropped ? r.dropped[0] : "");
	partition_report_free(&r);

	struct names before;
	list_partitions(c, &before);
	for (int i = 0; i < N_EXPIRED; i++)
		cr_assert(names_has(&before, expired[i]), "%s", expired[i]);
	for (int i = 0; i < N_KEPT; i++)
		cr_assert(names_has(&before, kept[i]), "%s", kept[i]);

	ensure(db, tables, 3, now, &r);
	cr_assert_eq(r.n_created, 0);
	cr_assert_eq(r.rows_moved, 0);
	struct names dropped = {r.dropped, r.n_dropped};
	for (int i = 0; i < N_EXPIRED; i++)
		cr_assert(names_has(&dropped, expired[i]), "%s not dropped",
			  expired[i]);
	cr_assert_eq(r.n_dropped, N_EXPIRED, "dropped %zu, expected %d",
		     r.n_dropped, (int)N_EXPIRED);
	partition_report_free(&r);

	struct names after;
	list_partitions(c, &after);
	for (int i = 0; i < N_EXPIRED; i++)
		cr_assert_not(names_has(&after, expired[i]), "%s still there",
			      expired[i]);
	for (size_t i = 0; i < before.n; i++) {
		bool gone = false;
		for (int k = 0; k < N_EXPIRED; k++)
			gone = gone || strcmp(before.v[i], expired[k]) == 0;
		cr_assert_eq(names_has(&after, before.v[i]), !gone, "%s",
			     before.v[i]);
	}
	for (int i = 0; i < N_KEPT; i++)
		cr_assert(names_has(&after, kept[i]), "%s dropped", kept[i]);
	for (int i = 0; i < 3; i++) {
		char def[96];
		snprintf(def, sizeof(def), "%s_default", PARENTS[i]);
		cr_assert(names_has(&after, def));
		cr_assert(default_attached(c, PARENTS[i]));
	}
	/* Dropping took its rows along; the kept partition still has its. */
	cr_assert_eq(rows_total(c, "WorkflowExecutions"), 1);
	cr_assert_eq(rows_in(c, "WorkflowExecutions", kept[0]), 1);

	/* Idempotent: the same pass again finds nothing to do. */
	ensure(db, tables, 3, now, &r);
	cr_assert_eq(r.n_created, 0);
	cr_assert_eq(r.n_dropped, 0);
	cr_assert_eq(r.rows_moved, 0);
	partition_report_free(&r);
#undef MONTH
#undef HOUR

	for (int i = 0; i < N_EXPIRED; i++)
		free(expired[i]);
	for (int i = 0; i < N_KEPT; i++)
		free(kept[i]);
	names_free(&existing);
	names_free(&before);
	names_free(&after);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}

/* ------------------------------------------------ session settings */

Test(partitions, periods_are_utc_whatever_the_session_time_zone)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	/* Every later session renders bounds as, say, "01.12.2026 13:45:00
	 * +1345": the catalog bounds must still read back as UTC periods. */
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "ALTER DATABASE \"%s\" SET \"TimeZone\" TO 'Pacific/Chatham'",
		 d.name);
	th_exec(c, sql);
	snprintf(sql, sizeof(sql),
		 "ALTER DATABASE \"%s\" SET \"DateStyle\" TO 'German, DMY'",
		 d.name);
	th_exec(c, sql);
	PQfinish(c);
	c = th_connect(d.url);
	char *tz = th_value(c, "SHOW \"TimeZone\"", 0, NULL);
	cr_assert_str_eq(tz, "Pacific/Chatham");
	free(tz);
	struct db *db = open_db(d.url);

	int64_t now = db_now(c);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t h0 = partition_period_start(PERIOD_HOUR, now);
	struct names existing;
	list_partitions(c, &existing);
	char *gone = old_partition(c, &existing, "Timers", PERIOD_HOUR,
				   partition_period_add(PERIOD_HOUR, h0, -49));
	char *stays = old_partition(c, &existing, "Timers", PERIOD_HOUR,
				    partition_period_add(PERIOD_HOUR, h0, -48));
	char *month_gone =
		old_partition(c, &existing, "WorkflowEvents", PERIOD_MONTH,
			      partition_period_add(PERIOD_MONTH, m0, -13));
	char *month_stays =
		old_partition(c, &existing, "WorkflowEvents", PERIOD_MONTH,
			      partition_period_add(PERIOD_MONTH, m0, -12));

	struct partition_table tables[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 5, 12},
		{"WorkflowEvents", PERIOD_MONTH, 5, 12},
		{"Timers", PERIOD_HOUR, 30, 48},
	};
	struct names before, after;
	list_partitions(c, &before);
	struct partition_report r;
	ensure(db, tables, 3, now, &r);
	cr_assert_eq(r.n_dropped, 2, "dropped %zu", r.n_dropped);
	struct names dropped = {r.dropped, r.n_dropped};
	cr_assert(names_has(&dropped, gone));
	cr_assert(names_has(&dropped, month_gone));
	list_partitions(c, &after);
	cr_assert(names_has(&after, stays));
	cr_assert(names_has(&after, month_stays));
	for (size_t i = 0; i < r.n_created; i++)
		cr_assert(names_has(&after, r.created[i]) &&
				  !names_has(&before, r.created[i]),
			  "%s", r.created[i]);
	cr_assert_eq(after.n, before.n - 2 + r.n_created);
	partition_report_free(&r);
	/* UTC-named, UTC-bounded, each period once. */
	char *last = part_name(c, "Timers", PERIOD_HOUR,
			       partition_period_add(PERIOD_HOUR, h0, 30));
	cr_assert(names_has(&after, last), "%s missing", last);
	free(last);
	assert_periods_covered_once(c, tables, 3, now);

	ensure(db, tables, 3, now, &r);
	cr_assert_eq(r.n_created, 0);
	cr_assert_eq(r.n_dropped, 0);
	partition_report_free(&r);

	free(gone);
	free(stays);
	free(month_gone);
	free(month_stays);
	names_free(&existing);
	names_free(&before);
	names_free(&after);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}

/* --------------------------------------------------------- idempotence */

Test(partitions, second_pass_right_after_the_first_does_nothing)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	struct db *db = open_db(d.url);

	struct partition_table tables[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 5, 12},
		{"WorkflowEvents", PERIOD_MONTH, 5, 12},
		{"Timers", PERIOD_HOUR, 30, 48},
	};
	/* The database's clock (now_epoch 0).  Should an hour begin between
	 * the two passes the second one rightly creates its partition: then
	 * try again. */
	struct partition_report first, second;
	struct names mid, after;
	bool same_hour = false;
	size_t created_first = 0;
	for (int attempt = 0; attempt < 3 && !same_hour; attempt++) {
		int64_t t0 = db_now(c);
		ensure(db, tables, 3, 0, &first);
		list_partitions(c, &mid);
		ensure(db, tables, 3, 0, &second);
		list_partitions(c, &after);
		int64_t t1 = db_now(c);
		same_hour = partition_period_start(PERIOD_HOUR, t0) ==
			    partition_period_start(PERIOD_HOUR, t1);
		if (attempt == 0)
			created_first = first.n_created;
		if (!same_hour) {
			partition_report_free(&first);
			partition_report_free(&second);
			names_free(&mid);
			names_free(&after);
		}
	}
	cr_assert(same_hour);
	/* Months 4..5 twice, hours 25..30: the first pass had work. */
	cr_assert_geq(created_first, 2 + 2 + 6);
	cr_assert_eq(second.n_created, 0, "second pass created %s",
		     second.n_created ? second.created[0] : "");
	cr_assert_eq(second.n_dropped, 0);
	cr_assert_eq(second.rows_moved, 0);
	cr_assert_eq(mid.n, after.n);
	for (size_t i = 0; i < mid.n; i++)
		cr_assert_str_eq(mid.v[i], after.v[i]);

	partition_report_free(&first);
	partition_report_free(&second);
	names_free(&mid);
	names_free(&after);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}

/* ------------------------------------------- month and year boundaries */

/* The last second of a year, then the first of the next: the second pass
 * creates exactly the month and the hour that came into reach, names and
 * bounds them in UTC, and drops nothing. */
static void
pass_across(int64_t before_midnight)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	struct db *db = open_db(d.url);

	struct partition_table tables[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 3, 12},
		{"WorkflowEvents", PERIOD_MONTH, 3, 12},
		{"Timers", PERIOD_HOUR, 24, 48},
	};
	int64_t t0 = before_midnight, t1 = before_midnight + 1;
	struct partition_report r;
	ensure(db, tables, 3, t0, &r);
	partition_report_free(&r);
	assert_periods_covered_once(c, tables, 3, t0);

	struct names before, after;
	list_partitions(c, &before);
	ensure(db, tables, 3, t1, &r);
	cr_assert_eq(r.n_dropped, 0, "dropped %s",
		     r.n_dropped ? r.dropped[0] : "");
	cr_assert_eq(r.rows_moved, 0);
	list_partitions(c, &after);
	assert_created_is_difference(&r, &before, &after);
	int64_t m0 = partition_period_start(PERIOD_MONTH, t1);
	int64_t h0 = partition_period_start(PERIOD_HOUR, t1);
	cr_assert_eq(m0, t1, "t1 is no month start");
	char *want[] = {
		part_name(c, "WorkflowExecutions", PERIOD_MONTH,
			  partition_period_add(PERIOD_MONTH, m0, 3)),
		part_name(c, "WorkflowEvents", PERIOD_MONTH,
			  partition_period_add(PERIOD_MONTH, m0, 3)),
		part_name(c, "Timers", PERIOD_HOUR,
			  partition_period_add(PERIOD_HOUR, h0, 24)),
	};
	struct names created = {r.created, r.n_created};
	cr_assert_eq(r.n_created, 3, "created %zu", r.n_created);
	for (int i = 0; i < 3; i++) {
		cr_assert(names_has(&created, want[i]), "%s not created",
			  want[i]);
		free(want[i]);
	}
	partition_report_free(&r);
	assert_periods_covered_once(c, tables, 3, t1);

	names_free(&before);
	names_free(&after);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}

Test(partitions, a_pass_after_midnight_of_a_new_month)
{
	pass_across(utc(2030, 11, 30, 23, 59, 59));
}

Test(partitions, a_pass_after_midnight_of_a_new_year)
{
	pass_across(utc(2030, 12, 31, 23, 59, 59));
}

Test(partitions, a_pass_after_midnight_of_a_leap_day)
{
	pass_across(utc(2032, 2, 29, 23, 59, 59));
}

/* --------------------------------------------------------- TaskLogs */

/*
 * TaskLogs (migration 0009) is one of the manager's tables as configured
 * (partitions_tables): a line of a month not yet created that landed in
 * DEFAULT is moved out when its month is created, the months ahead are
 * created, and a month past retention is dropped.
 */
Test(partitions, task_logs_are_rolled_recovered_and_expired)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	struct db *db = open_db(d.url);

	struct config cfg;
	struct err e = ERR_INIT;
	cr_assert(config_init(&cfg, &e), "%s", e.msg);
	cfg.task_logs_months_ahead = 2;
	cfg.task_logs_retention_months = 3;
	struct partition_table all[PARTITION_TABLES];
	partitions_tables(&cfg, all);
	const struct partition_table *tl = NULL;
	for (size_t i = 0; i < PARTITION_TABLES; i++)
		if (strcmp(all[i].parent, "TaskLogs") == 0)
			tl = &all[i];
	cr_assert_not_null(tl, "TaskLogs is not one of the manager's tables");

	int64_t now = db_now(c);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t m5 = partition_period_add(PERIOD_MONTH, m0, 5);
	/* A line five months ahead: no partition yet, so DEFAULT. */
	char t[24];
	epoch_text(m5 + 3600, t);
	const char *params[] = {t};
	PQclear(th_query(c,
			 "INSERT INTO \"TaskLogs\" (\"namespaceId\","
			 " \"workflowId\", \"taskId\", \"seq\", \"log\","
			 " \"createdTime\", \"createdAt\") VALUES (uuidv7(),"
			 " uuidv7(), uuidv7(), 1, 'later', 0,"
			 " to_timestamp($1::bigint))",
			 1, params));
	cr_assert_eq(rows_in(c, "TaskLogs", "TaskLogs_default"), 1);

	struct partition_report r;
	ensure(db, tl, 1, now, &r);
	for (int k = 0; k <= 2; k++) {
		int64_t lo = partition_period_add(PERIOD_MONTH, m0, k);
		cr_assert_eq(partitions_with_bounds(
				     c, "TaskLogs", lo,
				     partition_period_add(PERIOD_MONTH, lo, 1)),
			     1, "TaskLogs month %d ahead", k);
	}
	partition_report_free(&r);

	/* Five months on, the line's month is created (and the line moved
	 * out of DEFAULT); the current month is past retention 3 and goes. */
	ensure(db, tl, 1, m5 + 60, &r);
	cr_assert_eq(r.rows_moved, 1);
	char *m5name = part_name(c, "TaskLogs", PERIOD_MONTH, m5);
	cr_assert_eq(rows_in(c, "TaskLogs", m5name), 1);
	cr_assert_eq(rows_in(c, "TaskLogs", "TaskLogs_default"), 0);
	cr_assert(default_attached(c, "TaskLogs"));
	char *m0name = part_name(c, "TaskLogs", PERIOD_MONTH, m0);
	bool dropped = false;
	for (size_t i = 0; i < r.n_dropped; i++)
		if (strcmp(r.dropped[i], m0name) == 0)
			dropped = true;
	cr_assert(dropped, "%s not dropped", m0name);
	cr_assert_eq(partitions_with_bounds(
			     c, "TaskLogs", m0,
			     partition_period_add(PERIOD_MONTH, m0, 1)),
		     0);
	partition_report_free(&r);

	free(m5name);
	free(m0name);
	config_free(&cfg);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}

/* A partition's storage parameters, comma-separated ("" for none). */
static char *
options_of(PGconn *c, const char *name)
{
	const char *params[] = {name};
	return th_value(
		c,
		"SELECT coalesce(array_to_string(c.\"reloptions\", ','),"
		" '') FROM \"pg_catalog\".\"pg_class\" c"
		" WHERE c.\"relname\" = $1",
		1, params);
}

/*
 * Every partition of "WorkflowExecutions" keeps a fifth of each page free
 * (fillfactor 80, migration 0012), whether the manager made it ahead or
 * recovered it from a populated DEFAULT, so an update that changes no
 * indexed column (an evaluation's "version" and "eventSeq") finds room on
 * its row's page even when the page was filled by inserts: it is HOT, and
 * adds nothing to the table's indexes.  Other tables' new partitions take
 * no storage parameters.
 */
Test(partitions, execution_partitions_keep_room_for_hot_updates)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	struct db *db = open_db(d.url);

	int64_t now = db_now(c);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t m7 = partition_period_add(PERIOD_MONTH, m0, 7);
	int64_t h0 = partition_period_start(PERIOD_HOUR, now);
	insert_at(c, "WorkflowExecutions", m7 + 3600, 0); /* in DEFAULT */
	struct partition_table tables[] = {
		{"WorkflowExecutions", PERIOD_MONTH, 7, 12},
		{"Timers", PERIOD_HOUR, 30, 48},
	};
	struct partition_report r;
	ensure(db, tables, 2, now, &r);
	cr_assert_eq(r.rows_moved, 1, "the row in DEFAULT was not moved");
	partition_report_free(&r);

	PGresult *all = th_query(
		c,
		"SELECT c.\"relname\"::text, coalesce(array_to_string("
		" c.\"reloptions\", ','), '')"
		" FROM \"pg_catalog\".\"pg_inherits\" i"
		" JOIN \"pg_catalog\".\"pg_class\" c ON c.\"oid\" = i.\"inhrelid\""
		" WHERE i.\"inhparent\" = to_regclass('\"WorkflowExecutions\"')",
		0, NULL);
	cr_assert_geq(PQntuples(all), 9, "DEFAULT and months 0..7");
	for (int i = 0; i < PQntuples(all); i++)
		cr_assert_str_eq(PQgetvalue(all, i, 1), "fillfactor=80",
				 "partition %s", PQgetvalue(all, i, 0));
	PQclear(all);
	char *ti = part_name(c, "Timers", PERIOD_HOUR,
			     partition_period_add(PERIOD_HOUR, h0, 30));
	char *ti_opts = options_of(c, ti);
	cr_assert_str_eq(ti_opts, "", "%s has %s", ti, ti_opts);

	/* A partition's first page filled by inserts, then its first row's
	 * evaluation. */
	char *ex = part_name(c, "WorkflowExecutions", PERIOD_MONTH, m7);
	char t[24];
	epoch_text(m7 + 7200, t);
	const char *params[] = {t};
	PQclear(th_query(
		c,
		"INSERT INTO \"WorkflowExecutions\" (\"namespaceId\","
		" \"defName\", \"defVersion\", \"input\", \"startedAt\")"
		" SELECT uuidv7(), 'hot-test', 1,"
		" jsonb_build_object('n', g, 'pad', repeat('x', 100)),"
		" to_timestamp($1::bigint) + g * interval '1 second'"
		" FROM generate_series(1, 200) g",
		1, params));
	char q[512];
	snprintf(q, sizeof(q),
		 "SELECT count(*) FROM \"%s\" WHERE (\"ctid\"::text::point)[0]"
		 " = 0",
		 ex);
	cr_assert_gt(th_int(c, q, 0, NULL), 10, "the first page holds rows");
	th_exec(c, "BEGIN");
	snprintf(
		q, sizeof(q),
		"UPDATE \"WorkflowExecutions\" SET \"version\" = \"version\""
		" + 1, \"eventSeq\" = \"eventSeq\" + 1, \"updatedAt\" = now()"
		" WHERE (\"id\", \"startedAt\") = (SELECT \"id\", \"startedAt\""
		" FROM \"%s\" WHERE \"defName\" = 'hot-test'"
		" AND (\"ctid\"::text::point)[0] = 0 LIMIT 1)",
		ex);
	th_exec(c, q);
	snprintf(
		q, sizeof(q),
		"SELECT pg_stat_get_xact_tuples_hot_updated('\"%s\"'::regclass)",
		ex);
	cr_assert_eq(th_int(c, q, 0, NULL), 1, "the update was not HOT");
	th_exec(c, "COMMIT");

	free(ex);
	free(ti);
	free(ti_opts);
	db_close(db);
	PQfinish(c);
	th_db_drop(&d);
}
