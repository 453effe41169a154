#include "http/conductor_tasks.h"

#include "engine/decide_loop.h"
#include "engine/dsl.h"
#include "engine/workers.h"
#include "http/app.h"
#include "http/conductor.h"
#include "http/fields.h"
#include "http/queues.h"
#include "http/task_logs.h"
#include "store/conductor_repo.h"
#include "store/subflows_repo.h"
#include "store/task_logs_repo.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/uuid.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	MAX_WORKER_ID = 255,
	MAX_REASON = 8192,
	MAX_POLL_COUNT = 1000,
	MAX_WAIT_MS = 60000,
};

/* Without a workerid the poll is still served, under this name. */
static const char anonymous[] = "conductor-worker";

/* ---------------------------------------------------------------- polls */

/* Leases up to count tasks of the {taskType} queue, waiting up to wait_ms
 * (parked, as the native poll) when there is none.  Answers the batch as a
 * JSON array, or with single as one Task or a bare 204. */
static void
poll(struct http_request *req, struct http_response *res, long count,
     long wait_ms, bool single)
{
	struct cond_call c = {0};
	const char *worker = http_query(req, "workerid");
	if (!worker || !*worker)
		worker = anonymous;
	if (strlen(worker) > MAX_WORKER_ID) {
		cond_fail(res, ERR_INVALID,
			  "query argument workerid is longer than %d bytes",
			  MAX_WORKER_ID);
		return;
	}
	if (!cond_begin(req, res, &c)) {
		cond_end(req, &c);
		return;
	}
	struct queue_ref q = {c.ns_id, c.ns_name, http_param(req, "taskType")};
	char key[512];
	workers_queue_name(&q, key, sizeof(key));
	uint64_t seq = http_wake_seq(req, key);
	int64_t deadline = req->wait_deadline_ms ? req->wait_deadline_ms
						 : mono_ms() + wait_ms;
	struct err e = ERR_INIT;
	char *leased = NULL, *tasks = NULL;
	size_t n = 0;
	bool waits = wait_ms > 0 && !req->wait_over && mono_ms() < deadline;
	int64_t retry_at = 0;
	if (!queues_look(req, c.db, &q, key, seq, waits, worker, (int)count,
			 &leased, &n, &retry_at, &e)) {
		/* What a wake meant for this poll is still there: another
		 * waiting poll looks. */
		http_server_wake_n(req->server, key, (unsigned long)count);
		cond_error(res, &e);
		cond_end(req, &c);
		return;
	}
	if (n == 0) {
		free(leased);
		cond_end(req, &c);
		if (waits && http_park_retry(req, res, key, deadline, retry_at,
					     seq, (unsigned long)count))
			return;
		if (single)
			cond_no_content(res);
		else
			http_text(res, 200, "application/json", "[]");
		return;
	}
	bool ok = cond_tasks_json(c.db, c.ns_id, leased, &tasks, &e);
	free(leased);
	cond_end(req, &c);
	if (!ok) {
		cond_error(res, &e);
		return;
	}
	if (!single) {
		cond_json_text(res, tasks);
		return;
	}
	json_t *a = json_loads(tasks, 0, NULL);
	free(tasks);
	json_t *first = json_array_get(a, 0);
	if (first)
		http_json(res, 200, first);
	else
		cond_no_content(res);
	json_decref(a);
}

void
cond_tasks_poll(struct http_request *req, struct http_response *res)
{
	poll(req, res, 1, 0, true);
}

void
cond_tasks_poll_batch(struct http_request *req, struct http_response *res)
{
	long count, timeout;
	if (!cond_query_long(req, res, "count", 1, 1, MAX_POLL_COUNT, &count) ||
	    !cond_query_long(req, res, "timeout", 100, 0, MAX_WAIT_MS,
			     &timeout))
		return;
	poll(req, res, count, timeout, false);
}

/* -------------------------------------------------------------- results */

enum cond_status { ST_IN_PROGRESS, ST_COMPLETED, ST_FAILED, ST_TERMINAL };

static bool
parse_status(const char *s, enum cond_status *out)
{
	static const struct {
		const char *name;
		enum cond_status st;
	} names[] = {
		{"IN_PROGRESS", ST_IN_PROGRESS},
		{"COMPLETED", ST_COMPLETED},
		{"FAILED", ST_FAILED},
		{"FAILED_WITH_TERMINAL_ERROR", ST_TERMINAL},
	};
	for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].st;
			return true;
		}
	}
	return false;
}

