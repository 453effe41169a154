#include "store/decide_repo.h"

#include "store/payload_repo.h"
#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/json.h"
#include "util/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Due rows only: a postponed evaluation carries a future "enqueuedAt". */
DB_STMT(decide_claim_stmt, "SELECT \"workflowId\"::text FROM \"DecideQueues\""
			   " WHERE \"enqueuedAt\" <= now()"
			   " LIMIT $1::int FOR UPDATE SKIP LOCKED");

/* The window over the whole batch prunes to the partitions its ids can
 * live in (initplans: pruned at execution). */
DB_STMT(decide_load_executions,
	"SELECT e.\"id\"::text, e.\"namespaceId\"::text, n.\"name\","
	" e.\"status\", e.\"version\", e.\"defName\", e.\"defVersion\","
	" e.\"definition\"::text, e.\"input\"::text, e.\"variables\"::text,"
	" e.\"correlationId\", e.\"priority\", e.\"startedAt\"::text"
	" FROM \"WorkflowExecutions\" e"
	" JOIN \"Namespaces\" n ON n.\"id\" = e.\"namespaceId\""
	" WHERE e.\"id\" = ANY($1::uuid[])"
	" AND e.\"startedAt\" >= (SELECT min(uuid_extract_timestamp(x))"
	"   FROM unnest($1::uuid[]) x) - interval '1 hour'"
	" AND e.\"startedAt\" < (SELECT max(uuid_extract_timestamp(x))"
	"   FROM unnest($1::uuid[]) x) + interval '1 hour'");

DB_STMT(decide_dequeue_stmt,
	"DELETE FROM \"DecideQueues\" WHERE \"workflowId\" = $1::uuid");

static json_t *
parse_or_null(PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return NULL;
	return json_loads(PQgetvalue(res, row, col), JSON_DECODE_ANY, NULL);
}

static char *
dup_or_null(PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL
					  : xstrdup(PQgetvalue(res, row, col));
}

bool
decide_dequeue(struct db *db, const char *workflow_id, struct err *e)
{
	const char *params[] = {workflow_id};
	return db_run(db, &decide_dequeue_stmt, 1, params, e);
}

bool
decide_claim(struct db *db, int limit, struct decide_batch *out, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {lim};
	memset(out, 0, sizeof(*out));
	PGresult *res = db_exec(db, &decide_claim_stmt, 1, params, e);
	if (!res)
		return false;
	int n = PQntuples(res);
	if (n == 0) {
		PQclear(res);
		return true;
	}
	struct strbuf ids = STRBUF_INIT;
	sb_putc(&ids, '{');
	for (int i = 0; i < n; i++)
		sb_printf(&ids, "%s%s", i ? "," : "", PQgetvalue(res, i, 0));
	sb_putc(&ids, '}');
	PQclear(res);

	const char *lparams[] = {sb_str(&ids)};
	res = db_exec(db, &decide_load_executions, 1, lparams, e);
	if (!res) {
		sb_free(&ids);
		return false;
	}
	int found = PQntuples(res);
	out->items = xcalloc((size_t)found + 1, sizeof(*out->items));
	for (int i = 0; i < found; i++) {
		struct loaded_execution *x = &out->items[i];
		snprintf(x->id, sizeof(x->id), "%s", PQgetvalue(res, i, 0));
		snprintf(x->ns_id, sizeof(x->ns_id), "%s",
			 PQgetvalue(res, i, 1));
		x->ns_name = xstrdup(PQgetvalue(res, i, 2));
		x->status = xstrdup(PQgetvalue(res, i, 3));
		x->version = strtoll(PQgetvalue(res, i, 4), NULL, 10);
		x->def_name = xstrdup(PQgetvalue(res, i, 5));
		x->def_version = atoi(PQgetvalue(res, i, 6));
		x->definition = parse_or_null(res, i, 7);
		x->input = parse_or_null(res, i, 8);
		x->variables = parse_or_null(res, i, 9);
		x->correlation_id = dup_or_null(res, i, 10);
		x->priority = atoi(PQgetvalue(res, i, 11));
		x->started_at = xstrdup(PQgetvalue(res, i, 12));
	}
	out->n = (size_t)found;
	PQclear(res);
	for (size_t i = 0; i < out->n; i++) {
		if (!payload_resolve_json(db, &out->items[i].input, e)) {
			sb_free(&ids);
			return false;
		}
	}

	/* A queued evaluation whose execution is gone (dropped with its
	 * partition) would otherwise be claimed forever. */
	if ((int)out->n < n) {
		const char *p = sb_str(&ids) + 1;
		while (*p && *p != '}') {
			char id[37];
			snprintf(id, sizeof(id), "%.36s", p);
			bool known = false;
			for (size_t i = 0; i < out->n && !known; i++)
				known = strcmp(out->items[i].id, id) == 0;
			if (!known && !decide_dequeue(db, id, e)) {
				sb_free(&ids);
				return false;
			}
			p += 36;
			if (*p == ',')
				p++;
		}
	}
	sb_free(&ids);
	return true;
}

