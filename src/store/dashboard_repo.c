#include "store/dashboard_repo.h"

#include "store/sql.h"
#include "util/mem.h"

#include <stdio.h>

#define STR_(x) #x
#define STR(x)  STR_(x)

DB_STMT(dashboard_namespaces_stmt,
	"SELECT coalesce(jsonb_agg(jsonb_build_object('name', n.\"name\","
	"   'createdAt', n.\"createdAt\") ORDER BY n.\"name\"), '[]')::text"
	" FROM (SELECT \"name\", \"createdAt\" FROM \"Namespaces\""
	"   ORDER BY \"name\" LIMIT " STR(DASHBOARD_MAX_NAMESPACES) ") n");

bool
dashboard_namespaces(struct db *db, char **json_out, struct err *e)
{
	PGresult *res = db_exec(db, &dashboard_namespaces_stmt, 0, NULL, e);
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

/* $1 namespace id, $2 namespace name ("<ns>/<task>" is a queue's name). */
DB_STMT(dashboard_queues_stmt,
	"WITH q AS (SELECT \"name\" FROM (SELECT \"name\" FROM \"TaskDefinitions\""
	"   WHERE \"namespaceId\" = $1::uuid"
	"   UNION SELECT substr(\"queueName\", length($2::text) + 2)"
	"   FROM \"WorkerPolls\" WHERE \"namespaceId\" = $1::uuid) u"
	"   ORDER BY \"name\" LIMIT " STR(
		DASHBOARD_MAX_QUEUES) "),"
				      " c AS (SELECT q.\"name\","
				      "   (SELECT count(*) FROM (SELECT 1 FROM \"TaskQueues\" t"
				      "     WHERE t.\"queueName\" = $2::text || '/' || q.\"name\""
				      "     AND t.\"leaseExpiresAt\" IS NULL"
				      "     LIMIT " STR(
					      DASHBOARD_COUNT_CAP) ") r) AS \"depth\","
								   "   (SELECT count(*) FROM (SELECT 1 FROM \"TaskQueues\" t"
								   "     WHERE t.\"queueName\" = $2::text || '/' || q.\"name\""
								   "     AND t.\"leasedBy\" IS NOT NULL"
								   "     LIMIT " STR(
									   DASHBOARD_COUNT_CAP) ") l) AS \"inFlight\","
												"   (SELECT coalesce(jsonb_agg(jsonb_build_object('workerId',"
												"     w.\"workerId\", 'lastPollAt', w.\"lastPollAt\", 'pollCount',"
												"     w.\"pollCount\") ORDER BY w.\"lastPollAt\" DESC), '[]')"
												"     FROM (SELECT * FROM \"WorkerPolls\" p"
												"     WHERE p.\"namespaceId\" = $1::uuid"
												"     AND p.\"queueName\" = $2::text || '/' || q.\"name\""
												"     ORDER BY p.\"lastPollAt\" DESC"
												"     LIMIT " STR(
													DASHBOARD_MAX_WORKERS) ") w) AS \"workers\""
															       "   FROM q)"
															       " SELECT coalesce(jsonb_agg(jsonb_build_object('name', c.\"name\","
															       "   'depth', c.\"depth\", 'inFlight', c.\"inFlight\", 'capped',"
															       "   c.\"depth\" >= " STR(DASHBOARD_COUNT_CAP) " OR c.\"inFlight\" >= " STR(
																       DASHBOARD_COUNT_CAP) ", 'workers', c.\"workers\")"
																			    "   ORDER BY c.\"name\"), '[]')::text FROM c");

bool
dashboard_queues(struct db *db, const char *ns_id, const char *ns_name,
		 char **json_out, struct err *e)
{
	const char *params[] = {ns_id, ns_name};
	PGresult *res = db_exec(db, &dashboard_queues_stmt, 2, params, e);
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

/*
 * $1 namespace id, $2 minutes.  Two index range scans: the executions
 * started in the window (the recent index, newest first) give `started`;
 * those that ended in it (the partial ended index, across the partitions,
 * since an execution may have started long before) give `completed`,
 * `failed`, `slowest` and `mostFailing`.  Each read stops at
 * DASHBOARD_STATS_ROWS, the newest.
 */
/* The window's first minute.  Written out, not a CTE's column: the
 * planner estimates a stable expression with its value and picks the
 * indexes (a CTE's would be an unknown parameter, and a sequential scan). */
#define WINDOW_START \
	"(date_trunc('minute', now()) - make_interval(mins => $2::int - 1))"

/* clang-format off */
DB_STMT(dashboard_stats_stmt,
	"WITH st AS (SELECT \"startedAt\" FROM \"WorkflowExecutions\""
	"   WHERE \"namespaceId\" = $1::uuid"
	"   AND \"startedAt\" >= " WINDOW_START
	"   ORDER BY \"startedAt\" DESC LIMIT " STR(DASHBOARD_STATS_ROWS) "),"
	" w AS (SELECT \"defName\", \"status\", \"startedAt\", \"endedAt\""
	"   FROM \"WorkflowExecutions\" WHERE \"namespaceId\" = $1::uuid"
	"   AND \"endedAt\" IS NOT NULL"
	"   AND \"endedAt\" >= " WINDOW_START
	"   ORDER BY \"endedAt\" DESC LIMIT " STR(DASHBOARD_STATS_ROWS) "),"
	" m AS (SELECT generate_series(" WINDOW_START ","
	"   date_trunc('minute', now()), interval '1 minute') AS \"mi\"),"
	" s AS (SELECT date_trunc('minute', \"startedAt\") AS \"mi\","
	"   count(*) AS \"n\" FROM st GROUP BY 1),"
	" e AS (SELECT date_trunc('minute', \"endedAt\") AS \"mi\","
	"   count(*) FILTER (WHERE \"status\" = 'COMPLETED') AS \"ok\","
	"   count(*) FILTER (WHERE \"status\" IN ('FAILED', 'TIMED_OUT',"
	"   'TERMINATED')) AS \"bad\" FROM w GROUP BY 1)"
	" SELECT jsonb_build_object('minutes', $2::int,"
	"   'sampled', (SELECT count(*) FROM st) >= " STR(DASHBOARD_STATS_ROWS)
	"     OR (SELECT count(*) FROM w) >= " STR(DASHBOARD_STATS_ROWS) ","
	"   'buckets', (SELECT jsonb_agg(jsonb_build_object('at', m.\"mi\","
	"     'started', coalesce(s.\"n\", 0), 'completed', coalesce(e.\"ok\", 0),"
	"     'failed', coalesce(e.\"bad\", 0)) ORDER BY m.\"mi\")"
	"     FROM m LEFT JOIN s ON s.\"mi\" = m.\"mi\""
	"     LEFT JOIN e ON e.\"mi\" = m.\"mi\"),"
	"   'slowest', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', t.\"d\","
	"     'count', t.\"n\", 'avgSeconds', t.\"a\", 'maxSeconds', t.\"x\")"
	"     ORDER BY t.\"a\" DESC, t.\"d\"), '[]') FROM (SELECT \"defName\" AS \"d\","
	"     count(*) AS \"n\", round(avg(extract(epoch FROM \"endedAt\" -"
	"     \"startedAt\")), 3) AS \"a\", round(max(extract(epoch FROM"
	"     \"endedAt\" - \"startedAt\")), 3) AS \"x\" FROM w"
	"     GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT 10) t),"
	"   'mostFailing', (SELECT coalesce(jsonb_agg(jsonb_build_object('name',"
	"     t.\"d\", 'total', t.\"n\", 'failed', t.\"f\") ORDER BY t.\"f\" DESC,"
	"     t.\"d\"), '[]') FROM (SELECT \"defName\" AS \"d\", count(*) AS \"n\","
	"     count(*) FILTER (WHERE \"status\" IN ('FAILED', 'TIMED_OUT',"
	"     'TERMINATED')) AS \"f\" FROM w GROUP BY 1"
	"     HAVING count(*) FILTER (WHERE \"status\" IN ('FAILED', 'TIMED_OUT',"
	"     'TERMINATED')) > 0 ORDER BY 3 DESC, 1 LIMIT 10) t))::text");
/* clang-format on */

bool
dashboard_stats(struct db *db, const char *ns_id, int minutes, char **json_out,
		struct err *e)
{
	char m[16];
	snprintf(m, sizeof(m), "%d", minutes);
	const char *params[] = {ns_id, m};
	PGresult *res = db_exec(db, &dashboard_stats_stmt, 2, params, e);
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

struct db_stmt *const dashboard_repo_stmts[] = {
	&dashboard_namespaces_stmt,
	&dashboard_queues_stmt,
	&dashboard_stats_stmt,
	NULL,
};
