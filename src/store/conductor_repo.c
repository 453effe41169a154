#include "store/conductor_repo.h"

#include "store/payload_repo.h"
#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Epoch milliseconds of a timestamptz, 0 when NULL (Conductor's "unset"). */
#define MS(x) "coalesce((extract(epoch FROM " x ") * 1000)::bigint, 0)"

/* ISO 8601 in UTC with milliseconds, "" when NULL (WorkflowSummary's). */
#define ISO(x)                                       \
	"coalesce(to_char(" x " AT TIME ZONE 'UTC'," \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), '')"

/* Conductor's Task: t a "TaskExecutions" row, e its execution. */
#define COND_TASK_JSON(t, e)                                                                                                                                         \
	"jsonb_build_object('taskId', " t ".\"id\", 'taskType', CASE WHEN " t                                                                                        \
	".\"taskType\" = 'SIMPLE' THEN " t ".\"taskDefName\" ELSE " t                                                                                                \
	".\"taskType\" END, 'taskDefName', " t ".\"taskDefName\","                                                                                                   \
	" 'referenceTaskName', " t ".\"refName\", 'status', " t ".\"status\","                                                                                       \
	" 'inputData', " t ".\"input\", 'outputData', " t ".\"output\","                                                                                             \
	" 'retryCount', " t ".\"attempt\", 'iteration', " t ".\"iteration\","                                                                                        \
	" 'loopOverTask', " t ".\"iteration\" > 0, 'pollCount', " t                                                                                                  \
	".\"pollCount\", 'seq', (SELECT count(*) FROM \"TaskExecutions\" sq"                                                                                         \
	" WHERE sq.\"workflowId\" = " t ".\"workflowId\" AND"                                                                                                        \
	" (sq.\"scheduledAt\", sq.\"id\") <= (" t ".\"scheduledAt\", " t                                                                                             \
	".\"id\")), 'scheduledTime', " MS(t ".\"scheduledAt\"") ", 'startTime', " MS(t ".\"startedAt\"") ", 'endTime', " MS(t ".\"endedAt\"") ", 'updateTime', " MS( \
		t                                                                                                                                                    \
		".\"updatedAt\"") ", 'startDelayInSeconds', " t                                                                                                      \
				  ".\"startDelaySeconds\","                                                                                                          \
				  " 'callbackAfterSeconds', " t                                                                                                      \
				  ".\"callbackAfterSeconds\","                                                                                                       \
				  " 'workflowInstanceId', " t                                                                                                        \
				  ".\"workflowId\", 'workflowType', " e                                                                                              \
				  ".\"defName\", 'correlationId', " e                                                                                                \
				  ".\"correlationId\","                                                                                                              \
				  " 'workflowPriority', " e                                                                                                          \
				  ".\"priority\", 'workerId', " t                                                                                                    \
				  ".\"workerId\", 'reasonForIncompletion', " t                                                                                       \
				  ".\"reasonForIncompletion\", 'subWorkflowId', " t                                                                                  \
				  ".\"subWorkflowId\", 'executed', " t                                                                                               \
				  ".\"deciderSeenAt\" IS NOT NULL,"                                                                                                  \
				  " 'retried', EXISTS (SELECT 1 FROM \"TaskExecutions\" ra"                                                                          \
				  " WHERE ra.\"workflowId\" = " t                                                                                                    \
				  ".\"workflowId\" AND ra.\"refName\" = " t                                                                                          \
				  ".\"refName\" AND ra.\"iteration\" = " t                                                                                           \
				  ".\"iteration\""                                                                                                                   \
				  " AND ra.\"attempt\" > " t                                                                                                         \
				  ".\"attempt\"), 'domain', NULL,"                                                                                                   \
				  " 'workflowTask', jsonb_build_object('name', " t                                                                                   \
				  ".\"taskDefName\","                                                                                                                \
				  " 'taskReferenceName', " t                                                                                                         \
				  ".\"refName\", 'type', " t ".\"taskType\"))"