#define TASK_COLUMNS                                                          \
	" t.\"id\"::text, t.\"workflowId\"::text, t.\"refName\","             \
	" t.\"taskDefName\", t.\"taskType\", t.\"iteration\", t.\"attempt\"," \
	" t.\"status\", t.\"input\"::text, t.\"output\"::text,"               \
	" t.\"reasonForIncompletion\", t.\"deciderSeenAt\" IS NOT NULL,"      \
	" t.\"endedAt\" IS NOT NULL, t.\"scheduledAt\"::text,"                \
	" t.\"endedAt\"::text, t.\"forkRef\""

/* An open task queued for a worker is loaded without its payload unless
 * an expression reads it: a wide fork's frontier stays cheap to load. */
#define FRONTIER_COLUMNS                                                      \
	" t.\"id\"::text, t.\"workflowId\"::text, t.\"refName\","             \
	" t.\"taskDefName\", t.\"taskType\", t.\"iteration\", t.\"attempt\"," \
	" t.\"status\", CASE WHEN " PAYLOAD_NEEDED " THEN t.\"input\"::text"  \
	" END, CASE WHEN " PAYLOAD_NEEDED " THEN t.\"output\"::text END,"     \
	" t.\"reasonForIncompletion\", t.\"deciderSeenAt\" IS NOT NULL,"      \
	" t.\"endedAt\" IS NOT NULL, t.\"scheduledAt\"::text,"                \
	" t.\"endedAt\"::text, t.\"forkRef\""
#define PAYLOAD_NEEDED                                                  \
	"(t.\"queueName\" IS NULL OR EXISTS (SELECT 1 FROM"             \
	" jsonb_to_recordset($2::jsonb) AS p(\"w\" uuid, \"ref\" text)" \
	" WHERE p.\"w\" = t.\"workflowId\" AND p.\"ref\" = t.\"refName\"))"

/*
 * Three index paths, one statement: the frontier (partial frontier index;
 * the predicate repeats the index's, so the planner can use it), the
 * unprocessed (partial unprocessed index), and the latest reacted-to
 * attempt of each reference the definition reads (identity index, one
 * probe per reference: joined the other way round it was planned as a
 * scan of every task ever retained, on every batch).
 */
