#include "engine/workers.h"

#include "engine/decide_loop.h"
#include "engine/defcache.h"
#include "engine/worker_polls.h"
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>

enum { DEFAULT_LEASE_SECONDS = 3600 };

void
workers_queue_name(const struct queue_ref *q, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", q->ns_name, q->task);
}

static double
lease_seconds(struct db *db, const struct queue_ref *q)
{
	struct def_ref d;
	struct err e = ERR_INIT;
	if (!defcache_task(db, q->ns_id, q->task, &d, &e))
		return DEFAULT_LEASE_SECONDS;
	double s = (double)d.task->response_timeout_seconds;
	defcache_release(&d);
	return s > 0 ? s : DEFAULT_LEASE_SECONDS;
}

bool
workers_poll(struct db *db, const struct queue_ref *q, const char *worker,
	     int count, char **json_out, size_t *n, struct err *e)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	worker_polls_note(q->ns_id, queue, worker);
	return queue_lease(db, queue, worker, count, lease_seconds(db, q),
			   json_out, n, e);
}

static bool
result(struct db *db, const struct queue_ref *q, const char *task_id,
       const char *worker, bool any_holder, enum task_result_status status,
       const json_t *output, const char *reason, struct err *e)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	char *text = json_db_text(output);
	bool ok = queue_result_as(db, queue, task_id, worker, any_holder,
				  status, text, reason, e);
	free(text);
	if (ok)
		decide_loop_wake_all();
	return ok;
}

bool
workers_result(struct db *db, const struct queue_ref *q, const char *task_id,
	       const char *worker, enum task_result_status status,
	       const json_t *output, const char *reason, struct err *e)
{
	return result(db, q, task_id, worker, false, status, output, reason, e);
}

bool
workers_result_any(struct db *db, const struct queue_ref *q,
		   const char *task_id, const char *worker,
		   enum task_result_status status, const json_t *output,
		   const char *reason, struct err *e)
{
	return result(db, q, task_id, worker, true, status, output, reason, e);
}

bool
workers_heartbeat(struct db *db, const struct queue_ref *q, const char *task_id,
		  const char *worker, char **expires_out, struct err *e)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	return queue_heartbeat(db, queue, task_id, worker, lease_seconds(db, q),
			       expires_out, e);
}

bool
workers_release(struct db *db, const struct queue_ref *q, const char *task_id,
		const char *worker, double delay_seconds, struct err *e)
{
	char queue[512];
	workers_queue_name(q, queue, sizeof(queue));
	return queue_release(db, queue, task_id, worker, delay_seconds, e);
}
