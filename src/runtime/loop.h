/*
 * loop — the one skeleton every background engine loop runs on.
 *
 * A loop is a thread that calls its tick again and again.  Each tick gets a
 * scratch arena that is reset afterwards, and reports what it found:
 *   LOOP_BUSY   more work is waiting: tick again at once;
 *   LOOP_IDLE   nothing to do: sleep `interval_ms` (or until loop_wake());
 *   LOOP_ERROR  the tick failed: its err is logged as one line and the loop
 *               backs off, from 1 s doubling up to `max_backoff_ms`, so a
 *               failing database is never hammered by a hot loop.
 * A tick owns whatever resources it needs (its own database connection,
 * reconnected on its next tick after an error).
 *
 * Threads: loop_start/loop_stop from the thread that owns the loop;
 * loop_wake from any thread.  Ownership: loop_stop joins the thread and frees
 * the loop; ctx stays the caller's.  Failure: thread creation failure aborts.
 */
#ifndef NF_RUNTIME_LOOP_H
#define NF_RUNTIME_LOOP_H

#include "util/arena.h"
#include "util/err.h"

#include <stdbool.h>

enum loop_result { LOOP_IDLE, LOOP_BUSY, LOOP_ERROR };

struct loop_def {
	const char *name;
	enum loop_result (*tick)(void *ctx, struct arena *scratch,
				 struct err *e);
	/* Called once on the loop's thread after its last tick (may be NULL).
	 */
	void (*finish)(void *ctx);
	int interval_ms;
	int max_backoff_ms;
};

struct loop;

struct loop *loop_start(const struct loop_def *def, void *ctx);
/* Cuts the current idle sleep short. */
void loop_wake(struct loop *l);
/* Asks the loop to stop after its current tick, and waits for it. */
void loop_stop(struct loop *l);

#endif
