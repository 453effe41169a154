/*
 * integration_store — the store layer against a real database: the
 * statement registry prepares in full on a migrated database and fails,
 * naming the statement, on an unmigrated one; the jsonb funnel makes a NUL
 * storable; "IdempotencyKeys" actually constrains (and the partitioned
 * alternative would not); PostgreSQL 15 is refused; the connection pool
 * hands out, recycles, replaces and fails fast as pool.h says; a
 * transaction in which a statement failed does not commit, even when the
 * caller let the failure pass; and the plans a DB_KEYED connection made on
 * an empty database reach rows by index once the tables are large.
 */
#include "harness.h"

#include "runtime/metrics.h"
#include "store/db.h"
#include "store/decide_repo.h"
#include "store/definitions_repo.h"
#include "store/executions_repo.h"
#include "store/pool.h"
#include "store/queue_repo.h"
#include "store/sql.h"
#include "util/json.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct th_db tdb;
static PGconn *conn;

static void
setup_clone(void)
{
	th_db_clone(&tdb);
	conn = th_connect(tdb.url);
}

static void
setup_empty(void)
{
	th_db_empty(&tdb);
	conn = th_connect(tdb.url);
}

static void
teardown(void)
{
	if (conn)
		PQfinish(conn);
	conn = NULL;
	th_db_drop(&tdb);
}

/* ------------------------------------------------------------- registry */

Test(registry, every_statement_prepares_on_a_migrated_database,
     .init = setup_clone, .fini = teardown)
{
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, tdb.url, DB_PREPARE_ALL, &e), "%s", e.msg);
	cr_assert_gt(db_registry_size(), 0);
	for (size_t i = 0; i < db_registry_size(); i++) {
		struct db_stmt *s = db_registry_at(i);
		cr_assert_eq(s->id, i);
		cr_assert(s->name && *s->name && s->sql && *s->sql);
		cr_assert(db->prepared[i], "%s was not prepared", s->name);
	}
	cr_assert_geq(th_int(conn,
			     "SELECT count(*) FROM pg_stat_activity"
			     " WHERE \"datname\" = current_database()"
			     "   AND \"application_name\" = 'nodeflow'",
			     0, NULL),
		      1);
	db_close(db);
}

Test(registry, prepare_all_fails_naming_the_statement_when_unmigrated,
     .init = setup_empty, .fini = teardown)
{
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert_not(db_open(&db, tdb.url, DB_PREPARE_ALL, &e),
		      "every statement prepared on an empty database");
	cr_assert_null(db);
	cr_assert_str_eq(e.sqlstate, "42P01", "%s", e.msg);
	/* A disagreement, not an outage: `serve` refuses to start on it. */
	cr_assert_neq(e.code, ERR_UNAVAILABLE);
	bool named = false;
	for (size_t i = 0; i < db_registry_size() && !named; i++) {
		char needle[160];
		snprintf(needle, sizeof(needle),
			 "could not prepare statement %s:",
			 db_registry_at(i)->name);
		named = strstr(e.msg, needle) != NULL;
	}
	cr_assert(named, "the error names no statement: %s", e.msg);

	/* Without DB_PREPARE_ALL the same database opens. */
	cr_assert(db_open(&db, tdb.url, DB_PLAIN, &e), "%s", e.msg);
	db_close(db);
}

static int backend_pid(struct db *db);

/* The database going away while the statements are prepared (a restart
 * during a replica's start) is an outage, not a disagreement: `serve`
 * starts anyway on ERR_UNAVAILABLE and refuses on anything else. */
Test(registry, prepare_all_on_a_lost_connection_is_unavailable,
     .init = setup_clone, .fini = teardown)
{
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, tdb.url, DB_PLAIN, &e), "%s", e.msg);
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", backend_pid(db));
	const char *params[] = {pid};
	PQclear(th_query(conn, "SELECT pg_terminate_backend($1::int, 10000)", 1,
			 params));
	cr_assert_not(db_prepare_all(db, &e), "prepared on a dead connection");
	cr_assert_eq(e.code, ERR_UNAVAILABLE, "code %s: %s",
		     err_code_name(e.code), e.msg);
	db_close(db);
}

/* ---------------------------------------------------------- NUL in jsonb */

static const char insert_execution[] =
	"INSERT INTO \"WorkflowExecutions\""
	" (\"namespaceId\", \"defName\", \"defVersion\", \"input\")"
	" SELECT \"id\", 'nul', 1, $1::jsonb FROM \"Namespaces\""
	"  WHERE \"name\" = 'default'"
	" RETURNING \"input\"->>'s', \"input\"->>'literal'";

