/*
 * health — readiness: can this process serve?  Ready means the database is
 * reachable, it is PostgreSQL 18 with uuidv7() (checked by every new
 * connection), and its migrations are exactly the binary's: none pending and
 * none unknown.
 *
 * Threads: any; uses the shared pool.  Ownership: a readiness owns its
 * lists (health_readiness_free).  Failure: never fails; what went wrong is
 * the content of the report.
 */
#ifndef NF_PLATFORM_HEALTH_H
#define NF_PLATFORM_HEALTH_H

#include "store/migrate.h"
#include "util/err.h"

#include <stdbool.h>

struct db_pool;

struct readiness {
	bool ready;
	bool database_ok;    /* reachable and capable */
	struct err db_error; /* why not, when !database_ok */
	struct migrate_status migrations;
};

void health_readiness(struct db_pool *pool, struct readiness *out);
void health_readiness_free(struct readiness *r);

#endif
