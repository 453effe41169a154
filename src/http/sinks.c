#include "http/sinks.h"

#include "engine/dsl.h"
#include "engine/relay.h"
#include "http/api.h"
#include "store/outbox_repo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEAD_PAGE = 50, DEAD_PAGE_MAX = 500, REPLAY_MAX_IDS = 10000 };

/* The body's "name" (or "workflowName") may repeat the path's, not
 * contradict it. */
static void
check_name(const json_t *body, const char *member, const char *name,
	   struct dsl_errors *errs)
{
	const json_t *given = json_object_get(body, member);
	if (given && !json_is_null(given) &&
	    (!json_is_string(given) ||
	     strcmp(json_string_value(given), name) != 0))
		dsl_errors_add(
			errs, member[0] == 'n' ? "$.name" : "$.workflowName",
			"must be the name in the path, \"%.200s\"", name);
}

/* The reads and deletes of sinks and listeners share one shape: the
 * namespace, one repository call under the path's name, its answer. */
typedef bool (*get_fn)(struct db *, const char *, const char *, json_t **,
		       struct err *);
typedef bool (*list_fn)(struct db *, const char *, json_t **, struct err *);
typedef bool (*delete_fn)(struct db *, const char *, const char *,
			  struct err *);

static void
answer_get(struct http_request *req, struct http_response *res, get_fn get,
	   const char *param)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	json_t *out;
	if (get(db, ns, http_param(req, param), &out, &e))
		api_reply(res, 200, out);
	else
		http_error(res, &e);
	api_db_release(req, db);
}

static void
answer_list(struct http_request *req, struct http_response *res, list_fn list)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	json_t *items;
	if (list(db, ns, &items, &e))
		api_reply(res, 200, json_pack("{s:o}", "items", items));
	else
		http_error(res, &e);
	api_db_release(req, db);
}

static void
answer_delete(struct http_request *req, struct http_response *res,
	      delete_fn del, const char *param)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	if (del(db, ns, http_param(req, param), &e))
		api_no_content(res);
	else
		http_error(res, &e);
	api_db_release(req, db);
}

/* -------------------------------------------------------------- sinks */

void
sinks_put(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct dsl_errors errs = {0};
	json_t *body = NULL, *config = NULL, *out = NULL;
	char *secret = NULL;
	const char *name = http_param(req, "name");
	const char *kind;
	bool created;
	body = api_body_object(req, res, false);
	if (!body)
		goto out;
	check_name(body, "name", name, &errs);
	if (!relay_sink_body(body, &kind, &config, &secret, &errs) || errs.n) {
		api_fail_validation(res, "invalid sink", &errs);
		goto out;
	}
	if (!outbox_sink_put(db, ns, name, kind, config, secret, &created,
			     &e) ||
	    !outbox_sink_get(db, ns, name, &out, &e)) {
		http_error(res, &e);
		goto out;
	}
	api_reply(res, created ? 201 : 200, out);
out:
	api_db_release(req, db);
	dsl_errors_free(&errs);
	json_decref(body);
	json_decref(config);
	free(secret);
}

void
sinks_get(struct http_request *req, struct http_response *res)
{
	answer_get(req, res, outbox_sink_get, "name");
}

void
sinks_list(struct http_request *req, struct http_response *res)
{
	answer_list(req, res, outbox_sink_list);
}

void
sinks_delete(struct http_request *req, struct http_response *res)
{
	answer_delete(req, res, outbox_sink_delete, "name");
}

/* --------------------------------------------------- status listeners */

void
sinks_listener_put(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct dsl_errors errs = {0};
	json_t *body = NULL, *wt = NULL, *tt = NULL, *types = NULL;
	json_t *out = NULL;
	const char *name = http_param(req, "workflowName");
	bool created;
	body = api_body_object(req, res, false);
	if (!body)
		goto out;
	check_name(body, "workflowName", name, &errs);
	if (!relay_listener_body(body, &wt, &tt, &types, &errs) || errs.n) {
		api_fail_validation(res, "invalid status listener", &errs);
		goto out;
	}
	const char *sink = json_string_value(json_object_get(body, "sink"));
	json_t *found = NULL;
	if (!outbox_sink_get(db, ns, sink, &found, &e)) {
		if (e.code != ERR_NOT_FOUND) {
			http_error(res, &e);
			goto out;
		}
		dsl_errors_add(&errs, "$.sink",
			       "no sink named \"%.200s\" in this namespace",
			       sink);
		api_fail_validation(res, "invalid status listener", &errs);
		goto out;
	}
	json_decref(found);
	if (!outbox_listener_put(db, ns, name, sink, wt, tt, types, &created,
				 &e) ||
	    !outbox_listener_get(db, ns, name, &out, &e)) {
		http_error(res, &e);
		goto out;
	}
	api_reply(res, created ? 201 : 200, out);
out:
	api_db_release(req, db);
	dsl_errors_free(&errs);
	json_decref(body);
	json_decref(wt);
	json_decref(tt);
	json_decref(types);
}