Test(json, nul_round_trips_through_the_funnel, .init = setup_clone,
     .fini = teardown)
{
	json_t *v = json_object();
	json_object_set_new(v, "s", json_stringn("a\0b", 3));
	/* A backslash followed by "u0000" is content, not an escape. */
	json_object_set_new(v, "literal", json_string("x\\u0000y"));

	/* Unfiltered, PostgreSQL refuses it: the funnel is needed. */
	char *raw = json_dumps(v, JSON_COMPACT);
	cr_assert(strstr(raw, "\"a\\u0000b\""), "%s", raw);
	const char *raw_params[] = {raw};
	cr_assert_str_eq(th_sqlstate_of(conn, insert_execution, 1, raw_params),
			 "22P05");

	char *text = json_db_text(v);
	const char *params[] = {text};
	PGresult *r = th_query(conn, insert_execution, 1, params);
	cr_assert_eq(PQntuples(r), 1);
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "ab");
	cr_assert_str_eq(PQgetvalue(r, 0, 1), "x\\u0000y");
	PQclear(r);

	free(text);
	free(raw);
	json_decref(v);
}

/* ---------------------------------------------------------- transactions */

Test(commit, fails_after_a_failed_statement, .init = setup_clone,
     .fini = teardown)
{
	struct db *db;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, tdb.url, DB_PLAIN, &e), "%s", e.msg);
	cr_assert(db_begin(db, &e), "%s", e.msg);
	cr_assert(db_exec_script(db, "CREATE TABLE \"kept\" (\"x\" int)", &e),
		  "%s", e.msg);
	/* A failure its caller ignores: PostgreSQL would answer COMMIT with
	 * ROLLBACK, and no error. */
	struct err ignored = ERR_INIT;
	cr_assert_not(db_exec_script(db, "SELECT 1/0", &ignored));
	cr_assert_not(db_commit(db, &e));
	cr_assert_str_eq(e.sqlstate, "25P02");
	/* Rolled back, and the connection is usable again. */
	cr_assert(db_healthy(db));
	cr_assert_eq(th_int(conn,
			    "SELECT count(*) FROM \"pg_catalog\".\"pg_class\""
			    " WHERE \"relname\" = 'kept'",
			    0, NULL),
		     0);
	cr_assert(db_begin(db, &e), "%s", e.msg);
	cr_assert(db_exec_script(db, "CREATE TABLE \"kept\" (\"x\" int)", &e),
		  "%s", e.msg);
	cr_assert(db_commit(db, &e), "%s", e.msg);
	cr_assert_eq(th_int(conn,
			    "SELECT count(*) FROM \"pg_catalog\".\"pg_class\""
			    " WHERE \"relname\" = 'kept'",
			    0, NULL),
		     1);
	db_close(db);
}

/* ------------------------------------------------------------ idempotency */

static const char insert_key[] =
	"INSERT INTO \"IdempotencyKeys\""
	" (\"namespaceId\", \"key\", \"workflowId\", \"startedAt\")"
	" SELECT \"id\", $1, uuidv7(), now() FROM \"Namespaces\""
	"  WHERE \"name\" = 'default'";

Test(idempotency, keys_table_rejects_a_duplicate, .init = setup_clone,
     .fini = teardown)
{
	const char *k1[] = {"order-1"};
	PQclear(th_query(conn, insert_key, 1, k1));
	cr_assert_str_eq(th_sqlstate_of(conn, insert_key, 1, k1), "23505");

	/* The form the engine uses: the second start gets no row back and
	 * reads the first one's workflow instead. */
	char sql[1024];
	snprintf(sql, sizeof(sql),
		 "%s ON CONFLICT DO NOTHING RETURNING \"workflowId\"",
		 insert_key);
	const char *k2[] = {"order-2"};
	PGresult *r = th_query(conn, sql, 1, k2);
	cr_assert_eq(PQntuples(r), 1);
	PQclear(r);
	r = th_query(conn, sql, 1, k2);
	cr_assert_eq(PQntuples(r), 0, "a duplicate key was inserted");
	PQclear(r);
	cr_assert_eq(th_int(conn, "SELECT count(*) FROM \"IdempotencyKeys\"", 0,
			    NULL),
		     2);
}

