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

/* An id no execution has: fills parameters that must name one. */
#define NIL_UUID "00000000-0000-0000-0000-000000000000"

/* The advisory-lock class of a decider's turn (the key's first half; task
 * logs have 7361). */
#define DECIDE_TURN_LOCK_CLASS "7362"

/* $1 the longest wait, in ms: the transaction's lock_timeout is that for
 * the lock alone (set before it, restored after it). */
DB_STMT(decide_turn_stmt,
	"WITH s AS MATERIALIZED (SELECT current_setting('lock_timeout') AS"
	"   \"prev\", set_config('lock_timeout', $1, true))"
	" SELECT pg_advisory_xact_lock(" DECIDE_TURN_LOCK_CLASS ", 0),"
	" set_config('lock_timeout', s.\"prev\", true) FROM s");

/* Due rows only (a postponed evaluation carries a future "enqueuedAt"),
 * by the statement's clock, not the transaction's: a decider that waited
 * for its turn claims what was enqueued meanwhile.  Oldest first, over
 * "DecideQueues_due_idx" (migration 0014). */
DB_STMT(decide_claim_stmt, "SELECT \"workflowId\"::text FROM \"DecideQueues\""
			   " WHERE \"enqueuedAt\" <= statement_timestamp()"
			   " ORDER BY \"enqueuedAt\""
			   " LIMIT $1::int FOR UPDATE SKIP LOCKED");

/* The window over the whole batch prunes to the partitions its ids can
 * live in (initplans: pruned at execution). */
