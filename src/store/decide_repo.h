/*
 * decide_repo — the decider's side of the database: claiming workflows
 * that need an evaluation, loading what an evaluation reads, and applying
 * what it decided.
 *
 * A batch is one transaction: decide_claim locks up to n "DecideQueues"
 * rows with FOR UPDATE SKIP LOCKED (so replicas share the work and never
 * evaluate one workflow twice at once) and holds them until commit.  A
 * result that arrives for a claimed workflow upserts its "DecideQueues" row
 * and so waits for that commit, then enqueues a fresh evaluation: it is
 * never lost.  The decisions of a batch are written together, one
 * statement for all of them (decide_apply_batch); the decide loop redoes a
 * batch that failed with one savepoint per workflow (decide_loop.h).
 *
 * What an evaluation loads is bounded by in-flight work, not by history:
 * the execution, its frontier (non-terminal tasks, the partial frontier
 * index; an open task queued for a worker comes without input and output
 * unless its reference is one the expressions read), its unprocessed tasks
 * (terminal, not yet reacted to: the partial unprocessed index), and the latest
 * attempt of each task reference the definition's expressions read (the
 * identity index).
 *
 * Threads: one connection per decider thread.  Ownership: loaded rows are
 * the caller's (decide_batch_free).  Failure: false with e set; the caller
 * rolls back the batch.
 */
#ifndef NF_STORE_DECIDE_REPO_H
#define NF_STORE_DECIDE_REPO_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct db;

struct loaded_task {
	char id[37];
	char workflow_id[37];
	char *ref;
	char *task_def_name;
	char *task_type;
	int iteration;
	int attempt;
	char *status;
	json_t *input;
	json_t *output;
	char *reason;
	bool seen;          /* "deciderSeenAt" is set */
	bool terminal;      /* "endedAt" is set */
	char *scheduled_at; /* text */
	char *ended_at;
	char *fork_ref; /* "forkRef": the dynamic fork that spawned it */
};

struct loaded_execution {
	char id[37];
	char ns_id[37];
	char *ns_name;
	char *status;
	int64_t version;
	char *def_name;
	int def_version;
	json_t *definition; /* snapshot, or NULL */
	json_t *input;
	json_t *variables;
	char *correlation_id;
	int priority;
	char *started_at;
	char parent_id[37];        /* "parentWorkflowId", or "" */
	struct loaded_task *tasks; /* see decide_load_tasks */
	size_t n_tasks;
};

struct decide_batch {
	struct loaded_execution *items;
	size_t n;
};

/* Waits for the deciders' turn, any replica's, and holds it until the
 * caller's transaction ends (a transaction-scoped advisory lock): deciders
 * that each claim a short queue, one after another, claim what came in
 * the meantime together, instead of splitting it into small batches.
 * Waits wait_ms at most: then fails with ERR_CONFLICT (SQLSTATE 55P03)
 * and the transaction is lost. */
bool decide_take_turn(struct db *db, int wait_ms, struct err *e);

/* Claims up to limit workflows due for evaluation and loads their
 * executions.  Must run inside the caller's transaction. */
bool decide_claim(struct db *db, int limit, struct decide_batch *out,
		  struct err *e);

/* Loads the executions of ids (a uuid[] literal of n ids) whose
 * "DecideQueues" rows the caller's transaction holds (a claim, or a
 * result's upsert), as decide_claim does; forgets the queue row of an
 * execution that is gone. */
bool decide_load(struct db *db, const char *ids, size_t n,
		 struct decide_batch *out, struct err *e);

/* Loads each execution's frontier, unprocessed tasks and the latest attempt
 * of the references in refs[i] (a JSON array of names per execution). */
bool decide_load_tasks(struct db *db, struct decide_batch *b,
		       json_t *const *refs, struct err *e);

void decide_batch_free(struct decide_batch *b);

bool decide_savepoint(struct db *db, struct err *e);
bool decide_release_savepoint(struct db *db, struct err *e);
void decide_rollback_savepoint(struct db *db);

/* What one evaluation writes.  All members are JSON arrays (possibly
 * empty) except `update`. */
