#include "store/outbox_repo.h"

#include "store/sql.h"
#include "util/json.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one value of a one-row, one-column result, parsed as JSON. */
static bool
json_of(PGresult *res, json_t **out, struct err *e)
{
	const char *text = PQgetvalue(res, 0, 0);
	*out = json_parse(text, strlen(text), 0, e);
	PQclear(res);
	return *out != NULL;
}

static bool
deleted_one(PGresult *res, const char *what, const char *name, struct err *e)
{
	bool one = strcmp(PQcmdTuples(res), "0") != 0;
	PQclear(res);
	if (!one)
		err_set(e, ERR_NOT_FOUND, "%s \"%.200s\" does not exist", what,
			name);
	return one;
}

/* --------------------------------------------------------------- sinks */

DB_STMT(outbox_sink_put_stmt,
	"INSERT INTO \"Sinks\" (\"namespaceId\", \"name\", \"kind\","
	" \"config\", \"secret\") VALUES ($1::uuid, $2, $3, $4::jsonb, $5)"
	" ON CONFLICT (\"namespaceId\", \"name\") DO UPDATE SET"
	" \"kind\" = EXCLUDED.\"kind\", \"config\" = EXCLUDED.\"config\","
	" \"secret\" = EXCLUDED.\"secret\", \"updatedAt\" = now()"
	" RETURNING (xmax = 0)::text");

bool
outbox_sink_put(struct db *db, const char *ns_id, const char *name,
		const char *kind, const json_t *config, const char *secret,
		bool *created, struct err *e)
{
	char *cfg = json_db_text(config);
	const char *params[] = {ns_id, name, kind, cfg, secret};
	PGresult *res = db_exec(db, &outbox_sink_put_stmt, 5, params, e);
	free(cfg);
	if (!res)
		return false;
	*created = strcmp(PQgetvalue(res, 0, 0), "true") == 0;
	PQclear(res);
	return true;
}

#define SINK_JSON                                                    \
	"jsonb_build_object('name', s.\"name\", 'kind', s.\"kind\")" \
	" || s.\"config\" || jsonb_build_object('hasSecret',"        \
	" s.\"secret\" IS NOT NULL, 'createdAt', s.\"createdAt\","   \
	" 'updatedAt', s.\"updatedAt\")"

DB_STMT(outbox_sink_get_stmt,
	"SELECT (" SINK_JSON ")::text FROM \"Sinks\" s"
	" WHERE s.\"namespaceId\" = $1::uuid AND s.\"name\" = $2");

bool
outbox_sink_get(struct db *db, const char *ns_id, const char *name,
		json_t **out, struct err *e)
{
	const char *params[] = {ns_id, name};
	PGresult *res = db_exec(db, &outbox_sink_get_stmt, 2, params, e);
	if (!res)
		return false;
	if (PQntuples(res) == 0) {
		PQclear(res);
		err_set(e, ERR_NOT_FOUND, "sink \"%.200s\" does not exist",
			name);
		return false;
	}
	return json_of(res, out, e);
}

DB_STMT(outbox_sink_list_stmt,
	"SELECT coalesce(jsonb_agg(" SINK_JSON " ORDER BY s.\"name\"),"
	" '[]')::text FROM \"Sinks\" s WHERE s.\"namespaceId\" = $1::uuid");

bool
outbox_sink_list(struct db *db, const char *ns_id, json_t **out, struct err *e)
{
	const char *params[] = {ns_id};
	PGresult *res = db_exec(db, &outbox_sink_list_stmt, 1, params, e);
	return res && json_of(res, out, e);
}

DB_STMT(outbox_sink_delete_stmt,
	"DELETE FROM \"Sinks\" WHERE \"namespaceId\" = $1::uuid"
	" AND \"name\" = $2");

bool
outbox_sink_delete(struct db *db, const char *ns_id, const char *name,
		   struct err *e)
{
	const char *params[] = {ns_id, name};
	PGresult *res = db_exec(db, &outbox_sink_delete_stmt, 2, params, e);
	return res && deleted_one(res, "sink", name, e);
}

