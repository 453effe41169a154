#include "store/subflows_repo.h"

#include "store/payload_repo.h"
#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/json.h"
#include "util/mem.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upserts the evaluation of every workflow in `src` (a CTE with
 * "workflowId" and "namespaceId"), as a worker's result does. */
#define ENQUEUE_FROM(src, reason)                                         \
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\","            \
	"   \"namespaceId\", \"reason\") SELECT DISTINCT \"workflowId\"," \
	"   \"namespaceId\", " reason " FROM " src                        \
	"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="      \
	"   EXCLUDED.\"reason\", \"enqueuedAt\" = LEAST("                 \
	"   \"DecideQueues\".\"enqueuedAt\", EXCLUDED.\"enqueuedAt\")"    \
	"   RETURNING \"workflowId\"),"

/*
 * The id of every execution comes from the decision (UUIDv7, taken moments
 * before), so "startedAt" = now() stays within SQL_EXEC_WINDOW of it.
 */
DB_STMT(subflows_start_stmt,
	"WITH r AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS r(\"id\" uuid,"
	"   \"defName\" text, \"defVersion\" int, \"definition\" jsonb,"
	"   \"input\" jsonb, \"variables\" jsonb, \"correlationId\" text,"
	"   \"priority\" int, \"parentWorkflowId\" uuid, \"parentTaskId\" uuid,"
	"   \"timeoutSeconds\" bigint, \"timeoutPolicy\" text,"
	"   \"guardTaskId\" uuid, \"inputRef\" text)),"
	" g AS (SELECT r.* FROM r WHERE r.\"guardTaskId\" IS NULL OR EXISTS"
	"   (SELECT 1 FROM \"TaskExecutions\" t WHERE t.\"workflowId\" = $3::uuid"
	"   AND t.\"id\" = r.\"guardTaskId\")),"
	" st AS (UPDATE \"TaskExecutions\" t SET \"subWorkflowId\" = g.\"id\""
	"   FROM g WHERE t.\"workflowId\" = $3::uuid AND t.\"id\" = g.\"parentTaskId\""
	"   AND g.\"parentWorkflowId\" IS NOT NULL),"
	" w AS (INSERT INTO \"WorkflowExecutions\" (\"id\", \"namespaceId\","
	"   \"defName\", \"defVersion\", \"definition\", \"status\", \"input\","
	"   \"variables\", \"correlationId\", \"priority\", \"parentWorkflowId\","
	"   \"parentTaskId\", \"eventSeq\", \"startedAt\", \"updatedAt\","
	"   \"inputRef\")"
	"   SELECT g.\"id\", $1::uuid, g.\"defName\", g.\"defVersion\","
	"   g.\"definition\", 'RUNNING', coalesce(g.\"input\", '{}'),"
	"   coalesce(g.\"variables\", '{}'), g.\"correlationId\","
	"   coalesce(g.\"priority\", 0), g.\"parentWorkflowId\", g.\"parentTaskId\","
	"   1, now(), now(), g.\"inputRef\" FROM g"
	"   RETURNING \"id\", \"namespaceId\", \"startedAt\", \"defName\","
	"   \"defVersion\", \"correlationId\", \"parentWorkflowId\"),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT \"id\", \"namespaceId\", 'start' FROM w),"
	" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
	"   \"seq\", \"type\", \"data\", \"at\")"
	"   SELECT \"id\", \"namespaceId\", 1, 'WORKFLOW_STARTED',"
	"   jsonb_strip_nulls(jsonb_build_object('name', \"defName\", 'version',"
	"   \"defVersion\", 'correlationId', \"correlationId\","
	"   'parentWorkflowId', \"parentWorkflowId\")), \"startedAt\" FROM w),"
	" tm AS (INSERT INTO \"Timers\" (\"namespaceId\", \"workflowId\","
	"   \"kind\", \"fireAt\", \"payload\")"
	"   SELECT w.\"namespaceId\", w.\"id\", 'workflowTimeout', w.\"startedAt\" +"
	"   make_interval(secs => g.\"timeoutSeconds\"),"
	"   jsonb_build_object('seconds', g.\"timeoutSeconds\", 'policy',"
	"   coalesce(g.\"timeoutPolicy\", 'TIME_OUT_WF'))"
	"   FROM w JOIN g ON g.\"id\" = w.\"id\" WHERE g.\"timeoutSeconds\" > 0)"
	" SELECT count(*) FROM w");

