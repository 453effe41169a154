/*
 * start_group — the group commit of workflow starts.
 *
 * A start is one statement and one commit for a few rows (store's
 * exec_start_many), and the statement's planning, execution and commit
 * cost PostgreSQL more than the rows do.  So starts that arrive while
 * others are being written wait, then are written together, in the same
 * statement, by one of them: a caller that finds fewer groups being
 * written than start_group_init's `writers` (1 by default) leads, takes
 * every start waiting (at most START_GROUP_MAX), writes them on its own
 * connection and answers each.  With no concurrency a start is written
 * alone at once; under load the groups grow with the callers waiting,
 * and the cost per start falls as the load rises.  A leader that takes
 * over right after a write (starts arriving back to back), or beside
 * another group's write, first waits half a millisecond for the starts
 * on their way.
 *
 * A start that brings its definition (struct start_first) and found no
 * other group being gathered or written (so is written alone) has its
 * first step decided in the same transaction (decide_batch.h), so its
 * first tasks are queued at its commit without a decider's transaction of
 * their own; with START_DECIDE_GROUPS, so have the starts of every group
 * but those of a burst (groups that average `burst_group_size` starts or
 * more, until the average falls to two fifths of it).  Starts that waited
 * (a load that queues starts), a start whose decisions fail (written
 * again without them), and every start with START_DECIDE_NEVER are left
 * to the deciders.
 *
 * Threads: any; a caller blocks until its start is written, as it would on
 * its own statement.  Ownership: s is borrowed until the call returns.
 * Failure: false with e set.  When a group's statement fails, each of its
 * starts is written again alone by its own caller, so one refused start
 * (or one broken connection) fails only its own request.
 */
#ifndef NF_ENGINE_START_GROUP_H
#define NF_ENGINE_START_GROUP_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>

struct db;
struct exec_start;
struct wf_def;

enum { START_GROUP_MAX = 64 };

/* Which starts decide their workflows' first steps (--start-decides). */
enum start_decide {
	START_DECIDE_NEVER = 0,  /* the deciders decide every first step */
	START_DECIDE_ALONE = 1,  /* a start that waited for no other */
	START_DECIDE_GROUPS = 2, /* every group, but a burst's */
};

/* What deciding a start's first step reads besides the start: the
 * workflow's definition, and its input (inputTemplate applied) and
 * variables as JSON.  Borrowed until start_group_write returns. */
struct start_first {
	const struct wf_def *wf;
	const json_t *input;
	const json_t *variables;
};

/* Registers the group's metrics (the first write does it otherwise) and
 * says which starts decide their first step (START_DECIDE_ALONE by
 * default), how many groups may be written at once (at least one; one
 * otherwise), the average group size that makes a burst (0: none; 10
 * otherwise) and the retry budget their evaluations keep to
 * (decide_loop_opts'). */
void start_group_init(enum start_decide decide_first, int writers_at_once,
		      int burst_group_size, int retry_budget_per_minute);

/* Writes s (store's exec_start contract: *created false and id_out the
 * owner's id when its idempotency key was taken) using db, the caller's
 * connection, for whatever it writes itself.  With first, the first step
 * may be decided with it: *decided says whether it was (if not, the
 * caller wakes the deciders). */
bool start_group_write(struct db *db, const struct exec_start *s,
		       const struct start_first *first, char id_out[37],
		       bool *created, bool *decided, struct err *e);

#endif