Test(idempotency, unique_index_with_partition_key_never_conflicts,
     .init = setup_clone, .fini = teardown)
{
	/* A scratch copy of the shape of "WorkflowExecutions". */
	th_exec(conn, "CREATE TABLE \"ScratchExecutions\" ("
		      " \"id\" UUID NOT NULL DEFAULT uuidv7(),"
		      " \"namespaceId\" UUID NOT NULL,"
		      " \"idempotencyKey\" TEXT,"
		      " \"startedAt\" TIMESTAMPTZ NOT NULL DEFAULT now(),"
		      " PRIMARY KEY (\"id\", \"startedAt\")"
		      ") PARTITION BY RANGE (\"startedAt\");"
		      "CREATE TABLE \"ScratchExecutions_default\""
		      " PARTITION OF \"ScratchExecutions\" DEFAULT");

	/* Without the partition key, Postgres refuses the index outright ... */
	cr_assert_str_eq(
		th_sqlstate_of(conn,
			       "CREATE UNIQUE INDEX ON \"ScratchExecutions\""
			       " (\"namespaceId\", \"idempotencyKey\")",
			       0, NULL),
		"0A000");
	/* ... with it, the index is accepted and constrains nothing. */
	th_exec(conn, "CREATE UNIQUE INDEX ON \"ScratchExecutions\""
		      " (\"namespaceId\", \"idempotencyKey\", \"startedAt\")");
	const char *insert = "INSERT INTO \"ScratchExecutions\""
			     " (\"namespaceId\", \"idempotencyKey\")"
			     " VALUES ('00000000-0000-0000-0000-000000000001',"
			     "         'order-1') ON CONFLICT DO NOTHING";
	/* Two transactions, so two values of now(). */
	th_exec(conn, insert);
	th_exec(conn, insert);
	cr_assert_eq(th_int(conn,
			    "SELECT count(*) FROM \"ScratchExecutions\""
			    " WHERE \"idempotencyKey\" = 'order-1'",
			    0, NULL),
		     2, "the unique index conflicted after all");
}

/* --------------------------------------------------------------- version */

Test(version, postgresql_15_is_refused)
{
	const char *url = th_env("NODEFLOW_TEST_PG15_URL");
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert_not(db_open(&db, url, DB_PLAIN, &e),
		      "db_open accepted PostgreSQL 15");
	cr_assert_null(db);
	cr_assert_eq(e.code, ERR_VERSION, "code %s: %s", err_code_name(e.code),
		     e.msg);
	cr_assert(strstr(e.msg, "15."), "%s", e.msg);
	cr_assert(strstr(e.msg, "18"), "%s", e.msg);
}

/* A connection lost while its server's capabilities are checked (a
 * restart under way) is a reason to try again, not a version PostgreSQL
 * lacks: a replica started during a restart exited on it.  Here the
 * check's uuidv7() found first on the search path ends its own backend. */
Test(version, a_connection_lost_during_the_check_is_not_a_version_problem,
     .init = setup_empty, .fini = teardown)
{
	th_exec(conn, "CREATE SCHEMA \"cut\"");
	th_exec(conn, "CREATE FUNCTION \"cut\".\"uuidv7\"() RETURNS uuid"
		      " LANGUAGE plpgsql AS $$ BEGIN"
		      " PERFORM pg_terminate_backend(pg_backend_pid());"
		      " RETURN NULL; END $$");
	th_exec(conn, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET"
		      " search_path = \"cut\", pg_catalog, public',"
		      " current_database()); END $$");
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert_not(db_open(&db, tdb.url, DB_PLAIN, &e));
	cr_assert_eq(e.code, ERR_UNAVAILABLE, "code %s: %s",
		     err_code_name(e.code), e.msg);
	cr_assert(strstr(e.msg, "could not check for uuidv7()"), "%s", e.msg);

	th_exec(conn, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET"
		      " search_path', current_database()); END $$");
	e = (struct err)ERR_INIT;
	cr_assert(db_open(&db, tdb.url, DB_PLAIN, &e), "%s", e.msg);
	db_close(db);
}

/* ------------------------------------------------------------------ pool */

static int
backend_pid(struct db *db)
{
	return PQbackendPID(db->conn);
}

static bool
works(struct db *db)
{
	struct err e = ERR_INIT;
	return db_exec_script(db, "SELECT 1", &e);
}

Test(pool, acquire_release_and_exhaustion, .init = setup_clone,
     .fini = teardown)
{
	struct db_pool *pool = db_pool_create(tdb.url, 1, DB_PLAIN);
	struct err e = ERR_INIT;

	struct db *a = db_pool_acquire(pool, 1000, &e);
	cr_assert_not_null(a, "%s", e.msg);
	cr_assert(works(a));
	int pid = backend_pid(a);

	/* The only connection is lent out. */
	int64_t t0 = th_now_ms();
	cr_assert_null(db_pool_acquire(pool, 100, &e));
	cr_assert_eq(e.code, ERR_UNAVAILABLE, "%s", e.msg);
	cr_assert_geq(th_now_ms() - t0, 90, "did not wait for a connection");

	/* Returned inside a transaction: rolled back and reused. */
	cr_assert(db_begin(a, &e), "%s", e.msg);
	db_pool_release(pool, a);
	struct db *b = db_pool_acquire(pool, 1000, &e);
	cr_assert_not_null(b, "%s", e.msg);
	cr_assert_eq(backend_pid(b), pid,
		     "a rolled-back connection was not "
		     "reused");
	cr_assert(db_healthy(b), "handed out inside a transaction");
	db_pool_release(pool, b);
	db_pool_destroy(pool);
}