bool
subflows_start_executions(struct db *db, const char *ns_id,
			  const char *guard_workflow_id,
			  const char *starts_json, int *started, struct err *e)
{
	const char *params[] = {ns_id, starts_json, guard_workflow_id};
	PGresult *res = db_exec(db, &subflows_start_stmt, 3, params, e);
	if (!res)
		return false;
	*started = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

DB_STMT(subflows_finish_stmt,
	"WITH r AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS r(\"taskId\" uuid,"
	"   \"status\" text, \"output\" jsonb, \"reason\" text)),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = r.\"status\","
	"   \"output\" = coalesce(r.\"output\", te.\"output\"),"
	"   \"reasonForIncompletion\" = r.\"reason\","
	"   \"startedAt\" = coalesce(te.\"startedAt\", now()),"
	"   \"endedAt\" = now(), \"updatedAt\" = now() FROM r"
	"   WHERE te.\"workflowId\" = $1::uuid AND te.\"id\" = r.\"taskId\""
	"   AND te.\"status\" NOT IN " SQL_TASK_TERMINAL
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
	"   te.\"status\", te.\"reasonForIncompletion\")," ENQUEUE_FROM(
		"t", "'task'")
		SQL_TASKS_AFTER_D EVENTS_FROM(
			"td", "'TASK_' || s.\"status\"",
			"jsonb_strip_nulls(jsonb_build_object('reason',"
			" s.\"reasonForIncompletion\"))") " SELECT count(*) FROM t");

bool
subflows_finish_tasks(struct db *db, const char *workflow_id,
		      const char *results_json, struct err *e)
{
	const char *params[] = {workflow_id, results_json};
	return db_run(db, &subflows_finish_stmt, 2, params, e);
}

DB_STMT(subflows_arm_waits_stmt,
	"INSERT INTO \"Timers\" (\"namespaceId\", \"workflowId\", \"taskId\","
	" \"kind\", \"fireAt\", \"payload\")"
	" SELECT $2::uuid, $1::uuid, t.\"id\", 'wait', coalesce(r.\"fireAt\","
	" t.\"scheduledAt\" + make_interval(secs => coalesce(r.\"seconds\", 0))),"
	" jsonb_strip_nulls(jsonb_build_object('seconds', r.\"seconds\"))"
	" FROM jsonb_to_recordset($3::jsonb) AS r(\"taskId\" uuid,"
	" \"seconds\" bigint, \"fireAt\" timestamptz)"
	" JOIN \"TaskExecutions\" t ON t.\"workflowId\" = $1::uuid"
	" AND t.\"id\" = r.\"taskId\"");

bool
subflows_arm_waits(struct db *db, const char *workflow_id, const char *ns_id,
		   const char *waits_json, struct err *e)
{
	const char *params[] = {workflow_id, ns_id, waits_json};
	return db_run(db, &subflows_arm_waits_stmt, 3, params, e);
}

DB_STMT(subflows_outbox_stmt,
	"INSERT INTO \"OutboxEvents\" (\"namespaceId\", \"eventType\", \"sink\","
	" \"workflowId\", \"taskId\", \"payload\")"
	" SELECT $2::uuid, 'TASK_EVENT', r.\"sink\", $1::uuid, t.\"id\","
	" coalesce(r.\"payload\", '{}')"
	" FROM jsonb_to_recordset($3::jsonb) AS r(\"taskId\" uuid, \"sink\" text,"
	" \"payload\" jsonb)"
	" JOIN \"TaskExecutions\" t ON t.\"workflowId\" = $1::uuid"
	" AND t.\"id\" = r.\"taskId\"");

bool
subflows_outbox(struct db *db, const char *workflow_id, const char *ns_id,
		const char *events_json, struct err *e)
{
	const char *params[] = {workflow_id, ns_id, events_json};
	return db_run(db, &subflows_outbox_stmt, 3, params, e);
}

/*
 * The parent's id is a scalar subquery (an initplan), so the update of
 * "TaskExecutions" prunes to the parent's hash partition at execution.
 * The running children come back in the same round trip (children start
 * after their parent: the bound prunes older partitions).  A child whose
 * output was offloaded hands its placeholder and reference to the parent's
 * task as they are (a merge would hide the placeholder from the readers).
 */
DB_STMT(subflows_child_ended_stmt,
	"WITH c AS (SELECT e.\"id\", e.\"status\", e.\"output\","
	"   e.\"outputRef\", e.\"reasonForIncompletion\", e.\"parentWorkflowId\""
	"   FROM \"WorkflowExecutions\" e WHERE e.\"id\" = $1::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$1::uuid") "   AND e.\"parentWorkflowId\" IS NOT NULL"
			    "   AND e.\"status\" IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED')),"
			    " t AS (UPDATE \"TaskExecutions\" te SET \"status\" = CASE WHEN"
			    "   c.\"status\" = 'COMPLETED' THEN 'COMPLETED' ELSE 'FAILED' END,"
			    "   \"output\" = CASE WHEN c.\"outputRef\" IS NOT NULL"
			    "   THEN c.\"output\" ELSE te.\"output\" || c.\"output\" ||"
			    "   jsonb_build_object('subWorkflowId', c.\"id\") END,"
			    "   \"outputRef\" = c.\"outputRef\","
			    "   \"reasonForIncompletion\" = CASE WHEN c.\"status\" = 'COMPLETED'"
			    "   THEN NULL ELSE 'sub-workflow ' || c.\"id\" || ' ' || c.\"status\" ||"
			    "   coalesce(': ' || c.\"reasonForIncompletion\", '') END,"
			    "   \"endedAt\" = now(), \"updatedAt\" = now() FROM c"
			    "   WHERE te.\"workflowId\" = (SELECT \"parentWorkflowId\" FROM c)"
			    "   AND te.\"subWorkflowId\" = c.\"id\""
			    "   AND te.\"status\" NOT IN " SQL_TASK_TERMINAL
			    "   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
			    "   te.\"status\", te.\"reasonForIncompletion\")," ENQUEUE_FROM(
				    "t", "'subworkflow'")
				    SQL_TASKS_AFTER_D EVENTS_FROM(
					    "td", "'TASK_' || s.\"status\"",
					    "jsonb_strip_nulls(jsonb_build_object('subWorkflowId', $1::text,"
					    " 'reason', s.\"reasonForIncompletion\"))") " SELECT (SELECT \"workflowId\"::text FROM t LIMIT 1),"
											" (SELECT coalesce(string_agg(k.\"id\"::text, ','), '')"
											" FROM (SELECT r.\"id\" FROM \"WorkflowExecutions\" r"
											" WHERE r.\"parentWorkflowId\" = $1::uuid"
											" AND r.\"startedAt\" >= uuid_extract_timestamp($1::uuid) - interval '1 hour'"
											" AND r.\"status\" IN ('RUNNING', 'PAUSED') LIMIT 10000) k)");

