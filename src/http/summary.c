#include "http/summary.h"

#include "http/api.h"
#include "store/dashboard_repo.h"

#include <stdlib.h>

static void
answer(struct http_response *res, const char *prefix, char *json,
       const char *suffix)
{
	res->status = 200;
	res->content_type = "application/json";
	sb_reset(&res->body);
	sb_puts(&res->body, prefix);
	sb_puts(&res->body, json);
	sb_puts(&res->body, suffix);
	free(json);
}

void
summary_namespaces(struct http_request *req, struct http_response *res)
{
	struct db *db = api_db(req, res);
	if (!db)
		return;
	struct err e = ERR_INIT;
	char *json;
	if (dashboard_namespaces(db, &json, &e))
		answer(res, "{\"items\":", json, "}");
	else
		http_error(res, &e);
	api_db_release(req, db);
}

void
summary_queues(struct http_request *req, struct http_response *res)
{
	char ns_id[37];
	struct db *db = api_db_ns(req, res, ns_id);
	if (!db)
		return;
	struct err e = ERR_INIT;
	char *json;
	if (dashboard_queues(db, ns_id, http_param(req, "ns"), &json, &e))
		answer(res, "{\"items\":", json, "}");
	else
		http_error(res, &e);
	api_db_release(req, db);
}

void
summary_stats(struct http_request *req, struct http_response *res)
{
	long minutes;
	if (!api_query_int(req, res, "minutes", 60, 1, 1440, &minutes))
		return;
	char ns_id[37];
	struct db *db = api_db_ns(req, res, ns_id);
	if (!db)
		return;
	struct err e = ERR_INIT;
	char *json;
	if (dashboard_stats(db, ns_id, (int)minutes, &json, &e))
		answer(res, "", json, "");
	else
		http_error(res, &e);
	api_db_release(req, db);
}
