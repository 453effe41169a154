#include "http/workflows.h"

#include "engine/decide_loop.h"
#include "engine/queue_signal.h"
#include "engine/subflows.h"
#include "engine/workflows.h"
#include "http/api.h"
#include "http/app.h"
#include "http/fields.h"
#include "http/sse.h"
#include "store/actions_repo.h"
#include "store/executions_repo.h"
#include "store/subflows_repo.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_NAME = 255, MAX_KEY = 255, DEFAULT_LIMIT = 50, MAX_LIMIT = 500 };

void
workflows_read_start(const json_t *body, int min_version,
		     struct start_request *r, struct dsl_errors *errs)
{
	r->name = field_str(body, "name", true, MAX_NAME, errs);
	r->version =
		(int)field_int(body, "version", 0, min_version, 1000000, errs);
	r->input = field_obj(body, "input", errs);
	r->correlation_id =
		field_str(body, "correlationId", false, MAX_KEY, errs);
	r->idempotency_key =
		field_str(body, "idempotencyKey", false, MAX_KEY, errs);
	r->priority = (int)field_int(body, "priority", 0, 0, 99, errs);
	const char *strategy =
		field_str(body, "idempotencyStrategy", false, 32, errs);
	if (!strategy || strcmp(strategy, "FAIL") == 0)
		r->strategy = IDEMPOTENCY_FAIL;
	else if (strcmp(strategy, "RETURN_EXISTING") == 0)
		r->strategy = IDEMPOTENCY_RETURN_EXISTING;
	else
		dsl_errors_add(errs, "$.idempotencyStrategy",
			       "must be FAIL or RETURN_EXISTING "
			       "(FAIL_ON_RUNNING is not supported)");
}

void
workflows_start(struct http_request *req, struct http_response *res)
{
	json_t *body = api_body_object(req, res, false);
	if (!body)
		return;
	struct dsl_errors errs = {0};
	struct start_request r = {0};
	workflows_read_start(body, 1, &r, &errs);
	if (errs.n) {
		api_fail_validation(res, "invalid start request", &errs);
		dsl_errors_free(&errs);
		json_decref(body);
		return;
	}
	json_t *empty = json_object();
	if (!r.input)
		r.input = empty;

	struct db *db = api_db(req, res);
	char ns_id[37], id[37];
	if (db && api_namespace(req, res, db, ns_id)) {
		struct err e = ERR_INIT;
		bool created;
		if (workflow_start(db, ns_id, &r, id, &created, &e)) {
			json_t *out = json_pack("{s:s}", "id", id);
			if (!created)
				json_object_set_new(out, "existing",
						    json_true());
			http_json(res, created ? 201 : 200, out);
			json_decref(out);
		} else if (e.code == ERR_CONFLICT) {
			/* Name the existing execution in the body too. */
			json_t *out = json_pack("{s:{s:s,s:s}}", "error",
						"code", err_code_name(e.code),
						"message", e.msg);
			http_json(res, 409, out);
			json_decref(out);
		} else {
			http_error(res, &e);
		}
	}
	if (db)
		api_db_release(req, db);
	json_decref(empty);
	json_decref(body);
}

/* The {id} path parameter, answered 404 when it is no UUID (no such
 * execution can exist). */
static const char *
path_id(struct http_request *req, struct http_response *res)
{
	const char *id = http_param(req, "id");
	if (!uuid_valid(id)) {
		http_fail(res, ERR_NOT_FOUND, "workflow %.80s not found", id);
		return NULL;
	}
	return id;
}

static void
respond_text_json(struct http_response *res, int status, char *text)
{
	res->status = status;
	res->content_type = "application/json";
	sb_reset(&res->body);
	sb_puts(&res->body, text);
	free(text);
}

void
workflows_get(struct http_request *req, struct http_response *res)
{
	const char *id = path_id(req, res);
	if (!id)
		return;
	const char *inc = http_query(req, "includeTasks");
	bool tasks = !inc || strcmp(inc, "false") != 0;
	struct db *db = api_db(req, res);
	char ns_id[37];
	if (db && api_namespace(req, res, db, ns_id)) {
		struct err e = ERR_INIT;
		char *json;
		if (exec_get_json(db, ns_id, id, tasks, &json, &e))
			respond_text_json(res, 200, json);
		else
			http_error(res, &e);
	}
	if (db)
		api_db_release(req, db);
}