Test(pool, replaces_a_connection_whose_backend_died, .init = setup_clone,
     .fini = teardown)
{
	struct db_pool *pool = db_pool_create(tdb.url, 2, DB_PLAIN);
	struct err e = ERR_INIT;

	struct db *db = db_pool_acquire(pool, 1000, &e);
	cr_assert_not_null(db, "%s", e.msg);
	cr_assert(works(db));
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", backend_pid(db));
	db_pool_release(pool, db);

	/* Killed while idle in the pool; wait until the backend is gone. */
	const char *params[] = {pid};
	char *killed =
		th_value(conn,
			 "SELECT pg_terminate_backend($1::int, 10000)"
			 "   AND \"application_name\" = 'nodeflow'"
			 "  FROM pg_stat_activity WHERE \"pid\" = $1::int",
			 1, params);
	cr_assert_str_eq(killed, "t");
	free(killed);

	/* The next acquire notices and hands out a new, working one. */
	db = db_pool_acquire(pool, 1000, &e);
	cr_assert_not_null(db, "%s", e.msg);
	cr_assert_neq(backend_pid(db), atoi(pid),
		      "the dead connection was "
		      "handed out");
	cr_assert(works(db));
	db_pool_release(pool, db);

	/* And the cycle after that is ordinary. */
	db = db_pool_acquire(pool, 1000, &e);
	cr_assert_not_null(db, "%s", e.msg);
	cr_assert(works(db));
	db_pool_release(pool, db);
	db_pool_destroy(pool);
}

Test(pool, a_dead_connection_returned_is_replaced, .init = setup_clone,
     .fini = teardown)
{
	struct db_pool *pool = db_pool_create(tdb.url, 1, DB_PLAIN);
	struct err e = ERR_INIT;

	struct db *db = db_pool_acquire(pool, 1000, &e);
	cr_assert_not_null(db, "%s", e.msg);
	int pid = backend_pid(db);
	char pid_text[16];
	snprintf(pid_text, sizeof(pid_text), "%d", pid);
	const char *params[] = {pid_text};
	PQclear(th_query(conn, "SELECT pg_terminate_backend($1::int, 10000)", 1,
			 params));

	/* The holder finds out by failing ... */
	cr_assert_not(db_exec_script(db, "SELECT 1", &e));
	cr_assert_eq(e.code, ERR_UNAVAILABLE, "code %s: %s",
		     err_code_name(e.code), e.msg);
	db_pool_release(pool, db);

	/* ... and the pool, size 1, still has a connection to give. */
	db = db_pool_acquire(pool, 1000, &e);
	cr_assert_not_null(db, "%s", e.msg);
	cr_assert_neq(backend_pid(db), pid);
	cr_assert(works(db));
	db_pool_release(pool, db);
	db_pool_destroy(pool);
}

/* A port of this host bound and not listening, so connections to it are
 * refused: its URL in url, the socket returned (close it after). */
static int
refusing_port(char *url, size_t size)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	struct sockaddr_in addr = {.sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	socklen_t len = sizeof(addr);
	cr_assert(getsockname(fd, (struct sockaddr *)&addr, &len) == 0);
	snprintf(url, size,
		 "host=127.0.0.1 port=%d dbname=nodeflow user=postgres",
		 ntohs(addr.sin_port));
	return fd;
}

static atomic_int warmed;

static void
count_warm(struct db *db)
{
	cr_assert_not_null(db);
	atomic_fetch_add(&warmed, 1);
}

/* Filling the pool ahead of demand opens every connection it can and warms
 * each, and on an unreachable database tries once: one failure, one step
 * of the backoff, and the slots it reserved given back. */
Test(pool, fill_opens_ahead_and_tries_once_when_unreachable,
     .init = setup_clone, .fini = teardown)
{
	struct metric *failures = metric_register(
		METRIC_COUNTER, "nodeflow_db_connect_failures_total", "", "");
	struct metric *open = metric_register(
		METRIC_GAUGE, "nodeflow_db_pool_connections", "", "");
	struct db_pool *pool = db_pool_create(tdb.url, 3, DB_PLAIN);
	atomic_store(&warmed, 0);
	cr_assert_eq(db_pool_fill(pool, 5, count_warm), 3);
	cr_assert_eq(atomic_load(&warmed), 3);
	cr_assert_eq(metric_get(open), 3);
	cr_assert_eq(db_pool_fill(pool, 5, NULL), 0, "the pool was full");
	db_pool_destroy(pool);

	char url[256];
	int fd = refusing_port(url, sizeof(url));
	pool = db_pool_create(url, 4, DB_PLAIN);
	long long failed = metric_get(failures);
	cr_assert_eq(db_pool_fill(pool, 4, count_warm), 0);
	cr_assert_eq(atomic_load(&warmed), 3, "no connection, no warming");
	cr_assert_eq(metric_get(failures) - failed, 1);
	cr_assert_eq(metric_get(open), 0);
	db_pool_destroy(pool);
	close(fd);
}