void
sinks_listener_get(struct http_request *req, struct http_response *res)
{
	answer_get(req, res, outbox_listener_get, "workflowName");
}

void
sinks_listener_list(struct http_request *req, struct http_response *res)
{
	answer_list(req, res, outbox_listener_list);
}

void
sinks_listener_delete(struct http_request *req, struct http_response *res)
{
	answer_delete(req, res, outbox_listener_delete, "workflowName");
}

/* -------------------------------------------------------- dead letter */

/* A positive whole number of at most 18 digits. */
static bool
id_text(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 18)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

void
sinks_dead_list(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	long limit;
	const char *cursor = http_query(req, "cursor");
	if (cursor && !cursor[0])
		cursor = NULL;
	if (!api_query_int(req, res, "limit", DEAD_PAGE, 1, DEAD_PAGE_MAX,
			   &limit))
		goto out;
	if (cursor && !id_text(cursor)) {
		http_fail(res, ERR_INVALID,
			  "cursor: \"%.40s\" is not a cursor this list gave",
			  cursor);
		goto out;
	}
	json_t *items;
	bool more;
	if (!outbox_dead_list(db, ns, cursor, (int)limit, &items, &more, &e)) {
		http_error(res, &e);
		goto out;
	}
	json_t *next = json_null();
	if (more) {
		char buf[32];
		json_t *last =
			json_array_get(items, json_array_size(items) - 1);
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(last, "id")));
		json_decref(next);
		next = json_string(buf);
	}
	api_reply(res, 200,
		  json_pack("{s:o,s:o}", "items", items, "nextCursor", next));
out:
	api_db_release(req, db);
}

void
sinks_dead_replay(struct http_request *req, struct http_response *res)
{
	char ns[37];
	struct db *db = api_db_ns(req, res, ns);
	if (!db)
		return;
	struct err e = ERR_INIT;
	struct dsl_errors errs = {0};
	json_t *body = NULL, *ids = json_array();
	body = api_body_object(req, res, false);
	if (!body)
		goto out;
	const json_t *all = json_object_get(body, "all");
	const json_t *given = json_object_get(body, "ids");
	if (all && !json_is_boolean(all))
		dsl_errors_add(&errs, "$.all", "must be true or false");
	bool everything = json_is_true(all);
	if (given && !json_is_array(given)) {
		dsl_errors_add(&errs, "$.ids", "must be an array of event ids");
	} else if (given) {
		if (json_array_size(given) > REPLAY_MAX_IDS)
			dsl_errors_add(&errs, "$.ids", "at most %d ids at once",
				       REPLAY_MAX_IDS);
		size_t i;
		json_t *v;
		json_array_foreach (given, i, v) {
			if (json_is_integer(v) && json_integer_value(v) > 0)
				json_array_append(ids, v);
			else if (json_is_string(v) &&
				 id_text(json_string_value(v)))
				json_array_append_new(
					ids, json_integer(strtoll(
						     json_string_value(v), NULL,
						     10)));
			else
				dsl_errors_add(&errs, "$.ids",
					       "[%zu]: not an event id", i);
		}
	}
	if (!errs.n && !everything && !given)
		dsl_errors_add(&errs, "$",
			       "name the events: {\"ids\":[…]} or "
			       "{\"all\":true}");
	if (errs.n) {
		api_fail_validation(res, "invalid replay", &errs);
		goto out;
	}
	long long n;
	if (!outbox_dead_replay(db, ns, everything, ids, &n, &e)) {
		http_error(res, &e);
		goto out;
	}
	api_reply(res, 200, json_pack("{s:I}", "replayed", (json_int_t)n));
out:
	api_db_release(req, db);
	dsl_errors_free(&errs);
	json_decref(body);
	json_decref(ids);
}
