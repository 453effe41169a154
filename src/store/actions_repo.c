#include "store/actions_repo.h"

#include "store/payload_repo.h"
#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/uuid.h"

#include <stdlib.h>
#include <string.h>

/*
 * Every action: a CTE `w` that changes the execution only from the allowed
 * statuses (and takes its row lock), the task changes, and the events,
 * numbered from the counter `w` advanced.  The final SELECT tells found
 * (any status) from applied.  A terminate also deletes the workflow's
 * unclaimed timers (store/timers_repo.h), skipping any the timer sweeper
 * holds: its re-check finds the workflow ended.
 */

/*
 * Waits for, and holds until commit, the execution row's lock: a decider
 * batch that is writing this workflow's next tasks commits first, and the
 * statement that follows (with a snapshot of its own) sees those tasks and
 * cancels them too, instead of leaving them queued on a workflow that has
 * ended.
 */
DB_STMT(action_lock_stmt,
	"SELECT 1 FROM \"WorkflowExecutions\" e"
	" WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e", "$2::uuid") " FOR NO KEY UPDATE");

DB_STMT(action_terminate_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " open AS (SELECT t.\"id\", t.\"queueName\", t.\"refName\""
			    "   FROM \"TaskExecutions\" t WHERE t.\"workflowId\" = $2::uuid"
			    "   AND t.\"status\" NOT IN " SQL_TASK_TERMINAL "),"
			    " w AS (UPDATE \"WorkflowExecutions\" e SET \"status\" = 'TERMINATED',"
			    "   \"reasonForIncompletion\" = $3, \"endedAt\" = now(),"
			    "   \"updatedAt\" = now(), \"version\" = e.\"version\" + 1,"
			    "   \"eventSeq\" = e.\"eventSeq\" + 1 + (SELECT count(*) FROM open)"
			    "   WHERE e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
				    "e",
				    "$2::uuid") "   AND e.\"status\" IN ('RUNNING', 'PAUSED')"
						"   RETURNING e.\"id\", e.\"namespaceId\","
						"   e.\"eventSeq\" - 1 - (SELECT count(*) FROM open) AS base),"
						" c AS (UPDATE \"TaskExecutions\" t SET \"status\" = 'CANCELED',"
						"   \"endedAt\" = now(), \"deciderSeenAt\" = now(), \"updatedAt\" = now()"
						"   FROM w WHERE t.\"workflowId\" = $2::uuid"
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
						"   w.base + 1 + (SELECT count(*) FROM open), 'WORKFLOW_TERMINATED',"
						"   NULL, jsonb_build_object('reason', $3::text) FROM w),"
						" tm AS (DELETE FROM \"Timers\" x USING (SELECT k.\"id\", k.\"fireAt\""
						"   FROM \"Timers\" k WHERE k.\"workflowId\" = $2::uuid"
						"   AND k.\"claimedAt\" IS NULL AND k.\"fireAt\" >="
						"   uuid_extract_timestamp($2::uuid) - interval '1 hour'"
						"   AND EXISTS (SELECT 1 FROM w) FOR UPDATE OF k SKIP LOCKED) k"
						"   WHERE x.\"id\" = k.\"id\" AND x.\"fireAt\" = k.\"fireAt\")"
						" SELECT (SELECT \"status\" FROM cur), (SELECT count(*) FROM w)");

DB_STMT(action_pause_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " w AS (UPDATE \"WorkflowExecutions\" e SET \"status\" = 'PAUSED',"
			    "   \"updatedAt\" = now(), \"version\" = e.\"version\" + 1,"
			    "   \"eventSeq\" = e.\"eventSeq\" + 1"
			    "   WHERE e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
				    "e",
				    "$2::uuid") "   AND e.\"status\" = 'RUNNING'"
						"   RETURNING e.\"id\", e.\"namespaceId\", e.\"eventSeq\"),"
						" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
						"   \"seq\", \"type\") SELECT \"id\", \"namespaceId\", \"eventSeq\","
						"   'WORKFLOW_PAUSED' FROM w)"
						" SELECT (SELECT \"status\" FROM cur), (SELECT count(*) FROM w)");

