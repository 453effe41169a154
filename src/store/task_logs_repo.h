/*
 * task_logs_repo — the lines workers log while they run a task
 * ("TaskLogs", migration 0009): append, and read back in order.
 *
 * A task's lines are numbered 1, 2, 3... ("seq"); an append takes a
 * per-task advisory lock for its transaction, so concurrent appends to one
 * task serialise, numbers have no gaps and the per-task cap holds exactly.
 * Reads and appends bound "createdAt" below by the task's "scheduledAt",
 * so only the partitions from the task's month on are read.
 *
 * Threads: the caller's connection, which must not be inside a
 * transaction for an append (it runs its own).  Ownership: returned JSON
 * text is the caller's (free).  Failure: false with e set: ERR_NOT_FOUND
 * when the task does not exist, ERR_CONFLICT when an append would take the
 * task past max_lines (nothing of it is kept).
 */
#ifndef NF_STORE_TASK_LOGS_REPO_H
#define NF_STORE_TASK_LOGS_REPO_H

#include "util/err.h"

#include <stdbool.h>

struct db;

/* Appends logs_json, a JSON array of {"log": text, "createdTime": epoch
 * ms} (text through util/json.h's funnel), to task task_id of workflow
 * wf_id.  *count_out (may be NULL) gets the task's line count after it. */
bool task_logs_append(struct db *db, const char *ns_id, const char *wf_id,
		      const char *task_id, const char *logs_json, int max_lines,
		      int *count_out, struct err *e);

/* The task's lines with "seq" > after, oldest first, at most limit, as a
 * JSON array: [{"seq","log","createdTime","createdAt","taskId"}…], or, when
 * conductor, Conductor's TaskExecLog list [{"log","taskId","createdTime"}…].
 * An unknown task reads as []. */
bool task_logs_list(struct db *db, const char *ns_id, const char *wf_id,
		    const char *task_id, long after, int limit, bool conductor,
		    char **json_out, struct err *e);

#endif