Test(pool, unreachable_database_fails_fast)
{
	char url[256];
	int fd = refusing_port(url, sizeof(url));

	struct db_pool *pool = db_pool_create(url, 2, DB_PLAIN);
	struct err e = ERR_INIT;
	int64_t t0 = th_now_ms();
	cr_assert_null(db_pool_acquire(pool, 5000, &e));
	cr_assert_eq(e.code, ERR_UNAVAILABLE, "code %s: %s",
		     err_code_name(e.code), e.msg);
	cr_assert_lt(th_now_ms() - t0, 2000, "the first attempt took %lld ms",
		     (long long)(th_now_ms() - t0));

	/* Within the backoff, callers fail at once without connecting. */
	t0 = th_now_ms();
	cr_assert_null(db_pool_acquire(pool, 5000, &e));
	cr_assert_eq(e.code, ERR_UNAVAILABLE, "%s", e.msg);
	cr_assert_lt(th_now_ms() - t0, 50, "a caller waited %lld ms",
		     (long long)(th_now_ms() - t0));

	db_pool_destroy(pool);
	close(fd);
}

/* ----------------------------------------------------------------- plans */

/* Rows this connection's transaction read by scanning a "TaskExecutions"
 * or "TaskQueues" partition whole, so far. */
static long long
whole_scan_rows(struct db *db)
{
	return th_int(db->conn,
		      "SELECT coalesce(sum(\"seq_tup_read\"), 0)"
		      " FROM pg_stat_xact_user_tables"
		      " WHERE \"relname\" LIKE 'TaskExecutions%'"
		      "    OR \"relname\" LIKE 'TaskQueues%'",
		      0, NULL);
}

/* Autovacuum off for the queue and task tables, so that no analyse makes
 * a connection's plans again while the test grows the tables. */
static void
no_autovacuum(void)
{
	th_exec(conn, "DO $$ DECLARE r record; BEGIN"
		      " FOR r IN SELECT c.\"relname\" FROM pg_class c"
		      "  WHERE c.\"relkind\" = 'r' AND (c.\"relname\" LIKE"
		      "  'TaskExecutions%' OR c.\"relname\" LIKE 'TaskQueues%')"
		      " LOOP EXECUTE format('ALTER TABLE %I SET"
		      "  (autovacuum_enabled = off)', r.\"relname\");"
		      " END LOOP; END $$");
}

/* no_autovacuum, with the tables vacuumed and analysed empty (as a
 * drained queue is). */
static void
no_analyse(void)
{
	no_autovacuum();
	th_exec(conn, "VACUUM ANALYZE \"TaskQueues\", \"TaskExecutions\"");
}

/* A connection as an engine loop's or the HTTP pool's: generic plans,
 * none of them a whole scan where an index serves. */
static struct db *
keyed_connection(void)
{
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, tdb.url,
			  DB_GENERIC_PLANS | DB_KEYED | DB_PREPARE_ALL, &e),
		  "%s", e.msg);
	return db;
}

/* keyed_connection, after no_analyse. */
static struct db *
keyed_connection_on_empty_tables(void)
{
	no_analyse();
	return keyed_connection();
}

/* n more workflows of 8 tasks each, all queued; the first 10 tasks ever
 * queued are HTTP tasks. */
static void
grow_tables_by(int n)
{
	char sql[1024];
	snprintf(sql, sizeof(sql),
		 "INSERT INTO \"TaskExecutions\" (\"workflowId\","
		 " \"namespaceId\", \"refName\", \"taskDefName\", \"taskType\")"
		 " SELECT w.\"id\", (SELECT \"id\" FROM \"Namespaces\""
		 " WHERE \"name\" = 'default'), 't' || k, 'x', 'SIMPLE'"
		 " FROM (SELECT uuidv7() AS \"id\" FROM generate_series(1, %d))"
		 " w, generate_series(1, 8) k",
		 n);
	th_exec(conn, sql);
	th_exec(conn,
		"INSERT INTO \"TaskQueues\" (\"queueName\", \"taskId\","
		" \"workflowId\", \"namespaceId\", \"taskType\")"
		" SELECT CASE WHEN t.\"n\" <= 10 THEN 'default/h'"
		" ELSE 'default/x' END, t.\"id\", t.\"workflowId\","
		" t.\"namespaceId\", CASE WHEN t.\"n\" <= 10 THEN 'HTTP'"
		" ELSE 'SIMPLE' END FROM (SELECT te.*, row_number() OVER"
		" (ORDER BY te.\"id\") AS \"n\" FROM \"TaskExecutions\" te) t"
		" WHERE NOT EXISTS (SELECT FROM \"TaskQueues\" q"
		" WHERE q.\"taskId\" = t.\"id\")");
}