DB_STMT(decide_load_tasks_stmt,
	"SELECT" FRONTIER_COLUMNS " FROM \"TaskExecutions\" t"
	" WHERE t.\"workflowId\" = ANY($1::uuid[])"
	" AND t.\"status\" NOT IN " SQL_TASK_TERMINAL " UNION ALL"
	" SELECT" TASK_COLUMNS " FROM \"TaskExecutions\" t"
	" WHERE t.\"workflowId\" = ANY($1::uuid[])"
	" AND t.\"endedAt\" IS NOT NULL AND t.\"deciderSeenAt\" IS NULL"
	" UNION ALL"
	" SELECT * FROM (SELECT x.* FROM (SELECT DISTINCT \"w\", \"ref\" FROM"
	" jsonb_to_recordset($2::jsonb) AS p(\"w\" uuid, \"ref\" text)) r"
	" CROSS JOIN LATERAL (SELECT" TASK_COLUMNS " FROM \"TaskExecutions\" t"
	" WHERE t.\"workflowId\" = r.\"w\" AND t.\"refName\" = r.\"ref\""
	" AND t.\"deciderSeenAt\" IS NOT NULL"
	" ORDER BY t.\"iteration\" DESC, t.\"attempt\" DESC LIMIT 1) x"
	" ORDER BY r.\"w\", r.\"ref\") latest");

static struct loaded_execution *
find_execution(struct decide_batch *b, const char *id)
{
	for (size_t i = 0; i < b->n; i++)
		if (strcmp(b->items[i].id, id) == 0)
			return &b->items[i];
	return NULL;
}

static bool
ref_listed(const json_t *refs, const char *ref)
{
	size_t i;
	const json_t *r;
	json_array_foreach (refs, i, r) {
		if (strcmp(json_string_value(r), ref) == 0)
			return true;
	}
	return false;
}

bool
decide_load_tasks(struct db *db, struct decide_batch *b, json_t *const *refs,
		  struct err *e)
{
	if (b->n == 0)
		return true;
	struct strbuf ids = STRBUF_INIT;
	json_t *pairs = json_array();
	sb_putc(&ids, '{');
	for (size_t i = 0; i < b->n; i++) {
		sb_printf(&ids, "%s%s", i ? "," : "", b->items[i].id);
		size_t k;
		json_t *ref;
		json_array_foreach (refs[i], k, ref) {
			json_array_append_new(pairs, json_pack("{s:s,s:O}", "w",
							       b->items[i].id,
							       "ref", ref));
		}
	}
	sb_putc(&ids, '}');
	char *pairs_text = json_db_text(pairs);
	json_decref(pairs);
	const char *params[] = {sb_str(&ids), pairs_text};
	PGresult *res = db_exec(db, &decide_load_tasks_stmt, 2, params, e);
	sb_free(&ids);
	free(pairs_text);
	if (!res)
		return false;

	int n = PQntuples(res);
	/* Room for every row up front: growing one row at a time copies the
	 * whole array per row (a wide frontier made that quadratic). */
	for (size_t k = 0; k < b->n; k++) {
		size_t rows = 0;
		for (int i = 0; i < n; i++)
			rows += strcmp(PQgetvalue(res, i, 1), b->items[k].id) ==
				0;
		if (rows)
			b->items[k].tasks =
				xrealloc(b->items[k].tasks,
					 (b->items[k].n_tasks + rows) *
						 sizeof(*b->items[k].tasks));
	}
	for (int i = 0; i < n; i++) {
		struct loaded_execution *x =
			find_execution(b, PQgetvalue(res, i, 1));
		if (!x)
			continue;
		struct loaded_task *t = &x->tasks[x->n_tasks++];
		memset(t, 0, sizeof(*t));
		snprintf(t->id, sizeof(t->id), "%s", PQgetvalue(res, i, 0));
		snprintf(t->workflow_id, sizeof(t->workflow_id), "%s",
			 PQgetvalue(res, i, 1));
		t->ref = xstrdup(PQgetvalue(res, i, 2));
		t->task_def_name = xstrdup(PQgetvalue(res, i, 3));
		t->task_type = xstrdup(PQgetvalue(res, i, 4));
		t->iteration = atoi(PQgetvalue(res, i, 5));
		t->attempt = atoi(PQgetvalue(res, i, 6));
		t->status = xstrdup(PQgetvalue(res, i, 7));
		t->input = parse_or_null(res, i, 8);
		t->output = parse_or_null(res, i, 9);
		t->reason = dup_or_null(res, i, 10);
		t->seen = strcmp(PQgetvalue(res, i, 11), "t") == 0;
		t->terminal = strcmp(PQgetvalue(res, i, 12), "t") == 0;
		t->scheduled_at = xstrdup(PQgetvalue(res, i, 13));
		t->ended_at = dup_or_null(res, i, 14);
		t->fork_ref = dup_or_null(res, i, 15);
	}
	PQclear(res);
	/* Offloaded payloads are read back for the references expressions
	 * read and for the operators the decider runs (whose rows it may
	 * rewrite); a worker task's own payload is not the decider's. */
	for (size_t k = 0; k < b->n; k++) {
		struct loaded_execution *x = &b->items[k];
		for (size_t i = 0; i < x->n_tasks; i++) {
			struct loaded_task *t = &x->tasks[i];
			if (!ref_listed(refs[k], t->ref) &&
			    strcmp(t->task_type, "SIMPLE") == 0)
				continue;
			if (!payload_resolve_json(db, &t->input, e) ||
			    !payload_resolve_json(db, &t->output, e))
				return false;
		}
	}
	return true;
}

