#include "store/executions_repo.h"

#include "store/payload_repo.h"
#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Starts, one or many, in one statement, so one commit for them all (the
 * group commit of engine/start_group.h).  $1 is a JSON array with one
 * object per start (exec_start_many builds it).  Each execution's id and
 * "startedAt" come from this statement, which is what lets every later
 * lookup by id bound "startedAt" (SQL_EXEC_WINDOW).  Its event is seq 1
 * and the counter starts there: nobody else can write events of an
 * execution that does not exist yet.  A workflow with a timeout gets its
 * workflowTimeout timer (store/timers_repo.h) here too.  Two starts of the
 * batch with the same idempotency key: the first in the array takes it
 * (ON CONFLICT DO NOTHING skips a row that conflicts with one the same
 * statement inserted), the other is not written.  Keys are inserted in
 * key order: a key another transaction has inserted and not committed
 * makes the insert wait, and two groups written at once (start_group.h)
 * that share keys then wait in one order, never for each other.  The
 * answer: the array positions written, with their ids, "startedAt" and
 * namespace's name (what deciding the first step in the same transaction
 * needs).  It runs with its generic plan (DB_STMT_GENERIC), in a start's
 * transaction that decides (db_begin_generic) and outside one alike, so
 * the pooled connections that also serve workers' leases and results
 * never switch their plan mode for it.
 */
DB_STMT_GENERIC(
	exec_start_many_stmt,
	"WITH src AS MATERIALIZED (SELECT r.\"ord\", uuidv7() AS \"id\","
	"   now() AS \"at\", r.\"e\", (r.\"e\"->>'ns')::uuid AS \"ns\""
	"   FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY"
	"   AS r(\"e\", \"ord\")),"
	" k AS (INSERT INTO \"IdempotencyKeys\""
	"   (\"namespaceId\", \"key\", \"workflowId\", \"startedAt\")"
	"   SELECT \"ns\", \"e\"->>'key', \"id\", \"at\" FROM src"
	"   WHERE \"e\" ? 'key' ORDER BY \"ns\", \"e\"->>'key', \"ord\""
	"   ON CONFLICT DO NOTHING RETURNING \"workflowId\"),"
	" go AS MATERIALIZED (SELECT * FROM src WHERE NOT \"e\" ? 'key'"
	"   OR \"id\" IN (SELECT \"workflowId\" FROM k)),"
	" w AS (INSERT INTO \"WorkflowExecutions\" (\"id\", \"namespaceId\","
	"   \"defName\", \"defVersion\", \"definition\", \"status\", \"input\","
	"   \"variables\", \"correlationId\", \"idempotencyKey\", \"priority\","
	"   \"parentWorkflowId\", \"parentTaskId\", \"eventSeq\", \"startedAt\","
	"   \"updatedAt\", \"inputRef\")"
	"   SELECT \"id\", \"ns\", \"e\"->>'name', (\"e\"->>'version')::int,"
	"   \"e\"->'definition', 'RUNNING', \"e\"->'input', \"e\"->'variables',"
	"   \"e\"->>'correlationId', \"e\"->>'key', (\"e\"->>'priority')::int,"
	"   (\"e\"->>'parentWorkflowId')::uuid, (\"e\"->>'parentTaskId')::uuid,"
	"   1, \"at\", \"at\", \"e\"->>'inputRef' FROM go ORDER BY \"ord\""
	"   RETURNING \"id\", \"namespaceId\", \"startedAt\"),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT \"id\", \"namespaceId\", 'start' FROM w),"
	" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","
	"   \"seq\", \"type\", \"data\", \"at\")"
	"   SELECT go.\"id\", go.\"ns\", 1, 'WORKFLOW_STARTED',"
	"   jsonb_build_object('name', go.\"e\"->>'name', 'version',"
	"   (go.\"e\"->>'version')::int, 'correlationId',"
	"   go.\"e\"->>'correlationId'), w.\"startedAt\""
	"   FROM w JOIN go ON go.\"id\" = w.\"id\"),"
	" tm AS (INSERT INTO \"Timers\" (\"namespaceId\", \"workflowId\","
	"   \"kind\", \"fireAt\", \"payload\")"
	"   SELECT go.\"ns\", go.\"id\", 'workflowTimeout', w.\"startedAt\" +"
	"   make_interval(secs => (go.\"e\"->>'timeout')::bigint),"
	"   jsonb_build_object('seconds', (go.\"e\"->>'timeout')::bigint,"
	"   'policy', go.\"e\"->>'policy')"
	"   FROM w JOIN go ON go.\"id\" = w.\"id\""
	"   WHERE (go.\"e\"->>'timeout')::bigint > 0)"
	" SELECT go.\"ord\"::int, go.\"id\"::text, go.\"at\"::text, n.\"name\""
	" FROM go JOIN \"Namespaces\" n ON n.\"id\" = go.\"ns\"");