/* ----------------------------------------------------- status listeners */

DB_STMT(outbox_listener_put_stmt,
	"INSERT INTO \"StatusListeners\" (\"namespaceId\", \"workflowName\","
	" \"sink\", \"workflowTransitions\", \"taskTransitions\","
	" \"eventTypes\")"
	" SELECT $1::uuid, $2, $3,"
	" ARRAY(SELECT jsonb_array_elements_text($4::jsonb)),"
	" ARRAY(SELECT jsonb_array_elements_text($5::jsonb)),"
	" ARRAY(SELECT jsonb_array_elements_text($6::jsonb))"
	" ON CONFLICT (\"namespaceId\", \"workflowName\") DO UPDATE SET"
	" \"sink\" = EXCLUDED.\"sink\","
	" \"workflowTransitions\" = EXCLUDED.\"workflowTransitions\","
	" \"taskTransitions\" = EXCLUDED.\"taskTransitions\","
	" \"eventTypes\" = EXCLUDED.\"eventTypes\", \"updatedAt\" = now()"
	" RETURNING (xmax = 0)::text");

bool
outbox_listener_put(struct db *db, const char *ns_id, const char *workflow_name,
		    const char *sink, const json_t *workflow_transitions,
		    const json_t *task_transitions, const json_t *event_types,
		    bool *created, struct err *e)
{
	char *wt = json_db_text(workflow_transitions);
	char *tt = json_db_text(task_transitions);
	char *et = json_db_text(event_types);
	const char *params[] = {ns_id, workflow_name, sink, wt, tt, et};
	PGresult *res = db_exec(db, &outbox_listener_put_stmt, 6, params, e);
	free(wt);
	free(tt);
	free(et);
	if (!res)
		return false;
	*created = strcmp(PQgetvalue(res, 0, 0), "true") == 0;
	PQclear(res);
	return true;
}

#define LISTENER_JSON                                                    \
	"jsonb_build_object('workflowName', l.\"workflowName\", 'sink'," \
	" l.\"sink\", 'workflowTransitions', to_jsonb("                  \
	"l.\"workflowTransitions\"), 'taskTransitions', to_jsonb("       \
	"l.\"taskTransitions\"), 'createdAt', l.\"createdAt\","          \
	" 'updatedAt', l.\"updatedAt\")"

DB_STMT(outbox_listener_get_stmt,
	"SELECT (" LISTENER_JSON ")::text FROM \"StatusListeners\" l"
	" WHERE l.\"namespaceId\" = $1::uuid AND l.\"workflowName\" = $2");

bool
outbox_listener_get(struct db *db, const char *ns_id, const char *workflow_name,
		    json_t **out, struct err *e)
{
	const char *params[] = {ns_id, workflow_name};
	PGresult *res = db_exec(db, &outbox_listener_get_stmt, 2, params, e);
	if (!res)
		return false;
	if (PQntuples(res) == 0) {
		PQclear(res);
		err_set(e, ERR_NOT_FOUND,
			"no status listener for workflow \"%.200s\"",
			workflow_name);
		return false;
	}
	return json_of(res, out, e);
}

DB_STMT(outbox_listener_list_stmt,
	"SELECT coalesce(jsonb_agg(" LISTENER_JSON
	" ORDER BY l.\"workflowName\"), '[]')::text"
	" FROM \"StatusListeners\" l WHERE l.\"namespaceId\" = $1::uuid");

bool
outbox_listener_list(struct db *db, const char *ns_id, json_t **out,
		     struct err *e)
{
	const char *params[] = {ns_id};
	PGresult *res = db_exec(db, &outbox_listener_list_stmt, 1, params, e);
	return res && json_of(res, out, e);
}

DB_STMT(outbox_listener_delete_stmt,
	"DELETE FROM \"StatusListeners\" WHERE \"namespaceId\" = $1::uuid"
	" AND \"workflowName\" = $2");

