#include "http/conductor_workflows.h"

#include "engine/decide_loop.h"
#include "engine/dsl.h"
#include "engine/queue_signal.h"
#include "engine/subflows.h"
#include "engine/workflows.h"
#include "http/conductor.h"
#include "http/fields.h"
#include "http/workflows.h"
#include "store/actions_repo.h"
#include "store/conductor_repo.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
	MAX_REASON = 8192,
	MAX_SEARCH_SIZE = 1000,
	MAX_BULK = 1000,
};

/* ---------------------------------------------------------------- start */

/* Starts r and answers the id as text/plain. */
static void
start(struct http_request *req, struct http_response *res,
      const struct start_request *r)
{
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char id[37];
		bool created;
		if (workflow_start(c.db, c.ns_id, r, id, &created, &e))
			cond_text(res, id);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
}

static json_t *
object_body(struct http_request *req, struct http_response *res, bool empty_ok,
	    const char *what)
{
	bool empty;
	json_t *body = cond_body(req, res, &empty);
	if (!body && empty && empty_ok)
		return json_object();
	if (!body) {
		if (empty)
			cond_fail(res, ERR_INVALID,
				  "a JSON object body (%s) is required", what);
		return NULL;
	}
	if (!json_is_object(body)) {
		json_decref(body);
		cond_fail(res, ERR_INVALID,
			  "the body must be %s, a JSON object", what);
		return NULL;
	}
	cond_drop_nulls(body);
	return body;
}

/* POST /api/workflow: a StartWorkflowRequest. */
void
cond_workflow_start(struct http_request *req, struct http_response *res)
{
	json_t *body = object_body(req, res, false, "a StartWorkflowRequest");
	if (!body)
		return;
	struct dsl_errors errs = {0};
	struct start_request r = {0};
	/* Conductor's version 0 is the latest, as an absent one. */
	workflows_read_start(body, 0, &r, &errs);
	if (json_object_get(body, "workflowDef"))
		dsl_errors_add(&errs, "$.workflowDef",
			       "an inline workflow definition is not "
			       "supported: register it first");
	const json_t *domains = json_object_get(body, "taskToDomain");
	if (domains && json_object_size(domains))
		dsl_errors_add(&errs, "$.taskToDomain",
			       "task domains are not supported");
	if (errs.n) {
		cond_fail_validation(res, "invalid StartWorkflowRequest",
				     &errs);
		dsl_errors_free(&errs);
		json_decref(body);
		return;
	}
	json_t *empty = json_object();
	if (!r.input)
		r.input = empty;
	start(req, res, &r);
	json_decref(empty);
	json_decref(body);
}

/* POST /api/workflow/{name}?version&correlationId&priority, the body the
 * input. */
void
cond_workflow_start_named(struct http_request *req, struct http_response *res)
{
	long version, priority;
	if (!cond_query_long(req, res, "version", 0, 0, 1000000, &version) ||
	    !cond_query_long(req, res, "priority", 0, 0, 99, &priority))
		return;
	json_t *body = object_body(req, res, true, "the workflow's input");
	if (!body)
		return;
	struct start_request r = {0};
	r.name = http_param(req, "name");
	r.version = (int)version;
	r.priority = (int)priority;
	r.input = body;
	r.correlation_id = http_query(req, "correlationId");
	if (r.correlation_id && !*r.correlation_id)
		r.correlation_id = NULL;
	start(req, res, &r);
	json_decref(body);
}

/* ------------------------------------------------------------------ get */

void
cond_workflow_get(struct http_request *req, struct http_response *res)
{
	const char *id = cond_path_uuid(req, res, "id", "workflow");
	bool tasks;
	if (!id || !cond_query_bool(req, res, "includeTasks", true, &tasks))
		return;
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char *json;
		if (cond_workflow_json(c.db, c.ns_id, id, tasks, &json, &e))
			cond_json_text(res, json);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
}

