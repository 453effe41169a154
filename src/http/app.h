/*
 * app — what every HTTP handler may reach: the configuration and the
 * database pool.  Built by the composition root (server/main.c) and passed
 * to the handlers as req->app.
 *
 * Threads: read-only after start-up; the pool is thread-safe.
 */
#ifndef NF_HTTP_APP_H
#define NF_HTTP_APP_H

#include "runtime/config.h"

#include <stdint.h>

struct db_pool;
struct sse_hub;

struct app {
	const struct config *cfg;
	struct db_pool *pool;
	int64_t started_at;  /* wall-clock seconds */
	struct sse_hub *sse; /* the event streams (NULL: none served) */
};

#endif
