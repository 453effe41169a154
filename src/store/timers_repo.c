#include "store/timers_repo.h"

#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The inner scan reads the partial due index of the partitions whose range
 * starts at or before now() (now() is stable: pruned at executor start),
 * in "fireAt" order, so a batch takes the oldest due timers first.
 */
DB_STMT(timers_claim_stmt,
	"UPDATE \"Timers\" t SET \"claimedAt\" = now()"
	" FROM (SELECT \"id\", \"fireAt\" FROM \"Timers\""
	"   WHERE \"claimedAt\" IS NULL AND \"fireAt\" <= now()"
	"   ORDER BY \"fireAt\" LIMIT $1::int FOR UPDATE SKIP LOCKED) c"
	" WHERE t.\"id\" = c.\"id\" AND t.\"fireAt\" = c.\"fireAt\""
	" AND t.\"fireAt\" <= now()"
	" RETURNING t.\"id\"::text, t.\"fireAt\"::text, t.\"kind\","
	" t.\"workflowId\"::text, coalesce(t.\"taskId\"::text, ''),"
	" t.\"namespaceId\"::text, coalesce(t.\"payload\"->>'seconds', '0'),"
	" coalesce(t.\"payload\"->>'policy', '')");

bool
timers_claim(struct db *db, int limit, struct timer **out, size_t *n,
	     struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {lim};
	*out = NULL;
	*n = 0;
	PGresult *res = db_exec(db, &timers_claim_stmt, 1, params, e);
	if (!res)
		return false;
	int rows = PQntuples(res);
	*out = xcalloc((size_t)rows + 1, sizeof(**out));
	for (int i = 0; i < rows; i++) {
		struct timer *t = &(*out)[i];
		snprintf(t->id, sizeof(t->id), "%s", PQgetvalue(res, i, 0));
		snprintf(t->fire_at, sizeof(t->fire_at), "%s",
			 PQgetvalue(res, i, 1));
		snprintf(t->kind, sizeof(t->kind), "%s", PQgetvalue(res, i, 2));
		snprintf(t->workflow_id, sizeof(t->workflow_id), "%s",
			 PQgetvalue(res, i, 3));
		snprintf(t->task_id, sizeof(t->task_id), "%s",
			 PQgetvalue(res, i, 4));
		snprintf(t->ns_id, sizeof(t->ns_id), "%s",
			 PQgetvalue(res, i, 5));
		t->seconds = strtoll(PQgetvalue(res, i, 6), NULL, 10);
		snprintf(t->policy, sizeof(t->policy), "%s",
			 PQgetvalue(res, i, 7));
	}
	*n = (size_t)rows;
	PQclear(res);
	return true;
}

/*
 * Re-checked where it changes: the task is still SCHEDULED and was never
 * leased ("pollCount" 0: a released task was polled, and is not waiting for
 * its first worker), and its queue row is not leased.  The queue row is
 * locked first; a poll leasing it meanwhile wins or waits, and the
 * re-evaluated condition then finds it leased.
 */
DB_STMT(timers_schedule_to_start_stmt,
	"WITH cur AS (SELECT te.\"id\", te.\"queueName\" FROM \"TaskExecutions\" te"
	"   WHERE te.\"workflowId\" = $1::uuid AND te.\"id\" = $2::uuid"
	"   AND te.\"status\" = 'SCHEDULED' AND te.\"pollCount\" = 0),"
	" c AS (SELECT q.\"queueName\", q.\"id\" FROM \"TaskQueues\" q, cur"
	"   WHERE q.\"queueName\" = cur.\"queueName\" AND q.\"taskId\" = cur.\"id\""
	"   AND q.\"leasedBy\" IS NULL FOR UPDATE OF q),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'TIMED_OUT',"
	"   \"reasonForIncompletion\" = 'not polled within ' || $3::bigint ||"
	"   ' s (pollTimeoutSeconds)',"
	"   \"endedAt\" = now(), \"updatedAt\" = now() FROM c"
	"   WHERE te.\"workflowId\" = $1::uuid AND te.\"id\" = $2::uuid"
	"   AND te.\"status\" = 'SCHEDULED' AND te.\"pollCount\" = 0"
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
	"   te.\"reasonForIncompletion\"),"
	" q AS (DELETE FROM \"TaskQueues\" q USING c, t"
	"   WHERE q.\"queueName\" = c.\"queueName\" AND q.\"id\" = c.\"id\"),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT \"workflowId\", \"namespaceId\", 'timeout' FROM t"
	"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
	"   EXCLUDED.\"reason\", \"enqueuedAt\" = LEAST("
	"   \"DecideQueues\".\"enqueuedAt\", EXCLUDED.\"enqueuedAt\")"
	"   RETURNING \"workflowId\")," SQL_TASKS_AFTER_D EVENTS_FROM(
		"td", "'TASK_TIMED_OUT'",
		"jsonb_build_object('reason', s.\"reasonForIncompletion\","
		" 'timeout', 'scheduleToStart', 'pollTimeoutSeconds',"
		" $3::bigint)") " SELECT count(*) FROM t");

