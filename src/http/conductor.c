#include "http/conductor.h"

#include "engine/dsl.h"
#include "http/app.h"
#include "platform/namespaces.h"
#include "store/pool.h"
#include "util/json.h"
#include "util/strbuf.h"
#include "util/utf8.h"
#include "util/uuid.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ACQUIRE_TIMEOUT_MS = 5000, MAX_JSON_DEPTH = 64 };

bool
cond_begin(struct http_request *req, struct http_response *res,
	   struct cond_call *c)
{
	struct app *app = req->app;
	struct err e = ERR_INIT;
	memset(c, 0, sizeof(*c));
	c->ns_name = app->cfg->conductor_namespace;
	c->db = db_pool_acquire(app->pool, ACQUIRE_TIMEOUT_MS, &e);
	if (!c->db) {
		cond_error(res, &e);
		return false;
	}
	if (namespaces_id(c->db, c->ns_name, c->ns_id, &e))
		return true;
	bool created;
	err_clear(&e);
	if (namespaces_ensure(c->db, c->ns_name, &created, c->ns_id, &e))
		return true;
	err_prefix(&e, "the Conductor API's namespace \"%.63s\"", c->ns_name);
	cond_error(res, &e);
	return false;
}

void
cond_end(struct http_request *req, struct cond_call *c)
{
	struct app *app = req->app;
	if (c->db)
		db_pool_release(app->pool, c->db);
	c->db = NULL;
}

/* Invalid UTF-8 (quoted from a request) becomes U+FFFD, or jansson would
 * refuse the string. */
static json_t *
clean_string(const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	for (const char *p = s; *p;) {
		size_t n = utf8_len((const unsigned char *)p);
		if (n) {
			sb_append(&sb, p, n);
			p += n;
		} else {
			sb_puts(&sb, "\xef\xbf\xbd");
			p++;
		}
	}
	json_t *v = json_string(sb_str(&sb));
	sb_free(&sb);
	return v;
}

static json_t *
error_body(enum err_code code, const char *msg)
{
	int status = err_http_status(code);
	return json_pack("{s:i,s:s,s:o,s:b}", "status", status, "code",
			 err_code_name(code), "message", clean_string(msg),
			 "retryable", status == 503 || status == 429);
}

void
cond_error(struct http_response *res, const struct err *e)
{
	cond_json(res, err_http_status(e->code), error_body(e->code, e->msg));
}

void
cond_fail(struct http_response *res, enum err_code code, const char *fmt, ...)
{
	struct err e = ERR_INIT;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	e.code = code;
	cond_error(res, &e);
}

void
cond_fail_validation(struct http_response *res, const char *message,
		     const struct dsl_errors *errs)
{
	/* The message names the first problem, so a client that shows only
	 * the message still says what and where. */
	struct strbuf sb = STRBUF_INIT;
	sb_puts(&sb, message);
	if (errs->n)
		sb_printf(&sb, ": %s %s%s", errs->items[0].path,
			  errs->items[0].message,
			  errs->n > 1 ? " (and more in validationErrors)" : "");
	json_t *body = error_body(ERR_INVALID, sb_str(&sb));
	json_object_set_new(body, "validationErrors", dsl_errors_json(errs));
	cond_json(res, err_http_status(ERR_INVALID), body);
	sb_free(&sb);
}

void
cond_text(struct http_response *res, const char *text)
{
	http_text(res, 200, "text/plain", text);
}

void
cond_no_content(struct http_response *res)
{
	res->status = 204;
	res->content_type = NULL;
	sb_reset(&res->body);
}

void
cond_ok_empty(struct http_response *res)
{
	res->status = 200;
	res->content_type = NULL;
	sb_reset(&res->body);
}

void
cond_json_text(struct http_response *res, char *text)
{
	http_text(res, 200, "application/json", text);
	free(text);
}

void
cond_json(struct http_response *res, int status, json_t *v)
{
	http_json(res, status, v);
	json_decref(v);
}

json_t *
cond_body(struct http_request *req, struct http_response *res, bool *empty)
{
	*empty = false;
	const char *p = req->body;
	while (p < req->body + req->body_len &&
	       (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	if (p == req->body + req->body_len) {
		*empty = true;
		return NULL;
	}
	struct err e = ERR_INIT;
	json_t *v = json_parse(req->body, req->body_len, MAX_JSON_DEPTH, &e);
	if (!v)
		cond_error(res, &e);
	return v;
}

void
cond_drop_nulls(json_t *obj)
{
	const char *key;
	json_t *v;
	void *tmp;
	json_object_foreach_safe(obj, tmp, key, v)
	{
		if (json_is_null(v))
			json_object_del(obj, key);
	}
}

bool
cond_query_long(struct http_request *req, struct http_response *res,
		const char *name, long def, long min, long max, long *out)
{
	const char *v = http_query(req, name);
	if (!v || !*v) {
		*out = def;
		return true;
	}
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < min || x > max) {
		cond_fail(
			res, ERR_INVALID,
			"query argument %s must be a whole number from %ld to "
			"%ld",
			name, min, max);
		return false;
	}
	*out = x;
	return true;
}

bool
cond_query_bool(struct http_request *req, struct http_response *res,
		const char *name, bool def, bool *out)
{
	const char *v = http_query(req, name);
	*out = def;
	if (!v || !*v)
		return true;
	if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) {
		*out = strcmp(v, "true") == 0;
		return true;
	}
	cond_fail(res, ERR_INVALID, "query argument %s must be true or false",
		  name);
	return false;
}

const char *
cond_path_uuid(struct http_request *req, struct http_response *res,
	       const char *name, const char *what)
{
	const char *id = http_param(req, name);
	if (!uuid_valid(id)) {
		cond_fail(res, ERR_NOT_FOUND, "%s %.80s not found", what, id);
		return NULL;
	}
	return id;
}