bool
outbox_listener_delete(struct db *db, const char *ns_id,
		       const char *workflow_name, struct err *e)
{
	const char *params[] = {ns_id, workflow_name};
	PGresult *res = db_exec(db, &outbox_listener_delete_stmt, 2, params, e);
	return res && deleted_one(res, "status listener of workflow",
				  workflow_name, e);
}

/* ------------------------------------------------------------ delivery */

/*
 * The inner scan is "OutboxEvents_deliverable_idx" in ("nextAttemptAt",
 * "id") order.  clock_timestamp() makes each claim's token distinct even
 * within one statement's rows.
 */
DB_STMT(outbox_claim_stmt,
	"WITH c AS (SELECT \"id\" FROM \"OutboxEvents\""
	"   WHERE \"publishedAt\" IS NULL AND \"deadLetteredAt\" IS NULL"
	"   AND \"nextAttemptAt\" <= now()"
	"   ORDER BY \"nextAttemptAt\", \"id\" LIMIT $1::int"
	"   FOR UPDATE SKIP LOCKED),"
	" u AS (UPDATE \"OutboxEvents\" o SET \"nextAttemptAt\" ="
	"   clock_timestamp() + $2::bigint * interval '1 millisecond'"
	"   FROM c WHERE o.\"id\" = c.\"id\" RETURNING o.*)"
	" SELECT u.\"id\"::text, u.\"nextAttemptAt\"::text,"
	" u.\"attempts\"::text,"
	" jsonb_build_object('id', u.\"id\", 'eventType', u.\"eventType\","
	"   'sink', u.\"sink\", 'workflowId', u.\"workflowId\","
	"   'taskId', u.\"taskId\", 'createdAt', u.\"createdAt\","
	"   'payload', u.\"payload\")::text,"
	" u.\"eventType\", coalesce(u.\"sink\", ''), s.\"name\", s.\"kind\","
	" s.\"config\"::text, s.\"secret\""
	" FROM u LEFT JOIN LATERAL (SELECT * FROM \"Sinks\" k"
	"   WHERE k.\"namespaceId\" = u.\"namespaceId\" AND k.\"name\" IN"
	"   (u.\"sink\", substr(u.\"sink\", strpos(u.\"sink\", ':') + 1))"
	"   ORDER BY k.\"name\" = u.\"sink\" LIMIT 1) s ON true"
	" ORDER BY u.\"id\"");

static char *
dup_or_null(PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL
					  : xstrdup(PQgetvalue(res, row, col));
}

bool
outbox_claim(struct db *db, int limit, long lease_ms, struct outbox_item **out,
	     size_t *n, struct err *e)
{
	char lim[16], lease[24];
	snprintf(lim, sizeof(lim), "%d", limit);
	snprintf(lease, sizeof(lease), "%ld", lease_ms);
	const char *params[] = {lim, lease};
	*out = NULL;
	*n = 0;
	PGresult *res = db_exec(db, &outbox_claim_stmt, 2, params, e);
	if (!res)
		return false;
	int rows = PQntuples(res);
	*out = xcalloc((size_t)rows + 1, sizeof(**out));
	for (int i = 0; i < rows; i++) {
		struct outbox_item *it = &(*out)[i];
		it->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		snprintf(it->token, sizeof(it->token), "%s",
			 PQgetvalue(res, i, 1));
		it->attempts = atoi(PQgetvalue(res, i, 2));
		it->body = xstrdup(PQgetvalue(res, i, 3));
		it->event_type = xstrdup(PQgetvalue(res, i, 4));
		it->sink = xstrdup(PQgetvalue(res, i, 5));
		it->sink_found = !PQgetisnull(res, i, 6);
		it->sink_name = dup_or_null(res, i, 6);
		it->kind = dup_or_null(res, i, 7);
		it->config = dup_or_null(res, i, 8);
		it->secret = dup_or_null(res, i, 9);
	}
	*n = (size_t)rows;
	PQclear(res);
	return true;
}

