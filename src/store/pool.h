/*
 * pool — a fixed-size pool of connections shared by HTTP handlers.
 *
 * Connections are opened on demand up to the pool's size, or ahead of
 * demand by db_pool_fill.  A connection returned broken, or inside a
 * transaction, is rolled back or closed, and replaced on a later acquire. While
 * the database is unreachable, connect attempts are spaced by an exponential
 * backoff (100 ms doubling to 5 s) and callers in between fail at once with
 * ERR_UNAVAILABLE instead of each waiting on a connect timeout.  When every
 * connection is lent out, at most the pool's queue length of callers wait for
 * one (each up to its timeout); a caller beyond fails at once with
 * ERR_UNAVAILABLE, so an overload is answered quickly instead of piling up
 * blocked threads.
 *
 * Threads: any; the pool has its own lock.  Ownership: an acquired struct
 * db belongs to the caller until released.  Failure: acquire returns NULL
 * with e set (ERR_UNAVAILABLE when the database cannot be reached or no
 * connection frees up before the timeout).
 */
#ifndef NF_STORE_POOL_H
#define NF_STORE_POOL_H

#include "util/err.h"

struct db;

struct db_pool;

struct db_pool *db_pool_create(const char *url, int size, unsigned flags);
void db_pool_destroy(struct db_pool *pool);
struct db *db_pool_acquire(struct db_pool *pool, int timeout_ms, struct err *e);
void db_pool_release(struct db_pool *pool, struct db *db);
/* What db_pool_fill runs on each connection it opened, on that
 * connection's thread, before the pool lends it out (it logs its own
 * failures: the connection is lent out anyway). */
typedef void db_pool_warm_fn(struct db *db);

/* Opens up to n connections, one first and then the others at once, each
 * on a thread of its own, runs warm (may be NULL) on each, and returns
 * when all have connected or failed: how many were opened.  At start-up,
 * so the first requests do not each wait on a new backend.  A failure
 * counts as on acquire (backoff, metric, warning); when the first fails,
 * no other is tried. */
int db_pool_fill(struct db_pool *pool, int n, db_pool_warm_fn *warm);
/* How many callers may wait for a busy pool at once (default: no limit;
 * 0: none waits).  Call before the pool is shared. */
void db_pool_set_queue(struct db_pool *pool, int max_waiters);

#endif
