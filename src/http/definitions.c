#include "http/definitions.h"

#include "engine/defcache.h"
#include "engine/defcheck.h"
#include "engine/dsl.h"
#include "http/api.h"
#include "platform/namespaces.h"
#include "store/definitions_repo.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */

/* A query flag: absent is false, "true" or "false" otherwise; anything else
 * answers 400. */
static bool
query_flag(struct http_request *req, struct http_response *res,
	   const char *name, bool *out)
{
	const char *v = http_query(req, name);
	*out = false;
	if (!v || strcmp(v, "false") == 0)
		return true;
	if (strcmp(v, "true") == 0) {
		*out = true;
		return true;
	}
	http_fail(res, ERR_INVALID, "query argument %s must be true or false",
		  name);
	return false;
}

/* The {version} path parameter, 1 to INT_MAX; answers 400 otherwise. */
static bool
path_version(struct http_request *req, struct http_response *res, int *out)
{
	const char *v = http_param(req, "version");
	char *end;
	errno = 0;
	long x = v ? strtol(v, &end, 10) : 0;
	if (!v || errno || end == v || *end || x < 1 || x > INT_MAX) {
		http_fail(res, ERR_INVALID,
			  "version must be a whole number from 1 to %d",
			  INT_MAX);
		return false;
	}
	*out = (int)x;
	return true;
}

/* ---------------------------------------------------------- namespaces */

void
definitions_namespace_put(struct http_request *req, struct http_response *res)
{
	const char *ns = http_param(req, "ns");
	struct db *db = api_db(req, res);
	if (!db)
		return;
	struct err e = ERR_INIT;
	bool created;
	char id[37];
	/* An invalid name is refused (400) before anything is written. */
	if (namespaces_ensure(db, ns, &created, id, &e))
		api_reply(res, created ? 201 : 200,
			  json_pack("{s:s}", "name", ns));
	else
		http_error(res, &e);
	api_db_release(req, db);
}

/* ---------------------------------------------------- task definitions */

void
definitions_task_put(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct dsl_errors errs = {0};
	struct task_def d, stored;
	bool parsed = false, created;
	json_t *body = NULL;
	const char *name = http_param(req, "name");
	json_t *path_name = json_string(name);
	if (!path_name) {
		http_fail(res, ERR_INVALID,
			  "the task name in the path is not valid UTF-8");
		goto out;
	}
	body = api_body_object(req, res, false);
	if (!body)
		goto out;

	/* The path names the definition; a body may repeat the name, not
	 * contradict it. */
	json_t *given = json_object_get(body, "name");
	if (given && !json_is_null(given) && !json_equal(given, path_name))
		dsl_errors_add(&errs, "$.name",
			       "must be the name in the path, \"%.200s\"",
			       name);
	json_object_set(body, "name", path_name);
	dsl_task_def_parse(body, &d, &errs);
	parsed = true;
	if (!errs.n && !defcheck_task_def(db, ns, &d, "$", &errs, &e)) {
		http_error(res, &e);
		goto out;
	}
	if (errs.n) {
		api_fail_validation(res, "invalid task definition", &errs);
		goto out;
	}
	if (!defs_task_put(db, ns, &d, &created, &e) ||
	    !defs_task_get(db, ns, d.name, &stored, &e)) {
		http_error(res, &e);
		goto out;
	}
	defcache_invalidate_task(ns, d.name);
	api_reply(res, created ? 201 : 200, dsl_task_def_json(&stored));
	task_def_free(&stored);
out:
	api_db_release(req, db);
	if (parsed)
		task_def_free(&d);
	dsl_errors_free(&errs);
	json_decref(body);
	json_decref(path_name);
}

void
definitions_task_get(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct task_def d;
	if (defs_task_get(db, ns, http_param(req, "name"), &d, &e)) {
		api_reply(res, 200, dsl_task_def_json(&d));
		task_def_free(&d);
	} else {
		http_error(res, &e);
	}
	api_db_release(req, db);
}

void
definitions_task_list(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct task_def *defs;
	size_t n;
	if (defs_task_list(db, ns, &defs, &n, &e)) {
		json_t *items = json_array();
		for (size_t i = 0; i < n; i++) {
			json_array_append_new(items,
					      dsl_task_def_json(&defs[i]));
			task_def_free(&defs[i]);
		}
		free(defs);
		api_reply(res, 200, json_pack("{s:o}", "items", items));
	} else {
		http_error(res, &e);
	}
	api_db_release(req, db);
}

void
definitions_task_delete(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	if (defs_task_delete(db, ns, http_param(req, "name"), &e)) {
		defcache_invalidate_task(ns, http_param(req, "name"));
		api_no_content(res);
	} else
		http_error(res, &e);
	api_db_release(req, db);
}