/* GET /api/workflow/{id}/status?includeOutput&includeVariables */
void
cond_workflow_status(struct http_request *req, struct http_response *res)
{
	const char *id = cond_path_uuid(req, res, "id", "workflow");
	bool out, vars;
	if (!id || !cond_query_bool(req, res, "includeOutput", false, &out) ||
	    !cond_query_bool(req, res, "includeVariables", false, &vars))
		return;
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char *json;
		if (cond_workflow_json(c.db, c.ns_id, id, false, &json, &e)) {
			json_t *w = json_loads(json, 0, NULL);
			free(json);
			json_t *s = json_pack(
				"{s:O,s:O,s:O}", "workflowId",
				json_object_get(w, "workflowId"),
				"correlationId",
				json_object_get(w, "correlationId"), "status",
				json_object_get(w, "status"));
			if (out)
				json_object_set(s, "output",
						json_object_get(w, "output"));
			if (vars)
				json_object_set(
					s, "variables",
					json_object_get(w, "variables"));
			cond_json(res, 200, s);
			json_decref(w);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

/* GET /api/workflow/{name}/correlated/{correlationId} */
void
cond_workflow_correlated(struct http_request *req, struct http_response *res)
{
	bool closed, tasks;
	if (!cond_query_bool(req, res, "includeClosed", false, &closed) ||
	    !cond_query_bool(req, res, "includeTasks", false, &tasks))
		return;
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char *json;
		if (cond_correlated_json(c.db, c.ns_id, http_param(req, "name"),
					 http_param(req, "correlationId"),
					 closed, tasks, &json, &e))
			cond_json_text(res, json);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
}

/* POST /api/workflow/{name}/correlated, the body [correlationId…] →
 * {correlationId: [Workflow…]} */
static void
correlated_many(struct http_request *req, struct http_response *res)
{
	bool closed, tasks, empty;
	if (!cond_query_bool(req, res, "includeClosed", false, &closed) ||
	    !cond_query_bool(req, res, "includeTasks", false, &tasks))
		return;
	json_t *body = cond_body(req, res, &empty);
	if (!body && !empty)
		return;
	if (!json_is_array(body) || json_array_size(body) > MAX_BULK) {
		json_decref(body);
		cond_fail(res, ERR_INVALID,
			  "the body must be an array of at most %d correlation "
			  "ids",
			  MAX_BULK);
		return;
	}
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		json_t *out = json_object();
		size_t i;
		json_t *cid;
		bool ok = true;
		json_array_foreach (body, i, cid) {
			char *json;
			if (!json_is_string(cid))
				continue;
			/* The route's {id} is the workflow's name here. */
			ok = cond_correlated_json(c.db, c.ns_id,
						  http_param(req, "id"),
						  json_string_value(cid),
						  closed, tasks, &json, &e);
			if (!ok)
				break;
			json_object_set_new(out, json_string_value(cid),
					    json_loads(json, 0, NULL));
			free(json);
		}
		if (ok)
			cond_json(res, 200, out);
		else {
			json_decref(out);
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
	json_decref(body);
}

/* GET /api/workflow/running/{name}?version */
void
cond_workflow_running(struct http_request *req, struct http_response *res)
{
	long version;
	if (!cond_query_long(req, res, "version", 0, 0, 1000000, &version))
		return;
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char *json;
		if (cond_running_json(c.db, c.ns_id, http_param(req, "name"),
				      (int)version, &json, &e))
			cond_json_text(res, json);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
}

/* -------------------------------------------------------------- actions */

enum action { PAUSE, RESUME, TERMINATE, RETRY, RESTART, RERUN, SKIP };

struct action_args {
	const char *reason;
	const char *ref;
	char *task_input; /* JSON text or NULL */
	char *wf_input;
};

/* One action on one workflow, as the native API does it (and waking who
 * it does). */
static bool
act(struct http_request *req, struct cond_call *c, enum action a,
    const char *id, const struct action_args *args, struct err *e)
{
	bool ok;
	switch (a) {
	case PAUSE: ok = action_pause(c->db, c->ns_id, id, e); break;
	case RESUME: ok = action_resume(c->db, c->ns_id, id, e); break;
	case TERMINATE: /* cascading to sub-workflows, as the native API */
		ok = subflows_terminate(c->db, c->ns_id, id, args->reason, e);
		break;
	case RETRY: ok = subflows_retry(c->db, c->ns_id, id, e); break;
	case RESTART: ok = action_restart(c->db, c->ns_id, id, e); break;
	case SKIP: ok = action_skip(c->db, c->ns_id, id, args->ref, e); break;
	default:
		ok = action_rerun(c->db, c->ns_id, id, args->ref,
				  args->task_input, args->wf_input, e);
		break;
	}
	if (!ok)
		return false;
	if (a == RESUME || a == SKIP || a == RESTART)
		decide_loop_wake();
	if (a == RETRY || a == RERUN) {
		struct err se = ERR_INIT;
		(void)queue_signal_send_all(c->db, &se);
		http_server_wake(req->server, NULL);
	}
	return true;
}

static void
act_one(struct http_request *req, struct http_response *res, enum action a,
	const struct action_args *args, bool no_content)
{
	const char *id = cond_path_uuid(req, res, "id", "workflow");
	if (!id)
		return;
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		if (!act(req, &c, a, id, args, &e))
			cond_error(res, &e);
		else if (a == RERUN)
			cond_text(res, id);
		else if (no_content)
			cond_no_content(res);
		else
			cond_ok_empty(res);
	}
	cond_end(req, &c);
}

/* PUT /api/workflow/{id}/pause and /resume */
void
cond_workflow_put_action(struct http_request *req, struct http_response *res)
{
	const char *name = http_param(req, "action");
	struct action_args args = {0};
	if (strcmp(name, "pause") == 0)
		act_one(req, res, PAUSE, &args, false);
	else if (strcmp(name, "resume") == 0)
		act_one(req, res, RESUME, &args, false);
	else
		cond_fail(res, ERR_NOT_FOUND,
			  "no route for PUT %.200s (pause or resume)",
			  req->path);
}

/* POST /api/workflow/{id}/retry, /restart, /rerun; /{name}/correlated */
void
cond_workflow_post_action(struct http_request *req, struct http_response *res)
{
	const char *name = http_param(req, "action");
	struct action_args args = {0};
	if (strcmp(name, "correlated") == 0) {
		correlated_many(req, res);
	} else if (strcmp(name, "retry") == 0) {
		act_one(req, res, RETRY, &args, true);
	} else if (strcmp(name, "restart") == 0) {
		act_one(req, res, RESTART, &args, true);
	} else if (strcmp(name, "rerun") == 0) {
		/* RerunWorkflowRequest {reRunFromTaskId, taskInput,
		 * workflowInput}: the task is named by its id; the rerun
		 * starts from its reference. */
		json_t *body =
			object_body(req, res, false, "a RerunWorkflowRequest");
		if (!body)
			return;
		struct dsl_errors errs = {0};
		const char *task_id =
			field_str(body, "reRunFromTaskId", true, 36, &errs);
		if (task_id && !uuid_valid(task_id))
			dsl_errors_add(&errs, "$.reRunFromTaskId",
				       "must be a task id (a UUID)");
		const json_t *ti = field_obj(body, "taskInput", &errs);
		const json_t *wi = field_obj(body, "workflowInput", &errs);
		const char *id = http_param(req, "id");
		if (errs.n) {
			cond_fail_validation(
				res, "invalid RerunWorkflowRequest", &errs);
			dsl_errors_free(&errs);
			json_decref(body);
			return;
		}
		struct cond_call c = {0};
		struct cond_task_loc loc = {0};
		bool found = false;
		if (uuid_valid(id) && cond_begin(req, res, &c)) {
			struct err e = ERR_INIT;
			found = cond_task_locate(c.db, c.ns_id, id, task_id,
						 &loc, &e);
			if (!found)
				cond_error(res, &e);
		} else if (!uuid_valid(id)) {
			cond_fail(res, ERR_NOT_FOUND,
				  "workflow %.80s not found", id);
			memset(&c, 0, sizeof(c));
		}
		cond_end(req, &c);
		if (found) {
			args.ref = loc.ref_name;
			args.task_input = ti && json_object_size(ti)
						  ? json_db_text(ti)
						  : NULL;
			args.wf_input = wi && json_object_size(wi)
						? json_db_text(wi)
						: NULL;
			act_one(req, res, RERUN, &args, false);
			free(args.task_input);
			free(args.wf_input);
		}
		cond_task_loc_free(&loc);
		json_decref(body);
	} else {
		cond_fail(res, ERR_NOT_FOUND,
			  "no route for POST %.200s (retry, restart, rerun or "
			  "correlated)",
			  req->path);
	}
}

/* PUT /api/workflow/{id}/skiptask/{taskReferenceName} */
void
cond_workflow_skip(struct http_request *req, struct http_response *res)
{
	struct action_args args = {.ref = http_param(req, "ref")};
	act_one(req, res, SKIP, &args, false);
}

/* DELETE /api/workflow/{id}?reason */
void
cond_workflow_terminate(struct http_request *req, struct http_response *res)
{
	struct action_args args = {.reason = http_query(req, "reason")};
	act_one(req, res, TERMINATE, &args, false);
}

/* PUT /api/workflow/bulk/pause|resume, POST /bulk/restart|retry|terminate,
 * the body [workflowId…] → BulkResponse. */
void
cond_workflow_bulk(struct http_request *req, struct http_response *res)
{
	const char *name = http_param(req, "action");
	bool put = strcmp(req->method, "PUT") == 0;
	enum action a;
	if (put && strcmp(name, "pause") == 0)
		a = PAUSE;
	else if (put && strcmp(name, "resume") == 0)
		a = RESUME;
	else if (!put && strcmp(name, "restart") == 0)
		a = RESTART;
	else if (!put && strcmp(name, "retry") == 0)
		a = RETRY;
	else if (!put && strcmp(name, "terminate") == 0)
		a = TERMINATE;
	else {
		cond_fail(res, ERR_NOT_FOUND,
			  "no route for %s %.200s (PUT pause, resume; POST "
			  "restart, retry, terminate)",
			  req->method, req->path);
		return;
	}
	bool empty;
	json_t *body = cond_body(req, res, &empty);
	if (!body && !empty)
		return;
	if (!json_is_array(body) || json_array_size(body) > MAX_BULK) {
		json_decref(body);
		cond_fail(res, ERR_INVALID,
			  "the body must be an array of at most %d workflow "
			  "ids",
			  MAX_BULK);
		return;
	}
	struct action_args args = {.reason = http_query(req, "reason")};
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		json_t *errors = json_object(), *done = json_array();
		size_t i;
		json_t *v;
		json_array_foreach (body, i, v) {
			const char *id = json_string_value(v);
			struct err e = ERR_INIT;
			if (!id)
				continue;
			if (!uuid_valid(id))
				err_set(&e, ERR_NOT_FOUND,
					"workflow %.80s not found", id);
			else if (act(req, &c, a, id, &args, &e))
				json_array_append_new(done, json_string(id));
			if (e.code != ERR_OK)
				json_object_set_new(errors, id,
						    json_string(e.msg));
		}
		cond_json(res, 200,
			  json_pack("{s:o,s:o}", "bulkErrorResults", errors,
				    "bulkSuccessfulResults", done));
	}
	cond_end(req, &c);
	json_decref(body);
}

/* --------------------------------------------------------------- search */

static const char *const statuses[] = {"RUNNING", "PAUSED",    "COMPLETED",
				       "FAILED",  "TIMED_OUT", "TERMINATED",
				       NULL};

static bool
status_known(const char *s)
{
	for (int i = 0; statuses[i]; i++)
		if (strcmp(statuses[i], s) == 0)
			return true;
	return false;
}

static void
skip_space(const char **p)
{
	while (**p == ' ' || **p == '\t')
		(*p)++;
}

/* A value: 'quoted', "quoted", or a bare word. */
static json_t *
read_value(const char **p)
{
	skip_space(p);
	char q = **p;
	if (q == '\'' || q == '"') {
		const char *end = strchr(*p + 1, q);
		if (!end)
			return NULL;
		json_t *v = json_stringn(*p + 1, (size_t)(end - *p - 1));
		*p = end + 1;
		return v;
	}
	const char *s = *p;
	while (**p && **p != ' ' && **p != ',' && **p != ')')
		(*p)++;
	return *p > s ? json_stringn(s, (size_t)(*p - s)) : NULL;
}

static bool
whole_number(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

bool
cond_parse_query(const char *query, struct cond_search *s, json_t **store,
		 char *msg, size_t msg_size)
{
	*store = json_object();
	const char *p = query;
	for (;;) {
		skip_space(&p);
		if (!*p)
			return true;
		const char *clause = p;
		const char *f = p;
		while (isalpha((unsigned char)*p))
			p++;
		size_t flen = (size_t)(p - f);
		skip_space(&p);
		char op[3] = {0};
		if (*p == '=' || *p == '>' || *p == '<') {
			op[0] = *p++;
		} else if (strncasecmp(p, "IN", 2) == 0 &&
			   (p[2] == ' ' || p[2] == '(')) {
			op[0] = 'I';
			p += 2;
		}
#define FIELD(name) (flen == strlen(name) && strncmp(f, name, flen) == 0)
		bool ok = op[0] != 0;
		if (ok && FIELD("status") && op[0] == 'I') {
			skip_space(&p);
			json_t *list = json_array();
			ok = *p == '(';
			if (ok)
				p++;
			while (ok) {
				json_t *v = read_value(&p);
				ok = v && status_known(json_string_value(v));
				if (v)
					json_array_append_new(list, v);
				skip_space(&p);
				if (ok && *p == ',')
					p++;
				else if (ok && *p == ')') {
					p++;
					break;
				} else
					ok = false;
			}
			json_object_set_new(*store, "statuses", list);
		} else if (ok && FIELD("status") && op[0] == '=') {
			json_t *v = read_value(&p);
			ok = v && status_known(json_string_value(v));
			json_object_set_new(*store, "statuses",
					    v ? json_pack("[o]", v)
					      : json_array());
		} else if (ok && op[0] == '=' &&
			   (FIELD("workflowType") || FIELD("workflowId") ||
			    FIELD("correlationId"))) {
			json_t *v = read_value(&p);
			ok = v != NULL;
			if (ok && FIELD("workflowId"))
				ok = uuid_valid(json_string_value(v));
			if (v) {
				char key[32];
				snprintf(key, sizeof(key), "%.*s", (int)flen,
					 f);
				json_object_set_new(*store, key, v);
			}
		} else if (ok && FIELD("startTime") &&
			   (op[0] == '>' || op[0] == '<')) {
			json_t *v = read_value(&p);
			ok = v && whole_number(json_string_value(v));
			if (v)
				json_object_set_new(
					*store,
					op[0] == '>' ? "after" : "before", v);
		} else {
			ok = false;
		}
#undef FIELD
		if (ok) {
			skip_space(&p);
			if (strncasecmp(p, "AND", 3) == 0 &&
			    (p[3] == ' ' || p[3] == '\t'))
				p += 3;
			else if (*p)
				ok = false;
		}
		if (!ok) {
			snprintf(msg, msg_size,
				 "query clause \"%.80s\" is not one of "
				 "workflowType = 'x', workflowId = 'x', "
				 "correlationId = 'x', status = X, "
				 "status IN (X, Y), startTime > ms, "
				 "startTime < ms (joined by AND)",
				 clause);
			json_decref(*store);
			*store = NULL;
			return false;
		}
		json_t *st = json_object_get(*store, "statuses");
		if (st) {
			char *text = json_dumps(st, JSON_COMPACT);
			json_object_set_new(*store, "statusesText",
					    json_string(text));
			free(text);
		}
		s->statuses = json_string_value(
			json_object_get(*store, "statusesText"));
		s->workflow_type = json_string_value(
			json_object_get(*store, "workflowType"));
		s->workflow_id = json_string_value(
			json_object_get(*store, "workflowId"));
		s->correlation_id = json_string_value(
			json_object_get(*store, "correlationId"));
		s->start_after_ms =
			json_string_value(json_object_get(*store, "after"));
		s->start_before_ms =
			json_string_value(json_object_get(*store, "before"));
	}
}

/* GET /api/workflow/search?start&size&sort&freeText&query → SearchResult
 * of WorkflowSummary. */
void
cond_workflow_search(struct http_request *req, struct http_response *res)
{
	struct cond_search s = {0};
	if (!cond_query_long(req, res, "start", 0, 0, 1000000, &s.start) ||
	    !cond_query_long(req, res, "size", 100, 0, MAX_SEARCH_SIZE,
			     &s.size))
		return;
	const char *sort = http_query(req, "sort");
	if (sort && *sort) {
		if (strcmp(sort, "startTime:ASC") == 0)
			s.ascending = true;
		else if (strcmp(sort, "startTime:DESC") != 0 &&
			 strcmp(sort, "startTime") != 0) {
			cond_fail(res, ERR_INVALID,
				  "sort \"%.80s\" is not supported: "
				  "startTime:ASC or startTime:DESC",
				  sort);
			return;
		}
	}
	const char *text = http_query(req, "freeText");
	if (text && *text && strcmp(text, "*") != 0)
		s.free_text = text;
	json_t *store = NULL;
	const char *query = http_query(req, "query");
	char msg[400];
	if (query && !cond_parse_query(query, &s, &store, msg, sizeof(msg))) {
		cond_fail(res, ERR_INVALID, "%s", msg);
		return;
	}
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		char *json;
		if (cond_search_json(c.db, c.ns_id, &s, &json, &e))
			cond_json_text(res, json);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
	json_decref(store);
}
