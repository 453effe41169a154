/*
 * decide_loop — the decider engine loop: claims workflows due for
 * evaluation in batches, loads them, runs the decider (decider.h) and
 * applies the decisions, one batch per transaction: every decision of a
 * batch is written by one statement (decide_repo.h), then what follows each
 * (deadlines, sub-workflows, endings) in the batch's order.
 *
 * A decision that fails to apply (the database refused it) does not undo
 * its batch: the batch, which takes no savepoints while nothing fails, is
 * rolled back and done again at once with one savepoint (and one write
 * statement) per workflow; the
 * failed evaluation is rolled back to its savepoint and postponed by a few
 * seconds, so one broken workflow neither undoes its batch nor spins.  A
 * decision whose version guard fails (an operator changed the workflow
 * meanwhile) is simply evaluated again.  Retries are checked against a
 * budget per task definition (retries scheduled in the last minute): over
 * it, a retry waits at least a minute, so a failing dependency cannot start
 * a retry storm.
 *
 * New work wakes one loop: a steady load is decided in the batches one
 * loop gathers while it works, and a large batch (or a full one) brings in
 * a resting loop to share a backlog.  Across replicas, a loop whose last
 * batch was short claims in turn (decide_repo.h, decide_take_turn), so
 * the replicas' loops do not split a short queue into small batches.  A
 * loop's connection uses generic plans and plans its statements when it
 * connects (decide_warm).
 *
 * Threads: each loop has its own thread and connection; decide_loop_wake
 * may be called from any thread.  Failure: a batch that fails is rolled
 * back whole and retried after the loop skeleton's backoff.
 */
#ifndef NF_ENGINE_DECIDE_LOOP_H
#define NF_ENGINE_DECIDE_LOOP_H

#include "runtime/config.h"
#include "runtime/loop.h"

#include <jansson.h>

struct decide_loop_opts {
	const char *database_url;
	int batch_size;
	int interval_ms; /* the idle look's period */
	int retry_budget_per_minute;
};

/* Starts one decide loop; it is stopped by decide_loops_stop. */
void decide_loop_start(const struct decide_loop_opts *o);
/* Stops every decide loop of this process and waits for them. */
void decide_loops_stop(void);
/* New work was enqueued: wakes one decide loop of this process, or, when
 * one is working, has it claim again as soon as its batch is done.  In a
 * process that runs none, raises the decide signal (decide_signal.h) for
 * the other replicas'. */
void decide_loop_wake(void);

#endif
