/*
 * decider — what happens next in a workflow: a pure function from what an
 * evaluation loaded (the definition, the execution, its frontier, its
 * unprocessed tasks and the latest attempts its expressions read) to the
 * rows to write.  It performs no I/O; the decide loop (decide_loop.h) loads
 * and applies.  Running it twice on the same state decides the same thing,
 * and the store's identity index makes a repeated write of a task a no-op.
 *
 * Each task type is a row of the task-kind table (task_kind.h); this file
 * reacts to a finished task by the kind's rules: a worker task that
 * completed advances the workflow to the next task of its list; one that
 * failed is retried as a new attempt (attempt + 1, the failed one stays)
 * while its retry count allows, after the delay its retry logic gives, and
 * otherwise fails the workflow; FAILED_WITH_TERMINAL_ERROR is never retried.
 * An attempt timed out under timeoutPolicy TIME_OUT_WF (its reason starts
 * with TIMEOUT_WF_REASON_PREFIX) times the workflow out instead.
 * Scheduling a worker task whose definition has pollTimeoutSeconds or
 * timeoutSeconds also arms its deadlines (decision.timers); reacting to it
 * once it finished cancels them (decision.disarm), and the end of a
 * workflow cancels all of its own (decision.disarm_all).
 * The end of the top-level list completes the workflow, with the output its
 * outputParameters give (or the last task's output).
 *
 * Operators (task kinds whose exec is TASK_EXEC_INLINE, operators.h) are
 * run by the decider itself: their rows in decision.tasks carry "status"
 * (a terminal one, or IN_PROGRESS for one that waits), "output" and
 * "reason", and no queueName (no "TaskQueues" row; decide_repo.h gives
 * the row contract).  An evaluation chains: a task finished inline is
 * reacted to in the same evaluation (its row then carries "seen": true),
 * so SWITCH → SET_VARIABLE → NOOP → … runs without another round trip.
 * The evaluation reasons over the loaded tasks followed by the rows it
 * wrote.  An operator that waited (JOIN, DO_WHILE) is finished by a row
 * with its identity and a new status.  After DECIDER_MAX_INLINE_STEPS
 * reactions the remaining inline rows are written unseen: the workflow
 * stays queued and the next evaluation reacts to them.
 *
 * A task with cacheConfig whose key resolves to a cached output is written
 * COMPLETED with that output instead of being queued (event data "cached":
 * true); otherwise its row carries "cacheKey" and "cacheTtlSeconds", and
 * its result fills the cache (store/queue_repo.h).
 *
 * Threads: any.  Ownership: a decision owns its JSON (decision_free).
 * Failure: none: a problem the workflow itself causes (an expression that
 * cannot be resolved) fails the workflow with a reason that says where.
 */
#ifndef NF_ENGINE_DECIDER_H
#define NF_ENGINE_DECIDER_H

#include "engine/dsl.h"
#include "store/decide_repo.h"

#include <jansson.h>
#include <stdbool.h>

/* Reactions to rows an evaluation wrote itself, at most (see above). */
enum { DECIDER_MAX_INLINE_STEPS = 2500 };

/* Looks a task definition up (NULL: none; Conductor's defaults apply). */
typedef const struct task_def *decider_task_def_fn(void *arg, const char *name);

/* Looks an unexpired output up in the output cache of task definition
 * `name` (a new reference, or NULL: a miss).  Called with the same arg. */
typedef json_t *decider_cache_fn(void *arg, const char *name, const char *key);

struct decider_input {
	const struct wf_def *def;
	const struct loaded_execution *x;
	decider_task_def_fn *task_def;
	void *arg;
	/* NULL: nothing is cached (every cached task runs). */
	decider_cache_fn *cache_lookup;
};

struct decision {
	bool changed;    /* anything to write at all */
	json_t *update;  /* new execution state, or NULL */
	json_t *tasks;   /* rows to schedule */
	json_t *seen;    /* task ids reacted to */
	json_t *cancel;  /* open task ids to cancel */
	json_t *events;  /* history events */
	json_t *retries; /* indexes into tasks of retry rows (budget check) */
	/* Deadlines of the scheduled tasks whose definition has
	 * pollTimeoutSeconds or timeoutSeconds: {taskId, kind, seconds,
	 * policy} (store/timers_repo.h). */
	json_t *timers;
	/* Finished tasks reacted to whose definition has deadlines: their
	 * ids, and their "scheduledAt" (the lower bound of the delete). */
	json_t *disarm;
	json_t *disarm_since;
	/* The workflow ended and has (or may have) deadlines left: delete them
	 * all (disarm is then empty). */
	bool disarm_all;
};

void decide(const struct decider_input *in, struct decision *d);
void decision_free(struct decision *d);

/* The delay before retry number `retry` (1 for the first retry) under d's
 * retry logic, in seconds, capped by maxRetryDelaySeconds. */
int decider_retry_delay(const struct task_def *d, int retry);

/* Every task reference the definition's expressions read, plus the first
 * top-level task (a workflow whose first task has no row has not started:
 * the decider schedules it) and the last (its output is the default
 * workflow output): what an evaluation must load besides the frontier.  A
 * new JSON array. */
json_t *decider_refs_to_load(const struct wf_def *def);

#endif