static void
task_free(struct loaded_task *t)
{
	free(t->ref);
	free(t->task_def_name);
	free(t->task_type);
	free(t->status);
	json_decref(t->input);
	json_decref(t->output);
	free(t->reason);
	free(t->scheduled_at);
	free(t->ended_at);
	free(t->fork_ref);
}

void
decide_batch_free(struct decide_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		struct loaded_execution *x = &b->items[i];
		free(x->ns_name);
		free(x->status);
		free(x->def_name);
		json_decref(x->definition);
		json_decref(x->input);
		json_decref(x->variables);
		free(x->correlation_id);
		free(x->started_at);
		for (size_t k = 0; k < x->n_tasks; k++)
			task_free(&x->tasks[k]);
		free(x->tasks);
	}
	free(b->items);
	memset(b, 0, sizeof(*b));
}

bool
decide_savepoint(struct db *db, struct err *e)
{
	return db_exec_script(db, "SAVEPOINT \"decide\"", e);
}

bool
decide_release_savepoint(struct db *db, struct err *e)
{
	return db_exec_script(db, "RELEASE SAVEPOINT \"decide\"", e);
}

void
decide_rollback_savepoint(struct db *db)
{
	struct err ignored = ERR_INIT;
	(void)db_exec_script(db, "ROLLBACK TO SAVEPOINT \"decide\"", &ignored);
}

/*
 * The version guard: the update applies only to the state the evaluation
 * read.  It also takes the execution's row lock and advances its event
 * counter by the decision's number of events, which is what numbers them.
 */
DB_STMT(decide_update_execution,
	"UPDATE \"WorkflowExecutions\" e SET \"version\" = e.\"version\" + 1,"
	" \"status\" = coalesce($3::jsonb->>'status', e.\"status\"),"
	" \"output\" = CASE WHEN $3::jsonb ? 'output' THEN $3::jsonb->'output'"
	"   ELSE e.\"output\" END,"
	" \"outputRef\" = CASE WHEN $3::jsonb ? 'output'"
	"   THEN $3::jsonb->>'outputRef' ELSE e.\"outputRef\" END,"
	" \"variables\" = CASE WHEN $3::jsonb ? 'variables'"
	"   THEN $3::jsonb->'variables' ELSE e.\"variables\" END,"
	" \"reasonForIncompletion\" = coalesce($3::jsonb->>'reason',"
	"   e.\"reasonForIncompletion\"),"
	" \"failedTaskRef\" = coalesce($3::jsonb->>'failedRef',"
	"   e.\"failedTaskRef\"),"
	" \"endedAt\" = CASE WHEN $3::jsonb->>'status' IN ('COMPLETED',"
	"   'FAILED', 'TIMED_OUT', 'TERMINATED') THEN now() ELSE e.\"endedAt\" END,"
	" \"updatedAt\" = now(), \"eventSeq\" = e.\"eventSeq\" + $4::int"
	" WHERE e.\"id\" = $1::uuid AND " SQL_EXEC_WINDOW(
		"e", "$1::uuid") " AND e.\"version\" = $2::bigint"
				 " RETURNING e.\"eventSeq\" - $4::int");

