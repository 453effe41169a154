#include "http/task_logs.h"

#include "http/api.h"
#include "http/app.h"
#include "store/conductor_repo.h"
#include "store/task_logs_repo.h"
#include "util/json.h"
#include "util/timeutil.h"
#include "util/uuid.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_PAGE = 1000 };

bool
task_logs_parse(const json_t *logs, const char *path, const struct config *cfg,
		json_t **out, struct err *e)
{
	*out = NULL;
	if (!json_is_array(logs)) {
		err_set(e, ERR_INVALID,
			"%s must be an array of log lines (strings or "
			"{\"log\", \"createdTime\"} objects)",
			path);
		return false;
	}
	if ((long)json_array_size(logs) > cfg->task_logs_max_per_task) {
		err_set(e, ERR_TOO_LARGE,
			"%s holds %zu log lines; a task keeps at most %ld",
			path, json_array_size(logs),
			cfg->task_logs_max_per_task);
		return false;
	}
	json_int_t now = (json_int_t)(wall_us() / 1000);
	json_t *lines = json_array();
	size_t i;
	const json_t *l;
	json_array_foreach (logs, i, l) {
		const json_t *text =
			json_is_object(l) ? json_object_get(l, "log") : l;
		const json_t *at = json_is_object(l)
					   ? json_object_get(l, "createdTime")
					   : NULL;
		if (!json_is_string(text)) {
			err_set(e, ERR_INVALID,
				"%s[%zu] must be a string or an object with a "
				"string \"log\"",
				path, i);
			goto fail;
		}
		if ((long)json_string_length(text) > cfg->task_log_max_bytes) {
			err_set(e, ERR_TOO_LARGE,
				"%s[%zu] is %zu bytes; a log line is at most "
				"%ld bytes",
				path, i, json_string_length(text),
				cfg->task_log_max_bytes);
			goto fail;
		}
		if (at && !json_is_null(at) &&
		    (!json_is_integer(at) || json_integer_value(at) < 0)) {
			err_set(e, ERR_INVALID,
				"%s[%zu].createdTime must be epoch "
				"milliseconds (a whole number >= 0)",
				path, i);
			goto fail;
		}
		json_array_append_new(
			lines,
			json_pack("{s:O,s:I}", "log", text, "createdTime",
				  json_is_integer(at) ? json_integer_value(at)
						      : now));
	}
	*out = lines;
	return true;
fail:
	json_decref(lines);
	return false;
}

/* Resolves the task's workflow (404 when the task is not there). */
static bool
locate(struct db *db, const char *ns_id, const char *id, char wf_out[37],
       struct err *e)
{
	struct cond_task_loc loc = {0};
	if (!cond_task_locate(db, ns_id, NULL, id, &loc, e))
		return false;
	memcpy(wf_out, loc.workflow_id, 37);
	cond_task_loc_free(&loc);
	return true;
}

bool
task_logs_store(struct db *db, const struct config *cfg, const char *ns_id,
		const char *wf_id, const char *task_id, const json_t *lines,
		struct err *e)
{
	if (!json_is_array(lines) || json_array_size(lines) == 0)
		return true;
	char found[37];
	if (!wf_id) {
		if (!locate(db, ns_id, task_id, found, e))
			return false;
		wf_id = found;
	}
	char *text = json_db_text(lines);
	bool ok = task_logs_append(db, ns_id, wf_id, task_id, text,
				   (int)cfg->task_logs_max_per_task, NULL, e);
	free(text);
	return ok;
}

/* The {taskId} parameter; 404 when it is no UUID. */
static const char *
task_param(struct http_request *req, struct http_response *res)
{
	const char *id = http_param(req, "taskId");
	if (!uuid_valid(id)) {
		http_fail(res, ERR_NOT_FOUND, "task %.80s not found", id);
		return NULL;
	}
	return id;
}