void
workflows_events(struct http_request *req, struct http_response *res)
{
	const char *id = path_id(req, res);
	long after, limit;
	if (!id ||
	    !api_query_int(req, res, "after", 0, 0, 9223372036854775807L,
			   &after) ||
	    !api_query_int(req, res, "limit", 1000, 1, 10000, &limit))
		return;
	struct db *db = api_db(req, res);
	char ns_id[37];
	if (db && sse_wanted(req)) { /* the live history (http/sse.c) */
		struct app *app = req->app;
		if (api_namespace(req, res, db, ns_id))
			sse_workflow_stream(app->sse, req, res, db, ns_id, id,
					    after);
	} else if (db && api_namespace(req, res, db, ns_id)) {
		struct err e = ERR_INIT;
		char *json;
		if (exec_events_json(db, ns_id, id, after, (int)limit, &json,
				     &e)) {
			struct strbuf sb = STRBUF_INIT;
			sb_printf(&sb, "{\"events\":%s}", json);
			free(json);
			respond_text_json(res, 200, sb_steal(&sb));
		} else {
			http_error(res, &e);
		}
	}
	if (db)
		api_db_release(req, db);
}

/* ------------------------------------------------------------- cursors */

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *
workflows_cursor_encode(const char *started_at, const char *id)
{
	struct strbuf raw = STRBUF_INIT, out = STRBUF_INIT;
	sb_printf(&raw, "%s|%s", started_at, id);
	const unsigned char *p = (const unsigned char *)raw.ptr;
	for (size_t i = 0; i < raw.len; i += 3) {
		unsigned v = (unsigned)p[i] << 16;
		if (i + 1 < raw.len)
			v |= (unsigned)p[i + 1] << 8;
		if (i + 2 < raw.len)
			v |= p[i + 2];
		sb_putc(&out, b64[(v >> 18) & 63]);
		sb_putc(&out, b64[(v >> 12) & 63]);
		if (i + 1 < raw.len)
			sb_putc(&out, b64[(v >> 6) & 63]);
		if (i + 2 < raw.len)
			sb_putc(&out, b64[v & 63]);
	}
	sb_free(&raw);
	return sb_steal(&out);
}

bool
workflows_cursor_decode(const char *cursor, char **started_at, char **id)
{
	size_t n = strlen(cursor);
	if (n == 0 || n > 200 || n % 4 == 1)
		return false;
	struct strbuf raw = STRBUF_INIT;
	unsigned acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		const char *at = strchr(b64, cursor[i]);
		if (!at || !cursor[i]) {
			sb_free(&raw);
			return false;
		}
		acc = (acc << 6) | (unsigned)(at - b64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			sb_putc(&raw, (char)((acc >> bits) & 0xff));
		}
	}
	const char *s = sb_str(&raw);
	const char *bar = strchr(s, '|');
	bool ok = bar && bar > s && uuid_valid(bar + 1) &&
		  strlen(s) == raw.len; /* no NUL inside */
	for (const char *c = s; ok && c < bar; c++)
		ok = (*c >= '0' && *c <= '9') || strchr(" -:.+", *c);
	if (ok) {
		*started_at = xstrndup(s, (size_t)(bar - s));
		*id = xstrdup(bar + 1);
	}
	sb_free(&raw);
	return ok;
}

/* ------------------------------------------------------- search terms */

/* Sets path a.b.c inside obj to value (taking the reference). */
static bool
set_path(json_t *obj, const char *path, size_t len, json_t *value)
{
	const char *dot = memchr(path, '.', len);
	size_t klen = dot ? (size_t)(dot - path) : len;
	if (klen == 0) {
		json_decref(value);
		return false;
	}
	char *key = xstrndup(path, klen);
	bool ok = true;
	if (!dot) {
		json_object_set_new(obj, key, value);
	} else {
		json_t *child = json_object_get(obj, key);
		if (!child || !json_is_object(child)) {
			child = json_object();
			json_object_set_new(obj, key, child);
		}
		ok = set_path(child, dot + 1, len - klen - 1, value);
	}
	free(key);
	return ok;
}

