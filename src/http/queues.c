#include "http/queues.h"

#include "engine/workers.h"
#include "http/api.h"
#include "http/app.h"
#include "http/fields.h"
#include "http/task_logs.h"
#include "platform/namespaces.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/uuid.h"

#include <stdlib.h>
#include <string.h>

enum {
	MAX_WORKER_ID = 255,
	MAX_REASON = 8192,
	MAX_POLL_COUNT = 1000,
	MAX_RESULTS = 1000,
	MAX_WAIT_MS = 60000,
};

/* What every queue handler needs before doing its work. */
struct queue_call {
	struct db *db;
	char ns_id[37];
	struct queue_ref q;
	json_t *body;
};

static bool
begin(struct http_request *req, struct http_response *res, struct queue_call *c)
{
	memset(c, 0, sizeof(*c));
	c->body = api_body_object(req, res, false);
	if (!c->body)
		return false;
	c->db = api_db(req, res);
	if (!c->db || !api_namespace(req, res, c->db, c->ns_id))
		return false;
	c->q.ns_id = c->ns_id;
	c->q.ns_name = http_param(req, "ns");
	c->q.task = http_param(req, "queue");
	return true;
}

static void
end(struct http_request *req, struct queue_call *c)
{
	if (c->db)
		api_db_release(req, c->db);
	json_decref(c->body);
}

static bool
invalid(struct http_response *res, struct dsl_errors *errs)
{
	if (!errs->n)
		return false;
	api_fail_validation(res, "invalid request", errs);
	dsl_errors_free(errs);
	return true;
}

bool
queues_look(struct http_request *req, struct db *db, const struct queue_ref *q,
	    const char *key, uint64_t seq, bool waits, const char *worker,
	    int count, char **json_out, size_t *n, int64_t *retry_at,
	    struct err *e)
{
	*json_out = NULL;
	*n = 0;
	*retry_at = 0;
	/* A look since the queue's last wake left it empty: this one would
	 * find nothing.  So would the last look of a poll whose wait ran out
	 * with no wake. */
	if ((waits || req->wait_over) && http_known_empty(req, key, seq)) {
		workers_poll_skipped(q, worker);
		*json_out = xstrdup("[]");
		return true;
	}
	bool drained = false;
	if (!workers_poll(db, q, worker, count, json_out, n, &drained, e))
		return false;
	if (drained)
		http_mark_empty(req, key, seq);
	if (*n == 0 && waits) {
		long retry = workers_retry_ms(db, q);
		*retry_at = retry ? mono_ms() + retry : 0;
	}
	return true;
}

void
queues_poll(struct http_request *req, struct http_response *res)
{
	struct queue_call c;
	if (begin(req, res, &c)) {
		struct dsl_errors errs = {0};
		const char *worker = field_str(c.body, "workerId", true,
					       MAX_WORKER_ID, &errs);
		long count =
			field_int(c.body, "count", 1, 1, MAX_POLL_COUNT, &errs);
		long wait =
			field_int(c.body, "waitMs", 0, 0, MAX_WAIT_MS, &errs);
		if (!invalid(res, &errs)) {
			struct err e = ERR_INIT;
			char *tasks;
			size_t n;
			char key[512];
			workers_queue_name(&c.q, key, sizeof(key));
			/* Read before looking, so a wake in between is not
			 * lost. */
			uint64_t seq = http_wake_seq(req, key);
			int64_t deadline = req->wait_deadline_ms
						   ? req->wait_deadline_ms
						   : mono_ms() + wait;
			bool waits = wait > 0 && !req->wait_over &&
				     mono_ms() < deadline;
			int64_t retry_at = 0;
			bool ok = queues_look(req, c.db, &c.q, key, seq, waits,
					      worker, (int)count, &tasks, &n,
					      &retry_at, &e);
			if (ok && n == 0 && waits) {
				/* Nothing yet: wait without holding a thread
				 * or a connection (looking again when a full
				 * rate-limit window ends). */
				free(tasks);
				end(req, &c);
				if (http_park_retry(req, res, key, deadline,
						    retry_at, seq,
						    (unsigned long)count))
					return;
				http_text(res, 200, "application/json",
					  "{\"tasks\":[]}");
				return;
			}
			if (ok) {
				struct strbuf sb = STRBUF_INIT;
				sb_printf(&sb, "{\"tasks\":%s}", tasks);
				free(tasks);
				http_text(res, 200, "application/json",
					  sb_str(&sb));
				sb_free(&sb);
			} else {
				/* The tasks a wake meant for this poll are
				 * still there: another waiting poll looks. */
				http_server_wake_n(req->server, key,
						   (unsigned long)count);
				http_error(res, &e);
			}
		}
	}
	end(req, &c);
}