void
outbox_items_free(struct outbox_item *items, size_t n)
{
	for (size_t i = 0; items && i < n; i++) {
		free(items[i].body);
		free(items[i].event_type);
		free(items[i].sink);
		free(items[i].sink_name);
		free(items[i].kind);
		free(items[i].config);
		free(items[i].secret);
	}
	free(items);
}

DB_STMT(outbox_published_stmt,
	"UPDATE \"OutboxEvents\" SET \"publishedAt\" = now(),"
	" \"attempts\" = \"attempts\" + 1"
	" WHERE \"id\" = $1::bigint AND \"nextAttemptAt\" = $2::timestamptz"
	" AND \"publishedAt\" IS NULL AND \"deadLetteredAt\" IS NULL");

bool
outbox_published(struct db *db, const struct outbox_item *it, bool *recorded,
		 struct err *e)
{
	char id[24];
	snprintf(id, sizeof(id), "%lld", it->id);
	const char *params[] = {id, it->token};
	PGresult *res = db_exec(db, &outbox_published_stmt, 2, params, e);
	if (!res)
		return false;
	*recorded = strcmp(PQcmdTuples(res), "0") != 0;
	PQclear(res);
	return true;
}

DB_STMT(outbox_failed_stmt,
	"UPDATE \"OutboxEvents\" SET \"attempts\" = \"attempts\" + 1,"
	" \"lastError\" = $3,"
	" \"nextAttemptAt\" = clock_timestamp() + $4::bigint"
	"   * interval '1 millisecond',"
	" \"deadLetteredAt\" = CASE WHEN $6::boolean"
	"   OR \"attempts\" + 1 >= $5::int THEN now() END"
	" WHERE \"id\" = $1::bigint AND \"nextAttemptAt\" = $2::timestamptz"
	" AND \"publishedAt\" IS NULL AND \"deadLetteredAt\" IS NULL"
	" RETURNING (\"deadLetteredAt\" IS NOT NULL)::text");

bool
outbox_failed(struct db *db, const struct outbox_item *it, const char *error,
	      long delay_ms, int max_attempts, bool dead, bool *dead_lettered,
	      struct err *e)
{
	char id[24], delay[24], max[16];
	snprintf(id, sizeof(id), "%lld", it->id);
	snprintf(delay, sizeof(delay), "%ld", delay_ms);
	snprintf(max, sizeof(max), "%d", max_attempts);
	const char *params[] = {id,    it->token, error,
				delay, max,       dead ? "true" : "false"};
	PGresult *res = db_exec(db, &outbox_failed_stmt, 6, params, e);
	if (!res)
		return false;
	*dead_lettered = PQntuples(res) == 1 &&
			 strcmp(PQgetvalue(res, 0, 0), "true") == 0;
	PQclear(res);
	return true;
}

DB_STMT(outbox_prune_stmt,
	"DELETE FROM \"OutboxEvents\" WHERE \"id\" IN (SELECT \"id\""
	" FROM \"OutboxEvents\" WHERE \"publishedAt\" IS NOT NULL"
	" AND \"publishedAt\" < now() - $1::bigint * interval '1 hour'"
	" ORDER BY \"publishedAt\" LIMIT $2::int)");