/* A JSON string member (the key and its value through the jsonb funnel),
 * or nothing when value is NULL. */
static void
put_str(struct strbuf *sb, const char *key, const char *value)
{
	if (!value)
		return;
	json_t *v = json_string(value);
	char *text = v ? json_db_text(v) : NULL;
	json_decref(v);
	if (!text) /* not UTF-8: impossible after the request's checks */
		return;
	sb_printf(sb, ",\"%s\":%s", key, text);
	free(text);
}

bool
exec_start_many(struct db *db, const struct exec_start *const *s, size_t n,
		struct exec_started *out, struct err *e)
{
	struct strbuf sb = STRBUF_INIT;
	sb_putc(&sb, '[');
	for (size_t i = 0; i < n; i++) {
		const struct exec_start *x = s[i];
		sb_printf(&sb,
			  "%s{\"ns\":\"%s\",\"version\":%d,\"priority\":%d,"
			  "\"timeout\":%" PRId64 ",\"input\":%s,"
			  "\"variables\":%s",
			  i ? "," : "", x->ns_id, x->def_version, x->priority,
			  x->timeout_seconds, x->input, x->variables);
		if (x->definition)
			sb_printf(&sb, ",\"definition\":%s", x->definition);
		put_str(&sb, "name", x->def_name);
		put_str(&sb, "policy", x->timeout_policy);
		put_str(&sb, "correlationId", x->correlation_id);
		put_str(&sb, "key", x->idempotency_key);
		put_str(&sb, "parentWorkflowId", x->parent_workflow_id);
		put_str(&sb, "parentTaskId", x->parent_task_id);
		put_str(&sb, "inputRef", x->input_ref);
		sb_putc(&sb, '}');
		out[i] = (struct exec_started){0};
	}
	sb_putc(&sb, ']');
	const char *params[] = {sb_str(&sb)};
	PGresult *res = db_exec(db, &exec_start_many_stmt, 1, params, e);
	sb_free(&sb);
	if (!res)
		return false;
	for (int r = 0; r < PQntuples(res); r++) {
		long ord = strtol(PQgetvalue(res, r, 0), NULL, 10);
		if (ord < 1 || (size_t)ord > n)
			continue;
		struct exec_started *o = &out[ord - 1];
		o->created = true;
		snprintf(o->id, sizeof(o->id), "%s", PQgetvalue(res, r, 1));
		snprintf(o->started_at, sizeof(o->started_at), "%s",
			 PQgetvalue(res, r, 2));
		/* Longer than any the API accepts: left empty. */
		if ((size_t)PQgetlength(res, r, 3) < sizeof(o->ns_name))
			memcpy(o->ns_name, PQgetvalue(res, r, 3),
			       (size_t)PQgetlength(res, r, 3) + 1);
	}
	PQclear(res);
	return true;
}

bool
exec_warm(struct db *db, struct err *e)
{
	return exec_start_many(db, NULL, 0, NULL, e);
}

DB_STMT(exec_idempotent_existing,
	"SELECT \"workflowId\"::text FROM \"IdempotencyKeys\""
	" WHERE \"namespaceId\" = $1::uuid AND \"key\" = $2");

