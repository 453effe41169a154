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
 * Events of one statement: rows of src (each a task of some workflow) become
 * events numbered from their execution's counter.  The counter is advanced
 * by the number of the statement's events of that execution, under the
 * execution's row lock, so numbers are gap-free per workflow.
 */
#define EVENTS_FROM(src, type, data)                                                                           \
	" g AS (SELECT \"workflowId\", count(*) AS n FROM " src                                                \
	"   GROUP BY \"workflowId\"),"                                                                         \
	" w AS (UPDATE \"WorkflowExecutions\" e"                                                               \
	"   SET \"eventSeq\" = e.\"eventSeq\" + g.n FROM g"                                                    \
	"   WHERE e.\"id\" = g.\"workflowId\" AND " SQL_EXEC_WINDOW(                                           \
		"e",                                                                                           \
		"g.\"workflowId\"") " RETURNING e.\"id\", e.\"namespaceId\","                                  \
				    "   e.\"eventSeq\" - g.n AS base),"                                        \
				    " ev AS (INSERT INTO \"WorkflowEvents\" (\"workflowId\", \"namespaceId\"," \
				    "   \"seq\", \"type\", \"taskId\", \"data\")"                              \
				    "   SELECT w.\"id\", w.\"namespaceId\", w.base + row_number() OVER"        \
				    "   (PARTITION BY s.\"workflowId\" ORDER BY s.\"id\"), " type              \
				    ","                                                                        \
				    "   s.\"id\", " data " FROM " src                                          \
				    " s JOIN w ON w.\"id\" ="                                                  \
				    "   s.\"workflowId\")"

#endif