DB_STMT(action_resume_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " w AS (UPDATE \"WorkflowExecutions\" e SET \"status\" = 'RUNNING',"
			    "   \"updatedAt\" = now(), \"version\" = e.\"version\" + 1,"
			    "   \"eventSeq\" = e.\"eventSeq\" + 1"
			    "   WHERE e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
				    "e",
				    "$2::uuid") "   AND e.\"status\" = 'PAUSED'"
						"   RETURNING e.\"id\", e.\"namespaceId\", e.\"eventSeq\"),"
						" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
						"   \"reason\") SELECT \"id\", \"namespaceId\", 'resume' FROM w"
						"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
						"   EXCLUDED.\"reason\", \"enqueuedAt\" = now()),"
						" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
						"   \"seq\", \"type\") SELECT \"id\", \"namespaceId\", \"eventSeq\","
						"   'WORKFLOW_RESUMED' FROM w)"
						" SELECT (SELECT \"status\" FROM cur), (SELECT count(*) FROM w)");

/*
 * The failed task's latest attempt gets a successor with the same input,
 * queued at once; the execution runs again.  So does every queued task
 * (worker or system) whose latest attempt was cancelled when the workflow
 * failed: the parallel branches of a fork that were still running, which
 * would otherwise count as ended and never run.  The successor of a
 * SUB_WORKFLOW attempt is not queued: it is IN_PROGRESS on the same child
 * (which the caller has retried), and the child's end completes it.
 */
DB_STMT(action_retry_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\", e.\"failedTaskRef\""
	"   FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " last AS (SELECT t.* FROM \"TaskExecutions\" t, cur"
			    "   WHERE t.\"workflowId\" = $2::uuid AND t.\"refName\" ="
			    "   cur.\"failedTaskRef\" ORDER BY t.\"iteration\" DESC,"
			    "   t.\"attempt\" DESC LIMIT 1),"
			    " latest AS (SELECT DISTINCT ON (t.\"refName\") t.*"
			    "   FROM \"TaskExecutions\" t, cur"
			    "   WHERE t.\"workflowId\" = $2::uuid"
			    "   AND t.\"refName\" <> cur.\"failedTaskRef\""
			    "   ORDER BY t.\"refName\", t.\"iteration\" DESC,"
			    "   t.\"attempt\" DESC),"
			    " redo AS (SELECT last.*, $3::uuid AS \"newId\" FROM last"
			    "   UNION ALL SELECT latest.*, uuidv7() FROM latest"
			    "   WHERE latest.\"status\" = 'CANCELED'"
			    "   AND latest.\"queueName\" IS NOT NULL"
			    "   AND EXISTS (SELECT 1 FROM last)),"
			    " n AS (SELECT count(*)::int AS \"n\" FROM redo),"
			    " w AS (UPDATE \"WorkflowExecutions\" e SET \"status\" = 'RUNNING',"
			    "   \"reasonForIncompletion\" = NULL, \"failedTaskRef\" = NULL,"
			    "   \"endedAt\" = NULL, \"updatedAt\" = now(),"
			    "   \"version\" = e.\"version\" + 1,"
			    "   \"eventSeq\" = e.\"eventSeq\" + 1 + n.\"n\" FROM n"
			    "   WHERE e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
				    "e",
				    "$2::uuid") "   AND e.\"status\" IN ('FAILED', 'TIMED_OUT')"
						"   AND EXISTS (SELECT 1 FROM last)"
						"   RETURNING e.\"id\", e.\"namespaceId\", e.\"priority\","
						"   e.\"eventSeq\" - 1 - n.\"n\" AS base),"
						" nt AS (INSERT INTO \"TaskExecutions\" (\"id\", \"workflowId\","
						"   \"namespaceId\", \"refName\", \"taskDefName\", \"taskType\","
						"   \"iteration\", \"attempt\", \"status\", \"input\", \"queueName\","
						"   \"subWorkflowId\", \"forkRef\", \"output\", \"startedAt\","
						"   \"scheduledAt\", \"updatedAt\", \"inputRef\")"
						"   SELECT redo.\"newId\", redo.\"workflowId\", redo.\"namespaceId\","
						"   redo.\"refName\", redo.\"taskDefName\", redo.\"taskType\","
						"   redo.\"iteration\", redo.\"attempt\" + 1,"
						"   CASE WHEN redo.\"subWorkflowId\" IS NULL THEN 'SCHEDULED'"
						"   ELSE 'IN_PROGRESS' END, redo.\"input\", redo.\"queueName\","
						"   redo.\"subWorkflowId\", redo.\"forkRef\","
						"   CASE WHEN redo.\"subWorkflowId\" IS NULL"
						"   THEN '{}'::jsonb ELSE jsonb_build_object('subWorkflowId',"
						"   redo.\"subWorkflowId\") END, CASE WHEN redo.\"subWorkflowId\""
						"   IS NOT NULL THEN now() END, now(), now(), redo.\"inputRef\""
						"   FROM redo, w"
						"   RETURNING \"id\", \"queueName\", \"taskType\", \"refName\","
						"   \"attempt\"),"
						" nq AS (INSERT INTO \"TaskQueues\" (\"queueName\", \"taskId\","
						"   \"workflowId\", \"namespaceId\", \"taskType\", \"priority\")"
						"   SELECT nt.\"queueName\", nt.\"id\", w.\"id\", w.\"namespaceId\","
						"   nt.\"taskType\", w.\"priority\" FROM nt, w"
						"   WHERE nt.\"queueName\" IS NOT NULL),"
						/* An operator's attempt is run
						   by the decider. */
						" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
						"   \"reason\") SELECT DISTINCT w.\"id\", w.\"namespaceId\", 'retry'"
						"   FROM w, nt WHERE nt.\"queueName\" IS NULL"
						"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
						"   EXCLUDED.\"reason\", \"enqueuedAt\" = now()),"
						" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
						"   \"seq\", \"type\", \"taskId\", \"data\")"
						"   SELECT w.\"id\", w.\"namespaceId\", w.base + 1, 'WORKFLOW_RETRIED',"
						"   NULL, '{}'::jsonb FROM w"
						"   UNION ALL SELECT w.\"id\", w.\"namespaceId\", w.base + 1 +"
						"   row_number() OVER (ORDER BY nt.\"refName\", nt.\"id\"),"
						"   'TASK_SCHEDULED', nt.\"id\", jsonb_build_object('refName',"
						"   nt.\"refName\", 'attempt', nt.\"attempt\") FROM w, nt)"
						" SELECT (SELECT \"status\" FROM cur), (SELECT count(*) FROM w)");