#define TERMINAL_TEXT SQL_TASK_TERMINAL

/*
 * Rows without "status" are SCHEDULED (and queued when they carry a
 * queueName); rows with one are written in it, started and, when terminal,
 * ended now (and seen when "seen").  A row whose identity exists updates it
 * only if it carries a status and the existing row is open, or if it turns
 * a failed attempt into COMPLETED_WITH_ERRORS (an optional task); any other
 * conflict is a no-op.  "joinFork" builds the output from the latest
 * attempt of each task of that fork (and iteration): ref -> output.
 */
DB_STMT(decide_write,
	"WITH r AS (SELECT r.*, coalesce(r.\"status\", 'SCHEDULED') AS \"st\","
	"   coalesce(r.\"status\", 'SCHEDULED') IN " TERMINAL_TEXT
	" AS \"term\""
	"   FROM jsonb_to_recordset($3::jsonb) AS r(\"id\" uuid, \"refName\" text,"
	"   \"taskDefName\" text, \"taskType\" text, \"iteration\" int,"
	"   \"attempt\" int, \"input\" jsonb, \"queueName\" text,"
	"   \"delaySeconds\" int, \"status\" text, \"output\" jsonb,"
	"   \"reason\" text, \"seen\" boolean, \"forkRef\" text,"
	"   \"joinFork\" text, \"semaphore\" text, \"cacheKey\" text,"
	"   \"cacheTtlSeconds\" int, \"inputRef\" text, \"outputRef\" text)),"
	" nt AS (INSERT INTO \"TaskExecutions\" AS t (\"id\", \"workflowId\","
	"   \"namespaceId\", \"refName\", \"taskDefName\", \"taskType\","
	"   \"iteration\", \"attempt\", \"status\", \"input\", \"output\","
	"   \"reasonForIncompletion\", \"queueName\", \"startDelaySeconds\","
	"   \"forkRef\", \"scheduledAt\", \"startedAt\", \"endedAt\","
	"   \"deciderSeenAt\", \"updatedAt\", \"cacheKey\", \"cacheTtlSeconds\","
	"   \"inputRef\", \"outputRef\")"
	"   SELECT r.\"id\", $1::uuid, $2::uuid, r.\"refName\", r.\"taskDefName\","
	"   r.\"taskType\", r.\"iteration\", r.\"attempt\", r.\"st\","
	"   coalesce(r.\"input\", '{}'),"
	"   CASE WHEN r.\"joinFork\" IS NOT NULL THEN (SELECT"
	"     coalesce(jsonb_object_agg(b.\"refName\", b.\"output\"), '{}')"
	"     FROM (SELECT DISTINCT ON (b.\"refName\") b.\"refName\", b.\"output\""
	"     FROM \"TaskExecutions\" b WHERE b.\"workflowId\" = $1::uuid"
	"     AND b.\"forkRef\" = r.\"joinFork\" AND b.\"iteration\" = r.\"iteration\""
	"     ORDER BY b.\"refName\", b.\"attempt\" DESC) b)"
	"   ELSE coalesce(r.\"output\", '{}') END,"
	"   r.\"reason\", r.\"queueName\", coalesce(r.\"delaySeconds\", 0),"
	"   r.\"forkRef\", now(),"
	"   CASE WHEN r.\"status\" IS NOT NULL THEN now() END,"
	"   CASE WHEN r.\"term\" THEN now() END,"
	"   CASE WHEN r.\"term\" AND coalesce(r.\"seen\", false) THEN now() END,"
	"   now(), r.\"cacheKey\", r.\"cacheTtlSeconds\", r.\"inputRef\","
	"   r.\"outputRef\" FROM r"
	"   ON CONFLICT (\"workflowId\", \"refName\", \"iteration\", \"attempt\")"
	"   DO UPDATE SET \"status\" = excluded.\"status\","
	"   \"input\" = CASE WHEN (SELECT u.\"input\" IS NULL FROM r u"
	"     WHERE u.\"id\" = excluded.\"id\") THEN t.\"input\""
	"     ELSE excluded.\"input\" END,"
	"   \"inputRef\" = CASE WHEN (SELECT u.\"input\" IS NULL FROM r u"
	"     WHERE u.\"id\" = excluded.\"id\") THEN t.\"inputRef\""
	"     ELSE excluded.\"inputRef\" END,"
	"   \"output\" = CASE WHEN (SELECT u.\"output\" IS NULL AND"
	"     u.\"joinFork\" IS NULL FROM r u WHERE u.\"id\" = excluded.\"id\")"
	"     THEN t.\"output\" ELSE excluded.\"output\" END,"
	"   \"outputRef\" = CASE WHEN (SELECT u.\"output\" IS NULL AND"
	"     u.\"joinFork\" IS NULL FROM r u WHERE u.\"id\" = excluded.\"id\")"
	"     THEN t.\"outputRef\" ELSE excluded.\"outputRef\" END,"
	"   \"reasonForIncompletion\" = excluded.\"reasonForIncompletion\","
	"   \"startedAt\" = coalesce(t.\"startedAt\", excluded.\"startedAt\"),"
	"   \"endedAt\" = coalesce(t.\"endedAt\", excluded.\"endedAt\"),"
	"   \"deciderSeenAt\" = excluded.\"deciderSeenAt\", \"updatedAt\" = now()"
	"   WHERE excluded.\"status\" <> 'SCHEDULED' AND (t.\"status\" NOT IN"
	"   " TERMINAL_TEXT " OR (t.\"status\" IN ('FAILED', 'TIMED_OUT',"
	"   'FAILED_WITH_TERMINAL_ERROR') AND excluded.\"status\" ="
	"   'COMPLETED_WITH_ERRORS'))"
	"   RETURNING t.\"id\", t.\"queueName\", t.\"taskType\", t.\"status\","
	"   t.\"startDelaySeconds\", t.\"endedAt\", t.\"deciderSeenAt\"),"
	" nq AS (INSERT INTO \"TaskQueues\" (\"queueName\", \"taskId\","
	"   \"workflowId\", \"namespaceId\", \"taskType\", \"priority\","
	"   \"leaseExpiresAt\", \"semaphore\")"
	"   SELECT nt.\"queueName\", nt.\"id\", $1::uuid, $2::uuid, nt.\"taskType\","
	"   $6::int, CASE WHEN nt.\"startDelaySeconds\" > 0 THEN now() +"
	"   make_interval(secs => nt.\"startDelaySeconds\") END, u.\"semaphore\""
	"   FROM nt LEFT JOIN r u ON u.\"id\" = nt.\"id\""
	"   WHERE nt.\"queueName\" IS NOT NULL AND nt.\"status\" = 'SCHEDULED'),"
	" s AS (UPDATE \"TaskExecutions\" t SET \"deciderSeenAt\" = now()"
	"   WHERE t.\"workflowId\" = $1::uuid AND t.\"id\" IN"
	"   (SELECT jsonb_array_elements_text($4::jsonb)::uuid)),"
	" cx AS (UPDATE \"TaskExecutions\" t SET \"status\" = 'CANCELED',"
	"   \"endedAt\" = now(), \"deciderSeenAt\" = now(), \"updatedAt\" = now()"
	"   WHERE t.\"workflowId\" = $1::uuid AND t.\"id\" IN"
	"   (SELECT jsonb_array_elements_text($7::jsonb)::uuid)"
	"   AND t.\"status\" NOT IN " SQL_TASK_TERMINAL
	"   RETURNING t.\"id\", t.\"queueName\"),"
	" cq AS (DELETE FROM \"TaskQueues\" q USING cx"
	"   WHERE q.\"queueName\" = cx.\"queueName\" AND q.\"taskId\" = cx.\"id\"),"
	" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
	"   \"seq\", \"type\", \"taskId\", \"data\")"
	"   SELECT $1::uuid, $2::uuid, r.\"seq\", r.\"type\", r.\"taskId\","
	"   coalesce(r.\"data\", '{}') FROM jsonb_to_recordset($5::jsonb)"
	"   AS r(\"seq\" bigint, \"type\" text, \"taskId\" uuid, \"data\" jsonb)),"
	/* A terminal row written unseen is reacted to by another evaluation:
	 * the queue row stays (it is due), so that one follows. */
	" dq AS (DELETE FROM \"DecideQueues\" WHERE \"workflowId\" = $1::uuid"
	"   AND NOT $8::boolean"
	"   AND NOT EXISTS (SELECT 1 FROM nt WHERE nt.\"endedAt\" IS NOT NULL"
	"   AND nt.\"deciderSeenAt\" IS NULL))"
	" SELECT (SELECT count(*) FROM nt), (SELECT count(*) FROM cx)");

