#include "http/api.h"

#include "engine/dsl.h"
#include "http/app.h"
#include "platform/namespaces.h"
#include "store/pool.h"
#include "util/json.h"
#include "util/strbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct db *
api_db(struct http_request *req, struct http_response *res)
{
	struct app *app = req->app;
	struct err e = ERR_INIT;
	struct db *db = db_pool_acquire(
		app->pool, (int)app->cfg->db_acquire_timeout_ms, &e);
	if (!db) {
		http_error(res, &e);
		/* Busy or reconnecting: either passes soon. */
		if (e.code == ERR_UNAVAILABLE)
			http_add_header(res, "Retry-After", "1");
	}
	return db;
}

void
api_db_release(struct http_request *req, struct db *db)
{
	struct app *app = req->app;
	db_pool_release(app->pool, db);
}

bool
api_namespace(struct http_request *req, struct http_response *res,
	      struct db *db, char id_out[37])
{
	const char *ns = http_param(req, "ns");
	struct err e = ERR_INIT;
	if (!ns || !namespaces_id(db, ns, id_out, &e)) {
		if (!ns)
			err_set(&e, ERR_NOT_FOUND, "no namespace in the path");
		http_error(res, &e);
		return false;
	}
	return true;
}

struct db *
api_db_ns(struct http_request *req, struct http_response *res, char ns_out[37])
{
	struct db *db = api_db(req, res);
	if (db && !api_namespace(req, res, db, ns_out)) {
		api_db_release(req, db);
		return NULL;
	}
	return db;
}

void
api_reply(struct http_response *res, int status, json_t *v)
{
	http_json(res, status, v);
	json_decref(v);
}

void
api_reply_text(struct http_response *res, int status, const char *json)
{
	http_text(res, status, "application/json", json);
}

void
api_no_content(struct http_response *res)
{
	res->status = 204;
	res->content_type = NULL;
	sb_reset(&res->body);
}

json_t *
api_body_object(struct http_request *req, struct http_response *res,
		bool empty_ok)
{
	if (req->body_len == 0) {
		if (empty_ok)
			return json_object();
		http_fail(res, ERR_INVALID, "a JSON object body is required");
		return NULL;
	}
	const char *ctype = http_header(req, "Content-Type");
	if (ctype && strncmp(ctype, "application/json", 16) != 0) {
		http_fail(res, ERR_UNSUPPORTED_MEDIA,
			  "Content-Type must be application/json, not %.60s",
			  ctype);
		return NULL;
	}
	struct err e = ERR_INIT;
	struct app *app = req->app;
	json_t *v = json_parse(req->body, req->body_len,
			       (size_t)app->cfg->max_json_depth, &e);
	if (!v) {
		if (strstr(e.msg, "nested deeper than"))
			strncat(e.msg, " (--max-json-depth)",
				sizeof(e.msg) - strlen(e.msg) - 1);
		http_error(res, &e);
		return NULL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		http_fail(res, ERR_INVALID, "the body must be a JSON object");
		return NULL;
	}
	return v;
}

void
api_fail_validation(struct http_response *res, const char *message,
		    const struct dsl_errors *errs)
{
	json_t *body = json_pack("{s:{s:s,s:s,s:o}}", "error", "code",
				 err_code_name(ERR_INVALID), "message", message,
				 "details", dsl_errors_json(errs));
	http_json(res, err_http_status(ERR_INVALID), body);
	json_decref(body);
}

bool
api_query_int(struct http_request *req, struct http_response *res,
	      const char *name, long def, long min, long max, long *out)
{
	const char *v = http_query(req, name);
	if (!v) {
		*out = def;
		return true;
	}
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < min || x > max) {
		http_fail(
			res, ERR_INVALID,
			"query argument %s must be a whole number from %ld to %ld",
			name, min, max);
		return false;
	}
	*out = x;
	return true;
}
