/*
 * sql — how the store layer runs SQL: the statement registry and execution
 * with $n parameters.  Only store/ includes this header (and so libpq).
 *
 * Every SQL statement of the server is a `struct db_stmt` declared with
 * DB_STMT() directly above the repository function that runs it, and listed
 * in that module's NULL-terminated `<module>_stmts[]` array, which
 * registry.c collects.  A statement is prepared on a connection the first
 * time it runs there (or at connect with DB_PREPARE_ALL).  Values are always
 * bound as $n text parameters, never spliced into the text.
 *
 * Threads: as db.h.  Ownership: results returned by db_exec() are the
 * caller's (PQclear); the statements are static.  Failure: NULL/false with
 * e set, SQLSTATE in e->sqlstate.
 */
#ifndef NF_STORE_SQL_H
#define NF_STORE_SQL_H

#include "store/db.h"

#include <libpq-fe.h>

struct db_stmt {
	const char *name; /* prepared-statement name; unique in the registry */
	const char *sql;
	unsigned id;  /* index in the registry, set by db_registry_init() */
	bool generic; /* written for its generic plan: DB_STMT_GENERIC */
};

/* Declares a registered statement named after its variable. */
#define DB_STMT(var, text) static struct db_stmt var = {#var, text, 0, false}
/*
 * The same, for a statement written for its generic plan, which it then
 * gets on every connection: db_exec runs it with plan_cache_mode
 * force_generic_plan where the connection leaves the plan mode to
 * PostgreSQL (no DB_GENERIC_PLANS).  Left to choose, PostgreSQL planned a
 * worker's batch of results with its values on most calls of a pooled
 * connection's first quarter-minute (5-6 ms a plan over the partitions,
 * more than running it).
 */
#define DB_STMT_GENERIC(var, text) \
	static struct db_stmt var = {#var, text, 0, true}

struct db {
	PGconn *conn;
	char *url;
	unsigned flags;
	unsigned char *prepared; /* per registry statement: prepared here */
	int server_version;      /* server_version_num */
	/* plan_cache_mode is force_generic_plan for the session, set by
	 * db_exec for a DB_STMT_GENERIC statement (without DB_GENERIC_PLANS;
	 * with it the session is generic from the start). */
	bool session_generic;
};

/* Collects every module's statements (idempotent; db_open calls it). */
void db_registry_init(void);
struct db_stmt *db_registry_at(size_t i);

/*
 * Runs a registered statement with text parameters (NULL entries are SQL
 * NULL).  Returns the result, or NULL with e set.
 */
PGresult *db_exec(struct db *db, struct db_stmt *stmt, int nparams,
		  const char *const *values, struct err *e);
/* Like db_exec for statements whose result is not needed. */
bool db_run(struct db *db, struct db_stmt *stmt, int nparams,
	    const char *const *values, struct err *e);
/* Runs constant SQL text through the simple-query protocol (transaction
 * control, migration files).  Never pass text built from values. */
bool db_exec_script(struct db *db, const char *sql, struct err *e);

/* Fills e from a failed result (message, SQLSTATE, mapped code). */
void db_error_from_result(const PGresult *res, struct db *db, struct err *e);

#endif
