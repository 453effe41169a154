/*
 * Unit tests of src/http without a server: http_match on literal paths,
 * {param} binding into the request, and the paths it must refuse (a
 * trailing slash the pattern lacks, an empty parameter segment, more
 * parameters than HTTP_MAX_PARAMS, a path that is only a prefix of the
 * pattern or extends it); the JSON error body, which must stay an error
 * object even when its message quotes bytes that are not UTF-8;
 * http_dispatch: a handler, 405 with Allow, or 404; and the query forms
 * of the Conductor API's workflow search.
 */
#include "http/conductor_workflows.h"
#include "http/http.h"
#include "store/conductor_repo.h"
#include "util/arena.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static struct arena arena;

static void
fresh(struct http_request *req)
{
	memset(req, 0, sizeof(*req));
	req->arena = &arena;
}

static void
teardown(void)
{
	arena_free(&arena);
}

TestSuite(http_match, .fini = teardown);

Test(http_match, literal_paths)
{
	cr_assert(http_match("/healthz", "/healthz", NULL));
	cr_assert(http_match("/", "/", NULL));
	cr_assert(http_match("/v1/ns", "/v1/ns", NULL));
	cr_assert_not(http_match("/healthz", "/readyz", NULL));
	cr_assert_not(http_match("/healthz", "/HEALTHZ", NULL));
	cr_assert_not(http_match("/healthz", "", NULL));
	cr_assert_not(http_match("/", "", NULL));

	struct http_request req;
	fresh(&req);
	cr_assert(http_match("/metrics", "/metrics", &req));
	cr_assert_eq(req.nparams, 0);
}

Test(http_match, binds_parameters)
{
	struct http_request req;
	fresh(&req);
	cr_assert(http_match("/v1/ns/{ns}/workflows/{id}",
			     "/v1/ns/default/workflows/wf-42", &req));
	cr_assert_eq(req.nparams, 2);
	cr_assert_str_eq(req.param_names[0], "ns");
	cr_assert_str_eq(req.param_values[0], "default");
	cr_assert_str_eq(req.param_names[1], "id");
	cr_assert_str_eq(req.param_values[1], "wf-42");
	cr_assert_str_eq(http_param(&req, "ns"), "default");
	cr_assert_str_eq(http_param(&req, "id"), "wf-42");
	cr_assert_null(http_param(&req, "missing"));

	/* A parameter as the last segment, and one of a single character. */
	fresh(&req);
	cr_assert(http_match("/v1/ns/{ns}", "/v1/ns/x", &req));
	cr_assert_eq(req.nparams, 1);
	cr_assert_str_eq(http_param(&req, "ns"), "x");

	/* A value may hold anything but a slash. */
	fresh(&req);
	cr_assert(http_match("/a/{v}/b", "/a/x.y-z_%20~/b", &req));
	cr_assert_str_eq(http_param(&req, "v"), "x.y-z_%20~");

	/* Matching without a request binds nothing and still answers. */
	cr_assert(http_match("/v1/ns/{ns}/workflows/{id}",
			     "/v1/ns/a/workflows/b", NULL));
}

Test(http_match, literal_segments_around_parameters_must_match)
{
	cr_assert_not(http_match("/v1/ns/{ns}/workflows/{id}",
				 "/v1/ns/a/executions/b", NULL));
	cr_assert_not(http_match("/v1/ns/{ns}/workflows/{id}",
				 "/v2/ns/a/workflows/b", NULL));
	/* A parameter never spans a slash. */
	cr_assert_not(http_match("/v1/ns/{ns}", "/v1/ns/a/b", NULL));
}

Test(http_match, trailing_slash_does_not_match)
{
	cr_assert_not(http_match("/healthz", "/healthz/", NULL));
	cr_assert_not(http_match("/healthz/", "/healthz", NULL));
	cr_assert_not(http_match("/v1/ns/{ns}", "/v1/ns/a/", NULL));
	cr_assert_not(http_match("/v1/ns/{ns}/", "/v1/ns/a", NULL));
}

Test(http_match, empty_segment_is_rejected)
{
	cr_assert_not(
		http_match("/v1/ns/{ns}/workflows", "/v1/ns//workflows", NULL));
	cr_assert_not(http_match("/v1/ns/{ns}", "/v1/ns/", NULL));
	cr_assert_not(http_match("/v1/ns/{ns}", "/v1/ns", NULL));

	struct http_request req;
	fresh(&req);
	cr_assert_not(http_match("/a/{x}/b", "/a//b", &req));
	cr_assert_eq(req.nparams, 0);
}