bool
subflows_child_ended(struct db *db, const char *child_id, char parent_out[37],
		     char (**kids)[37], size_t *n_kids, struct err *e)
{
	const char *params[] = {child_id};
	PGresult *res = db_exec(db, &subflows_child_ended_stmt, 1, params, e);
	if (!res)
		return false;
	snprintf(parent_out, 37, "%s",
		 PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0));
	if (kids) {
		/* "id,id,…": UUIDs hold no commas. */
		const char *list = PQgetvalue(res, 0, 1);
		size_t n = *list ? 1 : 0;
		for (const char *c = list; *c; c++)
			n += *c == ',';
		*kids = xcalloc(n + 1, sizeof(**kids));
		*n_kids = 0;
		for (const char *c = list; *c && *n_kids < n;) {
			snprintf((*kids)[*n_kids], 37, "%.36s", c);
			(*n_kids)++;
			c += strcspn(c, ",");
			if (*c == ',')
				c++;
		}
	}
	PQclear(res);
	return true;
}

DB_STMT(subflows_ended_stmt,
	"SELECT e.\"namespaceId\"::text, e.\"status\", e.\"defName\","
	" e.\"defVersion\", e.\"definition\"::text, e.\"input\"::text,"
	" e.\"correlationId\", e.\"reasonForIncompletion\", e.\"failedTaskRef\","
	" (SELECT t.\"id\"::text FROM \"TaskExecutions\" t"
	"  WHERE t.\"workflowId\" = $1::uuid AND t.\"refName\" = e.\"failedTaskRef\""
	"  ORDER BY t.\"iteration\" DESC, t.\"attempt\" DESC LIMIT 1),"
	" e.\"priority\", e.\"failureWorkflowId\" IS NOT NULL"
	" FROM \"WorkflowExecutions\" e"
	" WHERE e.\"id\" = $1::uuid AND " SQL_EXEC_WINDOW("e", "$1::uuid"));