void
task_logs_post(struct http_request *req, struct http_response *res)
{
	const struct app *app = req->app;
	const char *id = task_param(req, res);
	if (!id)
		return;
	json_t *body = api_body_object(req, res, false);
	if (!body)
		return;
	const json_t *one = json_object_get(body, "log");
	const json_t *many = json_object_get(body, "logs");
	struct err e = ERR_INIT;
	json_t *lines = NULL;
	bool ok;
	if (one && many) {
		err_set(&e, ERR_INVALID,
			"give either $.log or $.logs, not both");
		ok = false;
	} else if (one) {
		/* One line: the same rules, the field named as sent. */
		if (!json_is_string(one)) {
			err_set(&e, ERR_INVALID, "$.log must be a string");
			ok = false;
		} else if ((long)json_string_length(one) >
			   app->cfg->task_log_max_bytes) {
			err_set(&e, ERR_TOO_LARGE,
				"$.log is %zu bytes; a log line is at most "
				"%ld bytes",
				json_string_length(one),
				app->cfg->task_log_max_bytes);
			ok = false;
		} else {
			json_t *wrap = json_pack("[O]", one);
			ok = task_logs_parse(wrap, "$.log", app->cfg, &lines,
					     &e);
			json_decref(wrap);
		}
	} else if (many) {
		ok = task_logs_parse(many, "$.logs", app->cfg, &lines, &e);
		if (ok && json_array_size(lines) == 0) {
			err_set(&e, ERR_INVALID, "$.logs is empty");
			ok = false;
		}
	} else {
		err_set(&e, ERR_INVALID,
			"the body must have $.log (one line) or $.logs (an "
			"array of lines)");
		ok = false;
	}
	json_decref(body);
	if (!ok) {
		http_error(res, &e);
		json_decref(lines);
		return;
	}
	struct db *db = api_db(req, res);
	if (!db) {
		json_decref(lines);
		return;
	}
	char ns_id[37], wf_id[37];
	if (api_namespace(req, res, db, ns_id)) {
		int count = 0;
		char *text = json_db_text(lines);
		if (locate(db, ns_id, id, wf_id, &e) &&
		    task_logs_append(db, ns_id, wf_id, id, text,
				     (int)app->cfg->task_logs_max_per_task,
				     &count, &e)) {
			json_t *out = json_pack(
				"{s:s,s:I,s:i}", "taskId", id, "appended",
				(json_int_t)json_array_size(lines), "count",
				count);
			http_json(res, 201, out);
			json_decref(out);
		} else {
			http_error(res, &e);
		}
		free(text);
	}
	api_db_release(req, db);
	json_decref(lines);
}

void
task_logs_get(struct http_request *req, struct http_response *res)
{
	const char *id = task_param(req, res);
	if (!id)
		return;
	long after, limit;
	if (!api_query_int(req, res, "after", 0, 0, 2147483647L, &after) ||
	    !api_query_int(req, res, "limit", MAX_PAGE, 1, MAX_PAGE, &limit))
		return;
	struct db *db = api_db(req, res);
	if (!db)
		return;
	char ns_id[37], wf_id[37];
	if (api_namespace(req, res, db, ns_id)) {
		struct err e = ERR_INIT;
		char *items;
		if (locate(db, ns_id, id, wf_id, &e) &&
		    task_logs_list(db, ns_id, wf_id, id, after, (int)limit,
				   false, &items, &e)) {
			json_t *a = json_loads(items, 0, NULL);
			free(items);
			size_t n = json_array_size(a);
			json_t *last = json_array_get(a, n ? n - 1 : 0);
			json_t *out =
				json_pack("{s:s,s:o,s:o}", "taskId", id,
					  "items", a, "nextAfter",
					  n == (size_t)limit && last
						  ? json_incref(json_object_get(
							    last, "seq"))
						  : json_null());
			http_json(res, 200, out);
			json_decref(out);
		} else {
			http_error(res, &e);
		}
	}
	api_db_release(req, db);
}