/* ------------------------------------------------ workflow definitions */

/* What is stored: the definition as sent, with its version made explicit
 * and the read-only fields of an earlier answer (sent back by a client
 * that edits what it fetched) left out. */
static json_t *
stored_form(const json_t *body, const struct wf_def *def)
{
	json_t *v = json_deep_copy(body);
	json_object_set_new(v, "version", json_integer(def->version));
	json_object_del(v, "createTime");
	json_object_del(v, "updateTime");
	return v;
}

void
definitions_workflow_post(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct dsl_errors errs = {0};
	struct wf_def *def = NULL;
	json_t *body = NULL, *names = NULL, *missing = NULL, *stored = NULL;
	struct workflow_def_row row = {0};
	bool overwrite, created;
	if (!query_flag(req, res, "overwrite", &overwrite))
		goto out;
	body = api_body_object(req, res, false);
	if (!body)
		goto out;

	/* Every problem in one answer: those of the document, and the task
	 * definitions the namespace lacks. */
	dsl_workflow_parse_partial(body, &def, &errs);
	if (def->n_required_task_defs) {
		names = json_array();
		for (size_t i = 0; i < def->n_required_task_defs; i++)
			json_array_append_new(
				names, json_string(def->required_task_defs[i]));
		if (!defs_task_missing(db, ns, names, &missing, &e)) {
			http_error(res, &e);
			goto out;
		}
		dsl_error_missing_task_def(def, missing, &errs);
	}
	if (!defcheck_workflow(db, ns, def, &errs, &e)) {
		http_error(res, &e);
		goto out;
	}
	if (errs.n) {
		api_fail_validation(res, "invalid workflow definition", &errs);
		goto out;
	}

	stored = stored_form(body, def);
	if (!defs_workflow_put(db, ns, def->name, def->version, stored,
			       overwrite, &created, &e) ||
	    !defs_workflow_get(db, ns, def->name, def->version, &row, &e)) {
		http_error(res, &e);
		goto out;
	}
	defcache_invalidate_workflow(ns, def->name);
	api_reply(res, created ? 201 : 200, dsl_workflow_def_json(&row));
out:
	api_db_release(req, db);
	workflow_def_row_free(&row);
	json_decref(stored);
	json_decref(names);
	json_decref(missing);
	wf_def_free(def);
	dsl_errors_free(&errs);
	json_decref(body);
}

void
definitions_workflow_list(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct workflow_def_row *rows;
	size_t n;
	bool all;
	if (query_flag(req, res, "allVersions", &all)) {
		if (defs_workflow_list(db, ns, all, &rows, &n, &e)) {
			json_t *items = json_array();
			for (size_t i = 0; i < n; i++) {
				json_array_append_new(
					items, dsl_workflow_def_json(&rows[i]));
				workflow_def_row_free(&rows[i]);
			}
			free(rows);
			api_reply(res, 200, json_pack("{s:o}", "items", items));
		} else {
			http_error(res, &e);
		}
	}
	api_db_release(req, db);
}

/* GET of the {version} in the path, or of the latest. */
static void
get_workflow(struct http_request *req, struct http_response *res, bool latest)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct workflow_def_row row;
	int version = 0;
	if (latest || path_version(req, res, &version)) {
		if (defs_workflow_get(db, ns, http_param(req, "name"), version,
				      &row, &e)) {
			api_reply(res, 200, dsl_workflow_def_json(&row));
			workflow_def_row_free(&row);
		} else {
			http_error(res, &e);
		}
	}
	api_db_release(req, db);
}

void
definitions_workflow_get(struct http_request *req, struct http_response *res)
{
	get_workflow(req, res, true);
}

void
definitions_workflow_get_version(struct http_request *req,
				 struct http_response *res)
{
	get_workflow(req, res, false);
}

/* DELETE of the {version} in the path, or of every version. */
static void
delete_workflow(struct http_request *req, struct http_response *res, bool every)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	int version = 0;
	if (every || path_version(req, res, &version)) {
		if (defs_workflow_delete(db, ns, http_param(req, "name"),
					 version, &e)) {
			defcache_invalidate_workflow(ns,
						     http_param(req, "name"));
			api_no_content(res);
		} else
			http_error(res, &e);
	}
	api_db_release(req, db);
}

void
definitions_workflow_delete(struct http_request *req, struct http_response *res)
{
	delete_workflow(req, res, true);
}

void
definitions_workflow_delete_version(struct http_request *req,
				    struct http_response *res)
{
	delete_workflow(req, res, false);
}