/* 2,000 workflows of 8 tasks each, all queued; the first 10 are HTTP
 * tasks. */
static void
grow_tables(void)
{
	grow_tables_by(2000);
}

/*
 * A decider's connection (generic plans) plans its statements once, on a
 * new replica usually while the database is small, and keeps the plans
 * until an analyse invalidates them.  Made on empty tables and left to the
 * statistics, the decider's load of a large batch's tasks was a scan of
 * every "TaskExecutions" partition, and the system-task lease a scan of
 * every "TaskQueues" partition, at any size the tables grew to.  Here the
 * plans are made on an empty database, the tables then grow and neither
 * statement reads a partition whole.
 */
Test(plans, a_deciders_plans_made_on_an_empty_database_stay_keyed,
     .init = setup_clone, .fini = teardown)
{
	struct db *db = keyed_connection_on_empty_tables();
	struct err e = ERR_INIT;
	/* The plans, made while every table is empty. */
	cr_assert(decide_warm(db, &e), "%s", e.msg);
	char *json = NULL;
	size_t n = 0;
	cr_assert(queue_lease_system(db, "HTTP", "test", 10, 60, &json, &n, &e),
		  "%s", e.msg);
	free(json);
	cr_assert_eq(n, 0);
	grow_tables();

	cr_assert(db_begin(db, &e), "%s", e.msg);
	long long before = whole_scan_rows(db);
	cr_assert(queue_lease_system(db, "HTTP", "test", 10, 60, &json, &n, &e),
		  "%s", e.msg);
	free(json);
	cr_assert_eq(n, 10);
	long long after_lease = whole_scan_rows(db);
	cr_assert_eq(after_lease, before,
		     "the system-task lease scanned %lld rows whole",
		     after_lease - before);

	/* A decider batch of 40 workflows (more than SQL_FEW_KEYS: the
	 * statement that takes the ids as an array). */
	char *ids = th_value(conn,
			     "SELECT array_agg(DISTINCT \"workflowId\")::text"
			     " FROM (SELECT \"workflowId\" FROM"
			     " \"TaskExecutions\" GROUP BY 1 LIMIT 40) s",
			     0, NULL);
	const char *params[] = {ids, "[]"};
	PGresult *r = PQexecPrepared(db->conn, "decide_load_tasks_stmt", 2,
				     params, NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s",
		     PQerrorMessage(db->conn));
	cr_assert_eq(PQntuples(r), 40 * 8);
	PQclear(r);
	free(ids);
	long long after_load = whole_scan_rows(db);
	cr_assert_eq(after_load, after_lease,
		     "the decider's load scanned %lld rows whole",
		     after_load - after_lease);
	db_rollback(db);
	db_close(db);
}

/* Queue rows this connection's transaction has read so far, by whole
 * scans and by index (a bitmap heap scan's rows count as fetched). */
static long long
queue_rows_read(struct db *db)
{
	return th_int(
		db->conn,
		"SELECT coalesce(sum(\"seq_tup_read\" + \"idx_tup_fetch\"), 0)"
		" FROM pg_stat_xact_user_tables"
		" WHERE \"relname\" LIKE 'TaskQueues%'",
		0, NULL);
}

/* A lease of 100 tasks of "default/x" on db, then a batch of their 100
 * results: the lease reads at most lease_max queue rows, the results each
 * row at most three times. */