static char *
dup_or_null(PGresult *res, int col)
{
	return PQgetisnull(res, 0, col) ? NULL
					: xstrdup(PQgetvalue(res, 0, col));
}

bool
subflows_ended_load(struct db *db, const char *id, struct subflows_ended *out,
		    struct err *e)
{
	memset(out, 0, sizeof(*out));
	const char *params[] = {id};
	PGresult *res = db_exec(db, &subflows_ended_stmt, 1, params, e);
	if (!res)
		return false;
	bool found = PQntuples(res) == 1;
	if (found) {
		snprintf(out->ns_id, sizeof(out->ns_id), "%s",
			 PQgetvalue(res, 0, 0));
		snprintf(out->status, sizeof(out->status), "%s",
			 PQgetvalue(res, 0, 1));
		out->def_name = xstrdup(PQgetvalue(res, 0, 2));
		out->def_version = atoi(PQgetvalue(res, 0, 3));
		out->definition = dup_or_null(res, 4);
		out->input = dup_or_null(res, 5);
		out->correlation_id = dup_or_null(res, 6);
		out->reason = dup_or_null(res, 7);
		out->failed_ref = dup_or_null(res, 8);
		out->failed_task_id = dup_or_null(res, 9);
		out->priority = atoi(PQgetvalue(res, 0, 10));
		out->has_failure_workflow =
			strcmp(PQgetvalue(res, 0, 11), "t") == 0;
	} else {
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	}
	PQclear(res);
	/* An offloaded input is read back: it becomes part of the failure
	 * workflow's own input, which is offloaded again if it is large. */
	if (found && out->input && !payload_resolve_text(db, &out->input, e)) {
		subflows_ended_free(out);
		return false;
	}
	return found;
}

void
subflows_ended_free(struct subflows_ended *x)
{
	free(x->def_name);
	free(x->definition);
	free(x->input);
	free(x->correlation_id);
	free(x->reason);
	free(x->failed_ref);
	free(x->failed_task_id);
	memset(x, 0, sizeof(*x));
}

DB_STMT(subflows_set_failure_stmt,
	"UPDATE \"WorkflowExecutions\" e SET \"failureWorkflowId\" = $2::uuid"
	" WHERE e.\"id\" = $1::uuid AND " SQL_EXEC_WINDOW("e", "$1::uuid"));

bool
subflows_set_failure_workflow(struct db *db, const char *id,
			      const char *failure_id, struct err *e)
{
	const char *params[] = {id, failure_id};
	return db_run(db, &subflows_set_failure_stmt, 2, params, e);
}

