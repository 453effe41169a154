/*
 * defcache — parsed definitions, cached in-process.
 *
 * Starting a workflow and evaluating one both need its parsed definition,
 * and a worker's poll needs its task definition (the lease lasts its
 * responseTimeoutSeconds).  Parsing a definition costs far more than
 * using it, so each process keeps them:
 *   - a workflow version, once registered, does not change (except through
 *     an explicit overwrite): cached for 30 s after its last load;
 *   - "the latest version of a name" changes when a version is added:
 *     cached for 1 s;
 *   - task definitions can be replaced at any time: cached for 5 s.
 * Changes made through this process invalidate its entries at once; other
 * replicas see them within those times.
 *
 * Entries are reference-counted: a definition handed out stays valid until
 * released, even if it is replaced meanwhile.
 *
 * Threads: any; the cache has its own lock.  Ownership: release every
 * definition acquired.  Failure: NULL with e set (ERR_NOT_FOUND, or the
 * database's error).
 */
#ifndef NF_ENGINE_DEFCACHE_H
#define NF_ENGINE_DEFCACHE_H

#include "engine/dsl.h"
#include "util/err.h"

struct db;
struct defcache_entry;

/* A definition lent out by the cache; give it back with defcache_release. */
struct def_ref {
	const struct wf_def *wf;     /* for a workflow definition */
	const struct task_def *task; /* for a task definition */
	struct defcache_entry *entry;
};

/* version 0: the latest. */
bool defcache_workflow(struct db *db, const char *ns_id, const char *name,
		       int version, struct def_ref *out, struct err *e);
/* ERR_NOT_FOUND when there is no such task definition. */
bool defcache_task(struct db *db, const char *ns_id, const char *name,
		   struct def_ref *out, struct err *e);
/* A definition carried by an execution itself (an inline sub-workflow's
 * snapshot): parsed, lent like the others, never cached.  ERR_INTERNAL
 * when it does not parse. */
bool defcache_snapshot(const json_t *doc, struct def_ref *out, struct err *e);
/* Gives a reference back; a zeroed def_ref is accepted and ignored. */
void defcache_release(struct def_ref *ref);

/* Forget what this process knows of a name (after a change through it). */
void defcache_invalidate_workflow(const char *ns_id, const char *name);
void defcache_invalidate_task(const char *ns_id, const char *name);

#endif