bool
exec_start_existing(struct db *db, const struct exec_start *s, char id_out[37],
		    struct err *e)
{
	/* A new statement sees the committed owner. */
	const char *params[] = {s->ns_id, s->idempotency_key};
	PGresult *res = db_exec(db, &exec_idempotent_existing, 2, params, e);
	if (!res)
		return false;
	bool found = PQntuples(res) == 1;
	if (found)
		snprintf(id_out, 37, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	if (!found)
		err_set(e, ERR_CONFLICT,
			"idempotency key \"%.80s\" is being used by a start that "
			"has not finished",
			s->idempotency_key);
	return found;
}

bool
exec_start_offload(struct db *db, const struct exec_start *s,
		   struct exec_start *x, char **stored, char ref[48],
		   struct err *e)
{
	*x = *s;
	*stored = NULL;
	ref[0] = '\0';
	if (x->input_ref)
		return true;
	if (!payload_offload(db, x->ns_id, "workflow input", x->input,
			     strlen(x->input), stored, ref, e))
		return false;
	if (*stored) {
		x->input = *stored;
		x->input_ref = ref;
	}
	return true;
}

bool
exec_start(struct db *db, const struct exec_start *s, char id_out[37],
	   bool *created, struct err *e)
{
	struct exec_start x;
	char *stored, ref[48];
	if (!exec_start_offload(db, s, &x, &stored, ref, e))
		return false;
	const struct exec_start *one = &x;
	struct exec_started out;
	bool ok = exec_start_many(db, &one, 1, &out, e);
	free(stored);
	if (!ok)
		return false;
	*created = out.created;
	if (out.created)
		memcpy(id_out, out.id, sizeof(out.id));
	return out.created || exec_start_existing(db, s, id_out, e);
}

#define TASK_JSON(t)                                                           \
	"jsonb_build_object('id', " t ".\"id\", 'refName', " t ".\"refName\"," \
	" 'taskDefName', " t ".\"taskDefName\", 'taskType', " t                \
	".\"taskType\","                                                       \
	" 'iteration', " t ".\"iteration\", 'attempt', " t ".\"attempt\","     \
	" 'status', " t ".\"status\", 'input', " t ".\"input\", 'output', " t  \
	".\"output\", 'reason', " t                                            \
	".\"reasonForIncompletion\", 'workerId', " t                           \
	".\"workerId\", 'queueName', " t ".\"queueName\", 'pollCount', " t     \
	".\"pollCount\", 'subWorkflowId', " t ".\"subWorkflowId\","            \
	" 'scheduledAt', " t ".\"scheduledAt\", 'startedAt', " t               \
	".\"startedAt\", 'endedAt', " t ".\"endedAt\", 'updatedAt', " t        \
	".\"updatedAt\")"

#define EXEC_JSON(x)                                                         \
	"jsonb_build_object('id', " x ".\"id\", 'name', " x ".\"defName\","  \
	" 'version', " x ".\"defVersion\", 'status', " x ".\"status\","      \
	" 'input', " x ".\"input\", 'output', " x                            \
	".\"output\", 'variables', " x ".\"variables\", 'correlationId', " x \
	".\"correlationId\","                                                \
	" 'idempotencyKey', " x ".\"idempotencyKey\", 'priority', " x        \
	".\"priority\", 'parentWorkflowId', " x ".\"parentWorkflowId\","     \
	" 'parentTaskId', " x ".\"parentTaskId\", 'failureWorkflowId', " x   \
	".\"failureWorkflowId\","                                            \
	" 'reason', " x ".\"reasonForIncompletion\", 'startedAt', " x        \
	".\"startedAt\", 'updatedAt', " x ".\"updatedAt\", 'endedAt', " x    \
	".\"endedAt\")"

DB_STMT(exec_get_stmt,
	"SELECT (" EXEC_JSON(
		"e") " || CASE WHEN $3::bool THEN"
		     " jsonb_build_object('tasks', coalesce((SELECT jsonb_agg(" TASK_JSON(
			     "t") " ORDER BY t.\"scheduledAt\", t.\"id\")"
				  " FROM \"TaskExecutions\" t WHERE t.\"workflowId\" = e.\"id\"), '[]'))"
				  " ELSE '{}'::jsonb END)::text"
				  " FROM \"WorkflowExecutions\" e"
				  " WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
					  "e", "$2::uuid"));