/*
 * Breadth first from the root through the parent index
 * (WorkflowExecutions_parent_idx); a child starts after its parent, which
 * bounds "startedAt" below.  The recursive term is evaluated only as far
 * as the LIMIT reads.
 */
DB_STMT(subflows_tree_stmt,
	"WITH RECURSIVE tr AS ("
	"   SELECT e.\"id\", e.\"parentWorkflowId\", e.\"parentTaskId\","
	"   e.\"defName\", e.\"defVersion\", e.\"status\","
	"   e.\"reasonForIncompletion\", e.\"startedAt\", e.\"endedAt\","
	"   0 AS \"depth\" FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "   UNION ALL"
			    "   SELECT c.\"id\", c.\"parentWorkflowId\", c.\"parentTaskId\","
			    "   c.\"defName\", c.\"defVersion\", c.\"status\","
			    "   c.\"reasonForIncompletion\", c.\"startedAt\", c.\"endedAt\","
			    "   tr.\"depth\" + 1 FROM tr JOIN \"WorkflowExecutions\" c"
			    "   ON c.\"parentWorkflowId\" = tr.\"id\""
			    "   AND c.\"startedAt\" >= tr.\"startedAt\" - interval '1 hour'"
			    "   WHERE tr.\"depth\" < $3::int)"
			    " SELECT coalesce(jsonb_agg(jsonb_build_object('id', x.\"id\","
			    " 'parentWorkflowId', x.\"parentWorkflowId\", 'parentTaskId',"
			    " x.\"parentTaskId\", 'parentTaskRefName', (SELECT t.\"refName\""
			    " FROM \"TaskExecutions\" t WHERE t.\"workflowId\" = x.\"parentWorkflowId\""
			    " AND t.\"id\" = x.\"parentTaskId\"), 'name', x.\"defName\","
			    " 'version', x.\"defVersion\", 'status', x.\"status\", 'reason',"
			    " x.\"reasonForIncompletion\", 'startedAt', x.\"startedAt\","
			    " 'endedAt', x.\"endedAt\", 'depth', x.\"depth\")"
			    " ORDER BY x.\"n\"), '[]')::text"
			    " FROM (SELECT tr.*, row_number() OVER () AS \"n\" FROM"
			    " (SELECT * FROM tr LIMIT $4::int) tr) x");

bool
subflows_tree_rows(struct db *db, const char *ns_id, const char *id,
		   int max_depth, int limit, char **json_out, struct err *e)
{
	char depth[16], lim[16];
	snprintf(depth, sizeof(depth), "%d", max_depth);
	snprintf(lim, sizeof(lim), "%d", limit + 1);
	const char *params[] = {ns_id, id, depth, lim};
	PGresult *res = db_exec(db, &subflows_tree_stmt, 4, params, e);
	if (!res)
		return false;
	bool found = strcmp(PQgetvalue(res, 0, 0), "[]") != 0;
	if (found)
		*json_out = xstrdup(PQgetvalue(res, 0, 0));
	else
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	PQclear(res);
	return found;
}

/*
 * The latest attempt of the reference, changed only while it is open and a
 * gate, and only while the workflow runs (or is paused); the final SELECT
 * tells the cases apart.
 */