bool
workflows_search_terms(const char *q, json_t **input, json_t **output,
		       struct err *e)
{
	*input = *output = NULL;
	const char *p = q;
	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		const char *end = strchr(p, ' ');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *colon = memchr(p, ':', len);
		json_t **side = NULL;
		size_t prefix = 0;
		if (len > 6 && strncmp(p, "input.", 6) == 0) {
			side = input;
			prefix = 6;
		} else if (len > 7 && strncmp(p, "output.", 7) == 0) {
			side = output;
			prefix = 7;
		}
		if (!side || !colon || colon < p + prefix + 1) {
			err_set(e, ERR_INVALID,
				"search term \"%.*s\" is not input.PATH:VALUE or "
				"output.PATH:VALUE",
				(int)(len > 80 ? 80 : len), p);
			json_decref(*input);
			json_decref(*output);
			*input = *output = NULL;
			return false;
		}
		/* The value is JSON when it parses as JSON (42, true, "x"),
		 * otherwise the text itself. */
		size_t vlen = len - (size_t)(colon + 1 - p);
		json_t *value =
			json_loadb(colon + 1, vlen, JSON_DECODE_ANY, NULL);
		if (!value)
			value = json_stringn(colon + 1, vlen);
		if (!value)
			value = json_string("");
		if (!*side)
			*side = json_object();
		if (!set_path(*side, p + prefix, (size_t)(colon - p) - prefix,
			      value)) {
			err_set(e, ERR_INVALID,
				"search term \"%.*s\" has an empty key",
				(int)(len > 80 ? 80 : len), p);
			json_decref(*input);
			json_decref(*output);
			*input = *output = NULL;
			return false;
		}
		p += len;
	}
	return true;
}

static const char *const statuses[] = {"RUNNING", "PAUSED",    "COMPLETED",
				       "FAILED",  "TIMED_OUT", "TERMINATED",
				       NULL};

/* "RUNNING,FAILED" → ["RUNNING","FAILED"], or NULL with a 400 answered. */
static json_t *
parse_statuses(const char *s, struct http_response *res)
{
	json_t *a = json_array();
	const char *p = s;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		bool known = false;
		for (int i = 0; len && statuses[i] && !known; i++)
			known = strlen(statuses[i]) == len &&
				strncmp(statuses[i], p, len) == 0;
		if (!known) {
			http_fail(
				res, ERR_INVALID,
				"status \"%.*s\" is not one of RUNNING, PAUSED, "
				"COMPLETED, FAILED, TIMED_OUT, TERMINATED",
				(int)(len > 40 ? 40 : len), p);
			json_decref(a);
			return NULL;
		}
		json_array_append_new(a, json_stringn(p, len));
		p += len + (comma ? 1 : 0);
	}
	return a;
}

