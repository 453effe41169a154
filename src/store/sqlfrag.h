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

/* Statuses after which a task never changes again. */
#define SQL_TASK_TERMINAL                                   \
	"('COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', " \
	"'FAILED_WITH_TERMINAL_ERROR', 'TIMED_OUT', 'CANCELED', 'SKIPPED')"

#endif