DB_STMT(subflows_gate_stmt,
	"WITH cur AS (SELECT e.\"id\", e.\"status\", e.\"namespaceId\","
	"   e.\"defName\", e.\"defVersion\", e.\"definition\""
	"   FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") "),"
			    " tk AS (SELECT te.\"id\", te.\"taskType\", te.\"status\","
			    "   (te.\"taskType\" IN ('WAIT', 'HUMAN') OR te.\"taskType\" <> 'SIMPLE'"
			    "   AND (SELECT " SQL_ASYNC_COMPLETE(
				    "c",
				    "te.\"refName\"") " FROM cur c)) AS gate"
						      "   FROM \"TaskExecutions\" te WHERE te.\"workflowId\" = $2::uuid"
						      "   AND te.\"refName\" = $3 AND EXISTS (SELECT 1 FROM cur)"
						      "   ORDER BY te.\"iteration\" DESC, te.\"attempt\" DESC LIMIT 1),"
						      " t AS (UPDATE \"TaskExecutions\" te SET \"status\" = $4,"
						      "   \"output\" = coalesce($5::jsonb, te.\"output\"),"
						      "   \"outputRef\" = CASE WHEN $5::jsonb IS NULL"
						      "   THEN te.\"outputRef\" ELSE $7 END,"
						      "   \"reasonForIncompletion\" = $6,"
						      "   \"startedAt\" = coalesce(te.\"startedAt\", now()),"
						      "   \"endedAt\" = now(), \"updatedAt\" = now() FROM tk"
						      "   WHERE te.\"workflowId\" = $2::uuid AND te.\"id\" = tk.\"id\""
						      "   AND tk.\"gate\""
						      "   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')"
						      "   AND EXISTS (SELECT 1 FROM cur WHERE cur.\"status\" IN"
						      "   ('RUNNING', 'PAUSED'))"
						      "   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
						      "   te.\"status\", te.\"reasonForIncompletion\")," ENQUEUE_FROM(
							      "t",
							      "'gate'") SQL_TASKS_AFTER_D
							      EVENTS_FROM(
								      "td",
								      "'TASK_' || s.\"status\"",
								      "jsonb_strip_nulls(jsonb_build_object('reason',"
								      " s.\"reasonForIncompletion\", 'by', 'api'))") " SELECT (SELECT \"status\" FROM cur), (SELECT \"taskType\" FROM tk),"
														     " (SELECT \"status\" FROM tk), (SELECT count(*) FROM t),"
														     " (SELECT \"gate\" FROM tk)");

/* The output the gate's latest attempt has now, locked until the caller's
 * transaction ends (a park or another completion waits for it). */
DB_STMT(subflows_gate_output_stmt,
	"SELECT te.\"output\"::text FROM \"TaskExecutions\" te"
	" WHERE te.\"workflowId\" = $2::uuid AND te.\"namespaceId\" = $1::uuid"
	" AND te.\"refName\" = $3"
	" ORDER BY te.\"iteration\" DESC, te.\"attempt\" DESC LIMIT 1"
	" FOR UPDATE");

/*
 * The output the gate ends with: output merged over the task's own when
 * both are objects (its own read back if it was offloaded), else output;
 * *final is its text as it is bound (the placeholder when it went to the
 * payload store, ref its reference).  No task: *final is output as given.
 */
static bool
gate_output(struct db *db, const char *ns_id, const char *id, const char *ref,
	    const char *output, char **final, char pref[48], struct err *e)
{
	*final = NULL;
	pref[0] = '\0';
	const char *params[] = {ns_id, id, ref};
	PGresult *res = db_exec(db, &subflows_gate_output_stmt, 3, params, e);
	if (!res)
		return false;
	char *have =
		PQntuples(res) == 1 ? xstrdup(PQgetvalue(res, 0, 0)) : NULL;
	PQclear(res);
	if (have && !payload_resolve_text(db, &have, e)) {
		free(have);
		return false;
	}
	json_t *given = json_loads(output, JSON_DECODE_ANY, NULL);
	json_t *own = have ? json_loads(have, JSON_DECODE_ANY, NULL) : NULL;
	free(have);
	char *text;
	if (json_is_object(own) && json_is_object(given)) {
		json_object_update(own, given);
		text = json_db_text(own);
	} else {
		text = xstrdup(output);
	}
	json_decref(own);
	json_decref(given);
	char *stored = NULL;
	bool ok = payload_offload(db, ns_id, "task output", text, strlen(text),
				  &stored, pref, e);
	if (ok && stored) {
		free(text);
		text = stored;
	}
	if (ok)
		*final = text;
	else
		free(text);
	return ok;
}

/*
 * Without an output: one statement.  With one, the merge is made here (the
 * task's output may be a placeholder, and the result may need the payload
 * store), so the task's row is locked from the read to the update.
 */
