#include "http/conductor_metadata.h"

#include "engine/defcache.h"
#include "engine/defcheck.h"
#include "engine/dsl.h"
#include "http/conductor.h"
#include "store/definitions_repo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEFS = 1000 };

/* Each problem of one document of a list, under "$[i]". */
static void
merge_errors(struct dsl_errors *into, struct dsl_errors *one, size_t i,
	     bool list)
{
	for (size_t k = 0; k < one->n; k++) {
		char path[512];
		if (list)
			snprintf(path, sizeof(path), "$[%zu]%s", i,
				 one->items[k].path + 1);
		else
			snprintf(path, sizeof(path), "%s", one->items[k].path);
		dsl_errors_add(into, path, "%s", one->items[k].message);
	}
	dsl_errors_free(one);
}

/* The body as a list of objects (a single object when !list). */
static json_t *
docs_body(struct http_request *req, struct http_response *res, bool list,
	  const char *what)
{
	bool empty;
	json_t *body = cond_body(req, res, &empty);
	if (!body && !empty)
		return NULL;
	if (list && json_is_array(body) && json_array_size(body) <= MAX_DEFS)
		return body;
	if (!list && json_is_object(body)) {
		json_t *a = json_pack("[o]", body);
		return a;
	}
	json_decref(body);
	if (list)
		cond_fail(res, ERR_INVALID,
			  "the body must be a JSON array of at most %d %s",
			  MAX_DEFS, what);
	else
		cond_fail(res, ERR_INVALID,
			  "the body must be a %s, a JSON object", what);
	return NULL;
}

/* ---------------------------------------------------- task definitions */

static void
put_tasks(struct http_request *req, struct http_response *res, bool list)
{
	json_t *docs = docs_body(req, res, list, "TaskDefs");
	if (!docs)
		return;
	size_t n = json_array_size(docs), i;
	struct task_def *defs = calloc(n ? n : 1, sizeof(*defs));
	struct dsl_errors errs = {0};
	json_t *doc;
	json_array_foreach (docs, i, doc) {
		struct dsl_errors one = {0};
		if (!json_is_object(doc)) {
			task_def_init(&defs[i]);
			dsl_errors_add(&one, "$", "must be a TaskDef object");
		} else {
			cond_drop_nulls(doc);
			dsl_task_def_parse(doc, &defs[i], &one);
		}
		merge_errors(&errs, &one, i, list);
	}
	struct cond_call c = {0};
	if (errs.n) {
		cond_fail_validation(res, "invalid TaskDef", &errs);
	} else if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		bool ok = true, created;
		/* A semaphore on a name a workflow runs itself. */
		for (i = 0; ok && i < n; i++) {
			struct dsl_errors one = {0};
			ok = defcheck_task_def(c.db, c.ns_id, &defs[i], "$",
					       &one, &e);
			merge_errors(&errs, &one, i, list);
		}
		bool refused = ok && errs.n;
		for (i = 0; ok && !refused && i < n; i++) {
			ok = defs_task_put(c.db, c.ns_id, &defs[i], &created,
					   &e);
			if (ok)
				defcache_invalidate_task(c.ns_id, defs[i].name);
		}
		if (refused)
			cond_fail_validation(res, "invalid TaskDef", &errs);
		else if (ok)
			cond_ok_empty(res);
		else
			cond_error(res, &e);
	}
	cond_end(req, &c);
	for (i = 0; i < n; i++)
		task_def_free(&defs[i]);
	free(defs);
	dsl_errors_free(&errs);
	json_decref(docs);
}

void
cond_meta_taskdefs_post(struct http_request *req, struct http_response *res)
{
	put_tasks(req, res, true);
}

void
cond_meta_taskdef_put(struct http_request *req, struct http_response *res)
{
	put_tasks(req, res, false);
}