static bool
task_finished(const char *status)
{
	return strcmp(status, "SCHEDULED") != 0 &&
	       strcmp(status, "IN_PROGRESS") != 0;
}

/* Conductor's TaskResult, read. */
struct task_result {
	const char *task_id;
	const char *workflow_id; /* may be NULL */
	const char *worker;      /* may be NULL */
	enum cond_status status;
	const json_t *output;
	const char *reason;
	double callback_after;
	bool extend_lease;
	json_t *logs; /* [{log, createdTime}] or NULL; owned */
	const struct config *cfg;
};

/* The result's logs, read by the rules of every task log route
 * (http/task_logs.h); false with e set when they break one. */
static bool
read_logs(const json_t *body, const struct config *cfg, struct task_result *r,
	  struct err *e)
{
	const json_t *logs = json_object_get(body, "logs");
	if (!logs || json_is_null(logs))
		return true;
	return task_logs_parse(logs, "$.logs", cfg, &r->logs, e);
}

/* Reads a TaskResult; answers 400 and returns false when it is not one. */
static bool
read_result(const json_t *body, const struct config *cfg,
	    struct http_response *res, struct task_result *r)
{
	struct dsl_errors errs = {0};
	memset(r, 0, sizeof(*r));
	r->task_id = field_str(body, "taskId", true, 36, &errs);
	if (r->task_id && !uuid_valid(r->task_id))
		dsl_errors_add(&errs, "$.taskId", "must be a task id (a UUID)");
	r->workflow_id =
		field_str(body, "workflowInstanceId", false, 36, &errs);
	if (r->workflow_id && !uuid_valid(r->workflow_id))
		dsl_errors_add(&errs, "$.workflowInstanceId",
			       "must be a workflow id (a UUID)");
	r->worker = field_str(body, "workerId", false, MAX_WORKER_ID, &errs);
	const char *st = field_str(body, "status", true, 40, &errs);
	if (st && !parse_status(st, &r->status))
		dsl_errors_add(&errs, "$.status",
			       "must be IN_PROGRESS, COMPLETED, FAILED or "
			       "FAILED_WITH_TERMINAL_ERROR");
	if (json_is_null(json_object_get(body, "outputData")))
		r->output = NULL;
	else
		r->output = field_obj(body, "outputData", &errs);
	if (!json_is_null(json_object_get(body, "reasonForIncompletion")))
		r->reason = field_str(body, "reasonForIncompletion", false,
				      MAX_REASON, &errs);
	if (!json_is_null(json_object_get(body, "callbackAfterSeconds")))
		r->callback_after = field_num(body, "callbackAfterSeconds", 0,
					      0, 31536000, &errs);
	if (!json_is_null(json_object_get(body, "extendLease")))
		r->extend_lease = field_bool(body, "extendLease", false, &errs);
	r->cfg = cfg;
	struct err le = ERR_INIT;
	if (!errs.n && !read_logs(body, cfg, r, &le)) {
		cond_error(res, &le);
		return false;
	}
	if (errs.n) {
		cond_fail_validation(res, "invalid TaskResult", &errs);
		dsl_errors_free(&errs);
		json_decref(r->logs);
		r->logs = NULL;
		return false;
	}
	return true;
}

/*
 * Applies a result to the task at loc.  *terminal says whether it finished
 * the task (so update-v2 may hand out the next one).  Answers the error
 * itself and returns false on failure.
 */