/* Conductor's Workflow, without its tasks. */
#define COND_WF_JSON(e)                                                                                          \
	"jsonb_build_object('workflowId', " e ".\"id\", 'workflowName', " e                                      \
	".\"defName\", 'workflowVersion', " e ".\"defVersion\", 'status', " e                                    \
	".\"status\", 'input', " e ".\"input\", 'output', " e ".\"output\","                                     \
	" 'variables', " e ".\"variables\", 'correlationId', " e                                                 \
	".\"correlationId\", 'idempotencyKey', " e ".\"idempotencyKey\","                                        \
	" 'priority', " e ".\"priority\", 'parentWorkflowId', " e                                                \
	".\"parentWorkflowId\", 'parentWorkflowTaskId', " e                                                      \
	".\"parentTaskId\", 'reasonForIncompletion', " e                                                         \
	".\"reasonForIncompletion\", 'failedReferenceTaskNames', CASE WHEN " e                                   \
	".\"failedTaskRef\" IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(" e                                  \
	".\"failedTaskRef\") END, 'createdBy', " e ".\"createdBy\","                                             \
	" 'createTime', " MS(e ".\"startedAt\"") ", 'startTime', " MS(e ".\"startedAt\"") ", 'updateTime', " MS( \
		e                                                                                                \
		".\"updatedAt\"") ", 'endTime', " MS(e                                                           \
						     ".\"endedAt\"") ", 'taskToDomain', '{}'::jsonb,"            \
								     " 'lastRetriedTime', 0)"

/* The tasks of execution e, oldest first. */
#define COND_WF_TASKS(e)                                                          \
	"jsonb_build_object('tasks', coalesce((SELECT jsonb_agg(" COND_TASK_JSON( \
		"t",                                                              \
		e) " ORDER BY t.\"scheduledAt\", t.\"id\")"                       \
		   " FROM \"TaskExecutions\" t WHERE t.\"workflowId\" = " e       \
		   ".\"id\"), '[]'::jsonb))"

/* Conductor's WorkflowSummary (times as text, input and output as JSON
 * text, as Conductor's own). */
#define COND_SUMMARY_JSON(e)                                                                                                 \
	"jsonb_build_object('workflowId', " e ".\"id\", 'workflowType', " e                                                  \
	".\"defName\", 'version', " e ".\"defVersion\", 'correlationId', " e                                                 \
	".\"correlationId\", 'status', " e                                                                                   \
	".\"status\", 'startTime', " ISO(e ".\"startedAt\"") ", 'updateTime', " ISO(e ".\"updatedAt\"") ", 'endTime', " ISO( \
		e                                                                                                            \
		".\"endedAt\"") ", 'input', " e                                                                              \
				".\"input\"::text, 'output', " e                                                             \
				".\"output\"::text,"                                                                         \
				" 'reasonForIncompletion', " e                                                               \
				".\"reasonForIncompletion\","                                                                \
				" 'executionTime', CASE WHEN " e                                                             \
				".\"endedAt\" IS NULL THEN 0 ELSE "                                                          \
				"(extract(epoch FROM " e ".\"endedAt\" - " e                                                 \
				".\"startedAt\") * 1000)"                                                                    \
				"::bigint END, 'failedReferenceTaskNames', coalesce(" e                                      \
				".\"failedTaskRef\", ''), 'priority', " e                                                    \
				".\"priority\","                                                                             \
				" 'idempotencyKey', " e                                                                      \
				".\"idempotencyKey\", 'createdBy', " e                                                       \
				".\"createdBy\")"

void
cond_task_loc_free(struct cond_task_loc *l)
{
	free(l->def_name);
	free(l->ref_name);
	free(l->leased_by);
	memset(l, 0, sizeof(*l));
}

#define LOC_COLUMNS                                                          \
	"SELECT t.\"workflowId\"::text, t.\"id\"::text, t.\"status\","       \
	" t.\"taskDefName\", t.\"refName\", q.\"leasedBy\", q.\"taskId\" IS" \
	" NOT NULL FROM \"TaskExecutions\" t LEFT JOIN \"TaskQueues\" q ON"  \
	" q.\"queueName\" = t.\"queueName\" AND q.\"taskId\" = t.\"id\""

DB_STMT(cond_task_locate_stmt,
	LOC_COLUMNS " WHERE t.\"namespaceId\" = $1::uuid"
		    " AND t.\"workflowId\" = $2::uuid AND t.\"id\" = $3::uuid");

