#include "http/ops.h"

#include "http/app.h"
#include "platform/health.h"
#include "runtime/metrics.h"

#include <time.h>

void
ops_healthz(struct http_request *req, struct http_response *res)
{
	(void)req;
	json_t *body = json_pack("{s:s}", "status", "ok");
	http_json(res, 200, body);
	json_decref(body);
}

static json_t *
string_list(char **items, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(items[i]));
	return a;
}

void
ops_readyz(struct http_request *req, struct http_response *res)
{
	struct app *app = req->app;
	struct readiness r;
	health_readiness(app->pool, &r);

	json_t *body = json_object();
	json_object_set_new(body, "status",
			    json_string(r.ready ? "ready" : "not_ready"));
	json_t *db = json_object();
	json_object_set_new(db, "ok", json_boolean(r.database_ok));
	if (!r.database_ok)
		json_object_set_new(db, "error", json_string(r.db_error.msg));
	json_object_set_new(body, "database", db);
	if (r.database_ok) {
		json_t *m = json_object();
		json_object_set_new(
			m, "applied",
			json_integer((json_int_t)r.migrations.n_applied));
		json_object_set_new(m, "pending",
				    string_list(r.migrations.pending,
						r.migrations.n_pending));
		json_object_set_new(m, "unknown",
				    string_list(r.migrations.unknown,
						r.migrations.n_unknown));
		json_object_set_new(body, "migrations", m);
	}
	http_json(res, r.ready ? 200 : 503, body);
	json_decref(body);
	health_readiness_free(&r);
}

void
ops_metrics(struct http_request *req, struct http_response *res)
{
	struct app *app = req->app;
	struct strbuf out = STRBUF_INIT;
	sb_printf(
		&out,
		"# HELP nodeflow_build_info Build of this process\n"
		"# TYPE nodeflow_build_info gauge\n"
		"nodeflow_build_info{version=\"%s\"} 1\n"
		"# HELP nodeflow_start_time_seconds When this process started\n"
		"# TYPE nodeflow_start_time_seconds gauge\n"
		"nodeflow_start_time_seconds %lld\n",
		NODEFLOW_VERSION, (long long)app->started_at);
	metrics_render(&out);
	http_text(res, 200, "text/plain; version=0.0.4; charset=utf-8",
		  sb_str(&out));
	sb_free(&out);
}