Test(http_match, too_many_parameters)
{
	char pattern[256] = "", path[256] = "";
	/* Exactly HTTP_MAX_PARAMS is fine. */
	for (int i = 0; i < HTTP_MAX_PARAMS; i++) {
		snprintf(pattern + strlen(pattern),
			 sizeof(pattern) - strlen(pattern), "/{p%d}", i);
		snprintf(path + strlen(path), sizeof(path) - strlen(path),
			 "/v%d", i);
	}
	struct http_request req;
	fresh(&req);
	cr_assert(http_match(pattern, path, &req), "%s vs %s", pattern, path);
	cr_assert_eq(req.nparams, HTTP_MAX_PARAMS);
	cr_assert_str_eq(http_param(&req, "p7"), "v7");

	/* One more is refused, with or without a request to bind into. */
	strcat(pattern, "/{extra}");
	strcat(path, "/more");
	cr_assert_not(http_match(pattern, path, NULL));
	fresh(&req);
	cr_assert_not(http_match(pattern, path, &req));
	cr_assert_eq(req.nparams, 0);
}

Test(http_match, prefix_does_not_match)
{
	/* The path is a prefix of the pattern… */
	cr_assert_not(http_match("/healthz", "/health", NULL));
	cr_assert_not(http_match("/v1/ns/{ns}/workflows", "/v1/ns/a", NULL));
	cr_assert_not(
		http_match("/v1/ns/{ns}/workflows", "/v1/ns/a/work", NULL));
	/* …or the pattern is a prefix of the path. */
	cr_assert_not(http_match("/health", "/healthz", NULL));
	cr_assert_not(http_match("/metrics", "/metrics/extra", NULL));
	cr_assert_not(http_match("/v1/ns/{ns}", "/v1/ns/a/workflows", NULL));
	cr_assert_not(http_match("/", "/healthz", NULL));
}

/* ----------------------------------------------------------- error bodies */

static json_t *
body_of(const struct http_response *res)
{
	json_error_t je;
	json_t *v = json_loads(sb_str(&res->body), 0, &je);
	cr_assert_not_null(v, "not JSON (%s): %s", je.text, sb_str(&res->body));
	return v;
}

Test(http_error, body_and_status_come_from_the_code)
{
	struct http_response res = {0};
	http_fail(&res, ERR_NOT_FOUND, "no route for %s %s", "GET", "/x");
	cr_assert_eq(res.status, 404);
	cr_assert_str_eq(res.content_type, "application/json");
	cr_assert_str_eq(sb_str(&res.body),
			 "{\"error\":{\"code\":\"not_found\","
			 "\"message\":\"no route for GET /x\"}}");
	sb_free(&res.body);

	http_fail(&res, ERR_TOO_LARGE, "request body exceeds %d bytes", 2048);
	cr_assert_eq(res.status, 413);
	json_t *v = body_of(&res);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(v, "error"), "code")),
			 "payload_too_large");
	json_decref(v);
	sb_free(&res.body);
}

Test(http_error, message_that_is_not_utf8_still_gives_the_error_body)
{
	/* A path such as /%FF reaches the handler as the byte 0xFF. */
	struct http_response res = {0};
	http_fail(&res, ERR_NOT_FOUND, "no route for GET %s", "/a\xff\xc3(b");
	cr_assert_eq(res.status, 404);
	json_t *v = body_of(&res);
	json_t *e = json_object_get(v, "error");
	cr_assert_not_null(e, "%s", sb_str(&res.body));
	cr_assert_str_eq(json_string_value(json_object_get(e, "code")),
			 "not_found");
	cr_assert_str_eq(json_string_value(json_object_get(e, "message")),
			 "no route for GET /a\xef\xbf\xbd\xef\xbf\xbd(b");
	json_decref(v);
	sb_free(&res.body);

	/* Well-formed UTF-8 is kept as it is. */
	http_fail(&res, ERR_NOT_FOUND, "no route for GET %s", "/caf\xc3\xa9");
	v = body_of(&res);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(v, "error"), "message")),
			 "no route for GET /caf\xc3\xa9");
	json_decref(v);
	sb_free(&res.body);
}

Test(http_error, headers_are_bounded)
{
	struct http_response res = {0};
	for (int i = 0; i < HTTP_MAX_HEADERS + 3; i++)
		http_add_header(&res, "X-N", "v");
	cr_assert_eq(res.nheaders, HTTP_MAX_HEADERS);
	http_text(&res, 200, "text/plain", "hello");
	cr_assert_str_eq(sb_str(&res.body), "hello");
	cr_assert_str_eq(res.content_type, "text/plain");
	sb_free(&res.body);
}