bool
exec_get_json(struct db *db, const char *ns_id, const char *id,
	      bool include_tasks, char **json_out, struct err *e)
{
	const char *params[] = {ns_id, id, include_tasks ? "true" : "false"};
	PGresult *res = db_exec(db, &exec_get_stmt, 3, params, e);
	if (!res)
		return false;
	bool found = PQntuples(res) == 1;
	if (found)
		*json_out = xstrdup(PQgetvalue(res, 0, 0));
	else
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	PQclear(res);
	if (found && !payload_resolve_text(db, json_out, e)) {
		free(*json_out);
		*json_out = NULL;
		return false;
	}
	return found;
}

/*
 * Keyset pagination on ("startedAt", "id"), newest first, never OFFSET:
 * offsets skip and repeat rows of a table that takes inserts, and cost more
 * on every page.  The cursor is "startedAt"::text at full precision, and
 * both sides of the comparison are cast explicitly: a cursor rounded to
 * milliseconds sorts before its own row and skips every row sharing that
 * millisecond; a comparison left to inference may compare as text.
 * Optional filters are written "$n IS NULL OR …"; the statement runs with
 * plan_cache_mode = force_custom_plan so each call is planned with its
 * values and picks the index that fits them.
 */
/* Every filter of the list but the status; x is the table's alias. */
#define LIST_FILTERS(x)                                                   \
	x ".\"namespaceId\" = $1::uuid"                                   \
	  " AND ($3::text IS NULL OR " x ".\"defName\" = $3::text)"       \
	  " AND ($4::text IS NULL OR " x ".\"correlationId\" = $4::text)" \
	  " AND ($5::timestamptz IS NULL OR " x                           \
	  ".\"startedAt\" >= $5::timestamptz)"                            \
	  " AND ($6::timestamptz IS NULL OR " x                           \
	  ".\"startedAt\" < $6::timestamptz)"                             \
	  " AND ($7::jsonb IS NULL OR " x ".\"input\" @> $7::jsonb)"      \
	  " AND ($8::jsonb IS NULL OR " x ".\"output\" @> $8::jsonb)"     \
	  " AND ($9::timestamptz IS NULL OR (" x ".\"startedAt\", " x     \
	  ".\"id\") < ($9::timestamptz, $10::uuid))"                      \
	  " ORDER BY " x ".\"startedAt\" DESC, " x                        \
	  ".\"id\" DESC LIMIT $11::int"

/* Without statuses: the newest-first index, read up to the page's size
 * ($2 is NULL, named only so both statements take the same parameters). */
DB_STMT(exec_list_stmt,
	"SELECT (" EXEC_JSON(
		"e") ")::text, e.\"startedAt\"::text,"
		     " e.\"id\"::text FROM \"WorkflowExecutions\" e"
		     " WHERE $2::jsonb IS NULL AND " LIST_FILTERS("e"));

/*
 * With statuses ($2): one newest-first read per status, each off the
 * ("namespaceId","status","startedAt" DESC) index and stopping at the
 * page's size, merged.  A status rare in the history (RUNNING, the
 * dashboard's default, or one no execution has) costs as much as a common
 * one; filtering the newest-first index by status instead reads past every
 * execution of the other statuses, the whole history when fewer than a
 * page match.
 */
DB_STMT(exec_list_status_stmt,
	"SELECT (" EXEC_JSON(
		"e") ")::text, e.\"startedAt\"::text,"
		     " e.\"id\"::text FROM (SELECT DISTINCT"
		     " jsonb_array_elements_text($2::jsonb) AS \"st\") s"
		     " CROSS JOIN LATERAL (SELECT c.* FROM \"WorkflowExecutions\" c"
		     " WHERE c.\"status\" = s.\"st\" AND " LIST_FILTERS(
			     "c") ") e"
				  " ORDER BY e.\"startedAt\" DESC, e.\"id\" DESC LIMIT $11::int");