DB_STMT(cond_task_by_ref_stmt, LOC_COLUMNS
	" WHERE t.\"namespaceId\" = $1::uuid"
	" AND t.\"workflowId\" = $2::uuid AND t.\"refName\" = $3"
	" ORDER BY t.\"iteration\" DESC, t.\"attempt\" DESC LIMIT 1");

/* See the header: the id's own time bounds "scheduledAt". */
DB_STMT(cond_task_workflow_stmt,
	"SELECT t.\"workflowId\"::text FROM \"TaskExecutions\" t"
	" WHERE t.\"namespaceId\" = $1::uuid AND t.\"id\" = $2::uuid"
	" AND t.\"scheduledAt\" >= uuid_extract_timestamp($2::uuid) -"
	" interval '10 minutes' AND t.\"scheduledAt\" <="
	" uuid_extract_timestamp($2::uuid) + interval '10 minutes' LIMIT 1");

static bool
read_loc(PGresult *res, struct cond_task_loc *out, const char *what,
	 struct err *e)
{
	memset(out, 0, sizeof(*out));
	if (PQntuples(res) != 1) {
		err_set(e, ERR_NOT_FOUND, "task %.200s not found", what);
		PQclear(res);
		return false;
	}
	snprintf(out->workflow_id, sizeof(out->workflow_id), "%s",
		 PQgetvalue(res, 0, 0));
	snprintf(out->task_id, sizeof(out->task_id), "%s",
		 PQgetvalue(res, 0, 1));
	snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(res, 0, 2));
	out->def_name = xstrdup(PQgetvalue(res, 0, 3));
	out->ref_name = xstrdup(PQgetvalue(res, 0, 4));
	if (!PQgetisnull(res, 0, 5))
		out->leased_by = xstrdup(PQgetvalue(res, 0, 5));
	out->queued = strcmp(PQgetvalue(res, 0, 6), "t") == 0;
	PQclear(res);
	return true;
}

bool
cond_task_locate(struct db *db, const char *ns_id, const char *wf_id,
		 const char *task_id, struct cond_task_loc *out, struct err *e)
{
	char found[37];
	memset(out, 0, sizeof(*out));
	if (!wf_id) {
		const char *p[] = {ns_id, task_id};
		PGresult *res = db_exec(db, &cond_task_workflow_stmt, 2, p, e);
		if (!res)
			return false;
		bool ok = PQntuples(res) == 1;
		if (ok)
			snprintf(found, sizeof(found), "%s",
				 PQgetvalue(res, 0, 0));
		PQclear(res);
		if (!ok) {
			err_set(e, ERR_NOT_FOUND, "task %s not found", task_id);
			return false;
		}
		wf_id = found;
	}
	const char *p[] = {ns_id, wf_id, task_id};
	PGresult *res = db_exec(db, &cond_task_locate_stmt, 3, p, e);
	if (!res)
		return false;
	return read_loc(res, out, task_id, e);
}

bool
cond_task_by_ref(struct db *db, const char *ns_id, const char *wf_id,
		 const char *ref, struct cond_task_loc *out, struct err *e)
{
	const char *p[] = {ns_id, wf_id, ref};
	PGresult *res = db_exec(db, &cond_task_by_ref_stmt, 3, p, e);
	if (!res)
		return false;
	char what[400];
	snprintf(what, sizeof(what), "%.120s of workflow %s", ref, wf_id);
	return read_loc(res, out, what, e);
}

/* Offloaded payloads read back (store/payload_repo.h). */
static bool
resolved(struct db *db, char **json_out, struct err *e)
{
	if (payload_resolve_text(db, json_out, e))
		return true;
	free(*json_out);
	*json_out = NULL;
	return false;
}

/* One text value from a one-row, one-column result. */
static bool
one_text(struct db *db, PGresult *res, char **json_out, struct err *e)
{
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return resolved(db, json_out, e);
}