static bool
apply_result(struct cond_call *c, struct http_response *res,
	     const struct cond_task_loc *loc, const struct task_result *r,
	     bool *terminal)
{
	struct err e = ERR_INIT;
	struct queue_ref q = {c->ns_id, c->ns_name, loc->def_name};
	*terminal = false;
	if (!task_logs_store(c->db, r->cfg, c->ns_id, loc->workflow_id,
			     loc->task_id, r->logs, &e)) {
		cond_error(res, &e);
		return false;
	}
	/* Conductor ignores an update of a finished task. */
	if (task_finished(loc->status))
		return true;
	if (!loc->queued && r->status != ST_IN_PROGRESS) {
		/* A gate: a task declared asyncComplete (or a WAIT or HUMAN)
		 * whose work is done, open until completed here. */
		const char *st = r->status == ST_COMPLETED ? "COMPLETED"
				 : r->status == ST_FAILED
					 ? "FAILED"
					 : "FAILED_WITH_TERMINAL_ERROR";
		char *out = r->output ? json_db_text(r->output) : NULL;
		const char *reason = r->status == ST_COMPLETED ? NULL
				     : r->reason               ? r->reason
						 : "failed through the API";
		bool ok = subflows_complete_gate(
			c->db, c->ns_id, loc->workflow_id, loc->ref_name, st,
			out, reason, &e);
		free(out);
		if (ok) {
			decide_loop_wake();
			/* not a worker's: update-v2 hands out nothing */
			return true;
		}
		if (e.code != ERR_CONFLICT) {
			cond_error(res, &e);
			return false;
		}
		err_clear(&e);
	}
	if (!loc->queued) {
		cond_fail(res, ERR_CONFLICT,
			  "task %s (%.120s) is not waiting for a worker's "
			  "result (status %s)",
			  loc->task_id, loc->ref_name, loc->status);
		return false;
	}
	const char *worker = r->worker        ? r->worker
			     : loc->leased_by ? loc->leased_by
					      : anonymous;
	bool ok = true;
	if (r->status == ST_IN_PROGRESS) {
		/* Its progress is kept (a terminal result replaces it). */
		if (r->output) {
			char *text = json_db_text(r->output);
			ok = cond_task_progress(c->db, c->ns_id,
						loc->workflow_id, loc->task_id,
						text, &e);
			free(text);
			if (!ok) {
				cond_error(res, &e);
				return false;
			}
		}
		/* Not leased: it waits in its queue; nothing to extend. */
		if (!loc->leased_by)
			return true;
		if (r->extend_lease)
			ok = workers_heartbeat(c->db, &q, loc->task_id,
					       loc->leased_by, NULL, &e);
		else
			ok = workers_release(c->db, &q, loc->task_id,
					     loc->leased_by, r->callback_after,
					     &e);
	} else {
		enum task_result_status st =
			r->status == ST_COMPLETED ? RESULT_COMPLETED
			: r->status == ST_FAILED
				? RESULT_FAILED
				: RESULT_FAILED_WITH_TERMINAL_ERROR;
		json_t *empty = json_object();
		ok = workers_result_any(c->db, &q, loc->task_id, worker, st,
					r->output ? r->output : empty,
					r->reason, &e);
		json_decref(empty);
		*terminal = ok;
	}
	if (!ok)
		cond_error(res, &e);
	return ok;
}

/* POST /api/tasks and /api/tasks/update-v2. */
static void
update(struct http_request *req, struct http_response *res, bool v2)
{
	bool empty;
	json_t *body = cond_body(req, res, &empty);
	if (!body) {
		if (empty)
			cond_fail(res, ERR_INVALID,
				  "a TaskResult JSON object body is required");
		return;
	}
	if (!json_is_object(body)) {
		json_decref(body);
		cond_fail(res, ERR_INVALID,
			  "the body must be a TaskResult JSON object");
		return;
	}
	struct task_result r;
	struct cond_call c = {0};
	struct cond_task_loc loc = {0};
	cond_drop_nulls(body);
	if (!read_result(body, ((struct app *)req->app)->cfg, res, &r)) {
		json_decref(body);
		return;
	}
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		bool terminal;
		if (!cond_task_locate(c.db, c.ns_id, r.workflow_id, r.task_id,
				      &loc, &e)) {
			cond_error(res, &e);
		} else if (apply_result(&c, res, &loc, &r, &terminal)) {
			if (!v2) {
				cond_text(res, loc.task_id);
			} else if (!terminal) {
				cond_no_content(res);
			} else {
				/* The next task of the same type, handed out
				 * at once, or a bare 204. */
				struct queue_ref q = {c.ns_id, c.ns_name,
						      loc.def_name};
				char *leased, *tasks;
				size_t n;
				const char *worker =
					r.worker ? r.worker : anonymous;
				if (!workers_poll(c.db, &q, worker, 1, &leased,
						  &n, NULL, &e)) {
					cond_error(res, &e);
				} else if (n == 0) {
					free(leased);
					cond_no_content(res);
				} else {
					bool ok = cond_tasks_json(c.db, c.ns_id,
								  leased,
								  &tasks, &e);
					free(leased);
					json_t *a =
						ok ? json_loads(tasks, 0, NULL)
						   : NULL;
					if (ok)
						free(tasks);
					if (!ok)
						cond_error(res, &e);
					else if (json_array_get(a, 0))
						http_json(res, 200,
							  json_array_get(a, 0));
					else
						cond_no_content(res);
					json_decref(a);
				}
			}
		}
	}
	cond_end(req, &c);
	cond_task_loc_free(&loc);
	json_decref(r.logs);
	json_decref(body);
}

