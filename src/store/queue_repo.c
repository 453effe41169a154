#include "store/queue_repo.h"

#include "store/db.h"
#include "store/payload_repo.h"
#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/mem.h"
#include "util/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Leased tasks with their offloaded inputs read back.  A task whose
 * payload cannot be read is not lost: its lease runs out and it is
 * handed out again. */
static bool
resolved(struct db *db, char **json_out, struct err *e)
{
	if (payload_resolve_text(db, json_out, e))
		return true;
	free(*json_out);
	*json_out = NULL;
	return false;
}

/* The ungated lease: rows that name a semaphore of their own (a workflow
 * task's override) are passed over and counted, for the gated lease.
 *
 * Every lease takes its row locks (FOR UPDATE SKIP LOCKED) in
 * "nf_lease_candidates" (migration 0011), never in its own plan: in
 * PostgreSQL 18.4 a row lock that rechecks a concurrently updated row
 * breaks the run-time partition pruning of the same statement, and the
 * events part of a lease prunes "WorkflowExecutions" at run time (see the
 * migration and docs/operations.md).
 *
 * The candidates' rows are joined by key and named by their keys as well.
 * The join keeps the lease's row estimate at one, which keeps the task
 * rows' update a keyed nested loop on plans made on small tables (by the
 * keys alone, estimated at ten, it became a scan of every task partition).
 * Its cost: a plan made on an empty analysed queue scans the keys once for
 * every candidate (5,150 queue rows read for a lease of 100); one made on
 * a queue with rows, given the queue-name statistics of migration 0015,
 * reads each row once.  Both this and the batch of results keep their
 * generic plans on every connection (DB_STMT_GENERIC). */
DB_STMT_GENERIC(
	queue_lease_stmt,
	"WITH c AS MATERIALIZED (SELECT f.\"queueName\", f.\"id\","
	"   f.\"semaphore\" FROM \"nf_lease_candidates\"($1, NULL, $2::int) f),"
	" l AS (UPDATE \"TaskQueues\" q SET \"leaseExpiresAt\" = now() +"
	"   make_interval(secs => $3::float8), \"leasedBy\" = $4,"
	"   \"leaseCount\" = q.\"leaseCount\" + 1 FROM c"
	"   WHERE q.\"queueName\" = $1 AND q.\"queueName\" = c.\"queueName\""
	"   AND q.\"id\" = c.\"id\" AND c.\"semaphore\" IS NULL"
	"   AND q.\"id\" = ANY(ARRAY(SELECT c.\"id\" FROM c))"
	"   RETURNING q.\"taskId\", q.\"workflowId\", q.\"leaseExpiresAt\"),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'IN_PROGRESS',"
	"   \"startedAt\" = coalesce(te.\"startedAt\", now()), \"workerId\" = $4,"
	"   \"pollCount\" = te.\"pollCount\" + 1, \"updatedAt\" = now() FROM l"
	"   WHERE te.\"workflowId\" = l.\"workflowId\" AND te.\"id\" = l.\"taskId\""
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"refName\","
	"   te.\"taskDefName\", te.\"iteration\", te.\"attempt\", te.\"input\","
	"   l.\"leaseExpiresAt\")," EVENTS_FROM(
		"t", "'TASK_STARTED'",
		"jsonb_build_object('workerId', $4::text)") " SELECT coalesce(jsonb_agg(jsonb_build_object('id', t.\"id\","
							    " 'workflowId', t.\"workflowId\", 'refName', t.\"refName\","
							    " 'taskDefName', t.\"taskDefName\", 'iteration', t.\"iteration\","
							    " 'attempt', t.\"attempt\", 'input', t.\"input\", 'leaseExpiresAt',"
							    " t.\"leaseExpiresAt\") ORDER BY t.\"id\"), '[]')::text, count(*),"
							    " (SELECT count(*) FROM c WHERE c.\"semaphore\" IS NOT NULL)"
							    " FROM t");