/* One open task of the reference becomes SKIPPED; the decider then goes on
 * as if it had completed. */
DB_STMT(action_skip_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'SKIPPED',"
			    "   \"endedAt\" = now(), \"updatedAt\" = now(),"
			    "   \"reasonForIncompletion\" = 'skipped by an operator'"
			    "   WHERE te.\"workflowId\" = $2::uuid AND te.\"refName\" = $3"
			    "   AND te.\"status\" NOT IN " SQL_TASK_TERMINAL
			    "   AND EXISTS (SELECT 1 FROM cur WHERE cur.\"status\" IN"
			    "   ('RUNNING', 'PAUSED'))"
			    "   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
			    "   te.\"queueName\"),"
			    " q AS (DELETE FROM \"TaskQueues\" q USING t"
			    "   WHERE q.\"queueName\" = t.\"queueName\" AND q.\"taskId\" = t.\"id\"),"
			    " d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
			    "   \"reason\") SELECT DISTINCT \"workflowId\", \"namespaceId\", 'skip'"
			    "   FROM t ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
			    "   EXCLUDED.\"reason\", \"enqueuedAt\" = now() RETURNING \"workflowId\")," SQL_TASKS_AFTER_D
				    EVENTS_FROM(
					    "td", "'TASK_SKIPPED'",
					    "jsonb_build_object('refName', $3::text)") " SELECT (SELECT \"status\" FROM cur), (SELECT count(*) FROM t)");

/*
 * An ended workflow runs again from its first task, under the same id: its
 * tasks are removed (the history keeps every event of them), which is
 * what tells the decider "not started": it schedules the first task when
 * that task has no row.  The events go on numbering where they were.
 */
DB_STMT(action_restart_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " w AS (UPDATE \"WorkflowExecutions\" e SET \"status\" = 'RUNNING',"
			    "   \"version\" = 0, \"output\" = '{}', \"outputRef\" = NULL,"
			    "   \"reasonForIncompletion\" = NULL,"
			    "   \"failedTaskRef\" = NULL, \"endedAt\" = NULL, \"updatedAt\" = now(),"
			    "   \"eventSeq\" = e.\"eventSeq\" + 1"
			    "   WHERE e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
				    "e",
				    "$2::uuid") "   AND e.\"status\" IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED')"
						"   RETURNING e.\"id\", e.\"namespaceId\", e.\"eventSeq\"),"
						" gone AS (DELETE FROM \"TaskExecutions\" t USING w"
						"   WHERE t.\"workflowId\" = w.\"id\"),"
						" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
						"   \"reason\") SELECT \"id\", \"namespaceId\", 'restart' FROM w"
						"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
						"   EXCLUDED.\"reason\", \"enqueuedAt\" = now()),"
						" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
						"   \"seq\", \"type\") SELECT \"id\", \"namespaceId\", \"eventSeq\","
						"   'WORKFLOW_RESTARTED' FROM w)"
						" SELECT (SELECT \"status\" FROM cur), (SELECT count(*) FROM w)");