void
workflows_list(struct http_request *req, struct http_response *res)
{
	long limit;
	if (!api_query_int(req, res, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT,
			   &limit))
		return;
	struct exec_filter f = {.limit = (int)limit};
	f.def_name = http_query(req, "name");
	f.correlation_id = http_query(req, "correlationId");
	f.started_after = http_query(req, "startedAfter");
	f.started_before = http_query(req, "startedBefore");

	json_t *st = NULL, *in = NULL, *out = NULL;
	char *st_text = NULL, *in_text = NULL, *out_text = NULL;
	char *c_at = NULL, *c_id = NULL;
	const char *empty = NULL;
	if (f.def_name && !*f.def_name)
		empty = "name";
	else if (f.correlation_id && !*f.correlation_id)
		empty = "correlationId";
	if (empty) {
		http_fail(res, ERR_INVALID,
			  "query argument %s must not be empty", empty);
		return;
	}
	const char *status = http_query(req, "status");
	if (status && !(st = parse_statuses(status, res)))
		return;
	const char *q = http_query(req, "q");
	struct err e = ERR_INIT;
	if (q && !workflows_search_terms(q, &in, &out, &e)) {
		json_decref(st);
		http_error(res, &e);
		return;
	}
	const char *cursor = http_query(req, "cursor");
	if (cursor && !workflows_cursor_decode(cursor, &c_at, &c_id)) {
		json_decref(st);
		json_decref(in);
		json_decref(out);
		http_fail(res, ERR_INVALID,
			  "cursor is not one this server issued");
		return;
	}
	if (st)
		f.statuses = st_text = json_dumps(st, JSON_COMPACT);
	if (in)
		f.input_contains = in_text = json_dumps(in, JSON_COMPACT);
	if (out)
		f.output_contains = out_text = json_dumps(out, JSON_COMPACT);
	f.after_started_at = c_at;
	f.after_id = c_id;

	struct db *db = api_db(req, res);
	char ns_id[37];
	if (db && api_namespace(req, res, db, ns_id)) {
		char *items, *next_at, *next_id;
		if (exec_list_json(db, ns_id, &f, &items, &next_at, &next_id,
				   &e)) {
			struct strbuf sb = STRBUF_INIT;
			sb_printf(&sb, "{\"items\":%s,\"nextCursor\":", items);
			if (next_at) {
				char *c = workflows_cursor_encode(next_at,
								  next_id);
				sb_printf(&sb, "\"%s\"}", c);
				free(c);
			} else {
				sb_puts(&sb, "null}");
			}
			free(items);
			free(next_at);
			free(next_id);
			respond_text_json(res, 200, sb_steal(&sb));
		} else {
			http_error(res, &e);
		}
	}
	if (db)
		api_db_release(req, db);
	json_decref(st);
	json_decref(in);
	json_decref(out);
	free(st_text);
	free(in_text);
	free(out_text);
	free(c_at);
	free(c_id);
}

/*
 * POST /v1/ns/{ns}/workflows/{id}/{action}: terminate {reason?}, pause,
 * resume, retry, skip {taskRefName}, restart, rerun {taskRefName,
 * taskInput?, workflowInput?}.  409 when the workflow's status does not
 * allow the action.
 */
enum action { TERMINATE, PAUSE, RESUME, RETRY, SKIP, RESTART, RERUN, UNKNOWN };

static const char *const action_names[] = {
	"terminate", "pause",   "resume", "retry",
	"skip",      "restart", "rerun",  NULL,
};

void
workflows_action(struct http_request *req, struct http_response *res)
{
	const char *id = path_id(req, res);
	if (!id)
		return;
	const char *name = http_param(req, "action");
	enum action which = TERMINATE;
	while (action_names[which] && strcmp(action_names[which], name) != 0)
		which++;
	if (which == UNKNOWN) {
		http_fail(res, ERR_NOT_FOUND,
			  "unknown action \"%.40s\" (terminate, pause, resume, "
			  "retry, skip, restart, rerun)",
			  name);
		return;
	}
	json_t *body = api_body_object(req, res, true);
	if (!body)
		return;
	struct dsl_errors errs = {0};
	const char *reason = field_str(body, "reason", false, 8192, &errs);
	const char *ref =
		field_str(body, "taskRefName", which == SKIP || which == RERUN,
			  255, &errs);
	const json_t *task_input = field_obj(body, "taskInput", &errs);
	const json_t *wf_input = field_obj(body, "workflowInput", &errs);
	if (errs.n) {
		api_fail_validation(res, "invalid request", &errs);
		dsl_errors_free(&errs);
		json_decref(body);
		return;
	}
	struct db *db = api_db(req, res);
	char ns_id[37];
	if (db && api_namespace(req, res, db, ns_id)) {
		struct err e = ERR_INIT;
		char *ti = task_input ? json_db_text(task_input) : NULL;
		char *wi = wf_input ? json_db_text(wf_input) : NULL;
		bool ok;
		switch (which) {
		case TERMINATE:
			ok = subflows_terminate(db, ns_id, id, reason, &e);
			break;
		case PAUSE: ok = action_pause(db, ns_id, id, &e); break;
		case RESUME: ok = action_resume(db, ns_id, id, &e); break;
		case RETRY: ok = subflows_retry(db, ns_id, id, &e); break;
		case SKIP: ok = action_skip(db, ns_id, id, ref, &e); break;
		case RESTART: ok = action_restart(db, ns_id, id, &e); break;
		default:
			ok = action_rerun(db, ns_id, id, ref, ti, wi, &e);
			break;
		}
		free(ti);
		free(wi);
		if (ok) {
			if (which == RESUME || which == SKIP ||
			    which == RESTART)
				decide_loop_wake();
			if (which == RETRY || which == RERUN) {
				/* A task was queued outside the decider: wake
				 * the polls that wait for it, here and
				 * elsewhere. */
				struct err se = ERR_INIT;
				(void)queue_signal_send_all(db, &se);
				http_server_wake(req->server, NULL);
			}
			char *json;
			if (exec_get_json(db, ns_id, id, false, &json, &e))
				respond_text_json(res, 200, json);
			else
				http_error(res, &e);
		} else {
			http_error(res, &e);
		}
	}
	if (db)
		api_db_release(req, db);
	json_decref(body);
}