DB_STMT(cond_tasks_stmt,
	"SELECT coalesce(jsonb_agg(" COND_TASK_JSON(
		"t",
		"e") " ORDER BY r.\"n\"), '[]')::text"
		     " FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY"
		     " AS r(\"v\", \"n\")"
		     " JOIN \"TaskExecutions\" t ON t.\"workflowId\" ="
		     " (r.\"v\"->>'workflowId')::uuid AND t.\"id\" ="
		     " (r.\"v\"->>'id')::uuid AND t.\"namespaceId\" = $1::uuid"
		     " JOIN \"WorkflowExecutions\" e ON e.\"id\" = t.\"workflowId\""
		     " AND " SQL_EXEC_WINDOW("e", "t.\"workflowId\""));

bool
cond_tasks_json(struct db *db, const char *ns_id, const char *tasks_json,
		char **json_out, struct err *e)
{
	const char *p[] = {ns_id, tasks_json};
	return one_text(db, db_exec(db, &cond_tasks_stmt, 2, p, e), json_out,
			e);
}

DB_STMT(cond_workflow_stmt,
	"SELECT (" COND_WF_JSON("e") " || CASE WHEN $3::bool THEN " COND_WF_TASKS(
		"e") " ELSE"
		     " '{}'::jsonb END)::text"
		     " FROM \"WorkflowExecutions\" e"
		     " WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid"
		     " AND " SQL_EXEC_WINDOW("e", "$2::uuid"));

bool
cond_workflow_json(struct db *db, const char *ns_id, const char *id,
		   bool include_tasks, char **json_out, struct err *e)
{
	const char *p[] = {ns_id, id, include_tasks ? "true" : "false"};
	PGresult *res = db_exec(db, &cond_workflow_stmt, 3, p, e);
	if (!res)
		return false;
	bool found = PQntuples(res) == 1;
	if (found)
		*json_out = xstrdup(PQgetvalue(res, 0, 0));
	else
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	PQclear(res);
	return found && resolved(db, json_out, e);
}

/*
 * Conductor pages by offset ("start"), so this does too; the matches are
 * counted for totalHits.  Filters are "$n IS NULL OR …".
 */
DB_STMT(cond_search_stmt,
	"WITH m AS (SELECT e.* FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"namespaceId\" = $1::uuid"
	"   AND ($2::jsonb IS NULL OR e.\"status\" IN"
	"        (SELECT jsonb_array_elements_text($2::jsonb)))"
	"   AND ($3::text IS NULL OR e.\"defName\" = $3::text)"
	"   AND ($4::uuid IS NULL OR e.\"id\" = $4::uuid)"
	"   AND ($5::text IS NULL OR e.\"correlationId\" = $5::text)"
	"   AND ($6::bigint IS NULL OR e.\"startedAt\" >"
	"        to_timestamp($6::bigint / 1000.0))"
	"   AND ($7::bigint IS NULL OR e.\"startedAt\" <"
	"        to_timestamp($7::bigint / 1000.0))"
	"   AND ($8::text IS NULL OR e.\"defName\" = $8 OR"
	"        e.\"correlationId\" = $8 OR e.\"id\"::text = $8 OR"
	"        strpos(e.\"input\"::text, $8) > 0 OR"
	"        strpos(e.\"output\"::text, $8) > 0)),"
	" p AS (SELECT * FROM m ORDER BY"
	"   CASE WHEN $11::bool THEN m.\"startedAt\" END ASC,"
	"   CASE WHEN NOT $11::bool THEN m.\"startedAt\" END DESC, m.\"id\""
	"   LIMIT $9::int OFFSET $10::int)"
	" SELECT jsonb_build_object('totalHits', (SELECT count(*) FROM m),"
	"   'results', coalesce((SELECT jsonb_agg(" COND_SUMMARY_JSON(
		"p") " ORDER BY CASE WHEN $11::bool THEN p.\"startedAt\" END ASC,"
		     " CASE WHEN NOT $11::bool THEN p.\"startedAt\" END DESC,"
		     " p.\"id\") FROM p), '[]'::jsonb))::text");

bool
cond_search_json(struct db *db, const char *ns_id, const struct cond_search *s,
		 char **json_out, struct err *e)
{
	char size[24], start[24];
	snprintf(size, sizeof(size), "%ld", s->size);
	snprintf(start, sizeof(start), "%ld", s->start);
	const char *p[] = {
		ns_id,
		s->statuses,
		s->workflow_type,
		s->workflow_id,
		s->correlation_id,
		s->start_after_ms,
		s->start_before_ms,
		s->free_text,
		size,
		start,
		s->ascending ? "true" : "false",
	};
	return one_text(db, db_exec(db, &cond_search_stmt, 11, p, e), json_out,
			e);
}

