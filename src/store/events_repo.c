#include "store/events_repo.h"

#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <errno.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

DB_STMT(events_ns_now_stmt,
	"SELECT pg_snapshot_xmin(pg_current_snapshot())::text");

bool
events_ns_now(struct db *db, struct events_ns_pos *pos, struct err *e)
{
	PGresult *res = db_exec(db, &events_ns_now_stmt, 0, NULL, e);
	if (!res)
		return false;
	pos->xid = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	snprintf(pos->wf_id, sizeof(pos->wf_id), "%s",
		 "00000000-0000-0000-0000-000000000000");
	pos->seq = 0;
	PQclear(res);
	return true;
}

void
events_ns_pos_format(const struct events_ns_pos *pos, char *out)
{
	snprintf(out, EVENTS_NS_POS_LEN, "%" PRIu64 "-%s-%" PRId64, pos->xid,
		 pos->wf_id, pos->seq);
}

bool
events_ns_pos_parse(const char *text, struct events_ns_pos *pos)
{
	if (!text || *text < '0' || *text > '9')
		return false;
	char *end;
	errno = 0;
	unsigned long long xid = strtoull(text, &end, 10);
	if (errno || *end != '-' || strlen(end + 1) < 38)
		return false;
	char wf[37];
	memcpy(wf, end + 1, 36);
	wf[36] = '\0';
	const char *p = end + 37;
	if (!uuid_valid(wf) || *p != '-' || p[1] < '0' || p[1] > '9')
		return false;
	long long seq = strtoll(p + 1, &end, 10);
	if (errno || *end || seq < 0)
		return false;
	pos->xid = xid;
	memcpy(pos->wf_id, wf, 37);
	pos->seq = seq;
	return true;
}

/* Over "WorkflowEvents_ns_status_idx" (whose predicate the WHERE
 * repeats).  The summary holds the list endpoint's fields that stay small
 * (no input, output or variables). */
DB_STMT(events_ns_read_stmt,
	"WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)"
	" SELECT ev.\"xid\"::text, ev.\"workflowId\"::text, ev.\"seq\"::text,"
	" ev.\"xid\" < s.xmin, x.\"defName\","
	" CASE WHEN x.\"id\" IS NOT NULL THEN"
	" jsonb_build_object('id', x.\"id\", 'name', x.\"defName\","
	" 'version', x.\"defVersion\", 'status', x.\"status\","
	" 'correlationId', x.\"correlationId\","
	" 'reason', x.\"reasonForIncompletion\","
	" 'parentWorkflowId', x.\"parentWorkflowId\","
	" 'startedAt', x.\"startedAt\", 'updatedAt', x.\"updatedAt\","
	" 'endedAt', x.\"endedAt\", 'eventType', ev.\"type\","
	" 'seq', ev.\"seq\")::text END"
	" FROM s CROSS JOIN \"WorkflowEvents\" ev"
	" LEFT JOIN \"WorkflowExecutions\" x ON x.\"id\" = ev.\"workflowId\""
	"   AND " SQL_EXEC_WINDOW(
		"x",
		"ev.\"workflowId\"") " WHERE ev.\"namespaceId\" = $1::uuid AND ev.\"type\" LIKE 'WORKFLOW\\_%'"
				     " AND (ev.\"xid\", ev.\"workflowId\", ev.\"seq\")"
				     "   > ($2::xid8, $3::uuid, $4::bigint)"
				     " ORDER BY ev.\"xid\", ev.\"workflowId\", ev.\"seq\" LIMIT $5::int");

bool
events_ns_read(struct db *db, const char *ns_id,
	       const struct events_ns_pos *after, int limit, events_ns_fn *fn,
	       void *arg, int *count, struct err *e)
{
	char xid[24], seq[24], lim[16];
	snprintf(xid, sizeof(xid), "%" PRIu64, after->xid);
	snprintf(seq, sizeof(seq), "%" PRId64, after->seq);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {ns_id, xid, after->wf_id, seq, lim};
	PGresult *res = db_exec(db, &events_ns_read_stmt, 5, params, e);
	if (!res)
		return false;
	int n = PQntuples(res);
	for (int i = 0; i < n; i++) {
		struct events_ns_pos pos;
		pos.xid = strtoull(PQgetvalue(res, i, 0), NULL, 10);
		snprintf(pos.wf_id, sizeof(pos.wf_id), "%s",
			 PQgetvalue(res, i, 1));
		pos.seq = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		bool settled = strcmp(PQgetvalue(res, i, 3), "t") == 0;
		bool gone = PQgetisnull(res, i, 5);
		fn(&pos, settled, gone ? NULL : PQgetvalue(res, i, 4),
		   gone ? NULL : PQgetvalue(res, i, 5), arg);
	}
	*count = n;
	PQclear(res);
	return true;
}

DB_STMT(events_changed_ns_stmt,
	"SELECT DISTINCT ev.\"namespaceId\"::text"
	" FROM unnest($1::uuid[], $2::bigint[]) AS n(\"workflowId\", \"seq\")"
	" JOIN \"WorkflowEvents\" ev ON ev.\"workflowId\" = n.\"workflowId\""
	"   AND ev.\"seq\" = n.\"seq\" AND " SQL_EVENT_WINDOW(
		"ev",
		"n.\"workflowId\"") " WHERE ev.\"type\" LIKE 'WORKFLOW\\_%'");

bool
events_changed_namespaces(struct db *db, const char *const *ids,
			  const int64_t *seqs, int n, events_ns_id_fn *fn,
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
	PGresult *res = db_exec(db, &events_changed_ns_stmt, 2, params, e);
	sb_free(&a);
	sb_free(&b);
	if (!res)
		return false;
	int rows = PQntuples(res);
	for (int i = 0; i < rows; i++)
		fn(PQgetvalue(res, i, 0), arg);
	PQclear(res);
	return true;
}

struct db_stmt *const events_repo_stmts[] = {
	&events_exists_stmt,  &events_read_stmt,       &events_ns_now_stmt,
	&events_ns_read_stmt, &events_changed_ns_stmt, NULL,
};