/* The {taskId} parameter; 404 when it is no UUID. */
static const char *
task_id(struct http_request *req, struct http_response *res)
{
	const char *id = http_param(req, "taskId");
	if (!uuid_valid(id)) {
		http_fail(res, ERR_NOT_FOUND, "task %.80s not found", id);
		return NULL;
	}
	return id;
}

/* A result's optional `logs` (http/task_logs.h); *lines NULL when none. */
static bool
result_logs(struct http_request *req, const json_t *body, const char *path,
	    json_t **lines, struct err *e)
{
	const json_t *logs = json_object_get(body, "logs");
	*lines = NULL;
	if (!logs || json_is_null(logs))
		return true;
	return task_logs_parse(logs, path, ((struct app *)req->app)->cfg, lines,
			       e);
}

static void
result(struct http_request *req, struct http_response *res,
       enum task_result_status fixed, bool is_fail)
{
	const char *id = task_id(req, res);
	if (!id)
		return;
	struct queue_call c;
	if (begin(req, res, &c)) {
		struct dsl_errors errs = {0};
		const char *worker = field_str(c.body, "workerId", true,
					       MAX_WORKER_ID, &errs);
		const json_t *output = field_obj(c.body, "output", &errs);
		const char *reason =
			field_str(c.body, "reason", false, MAX_REASON, &errs);
		bool terminal = field_bool(c.body, "terminal", false, &errs);
		enum task_result_status st = fixed;
		if (is_fail && terminal)
			st = RESULT_FAILED_WITH_TERMINAL_ERROR;
		json_t *lines = NULL;
		struct err e = ERR_INIT;
		if (invalid(res, &errs)) {
			/* answered */
		} else if (!result_logs(req, c.body, "$.logs", &lines, &e) ||
			   !task_logs_store(c.db, ((struct app *)req->app)->cfg,
					    c.ns_id, NULL, id, lines, &e)) {
			http_error(res, &e);
		} else {
			json_t *empty = json_object();
			if (workers_result(c.db, &c.q, id, worker, st,
					   output ? output : empty, reason,
					   &e)) {
				json_t *out = json_pack(
					"{s:s,s:s}", "id", id, "status",
					is_fail ? (terminal
							   ? "FAILED_WITH_TERMINAL_ERROR"
							   : "FAILED")
						: "COMPLETED");
				http_json(res, 200, out);
				json_decref(out);
			} else {
				http_error(res, &e);
			}
			json_decref(empty);
		}
		json_decref(lines);
	}
	end(req, &c);
}

void
queues_complete(struct http_request *req, struct http_response *res)
{
	result(req, res, RESULT_COMPLETED, false);
}

void
queues_fail(struct http_request *req, struct http_response *res)
{
	result(req, res, RESULT_FAILED, true);
}

void
queues_heartbeat(struct http_request *req, struct http_response *res)
{
	const char *id = task_id(req, res);
	if (!id)
		return;
	struct queue_call c;
	if (begin(req, res, &c)) {
		struct dsl_errors errs = {0};
		const char *worker = field_str(c.body, "workerId", true,
					       MAX_WORKER_ID, &errs);
		if (!invalid(res, &errs)) {
			struct err e = ERR_INIT;
			char *expires;
			if (workers_heartbeat(c.db, &c.q, id, worker, &expires,
					      &e)) {
				json_t *out =
					json_pack("{s:s,s:s}", "id", id,
						  "leaseExpiresAt", expires);
				http_json(res, 200, out);
				json_decref(out);
				free(expires);
			} else {
				http_error(res, &e);
			}
		}
	}
	end(req, &c);
}

static void
give_back(struct http_request *req, struct http_response *res, bool defer)
{
	const char *id = task_id(req, res);
	if (!id)
		return;
	struct queue_call c;
	if (begin(req, res, &c)) {
		struct dsl_errors errs = {0};
		const char *worker = field_str(c.body, "workerId", true,
					       MAX_WORKER_ID, &errs);
		double delay = 0;
		if (defer) {
			if (!json_object_get(c.body, "delaySeconds"))
				dsl_errors_add(&errs, "$.delaySeconds",
					       "is required");
			delay = field_num(c.body, "delaySeconds", 0, 0,
					  31536000, &errs);
		}
		if (!invalid(res, &errs)) {
			struct err e = ERR_INIT;
			if (workers_release(c.db, &c.q, id, worker, delay,
					    &e)) {
				json_t *out = json_pack("{s:s,s:f}", "id", id,
							"delaySeconds", delay);
				http_json(res, 200, out);
				json_decref(out);
			} else {
				http_error(res, &e);
			}
		}
	}
	end(req, &c);
}

void
queues_release(struct http_request *req, struct http_response *res)
{
	give_back(req, res, false);
}

void
queues_defer(struct http_request *req, struct http_response *res)
{
	give_back(req, res, true);
}

/*
 * Many results in one request, committed together (workers_results): one
 * that fails (a lost lease) does not undo the others; the answer lists
 * each result's fate in order.
 */
