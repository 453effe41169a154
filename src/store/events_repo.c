#include "store/events_repo.h"

#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

DB_STMT(events_exists_stmt,
	"SELECT 1 FROM \"WorkflowExecutions\" e"
	" WHERE e.\"namespaceId\" = $1::uuid AND e.\"id\" = $2::uuid"
	" AND " SQL_EXEC_WINDOW("e", "$2::uuid"));

bool
events_workflow_exists(struct db *db, const char *ns_id, const char *id,
		       bool *found, struct err *e)
{
	const char *params[] = {ns_id, id};
	PGresult *res = db_exec(db, &events_exists_stmt, 2, params, e);
	if (!res)
		return false;
	*found = PQntuples(res) > 0;
	PQclear(res);
	return true;
}

/* The object is built exactly as the JSON history endpoint builds it
 * (store/executions_repo.c), so both speak of an event alike. */
DB_STMT(events_read_stmt,
	"SELECT ev.\"seq\"::text, ev.\"type\","
	" jsonb_build_object('seq', ev.\"seq\", 'type', ev.\"type\","
	" 'taskId', ev.\"taskId\", 'data', ev.\"data\", 'at', ev.\"at\")::text"
	" FROM \"WorkflowEvents\" ev"
	" WHERE ev.\"workflowId\" = $2::uuid AND ev.\"namespaceId\" = $1::uuid"
	" AND ev.\"seq\" > $3::bigint AND " SQL_EVENT_WINDOW(
		"ev", "$2::uuid") " ORDER BY ev.\"seq\" LIMIT $4::int");

bool
events_read(struct db *db, const char *ns_id, const char *id, int64_t after,
	    int limit, events_row_fn *fn, void *arg, int *count, struct err *e)
{
	char after_s[24], lim[16];
	snprintf(after_s, sizeof(after_s), "%" PRId64, after);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {ns_id, id, after_s, lim};
	PGresult *res = db_exec(db, &events_read_stmt, 4, params, e);
	if (!res)
		return false;
	int n = PQntuples(res);
	for (int i = 0; i < n; i++)
		fn(strtoll(PQgetvalue(res, i, 0), NULL, 10),
		   PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), arg);
	*count = n;
	PQclear(res);
	return true;
}

/* The summary holds the list endpoint's fields that stay small (no input,
 * output or variables). */
DB_STMT(events_changes_stmt,
	"SELECT x.\"namespaceId\"::text, x.\"defName\","
	" jsonb_build_object('id', x.\"id\", 'name', x.\"defName\","
	" 'version', x.\"defVersion\", 'status', x.\"status\","
	" 'correlationId', x.\"correlationId\","
	" 'reason', x.\"reasonForIncompletion\","
	" 'parentWorkflowId', x.\"parentWorkflowId\","
	" 'startedAt', x.\"startedAt\", 'updatedAt', x.\"updatedAt\","
	" 'endedAt', x.\"endedAt\", 'eventType', ev.\"type\","
	" 'seq', ev.\"seq\")::text"
	" FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY"
	"   AS n(\"workflowId\", \"seq\", \"ord\")"
	" JOIN \"WorkflowEvents\" ev ON ev.\"workflowId\" = n.\"workflowId\""
	"   AND ev.\"seq\" = n.\"seq\" AND " SQL_EVENT_WINDOW(
		"ev",
		"n.\"workflowId\"") " JOIN \"WorkflowExecutions\" x ON x.\"id\" = n.\"workflowId\""
				    "   AND " SQL_EXEC_WINDOW(
					    "x",
					    "n.\"workflowId\"") " WHERE ev.\"type\" LIKE 'WORKFLOW\\_%'"
								" ORDER BY n.\"ord\"");

bool
events_workflow_changes(struct db *db, const char *const *ids,
			const int64_t *seqs, int n, events_change_fn *fn,
			void *arg, struct err *e)
{
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
	sb_putc(&a, '{');
	sb_putc(&b, '{');
	for (int i = 0; i < n; i++) {
		sb_printf(&a, "%s%s", i ? "," : "", ids[i]);
		sb_printf(&b, "%s%" PRId64, i ? "," : "", seqs[i]);
	}
	sb_putc(&a, '}');
	sb_putc(&b, '}');
	const char *params[] = {sb_str(&a), sb_str(&b)};
	PGresult *res = db_exec(db, &events_changes_stmt, 2, params, e);
	sb_free(&a);
	sb_free(&b);
	if (!res)
		return false;
	int rows = PQntuples(res);
	for (int i = 0; i < rows; i++)
		fn(PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
		   PQgetvalue(res, i, 2), arg);
	PQclear(res);
	return true;
}

struct db_stmt *const events_repo_stmts[] = {
	&events_exists_stmt,
	&events_read_stmt,
	&events_changes_stmt,
	NULL,
};
