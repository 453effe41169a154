#include "store/sql.h"

#include "runtime/log.h"
#include "util/mem.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DB_STMT(db_caps_uuidv7, "SELECT uuidv7()::text");
/* DB_GENERIC_PLANS and DB_KEYED (db.h): session settings, set before
 * anything is planned. */
DB_STMT(db_generic_plans,
	"SELECT set_config('plan_cache_mode', 'force_generic_plan', false)");
DB_STMT(db_keyed_plans, "SELECT set_config('enable_seqscan', 'off', false)");

struct db_stmt *const db_stmts[] = {&db_caps_uuidv7, &db_generic_plans,
				    &db_keyed_plans, NULL};

static enum err_code
code_for_sqlstate(const char *s)
{
	if (!s || !*s)
		return ERR_UNAVAILABLE; /* no SQLSTATE: the connection failed */
	if (strcmp(s, "23505") == 0 || strcmp(s, "40001") == 0 ||
	    strcmp(s, "40P01") == 0 || strcmp(s, "55P03") == 0)
		return ERR_CONFLICT;
	if (strncmp(s, "22", 2) == 0 || strncmp(s, "23", 2) == 0)
		return ERR_INVALID;
	if (strncmp(s, "08", 2) == 0 || strncmp(s, "53", 2) == 0 ||
	    strncmp(s, "57", 2) == 0)
		return ERR_UNAVAILABLE;
	return ERR_DB;
}

void
db_error_from_result(const PGresult *res, struct db *db, struct err *e)
{
	const char *state =
		res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *primary =
		res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	if (!primary || !*primary) {
		primary = PQerrorMessage(db->conn);
		if (!primary || !*primary)
			primary = "unknown database error";
	}
	err_set(e, code_for_sqlstate(state), "%s", primary);
	/* libpq's connection messages end in a newline; drop it. */
	size_t n = strlen(e->msg);
	while (n && (e->msg[n - 1] == '\n' || e->msg[n - 1] == ' '))
		e->msg[--n] = '\0';
	if (state)
		snprintf(e->sqlstate, sizeof(e->sqlstate), "%s", state);
}

static bool check_capabilities(struct db *db, struct err *e);
static bool prepare(struct db *db, struct db_stmt *stmt, struct err *e);

/* A NOTICE from the server becomes a log line instead of raw stderr text
 * (which would break --log-format json). */
static void
on_notice(void *arg, const char *message)
{
	(void)arg;
	size_t n = strlen(message);
	while (n && message[n - 1] == '\n')
		n--;
	log_info("db", "%.*s", (int)n, message);
}

static bool
connect_raw(struct db *db, struct err *e)
{
	/* Defaults first: what the URL says overrides them (expand_dbname). */
	static const char *const keys[] = {"connect_timeout",
					   "application_name", "dbname", NULL};
	const char *values[] = {"10", "nodeflow", db->url, NULL};
	db->conn = PQconnectdbParams(keys, values, 1);
	if (PQstatus(db->conn) != CONNECTION_OK) {
		err_set(e, ERR_UNAVAILABLE,
			"could not connect to the database: %s",
			PQerrorMessage(db->conn));
		size_t n = strlen(e->msg);
		while (n && e->msg[n - 1] == '\n')
			e->msg[--n] = '\0';
		PQfinish(db->conn);
		db->conn = NULL;
		return false;
	}
	PQsetNoticeProcessor(db->conn, on_notice, NULL);
	db->server_version = PQserverVersion(db->conn);
	db->session_generic = false;
	memset(db->prepared, 0, db_registry_size());
	return true;
}

static bool
connect_checked(struct db *db, struct err *e)
{
	if (!connect_raw(db, e))
		return false;
	if (!check_capabilities(db, e))
		goto fail;
	if ((db->flags & DB_GENERIC_PLANS) &&
	    !db_run(db, &db_generic_plans, 0, NULL, e))
		goto fail;
	if ((db->flags & DB_KEYED) && !db_run(db, &db_keyed_plans, 0, NULL, e))
		goto fail;
	if ((db->flags & DB_PREPARE_ALL) && !db_prepare_all(db, e))
		goto fail;
	return true;
fail:
	PQfinish(db->conn);
	db->conn = NULL;
	return false;
}

