/*
 * migrate — the schema migrations compiled into the binary, and the runner.
 *
 * migrations/NNNN_name.up.sql and .down.sql are embedded at build time and
 * listed, in order, in one array (migrations/meson.build gives the order).
 * That array is both what the runner applies and what readiness compares
 * with the database's "SchemaMigrations" table, in both directions:
 * `pending` lists migrations the binary knows and the database lacks;
 * `unknown` lists migrations the database has and the binary does not (a
 * database ahead of the binary, e.g. a replica left running through a
 * rollback).  Both are lists, never counts: two counts cannot tell a
 * database that is behind from one that is ahead.
 *
 * Each migration runs in its own transaction together with its bookkeeping
 * row, so a failure part-way leaves nothing behind.  Runners on several
 * replicas serialise on an advisory lock.
 *
 * Threads: a migration run uses one connection on one thread.  Ownership:
 * struct migrate_status owns its lists (migrate_status_free).  Failure:
 * false with e naming the migration and the database's message.
 */
#ifndef NF_STORE_MIGRATE_H
#define NF_STORE_MIGRATE_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct db;

struct migration {
	const char *name; /* "0002_engine" */
	const char *up;
	const char *down;
};

/* Generated from migrations/ at build time. */
extern const struct migration migrations_embedded[];
extern const size_t migrations_embedded_count;

struct migrate_status {
	char **applied; /* in the database, oldest first */
	size_t n_applied;
	char **pending; /* known here, not applied, in the binary's order */
	size_t n_pending;
	char **unknown; /* applied, not known to this binary */
	size_t n_unknown;
};

bool migrate_status(struct db *db, struct migrate_status *st, struct err *e);
void migrate_status_free(struct migrate_status *st);

/* Called after each migration is committed. */
typedef void migrate_progress_fn(const char *name, const char *direction,
				 void *arg);

/* Applies every pending migration in order.  Refuses (ERR_CONFLICT) when the
 * database holds unknown migrations. */
bool migrate_up(struct db *db, migrate_progress_fn *progress, void *arg,
		struct err *e);
/* Reverts the `steps` most recently applied migrations, newest first. */
bool migrate_down(struct db *db, int steps, migrate_progress_fn *progress,
		  void *arg, struct err *e);

#endif