void
workflows_tree(struct http_request *req, struct http_response *res)
{
	const char *id = path_id(req, res);
	long depth, limit;
	if (!id || !api_query_int(req, res, "maxDepth", 10, 1, 32, &depth) ||
	    !api_query_int(req, res, "limit", 1000, 1, 10000, &limit))
		return;
	struct db *db = api_db(req, res);
	char ns_id[37];
	if (db && api_namespace(req, res, db, ns_id)) {
		struct err e = ERR_INIT;
		json_t *tree;
		if (subflows_tree(db, ns_id, id, (int)depth, (int)limit, &tree,
				  &e)) {
			http_json(res, 200, tree);
			json_decref(tree);
		} else {
			http_error(res, &e);
		}
	}
	if (db)
		api_db_release(req, db);
}

/*
 * POST /v1/ns/{ns}/workflows/{id}/tasks/{refName}/complete {output?} and
 * …/fail {reason?, terminal?}: the open attempt of a WAIT or HUMAN task.
 */
void
workflows_task_signal(struct http_request *req, struct http_response *res)
{
	const char *id = path_id(req, res);
	if (!id)
		return;
	const char *ref = http_param(req, "ref");
	const char *verb = http_param(req, "verb");
	bool complete = strcmp(verb, "complete") == 0;
	if (!complete && strcmp(verb, "fail") != 0) {
		http_fail(res, ERR_NOT_FOUND,
			  "unknown task action \"%.40s\" (complete, fail)",
			  verb);
		return;
	}
	json_t *body = api_body_object(req, res, true);
	if (!body)
		return;
	struct dsl_errors errs = {0};
	const json_t *output = field_obj(body, "output", &errs);
	const char *reason = field_str(body, "reason", false, 8192, &errs);
	bool terminal = field_bool(body, "terminal", false, &errs);
	if (errs.n) {
		api_fail_validation(res, "invalid request", &errs);
		dsl_errors_free(&errs);
		json_decref(body);
		return;
	}
	struct db *db = api_db(req, res);
	char ns_id[37];
	if (db && api_namespace(req, res, db, ns_id)) {
		struct err e = ERR_INIT;
		char *out = output ? json_db_text(output) : NULL;
		const char *status = complete   ? "COMPLETED"
				     : terminal ? "FAILED_WITH_TERMINAL_ERROR"
						: "FAILED";
		if (!complete && !reason)
			reason = "failed through the API";
		if (subflows_complete_gate(db, ns_id, id, ref, status, out,
					   complete ? NULL : reason, &e)) {
			decide_loop_wake();
			json_t *v =
				json_pack("{s:s,s:s,s:s}", "workflowId", id,
					  "taskRefName", ref, "status", status);
			http_json(res, 200, v);
			json_decref(v);
		} else {
			http_error(res, &e);
		}
		free(out);
	}
	if (db)
		api_db_release(req, db);
	json_decref(body);
}
