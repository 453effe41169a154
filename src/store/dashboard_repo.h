/*
 * dashboard_repo — the read-only summaries the dashboard shows beside the
 * executions list: the namespaces, each queue's depth and workers, and the
 * last minutes' starts, completions and failures.
 *
 * Every statement is bounded whatever the size of the tables: queue depths
 * are counted up to DASHBOARD_COUNT_CAP rows (off the partial dequeue
 * index), the statistics read the executions started in the window
 * through the ("namespaceId", "startedAt") index and those that ended in
 * it through the partial ("namespaceId", "endedAt") index, at most
 * DASHBOARD_STATS_ROWS of each (the answer says "sampled" when it stopped
 * there), and lists are capped.
 *
 * Threads: the caller's connection.  Ownership: the returned JSON text is
 * the caller's (free).  Failure: false with e set.
 */
#ifndef NF_STORE_DASHBOARD_REPO_H
#define NF_STORE_DASHBOARD_REPO_H

#include "util/err.h"

#include <stdbool.h>

struct db;

/* Macros, not an enum: the statements' text spells them. */
#define DASHBOARD_COUNT_CAP      10000
#define DASHBOARD_STATS_ROWS     200000
#define DASHBOARD_MAX_NAMESPACES 1000
#define DASHBOARD_MAX_QUEUES     500
#define DASHBOARD_MAX_WORKERS    100

/* [{"name","createdAt"}…] by name. */
bool dashboard_namespaces(struct db *db, char **json_out, struct err *e);

/* [{"name","depth","inFlight","capped","workers":[{"workerId",
 * "lastPollAt","pollCount"}…]}…] by name: every task definition of the
 * namespace and every queue a worker polled in it.  Queue names in the
 * store are "<ns name>/<task>"; the answer names the task. */
bool dashboard_queues(struct db *db, const char *ns_id, const char *ns_name,
		      char **json_out, struct err *e);

/* {"minutes","sampled","buckets":[{"at","started","completed","failed"}…],
 * "slowest":[{"name","count","avgSeconds","maxSeconds"}…],
 * "mostFailing":[{"name","total","failed"}…]} over the last `minutes`
 * minutes: "started" counts the executions by the minute they started;
 * "completed", "failed", "slowest" and "mostFailing" are over the
 * executions that ended in the window (by "endedAt"), whenever they
 * started. */
bool dashboard_stats(struct db *db, const char *ns_id, int minutes,
		     char **json_out, struct err *e);

#endif