bool
outbox_prune(struct db *db, long retention_hours, int limit, size_t *deleted,
	     struct err *e)
{
	char hours[24], lim[16];
	snprintf(hours, sizeof(hours), "%ld", retention_hours);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {hours, lim};
	PGresult *res = db_exec(db, &outbox_prune_stmt, 2, params, e);
	if (!res)
		return false;
	*deleted = (size_t)strtoul(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return true;
}

DB_STMT(outbox_prune_dead_stmt,
	"DELETE FROM \"OutboxEvents\" WHERE \"id\" IN (SELECT \"id\""
	" FROM \"OutboxEvents\" WHERE \"deadLetteredAt\" IS NOT NULL"
	" AND \"deadLetteredAt\" < now() - $1::bigint * interval '1 hour'"
	" ORDER BY \"deadLetteredAt\" LIMIT $2::int)");

bool
outbox_prune_dead(struct db *db, long retention_hours, int limit,
		  size_t *deleted, struct err *e)
{
	char hours[24], lim[16];
	snprintf(hours, sizeof(hours), "%ld", retention_hours);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {hours, lim};
	PGresult *res = db_exec(db, &outbox_prune_dead_stmt, 2, params, e);
	if (!res)
		return false;
	*deleted = (size_t)strtoul(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return true;
}

/* --------------------------------------------------------- dead letter */

DB_STMT(outbox_dead_list_stmt,
	"SELECT coalesce(jsonb_agg(jsonb_build_object('id', o.\"id\","
	" 'eventType', o.\"eventType\", 'sink', o.\"sink\","
	" 'workflowId', o.\"workflowId\", 'taskId', o.\"taskId\","
	" 'payload', o.\"payload\", 'attempts', o.\"attempts\","
	" 'lastError', o.\"lastError\", 'createdAt', o.\"createdAt\","
	" 'deadLetteredAt', o.\"deadLetteredAt\") ORDER BY o.\"id\"),"
	" '[]')::text"
	" FROM (SELECT * FROM \"OutboxEvents\""
	"   WHERE \"namespaceId\" = $1::uuid AND \"deadLetteredAt\" IS NOT NULL"
	"   AND \"id\" > coalesce($2::bigint, 0)"
	"   ORDER BY \"id\" LIMIT $3::int) o");

bool
outbox_dead_list(struct db *db, const char *ns_id, const char *after_id,
		 int limit, json_t **items, bool *more, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit + 1);
	const char *params[] = {ns_id, after_id, lim};
	PGresult *res = db_exec(db, &outbox_dead_list_stmt, 3, params, e);
	if (!res || !json_of(res, items, e))
		return false;
	*more = json_array_size(*items) > (size_t)limit;
	if (*more)
		json_array_remove(*items, (size_t)limit);
	return true;
}

DB_STMT(outbox_dead_replay_stmt,
	"WITH r AS (UPDATE \"OutboxEvents\" SET \"attempts\" = 0,"
	"   \"deadLetteredAt\" = NULL, \"nextAttemptAt\" = now()"
	"   WHERE \"namespaceId\" = $1::uuid AND \"deadLetteredAt\" IS NOT NULL"
	"   AND ($2::boolean OR \"id\" IN (SELECT jsonb_array_elements_text("
	"   $3::jsonb)::bigint))"
	"   RETURNING 1),"
	" n AS (SELECT count(*) AS \"n\" FROM r)"
	" SELECT n.\"n\"::text, CASE WHEN n.\"n\" > 0 THEN"
	" pg_notify('node_flow_outbox', '')::text END FROM n");

bool
outbox_dead_replay(struct db *db, const char *ns_id, bool all,
		   const json_t *ids, long long *replayed, struct err *e)
{
	char *text = ids ? json_db_text(ids) : xstrdup("[]");
	const char *params[] = {ns_id, all ? "true" : "false", text};
	PGresult *res = db_exec(db, &outbox_dead_replay_stmt, 3, params, e);
	free(text);
	if (!res)
		return false;
	*replayed = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}

struct db_stmt *const outbox_repo_stmts[] = {
	&outbox_sink_put_stmt,      &outbox_sink_get_stmt,
	&outbox_sink_list_stmt,     &outbox_sink_delete_stmt,
	&outbox_listener_put_stmt,  &outbox_listener_get_stmt,
	&outbox_listener_list_stmt, &outbox_listener_delete_stmt,
	&outbox_claim_stmt,         &outbox_published_stmt,
	&outbox_failed_stmt,        &outbox_prune_stmt,
	&outbox_prune_dead_stmt,    &outbox_dead_list_stmt,
	&outbox_dead_replay_stmt,   NULL,
};
