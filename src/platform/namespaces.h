/*
 * namespaces — namespace names to ids, with an in-process cache.
 *
 * Every native API path names its namespace; resolving it on each request
 * would add a round trip to every poll and completion.  Namespaces are never
 * renamed and ids never reused, so a cached id stays right; a miss goes to
 * the database.
 *
 * Threads: any; the cache has its own lock.  Failure: false with e set,
 * ERR_NOT_FOUND for a namespace that does not exist.
 */
#ifndef NF_PLATFORM_NAMESPACES_H
#define NF_PLATFORM_NAMESPACES_H

#include "util/err.h"

#include <stdbool.h>

struct db;

bool namespaces_id(struct db *db, const char *name, char id_out[37],
		   struct err *e);
/* Creates the namespace if it does not exist. */
bool namespaces_ensure(struct db *db, const char *name, bool *created,
		       char id_out[37], struct err *e);
/* Whether name is acceptable: 1 to 63 of [A-Za-z0-9_.-]. */
bool namespaces_name_valid(const char *name);

#endif