static void
lease_and_results_read_only_their_rows(struct db *db, long long lease_max)
{
	struct err e = ERR_INIT;
	cr_assert(db_begin(db, &e), "%s", e.msg);
	long long before = queue_rows_read(db);
	char *json = NULL;
	size_t n = 0, passed = 0;
	cr_assert(queue_lease_ungated(db, "default/x", "test", 100, 60, &json,
				      &n, &passed, &e),
		  "%s", e.msg);
	free(json);
	cr_assert_eq(n, 100);
	long long after_lease = queue_rows_read(db);
	cr_assert_leq(after_lease - before, lease_max,
		      "the lease of 100 tasks read %lld queue rows",
		      after_lease - before);

	/* The batch, read on the lease's connection: the leases are not
	 * committed. */
	char *mine = th_value(
		db->conn,
		"SELECT json_agg(json_build_object('n', k - 1, 't', t,"
		" 'w', 'test', 's', 'COMPLETED', 'o', '{}'::json))::text"
		" FROM (SELECT \"taskId\" AS t, row_number() OVER () AS k"
		" FROM \"TaskQueues\" WHERE \"queueName\" = 'default/x'"
		" AND \"leasedBy\" = 'test') s",
		0, NULL);
	long long before_results = queue_rows_read(db);
	enum queue_fate fate[100];
	bool freed = false;
	cr_assert(queue_results(db, "default/x", mine, 100, fate, &freed, NULL,
				NULL, &e),
		  "%s", e.msg);
	free(mine);
	for (int k = 0; k < 100; k++)
		cr_assert_eq(fate[k], QUEUE_FATE_DONE, "item %d", k);
	long long after_results = queue_rows_read(db);
	/* Each task's row locked, then deleted. */
	cr_assert_leq(after_results - before_results, 300,
		      "a batch of 100 results read %lld queue rows",
		      after_results - before_results);
	db_rollback(db);
}

/* db's worker plans made on the tables as they are (queue_warm), then
 * the tables grown and lease_and_results_read_only_their_rows; closes
 * db. */
static void
plans_made_then_grown(struct db *db, long long lease_max)
{
	struct err e = ERR_INIT;
	cr_assert(queue_warm(db, &e), "%s", e.msg);
	grow_tables();
	lease_and_results_read_only_their_rows(db, lease_max);
	db_close(db);
}

/*
 * A worker's lease and a batch of its results find their queue rows by
 * key, whatever the size of the queue their plans were made on.  The
 * HTTP pool's connections plan a worker's statements on a drained queue
 * (queue_warm, and again after an analyse of a drained queue) and keep a
 * generic plan.  Made there, the lease's candidates were a scan and sort
 * of the whole queue (15,996 rows read here; migration 0013), and a batch
 * of results found its rows by scanning the whole queue (16,466 with the
 * keys in the join only, 31,980 without DB_KEYED).  With the keys both in
 * the join and as its inner scan's condition, a lease of 100 and its
 * results each read 5,150 (the keys scanned once for every row); the
 * results now delete by the keys alone.  The lease still reads 5,150 here
 * (queue_lease_stmt says why): a whole-queue plan reads 16,000 a candidate.
 */
Test(plans, a_workers_lease_and_results_read_only_their_queue_rows,
     .init = setup_clone, .fini = teardown)
{
	/* The plans, made on a drained queue. */
	plans_made_then_grown(keyed_connection_on_empty_tables(), 5300);
}

/*
 * The same plans made on a queue no analyse has seen (a new database's
 * first minute, or a pooled connection replanning after another table's
 * vacuum): without statistics on "queueName" the planner takes one queue
 * name for 1/200 of its partition, and a batch of 100 results read the
 * whole queue once for every task (1,007,256 rows here) until migration
 * 0015 gave each partition the statistic of one queue.
 */
Test(plans, plans_made_on_a_queue_never_analysed_stay_keyed,
     .init = setup_clone, .fini = teardown)
{
	no_autovacuum();
	grow_tables_by(375);
	/* The candidates (100) and the rows leased (100). */
	plans_made_then_grown(keyed_connection(), 300);
}

/*
 * The sweeper's connection leaves the plan mode to PostgreSQL, which
 * settles on a generic plan after a few calls: made on an empty queue,
 * the sweep of expired leases was a scan of every "TaskQueues" partition
 * once a second, at any size the queue grew to.
 */
Test(plans, a_sweepers_plans_made_on_an_empty_queue_stay_keyed,
     .init = setup_clone, .fini = teardown)
{
	no_analyse();
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, tdb.url, DB_KEYED | DB_PREPARE_ALL, &e), "%s",
		  e.msg);
	size_t n = 0;
	for (int i = 0; i < 10; i++)
		cr_assert(queue_sweep_expired(db, 500, &n, &e), "%s", e.msg);
	grow_tables();

	cr_assert(db_begin(db, &e), "%s", e.msg);
	long long before = whole_scan_rows(db);
	cr_assert(queue_sweep_expired(db, 500, &n, &e), "%s", e.msg);
	cr_assert_eq(n, 0);
	long long after = whole_scan_rows(db);
	cr_assert_eq(after, before, "the sweep scanned %lld rows whole",
		     after - before);
	db_rollback(db);
	db_close(db);
}

/* A connection as the HTTP pool's: the plan mode left to PostgreSQL. */
static struct db *
pool_connection(void)
{
	struct db *db = NULL;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, tdb.url, DB_KEYED | DB_PREPARE_ALL, &e), "%s",
		  e.msg);
	return db;
}

/* Each of the n prepared statements named was planned for all its runs
 * (at least `runs`) with one generic plan, and never with its values. */