bool
subflows_complete_gate(struct db *db, const char *ns_id, const char *id,
		       const char *ref, const char *status, const char *output,
		       const char *reason, struct err *e)
{
	char *final = NULL;
	char pref[48] = "";
	if (output) {
		if (!db_begin(db, e))
			return false;
		if (!gate_output(db, ns_id, id, ref, output, &final, pref, e)) {
			db_rollback(db);
			return false;
		}
	}
	const char *params[] = {
		ns_id, id, ref, status, final, reason, pref[0] ? pref : NULL,
	};
	PGresult *res = db_exec(db, &subflows_gate_stmt, 7, params, e);
	free(final);
	if (!res) {
		if (output)
			db_rollback(db);
		return false;
	}
	bool ok = false;
	if (PQgetisnull(res, 0, 0))
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	else if (PQgetisnull(res, 0, 1))
		err_set(e, ERR_NOT_FOUND, "workflow %s has no task %.200s", id,
			ref);
	else if (strcmp(PQgetvalue(res, 0, 4), "t") != 0)
		err_set(e, ERR_CONFLICT,
			"task %.200s is a %s task: only WAIT and HUMAN tasks "
			"and tasks declared asyncComplete are completed here",
			ref, PQgetvalue(res, 0, 1));
	else if (strcmp(PQgetvalue(res, 0, 3), "0") == 0)
		err_set(e, ERR_CONFLICT,
			"task %.200s of workflow %s is %s and the workflow %s: "
			"only an open task of a running workflow can be "
			"completed",
			ref, id, PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 0));
	else
		ok = true;
	PQclear(res);
	if (output) {
		if (ok)
			ok = db_commit(db, e);
		else
			db_rollback(db);
	}
	return ok;
}

DB_STMT(subflows_failed_task_stmt,
	"SELECT t.\"taskType\", coalesce(t.\"subWorkflowId\"::text, ''),"
	" coalesce((SELECT c.\"status\" FROM \"WorkflowExecutions\" c"
	"  WHERE c.\"id\" = t.\"subWorkflowId\" AND " SQL_EXEC_WINDOW(
		"c",
		"t.\"subWorkflowId\"") "), '')"
				       " FROM \"WorkflowExecutions\" e JOIN \"TaskExecutions\" t"
				       " ON t.\"workflowId\" = $2::uuid AND t.\"refName\" = e.\"failedTaskRef\""
				       " WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
					       "e",
					       "$2::uuid") " AND e.\"status\" IN ('FAILED', 'TIMED_OUT')"
							   " ORDER BY t.\"iteration\" DESC, t.\"attempt\" DESC LIMIT 1");

bool
subflows_failed_task(struct db *db, const char *ns_id, const char *id,
		     char sub_id[37], char child_status[16], bool *found,
		     struct err *e)
{
	const char *params[] = {ns_id, id};
	PGresult *res = db_exec(db, &subflows_failed_task_stmt, 2, params, e);
	if (!res)
		return false;
	*found = PQntuples(res) == 1;
	sub_id[0] = child_status[0] = '\0';
	if (*found && strcmp(PQgetvalue(res, 0, 0), "SUB_WORKFLOW") == 0) {
		snprintf(sub_id, 37, "%s", PQgetvalue(res, 0, 1));
		snprintf(child_status, 16, "%s", PQgetvalue(res, 0, 2));
	}
	PQclear(res);
	return true;
}

/* clang-format off */
struct db_stmt *const subflows_repo_stmts[] = {
	&subflows_start_stmt,
	&subflows_finish_stmt,
	&subflows_arm_waits_stmt,
	&subflows_outbox_stmt,
	&subflows_child_ended_stmt,
	&subflows_ended_stmt,
	&subflows_set_failure_stmt,
	&subflows_tree_stmt,
	&subflows_gate_stmt,
	&subflows_gate_output_stmt,
	&subflows_failed_task_stmt,
	NULL,
};
/* clang-format on */