bool
db_open(struct db **out, const char *url, unsigned flags, struct err *e)
{
	db_registry_init();
	struct db *db = xcalloc(1, sizeof(*db));
	db->url = xstrdup(url);
	db->flags = flags;
	db->prepared = xcalloc(db_registry_size() + 1, 1);
	if (!connect_checked(db, e)) {
		db_close(db);
		*out = NULL;
		return false;
	}
	*out = db;
	return true;
}

void
db_close(struct db *db)
{
	if (!db)
		return;
	if (db->conn)
		PQfinish(db->conn);
	free(db->prepared);
	free(db->url);
	free(db);
}

bool
db_healthy(struct db *db)
{
	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK ||
	    PQtransactionStatus(db->conn) != PQTRANS_IDLE)
		return false;
	/*
	 * A connection whose backend went away while it sat idle (server
	 * restart, pg_terminate_backend, idle timeout) still reads
	 * CONNECTION_OK until libpq next does I/O.  An idle connection's
	 * socket is normally not readable: read what the server sent, without
	 * blocking, while it is.  The backend's last words (a FATAL message)
	 * come first, then end of file, which marks the connection bad.
	 */
	struct pollfd pfd = {.fd = PQsocket(db->conn), .events = POLLIN};
	for (int i = 0; i < 4 && poll(&pfd, 1, 0) > 0; i++)
		if (!PQconsumeInput(db->conn))
			return false;
	return PQstatus(db->conn) == CONNECTION_OK;
}

bool
db_reconnect(struct db *db, struct err *e)
{
	if (db->conn) {
		PQfinish(db->conn);
		db->conn = NULL;
	}
	return connect_checked(db, e);
}

int
db_server_version(const struct db *db)
{
	return db->server_version;
}

static bool
check_capabilities(struct db *db, struct err *e)
{
	if (db->server_version < DB_VERSION_REQUIRED) {
		const char *v = PQparameterStatus(db->conn, "server_version");
		err_set(e, ERR_VERSION,
			"PostgreSQL %s found (server_version_num %d); node-flow "
			"requires PostgreSQL 18 or newer (180000)",
			v ? v : "of unknown version", db->server_version);
		return false;
	}
	PGresult *res = db_exec(db, &db_caps_uuidv7, 0, NULL, e);
	if (!res && e->code == ERR_UNAVAILABLE) {
		/* The connection was lost (a restart under way), which says
		 * nothing of the server's version: it is tried again. */
		err_prefix(e, "could not check for uuidv7()");
		return false;
	}
	if (!res) {
		err_prefix(e, "PostgreSQL %d cannot run uuidv7()",
			   db->server_version);
		e->code = ERR_VERSION;
		return false;
	}
	bool ok = PQntuples(res) == 1 && strlen(PQgetvalue(res, 0, 0)) == 36;
	PQclear(res);
	if (!ok) {
		err_set(e, ERR_VERSION, "uuidv7() returned no UUID");
		return false;
	}
	return true;
}

static bool
prepare(struct db *db, struct db_stmt *stmt, struct err *e)
{
	PGresult *res = PQprepare(db->conn, stmt->name, stmt->sql, 0, NULL);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok) {
		db_error_from_result(res, db, e);
		err_prefix(e, "could not prepare statement %s", stmt->name);
	} else {
		db->prepared[stmt->id] = 1;
	}
	PQclear(res);
	return ok;
}

bool
db_prepare_all(struct db *db, struct err *e)
{
	for (size_t i = 0; i < db_registry_size(); i++) {
		struct db_stmt *stmt = db_registry_at(i);
		if (!db->prepared[stmt->id] && !prepare(db, stmt, e))
			return false;
	}
	return true;
}

/*
 * On a connection that leaves the plan mode to PostgreSQL, the session's
 * plan_cache_mode for the statement about to run: force_generic_plan for a
 * DB_STMT_GENERIC one, auto (its default) for any other.  It is switched
 * only when it changes, so a connection that serves one kind of statement
 * switches once, and only between transactions: a transaction keeps the
 * mode it began with (auto with db_begin, force_generic_plan with
 * db_begin_generic, each set for the transaction alone).  The cached plans are
 * kept across a switch; PostgreSQL reads the setting as each statement runs.
 */