bool
queue_lease_ungated(struct db *db, const char *queue, const char *worker,
		    int count, double lease_seconds, char **json_out, size_t *n,
		    size_t *passed_over, struct err *e)
{
	char cnt[16], secs[32];
	snprintf(cnt, sizeof(cnt), "%d", count);
	snprintf(secs, sizeof(secs), "%.3f", lease_seconds);
	const char *params[] = {queue, cnt, secs, worker};
	PGresult *res = db_exec(db, &queue_lease_stmt, 4, params, e);
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	*n = (size_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	if (passed_over)
		*passed_over = (size_t)strtoul(PQgetvalue(res, 0, 2), NULL, 10);
	PQclear(res);
	return resolved(db, json_out, e);
}

bool
queue_lease(struct db *db, const char *queue, const char *worker, int count,
	    double lease_seconds, char **json_out, size_t *n, struct err *e)
{
	return queue_lease_ungated(db, queue, worker, count, lease_seconds,
				   json_out, n, NULL, e);
}

/*
 * The gated lease, in one transaction of two statements.  The first takes,
 * in ascending order of key (so two polls never wait on each other in a
 * cycle), a transaction-scoped advisory lock on every semaphore the first
 * rows of the queue name, and on the queue itself when it has a
 * concurrentExecLimit or a rate limit.  The second then counts holders,
 * leased rows and the window's count under a snapshot taken after those
 * locks: counting inside the statement that locks would count with a
 * snapshot from before the wait, and two polls would both see the last
 * permit free.  An advisory lock serves semaphores nobody configured as
 * well as configured ones (there is no "Semaphores" row to lock).  A task's
 * "startedAt" is the clock after those locks, so it follows the end of
 * whichever task gave its permit back ("endedAt" is that result's start).
 */
DB_STMT(queue_gate_lock_stmt,
	"WITH c AS (SELECT coalesce(q.\"semaphore\", $3) AS s"
	"   FROM \"TaskQueues\" q"
	"   WHERE q.\"queueName\" = $1 AND q.\"leaseExpiresAt\" IS NULL"
	"   AND q.\"taskType\" = 'SIMPLE'"
	"   ORDER BY q.\"priority\" DESC, q.\"id\" LIMIT $4::int),"
	" k AS (SELECT DISTINCT c.s FROM c WHERE c.s IS NOT NULL),"
	" keys AS (SELECT hashtextextended('semaphore/' || $2::text || '/' ||"
	"   k.s, 0) AS \"key\" FROM k"
	"   UNION SELECT hashtextextended('queue/' || $1::text, 0) WHERE $5::bool),"
	" locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(o.\"key\")::text"
	"   AS x FROM (SELECT \"key\" FROM keys ORDER BY \"key\" OFFSET 0) o)"
	" SELECT (SELECT count(x) FROM locked),"
	" (SELECT coalesce(jsonb_agg(k.s), '[]')::text FROM k)");

#define GATE_WINDOW                                        \
	"date_bin(make_interval(secs => $10::int), now()," \
	" '1970-01-01 00:00:00+00'::timestamptz)"

DB_STMT(queue_lease_gated_stmt,
	"WITH c AS MATERIALIZED (SELECT f.\"queueName\", f.\"id\","
	"   f.\"priority\", coalesce(f.\"semaphore\", $6) AS s"
	"   FROM \"nf_lease_candidates\"($1, NULL, $12::int) f),"
	" sem AS (SELECT k.s, coalesce((SELECT p.\"permits\" FROM \"Semaphores\" p"
	"   WHERE p.\"namespaceId\" = $5::uuid AND p.\"name\" = k.s), $7::int)"
	"   - (SELECT count(*) FROM \"SemaphoreHolders\" h"
	"   WHERE h.\"namespaceId\" = $5::uuid AND h.\"name\" = k.s"
	"   AND h.\"leaseExpiresAt\" > now()) AS free"
	"   FROM (SELECT DISTINCT c.s FROM c WHERE c.s IN"
	"   (SELECT jsonb_array_elements_text($11::jsonb))) k),"
	" r AS (SELECT c.*, row_number() OVER (PARTITION BY c.s"
	"   ORDER BY c.\"priority\" DESC, c.\"id\") AS rn FROM c),"
	" cap AS (SELECT greatest(0, least($2::int,"
	"   CASE WHEN $8::int > 0 THEN $8::int - (SELECT count(*)"
	"   FROM \"TaskQueues\" x WHERE x.\"queueName\" = $1"
	"   AND x.\"leasedBy\" IS NOT NULL)::int ELSE $2::int END,"
	"   CASE WHEN $9::int > 0 THEN $9::int - coalesce((SELECT b.\"count\""
	"   FROM \"RateLimitBuckets\" b WHERE b.\"namespaceId\" = $5::uuid"
	"   AND b.\"queueName\" = $1 AND b.\"windowStart\" = " GATE_WINDOW
	"), 0) ELSE $2::int END)) AS n),"
	" pick AS (SELECT r.\"queueName\", r.\"id\", r.s FROM r"
	"   LEFT JOIN sem ON sem.s = r.s WHERE r.s IS NULL OR r.rn <= sem.free"
	"   ORDER BY r.\"priority\" DESC, r.\"id\" LIMIT (SELECT n FROM cap)),"
	" l AS (UPDATE \"TaskQueues\" q SET \"leaseExpiresAt\" = now() +"
	"   make_interval(secs => $3::float8), \"leasedBy\" = $4,"
	"   \"leaseCount\" = q.\"leaseCount\" + 1, \"semaphore\" = pick.s"
	"   FROM pick WHERE q.\"queueName\" = $1"
	"   AND q.\"queueName\" = pick.\"queueName\" AND q.\"id\" = pick.\"id\""
	"   AND q.\"id\" = ANY(ARRAY(SELECT pick.\"id\" FROM pick))"
	"   RETURNING q.\"taskId\", q.\"workflowId\", q.\"leaseExpiresAt\","
	"   pick.s),"
	" h AS (INSERT INTO \"SemaphoreHolders\" (\"namespaceId\", \"name\","
	"   \"taskId\", \"workflowId\", \"workerId\", \"leaseExpiresAt\")"
	"   SELECT $5::uuid, l.s, l.\"taskId\", l.\"workflowId\", $4,"
	"   l.\"leaseExpiresAt\" FROM l WHERE l.s IS NOT NULL"
	"   ON CONFLICT (\"namespaceId\", \"name\", \"taskId\") DO UPDATE SET"
	"   \"workflowId\" = EXCLUDED.\"workflowId\","
	"   \"workerId\" = EXCLUDED.\"workerId\", \"acquiredAt\" = now(),"
	"   \"leaseExpiresAt\" = EXCLUDED.\"leaseExpiresAt\"),"
	" rb AS (INSERT INTO \"RateLimitBuckets\" AS b (\"namespaceId\","
	"   \"queueName\", \"windowStart\", \"count\")"
	"   SELECT $5::uuid, $1, " GATE_WINDOW ", count(*) FROM l"
	"   WHERE $9::int > 0 HAVING count(*) > 0"
	"   ON CONFLICT (\"namespaceId\", \"queueName\", \"windowStart\")"
	"   DO UPDATE SET \"count\" = b.\"count\" + EXCLUDED.\"count\"),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'IN_PROGRESS',"
	"   \"startedAt\" = coalesce(te.\"startedAt\", clock_timestamp()),"
	"   \"workerId\" = $4,"
	"   \"pollCount\" = te.\"pollCount\" + 1, \"updatedAt\" = now() FROM l"
	"   WHERE te.\"workflowId\" = l.\"workflowId\" AND te.\"id\" = l.\"taskId\""
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"refName\","
	"   te.\"taskDefName\", te.\"iteration\", te.\"attempt\", te.\"input\","
	"   l.\"leaseExpiresAt\")," EVENTS_FROM(
		"t", "'TASK_STARTED'",
		"jsonb_build_object('workerId', $4::text)") " SELECT coalesce(jsonb_agg(jsonb_build_object('id', t.\"id\","
							    " 'workflowId', t.\"workflowId\", 'refName', t.\"refName\","
							    " 'taskDefName', t.\"taskDefName\", 'iteration', t.\"iteration\","
							    " 'attempt', t.\"attempt\", 'input', t.\"input\", 'leaseExpiresAt',"
							    " t.\"leaseExpiresAt\") ORDER BY t.\"id\"), '[]')::text, count(*)"
							    " FROM t");

bool
queue_lease_gated(struct db *db, const char *queue, const char *worker,
		  int count, double lease_seconds, const struct queue_gate *g,
		  char **json_out, size_t *n, struct err *e)
{
	/* Rows looked at: enough to find free ones past a few blocked. */
	int window = count * 4 + 16;
	char cnt[16], secs[32], look[16], permits[16], conc[16], rate[16],
		freq[16];
	snprintf(cnt, sizeof(cnt), "%d", count);
	snprintf(secs, sizeof(secs), "%.3f", lease_seconds);
	snprintf(look, sizeof(look), "%d", window);
	snprintf(permits, sizeof(permits), "%d", g->default_permits);
	snprintf(conc, sizeof(conc), "%d", g->concurrent_limit);
	snprintf(rate, sizeof(rate), "%d", g->rate_limit);
	snprintf(freq, sizeof(freq), "%d",
		 g->rate_seconds > 0 ? g->rate_seconds : 1);
	bool lock_queue = g->concurrent_limit > 0 || g->rate_limit > 0;
	if (!db_begin(db, e))
		return false;
	const char *lparams[] = {queue, g->ns_id, g->semaphore, look,
				 lock_queue ? "true" : "false"};
	PGresult *res = db_exec(db, &queue_gate_lock_stmt, 5, lparams, e);
	if (!res) {
		db_rollback(db);
		return false;
	}
	char *locked = xstrdup(PQgetvalue(res, 0, 1));
	PQclear(res);
	const char *params[] = {queue,    cnt,          secs,    worker,
				g->ns_id, g->semaphore, permits, conc,
				rate,     freq,         locked,  look};
	res = db_exec(db, &queue_lease_gated_stmt, 12, params, e);
	free(locked);
	if (!res) {
		db_rollback(db);
		return false;
	}
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	*n = (size_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	if (!resolved(db, json_out, e)) {
		db_rollback(db);
		*n = 0;
		return false;
	}
	if (!db_commit(db, e)) {
		free(*json_out);
		*json_out = NULL;
		*n = 0;
		return false;
	}
	return true;
}

/* The system-task runner's lease: by type across every queue, over
 * "TaskQueues_system_idx" (whose predicate the function's WHERE repeats). */
DB_STMT(queue_lease_system_stmt,
	"WITH c AS MATERIALIZED (SELECT f.\"queueName\", f.\"id\""
	"   FROM \"nf_lease_candidates\"(NULL, $1, $2::int) f),"
	" l AS (UPDATE \"TaskQueues\" q SET \"leaseExpiresAt\" = now() +"
	"   make_interval(secs => $3::float8), \"leasedBy\" = $4,"
	"   \"leaseCount\" = q.\"leaseCount\" + 1 FROM c"
	"   WHERE q.\"queueName\" = c.\"queueName\" AND q.\"id\" = c.\"id\""
	"   AND q.\"queueName\" = ANY(ARRAY(SELECT c.\"queueName\" FROM c))"
	"   AND q.\"id\" = ANY(ARRAY(SELECT c.\"id\" FROM c))"
	"   RETURNING q.\"queueName\", q.\"taskId\", q.\"workflowId\","
	"   q.\"namespaceId\"),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'IN_PROGRESS',"
	"   \"startedAt\" = coalesce(te.\"startedAt\", now()), \"workerId\" = $4,"
	"   \"pollCount\" = te.\"pollCount\" + 1, \"updatedAt\" = now() FROM l"
	"   WHERE te.\"workflowId\" = l.\"workflowId\" AND te.\"id\" = l.\"taskId\""
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"refName\","
	"   te.\"taskDefName\", te.\"attempt\", te.\"input\", l.\"queueName\","
	"   l.\"namespaceId\")," EVENTS_FROM(
		"t", "'TASK_STARTED'",
		"jsonb_build_object('workerId', $4::text)") " SELECT coalesce(jsonb_agg(jsonb_build_object('id', t.\"id\","
							    " 'workflowId', t.\"workflowId\", 'namespaceId', t.\"namespaceId\","
							    " 'queueName', t.\"queueName\", 'refName', t.\"refName\","
							    " 'taskDefName', t.\"taskDefName\", 'attempt', t.\"attempt\","
							    " 'input', t.\"input\", 'asyncComplete', coalesce((SELECT " SQL_ASYNC_COMPLETE("e", "t.\"refName\"") " FROM \"WorkflowExecutions\" e WHERE e.\"id\" = t.\"workflowId\" AND " SQL_EXEC_WINDOW(
								    "e",
								    "t.\"workflowId\"") "), false)) ORDER BY t.\"id\"), '[]')::text, count(*)"
											" FROM t");

bool
queue_lease_system(struct db *db, const char *task_type, const char *worker,
		   int count, double lease_seconds, char **json_out, size_t *n,
		   struct err *e)
{
	char cnt[16], secs[32];
	snprintf(cnt, sizeof(cnt), "%d", count);
	snprintf(secs, sizeof(secs), "%.3f", lease_seconds);
	const char *params[] = {task_type, cnt, secs, worker};
	PGresult *res = db_exec(db, &queue_lease_system_stmt, 4, params, e);
	if (!res)
		return false;
	*json_out = xstrdup(PQgetvalue(res, 0, 0));
	*n = (size_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	return resolved(db, json_out, e);
}

/*
 * The locks are taken in the order every writer of a workflow uses: queue
 * row, task, "DecideQueues", execution.  The evaluation holds its
 * "DecideQueues" row from claim to commit, so a result arriving meanwhile
 * waits on it and enqueues a fresh evaluation once that one has committed.
 */
DB_STMT(queue_result_stmt,
	"WITH l AS (SELECT q.\"workflowId\", q.\"namespaceId\","
	"   q.\"semaphore\" FROM \"TaskQueues\" q"
	"   WHERE q.\"queueName\" = $1 AND q.\"taskId\" = $2::uuid"
	"   AND ($7::bool OR q.\"leasedBy\" = $3) FOR UPDATE),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = $4,"
	"   \"output\" = $5::jsonb, \"outputRef\" = $8,"
	"   \"reasonForIncompletion\" = $6,"
	"   \"endedAt\" = now(), \"updatedAt\" = now() FROM l"
	"   WHERE te.\"workflowId\" = l.\"workflowId\" AND te.\"id\" = $2::uuid"
	"   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')"
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
	"   te.\"taskDefName\", te.\"cacheKey\", te.\"cacheTtlSeconds\"),"
	" q AS (DELETE FROM \"TaskQueues\" q USING t"
	"   WHERE q.\"queueName\" = $1 AND q.\"taskId\" = $2::uuid"
	"   AND q.\"taskId\" = t.\"id\"),"
	" hf AS (DELETE FROM \"SemaphoreHolders\" h USING l, t"
	"   WHERE h.\"namespaceId\" = l.\"namespaceId\""
	"   AND h.\"name\" = l.\"semaphore\" AND h.\"taskId\" = t.\"id\""
	"   RETURNING 1),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT \"workflowId\", \"namespaceId\", 'task' FROM t"
	"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
	"   EXCLUDED.\"reason\", \"enqueuedAt\" = LEAST("
	"   \"DecideQueues\".\"enqueuedAt\", EXCLUDED.\"enqueuedAt\")"
	"   RETURNING \"workflowId\"),"
	/* A cached task's completed output, unless offloaded. */
	" c AS (INSERT INTO \"TaskOutputCache\" (\"namespaceId\", \"taskDefName\","
	"   \"key\", \"output\", \"expiresAt\")"
	"   SELECT t.\"namespaceId\", t.\"taskDefName\", t.\"cacheKey\", $5::jsonb,"
	"   now() + make_interval(secs => t.\"cacheTtlSeconds\") FROM t"
	"   WHERE $4 = 'COMPLETED' AND $8::text IS NULL"
	"   AND t.\"cacheKey\" IS NOT NULL AND t.\"cacheTtlSeconds\" IS NOT NULL"
	"   ON CONFLICT (\"namespaceId\", \"taskDefName\", \"key\") DO UPDATE"
	"   SET \"output\" = excluded.\"output\", \"createdAt\" = now(),"
	"   \"expiresAt\" = excluded.\"expiresAt\")," SQL_TASKS_AFTER_D EVENTS_FROM(
		"td", "'TASK_' || $4::text",
		"jsonb_build_object('workerId', $3::text, 'reason', $6::text)") " SELECT (SELECT count(*) FROM l), (SELECT count(*) FROM t),"
										" (SELECT count(*) FROM hf),"
										" (SELECT t.\"workflowId\"::text FROM t)");

static const char *const result_names[] = {
	[RESULT_COMPLETED] = "COMPLETED",
	[RESULT_FAILED] = "FAILED",
	[RESULT_FAILED_WITH_TERMINAL_ERROR] = "FAILED_WITH_TERMINAL_ERROR",
};

bool
queue_result(struct db *db, const char *queue, const char *task_id,
	     const char *worker, enum task_result_status status,
	     const char *output, const char *reason, struct err *e)
{
	return queue_result_as(db, queue, task_id, worker, false, status,
			       output, reason, e);
}

/*
 * queue_result for many tasks.  Every lock is taken in (workflow, task)
 * order: the queue rows by the locking sort in l, the decision rows by the
 * ordered insert in d, which every later lock (the execution's event
 * counter) waits behind.  Cached outputs are deduplicated per key: one
 * statement may not update one row twice.  The queue rows are deleted by
 * their keys alone (q): joined to t as well, the keys were scanned once
 * for every task (5,150 queue rows read for a batch of 100).
 */
DB_STMT_GENERIC(
	queue_results_stmt,
	"WITH i AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS i(\"n\" int,"
	"   \"t\" uuid, \"w\" text, \"s\" text, \"o\" jsonb, \"r\" text)),"
	" l AS (SELECT q.\"workflowId\", q.\"namespaceId\", q.\"semaphore\","
	"   q.\"taskId\", i.\"n\", i.\"w\", i.\"s\", i.\"o\", i.\"r\""
	"   FROM \"TaskQueues\" q JOIN i ON q.\"taskId\" = i.\"t\""
	"   AND q.\"leasedBy\" = i.\"w\" WHERE q.\"queueName\" = $1"
	"   AND q.\"taskId\" = ANY(ARRAY(SELECT i.\"t\" FROM i))"
	"   ORDER BY q.\"workflowId\", q.\"taskId\" FOR UPDATE OF q),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = l.\"s\","
	"   \"output\" = l.\"o\", \"outputRef\" = NULL,"
	"   \"reasonForIncompletion\" = l.\"r\","
	"   \"endedAt\" = now(), \"updatedAt\" = now() FROM l"
	"   WHERE te.\"workflowId\" = l.\"workflowId\" AND te.\"id\" = l.\"taskId\""
	"   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')"
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\","
	"   te.\"taskDefName\", te.\"cacheKey\", te.\"cacheTtlSeconds\","
	"   l.\"n\", l.\"w\", l.\"s\", l.\"o\", l.\"r\", l.\"semaphore\"),"
	" q AS (DELETE FROM \"TaskQueues\" q WHERE q.\"queueName\" = $1"
	"   AND q.\"taskId\" = ANY(ARRAY(SELECT t.\"id\" FROM t))),"
	" hf AS (DELETE FROM \"SemaphoreHolders\" h USING t"
	"   WHERE h.\"namespaceId\" = t.\"namespaceId\""
	"   AND h.\"name\" = t.\"semaphore\" AND h.\"taskId\" = t.\"id\""
	"   RETURNING 1),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT DISTINCT \"workflowId\", \"namespaceId\", 'task'"
	"   FROM t ORDER BY 1"
	"   ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
	"   EXCLUDED.\"reason\", \"enqueuedAt\" = LEAST("
	"   \"DecideQueues\".\"enqueuedAt\", EXCLUDED.\"enqueuedAt\")"
	"   RETURNING \"workflowId\"),"
	" c AS (INSERT INTO \"TaskOutputCache\" (\"namespaceId\", \"taskDefName\","
	"   \"key\", \"output\", \"expiresAt\")"
	"   SELECT DISTINCT ON (t.\"namespaceId\", t.\"taskDefName\", t.\"cacheKey\")"
	"   t.\"namespaceId\", t.\"taskDefName\", t.\"cacheKey\", t.\"o\","
	"   now() + make_interval(secs => t.\"cacheTtlSeconds\") FROM t"
	"   WHERE t.\"s\" = 'COMPLETED'"
	"   AND t.\"cacheKey\" IS NOT NULL AND t.\"cacheTtlSeconds\" IS NOT NULL"
	"   ORDER BY t.\"namespaceId\", t.\"taskDefName\", t.\"cacheKey\", t.\"n\" DESC"
	"   ON CONFLICT (\"namespaceId\", \"taskDefName\", \"key\") DO UPDATE"
	"   SET \"output\" = excluded.\"output\", \"createdAt\" = now(),"
	"   \"expiresAt\" = excluded.\"expiresAt\")," SQL_TASKS_AFTER_D EVENTS_FROM(
		"td", "'TASK_' || s.\"s\"",
		"jsonb_build_object('workerId', s.\"w\", 'reason', s.\"r\")") " SELECT i.\"n\", l.\"taskId\" IS NOT NULL, t.\"id\" IS NOT NULL,"
									      " (SELECT count(*) FROM hf), t.\"workflowId\"::text"
									      " FROM i LEFT JOIN l USING (\"n\") LEFT JOIN t USING (\"n\")");

static int
by_text(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct non-null values of column col of res, as a uuid[] literal
 * in id order, and how many (*n). */
static char *
workflows_recorded(const PGresult *res, int col, size_t *n)
{
	int rows = PQntuples(res);
	char **ids = xcalloc((size_t)rows + 1, sizeof(*ids));
	size_t m = 0;
	for (int i = 0; i < rows; i++)
		if (!PQgetisnull(res, i, col))
			ids[m++] = PQgetvalue(res, i, col);
	if (m > 1)
		qsort(ids, m, sizeof(*ids), by_text);
	struct strbuf sb = STRBUF_INIT;
	sb_putc(&sb, '{');
	*n = 0;
	for (size_t i = 0; i < m; i++) {
		if (i && strcmp(ids[i], ids[i - 1]) == 0)
			continue;
		sb_printf(&sb, "%s%s", *n ? "," : "", ids[i]);
		(*n)++;
	}
	sb_putc(&sb, '}');
	free(ids);
	return sb_steal(&sb);
}

bool
queue_results(struct db *db, const char *queue, const char *batch, size_t n,
	      enum queue_fate *fate, bool *freed, char **workflows,
	      size_t *n_workflows, struct err *e)
{
	const char *params[] = {queue, batch};
	PGresult *res = db_exec(db, &queue_results_stmt, 2, params, e);
	if (!res)
		return false;
	*freed = false;
	if (workflows)
		*workflows = workflows_recorded(res, 4, n_workflows);
	for (size_t k = 0; k < n; k++)
		fate[k] = QUEUE_FATE_NOT_LEASED;
	for (int i = 0; i < PQntuples(res); i++) {
		unsigned long k = strtoul(PQgetvalue(res, i, 0), NULL, 10);
		if (k >= n)
			continue;
		bool leased = PQgetvalue(res, i, 1)[0] == 't';
		bool updated = PQgetvalue(res, i, 2)[0] == 't';
		fate[k] = updated  ? QUEUE_FATE_DONE
			  : leased ? QUEUE_FATE_FINISHED
				   : QUEUE_FATE_NOT_LEASED;
		*freed = *freed || strcmp(PQgetvalue(res, i, 3), "0") != 0;
	}
	PQclear(res);
	return true;
}

bool
queue_warm(struct db *db, struct err *e)
{
	/* Queue names are "namespace/name": none is empty. */
	const char *lease[] = {"", "1", "1", "warm"};
	const char *results[] = {"", "[]"};
	return db_run(db, &queue_lease_stmt, 4, lease, e) &&
	       db_run(db, &queue_results_stmt, 2, results, e);
}

DB_STMT(queue_namespace_stmt,
	"SELECT \"namespaceId\"::text FROM \"TaskQueues\""
	" WHERE \"queueName\" = $1 AND \"taskId\" = $2::uuid");

bool
queue_result_as(struct db *db, const char *queue, const char *task_id,
		const char *worker, bool any_holder,
		enum task_result_status status, const char *output,
		const char *reason, struct err *e)
{
	return queue_result_freeing(db, queue, task_id, worker, any_holder,
				    status, output, reason, NULL, NULL, e);
}

bool
queue_result_freeing(struct db *db, const char *queue, const char *task_id,
		     const char *worker, bool any_holder,
		     enum task_result_status status, const char *output,
		     const char *reason, bool *freed, char *workflow_id,
		     struct err *e)
{
	/* A large output goes to the payload store (under the namespace of
	 * its queue row; no row, no result: the statement below says why).
	 * One above the maximum fails the task for good instead. */
	char *stored = NULL, *too_large = NULL;
	char ref[48] = "";
	size_t len = strlen(output);
	if (len > (size_t)payload_offload_bytes()) {
		const char *qparams[] = {queue, task_id};
		PGresult *ns =
			db_exec(db, &queue_namespace_stmt, 2, qparams, e);
		if (!ns)
			return false;
		if (PQntuples(ns) == 1) {
			struct err pe = ERR_INIT;
			if (!payload_offload(db, PQgetvalue(ns, 0, 0), "output",
					     output, len, &stored, ref, &pe)) {
				if (pe.code != ERR_TOO_LARGE) {
					*e = pe;
					PQclear(ns);
					return false;
				}
				too_large = xstrdup(pe.msg);
				status = RESULT_FAILED_WITH_TERMINAL_ERROR;
				output = "{}";
				reason = too_large;
			}
		}
		PQclear(ns);
	}
	const char *params[] = {queue,
				task_id,
				worker,
				result_names[status],
				stored ? stored : output,
				reason,
				any_holder ? "true" : "false",
				ref[0] ? ref : NULL};
	PGresult *res = db_exec(db, &queue_result_stmt, 8, params, e);
	free(stored);
	free(too_large);
	if (!res)
		return false;
	bool leased = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
	bool updated = strcmp(PQgetvalue(res, 0, 1), "0") != 0;
	if (freed)
		*freed = strcmp(PQgetvalue(res, 0, 2), "0") != 0;
	if (workflow_id)
		snprintf(workflow_id, 37, "%s", PQgetvalue(res, 0, 3));
	PQclear(res);
	if (!updated)
		err_set(e, ERR_CONFLICT,
			leased ? "task %s is already finished"
			       : "task %s is not leased to worker %.80s on queue "
				 "%.120s (its lease was lost or it does not exist)",
			task_id, worker, queue);
	return updated;
}

DB_STMT(queue_park_stmt,
	"WITH l AS (SELECT q.\"workflowId\" FROM \"TaskQueues\" q"
	"   WHERE q.\"queueName\" = $1 AND q.\"taskId\" = $2::uuid"
	"   AND q.\"leasedBy\" = $3 FOR UPDATE),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'IN_PROGRESS',"
	"   \"output\" = $4::jsonb, \"outputRef\" = $5,"
	"   \"updatedAt\" = now() FROM l"
	"   WHERE te.\"workflowId\" = l.\"workflowId\" AND te.\"id\" = $2::uuid"
	"   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')"
	"   AND EXISTS (SELECT 1 FROM \"WorkflowExecutions\" e"
	"   WHERE e.\"id\" = l.\"workflowId\" AND " SQL_EXEC_WINDOW("e", "l.\"workflowId\"") " AND " SQL_ASYNC_COMPLETE(
		"e",
		"te.\"refName\"") ")"
				  "   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\"),"
				  " q AS (DELETE FROM \"TaskQueues\" q USING t"
				  "   WHERE q.\"queueName\" = $1 AND q.\"taskId\" = $2::uuid"
				  "   AND q.\"taskId\" = t.\"id\")," EVENTS_FROM(
					  "t", "'TASK_AWAITING_COMPLETION'",
					  "jsonb_build_object('workerId', $3::text)") " SELECT count(*) FROM t");

bool
queue_park(struct db *db, const char *queue, const char *task_id,
	   const char *worker, const char *output, bool *parked, struct err *e)
{
	/* A large output goes to the payload store, as a result's does; one
	 * above the maximum is not parked, and the result that follows fails
	 * the task. */
	char *stored = NULL;
	char ref[48] = "";
	size_t len = strlen(output);
	*parked = false;
	if (len > (size_t)payload_offload_bytes()) {
		if (len > (size_t)payload_max_bytes())
			return true;
		const char *qparams[] = {queue, task_id};
		PGresult *ns =
			db_exec(db, &queue_namespace_stmt, 2, qparams, e);
		if (!ns)
			return false;
		bool ok = PQntuples(ns) != 1 ||
			  payload_offload(db, PQgetvalue(ns, 0, 0), "output",
					  output, len, &stored, ref, e);
		PQclear(ns);
		if (!ok)
			return false;
	}
	const char *params[] = {queue, task_id, worker,
				stored ? stored : output, ref[0] ? ref : NULL};
	PGresult *res = db_exec(db, &queue_park_stmt, 5, params, e);
	free(stored);
	if (!res)
		return false;
	*parked = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
	PQclear(res);
	return true;
}

DB_STMT(queue_heartbeat_stmt,
	"WITH q AS (UPDATE \"TaskQueues\" SET \"leaseExpiresAt\" = now() +"
	"   make_interval(secs => $4::float8)"
	"   WHERE \"queueName\" = $1 AND \"taskId\" = $2::uuid"
	"   AND \"leasedBy\" = $3 RETURNING \"leaseExpiresAt\", \"namespaceId\","
	"   \"semaphore\", \"taskId\"),"
	" h AS (UPDATE \"SemaphoreHolders\" h SET \"leaseExpiresAt\" ="
	"   q.\"leaseExpiresAt\" FROM q WHERE h.\"namespaceId\" = q.\"namespaceId\""
	"   AND h.\"name\" = q.\"semaphore\" AND h.\"taskId\" = q.\"taskId\")"
	" SELECT \"leaseExpiresAt\"::text FROM q");

bool
queue_heartbeat(struct db *db, const char *queue, const char *task_id,
		const char *worker, double lease_seconds, char **expires_out,
		struct err *e)
{
	char secs[32];
	snprintf(secs, sizeof(secs), "%.3f", lease_seconds);
	const char *params[] = {queue, task_id, worker, secs};
	PGresult *res = db_exec(db, &queue_heartbeat_stmt, 4, params, e);
	if (!res)
		return false;
	bool ok = PQntuples(res) == 1;
	if (ok && expires_out)
		*expires_out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (!ok)
		err_set(e, ERR_CONFLICT,
			"task %s is not leased to worker %.80s on queue %.120s",
			task_id, worker, queue);
	return ok;
}

/* Back to SCHEDULED, available after the delay (NULL: at once). */
DB_STMT(queue_release_stmt,
	"WITH q AS (UPDATE \"TaskQueues\" SET \"leasedBy\" = NULL,"
	"   \"leaseExpiresAt\" = CASE WHEN $4::float8 > 0 THEN now() +"
	"   make_interval(secs => $4::float8) END"
	"   WHERE \"queueName\" = $1 AND \"taskId\" = $2::uuid"
	"   AND \"leasedBy\" = $3 RETURNING \"workflowId\", \"taskId\","
	"   \"namespaceId\", \"semaphore\"),"
	" hf AS (DELETE FROM \"SemaphoreHolders\" h USING q"
	"   WHERE h.\"namespaceId\" = q.\"namespaceId\""
	"   AND h.\"name\" = q.\"semaphore\" AND h.\"taskId\" = q.\"taskId\"),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'SCHEDULED',"
	"   \"callbackAfterSeconds\" = ceil($4::float8)::bigint,"
	"   \"updatedAt\" = now() FROM q"
	"   WHERE te.\"workflowId\" = q.\"workflowId\" AND te.\"id\" = q.\"taskId\""
	"   RETURNING te.\"id\", te.\"workflowId\")," EVENTS_FROM(
		"t", "'TASK_RELEASED'",
		"jsonb_build_object('workerId', $3::text, 'delaySeconds',"
		" $4::float8)") " SELECT count(*) FROM q");

bool
queue_release(struct db *db, const char *queue, const char *task_id,
	      const char *worker, double delay_seconds, struct err *e)
{
	char secs[32];
	snprintf(secs, sizeof(secs), "%.3f", delay_seconds);
	const char *params[] = {queue, task_id, worker, secs};
	PGresult *res = db_exec(db, &queue_release_stmt, 4, params, e);
	if (!res)
		return false;
	bool ok = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
	PQclear(res);
	if (!ok)
		err_set(e, ERR_CONFLICT,
			"task %s is not leased to worker %.80s on queue %.120s",
			task_id, worker, queue);
	return ok;
}

DB_STMT(queue_sweep_deferred_stmt,
	"WITH c AS (SELECT \"queueName\", \"id\" FROM \"TaskQueues\""
	"   WHERE \"leaseExpiresAt\" <= now() AND \"leasedBy\" IS NULL"
	"   ORDER BY \"leaseExpiresAt\" LIMIT $1::int FOR UPDATE SKIP LOCKED)"
	" UPDATE \"TaskQueues\" q SET \"leaseExpiresAt\" = NULL FROM c"
	" WHERE q.\"queueName\" = c.\"queueName\" AND q.\"id\" = c.\"id\"");

bool
queue_sweep_deferred(struct db *db, int limit, size_t *n, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {lim};
	PGresult *res = db_exec(db, &queue_sweep_deferred_stmt, 1, params, e);
	if (!res)
		return false;
	*n = (size_t)strtoul(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return true;
}

/* A lease that ran out: the worker went silent past the task's
 * responseTimeoutSeconds; the attempt times out and the decider decides
 * (retry as a new attempt, or fail the workflow). */
DB_STMT(queue_sweep_expired_stmt,
	"WITH c AS (SELECT \"queueName\", \"id\", \"taskId\", \"workflowId\","
	"   \"leasedBy\", \"namespaceId\", \"semaphore\" FROM \"TaskQueues\""
	"   WHERE \"leaseExpiresAt\" <= now() AND \"leasedBy\" IS NOT NULL"
	"   ORDER BY \"leaseExpiresAt\" LIMIT $1::int FOR UPDATE SKIP LOCKED),"
	" t AS (UPDATE \"TaskExecutions\" te SET \"status\" = 'TIMED_OUT',"
	"   \"reasonForIncompletion\" = 'no result or heartbeat from worker ' ||"
	"   c.\"leasedBy\" || ' before its lease ran out (responseTimeoutSeconds)',"
	"   \"endedAt\" = now(), \"updatedAt\" = now() FROM c"
	"   WHERE te.\"workflowId\" = c.\"workflowId\" AND te.\"id\" = c.\"taskId\""
	"   AND te.\"status\" IN ('SCHEDULED', 'IN_PROGRESS')"
	"   RETURNING te.\"id\", te.\"workflowId\", te.\"namespaceId\"),"
	" q AS (DELETE FROM \"TaskQueues\" q USING c"
	"   WHERE q.\"queueName\" = c.\"queueName\" AND q.\"id\" = c.\"id\"),"
	" hf AS (DELETE FROM \"SemaphoreHolders\" h USING c"
	"   WHERE h.\"namespaceId\" = c.\"namespaceId\""
	"   AND h.\"name\" = c.\"semaphore\" AND h.\"taskId\" = c.\"taskId\"),"
	" d AS (INSERT INTO \"DecideQueues\" (\"workflowId\", \"namespaceId\","
	"   \"reason\") SELECT DISTINCT \"workflowId\", \"namespaceId\", 'timeout'"
	"   FROM t ON CONFLICT (\"workflowId\") DO UPDATE SET \"reason\" ="
	"   EXCLUDED.\"reason\", \"enqueuedAt\" = LEAST("
	"   \"DecideQueues\".\"enqueuedAt\", EXCLUDED.\"enqueuedAt\")"
	"   RETURNING \"workflowId\")," SQL_TASKS_AFTER_D EVENTS_FROM(
		"td", "'TASK_TIMED_OUT'",
		"jsonb_build_object('reason', 'lease expired')") " SELECT count(*) FROM c");

bool
queue_sweep_expired(struct db *db, int limit, size_t *n, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {lim};
	PGresult *res = db_exec(db, &queue_sweep_expired_stmt, 1, params, e);
	if (!res)
		return false;
	*n = (size_t)strtoul(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}

struct db_stmt *const queue_repo_stmts[] = {
	&queue_lease_stmt,
	&queue_gate_lock_stmt,
	&queue_lease_gated_stmt,
	&queue_lease_system_stmt,
	&queue_result_stmt,
	&queue_namespace_stmt,
	&queue_heartbeat_stmt,
	&queue_release_stmt,
	&queue_sweep_deferred_stmt,
	&queue_sweep_expired_stmt,
	&queue_park_stmt,
	&queue_results_stmt,
	NULL,
};
