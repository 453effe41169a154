#include "platform/health.h"

#include "store/pool.h"

#include <string.h>

enum { ACQUIRE_TIMEOUT_MS = 2000 };

void
health_readiness(struct db_pool *pool, struct readiness *out)
{
	memset(out, 0, sizeof(*out));
	struct db *db =
		db_pool_acquire(pool, ACQUIRE_TIMEOUT_MS, &out->db_error);
	if (!db)
		return;
	out->database_ok = migrate_status(db, &out->migrations, &out->db_error);
	db_pool_release(pool, db);
	out->ready = out->database_ok && out->migrations.n_pending == 0 &&
		     out->migrations.n_unknown == 0;
}

void
health_readiness_free(struct readiness *r)
{
	migrate_status_free(&r->migrations);
}
