/*
 * timers_repo — the "Timers" table: arming deadlines, cancelling them, and
 * the timer sweeper's claim and actions.
 *
 * A timer is a row (kind, workflowId, taskId, fireAt, payload) in a table
 * range-partitioned hourly on "fireAt".  Deadlines are armed where the work
 * they watch starts: a task's at schedule time (timers_arm_tasks, in the
 * decider's transaction), a workflow's by its start statement
 * (executions_repo.h).  The payload carries what the sweeper needs to act,
 * {"seconds", "policy"}, so acting never reads a definition that may have
 * changed since.
 *
 * The sweeper claims due rows (FOR UPDATE SKIP LOCKED on the partial due
 * index; only partitions whose range starts at or before now() are
 * scanned) and, in the same transaction, runs one action per timer.  Every
 * action re-checks the state it would change in the statement that changes
 * it: a deadline usually outlives its usefulness (the task finished, the
 * workflow ended), and firing it against finished work would invent a
 * failure.  Claimed rows are kept, "claimedAt" recording when they fired,
 * until their hourly partition is dropped: partitions are dropped, not
 * deleted, and a claimed row is outside the due index.
 *
 * Cancellation (timers_disarm) deletes a finished task's or an ended
 * workflow's unclaimed deadlines with SKIP LOCKED, so it never waits on a
 * timer the sweeper is acting on (the sweeper's re-check makes that one a
 * no-op), and bounds "fireAt" below so older partitions are pruned.
 *
 * Lock order of the actions is every writer's: queue row, task,
 * "DecideQueues", execution.
 *
 * Threads: callers bring their own connection.  Ownership: claimed timers
 * are the caller's (free).  Failure: false with e set.
 */
#ifndef NF_STORE_TIMERS_REPO_H
#define NF_STORE_TIMERS_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct db;

/*
 * The start of the reason a task timeout under timeoutPolicy TIME_OUT_WF
 * writes on the attempt it times out.  TIMED_OUT is only ever written by the
 * server, so the decider reads this prefix as "time the workflow out, do not
 * retry" (decider.c).
 */
#define TIMEOUT_WF_REASON_PREFIX "timeoutPolicy TIME_OUT_WF: "

struct timer {
	char id[37];
	char fire_at[64]; /* "fireAt"::text, full precision */
	char kind[24];    /* scheduleToStart, taskTimeout, workflowTimeout… */
	char workflow_id[37];
	char task_id[37]; /* "" for workflow timers */
	char ns_id[37];
	long long seconds; /* payload: the timeout */
	char policy[16];   /* payload: RETRY, TIME_OUT_WF, ALERT_ONLY or "" */
};

/* Claims up to limit due timers (*out: n of them, free).  Must run inside
 * the caller's transaction, which then acts on them. */
bool timers_claim(struct db *db, int limit, struct timer **out, size_t *n,
		  struct err *e);

enum timer_outcome {
	TIMER_NOTHING,   /* the re-check found nothing to do */
	TIMER_TIMED_OUT, /* a task attempt or the workflow timed out */
	TIMER_REARMED,   /* not due yet after all: a new timer armed */
	TIMER_ALERTED,   /* ALERT_ONLY: an event, no state change */
	TIMER_COMPLETED, /* a wait: its task completed */
};

/* scheduleToStart: a task still SCHEDULED and never leased times out
 * ("not polled within N s"); its queue row goes, its workflow is enqueued
 * for evaluation (which retries it), TASK_TIMED_OUT is written. */
bool timers_fire_schedule_to_start(struct db *db, const struct timer *t,
				   enum timer_outcome *out, struct err *e);
/* taskTimeout: an open task that started more than `seconds` ago gets its
 * policy (RETRY and TIME_OUT_WF: the attempt TIMED_OUT as above, the
 * latter's reason starting with TIMEOUT_WF_REASON_PREFIX; ALERT_ONLY: a
 * TASK_TIMEOUT_ALERT event); one not started yet, or started less than
 * `seconds` ago, gets a new timer at its real deadline. */
bool timers_fire_task_timeout(struct db *db, const struct timer *t,
			      enum timer_outcome *out, struct err *e);
/* workflowTimeout: a workflow still RUNNING or PAUSED, started more than
 * `seconds` ago: TIME_OUT_WF makes it TIMED_OUT, cancels and dequeues its
 * open tasks and deletes its other timers (events TASK_CANCELED,
 * WORKFLOW_TIMED_OUT); ALERT_ONLY writes WORKFLOW_TIMEOUT_ALERT. */
bool timers_fire_workflow_timeout(struct db *db, const struct timer *t,
				  enum timer_outcome *out, struct err *e);

/* wait: a WAIT task still open completes (TASK_COMPLETED), its workflow
 * is enqueued for evaluation; *out is TIMER_COMPLETED when it did. */
bool timers_fire_wait(struct db *db, const struct timer *t,
		      enum timer_outcome *out, struct err *e);

/* An action failed: unclaim the timer, due again after delay_ms. */
bool timers_postpone(struct db *db, const struct timer *t, int delay_ms,
		     struct err *e);

bool timers_savepoint(struct db *db, struct err *e);
bool timers_release_savepoint(struct db *db, struct err *e);
void timers_rollback_savepoint(struct db *db);

/*
 * Arms the deadlines of tasks just scheduled in the caller's transaction:
 * timers_json is a JSON array of {taskId, kind, seconds, policy}.  A
 * deadline fires `seconds` after the task's "scheduledAt" plus its start
 * delay (before that it cannot be polled or run).  Entries whose task was
 * not written (a repeated decision) are ignored.
 */
bool timers_arm_tasks(struct db *db, const char *workflow_id, const char *ns_id,
		      const char *timers_json, struct err *e);

/*
 * Deletes unclaimed deadlines of a workflow: of the tasks in task_ids_json
 * (a JSON array of ids) whose "scheduledAt" values are since_json (a JSON
 * array, the lower bound on "fireAt"), or, with both NULL, all of them.
 */
bool timers_disarm(struct db *db, const char *workflow_id,
		   const char *task_ids_json, const char *since_json,
		   struct err *e);

#endif