DB_STMT(cond_correlated_stmt,
	"SELECT coalesce(jsonb_agg(" COND_WF_JSON("e") " || CASE WHEN $5::bool THEN " COND_WF_TASKS(
		"e") " ELSE"
		     " '{}'::jsonb END ORDER BY e.\"startedAt\" DESC), '[]')::text"
		     " FROM \"WorkflowExecutions\" e"
		     " WHERE e.\"namespaceId\" = $1::uuid AND e.\"defName\" = $2"
		     " AND e.\"correlationId\" = $3"
		     " AND ($4::bool OR e.\"status\" IN ('RUNNING', 'PAUSED'))");

bool
cond_correlated_json(struct db *db, const char *ns_id, const char *name,
		     const char *correlation_id, bool include_closed,
		     bool include_tasks, char **json_out, struct err *e)
{
	const char *p[] = {ns_id, name, correlation_id,
			   include_closed ? "true" : "false",
			   include_tasks ? "true" : "false"};
	return one_text(db, db_exec(db, &cond_correlated_stmt, 5, p, e),
			json_out, e);
}

DB_STMT(cond_running_stmt,
	"SELECT coalesce(jsonb_agg(e.\"id\"::text ORDER BY e.\"startedAt\"),"
	" '[]')::text FROM \"WorkflowExecutions\" e"
	" WHERE e.\"namespaceId\" = $1::uuid AND e.\"defName\" = $2"
	" AND e.\"status\" = 'RUNNING'"
	" AND ($3::int = 0 OR e.\"defVersion\" = $3::int)");

bool
cond_running_json(struct db *db, const char *ns_id, const char *name,
		  int version, char **json_out, struct err *e)
{
	char v[16];
	snprintf(v, sizeof(v), "%d", version);
	const char *p[] = {ns_id, name, v};
	return one_text(db, db_exec(db, &cond_running_stmt, 3, p, e), json_out,
			e);
}

DB_STMT(cond_task_progress_stmt,
	"UPDATE \"TaskExecutions\" SET \"output\" = $4::jsonb,"
	" \"outputRef\" = $5, \"updatedAt\" = now()"
	" WHERE \"namespaceId\" = $1::uuid"
	" AND \"workflowId\" = $2::uuid AND \"id\" = $3::uuid"
	" AND \"status\" IN ('SCHEDULED', 'IN_PROGRESS')");

bool
cond_task_progress(struct db *db, const char *ns_id, const char *wf_id,
		   const char *task_id, const char *output_json, struct err *e)
{
	char *stored = NULL;
	char ref[48];
	if (!payload_offload(db, ns_id, "task output", output_json,
			     strlen(output_json), &stored, ref, e))
		return false;
	const char *p[] = {ns_id, wf_id, task_id, stored ? stored : output_json,
			   ref[0] ? ref : NULL};
	PGresult *res = db_exec(db, &cond_task_progress_stmt, 5, p, e);
	free(stored);
	if (!res)
		return false;
	bool ok = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!ok)
		err_set(e, ERR_CONFLICT, "task %s has already finished",
			task_id);
	return ok;
}

DB_STMT(cond_queue_size_stmt,
	"SELECT count(*) FROM \"TaskQueues\""
	" WHERE \"queueName\" = $1 AND \"leasedBy\" IS NULL");

bool
cond_queue_size(struct db *db, const char *queue, int64_t *n, struct err *e)
{
	const char *p[] = {queue};
	PGresult *res = db_exec(db, &cond_queue_size_stmt, 1, p, e);
	if (!res)
		return false;
	*n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}

/* clang-format off */
struct db_stmt *const conductor_repo_stmts[] = {
	&cond_task_locate_stmt,
	&cond_task_by_ref_stmt,
	&cond_task_workflow_stmt,
	&cond_tasks_stmt,
	&cond_workflow_stmt,
	&cond_search_stmt,
	&cond_correlated_stmt,
	&cond_running_stmt,
	&cond_task_progress_stmt,
	&cond_queue_size_stmt,
	NULL,
};
/* clang-format on */