void
cond_tasks_update(struct http_request *req, struct http_response *res)
{
	update(req, res, false);
}

void
cond_tasks_update_v2(struct http_request *req, struct http_response *res)
{
	update(req, res, true);
}

/* POST /api/tasks/{workflowId}/{taskRefName}/{status}?workerid, the body
 * the task's output. */
void
cond_tasks_update_by_ref(struct http_request *req, struct http_response *res)
{
	const char *wf = cond_path_uuid(req, res, "workflowId", "workflow");
	if (!wf)
		return;
	struct task_result r = {0};
	const char *st = http_param(req, "status");
	if (!parse_status(st, &r.status) || r.status == ST_IN_PROGRESS) {
		cond_fail(res, ERR_INVALID,
			  "status %.40s in the path must be COMPLETED, FAILED "
			  "or FAILED_WITH_TERMINAL_ERROR",
			  st);
		return;
	}
	bool empty;
	json_t *body = cond_body(req, res, &empty);
	if (!body && !empty)
		return;
	if (body && !json_is_object(body)) {
		json_decref(body);
		cond_fail(res, ERR_INVALID,
			  "the body must be the task's output, a JSON object");
		return;
	}
	r.output = body;
	r.worker = http_query(req, "workerid");
	struct cond_call c = {0};
	struct cond_task_loc loc = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		bool terminal;
		if (!cond_task_by_ref(c.db, c.ns_id, wf,
				      http_param(req, "taskRefName"), &loc, &e))
			cond_error(res, &e);
		else if (apply_result(&c, res, &loc, &r, &terminal))
			cond_text(res, loc.task_id);
	}
	cond_end(req, &c);
	cond_task_loc_free(&loc);
	json_decref(body);
}

/* ------------------------------------------------------ tasks and logs */

void
cond_tasks_get(struct http_request *req, struct http_response *res)
{
	const char *id = cond_path_uuid(req, res, "taskId", "task");
	struct cond_call c = {0};
	if (!id)
		return;
	struct cond_task_loc loc = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char *tasks;
		if (!cond_task_locate(c.db, c.ns_id, NULL, id, &loc, &e)) {
			cond_error(res, &e);
		} else {
			json_t *one = json_pack("[{s:s,s:s}]", "id", id,
						"workflowId", loc.workflow_id);
			char *text = json_dumps(one, JSON_COMPACT);
			json_decref(one);
			if (!cond_tasks_json(c.db, c.ns_id, text, &tasks, &e)) {
				cond_error(res, &e);
			} else {
				json_t *a = json_loads(tasks, 0, NULL);
				free(tasks);
				if (json_array_get(a, 0))
					http_json(res, 200,
						  json_array_get(a, 0));
				else
					cond_fail(res, ERR_NOT_FOUND,
						  "task %s not found", id);
				json_decref(a);
			}
			free(text);
		}
	}
	cond_end(req, &c);
	cond_task_loc_free(&loc);
}

/* POST /api/tasks/{taskId}/log: the body is the log line (a JSON string,
 * or the raw text). */
