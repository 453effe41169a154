/*
 * sqlfrag — SQL fragments shared by several statements, spliced in at
 * compile time by string-literal concatenation (never with values).
 *
 * Only store/ includes this header.
 */
#ifndef NF_STORE_SQLFRAG_H
#define NF_STORE_SQLFRAG_H

/*
 * An execution's "startedAt" lies within seconds of the time inside its
 * UUIDv7 id (both are taken by the statement that starts it), so a lookup
 * by id can bound "startedAt" and let the planner prune every monthly
 * partition but one (two across a month boundary).  `alias` is the table
 * alias or name, `idexpr` the SQL expression of the id.
 */
#define SQL_EXEC_WINDOW(alias, idexpr)                           \
	alias ".\"startedAt\" >= uuid_extract_timestamp(" idexpr \
	      ") - interval '1 hour' AND " alias                 \
	      ".\"startedAt\" < uuid_extract_timestamp(" idexpr  \
	      ") + interval '1 hour'"

/* Events can be no older than their execution: the same bound prunes the
 * monthly "WorkflowEvents" partitions. */
#define SQL_EVENT_WINDOW(alias, idexpr)                   \
	alias ".\"at\" >= uuid_extract_timestamp(" idexpr \
	      ") - interval '1 hour'"

/*
 * Whether task reference `ref` (an SQL expression) is declared
 * "asyncComplete": true anywhere in the definition execution `e` (an alias
 * of "WorkflowExecutions") runs: its snapshot, or the registered version.
 */
#define SQL_ASYNC_COMPLETE(e, ref)                                          \
	"coalesce(jsonb_path_exists(coalesce(" e ".\"definition\","         \
	" (SELECT wd.\"definition\" FROM \"WorkflowDefinitions\" wd"        \
	" WHERE wd.\"namespaceId\" = " e                                    \
	".\"namespaceId\" AND wd.\"name\" = " e                             \
	".\"defName\" AND wd.\"version\" = " e ".\"defVersion\")),"         \
	" '$.** ? (@.taskReferenceName == $r && @.asyncComplete == true)'," \
	" jsonb_build_object('r', " ref ")), false)"

/*
 * Up to SQL_FEW_KEYS keys, each a parameter of its own, as an array
 * (SQL_FEW_KEYS_n: $n to $n + 31).  A generic plan prunes the partitions
 * of a hash-partitioned table by the values it can see one by one when it
 * starts: `"workflowId" = ANY($1::uuid[])` starts and runs a scan of each
 * of the 16 partitions of "TaskExecutions", `"workflowId" =
 * ANY(SQL_FEW_KEYS_2 "::uuid[]")` only of the partitions its keys hash to
 * (starting a scan is most of what a lookup of a few workflows costs).
 * The caller fills the slots it does not need with a key it passes anyway.
 */
#define SQL_FEW_KEYS 32
#define SQL_FEW_KEYS_2                                                   \
	"ARRAY[$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17," \
	"$18,$19,$20,$21,$22,$23,$24,$25,$26,$27,$28,$29,$30,$31,$32,$33]"
#define SQL_FEW_KEYS_7                                                        \
	"ARRAY[$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22," \
	"$23,$24,$25,$26,$27,$28,$29,$30,$31,$32,$33,$34,$35,$36,$37,$38]"

/* Statuses after which a task never changes again. */
#define SQL_TASK_TERMINAL                                   \
	"('COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', " \
	"'FAILED_WITH_TERMINAL_ERROR', 'TIMED_OUT', 'CANCELED', 'SKIPPED')"

/*
 * td: the tasks of t, once d (their workflows queued for a decision) is
 * written whole.  A statement locks an execution's "DecideQueues" row
 * before its "WorkflowExecutions" row (EVENTS_FROM's w), the order a
 * decider takes them in.  d queues the workflow of every task of t, or
 * none, so no task is filtered out; a join of t to d was a nested loop over
 * two CTEs estimated at one row each, every row of d read for every task.
 */
#define SQL_TASKS_AFTER_D \
	" td AS (SELECT t.* FROM t WHERE (SELECT count(*) FROM d) > 0),"

/*
 * Events of one statement: rows of src (each a task of some workflow) become
 * events numbered from their execution's counter.  The counter is advanced
 * by the number of the statement's events of that execution, under the
 * execution's row lock, so numbers are gap-free per workflow.
 *
 * Each execution's events travel as arrays from its group (g) through its
 * counter's update (w) to the insert, in the tasks' order: a join of the
 * tasks back to w would join two CTEs the planner estimates at one row
 * each, a nested loop that reads every updated execution for every task
 * (9,900 rows compared for a lease of 100 tasks).
 */
#define EVENTS_FROM(src, type, data)                                         \
	" g AS (SELECT s.\"workflowId\", count(*) AS n,"                     \
	"   array_agg(s.\"id\" ORDER BY s.\"id\") AS \"ids\","               \
	"   array_agg((" type ")::text ORDER BY s.\"id\") AS \"types\","     \
	"   array_agg((" data ")::jsonb ORDER BY s.\"id\") AS \"datas\""     \
	"   FROM " src " s GROUP BY s.\"workflowId\"),"                      \
	" w AS (UPDATE \"WorkflowExecutions\" e"                             \
	"   SET \"eventSeq\" = e.\"eventSeq\" + g.n FROM g"                  \
	"   WHERE e.\"id\" = g.\"workflowId\" AND " SQL_EXEC_WINDOW(         \
		"e",                                                         \
		"g.\"workflowId\"") " RETURNING e.\"id\","                   \
				    " e.\"namespaceId\","                    \
				    "   e.\"eventSeq\" - g.n AS base,"       \
				    " g.\"ids\", g.\"types\", g.\"datas\")," \
				    " ev AS (INSERT INTO \"WorkflowEvents\"" \
				    "   (\"workflowId\", \"namespaceId\","   \
				    "   \"seq\", \"type\", \"taskId\","      \
				    " \"data\")"                             \
				    "   SELECT w.\"id\", w.\"namespaceId\"," \
				    "   w.base + u.\"ord\", u.\"type\","     \
				    " u.\"taskId\", u.\"data\" FROM w,"      \
				    "   unnest(w.\"ids\", w.\"types\","      \
				    " w.\"datas\") WITH ORDINALITY AS"       \
				    "   u(\"taskId\", \"type\", \"data\","   \
				    " \"ord\"))"

#endif