static bool
count_of(PGresult *res, int col)
{
	return strcmp(PQgetvalue(res, 0, col), "0") != 0;
}

bool
timers_fire_schedule_to_start(struct db *db, const struct timer *t,
			      enum timer_outcome *out, struct err *e)
{
	char secs[24];
	snprintf(secs, sizeof(secs), "%lld", t->seconds);
	const char *params[] = {t->workflow_id, t->task_id, secs};
	PGresult *res =
		db_exec(db, &timers_schedule_to_start_stmt, 3, params, e);
	if (!res)
		return false;
	*out = count_of(res, 0) ? TIMER_TIMED_OUT : TIMER_NOTHING;
	PQclear(res);
	return true;
}

/*
 * One statement for every outcome.  `cur` is the open task as of the
 * statement's snapshot; `due` is it if it started more than $3 seconds ago.
 * RETRY and TIME_OUT_WF time the attempt out exactly as an expired lease
 * does (the update re-checks open and due on the row it locks, so a result
 * that got there first wins); ALERT_ONLY only writes an event.  A task not
 * started yet (timeoutSeconds counts from its first start) or started less
 * than $3 seconds ago gets a new timer at its real deadline.
 */
DB_STMT(timers_task_timeout_stmt,
	"WITH cur AS (SELECT te.\"id\", te.\"workflowId\", te.\"namespaceId\","
	"   te.\"queueName\", te.\"startedAt\" FROM \"TaskExecutions\" te"
	"   WHERE te.\"workflowId\" = $1::uuid AND te.\"id\" = $2::uuid"
	"   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')),"
	" due AS (SELECT cur.* FROM cur WHERE cur.\"startedAt\" +"
	"   make_interval(secs => $3::bigint) <= now()),"
	" c AS (SELECT q.\"queueName\", q.\"id\" FROM \"TaskQueues\" q, due"
	"   WHERE $4::text <> 'ALERT_ONLY' AND q.\"queueName\" = due.\"queueName\""
	"   AND q.\"taskId\" = due.\"id\" FOR UPDATE OF q),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'TIMED_OUT',"
	"   \"reasonForIncompletion\" = CASE WHEN $4::text = 'TIME_OUT_WF'"
	"   THEN '" TIMEOUT_WF_REASON_PREFIX "' ELSE '' END ||"
	"   'ran longer than its timeoutSeconds (' || $3::bigint || ' s)',"
	"   \"endedAt\" = now(), \"updatedAt\" = now() FROM c"
	"   WHERE te.\"workflowId\" = $1::uuid AND te.\"id\" = $2::uuid"
	"   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')"
	"   AND te.\"startedAt\" + make_interval(secs => $3::bigint) <= now()"
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
	"   te.\"reasonForIncompletion\"),"
	" q AS (DELETE FROM \"TaskQueues\" q USING c, t"
	"   WHERE q.\"queueName\" = c.\"queueName\" AND q.\"id\" = c.\"id\"),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT \"workflowId\", \"namespaceId\", 'timeout' FROM t"
	"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
	"   EXCLUDED.\"reason\", \"enqueuedAt\" = LEAST("
	"   \"DecideQueues\".\"enqueuedAt\", EXCLUDED.\"enqueuedAt\")"
	"   RETURNING \"workflowId\"),"
	" a AS (SELECT due.\"id\", due.\"workflowId\" FROM due"
	"   WHERE $4::text = 'ALERT_ONLY'),"
	" r AS (INSERT INTO \"Timers\" (\"namespaceId\", \"workflowId\","
	"   \"taskId\", \"kind\", \"fireAt\", \"payload\")"
	"   SELECT cur.\"namespaceId\", cur.\"workflowId\", cur.\"id\","
	"   'taskTimeout', coalesce(cur.\"startedAt\", now()) +"
	"   make_interval(secs => $3::bigint), jsonb_build_object('seconds',"
	"   $3::bigint, 'policy', $4::text) FROM cur"
	"   WHERE cur.\"startedAt\" IS NULL OR cur.\"startedAt\" +"
	"   make_interval(secs => $3::bigint) > now() RETURNING 1),"
	" td AS (SELECT t.\"id\", t.\"workflowId\", 'TASK_TIMED_OUT' AS \"type\","
	"   jsonb_build_object('reason', t.\"reasonForIncompletion\", 'timeout',"
	"   'taskTimeout', 'timeoutSeconds', $3::bigint, 'timeoutPolicy',"
	"   $4::text) AS \"data\" FROM t JOIN d USING (\"workflowId\")"
	"   UNION ALL SELECT a.\"id\", a.\"workflowId\", 'TASK_TIMEOUT_ALERT',"
	"   jsonb_build_object('reason', 'ran longer than its timeoutSeconds (' ||"
	"   $3::bigint || ' s)', 'timeout', 'taskTimeout', 'timeoutSeconds',"
	"   $3::bigint, 'timeoutPolicy', $4::text) FROM a)," EVENTS_FROM(
		"td", "s.\"type\"",
		"s.\"data\"") " SELECT (SELECT count(*) FROM t),"
			      " (SELECT count(*) FROM a), (SELECT count(*) FROM r)");