void
cond_tasks_log_add(struct http_request *req, struct http_response *res)
{
	const struct app *app = req->app;
	const char *id = cond_path_uuid(req, res, "taskId", "task");
	if (!id)
		return;
	/* A cheap early refusal of what cannot fit even as a JSON string of
	 * escapes (six bytes a byte); the line itself is measured below. */
	if ((long)req->body_len > 6 * app->cfg->task_log_max_bytes + 2) {
		cond_fail(res, ERR_TOO_LARGE,
			  "the log is %zu bytes; a log line is at most %ld "
			  "bytes",
			  req->body_len, app->cfg->task_log_max_bytes);
		return;
	}
	json_t *parsed =
		json_loadb(req->body, req->body_len, JSON_DECODE_ANY, NULL);
	json_t *text = json_is_string(parsed)
			       ? json_incref(parsed)
			       : json_stringn(req->body, req->body_len);
	json_decref(parsed);
	if (!text) {
		cond_fail(res, ERR_INVALID, "the log is not valid UTF-8");
		return;
	}
	if ((long)json_string_length(text) > app->cfg->task_log_max_bytes) {
		cond_fail(res, ERR_TOO_LARGE,
			  "the log is %zu bytes; a log line is at most %ld "
			  "bytes",
			  json_string_length(text),
			  app->cfg->task_log_max_bytes);
		json_decref(text);
		return;
	}
	struct err e = ERR_INIT;
	json_t *one = json_pack("[o]", text), *lines = NULL;
	if (!task_logs_parse(one, "the log", app->cfg, &lines, &e)) {
		cond_error(res, &e);
		json_decref(one);
		return;
	}
	json_decref(one);
	struct cond_call c = {0};
	struct cond_task_loc loc = {0};
	if (cond_begin(req, res, &c)) {
		if (cond_task_locate(c.db, c.ns_id, NULL, id, &loc, &e) &&
		    task_logs_store(c.db, app->cfg, c.ns_id, loc.workflow_id,
				    id, lines, &e))
			cond_ok_empty(res);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
	cond_task_loc_free(&loc);
	json_decref(lines);
}

/* GET /api/tasks/{taskId}/log: [{log, taskId, createdTime}], oldest
 * first. */
void
cond_tasks_logs(struct http_request *req, struct http_response *res)
{
	const struct app *app = req->app;
	const char *id = cond_path_uuid(req, res, "taskId", "task");
	if (!id)
		return;
	struct cond_call c = {0};
	struct cond_task_loc loc = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char *logs;
		if (cond_task_locate(c.db, c.ns_id, NULL, id, &loc, &e) &&
		    task_logs_list(c.db, c.ns_id, loc.workflow_id, id, 0,
				   (int)app->cfg->task_logs_max_per_task, true,
				   &logs, &e))
			cond_json_text(res, logs);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
	cond_task_loc_free(&loc);
}

/* GET /api/tasks/queue/size?taskType=… → the number waiting. */
void
cond_tasks_queue_size(struct http_request *req, struct http_response *res)
{
	const char *type = http_query(req, "taskType");
	if (!type || !*type) {
		cond_fail(res, ERR_INVALID,
			  "query argument taskType is required");
		return;
	}
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		struct queue_ref q = {c.ns_id, c.ns_name, type};
		char queue[512];
		int64_t n;
		workers_queue_name(&q, queue, sizeof(queue));
		if (cond_queue_size(c.db, queue, &n, &e)) {
			char text[32];
			snprintf(text, sizeof(text), "%" PRId64, n);
			http_text(res, 200, "application/json", text);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

/* GET /api/tasks/queue/sizes?taskType=a&taskType=b (or "a,b") →
 * {"a": n, "b": m}. */
void
cond_tasks_queue_sizes(struct http_request *req, struct http_response *res)
{
	enum { MAX_TYPES = 100 };
	const char *given[MAX_TYPES];
	size_t n = http_query_all(req, "taskType", given, MAX_TYPES);
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		json_t *out = json_object();
		bool ok = true;
		for (size_t i = 0; ok && i < n; i++) {
			const char *p = given[i];
			while (ok && *p) {
				const char *comma = strchr(p, ',');
				size_t len =
					comma ? (size_t)(comma - p) : strlen(p);
				char *type = xstrndup(p, len);
				struct queue_ref q = {c.ns_id, c.ns_name, type};
				char queue[512];
				int64_t size;
				workers_queue_name(&q, queue, sizeof(queue));
				ok = !*type ||
				     cond_queue_size(c.db, queue, &size, &e);
				if (ok && *type)
					json_object_set_new(
						out, type,
						json_integer((json_int_t)size));
				free(type);
				p += len + (comma ? 1 : 0);
			}
		}
		if (ok)
			cond_json(res, 200, out);
		else {
			json_decref(out);
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}
