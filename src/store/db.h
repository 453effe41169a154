/*
 * db — one PostgreSQL connection, and the checks every connection passes
 * before it is used.
 *
 * Opening a connection checks the server: PostgreSQL 18 or newer
 * (server_version_num >= 180000) and a working uuidv7().  A connection opened
 * with DB_PREPARE_ALL also prepares every statement of the registry (see
 * sql.h), so an unquoted identifier or a drifted column stops the server at
 * start-up, and the registry test stops CI before that.
 *
 * Threads: a struct db is used by one thread at a time.  Ownership: the
 * opener owns the connection (db_close).  Failure: functions return false
 * with err set; errors from PostgreSQL carry their SQLSTATE in
 * err->sqlstate.  This header exposes no libpq type: code above the store
 * layer never sees libpq.
 */
#ifndef NF_STORE_DB_H
#define NF_STORE_DB_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct db;

enum { DB_VERSION_REQUIRED = 180000 };

enum db_open_flags {
	DB_PLAIN = 0,
	DB_PREPARE_ALL = 1 << 0, /* prepare the whole registry on connect */
	/* Plan each statement once (plan_cache_mode force_generic_plan), for
	 * a connection that runs the same statements over and over: left to
	 * choose, PostgreSQL can plan a statement over partitioned tables
	 * afresh on every call, at several times the cost of running it. */
	DB_GENERIC_PLANS = 1 << 1,
	/* No whole-table scan where an index serves (enable_seqscan off), for
	 * a connection whose statements reach rows by key or in index order
	 * (an engine loop's, the HTTP pool's).  A cached plan outlives the
	 * table sizes it was made for until an analyse invalidates it, and
	 * the queue tables go from empty to large in seconds: made on an
	 * empty queue, a sweep, a lease or a batch of results was a scan of
	 * every partition at any size. */
	DB_KEYED = 1 << 2,
};

/* Connects and checks the server; on failure *out is NULL. */
bool db_open(struct db **out, const char *url, unsigned flags, struct err *e);
void db_close(struct db *db);
/* Whether the connection is usable and idle (not inside a transaction). */
bool db_healthy(struct db *db);
/* Reconnects (and re-checks) a broken connection. */
bool db_reconnect(struct db *db, struct err *e);
/* server_version_num of the connected server. */
int db_server_version(const struct db *db);

/* Prepares every registered statement; the error names the one that fails. */
bool db_prepare_all(struct db *db, struct err *e);
/* How many statements the registry holds. */
size_t db_registry_size(void);

bool db_begin(struct db *db, struct err *e);
/* Begins a transaction whose statements use their generic plans
 * (plan_cache_mode force_generic_plan until it ends), in one round trip:
 * for statements written for those plans run on a connection left to
 * choose (the pool's), where the planner's estimate prefers planning afresh
 * on every call a statement that prunes partitions by a few parameters
 * (DB_GENERIC_PLANS). */
bool db_begin_generic(struct db *db, struct err *e);
/* Commits; fails (SQLSTATE 25P02, the transaction rolled back) when a
 * statement of the transaction failed, even one whose error the caller
 * let pass. */
bool db_commit(struct db *db, struct err *e);
/* Rolls back if a transaction is open; never fails the caller. */
void db_rollback(struct db *db);

#endif