void
queues_results(struct http_request *req, struct http_response *res)
{
	struct queue_call c;
	if (!begin(req, res, &c)) {
		end(req, &c);
		return;
	}
	json_t *list = json_object_get(c.body, "results");
	struct dsl_errors errs = {0};
	if (!json_is_array(list) || json_array_size(list) == 0 ||
	    json_array_size(list) > MAX_RESULTS)
		dsl_errors_add(&errs, "$.results",
			       "must be an array of 1 to %d results",
			       MAX_RESULTS);
	size_t i;
	json_t *r;
	json_array_foreach (list, i, r) {
		struct dsl_errors one = {0};
		char base[64];
		snprintf(base, sizeof(base), "$.results[%zu]", i);
		if (!json_is_object(r)) {
			dsl_errors_add(&errs, base, "must be an object");
			continue;
		}
		const char *tid = field_str(r, "taskId", true, 36, &one);
		if (tid && !uuid_valid(tid))
			dsl_errors_add(&one, "$.taskId", "must be a UUID");
		field_str(r, "workerId", true, MAX_WORKER_ID, &one);
		const char *st = field_str(r, "status", true, 32, &one);
		if (st && strcmp(st, "COMPLETED") && strcmp(st, "FAILED") &&
		    strcmp(st, "FAILED_WITH_TERMINAL_ERROR"))
			dsl_errors_add(&one, "$.status",
				       "must be COMPLETED, FAILED or "
				       "FAILED_WITH_TERMINAL_ERROR");
		field_obj(r, "output", &one);
		field_str(r, "reason", false, MAX_REASON, &one);
		for (size_t k = 0; k < one.n; k++)
			dsl_errors_add(&errs, base, "%s %s",
				       one.items[k].path + 2,
				       one.items[k].message);
		dsl_errors_free(&one);
	}
	/* Every result's logs are read before any result applies, so a
	 * refused line refuses the request and changes nothing. */
	json_t *batch_logs = json_array();
	struct err le = ERR_INIT;
	if (!errs.n) {
		json_array_foreach (list, i, r) {
			char path[64];
			json_t *lines = NULL;
			snprintf(path, sizeof(path), "$.results[%zu].logs", i);
			if (!result_logs(req, r, path, &lines, &le))
				break;
			json_array_append_new(batch_logs,
					      lines ? lines : json_null());
		}
	}
	if (le.code != ERR_OK) {
		dsl_errors_free(&errs);
		http_error(res, &le);
	} else if (!invalid(res, &errs)) {
		json_t *out = json_array();
		json_t *empty = json_object();
		size_t n = json_array_size(list);
		struct worker_result *items = xcalloc(n, sizeof(*items));
		json_array_foreach (list, i, r) {
			const char *st =
				json_string_value(json_object_get(r, "status"));
			const json_t *output = json_object_get(r, "output");
			items[i] = (struct worker_result){
				.task_id = json_string_value(
					json_object_get(r, "taskId")),
				.worker = json_string_value(
					json_object_get(r, "workerId")),
				.status =
					strcmp(st, "COMPLETED") == 0
						? RESULT_COMPLETED
					: strcmp(st, "FAILED") == 0
						? RESULT_FAILED
						: RESULT_FAILED_WITH_TERMINAL_ERROR,
				.output = output ? output : empty,
				.reason = json_string_value(
					json_object_get(r, "reason")),
			};
		}
		/* Each result's logs first (kept even when its result is then
		 * refused); the results whose logs were taken go together. */
		struct worker_result *go = xcalloc(n, sizeof(*go));
		size_t *at = xcalloc(n, sizeof(*at));
		size_t m = 0;
		for (i = 0; i < n; i++) {
			items[i].e = (struct err)ERR_INIT;
			if (!task_logs_store(
				    c.db, ((struct app *)req->app)->cfg,
				    c.ns_id, NULL, items[i].task_id,
				    json_array_get(batch_logs, i), &items[i].e))
				continue;
			at[m] = i;
			go[m++] = items[i];
		}
		workers_results(c.db, &c.q, go, m);
		for (size_t k = 0; k < m; k++)
			items[at[k]] = go[k];
		free(go);
		free(at);
		for (i = 0; i < n; i++) {
			json_t *item =
				json_pack("{s:s,s:b}", "taskId",
					  items[i].task_id, "ok", items[i].ok);
			if (!items[i].ok)
				json_object_set_new(
					item, "error",
					json_pack(
						"{s:s,s:s}", "code",
						err_code_name(items[i].e.code),
						"message", items[i].e.msg));
			json_array_append_new(out, item);
		}
		free(items);
		json_t *body = json_pack("{s:o}", "results", out);
		http_json(res, 200, body);
		json_decref(body);
		json_decref(empty);
	}
	json_decref(batch_logs);
	end(req, &c);
}