/*
 * Rerun an ended workflow from one of its tasks: that task and every task
 * scheduled after it are removed, and the task is scheduled again (a new
 * attempt, with new input if given); the workflow's input may be replaced.
 */
DB_STMT(action_rerun_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " pivot AS (SELECT t.* FROM \"TaskExecutions\" t"
			    "   WHERE t.\"workflowId\" = $2::uuid AND t.\"refName\" = $3"
			    "   ORDER BY t.\"iteration\" DESC, t.\"attempt\" DESC LIMIT 1),"
			    " w AS (UPDATE \"WorkflowExecutions\" e SET \"status\" = 'RUNNING',"
			    "   \"version\" = e.\"version\" + 1, \"output\" = '{}',"
			    "   \"outputRef\" = NULL,"
			    "   \"input\" = coalesce($5::jsonb, e.\"input\"),"
			    "   \"inputRef\" = CASE WHEN $5::jsonb IS NULL THEN e.\"inputRef\" ELSE $7 END,"
			    "   \"reasonForIncompletion\" = NULL, \"failedTaskRef\" = NULL,"
			    "   \"endedAt\" = NULL, \"updatedAt\" = now(),"
			    "   \"eventSeq\" = e.\"eventSeq\" + 2"
			    "   WHERE e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
				    "e",
				    "$2::uuid") "   AND e.\"status\" IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED')"
						"   AND EXISTS (SELECT 1 FROM pivot)"
						"   RETURNING e.\"id\", e.\"namespaceId\", e.\"priority\","
						"   e.\"eventSeq\" - 2 AS base),"
						" gone AS (DELETE FROM \"TaskExecutions\" t USING w, pivot"
						"   WHERE t.\"workflowId\" = $2::uuid"
						"   AND t.\"scheduledAt\" >= pivot.\"scheduledAt\""
						"   AND t.\"id\" <> $6::uuid),"
						" nt AS (INSERT INTO \"TaskExecutions\" (\"id\", \"workflowId\","
						"   \"namespaceId\", \"refName\", \"taskDefName\", \"taskType\","
						"   \"iteration\", \"attempt\", \"status\", \"input\", \"queueName\","
						"   \"scheduledAt\", \"updatedAt\", \"deciderSeenAt\", \"inputRef\")"
						"   SELECT $6::uuid, pivot.\"workflowId\", pivot.\"namespaceId\","
						"   pivot.\"refName\", pivot.\"taskDefName\", pivot.\"taskType\","
						"   pivot.\"iteration\", pivot.\"attempt\" + 1, 'SCHEDULED',"
						"   coalesce($4::jsonb, pivot.\"input\"), pivot.\"queueName\","
						"   clock_timestamp(), now(), NULL,"
						"   CASE WHEN $4::jsonb IS NULL THEN pivot.\"inputRef\" ELSE $8 END"
						"   FROM pivot, w"
						"   RETURNING \"id\", \"queueName\", \"taskType\", \"refName\","
						"   \"attempt\"),"
						" nq AS (INSERT INTO \"TaskQueues\" (\"queueName\", \"taskId\","
						"   \"workflowId\", \"namespaceId\", \"taskType\", \"priority\")"
						"   SELECT nt.\"queueName\", nt.\"id\", w.\"id\", w.\"namespaceId\","
						"   nt.\"taskType\", w.\"priority\" FROM nt, w"
						"   WHERE nt.\"queueName\" IS NOT NULL),"
						" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
						"   \"seq\", \"type\", \"taskId\", \"data\")"
						"   SELECT w.\"id\", w.\"namespaceId\", w.base + 1, 'WORKFLOW_RERUN',"
						"   NULL, jsonb_build_object('fromRefName', $3::text) FROM w"
						"   UNION ALL SELECT w.\"id\", w.\"namespaceId\", w.base + 2,"
						"   'TASK_SCHEDULED', nt.\"id\", jsonb_build_object('refName',"
						"   nt.\"refName\", 'attempt', nt.\"attempt\") FROM w, nt)"
						" SELECT (SELECT \"status\" FROM cur), (SELECT count(*) FROM w)");