DB_STMT(decide_load_executions,
	"SELECT e.\"id\"::text, e.\"namespaceId\"::text, n.\"name\","
	" e.\"status\", e.\"version\", e.\"defName\", e.\"defVersion\","
	" e.\"definition\"::text, e.\"input\"::text, e.\"variables\"::text,"
	" e.\"correlationId\", e.\"priority\", e.\"startedAt\"::text,"
	" e.\"parentWorkflowId\"::text"
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
decide_take_turn(struct db *db, int wait_ms, struct err *e)
{
	char ms[16];
	snprintf(ms, sizeof(ms), "%d", wait_ms);
	const char *params[] = {ms};
	return db_run(db, &decide_turn_stmt, 1, params, e);
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
	bool ok = decide_load(db, sb_str(&ids), (size_t)n, out, e);
	sb_free(&ids);
	return ok;
}

bool
decide_load(struct db *db, const char *ids, size_t n, struct decide_batch *out,
	    struct err *e)
{
	memset(out, 0, sizeof(*out));
	if (n == 0)
		return true;
	const char *lparams[] = {ids};
	PGresult *res = db_exec(db, &decide_load_executions, 1, lparams, e);
	if (!res)
		return false;
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
		snprintf(x->parent_id, sizeof(x->parent_id), "%s",
			 PQgetvalue(res, i, 13));
	}
	out->n = (size_t)found;
	PQclear(res);
	for (size_t i = 0; i < out->n; i++)
		if (!payload_resolve_json(db, &out->items[i].input, e))
			return false;

	/* A queued evaluation whose execution is gone (dropped with its
	 * partition) would otherwise be claimed forever. */
	if (out->n < n) {
		const char *p = ids + 1;
		while (*p && *p != '}') {
			char id[37];
			snprintf(id, sizeof(id), "%.36s", p);
			bool known = false;
			for (size_t i = 0; i < out->n && !known; i++)
				known = strcmp(out->items[i].id, id) == 0;
			if (!known && !decide_dequeue(db, id, e))
				return false;
			p += 36;
			if (*p == ',')
				p++;
		}
	}
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
#define FRONTIER_COLUMNS(refs)                                                                       \
	" t.\"id\"::text, t.\"workflowId\"::text, t.\"refName\","                                    \
	" t.\"taskDefName\", t.\"taskType\", t.\"iteration\", t.\"attempt\","                        \
	" t.\"status\", CASE WHEN " PAYLOAD_NEEDED(                                                  \
		refs) " THEN"                                                                        \
		      " t.\"input\"::text END, CASE WHEN " PAYLOAD_NEEDED(                           \
			      refs) " THEN"                                                          \
				    " t.\"output\"::text END,"                                       \
				    " t.\"reasonForIncompletion\", t.\"deciderSeenAt\" IS NOT NULL," \
				    " t.\"endedAt\" IS NOT NULL, t.\"scheduledAt\"::text,"           \
				    " t.\"endedAt\"::text, t.\"forkRef\""
#define PAYLOAD_NEEDED(refs)                                                  \
	"(t.\"queueName\" IS NULL OR EXISTS (SELECT 1 FROM"                   \
	" jsonb_to_recordset(" refs "::jsonb) AS p(\"w\" uuid, \"ref\" text)" \
	" WHERE p.\"w\" = t.\"workflowId\" AND p.\"ref\" = t.\"refName\"))"

/*
 * Three index paths, one statement: the frontier (partial frontier index;
 * the predicate repeats the index's, so the planner can use it), the
 * unprocessed (partial unprocessed index), and the latest reacted-to
 * attempt of each reference the definition reads (identity index, one
 * probe per reference: joined the other way round it was planned as a
 * scan of every task ever retained, on every batch).  `ids` is the
 * executions' ids as a uuid[] expression; each branch names them, so that
 * a few ids as parameters of their own (SQL_FEW_KEYS) prune every branch.
 */
#define LOAD_TASKS(ids, refs)                                                                \
	"SELECT" FRONTIER_COLUMNS(                                                           \
		refs) " FROM \"TaskExecutions\" t"                                           \
		      " WHERE t.\"workflowId\" = ANY(" ids ")"                               \
		      " AND t.\"status\" NOT IN " SQL_TASK_TERMINAL                          \
		      " UNION ALL"                                                           \
		      " SELECT" TASK_COLUMNS " FROM \"TaskExecutions\" t"                    \
		      " WHERE t.\"workflowId\" = ANY(" ids ")"                               \
		      " AND t.\"endedAt\" IS NOT NULL AND t.\"deciderSeenAt\" IS NULL"       \
		      " UNION ALL"                                                           \
		      " SELECT * FROM (SELECT x.* FROM (SELECT DISTINCT \"w\", \"ref\" FROM" \
		      " jsonb_to_recordset(" refs                                            \
		      "::jsonb) AS p(\"w\" uuid, \"ref\" text)) r"                           \
		      " CROSS JOIN LATERAL (SELECT" TASK_COLUMNS                             \
		      " FROM \"TaskExecutions\" t"                                           \
		      " WHERE t.\"workflowId\" = r.\"w\" AND t.\"refName\" = r.\"ref\""      \
		      " AND t.\"workflowId\" = ANY(" ids ")"                                 \
		      " AND t.\"deciderSeenAt\" IS NOT NULL"                                 \
		      " ORDER BY t.\"iteration\" DESC, t.\"attempt\" DESC LIMIT 1) x"        \
		      " ORDER BY r.\"w\", r.\"ref\") latest"

/* The ids as a uuid[] ($1) and the references read ($2); or, for at
 * most SQL_FEW_KEYS ids, the references ($1) and the ids one by one. */
DB_STMT(decide_load_tasks_stmt, LOAD_TASKS("$1::uuid[]", "$2"));
DB_STMT(decide_load_tasks_few, LOAD_TASKS(SQL_FEW_KEYS_2 "::uuid[]", "$1"));

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
	json_t *pairs = json_array();
	for (size_t i = 0; i < b->n; i++) {
		size_t k;
		json_t *ref;
		json_array_foreach (refs[i], k, ref) {
			json_array_append_new(pairs, json_pack("{s:s,s:O}", "w",
							       b->items[i].id,
							       "ref", ref));
		}
	}
	char *pairs_text = json_db_text(pairs);
	json_decref(pairs);
	PGresult *res;
	if (b->n <= SQL_FEW_KEYS) {
		const char *params[1 + SQL_FEW_KEYS] = {pairs_text};
		for (size_t i = 0; i < SQL_FEW_KEYS; i++)
			params[1 + i] = b->items[i < b->n ? i : 0].id;
		res = db_exec(db, &decide_load_tasks_few, 1 + SQL_FEW_KEYS,
			      params, e);
	} else {
		struct strbuf ids = STRBUF_INIT;
		sb_putc(&ids, '{');
		for (size_t i = 0; i < b->n; i++)
			sb_printf(&ids, "%s%s", i ? "," : "", b->items[i].id);
		sb_putc(&ids, '}');
		const char *params[] = {sb_str(&ids), pairs_text};
		res = db_exec(db, &decide_load_tasks_stmt, 2, params, e);
		sb_free(&ids);
	}
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

#define TERMINAL_TEXT SQL_TASK_TERMINAL

/*
 * The decisions of a batch, one statement.  $1 holds one row per
 * execution: {w (id), ns, v (the version read), nev (its number of
 * events), prio, u (the new state: status, output, outputRef, reason,
 * failedRef, variables; absent members unchanged), keep (its queue row
 * stays: a second statement follows)}.  $2 the task rows, $3 and $4 the
 * {w, id} of the tasks reacted to and of those to cancel, $5 the events
 * {w, i (1, 2, … within the execution), type, taskId, data}, $6 the ids
 * whose queue row goes without a change.
 *
 * The version guard (ux) applies a decision only to the state its
 * evaluation read: an execution changed since returns no row, and every
 * other part joins on what ux returned (a), so nothing of its decision is
 * written.  It also takes the execution's row lock, in the order of $1
 * (the nested loop over it), and advances its event counter by the
 * decision's number of events, which is what numbers them.  A row of $1
 * without "v" is not guarded (the second statement of a decision whose
 * first already was).
 *
 * Task rows without "status" are SCHEDULED (and queued when they carry a
 * queueName); rows with one are written in it, started and, when terminal,
 * ended now (and seen when "seen").  A row whose identity exists updates
 * it only if it carries a status and the existing row is open, or if it
 * turns a failed attempt into COMPLETED_WITH_ERRORS (an optional task);
 * any other conflict is a no-op.  "joinFork" builds the output from the
 * latest attempt of each task of that fork (and iteration): ref -> output.
 * A terminal row written unseen is reacted to by another evaluation: its
 * workflow's "DecideQueues" row stays (it is due), so that one follows.
 */
/* The version guard's execution window (sqlfrag.h). */
#define WRITE_WINDOW SQL_EXEC_WINDOW("e", "x.\"w\"")

#define DECIDE_WRITE(keys)                                                              \
	"WITH x AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(\"w\" uuid,"       \
	"   \"ns\" uuid, \"v\" bigint, \"nev\" int, \"prio\" int, \"u\" jsonb,"         \
	"   \"keep\" boolean)),"                                                        \
	" ux AS (UPDATE \"WorkflowExecutions\" e SET \"version\" = e.\"version\" + 1,"  \
	"   \"status\" = coalesce(x.\"u\"->>'status', e.\"status\"),"                   \
	"   \"output\" = CASE WHEN x.\"u\" ? 'output' THEN x.\"u\"->'output'"           \
	"     ELSE e.\"output\" END,"                                                   \
	"   \"outputRef\" = CASE WHEN x.\"u\" ? 'output'"                               \
	"     THEN x.\"u\"->>'outputRef' ELSE e.\"outputRef\" END,"                     \
	"   \"variables\" = CASE WHEN x.\"u\" ? 'variables'"                            \
	"     THEN x.\"u\"->'variables' ELSE e.\"variables\" END,"                      \
	"   \"reasonForIncompletion\" = coalesce(x.\"u\"->>'reason',"                   \
	"     e.\"reasonForIncompletion\"),"                                            \
	"   \"failedTaskRef\" = coalesce(x.\"u\"->>'failedRef',"                        \
	"     e.\"failedTaskRef\"),"                                                    \
	"   \"endedAt\" = CASE WHEN x.\"u\"->>'status' IN ('COMPLETED',"                \
	"     'FAILED', 'TIMED_OUT', 'TERMINATED') THEN now()"                          \
	"     ELSE e.\"endedAt\" END,"                                                  \
	"   \"updatedAt\" = now(), \"eventSeq\" = e.\"eventSeq\" + x.\"nev\""           \
	"   FROM x WHERE x.\"v\" IS NOT NULL AND e.\"id\" = x.\"w\""                    \
	"   AND e.\"id\" = ANY(ARRAY(SELECT \"w\" FROM x WHERE \"v\" IS NOT NULL))"     \
	"   AND e.\"startedAt\" >= (SELECT min(uuid_extract_timestamp(\"w\"))"          \
	"     FROM x) - interval '1 hour'"                                              \
	"   AND e.\"startedAt\" < (SELECT max(uuid_extract_timestamp(\"w\"))"           \
	"     FROM x) + interval '1 hour'"                                              \
	"   AND " WRITE_WINDOW " AND e.\"version\" = x.\"v\""                           \
	"   RETURNING e.\"id\" AS \"w\", x.\"ns\", x.\"prio\", x.\"keep\","             \
	"   e.\"eventSeq\" - x.\"nev\" AS \"base\"),"                                   \
	" a AS (SELECT * FROM ux UNION ALL SELECT x.\"w\", x.\"ns\", x.\"prio\","       \
	"   x.\"keep\", 0::bigint FROM x WHERE x.\"v\" IS NULL),"                       \
	" r AS (SELECT r.*, a.\"ns\", a.\"prio\","                                      \
	"   coalesce(r.\"status\", 'SCHEDULED') AS \"st\","                             \
	"   coalesce(r.\"status\", 'SCHEDULED') IN " TERMINAL_TEXT                      \
	" AS \"term\""                                                                  \
	"   FROM jsonb_to_recordset($2::jsonb) AS r(\"w\" uuid, \"id\" uuid,"           \
	"   \"refName\" text, \"taskDefName\" text, \"taskType\" text,"                 \
	"   \"iteration\" int, \"attempt\" int, \"input\" jsonb, \"queueName\" text,"   \
	"   \"delaySeconds\" int, \"status\" text, \"output\" jsonb,"                   \
	"   \"reason\" text, \"seen\" boolean, \"forkRef\" text,"                       \
	"   \"joinFork\" text, \"semaphore\" text, \"cacheKey\" text,"                  \
	"   \"cacheTtlSeconds\" int, \"inputRef\" text, \"outputRef\" text)"            \
	"   JOIN a ON a.\"w\" = r.\"w\"),"                                              \
	" nt AS (INSERT INTO \"TaskExecutions\" AS t (\"id\", \"workflowId\","          \
	"   \"namespaceId\", \"refName\", \"taskDefName\", \"taskType\","               \
	"   \"iteration\", \"attempt\", \"status\", \"input\", \"output\","             \
	"   \"reasonForIncompletion\", \"queueName\", \"startDelaySeconds\","           \
	"   \"forkRef\", \"scheduledAt\", \"startedAt\", \"endedAt\","                  \
	"   \"deciderSeenAt\", \"updatedAt\", \"cacheKey\", \"cacheTtlSeconds\","       \
	"   \"inputRef\", \"outputRef\")"                                               \
	"   SELECT r.\"id\", r.\"w\", r.\"ns\", r.\"refName\", r.\"taskDefName\","      \
	"   r.\"taskType\", r.\"iteration\", r.\"attempt\", r.\"st\","                  \
	"   coalesce(r.\"input\", '{}'),"                                               \
	"   CASE WHEN r.\"joinFork\" IS NOT NULL THEN (SELECT"                          \
	"     coalesce(jsonb_object_agg(b.\"refName\", b.\"output\"), '{}')"            \
	"     FROM (SELECT DISTINCT ON (b.\"refName\") b.\"refName\", b.\"output\""     \
	"     FROM \"TaskExecutions\" b WHERE b.\"workflowId\" = r.\"w\""               \
	"     AND b.\"workflowId\" = ANY(" keys ")"                                     \
	"     AND b.\"forkRef\" = r.\"joinFork\" AND b.\"iteration\" = r.\"iteration\"" \
	"     ORDER BY b.\"refName\", b.\"attempt\" DESC) b)"                           \
	"   ELSE coalesce(r.\"output\", '{}') END,"                                     \
	"   r.\"reason\", r.\"queueName\", coalesce(r.\"delaySeconds\", 0),"            \
	"   r.\"forkRef\", now(),"                                                      \
	"   CASE WHEN r.\"status\" IS NOT NULL THEN now() END,"                         \
	"   CASE WHEN r.\"term\" THEN now() END,"                                       \
	"   CASE WHEN r.\"term\" AND coalesce(r.\"seen\", false) THEN now() END,"       \
	"   now(), r.\"cacheKey\", r.\"cacheTtlSeconds\", r.\"inputRef\","              \
	"   r.\"outputRef\" FROM r"                                                     \
	"   ON CONFLICT (\"workflowId\", \"refName\", \"iteration\", \"attempt\")"      \
	"   DO UPDATE SET \"status\" = excluded.\"status\","                            \
	"   \"input\" = CASE WHEN (SELECT u.\"input\" IS NULL FROM r u"                 \
	"     WHERE u.\"id\" = excluded.\"id\") THEN t.\"input\""                       \
	"     ELSE excluded.\"input\" END,"                                             \
	"   \"inputRef\" = CASE WHEN (SELECT u.\"input\" IS NULL FROM r u"              \
	"     WHERE u.\"id\" = excluded.\"id\") THEN t.\"inputRef\""                    \
	"     ELSE excluded.\"inputRef\" END,"                                          \
	"   \"output\" = CASE WHEN (SELECT u.\"output\" IS NULL AND"                    \
	"     u.\"joinFork\" IS NULL FROM r u WHERE u.\"id\" = excluded.\"id\")"        \
	"     THEN t.\"output\" ELSE excluded.\"output\" END,"                          \
	"   \"outputRef\" = CASE WHEN (SELECT u.\"output\" IS NULL AND"                 \
	"     u.\"joinFork\" IS NULL FROM r u WHERE u.\"id\" = excluded.\"id\")"        \
	"     THEN t.\"outputRef\" ELSE excluded.\"outputRef\" END,"                    \
	"   \"reasonForIncompletion\" = excluded.\"reasonForIncompletion\","            \
	"   \"startedAt\" = coalesce(t.\"startedAt\", excluded.\"startedAt\"),"         \
	"   \"endedAt\" = coalesce(t.\"endedAt\", excluded.\"endedAt\"),"               \
	"   \"deciderSeenAt\" = excluded.\"deciderSeenAt\", \"updatedAt\" = now()"      \
	"   WHERE excluded.\"status\" <> 'SCHEDULED' AND (t.\"status\" NOT IN"          \
	"   " TERMINAL_TEXT " OR (t.\"status\" IN ('FAILED', 'TIMED_OUT',"              \
	"   'FAILED_WITH_TERMINAL_ERROR') AND excluded.\"status\" ="                    \
	"   'COMPLETED_WITH_ERRORS'))"                                                  \
	"   RETURNING t.\"id\", t.\"workflowId\", t.\"namespaceId\","                   \
	"   t.\"queueName\", t.\"taskType\", t.\"status\","                             \
	"   t.\"startDelaySeconds\", t.\"endedAt\", t.\"deciderSeenAt\"),"              \
	" nq AS (INSERT INTO \"TaskQueues\" (\"queueName\", \"taskId\","                \
	"   \"workflowId\", \"namespaceId\", \"taskType\", \"priority\","               \
	"   \"leaseExpiresAt\", \"semaphore\")"                                         \
	"   SELECT nt.\"queueName\", nt.\"id\", nt.\"workflowId\","                     \
	"   nt.\"namespaceId\", nt.\"taskType\", u.\"prio\","                           \
	"   CASE WHEN nt.\"startDelaySeconds\" > 0 THEN now() +"                        \
	"   make_interval(secs => nt.\"startDelaySeconds\") END, u.\"semaphore\""       \
	"   FROM nt JOIN r u ON u.\"id\" = nt.\"id\""                                   \
	"   WHERE nt.\"queueName\" IS NOT NULL AND nt.\"status\" = 'SCHEDULED'),"       \
	" s AS (UPDATE \"TaskExecutions\" t SET \"deciderSeenAt\" = now()"              \
	"   FROM (SELECT p.* FROM jsonb_to_recordset($3::jsonb)"                        \
	"   AS p(\"w\" uuid, \"id\" uuid) JOIN a ON a.\"w\" = p.\"w\") p"               \
	"   WHERE t.\"workflowId\" = p.\"w\" AND t.\"id\" = p.\"id\""                   \
	"   AND t.\"workflowId\" = ANY(" keys ")),"                                     \
	" cx AS (UPDATE \"TaskExecutions\" t SET \"status\" = 'CANCELED',"              \
	"   \"endedAt\" = now(), \"deciderSeenAt\" = now(), \"updatedAt\" = now()"      \
	"   FROM (SELECT p.* FROM jsonb_to_recordset($4::jsonb)"                        \
	"   AS p(\"w\" uuid, \"id\" uuid) JOIN a ON a.\"w\" = p.\"w\") p"               \
	"   WHERE t.\"workflowId\" = p.\"w\" AND t.\"id\" = p.\"id\""                   \
	"   AND t.\"workflowId\" = ANY(" keys ")"                                       \
	"   AND t.\"status\" NOT IN " SQL_TASK_TERMINAL                                 \
	"   RETURNING t.\"id\", t.\"queueName\"),"                                      \
	" cq AS (DELETE FROM \"TaskQueues\" q USING cx"                                 \
	"   WHERE q.\"queueName\" = cx.\"queueName\" AND q.\"taskId\" = cx.\"id\"),"    \
	" ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\","      \
	"   \"seq\", \"type\", \"taskId\", \"data\")"                                   \
	"   SELECT v.\"w\", a.\"ns\", a.\"base\" + v.\"i\", v.\"type\", v.\"taskId\","  \
	"   coalesce(v.\"data\", '{}') FROM jsonb_to_recordset($5::jsonb)"              \
	"   AS v(\"w\" uuid, \"i\" bigint, \"type\" text, \"taskId\" uuid,"             \
	"   \"data\" jsonb) JOIN a ON a.\"w\" = v.\"w\" ORDER BY v.\"w\", v.\"i\"),"    \
	" dq AS (DELETE FROM \"DecideQueues\" WHERE \"workflowId\" = ANY"               \
	"  (ARRAY(SELECT a.\"w\" FROM a WHERE NOT a.\"keep\""                           \
	"   AND NOT EXISTS (SELECT 1 FROM nt WHERE nt.\"workflowId\" = a.\"w\""         \
	"   AND nt.\"endedAt\" IS NOT NULL AND nt.\"deciderSeenAt\" IS NULL)))),"       \
	" dn AS (DELETE FROM \"DecideQueues\""                                          \
	"   WHERE \"workflowId\" = ANY($6::uuid[]))"                                    \
	" SELECT a.\"w\"::text FROM a"

/* $1 to $6 as above; the workflows' ids as a uuid[] expression (keys),
 * which prunes the partitions of "TaskExecutions" the statement updates
 * when they are parameters of their own (SQL_FEW_KEYS, $7 to $38). */
DB_STMT(decide_write, DECIDE_WRITE("ARRAY(SELECT \"w\" FROM x)"));
DB_STMT(decide_write_few, DECIDE_WRITE(SQL_FEW_KEYS_7 "::uuid[]"));

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

/* The parameters of one decide_write: JSON arrays, built up per item. */
struct write_params {
	json_t *x, *tasks, *seen, *cancel, *events;
};

static void
params_init(struct write_params *p)
{
	p->x = json_array();
	p->tasks = json_array();
	p->seen = json_array();
	p->cancel = json_array();
	p->events = json_array();
}

static void
params_free(struct write_params *p)
{
	json_decref(p->x);
	json_decref(p->tasks);
	json_decref(p->seen);
	json_decref(p->cancel);
	json_decref(p->events);
}

/* {w, id} of each id in ids, appended to out. */
static void
add_pairs(json_t *out, const char *w, const json_t *ids)
{
	size_t i;
	json_t *id;
	json_array_foreach ((json_t *)ids, i, id)
		json_array_append_new(out,
				      json_pack("{s:s,s:O}", "w", w, "id", id));
}

/*
 * Adds one decision to the first statement's parameters (first) and its
 * "joinFork" rows to the second's (joins); *has_joins says whether it had
 * any.  What subflows_apply carries out ("start" with a copy of the
 * child's input, "wait", "outbox") is not the store's row and is left out.
 */
static bool
add_item(struct db *db, const struct decide_item *it,
	 struct write_params *first, struct write_params *joins,
	 bool *has_joins, struct err *e)
{
	const struct loaded_execution *x = it->x;
	json_t *update = it->rows.update ? json_copy((json_t *)it->rows.update)
					 : json_object();
	if (!offload_member(db, x->ns_id, "workflow output", update, "output",
			    "outputRef", e)) {
		json_decref(update);
		return false;
	}
	size_t before = json_array_size(joins->tasks);
	size_t i;
	json_t *row;
	json_array_foreach (it->rows.tasks, i, row) {
		json_t *copy = json_copy(row);
		json_object_del(copy, "start");
		json_object_del(copy, "wait");
		json_object_del(copy, "outbox");
		if (!offload_member(db, x->ns_id, "task input", copy, "input",
				    "inputRef", e) ||
		    !offload_member(db, x->ns_id, "task output", copy, "output",
				    "outputRef", e)) {
			json_decref(copy);
			json_decref(update);
			return false;
		}
		json_object_set_new(copy, "w", json_string(x->id));
		json_array_append_new(json_object_get(row, "joinFork")
					      ? joins->tasks
					      : first->tasks,
				      copy);
	}
	*has_joins = json_array_size(joins->tasks) > before;
	json_array_append_new(
		first->x,
		json_pack("{s:s,s:s,s:I,s:I,s:i,s:o,s:b}", "w", x->id, "ns",
			  x->ns_id, "v", (json_int_t)x->version, "nev",
			  (json_int_t)json_array_size(it->rows.events), "prio",
			  x->priority, "u", update, "keep", *has_joins));
	if (*has_joins)
		json_array_append_new(joins->x,
				      json_pack("{s:s,s:s,s:i,s:b}", "w", x->id,
						"ns", x->ns_id, "prio",
						x->priority, "keep", false));
	add_pairs(first->seen, x->id, it->rows.seen);
	add_pairs(first->cancel, x->id, it->rows.cancel);
	json_t *ev;
	json_array_foreach (it->rows.events, i, ev) {
		json_t *copy = json_copy(ev);
		json_object_set_new(copy, "w", json_string(x->id));
		json_object_set_new(copy, "i", json_integer((json_int_t)i + 1));
		json_array_append_new(first->events, copy);
	}
	return true;
}

/* The id of the i-th execution of a decide_write's rows, or the nil UUID,
 * which no execution has. */
static const char *
key_at(const json_t *x, size_t i)
{
	const char *w =
		json_string_value(json_object_get(json_array_get(x, i), "w"));
	return w ? w : NIL_UUID;
}

/* Runs one decide_write, the variant for a few executions when few;
 * applied (when not NULL) gets the ids it applied. */
static bool
run_write_as(struct db *db, bool few, const struct write_params *p,
	     const char *dequeue, json_t *applied, struct err *e)
{
	char *x_text = json_db_text(p->x);
	char *tasks_text = json_db_text(p->tasks);
	char *seen_text = json_db_text(p->seen);
	char *cancel_text = json_db_text(p->cancel);
	char *events_text = json_db_text(p->events);
	const char *params[6 + SQL_FEW_KEYS] = {x_text,      tasks_text,
						seen_text,   cancel_text,
						events_text, dequeue};
	size_t n = json_array_size(p->x);
	PGresult *res;
	if (few) {
		for (size_t i = 0; i < SQL_FEW_KEYS; i++)
			params[6 + i] = key_at(p->x, i < n ? i : 0);
		res = db_exec(db, &decide_write_few, 6 + SQL_FEW_KEYS, params,
			      e);
	} else {
		res = db_exec(db, &decide_write, 6, params, e);
	}
	free(x_text);
	free(tasks_text);
	free(seen_text);
	free(cancel_text);
	free(events_text);
	if (!res)
		return false;
	for (int i = 0; applied && i < PQntuples(res); i++)
		json_array_append_new(applied,
				      json_string(PQgetvalue(res, i, 0)));
	PQclear(res);
	return true;
}

static bool
run_write(struct db *db, const struct write_params *p, const char *dequeue,
	  json_t *applied, struct err *e)
{
	return run_write_as(db, json_array_size(p->x) <= SQL_FEW_KEYS, p,
			    dequeue, applied, e);
}

static bool
id_listed(const json_t *ids, const char *id)
{
	size_t i;
	const json_t *v;
	json_array_foreach (ids, i, v)
		if (strcmp(json_string_value(v), id) == 0)
			return true;
	return false;
}

/*
 * The executions' rows of a write, locked by its transaction before the
 * write (in id order, as the version guard takes them).  The guard is a row
 * lock on rows that leases and results update too (their event counter),
 * and PostgreSQL 18 up to 18.4, when a row lock rechecks a row that another
 * transaction updated after the statement's snapshot (EvalPlanQual),
 * re-initialises the run-time partition pruning of the statement's Appends
 * and can prune every partition: the write applied its decision but marked
 * none of its tasks as reacted to (the tasks' Append pruned), and the next
 * evaluation reacted to them again.  Locked beforehand, the rows cannot
 * change under the write.  This statement prunes nothing at run time (it
 * names no window), so its own recheck has nothing to disturb.
 */
DB_STMT(decide_lock_executions,
	"SELECT 1 FROM \"WorkflowExecutions\" WHERE \"id\" = ANY($1::uuid[])"
	" ORDER BY \"id\" FOR NO KEY UPDATE");

static bool
lock_executions(struct db *db, const struct decide_item *items, size_t n,
		struct err *e)
{
	struct strbuf ids = STRBUF_INIT;
	sb_putc(&ids, '{');
	for (size_t i = 0; i < n; i++)
		sb_printf(&ids, "%s%s", i ? "," : "", items[i].x->id);
	sb_putc(&ids, '}');
	const char *params[] = {sb_str(&ids)};
	bool ok = db_run(db, &decide_lock_executions, 1, params, e);
	sb_free(&ids);
	return ok;
}

bool
decide_apply_batch(struct db *db, struct decide_item *items, size_t n,
		   const json_t *dequeue, bool lock, struct err *e)
{
	struct write_params first, joins;
	params_init(&first);
	params_init(&joins);
	bool *has_joins = xcalloc(n + 1, sizeof(*has_joins));
	bool any_joins = false, ok = true;
	for (size_t i = 0; ok && i < n; i++) {
		items[i].applied = false;
		ok = add_item(db, &items[i], &first, &joins, &has_joins[i], e);
		any_joins = any_joins || has_joins[i];
	}
	struct strbuf dq = STRBUF_INIT;
	sb_putc(&dq, '{');
	size_t k;
	json_t *id;
	json_array_foreach ((json_t *)dequeue, k, id)
		sb_printf(&dq, "%s%s", k ? "," : "", json_string_value(id));
	sb_putc(&dq, '}');
	json_t *applied = json_array();
	if (ok && n && lock)
		ok = lock_executions(db, items, n, e);
	if (ok && (n || json_array_size(dequeue)))
		ok = run_write(db, &first, sb_str(&dq), applied, e);
	for (size_t i = 0; ok && i < n; i++)
		items[i].applied = id_listed(applied, items[i].x->id);
	/* One statement does not see the rows it inserts itself (branches
	 * that finished in this evaluation): a join's output is built by a
	 * second one, for the decisions that were applied. */
	if (ok && any_joins) {
		json_t *jx = json_array(), *jt = json_array();
		size_t i;
		json_t *v;
		json_array_foreach (joins.x, i, v)
			if (id_listed(
				    applied,
				    json_string_value(json_object_get(v, "w"))))
				json_array_append(jx, v);
		json_array_foreach (joins.tasks, i, v)
			if (id_listed(
				    applied,
				    json_string_value(json_object_get(v, "w"))))
				json_array_append(jt, v);
		json_decref(joins.x);
		json_decref(joins.tasks);
		joins.x = jx;
		joins.tasks = jt;
		if (json_array_size(jx))
			ok = run_write(db, &joins, "{}", NULL, e);
	}
	json_decref(applied);
	sb_free(&dq);
	free(has_joins);
	params_free(&first);
	params_free(&joins);
	return ok;
}

bool
decide_warm(struct db *db, struct err *e)
{
	struct write_params none;
	params_init(&none);
	const char *ids[] = {"{}"};
	const char *tasks[] = {"{}", "[]"};
	const char *few[1 + SQL_FEW_KEYS] = {"[]"};
	for (size_t i = 0; i < SQL_FEW_KEYS; i++)
		few[1 + i] = NIL_UUID;
	bool ok =
		db_begin_generic(db, e) &&
		db_run(db, &decide_load_executions, 1, ids, e) &&
		db_run(db, &decide_load_tasks_stmt, 2, tasks, e) &&
		db_run(db, &decide_load_tasks_few, 1 + SQL_FEW_KEYS, few, e) &&
		run_write_as(db, false, &none, "{}", NULL, e) &&
		run_write_as(db, true, &none, "{}", NULL, e);
	db_rollback(db); /* it wrote nothing; nothing to keep */
	params_free(&none);
	return ok;
}

bool
decide_apply(struct db *db, const struct loaded_execution *x,
	     const struct decide_rows *rows, bool *applied, struct err *e)
{
	struct decide_item it = {.x = x, .rows = *rows};
	json_t *none = json_array();
	bool ok = decide_apply_batch(db, &it, 1, none, true, e);
	json_decref(none);
	*applied = ok && it.applied;
	return ok;
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
	&decide_turn_stmt,
	&decide_claim_stmt,
	&decide_load_executions,
	&decide_dequeue_stmt,
	&decide_load_tasks_stmt,
	&decide_load_tasks_few,
	&decide_write,
	&decide_write_few,
	&decide_postpone_stmt,
	&decide_lock_executions,
	&decide_recent_retries_stmt,
	NULL,
};