void
cond_meta_taskdefs_list(struct http_request *req, struct http_response *res)
{
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		struct task_def *defs;
		size_t n;
		if (defs_task_list(c.db, c.ns_id, &defs, &n, &e)) {
			json_t *items = json_array();
			for (size_t i = 0; i < n; i++) {
				json_array_append_new(
					items, dsl_task_def_json(&defs[i]));
				task_def_free(&defs[i]);
			}
			free(defs);
			cond_json(res, 200, items);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

void
cond_meta_taskdef_get(struct http_request *req, struct http_response *res)
{
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		struct task_def d;
		if (defs_task_get(c.db, c.ns_id, http_param(req, "name"), &d,
				  &e)) {
			cond_json(res, 200, dsl_task_def_json(&d));
			task_def_free(&d);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

void
cond_meta_taskdef_delete(struct http_request *req, struct http_response *res)
{
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		const char *name = http_param(req, "name");
		if (defs_task_delete(c.db, c.ns_id, name, &e)) {
			defcache_invalidate_task(c.ns_id, name);
			cond_ok_empty(res);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

/* ------------------------------------------------ workflow definitions */

/*
 * Validates each WorkflowDef of docs (with the task definitions the
 * namespace lacks) and, unless validate_only, stores them all.  Answers
 * the request.
 */
static void
put_workflows(struct http_request *req, struct http_response *res, json_t *docs,
	      bool list, bool overwrite, bool validate_only)
{
	size_t n = json_array_size(docs), i;
	struct wf_def **defs = calloc(n ? n : 1, sizeof(*defs));
	struct dsl_errors errs = {0};
	struct cond_call c = {0};
	json_t *doc;
	if (!cond_begin(req, res, &c))
		goto out;
	json_array_foreach (docs, i, doc) {
		struct dsl_errors one = {0};
		struct err e = ERR_INIT;
		if (!json_is_object(doc)) {
			dsl_errors_add(&one, "$",
				       "must be a WorkflowDef object");
			merge_errors(&errs, &one, i, list);
			continue;
		}
		cond_drop_nulls(doc);
		dsl_workflow_parse_partial(doc, &defs[i], &one);
		if (defs[i]->n_required_task_defs) {
			json_t *names = json_array(), *missing = NULL;
			for (size_t k = 0; k < defs[i]->n_required_task_defs;
			     k++)
				json_array_append_new(
					names,
					json_string(defs[i]->required_task_defs
							    [k]));
			bool ok = defs_task_missing(c.db, c.ns_id, names,
						    &missing, &e);
			json_decref(names);
			if (!ok) {
				dsl_errors_free(&one);
				cond_error(res, &e);
				goto out;
			}
			dsl_error_missing_task_def(defs[i], missing, &one);
			json_decref(missing);
		}
		if (!defcheck_workflow(c.db, c.ns_id, defs[i], &one, &e)) {
			dsl_errors_free(&one);
			cond_error(res, &e);
			goto out;
		}
		merge_errors(&errs, &one, i, list);
	}
	if (errs.n) {
		cond_fail_validation(res, "invalid WorkflowDef", &errs);
		goto out;
	}
	if (validate_only) {
		cond_ok_empty(res);
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct err e = ERR_INIT;
		bool created;
		/* Stored as sent, the version explicit, without the read-only
		 * times of an earlier answer. */
		json_t *stored = json_deep_copy(json_array_get(docs, i));
		json_object_set_new(stored, "version",
				    json_integer(defs[i]->version));
		json_object_del(stored, "createTime");
		json_object_del(stored, "updateTime");
		bool ok = defs_workflow_put(c.db, c.ns_id, defs[i]->name,
					    defs[i]->version, stored, overwrite,
					    &created, &e);
		json_decref(stored);
		if (!ok) {
			cond_error(res, &e);
			goto out;
		}
		defcache_invalidate_workflow(c.ns_id, defs[i]->name);
	}
	cond_ok_empty(res);
out:
	cond_end(req, &c);
	for (i = 0; i < n; i++)
		wf_def_free(defs[i]);
	free(defs);
	dsl_errors_free(&errs);
}

/* POST /api/metadata/workflow?overwrite=false */
void
cond_meta_workflow_post(struct http_request *req, struct http_response *res)
{
	bool overwrite;
	if (!cond_query_bool(req, res, "overwrite", false, &overwrite))
		return;
	json_t *docs = docs_body(req, res, false, "WorkflowDef");
	if (!docs)
		return;
	put_workflows(req, res, docs, false, overwrite, false);
	json_decref(docs);
}

/* PUT /api/metadata/workflow: a list, each created or replaced. */
void
cond_meta_workflow_put(struct http_request *req, struct http_response *res)
{
	json_t *docs = docs_body(req, res, true, "WorkflowDefs");
	if (!docs)
		return;
	put_workflows(req, res, docs, true, true, false);
	json_decref(docs);
}

void
cond_meta_workflow_validate(struct http_request *req, struct http_response *res)
{
	json_t *docs = docs_body(req, res, false, "WorkflowDef");
	if (!docs)
		return;
	put_workflows(req, res, docs, false, false, true);
	json_decref(docs);
}

/* GET /api/metadata/workflow: every version of every definition. */
void
cond_meta_workflow_list(struct http_request *req, struct http_response *res)
{
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		struct workflow_def_row *rows;
		size_t n;
		if (defs_workflow_list(c.db, c.ns_id, true, &rows, &n, &e)) {
			json_t *items = json_array();
			for (size_t i = 0; i < n; i++) {
				json_array_append_new(
					items, dsl_workflow_def_json(&rows[i]));
				workflow_def_row_free(&rows[i]);
			}
			free(rows);
			cond_json(res, 200, items);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

/* GET /api/metadata/workflow/{name}?version */
void
cond_meta_workflow_get(struct http_request *req, struct http_response *res)
{
	long version;
	if (!cond_query_long(req, res, "version", 0, 0, 1000000, &version))
		return;
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		struct workflow_def_row row;
		if (defs_workflow_get(c.db, c.ns_id, http_param(req, "name"),
				      (int)version, &row, &e)) {
			cond_json(res, 200, dsl_workflow_def_json(&row));
			workflow_def_row_free(&row);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

/* DELETE /api/metadata/workflow/{name}/{version} */
void
cond_meta_workflow_delete(struct http_request *req, struct http_response *res)
{
	const char *v = http_param(req, "version");
	char *end;
	long version = strtol(v, &end, 10);
	if (end == v || *end || version < 1 || version > 1000000) {
		cond_fail(res, ERR_INVALID,
			  "version %.20s must be a whole number from 1", v);
		return;
	}
	struct cond_call c = {0};
	if (cond_begin(req, res, &c)) {
		struct err e = ERR_INIT;
		const char *name = http_param(req, "name");
		if (defs_workflow_delete(c.db, c.ns_id, name, (int)version,
					 &e)) {
			defcache_invalidate_workflow(c.ns_id, name);
			cond_ok_empty(res);
		} else {
			cond_error(res, &e);
		}
	}
	cond_end(req, &c);
}

/* POST /api/token: there is no authentication yet, and a 404 here is how
 * Conductor's SDKs learn to run without it. */
void
cond_token(struct http_request *req, struct http_response *res)
{
	(void)req;
	cond_fail(res, ERR_NOT_FOUND,
		  "no authentication: /api/token is not served, send requests "
		  "without a token");
}
