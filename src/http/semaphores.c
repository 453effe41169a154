#include "http/semaphores.h"

#include "engine/workers.h"
#include "http/api.h"
#include "http/fields.h"
#include "store/semaphores_repo.h"
#include "util/strbuf.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_NAME = 200, MAX_PERMITS = 1000000 };

/* The {name} parameter; answers 400 naming the path when it is no usable
 * semaphore name. */
static const char *
name_param(struct http_request *req, struct http_response *res)
{
	const char *name = http_param(req, "name");
	json_t *valid = name ? json_string(name) : NULL; /* UTF-8 check */
	const char *why = NULL;
	if (!valid)
		why = "must be valid UTF-8";
	else if (!name[0])
		why = "must not be empty";
	else if (strlen(name) > MAX_NAME)
		why = "must be at most 200 bytes";
	else
		for (const unsigned char *p = (const unsigned char *)name; *p;
		     p++)
			if (*p < 0x20 || *p == 0x7f)
				why = "must not contain control characters";
	json_decref(valid);
	if (why) {
		struct dsl_errors errs = {0};
		dsl_errors_add(&errs, "path.name", "%s", why);
		api_fail_validation(res, "invalid semaphore name", &errs);
		dsl_errors_free(&errs);
		return NULL;
	}
	return name;
}

void
semaphores_put_handler(struct http_request *req, struct http_response *res)
{
	const char *name = name_param(req, res);
	if (!name)
		return;
	json_t *body = api_body_object(req, res, false);
	if (!body)
		return;
	struct dsl_errors errs = {0};
	if (!json_object_get(body, "permits"))
		dsl_errors_add(&errs, "$.permits", "is required");
	long permits = field_int(body, "permits", 0, 0, MAX_PERMITS, &errs);
	const json_t *given = json_object_get(body, "name");
	if (given && !json_is_null(given) &&
	    !(json_is_string(given) &&
	      strcmp(json_string_value(given), name) == 0))
		dsl_errors_add(&errs, "$.name",
			       "must be the name in the path, \"%.200s\"",
			       name);
	json_decref(body);
	if (errs.n) {
		api_fail_validation(res, "invalid semaphore", &errs);
		dsl_errors_free(&errs);
		return;
	}
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	bool created;
	char *json = NULL;
	if (semaphores_put(db, ns, name, (int)permits, &created, &e) &&
	    semaphores_get(db, ns, name, workers_semaphore_default_permits(),
			   &json, &e))
		api_reply_text(res, created ? 201 : 200, json);
	else
		http_error(res, &e);
	free(json);
	api_db_release(req, db);
}

void
semaphores_list_handler(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	char *json = NULL;
	if (semaphores_list(db, ns, workers_semaphore_default_permits(), &json,
			    &e)) {
		struct strbuf sb = STRBUF_INIT;
		sb_printf(&sb, "{\"items\":%s}", json);
		api_reply_text(res, 200, sb_str(&sb));
		sb_free(&sb);
	} else {
		http_error(res, &e);
	}
	free(json);
	api_db_release(req, db);
}

void
semaphores_get_handler(struct http_request *req, struct http_response *res)
{
	const char *name = name_param(req, res);
	if (!name)
		return;
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	char *json = NULL;
	if (semaphores_get(db, ns, name, workers_semaphore_default_permits(),
			   &json, &e))
		api_reply_text(res, 200, json);
	else
		http_error(res, &e);
	free(json);
	api_db_release(req, db);
}

void
semaphores_delete_handler(struct http_request *req, struct http_response *res)
{
	const char *name = name_param(req, res);
	if (!name)
		return;
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	if (semaphores_delete(db, ns, name, &e))
		api_no_content(res);
	else
		http_error(res, &e);
	api_db_release(req, db);
}