struct decide_rows {
	/* The execution's new state: {"status", "output", "reason",
	 * "failedRef", "variables"}, absent members unchanged; NULL when only
	 * tasks change. */
	const json_t *update;
	/*
	 * Rows for "TaskExecutions": {id, refName, taskDefName, taskType,
	 * iteration, attempt, input, queueName, delaySeconds, forkRef}, plus
	 * for tasks the decider runs itself (no queueName, no "TaskQueues"
	 * row) {status, output, reason, seen, joinFork}:
	 *   - no "status": the row is SCHEDULED; with a queueName it also
	 *     gets its "TaskQueues" row (leasable after delaySeconds);
	 *   - "status" IN_PROGRESS: written started (startedAt now);
	 *   - a terminal "status": written started and ended now, with
	 *     "output" and "reason" (reasonForIncompletion); "seen": true
	 *     also sets deciderSeenAt (the decider already reacted to it in
	 *     the evaluation that wrote it).  A terminal row written unseen
	 *     keeps the workflow queued: the next evaluation reacts to it;
	 *   - "cacheKey", "cacheTtlSeconds": a queued task with cacheConfig
	 *     (its result fills "TaskOutputCache", queue_repo.h);
	 *   - "joinFork": the output is built here, not sent: an object of
	 *     refName -> output of the latest attempt of every task whose
	 *     forkRef is joinFork, in the row's iteration (a dynamic join);
	 *   - a row whose identity (workflowId, refName, iteration, attempt)
	 *     exists is a no-op, unless it carries a status and the existing
	 *     row is open (an operator that waited — a JOIN, a DO_WHILE —
	 *     records progress or finishes: status, input, output, reason and
	 *     deciderSeenAt are replaced; an absent input or output is left
	 *     as it was), or it turns a FAILED, TIMED_OUT or
	 *     FAILED_WITH_TERMINAL_ERROR attempt into COMPLETED_WITH_ERRORS
	 *     (an optional task).
	 */
	const json_t *tasks;
	const json_t *seen;   /* ids of the terminal tasks reacted to */
	const json_t *cancel; /* ids of open tasks to cancel (and dequeue) */
	const json_t *events; /* {type, taskId, data}, numbered here */
};

/* One evaluation's decision, and (set by decide_apply_batch) whether it
 * was applied. */
struct decide_item {
	const struct loaded_execution *x;
	struct decide_rows rows;
	bool applied;
};

/*
 * Applies the decisions of items[0..n) in one statement, each guarded by
 * the version its evaluation read: an item's `applied` is false (and
 * nothing of it is written) when its execution changed since.  Removes the
 * "DecideQueues" row of each applied workflow, and that of each workflow
 * in `dequeue` (a JSON array of ids whose evaluation changed nothing).
 * The executions' row locks are taken first, in the order of items
 * (decide_lock_executions), unless lock is false: executions created in
 * this transaction, which no other transaction can see.  Rows whose
 * output is built from other rows ("joinFork") take a second statement,
 * for the items that have any.  Large payloads are offloaded first
 * (payload_repo.h).  Fails whole: the caller rolls back.
 */
/* Plans the statements of a batch (claim aside), their generic plans, and
 * loads the catalog entries they use, every partition's, by running them on
 * input that matches no row, in a transaction rolled back: the
 * connection's first batch then costs what the others cost (planned cold,
 * it took most of a second).  Every caller runs them with generic plans:
 * the deciders' connections are DB_GENERIC_PLANS, a start's transaction
 * on the pool begins with db_begin_generic. */
bool decide_warm(struct db *db, struct err *e);
bool decide_apply_batch(struct db *db, struct decide_item *items, size_t n,
			const json_t *dequeue, bool lock, struct err *e);

/* decide_apply_batch of one decision. */
bool decide_apply(struct db *db, const struct loaded_execution *x,
		  const struct decide_rows *rows, bool *applied, struct err *e);

/* Done with the workflow without any change: forget its queue row. */
bool decide_dequeue(struct db *db, const char *workflow_id, struct err *e);

/* Evaluation failed: leave it queued, due again after delay_ms. */
bool decide_postpone(struct db *db, const char *workflow_id, int delay_ms,
		     const char *reason, struct err *e);

/* Retries of task_def scheduled in the last 60 s, counted up to cap (the
 * retry-budget check, on "TaskExecutions_recent_by_def_idx"). */
bool decide_recent_retries(struct db *db, const char *ns_id,
			   const char *task_def, int cap, int *count,
			   struct err *e);

#endif