/* ------------------------------------------------ Conductor search query */

Test(conductor_query, accepted_forms)
{
	struct cond_search s = {0};
	json_t *store;
	char msg[400];
	cr_assert(
		cond_parse_query(
			"workflowType = 'flow a' AND status IN (RUNNING, 'FAILED') "
			"and startTime > 1700000000000 AND startTime<1800000000000 "
			"AND correlationId=\"c-1\"",
			&s, &store, msg, sizeof(msg)),
		"%s", msg);
	cr_assert_str_eq(s.workflow_type, "flow a");
	cr_assert_str_eq(s.statuses, "[\"RUNNING\",\"FAILED\"]");
	cr_assert_str_eq(s.start_after_ms, "1700000000000");
	cr_assert_str_eq(s.start_before_ms, "1800000000000");
	cr_assert_str_eq(s.correlation_id, "c-1");
	cr_assert_null(s.workflow_id);
	json_decref(store);

	memset(&s, 0, sizeof(s));
	cr_assert(cond_parse_query("status = COMPLETED", &s, &store, msg,
				   sizeof(msg)));
	cr_assert_str_eq(s.statuses, "[\"COMPLETED\"]");
	json_decref(store);

	memset(&s, 0, sizeof(s));
	cr_assert(cond_parse_query("  ", &s, &store, msg, sizeof(msg)));
	cr_assert_null(s.statuses);
	json_decref(store);
}

Test(conductor_query, refused_forms_name_the_clause)
{
	static const char *const bad[] = {
		"status IN (NOPE)",
		"status IN (RUNNING",
		"workflowType = ",
		"workflowId = 'not-a-uuid'",
		"startTime > soon",
		"owner = 'x'",
		"workflowType = 'x' OR status = RUNNING",
		"workflowType ~ 'x'",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cond_search s = {0};
		json_t *store = NULL;
		char msg[400];
		cr_assert_not(
			cond_parse_query(bad[i], &s, &store, msg, sizeof(msg)),
			"%s was accepted", bad[i]);
		cr_assert_null(store);
		cr_assert(strstr(msg, "query clause"), "%s: %s", bad[i], msg);
	}
}

/* ------------------------------------------------------------ dispatch */

static int handled;

static void
count_handler(struct http_request *req, struct http_response *res)
{
	(void)req;
	handled++;
	res->status = 204;
}

static const struct http_route routes[] = {
	{"GET", "/v1/ns/{ns}/things/{id}", count_handler},
	{"DELETE", "/v1/ns/{ns}/things/{id}", count_handler},
	{"POST", "/v1/ns/{ns}/things", count_handler},
};

Test(http_dispatch, routes_to_a_handler_405_or_404, .fini = teardown)
{
	struct http_request req;
	struct http_response res = {0};
	fresh(&req);
	req.method = "GET";
	req.path = "/v1/ns/a/things/42";
	handled = 0;
	http_dispatch(routes, 3, &req, &res);
	cr_assert_eq(handled, 1);
	cr_assert_eq(res.status, 204);
	cr_assert_str_eq(http_param(&req, "id"), "42");

	/* HEAD is GET without a body. */
	fresh(&req);
	req.method = "HEAD";
	req.path = "/v1/ns/a/things/42";
	http_dispatch(routes, 3, &req, &res);
	cr_assert_eq(handled, 2);

	/* Known path, other method: 405 naming the methods allowed. */
	fresh(&req);
	memset(&res, 0, sizeof(res));
	req.method = "PUT";
	req.path = "/v1/ns/a/things/42";
	http_dispatch(routes, 3, &req, &res);
	cr_assert_eq(handled, 2);
	cr_assert_eq(res.status, 405);
	cr_assert_eq(res.nheaders, 1);
	cr_assert_str_eq(res.header_names[0], "Allow");
	cr_assert_str_eq(res.header_values[0], "GET, DELETE");
	sb_free(&res.body);

	/* Nothing like it: 404 with the JSON error body. */
	fresh(&req);
	memset(&res, 0, sizeof(res));
	req.method = "GET";
	req.path = "/v1/ns/a/things/42/more";
	http_dispatch(routes, 3, &req, &res);
	cr_assert_eq(res.status, 404);
	cr_assert(strstr(sb_str(&res.body), "\"not_found\""), "%s",
		  sb_str(&res.body));
	sb_free(&res.body);
}