bool
timers_fire_task_timeout(struct db *db, const struct timer *t,
			 enum timer_outcome *out, struct err *e)
{
	char secs[24];
	snprintf(secs, sizeof(secs), "%lld", t->seconds);
	const char *policy = t->policy[0] ? t->policy : "TIME_OUT_WF";
	const char *params[] = {t->workflow_id, t->task_id, secs, policy};
	PGresult *res = db_exec(db, &timers_task_timeout_stmt, 4, params, e);
	if (!res)
		return false;
	*out = count_of(res, 0)   ? TIMER_TIMED_OUT
	       : count_of(res, 1) ? TIMER_ALERTED
	       : count_of(res, 2) ? TIMER_REARMED
				  : TIMER_NOTHING;
	PQclear(res);
	return true;
}

/*
 * Like a terminate (actions_repo.c), with status TIMED_OUT: the update of
 * the execution re-checks RUNNING or PAUSED and the deadline, and takes the
 * execution's row lock first.  ALERT_ONLY changes nothing but the event
 * counter.  The workflow's other unclaimed timers go with it.
 */
DB_STMT(timers_workflow_timeout_stmt,
	"WITH cur AS (SELECT e.\"id\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"id\" = $1::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$1::uuid") "   AND e.\"status\" IN ('RUNNING', 'PAUSED')"
			    "   AND e.\"startedAt\" + make_interval(secs => $2::bigint) <= now()),"
			    " open AS (SELECT t.\"id\", t.\"queueName\", t.\"refName\""
			    "   FROM \"TaskExecutions\" t, cur WHERE t.\"workflowId\" = $1::uuid"
			    "   AND t.\"status\" NOT IN " SQL_TASK_TERMINAL
			    "   AND $3::text = 'TIME_OUT_WF'),"
			    " w AS (UPDATE \"WorkflowExecutions\" e SET"
			    "   \"status\" = CASE WHEN $3::text = 'TIME_OUT_WF' THEN 'TIMED_OUT'"
			    "   ELSE e.\"status\" END,"
			    "   \"reasonForIncompletion\" = CASE WHEN $3::text = 'TIME_OUT_WF'"
			    "   THEN 'workflow ran longer than its timeoutSeconds (' ||"
			    "   $2::bigint || ' s)' ELSE e.\"reasonForIncompletion\" END,"
			    "   \"endedAt\" = CASE WHEN $3::text = 'TIME_OUT_WF' THEN now()"
			    "   ELSE e.\"endedAt\" END, \"updatedAt\" = now(),"
			    "   \"version\" = e.\"version\" + CASE WHEN $3::text = 'TIME_OUT_WF'"
			    "   THEN 1 ELSE 0 END,"
			    "   \"eventSeq\" = e.\"eventSeq\" + 1 + (SELECT count(*) FROM open)"
			    "   WHERE e.\"id\" = $1::uuid AND " SQL_EXEC_WINDOW(
				    "e",
				    "$1::uuid") "   AND e.\"status\" IN ('RUNNING', 'PAUSED')"
						"   AND e.\"startedAt\" + make_interval(secs => $2::bigint) <= now()"
						"   RETURNING e.\"id\", e.\"namespaceId\", e.\"reasonForIncompletion\","
						"   e.\"eventSeq\" - 1 - (SELECT count(*) FROM open) AS base),"
						" c AS (UPDATE \"TaskExecutions\" t SET \"status\" = 'CANCELED',"
						"   \"endedAt\" = now(), \"deciderSeenAt\" = now(), \"updatedAt\" = now()"
						"   FROM w WHERE t.\"workflowId\" = $1::uuid"
						"   AND t.\"id\" IN (SELECT \"id\" FROM open)),"
						" q AS (DELETE FROM \"TaskQueues\" q USING open, w"
						"   WHERE q.\"queueName\" = open.\"queueName\""
						"   AND q.\"taskId\" = open.\"id\"),"
						" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
						"   \"seq\", \"type\", \"taskId\", \"data\")"
						"   SELECT w.\"id\", w.\"namespaceId\", w.base + o.n, 'TASK_CANCELED',"
						"   o.\"id\", jsonb_build_object('refName', o.\"refName\")"
						"   FROM w, (SELECT open.*, row_number() OVER (ORDER BY open.\"id\") n"
						"   FROM open) o"
						"   UNION ALL SELECT w.\"id\", w.\"namespaceId\","
						"   w.base + 1 + (SELECT count(*) FROM open),"
						"   CASE WHEN $3::text = 'TIME_OUT_WF' THEN 'WORKFLOW_TIMED_OUT'"
						"   ELSE 'WORKFLOW_TIMEOUT_ALERT' END, NULL,"
						"   jsonb_build_object('reason', 'workflow ran longer than its"
						" timeoutSeconds (' || $2::bigint || ' s)', 'timeout',"
						"   'workflowTimeout', 'timeoutSeconds', $2::bigint,"
						"   'timeoutPolicy', $3::text) FROM w),"
						" tm AS (DELETE FROM \"Timers\" x USING (SELECT k.\"id\", k.\"fireAt\""
						"   FROM \"Timers\" k WHERE k.\"workflowId\" = $1::uuid"
						"   AND k.\"claimedAt\" IS NULL AND k.\"fireAt\" >="
						"   uuid_extract_timestamp($1::uuid) - interval '1 hour'"
						"   AND EXISTS (SELECT 1 FROM w) AND $3::text = 'TIME_OUT_WF'"
						"   FOR UPDATE OF k SKIP LOCKED) k"
						"   WHERE x.\"id\" = k.\"id\" AND x.\"fireAt\" = k.\"fireAt\")"
						" SELECT (SELECT count(*) FROM w)");