/*
 * obj[key] offloaded to the payload store when it is large (obj[ref_key]
 * set to its reference).  One above the maximum is replaced by an error
 * document rather than failing the whole evaluation: what wrote it (an
 * expression copying outputs together) would fail the same way every time.
 */
static bool
offload_member(struct db *db, const char *ns_id, const char *what, json_t *obj,
	       const char *key, const char *ref_key, struct err *e)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return true;
	/* A placeholder loaded unread and written back keeps its payload. */
	const char *kept = json_string_value(
		json_object_get(json_object_get(v, PAYLOAD_KEY), "ref"));
	if (kept) {
		json_object_set_new(obj, ref_key, json_string(kept));
		return true;
	}
	json_incref(v);
	char ref[48];
	struct err pe = ERR_INIT;
	if (!payload_offload_json(db, ns_id, what, &v, ref, &pe)) {
		json_decref(v);
		if (pe.code != ERR_TOO_LARGE) {
			*e = pe;
			return false;
		}
		json_object_set_new(obj, key,
				    json_pack("{s:s}", "error", pe.msg));
		return true;
	}
	json_object_set_new(obj, key, v);
	if (ref[0])
		json_object_set_new(obj, ref_key, json_string(ref));
	return true;
}

bool
decide_apply(struct db *db, const struct loaded_execution *x,
	     const struct decide_rows *rows, bool *applied, struct err *e)
{
	char version[24], nev[16], prio[16];
	snprintf(version, sizeof(version), "%" PRId64, x->version);
	snprintf(nev, sizeof(nev), "%zu", json_array_size(rows->events));
	snprintf(prio, sizeof(prio), "%d", x->priority);
	json_t *update = rows->update ? json_copy((json_t *)rows->update)
				      : json_object();
	if (!offload_member(db, x->ns_id, "workflow output", update, "output",
			    "outputRef", e)) {
		json_decref(update);
		return false;
	}
	char *update_text = json_db_text(update);
	json_decref(update);
	const char *uparams[] = {x->id, version, update_text, nev};
	PGresult *res = db_exec(db, &decide_update_execution, 4, uparams, e);
	free(update_text);
	if (!res)
		return false;
	*applied = PQntuples(res) == 1;
	if (!*applied) {
		PQclear(res);
		return true;
	}
	int64_t base = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);

	/* Number the events on from the counter's old value. */
	json_t *numbered = json_array();
	size_t i;
	json_t *ev;
	json_array_foreach (rows->events, i, ev) {
		json_t *copy = json_copy(ev);
		json_object_set_new(copy, "seq",
				    json_integer(base + (json_int_t)i + 1));
		json_array_append_new(numbered, copy);
	}
	/* A row whose output the store builds from other rows (joinFork) is
	 * written by a second statement: one statement does not see the rows
	 * it inserts itself (branches that finished in this evaluation). */
	json_t *first = json_array(), *joins = json_array();
	json_t *row;
	json_array_foreach (rows->tasks, i, row) {
		json_t *copy = json_copy(row);
		if (!offload_member(db, x->ns_id, "task input", copy, "input",
				    "inputRef", e) ||
		    !offload_member(db, x->ns_id, "task output", copy, "output",
				    "outputRef", e)) {
			json_decref(copy);
			json_decref(numbered);
			json_decref(first);
			json_decref(joins);
			return false;
		}
		json_array_append_new(
			json_object_get(row, "joinFork") ? joins : first, copy);
	}
	bool more = json_array_size(joins) > 0;
	char *tasks_text = json_db_text(first);
	char *seen_text = json_db_text(rows->seen);
	char *events_text = json_db_text(numbered);
	char *cancel_text = json_db_text(rows->cancel);
	const char *wparams[] = {
		x->id,       x->ns_id, tasks_text,  seen_text,
		events_text, prio,     cancel_text, more ? "true" : "false"};
	res = db_exec(db, &decide_write, 8, wparams, e);
	free(tasks_text);
	free(seen_text);
	free(events_text);
	free(cancel_text);
	json_decref(numbered);
	PQclear(res);
	if (res && more) {
		char *joins_text = json_db_text(joins);
		const char *jparams[] = {x->id, x->ns_id, joins_text, "[]",
					 "[]",  prio,     "[]",       "false"};
		res = db_exec(db, &decide_write, 8, jparams, e);
		free(joins_text);
		PQclear(res);
	}
	json_decref(first);
	json_decref(joins);
	return res != NULL;
}