DB_STMT(exec_custom_plans,
	"SELECT set_config('plan_cache_mode', 'force_custom_plan', true)");

bool
exec_list_json(struct db *db, const char *ns_id, const struct exec_filter *f,
	       char **json_out, char **next_started_at, char **next_id,
	       struct err *e)
{
	char limit[16];
	snprintf(limit, sizeof(limit), "%d", f->limit + 1);
	const char *params[] = {
		ns_id,
		f->statuses,
		f->def_name,
		f->correlation_id,
		f->started_after,
		f->started_before,
		f->input_contains,
		f->output_contains,
		f->after_started_at,
		f->after_id,
		limit,
	};
	*next_started_at = *next_id = NULL;
	PGresult *res = NULL;
	bool ok = db_begin(db, e) &&
		  db_run(db, &exec_custom_plans, 0, NULL, e) &&
		  (res = db_exec(db,
				 f->statuses ? &exec_list_status_stmt
					     : &exec_list_stmt,
				 11, params, e)) != NULL;
	if (!ok) {
		db_rollback(db);
		return false;
	}
	int n = PQntuples(res);
	int shown = n > f->limit ? f->limit : n;
	struct strbuf sb = STRBUF_INIT;
	sb_putc(&sb, '[');
	for (int i = 0; i < shown; i++) {
		if (i)
			sb_putc(&sb, ',');
		sb_puts(&sb, PQgetvalue(res, i, 0));
	}
	sb_putc(&sb, ']');
	if (n > f->limit && shown > 0) {
		*next_started_at = xstrdup(PQgetvalue(res, shown - 1, 1));
		*next_id = xstrdup(PQgetvalue(res, shown - 1, 2));
	}
	PQclear(res);
	*json_out = sb_steal(&sb);
	db_rollback(db); /* read-only: nothing to commit */
	if (!payload_resolve_text(db, json_out, e)) {
		free(*json_out);
		*json_out = NULL;
		free(*next_started_at);
		free(*next_id);
		*next_started_at = *next_id = NULL;
		return false;
	}
	return true;
}

DB_STMT(exec_events_stmt,
	"SELECT coalesce(jsonb_agg(jsonb_build_object('seq', v.\"seq\","
	" 'type', v.\"type\", 'taskId', v.\"taskId\", 'data', v.\"data\","
	" 'at', v.\"at\") ORDER BY v.\"seq\"), '[]')::text,"
	" (SELECT count(*) FROM \"WorkflowExecutions\" e"
	"  WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid AND " SQL_EXEC_WINDOW(
		"e",
		"$2::uuid") ")"
			    " FROM (SELECT * FROM \"WorkflowEvents\" ev"
			    "  WHERE ev.\"workflowId\" = $2::uuid AND ev.\"namespaceId\" = $1::uuid"
			    "  AND ev.\"seq\" > $3::bigint AND " SQL_EVENT_WINDOW(
				    "ev",
				    "$2::uuid") "  ORDER BY ev.\"seq\" LIMIT $4::int) v");

bool
exec_events_json(struct db *db, const char *ns_id, const char *id,
		 int64_t after_seq, int limit, char **json_out, struct err *e)
{
	char after[24], lim[16];
	snprintf(after, sizeof(after), "%" PRId64, after_seq);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {ns_id, id, after, lim};
	PGresult *res = db_exec(db, &exec_events_stmt, 4, params, e);
	if (!res)
		return false;
	bool found = strcmp(PQgetvalue(res, 0, 1), "0") != 0;
	if (found)
		*json_out = xstrdup(PQgetvalue(res, 0, 0));
	else
		err_set(e, ERR_NOT_FOUND, "workflow %s not found", id);
	PQclear(res);
	return found;
}

struct db_stmt *const executions_repo_stmts[] = {
	&exec_start_many_stmt,  &exec_idempotent_existing,
	&exec_get_stmt,         &exec_list_stmt,
	&exec_list_status_stmt, &exec_custom_plans,
	&exec_events_stmt,      NULL,
};