bool
timers_fire_workflow_timeout(struct db *db, const struct timer *t,
			     enum timer_outcome *out, struct err *e)
{
	char secs[24];
	snprintf(secs, sizeof(secs), "%lld", t->seconds);
	const char *policy = strcmp(t->policy, "ALERT_ONLY") == 0
				     ? "ALERT_ONLY"
				     : "TIME_OUT_WF";
	const char *params[] = {t->workflow_id, secs, policy};
	PGresult *res =
		db_exec(db, &timers_workflow_timeout_stmt, 3, params, e);
	if (!res)
		return false;
	*out = !count_of(res, 0)                   ? TIMER_NOTHING
	       : strcmp(policy, "ALERT_ONLY") == 0 ? TIMER_ALERTED
						   : TIMER_TIMED_OUT;
	PQclear(res);
	return true;
}

/* A WAIT task still open completes; a result through the API that got
 * there first wins. */
DB_STMT(timers_wait_stmt,
	"WITH t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'COMPLETED',"
	"   \"startedAt\" = coalesce(te.\"startedAt\", te.\"scheduledAt\"),"
	"   \"endedAt\" = now(), \"updatedAt\" = now()"
	"   WHERE te.\"workflowId\" = $1::uuid AND te.\"id\" = $2::uuid"
	"   AND te.\"taskType\" = 'WAIT'"
	"   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')"
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\"),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT \"workflowId\", \"namespaceId\", 'wait' FROM t"
	"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
	"   EXCLUDED.\"reason\", \"enqueuedAt\" = LEAST("
	"   \"DecideQueues\".\"enqueuedAt\", EXCLUDED.\"enqueuedAt\")"
	"   RETURNING \"workflowId\")," SQL_TASKS_AFTER_D EVENTS_FROM(
		"td", "'TASK_COMPLETED'",
		"jsonb_build_object('timer', 'wait')") " SELECT count(*) FROM t");

bool
timers_fire_wait(struct db *db, const struct timer *t, enum timer_outcome *out,
		 struct err *e)
{
	const char *params[] = {t->workflow_id, t->task_id};
	PGresult *res = db_exec(db, &timers_wait_stmt, 2, params, e);
	if (!res)
		return false;
	*out = count_of(res, 0) ? TIMER_COMPLETED : TIMER_NOTHING;
	PQclear(res);
	return true;
}