DB_STMT(decide_postpone_stmt,
	"UPDATE \"DecideQueues\" SET \"enqueuedAt\" = now() +"
	" make_interval(secs => $2::float8 / 1000), \"reason\" = $3"
	" WHERE \"workflowId\" = $1::uuid");

bool
decide_postpone(struct db *db, const char *workflow_id, int delay_ms,
		const char *reason, struct err *e)
{
	char ms[16];
	snprintf(ms, sizeof(ms), "%d", delay_ms);
	const char *params[] = {workflow_id, ms, reason};
	return db_run(db, &decide_postpone_stmt, 3, params, e);
}

DB_STMT(decide_recent_retries_stmt,
	"SELECT count(*) FROM (SELECT 1 FROM \"TaskExecutions\""
	" WHERE \"namespaceId\" = $1::uuid AND \"taskDefName\" = $2"
	" AND \"scheduledAt\" > now() - interval '60 seconds'"
	" AND \"attempt\" > 0 LIMIT $3::int) r");

bool
decide_recent_retries(struct db *db, const char *ns_id, const char *task_def,
		      int cap, int *count, struct err *e)
{
	char c[16];
	snprintf(c, sizeof(c), "%d", cap);
	const char *params[] = {ns_id, task_def, c};
	PGresult *res = db_exec(db, &decide_recent_retries_stmt, 3, params, e);
	if (!res)
		return false;
	*count = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

struct db_stmt *const decide_repo_stmts[] = {
	&decide_claim_stmt,
	&decide_load_executions,
	&decide_dequeue_stmt,
	&decide_load_tasks_stmt,
	&decide_update_execution,
	&decide_write,
	&decide_postpone_stmt,
	&decide_recent_retries_stmt,
	NULL,
};