static void
assert_planned_once(struct db *db, const char *const *names, int n, int runs)
{
	for (int k = 0; k < n; k++) {
		const char *p[] = {names[k]};
		long long custom = th_int(
			db->conn,
			"SELECT \"custom_plans\" FROM pg_prepared_statements"
			" WHERE \"name\" = $1",
			1, p);
		long long generic = th_int(
			db->conn,
			"SELECT \"generic_plans\" FROM pg_prepared_statements"
			" WHERE \"name\" = $1",
			1, p);
		cr_assert_eq(custom, 0,
			     "%s was planned with its values %lld times",
			     names[k], custom);
		cr_assert_geq(generic, runs, "%s: %lld", names[k], generic);
	}
}

/* The session's plan_cache_mode on db (malloc'd). */
static char *
plan_mode(struct db *db)
{
	return th_value(db->conn, "SELECT current_setting('plan_cache_mode')",
			0, NULL);
}

/* The custom plans of the prepared statement name on db. */
static long long
custom_plans(struct db *db, const char *name)
{
	const char *p[] = {name};
	return th_int(db->conn,
		      "SELECT \"custom_plans\" FROM pg_prepared_statements"
		      " WHERE \"name\" = $1",
		      1, p);
}

/*
 * A worker's lease and batch of results are written for their generic
 * plans (DB_STMT_GENERIC: they read their queue rows by key on plans made
 * at any table size, the two tests above), and so is the starts'
 * statement, which shares their connections; a pool connection, which
 * leaves the plan mode to PostgreSQL, runs them with those.  Left to
 * choose, pooled connections planned the batch of results with its
 * values on most calls of their first quarter-minute (957 plans in the
 * first 4,000 calls of a 250/s paced run, 5-6 ms each, more than running
 * it).  The statements that follow on the connection get the mode they
 * were written for: one with parameters is planned with its values
 * again, inside a transaction of db_begin as well.
 */
Test(plans, a_pool_connection_plans_leases_results_and_starts_once,
     .init = setup_clone, .fini = teardown)
{
	struct db *db = pool_connection();
	struct err e = ERR_INIT;
	for (int i = 0; i < 12; i++)
		cr_assert(queue_warm(db, &e) && exec_warm(db, &e), "%s", e.msg);
	const char *names[] = {"queue_lease_stmt", "queue_results_stmt"};
	assert_planned_once(db, names, 2, 12);
	/* The starts' statement, run last, kept the session's mode: a pooled
	 * connection serving starts and workers does not switch between
	 * them. */
	char *mode = plan_mode(db);
	cr_assert_str_eq(mode, "force_generic_plan");
	free(mode);

	char id[37];
	cr_assert(defs_namespace_id(db, "default", id, &e), "%s", e.msg);
	cr_assert_eq(custom_plans(db, "defs_namespace_select"), 1,
		     "after the results");

	cr_assert(queue_warm(db, &e), "%s", e.msg);
	cr_assert(db_begin(db, &e), "%s", e.msg);
	cr_assert(defs_namespace_id(db, "default", id, &e), "%s", e.msg);
	cr_assert_eq(custom_plans(db, "defs_namespace_select"), 2,
		     "in a transaction");
	db_rollback(db);
	cr_assert(defs_namespace_id(db, "default", id, &e), "%s", e.msg);
	cr_assert_eq(custom_plans(db, "defs_namespace_select"), 3,
		     "after the transaction");
	mode = plan_mode(db);
	cr_assert_str_eq(mode, "auto");
	free(mode);
	db_close(db);
}

/*
 * A start that decides its workflow's first step runs the decisions'
 * statements on a pool connection, which leaves the plan mode to
 * PostgreSQL.  The write for a few workflows prunes the partitions of
 * "TaskExecutions" by its keys; planned with their values it looks so much
 * cheaper than its generic plan that PostgreSQL planned it afresh on every
 * call: 2,690 plans in 7,923 calls, 10 s of planning against 8 s of
 * running them, in 30 s of starts at 875/s.  Begun with db_begin_generic
 * (as the start's transaction and decide_warm are), the connection plans
 * them once, and its own plan mode is left as it was.
 */
Test(plans, a_pool_connection_plans_the_decisions_once, .init = setup_clone,
     .fini = teardown)
{
	struct db *db = pool_connection();
	struct err e = ERR_INIT;
	for (int i = 0; i < 12; i++)
		cr_assert(decide_warm(db, &e), "%s", e.msg);
	const char *names[] = {"decide_write", "decide_write_few",
			       "decide_load_tasks_few"};
	assert_planned_once(db, names, 3, 12);
	char *mode = plan_mode(db);
	cr_assert_str_eq(mode, "auto");
	free(mode);
	db_close(db);
}
