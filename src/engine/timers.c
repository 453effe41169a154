#include "engine/timers.h"

#include "engine/decide_loop.h"
#include "engine/subflows.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "store/timers_repo.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

enum { BATCH = 200, POSTPONE_MS = 5000 };

struct timers {
	struct loop_def def;
	char *url;
	struct db *db;
	struct metric *m_claimed;
	struct metric *m_timed_out;
	struct metric *m_alerts;
	struct metric *m_failures;
};

static bool
act(struct db *db, const struct timer *t, enum timer_outcome *out,
    struct err *e)
{
	*out = TIMER_NOTHING;
	if (strcmp(t->kind, "scheduleToStart") == 0)
		return timers_fire_schedule_to_start(db, t, out, e);
	if (strcmp(t->kind, "taskTimeout") == 0)
		return timers_fire_task_timeout(db, t, out, e);
	if (strcmp(t->kind, "workflowTimeout") == 0)
		return timers_fire_workflow_timeout(db, t, out, e) &&
		       (*out != TIMER_TIMED_OUT ||
			subflows_workflow_ended(db, t->ns_id, t->workflow_id,
						true, NULL, e));
	if (strcmp(t->kind, "wait") == 0)
		return timers_fire_wait(db, t, out, e);
	return true; /* no action for this kind (yet) */
}

static void
alert(const struct timer *t)
{
	if (t->task_id[0])
		log_warn("timers",
			 "task %s of workflow %s has run longer than its "
			 "timeoutSeconds (%lld s); timeoutPolicy ALERT_ONLY",
			 t->task_id, t->workflow_id, t->seconds);
	else
		log_warn("timers",
			 "workflow %s has run longer than its timeoutSeconds "
			 "(%lld s); timeoutPolicy ALERT_ONLY",
			 t->workflow_id, t->seconds);
}

/* Acts on one claimed timer under a savepoint.  False only when the
 * savepoint machinery itself failed (the batch is then lost). */
static bool
fire_one(struct timers *s, const struct timer *t, bool *enqueued, struct err *e)
{
	if (!timers_savepoint(s->db, e))
		return false;
	struct err te = ERR_INIT;
	enum timer_outcome out;
	if (act(s->db, t, &out, &te)) {
		if (out == TIMER_TIMED_OUT) {
			metric_add(s->m_timed_out, 1);
			/* A timed-out task, or a workflow's parent or failure
			 * workflow, waits for an evaluation. */
			*enqueued = true;
		} else if (out == TIMER_COMPLETED) {
			*enqueued = true;
		} else if (out == TIMER_ALERTED) {
			metric_add(s->m_alerts, 1);
			alert(t);
		}
		return timers_release_savepoint(s->db, e);
	}
	timers_rollback_savepoint(s->db);
	metric_add(s->m_failures, 1);
	log_error("timers", "%s timer %s of workflow %s: %s (postponed)",
		  t->kind, t->id, t->workflow_id, te.msg);
	return timers_postpone(s->db, t, POSTPONE_MS, e) &&
	       timers_release_savepoint(s->db, e);
}

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct timers *s = arg;
	(void)scratch;
	if (s->db && !db_healthy(s->db)) {
		db_close(s->db);
		s->db = NULL;
	}
	if (!s->db && !db_open(&s->db, s->url, DB_KEYED, e))
		return LOOP_ERROR;

	struct timer *due = NULL;
	size_t n = 0;
	if (!db_begin(s->db, e) || !timers_claim(s->db, BATCH, &due, &n, e)) {
		db_rollback(s->db);
		free(due);
		return LOOP_ERROR;
	}
	bool enqueued = false, ok = true;
	for (size_t i = 0; ok && i < n; i++)
		ok = fire_one(s, &due[i], &enqueued, e);
	free(due);
	ok = ok && db_commit(s->db, e);
	if (!ok) {
		db_rollback(s->db);
		return LOOP_ERROR;
	}
	metric_add(s->m_claimed, (long long)n);
	/* A timed-out task waits for its evaluation (retry or fail). */
	if (enqueued)
		decide_loop_wake();
	return n == BATCH ? LOOP_BUSY : LOOP_IDLE;
}

static void
finish(void *arg)
{
	struct timers *s = arg;
	db_close(s->db);
	free(s->url);
	free(s);
}

struct loop *
timers_start(const char *database_url, int interval_ms)
{
	struct timers *s = xcalloc(1, sizeof(*s));
	s->url = xstrdup(database_url);
	s->def = (struct loop_def){
		.name = "timers",
		.tick = tick,
		.finish = finish,
		.interval_ms = interval_ms,
		.max_backoff_ms = 10000,
	};
	s->m_claimed =
		metric_register(METRIC_COUNTER, "nodeflow_timers_fired_total",
				"", "Due timers claimed and acted on");
	s->m_timed_out = metric_register(
		METRIC_COUNTER, "nodeflow_timeouts_total", "",
		"Task attempts and workflows timed out by a timer");
	s->m_alerts = metric_register(
		METRIC_COUNTER, "nodeflow_timeout_alerts_total", "",
		"Timeouts under timeoutPolicy ALERT_ONLY (an event, no change)");
	s->m_failures = metric_register(
		METRIC_COUNTER, "nodeflow_timer_failures_total", "",
		"Timer actions that failed and were postponed");
	return loop_start(&s->def, s);
}