static bool
run(struct db *db, struct db_stmt *stmt, const char *action, int n,
    const char *const *params, struct err *e)
{
	PGresult *res = db_exec(db, stmt, n, params, e);
	if (!res)
		return false;
	bool found = !PQgetisnull(res, 0, 0);
	bool applied = strcmp(PQgetvalue(res, 0, 1), "0") != 0;
	if (!found)
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", params[1]);
	else if (!applied)
		err_set(e, ERR_CONFLICT, "cannot %s workflow %s: it is %s",
			action, params[1], PQgetvalue(res, 0, 0));
	PQclear(res);
	return found && applied;
}

bool
action_terminate(struct db *db, const char *ns_id, const char *id,
		 const char *reason, struct err *e)
{
	const char *params[] = {ns_id, id, reason ? reason : "terminated"};
	PGresult *res = db_exec(db, &action_lock_stmt, 2, params, e);
	if (!res)
		return false;
	PQclear(res);
	return run(db, &action_terminate_stmt, "terminate", 3, params, e);
}

bool
action_pause(struct db *db, const char *ns_id, const char *id, struct err *e)
{
	const char *params[] = {ns_id, id};
	return run(db, &action_pause_stmt, "pause", 2, params, e);
}

bool
action_resume(struct db *db, const char *ns_id, const char *id, struct err *e)
{
	const char *params[] = {ns_id, id};
	return run(db, &action_resume_stmt, "resume", 2, params, e);
}

bool
action_retry(struct db *db, const char *ns_id, const char *id, struct err *e)
{
	char task_id[37];
	uuid_v7(task_id);
	const char *params[] = {ns_id, id, task_id};
	return run(db, &action_retry_stmt, "retry", 3, params, e);
}

struct db_stmt *const actions_repo_stmts[] = {
	&action_lock_stmt,    &action_terminate_stmt, &action_pause_stmt,
	&action_resume_stmt,  &action_retry_stmt,     &action_skip_stmt,
	&action_restart_stmt, &action_rerun_stmt,     NULL,
};

bool
action_skip(struct db *db, const char *ns_id, const char *id, const char *ref,
	    struct err *e)
{
	const char *params[] = {ns_id, id, ref};
	PGresult *res = db_exec(db, &action_skip_stmt, 3, params, e);
	if (!res)
		return false;
	bool found = !PQgetisnull(res, 0, 0);
	bool applied = strcmp(PQgetvalue(res, 0, 1), "0") != 0;
	if (!found)
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	else if (!applied)
		err_set(e, ERR_CONFLICT,
			"cannot skip task %.200s of workflow %s (%s): it has no "
			"open attempt, or the workflow has ended",
			ref, id, PQgetvalue(res, 0, 0));
	PQclear(res);
	return found && applied;
}

bool
action_restart(struct db *db, const char *ns_id, const char *id, struct err *e)
{
	const char *params[] = {ns_id, id};
	return run(db, &action_restart_stmt, "restart", 2, params, e);
}

bool
action_rerun(struct db *db, const char *ns_id, const char *id, const char *ref,
	     const char *task_input, const char *workflow_input, struct err *e)
{
	/* New inputs go to the payload store when large, as a start's;
	 * one above the maximum is refused before anything changes. */
	char *wstored = NULL, *tstored = NULL;
	char wref[48] = "", tref[48] = "";
	if (workflow_input &&
	    !payload_offload(db, ns_id, "workflow input", workflow_input,
			     strlen(workflow_input), &wstored, wref, e))
		return false;
	if (task_input &&
	    !payload_offload(db, ns_id, "task input", task_input,
			     strlen(task_input), &tstored, tref, e)) {
		free(wstored);
		return false;
	}
	char task_id[37];
	uuid_v7(task_id);
	const char *params[] = {ns_id,
				id,
				ref,
				tstored ? tstored : task_input,
				wstored ? wstored : workflow_input,
				task_id,
				wref[0] ? wref : NULL,
				tref[0] ? tref : NULL};
	PGresult *res = db_exec(db, &action_rerun_stmt, 8, params, e);
	free(wstored);
	free(tstored);
	if (!res)
		return false;
	bool found = !PQgetisnull(res, 0, 0);
	bool applied = strcmp(PQgetvalue(res, 0, 1), "0") != 0;
	if (!found)
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	else if (!applied)
		err_set(e, ERR_CONFLICT,
			"cannot rerun workflow %s from task %.200s: the workflow "
			"is %s (it must have ended) or has no such task",
			id, ref, PQgetvalue(res, 0, 0));
	PQclear(res);
	return found && applied;
}
