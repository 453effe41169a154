/*
 * defcheck — the checks of definitions that need the database beyond the
 * parser's (engine/dsl.h): a task the server runs itself (HTTP, INLINE,
 * an operator…) is never leased through the flow-control gate, so the
 * registered task definition of its name must not have a semaphore, a
 * concurrentExecLimit or a rate limit (rateLimitPerFrequency).  A workflow
 * definition using such a name is refused at the task's "name"; a task
 * definition with such a setting that a registered workflow already uses
 * that way is refused at the setting ("$.semaphore",
 * "$.concurrentExecLimit", "$.rateLimitPerFrequency").
 *
 * Threads: any (the caller's connection).  Failure: false with e set when
 * the database fails; problems found are added to errs.
 */
#ifndef NF_ENGINE_DEFCHECK_H
#define NF_ENGINE_DEFCHECK_H

#include "engine/dsl.h"
#include "util/err.h"

#include <stdbool.h>

struct db;

/* Adds an error for each task of def the server runs itself whose
 * registered task definition has flow control. */
bool defcheck_workflow(struct db *db, const char *ns_id,
		       const struct wf_def *def, struct dsl_errors *errs,
		       struct err *e);

/* When d has flow control, adds an error at base + ".semaphore",
 * ".concurrentExecLimit" and ".rateLimitPerFrequency" (each it has) if a
 * registered workflow definition of the namespace runs a task of d's name
 * itself (naming the first such workflow, version and task). */
bool defcheck_task_def(struct db *db, const char *ns_id,
		       const struct task_def *d, const char *base,
		       struct dsl_errors *errs, struct err *e);

#endif