/* Moves the row to its new "fireAt" (and so, maybe, partition). */
DB_STMT(timers_postpone_stmt,
	"UPDATE \"Timers\" SET \"claimedAt\" = NULL, \"fireAt\" = now() +"
	" make_interval(secs => $3::float8 / 1000)"
	" WHERE \"id\" = $1::uuid AND \"fireAt\" = $2::timestamptz");

bool
timers_postpone(struct db *db, const struct timer *t, int delay_ms,
		struct err *e)
{
	char ms[16];
	snprintf(ms, sizeof(ms), "%d", delay_ms);
	const char *params[] = {t->id, t->fire_at, ms};
	return db_run(db, &timers_postpone_stmt, 3, params, e);
}

bool
timers_savepoint(struct db *db, struct err *e)
{
	return db_exec_script(db, "SAVEPOINT \"timer\"", e);
}

bool
timers_release_savepoint(struct db *db, struct err *e)
{
	return db_exec_script(db, "RELEASE SAVEPOINT \"timer\"", e);
}

void
timers_rollback_savepoint(struct db *db)
{
	struct err ignored = ERR_INIT;
	(void)db_exec_script(db, "ROLLBACK TO SAVEPOINT \"timer\"", &ignored);
}

/* The task rows were written earlier in the same transaction; the join
 * drops entries of a decision the identity index absorbed. */
DB_STMT(timers_arm_tasks_stmt,
	"INSERT INTO \"Timers\" (\"namespaceId\", \"workflowId\", \"taskId\","
	" \"kind\", \"fireAt\", \"payload\")"
	" SELECT $2::uuid, $1::uuid, t.\"id\", r.\"kind\", t.\"scheduledAt\" +"
	" make_interval(secs => t.\"startDelaySeconds\" + r.\"seconds\"),"
	" jsonb_strip_nulls(jsonb_build_object('seconds', r.\"seconds\","
	" 'policy', r.\"policy\"))"
	" FROM jsonb_to_recordset($3::jsonb) AS r(\"taskId\" uuid, \"kind\" text,"
	" \"seconds\" bigint, \"policy\" text)"
	" JOIN \"TaskExecutions\" t ON t.\"workflowId\" = $1::uuid"
	" AND t.\"id\" = r.\"taskId\""
	" WHERE r.\"seconds\" > 0");

bool
timers_arm_tasks(struct db *db, const char *workflow_id, const char *ns_id,
		 const char *timers_json, struct err *e)
{
	const char *params[] = {workflow_id, ns_id, timers_json};
	return db_run(db, &timers_arm_tasks_stmt, 3, params, e);
}

/*
 * The lower bound on "fireAt" prunes the hourly partitions older than the
 * earliest deadline the tasks can have (their "scheduledAt"), or, for the
 * whole workflow, than its start (within an hour of its UUIDv7 id's time).
 * Both the inner scan and the delete carry it.
 */
#define DISARM_SINCE                                \
	"coalesce((SELECT min(s::timestamptz) FROM" \
	" jsonb_array_elements_text($3::jsonb) s)," \
	" uuid_extract_timestamp($1::uuid) - interval '1 hour')"

DB_STMT(timers_disarm_stmt,
	"DELETE FROM \"Timers\" x USING (SELECT k.\"id\", k.\"fireAt\""
	"   FROM \"Timers\" k WHERE k.\"workflowId\" = $1::uuid"
	"   AND ($2::jsonb IS NULL OR k.\"taskId\" IN"
	"   (SELECT jsonb_array_elements_text($2::jsonb)::uuid))"
	"   AND k.\"claimedAt\" IS NULL AND k.\"fireAt\" >= " DISARM_SINCE
	"   FOR UPDATE OF k SKIP LOCKED) k"
	" WHERE x.\"id\" = k.\"id\" AND x.\"fireAt\" = k.\"fireAt\""
	" AND x.\"fireAt\" >= " DISARM_SINCE);

bool
timers_disarm(struct db *db, const char *workflow_id, const char *task_ids_json,
	      const char *since_json, struct err *e)
{
	const char *params[] = {workflow_id, task_ids_json, since_json};
	return db_run(db, &timers_disarm_stmt, 3, params, e);
}

struct db_stmt *const timers_repo_stmts[] = {
	&timers_claim_stmt,
	&timers_schedule_to_start_stmt,
	&timers_task_timeout_stmt,
	&timers_workflow_timeout_stmt,
	&timers_postpone_stmt,
	&timers_arm_tasks_stmt,
	&timers_disarm_stmt,
	&timers_wait_stmt,
	NULL,
};
