/*
 * decide_batch — evaluating loaded workflows and writing what was decided,
 * inside the caller's transaction: the part of a decider batch between its
 * claim and its commit, shared by the decide loop (decide_loop.h), by a
 * start that decides its workflow's first step itself (start_group.h) and
 * by workers' results that decide what follows them (workers.h).
 *
 * decide_batch_run evaluates every workflow of a batch with the pure
 * decider (decider.h), writes every decision in one statement
 * (decide_apply_batch), then carries out what follows each applied one
 * (deadlines, sub-workflows, waits and events, its ending) in the batch's
 * order, without savepoints.  Anything failing asks for the batch to be done
 * again, each workflow apart: decide_batch_one is one evaluation under its
 * own savepoint, postponed when it fails.  Retries are checked against a
 * budget per task definition (retries scheduled in the last minute): over
 * it, a retry waits at least a minute.
 *
 * What the run enqueued is gathered in `queues` (queue_signal.h): the
 * caller raises it for other replicas inside the transaction
 * (queue_signal_send) and hands it to this process after its commit
 * (decide_run_signal), which also wakes this process's system-task runners
 * when the run queued a system task.
 *
 * Threads: a run is one thread's, on that thread's connection.  Ownership:
 * the run owns `queues` and `touched` (decide_run_free); the batch and the
 * definitions are borrowed.  Failure: as each function says; the caller
 * rolls back what a failed run wrote.
 */
#ifndef NF_ENGINE_DECIDE_BATCH_H
#define NF_ENGINE_DECIDE_BATCH_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>

struct db;
struct decide_batch;
struct loaded_execution;
struct metric;
struct wf_def;

struct decide_run {
	struct db *db;
	int retry_budget_per_minute;
	/* The executions were created in this transaction: nobody else sees
	 * their rows, so the write need not lock them first. */
	bool own_rows;
	struct metric *m_failures; /* evaluations postponed (may be NULL) */
	json_t *queues;            /* queue name -> tasks enqueued */
	json_t *touched;           /* executions an ending changed */
	bool system_enqueued;      /* a system task was queued */
	bool left_queued;          /* a workflow stays queued, due now */
	long long decisions;       /* evaluations applied */
};

enum decide_result {
	DECIDE_OK,   /* applied, skipped, or (one apart) postponed */
	DECIDE_REDO, /* (a whole batch) something failed: do it again apart */
	DECIDE_LOST, /* the transaction is lost (a savepoint failed) */
};

void decide_run_init(struct decide_run *r, struct db *db,
		     int retry_budget_per_minute);
/* Forgets what the run gathered (its transaction was rolled back). */
void decide_run_reset(struct decide_run *r);
void decide_run_free(struct decide_run *r);

/* Evaluates and writes every workflow of b, wfs[i] being the definition of
 * b->items[i] (NULL: unavailable, which fails the run).  DECIDE_OK, or
 * DECIDE_REDO with e set (naming the workflow that failed, when one did):
 * the transaction must be rolled back. */
enum decide_result decide_batch_run(struct decide_run *r,
				    const struct decide_batch *b,
				    const struct wf_def *const *wfs,
				    struct err *e);

/* Evaluates and writes one workflow under its own savepoint: one that fails
 * is rolled back to it and postponed.  DECIDE_OK, or DECIDE_LOST with e
 * set. */
enum decide_result decide_batch_one(struct decide_run *r,
				    const struct loaded_execution *x,
				    const struct wf_def *wf, struct err *e);

/*
 * Decides the workflows of b, which the caller's transaction has claimed
 * (decide_claim) or holds the "DecideQueues" rows of (decide_load): sorts
 * them by id (every batch then takes its executions' row locks in one
 * order), looks their definitions up, loads their tasks, and runs
 * decide_batch_run, or, guarded, decide_batch_one on each.  DECIDE_LOST
 * also when the tasks could not be loaded.
 */
enum decide_result decide_batch_decide(struct decide_run *r,
				       struct decide_batch *b, bool guarded,
				       struct err *e);

/* decide_batch_decide, unguarded, of the n workflows of ids (a uuid[]
 * literal) whose "DecideQueues" rows the caller's transaction holds (a
 * result's upsert, queue_repo.h), loaded first (decide_load). */
enum decide_result decide_batch_held(struct decide_run *r, const char *ids,
				     size_t n, struct err *e);

/* After the run's commit: this process's parked polls of the queues it
 * filled, and its system-task runners when it queued a system task. */
void decide_run_signal(const struct decide_run *r);

#endif