static bool
plan_mode_for(struct db *db, const struct db_stmt *stmt, struct err *e)
{
	if ((db->flags & DB_GENERIC_PLANS) ||
	    stmt->generic == db->session_generic ||
	    PQtransactionStatus(db->conn) != PQTRANS_IDLE)
		return true;
	if (!db_exec_script(db,
			    stmt->generic ? "SET \"plan_cache_mode\" ="
					    " 'force_generic_plan'"
					  : "RESET \"plan_cache_mode\"",
			    e))
		return false;
	db->session_generic = stmt->generic;
	return true;
}

PGresult *
db_exec(struct db *db, struct db_stmt *stmt, int nparams,
	const char *const *values, struct err *e)
{
	if (!db->conn) {
		err_set(e, ERR_UNAVAILABLE, "no database connection");
		return NULL;
	}
	if (stmt->id >= db_registry_size() ||
	    db_registry_at(stmt->id) != stmt) {
		/* A statement missing from the registry would share another's
		 * "prepared" flag; it is a programming error, caught loudly. */
		fprintf(stderr, "fatal: statement %s is not in the registry\n",
			stmt->name);
		abort();
	}
	if (!db->prepared[stmt->id] && !prepare(db, stmt, e))
		return NULL;
	if (!plan_mode_for(db, stmt, e))
		return NULL;
	PGresult *res = PQexecPrepared(db->conn, stmt->name, nparams, values,
				       NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return res;
	db_error_from_result(res, db, e);
	PQclear(res);
	return NULL;
}

bool
db_run(struct db *db, struct db_stmt *stmt, int nparams,
       const char *const *values, struct err *e)
{
	PGresult *res = db_exec(db, stmt, nparams, values, e);
	PQclear(res);
	return res != NULL;
}

bool
db_exec_script(struct db *db, const char *sql, struct err *e)
{
	if (!db->conn) {
		err_set(e, ERR_UNAVAILABLE, "no database connection");
		return false;
	}
	PGresult *res = PQexec(db->conn, sql);
	ExecStatusType st = PQresultStatus(res);
	bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ||
		  st == PGRES_EMPTY_QUERY;
	if (!ok)
		db_error_from_result(res, db, e);
	PQclear(res);
	return ok;
}

bool
db_begin(struct db *db, struct err *e)
{
	if ((db->flags & DB_GENERIC_PLANS) || !db->session_generic)
		return db_exec_script(db, "BEGIN", e);
	/* The transaction's statements get the plan mode they were written
	 * for, whatever a DB_STMT_GENERIC one left the session in. */
	return db_exec_script(
		db, "BEGIN; SET LOCAL \"plan_cache_mode\" = 'auto'", e);
}

bool
db_begin_generic(struct db *db, struct err *e)
{
	return db_exec_script(
		db,
		"BEGIN; SET LOCAL \"plan_cache_mode\" = 'force_generic_plan'",
		e);
}

/*
 * After a failed statement PostgreSQL answers COMMIT with ROLLBACK and no
 * error: a caller that let the failure pass (taking a deadlock for "nothing
 * to do", say) would report as done what was never written.  Such a
 * transaction is rolled back here and the commit fails.
 */
bool
db_commit(struct db *db, struct err *e)
{
	if (db->conn && PQtransactionStatus(db->conn) == PQTRANS_INERROR) {
		db_rollback(db);
		err_set(e, ERR_DB,
			"could not commit: a statement of the transaction "
			"failed, and it was rolled back");
		snprintf(e->sqlstate, sizeof(e->sqlstate), "25P02");
		log_error("db", "%s", e->msg);
		return false;
	}
	return db_exec_script(db, "COMMIT", e);
}

void
db_rollback(struct db *db)
{
	if (db->conn && PQtransactionStatus(db->conn) != PQTRANS_IDLE) {
		struct err ignored = ERR_INIT;
		(void)db_exec_script(db, "ROLLBACK", &ignored);
	}
}
