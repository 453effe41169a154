/*
 * End-to-end tests of the definitions API (src/http/definitions.c) on the
 * real nodeflow binary over HTTP:
 *
 *   namespaces  PUT creates (201), finds (200), refuses a bad name (400);
 *               definitions of one namespace are invisible from another.
 *   tasks       PUT creates (201) and replaces (200) and answers the stored
 *               definition; every field survives the round trip through
 *               its column; Conductor's defaults; GET, list, DELETE (204,
 *               then 404); the path's name wins and a different body name
 *               is refused.
 *   workflows   POST (201) answers the definition with name, version and
 *               times; 409 on an existing version, 200 with overwrite=true;
 *               the latest and a given version; the listing of the latest
 *               of each name or of all versions; DELETE of a version and of
 *               every version (204, then 404); a worker task without a
 *               registered definition (400 at the task's path, alongside
 *               the document's own problems); an inline taskDefinition.
 *   errors      bad JSON, a body that is not an object, an empty body,
 *               wrong types with their JSON paths, a bad query flag, a bad
 *               version, an unknown namespace (404), an oversized body
 *               (413): each a JSON error body, and after each the
 *               definition tables are exactly as before (raw SQL).
 *
 * Every test gets its own database and server.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* ----------------------------------------------------- per-test fixtures */

TestSuite(namespaces, .fini = e2e_stop);
TestSuite(tasks, .fini = e2e_stop);
TestSuite(workflows, .fini = e2e_stop);
TestSuite(errors, .fini = e2e_stop);

/* SIGTERM: a clean exit, which under the sanitizers also means no leak in
 * any handler the test ran. */
static void
stop(void)
{
	int rc = e2e_server_stop(0);
	cr_assert_eq(rc, 0, "the server exited with %d:\n%s", rc, e2e_log());
}

/* ---------------------------------------------------------- HTTP helpers */

static long long
int_at(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	cr_assert(json_is_integer(v), "\"%s\" is not an integer: %s", key,
		  e2e_last_body);
	return json_integer_value(v);
}

/* An error answer: status, the error code, and (for 400 validation errors)
 * the details. Returns the "error" object (a new reference). */
static json_t *
error_of(const char *method, const char *path, const char *body, long status,
	 const char *code)
{
	json_t *v = e2e_call(method, path, body, status);
	cr_assert_not_null(v, "an error needs a body");
	json_t *e = json_object_get(v, "error");
	cr_assert(json_is_object(e), "no error object: %s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(e, "code"), code, "%s", e2e_last_body);
	cr_assert_gt(strlen(e2e_str_at(e, "message")), 0);
	json_incref(e);
	json_decref(v);
	return e;
}

static void
expect_error(const char *method, const char *path, const char *body,
	     long status, const char *code)
{
	json_decref(error_of(method, path, body, status, code));
}

/* Whether the details of a validation error hold path with a message
 * containing text. */
static bool
has_detail(const json_t *e, const char *path, const char *text)
{
	const json_t *details = json_object_get(e, "details");
	size_t i;
	const json_t *d;
	json_array_foreach (details, i, d) {
		const char *p = json_string_value(json_object_get(d, "path"));
		const char *m =
			json_string_value(json_object_get(d, "message"));
		if (p && m && strcmp(p, path) == 0 && strstr(m, text))
			return true;
	}
	return false;
}

static size_t
n_details(const json_t *e)
{
	const json_t *details = json_object_get(e, "details");
	cr_assert(json_is_array(details), "no details: %s", e2e_last_body);
	return json_array_size(details);
}

/* A 400 with exactly one detail, at path, containing text. */
static void
expect_invalid(const char *method, const char *path, const char *body,
	       const char *at, const char *text)
{
	json_t *e = error_of(method, path, body, 400, "invalid_argument");
	cr_assert_eq(n_details(e), 1, "%s", e2e_last_body);
	cr_assert(has_detail(e, at, text), "no detail at %s with \"%s\": %s",
		  at, text, e2e_last_body);
	json_decref(e);
}

/* ------------------------------------------------------------ SQL state */

/* A digest of every row of the definition tables (and namespaces). */
static char *
tables_digest(void)
{
	return th_value(
		e2e_sql(),
		"SELECT md5(coalesce((SELECT string_agg(x::text, ','"
		" ORDER BY x.\"id\") FROM \"Namespaces\" x), '') || '|' ||"
		" coalesce((SELECT string_agg(x::text, ',' ORDER BY x.\"id\")"
		" FROM \"TaskDefinitions\" x), '') || '|' ||"
		" coalesce((SELECT string_agg(x::text, ',' ORDER BY"
		" x.\"namespaceId\", x.\"name\", x.\"version\")"
		" FROM \"WorkflowDefinitions\" x), ''))",
		0, NULL);
}

static long long
count_of(const char *table)
{
	char q[256];
	snprintf(q, sizeof(q), "SELECT count(*) FROM \"%s\"", table);
	return th_int(e2e_sql(), q, 0, NULL);
}

#define assert_unchanged(before)                                           \
	do {                                                               \
		char *now_ = tables_digest();                              \
		cr_assert_str_eq(now_, (before),                           \
				 "a rejected request changed the tables"); \
		free(now_);                                                \
	} while (0)

/* --------------------------------------------------------------- fixtures */

static const char simple_wf[] =
	"{\"name\":\"order\",\"tasks\":[{\"name\":\"charge\","
	"\"taskReferenceName\":\"charge1\",\"inputParameters\":"
	"{\"amount\":\"${workflow.input.amount}\"}}],"
	"\"outputParameters\":{\"receipt\":\"${charge1.output.receipt}\"}}";

static void
register_task(const char *ns, const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/v1/ns/%s/task-definitions/%s", ns, name);
	e2e_call_ok("PUT", path, "{}", 201);
}

/* ------------------------------------------------------------ namespaces */

Test(namespaces, put_creates_then_finds)
{
	e2e_start(NULL);
	json_t *v = e2e_call("PUT", "/v1/namespaces/team-a.prod_1", NULL, 201);
	cr_assert_str_eq(e2e_str_at(v, "name"), "team-a.prod_1");
	json_decref(v);
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"Namespaces\" WHERE"
			    " \"name\" = 'team-a.prod_1'",
			    0, NULL),
		     1);
	v = e2e_call("PUT", "/v1/namespaces/team-a.prod_1", NULL, 200);
	cr_assert_str_eq(e2e_str_at(v, "name"), "team-a.prod_1");
	json_decref(v);
	/* The migration's own. */
	e2e_call_ok("PUT", "/v1/namespaces/default", NULL, 200);
	cr_assert_eq(count_of("Namespaces"), 2);
	stop();
}

Test(namespaces, bad_names_are_refused)
{
	e2e_start(NULL);
	char *before = tables_digest();
	expect_error("PUT", "/v1/namespaces/a*b", NULL, 400,
		     "invalid_argument");
	expect_error("PUT", "/v1/namespaces/a%20b", NULL, 400,
		     "invalid_argument");
	char path[128] = "/v1/namespaces/";
	for (int i = 0; i < 64; i++)
		strcat(path, "n");
	expect_error("PUT", path, NULL, 400, "invalid_argument");
	assert_unchanged(before);
	free(before);
	/* 63 is fine. */
	path[strlen(path) - 1] = '\0';
	e2e_call_ok("PUT", path, NULL, 201);
	stop();
}

Test(namespaces, isolate_definitions)
{
	e2e_start(NULL);
	e2e_call_ok("PUT", "/v1/namespaces/other", NULL, 201);
	register_task("other", "charge");
	e2e_call_ok("POST", "/v1/ns/other/workflow-definitions", simple_wf,
		    201);

	expect_error("GET", "/v1/ns/default/task-definitions/charge", NULL, 404,
		     "not_found");
	expect_error("GET", "/v1/ns/default/workflow-definitions/order", NULL,
		     404, "not_found");
	json_t *v =
		e2e_call("GET", "/v1/ns/default/task-definitions", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(v, "items")), 0);
	json_decref(v);
	/* In default the task is not registered. */
	json_t *e = error_of("POST", "/v1/ns/default/workflow-definitions",
			     simple_wf, 400, "invalid_argument");
	cr_assert(has_detail(e, "$.tasks[0]",
			     "task definition charge is not registered"),
		  "%s", e2e_last_body);
	json_decref(e);
	/* The same name may live in both. */
	register_task("default", "charge");
	e2e_call_ok("POST", "/v1/ns/default/workflow-definitions", simple_wf,
		    201);
	cr_assert_eq(count_of("WorkflowDefinitions"), 2);
	stop();
}

/* ----------------------------------------------------------------- tasks */

static const char full_task_def[] =
	"{\"name\":\"charge\",\"description\":\"charges a card\","
	"\"retryCount\":5,\"retryLogic\":\"EXPONENTIAL_BACKOFF\","
	"\"retryDelaySeconds\":2,\"backoffScaleFactor\":3,"
	"\"maxRetryDelaySeconds\":120,\"backoffJitterMs\":250,"
	"\"timeoutSeconds\":600,\"timeoutPolicy\":\"RETRY\","
	"\"responseTimeoutSeconds\":300,\"pollTimeoutSeconds\":30,"
	"\"totalTimeoutSeconds\":3600,\"concurrentExecLimit\":10,"
	"\"rateLimitPerFrequency\":100,\"rateLimitFrequencyInSeconds\":60,"
	"\"inputKeys\":[\"card\",\"amount\"],\"outputKeys\":[\"receipt\"],"
	"\"inputTemplate\":{\"currency\":\"EUR\",\"n\":[1,{\"a\":null}]},"
	"\"ownerEmail\":\"pay@example.com\","
	"\"secretOutputFields\":[\"token\",\"pan\"],"
	"\"isolationGroupId\":\"iso\",\"executionNameSpace\":\"ens\","
	"\"semaphore\":\"cards\","
	"\"cacheConfig\":{\"key\":\"${card}\",\"ttlInSecond\":60},"
	"\"inputSchema\":{\"name\":\"in\",\"version\":1},"
	"\"outputSchema\":{\"name\":\"out\",\"version\":2},"
	"\"enforceSchema\":true}";

Test(tasks, every_field_round_trips)
{
	e2e_start(NULL);
	json_t *v = e2e_call("PUT", "/v1/ns/default/task-definitions/charge",
			     full_task_def, 201);
	json_t *want = json_loads(full_task_def, 0, NULL);
	cr_assert_gt(int_at(v, "createTime"), 1700000000000LL);
	cr_assert_gt(int_at(v, "updateTime"), 1700000000000LL);
	json_object_del(v, "createTime");
	json_object_del(v, "updateTime");
	cr_assert(json_equal(v, want), "answered %s", e2e_last_body);
	json_decref(v);

	/* Read back from the columns, on another request. */
	v = e2e_call("GET", "/v1/ns/default/task-definitions/charge", NULL,
		     200);
	json_object_del(v, "createTime");
	json_object_del(v, "updateTime");
	cr_assert(json_equal(v, want), "read back %s", e2e_last_body);
	json_decref(v);
	json_decref(want);

	/* And each value is in its column. */
	char *row = th_value(
		e2e_sql(),
		"SELECT concat_ws('|', \"description\", \"retryCount\","
		" \"retryLogic\", \"retryDelaySeconds\","
		" \"backoffScaleFactor\", \"maxRetryDelaySeconds\","
		" \"backoffJitterMs\", \"timeoutSeconds\", \"timeoutPolicy\","
		" \"responseTimeoutSeconds\", \"pollTimeoutSeconds\","
		" \"totalTimeoutSeconds\", \"concurrentExecLimit\","
		" \"rateLimitPerFrequency\", \"rateLimitFrequencyInSeconds\","
		" \"inputKeys\", \"outputKeys\", \"inputTemplate\","
		" \"ownerEmail\", \"secretOutputFields\","
		" \"isolationGroupId\", \"executionNameSpace\", \"semaphore\","
		" \"cacheConfig\", \"inputSchema\", \"outputSchema\","
		" \"enforceSchema\")"
		" FROM \"TaskDefinitions\" WHERE \"name\" = 'charge'",
		0, NULL);
	cr_assert_str_eq(
		row,
		"charges a card|5|EXPONENTIAL_BACKOFF|2|3|120|250|600|RETRY|"
		"300|30|3600|10|100|60|{card,amount}|{receipt}|"
		"{\"n\": [1, {\"a\": null}], \"currency\": \"EUR\"}|"
		"pay@example.com|{token,pan}|iso|ens|cards|"
		"{\"key\": \"${card}\", \"ttlInSecond\": 60}|"
		"{\"name\": \"in\", \"version\": 1}|"
		"{\"name\": \"out\", \"version\": 2}|t");
	free(row);
	stop();
}

Test(tasks, defaults_and_replace)
{
	e2e_start(NULL);
	/* An empty object takes its name from the path, the rest from
	 * Conductor's defaults. */
	json_t *v = e2e_call("PUT", "/v1/ns/default/task-definitions/greet",
			     "{}", 201);
	cr_assert_str_eq(e2e_str_at(v, "name"), "greet");
	cr_assert_eq(int_at(v, "retryCount"), 3);
	cr_assert_str_eq(e2e_str_at(v, "retryLogic"), "FIXED");
	cr_assert_eq(int_at(v, "retryDelaySeconds"), 60);
	cr_assert_eq(int_at(v, "backoffScaleFactor"), 1);
	cr_assert_eq(int_at(v, "timeoutSeconds"), 0);
	cr_assert_str_eq(e2e_str_at(v, "timeoutPolicy"), "TIME_OUT_WF");
	cr_assert_eq(int_at(v, "responseTimeoutSeconds"), 3600);
	cr_assert_null(json_object_get(v, "pollTimeoutSeconds"));
	cr_assert_null(json_object_get(v, "concurrentExecLimit"));
	cr_assert_null(json_object_get(v, "description"));
	cr_assert(json_is_false(json_object_get(v, "enforceSchema")));
	long long created = int_at(v, "createTime");
	json_decref(v);
	cr_assert(
		th_int(e2e_sql(),
		       "SELECT count(*) FROM \"TaskDefinitions\" WHERE"
		       " \"name\" = 'greet' AND \"pollTimeoutSeconds\" IS NULL"
		       " AND \"concurrentExecLimit\" IS NULL",
		       0, NULL) == 1);

	/* Replaced: 200, the new values, the same row and creation time. */
	char *id = th_value(e2e_sql(),
			    "SELECT \"id\"::text FROM \"TaskDefinitions\"", 0,
			    NULL);
	v = e2e_call(
		"PUT", "/v1/ns/default/task-definitions/greet",
		"{\"name\":\"greet\",\"retryCount\":0,\"description\":\"hi\"}",
		200);
	cr_assert_eq(int_at(v, "retryCount"), 0);
	cr_assert_str_eq(e2e_str_at(v, "description"), "hi");
	cr_assert_eq(int_at(v, "createTime"), created);
	cr_assert_geq(int_at(v, "updateTime"), created);
	json_decref(v);
	char *id2 = th_value(e2e_sql(),
			     "SELECT \"id\"::text FROM \"TaskDefinitions\"", 0,
			     NULL);
	cr_assert_str_eq(id, id2);
	free(id);
	free(id2);
	cr_assert_eq(count_of("TaskDefinitions"), 1);

	/* A replacement without a field resets it to its default. */
	v = e2e_call("PUT", "/v1/ns/default/task-definitions/greet", "{}", 200);
	cr_assert_eq(int_at(v, "retryCount"), 3);
	cr_assert_null(json_object_get(v, "description"));
	json_decref(v);
	stop();
}

Test(tasks, get_list_delete)
{
	e2e_start(NULL);
	register_task("default", "b");
	register_task("default", "a");
	register_task("default", "c");
	json_t *v =
		e2e_call("GET", "/v1/ns/default/task-definitions", NULL, 200);
	json_t *items = json_object_get(v, "items");
	cr_assert_eq(json_array_size(items), 3);
	cr_assert_str_eq(e2e_str_at(json_array_get(items, 0), "name"), "a");
	cr_assert_str_eq(e2e_str_at(json_array_get(items, 1), "name"), "b");
	cr_assert_str_eq(e2e_str_at(json_array_get(items, 2), "name"), "c");
	json_decref(v);

	v = e2e_call("GET", "/v1/ns/default/task-definitions/b", NULL, 200);
	cr_assert_str_eq(e2e_str_at(v, "name"), "b");
	json_decref(v);

	struct th_response r;
	th_http(e2e_server(), "DELETE", "/v1/ns/default/task-definitions/b",
		NULL, 0, &r);
	cr_assert_eq(r.status, 204, "%s", r.body);
	cr_assert_eq(r.body_len, 0);
	cr_assert_str_eq(r.content_type, "", "a bare 204");
	th_response_free(&r);

	expect_error("GET", "/v1/ns/default/task-definitions/b", NULL, 404,
		     "not_found");
	expect_error("DELETE", "/v1/ns/default/task-definitions/b", NULL, 404,
		     "not_found");
	cr_assert_eq(count_of("TaskDefinitions"), 2);
	stop();
}

Test(tasks, the_path_names_the_definition)
{
	e2e_start(NULL);
	/* The same name in the body is fine. */
	e2e_call_ok("PUT", "/v1/ns/default/task-definitions/a",
		    "{\"name\":\"a\"}", 201);
	char *before = tables_digest();
	expect_invalid("PUT", "/v1/ns/default/task-definitions/a",
		       "{\"name\":\"b\",\"retryCount\":1}", "$.name",
		       "must be the name in the path, \"a\"");
	expect_invalid("PUT", "/v1/ns/default/task-definitions/a",
		       "{\"name\":7}", "$.name",
		       "must be the name in the path");
	assert_unchanged(before);
	free(before);
	stop();
}

Test(tasks, invalid_definitions_are_400_with_paths)
{
	e2e_start(NULL);
	register_task("default", "keep");
	char *before = tables_digest();
	const char *p = "/v1/ns/default/task-definitions/t";
	expect_invalid("PUT", p, "{\"retryCount\":\"3\"}", "$.retryCount",
		       "must be a whole number");
	expect_invalid("PUT", p, "{\"retryCount\":-1}", "$.retryCount",
		       "must not be negative");
	expect_invalid("PUT", p, "{\"retryLogic\":\"SOMETIMES\"}",
		       "$.retryLogic", "unknown value \"SOMETIMES\"");
	expect_invalid("PUT", p, "{\"timeoutPolicy\":1}", "$.timeoutPolicy",
		       "must be a string");
	expect_invalid("PUT", p, "{\"backoffScaleFactor\":0}",
		       "$.backoffScaleFactor", "must be at least 1");
	expect_invalid("PUT", p, "{\"responseTimeoutSeconds\":0}",
		       "$.responseTimeoutSeconds", "must be at least 1");
	/* What the table's CHECK would refuse is a 400 with a path, never a
	 * database error. */
	expect_invalid("PUT", p,
		       "{\"timeoutSeconds\":10,\"responseTimeoutSeconds\":20}",
		       "$.responseTimeoutSeconds",
		       "must not exceed timeoutSeconds (10)");
	expect_invalid("PUT", p, "{\"pollTimeoutSeconds\":2147483648}",
		       "$.pollTimeoutSeconds", "must be at most 2147483647");
	expect_invalid("PUT", p, "{\"inputKeys\":[\"a\",2]}", "$.inputKeys[1]",
		       "must be a string");
	expect_invalid("PUT", p, "{\"inputTemplate\":\"x\"}", "$.inputTemplate",
		       "must be an object");
	expect_invalid("PUT", p, "{\"enforceSchema\":\"true\"}",
		       "$.enforceSchema", "must be a boolean");
	expect_invalid("PUT", p, "{\"description\":\"a\\u0000b\"}",
		       "$.description", "must not contain NUL");
	expect_invalid("PUT", p, "{\"cacheConfig\":{}}", "$.cacheConfig.key",
		       "is required");

	/* Every problem in one answer. */
	json_t *e = error_of("PUT", p,
			     "{\"retryCount\":-1,\"timeoutSeconds\":\"x\","
			     "\"secretOutputFields\":{}}",
			     400, "invalid_argument");
	cr_assert_eq(n_details(e), 3, "%s", e2e_last_body);
	cr_assert(has_detail(e, "$.retryCount", "must not be negative"));
	cr_assert(has_detail(e, "$.timeoutSeconds", "must be a whole number"));
	cr_assert(has_detail(e, "$.secretOutputFields", "must be an array"));
	json_decref(e);

	/* Replacing with something invalid keeps the old definition. */
	expect_invalid("PUT", "/v1/ns/default/task-definitions/keep",
		       "{\"retryCount\":-1}", "$.retryCount",
		       "must not be negative");
	assert_unchanged(before);
	free(before);
	stop();
}

/* ------------------------------------------------------------- workflows */

Test(workflows, create_conflict_overwrite)
{
	e2e_start(NULL);
	register_task("default", "charge");
	json_t *v = e2e_call("POST", "/v1/ns/default/workflow-definitions",
			     simple_wf, 201);
	cr_assert_str_eq(e2e_str_at(v, "name"), "order");
	cr_assert_eq(int_at(v, "version"), 1);
	cr_assert_gt(int_at(v, "createTime"), 1700000000000LL);
	cr_assert_gt(int_at(v, "updateTime"), 1700000000000LL);
	cr_assert_eq(json_array_size(json_object_get(v, "tasks")), 1);
	cr_assert(json_is_object(json_object_get(v, "outputParameters")));
	json_decref(v);
	char *stored = th_value(e2e_sql(),
				"SELECT \"definition\"->>'version' FROM"
				" \"WorkflowDefinitions\" WHERE \"name\" ="
				" 'order'",
				0, NULL);
	cr_assert_str_eq(stored, "1", "the version is made explicit");
	free(stored);

	/* The same version again: 409, nothing changed. */
	char *before = tables_digest();
	expect_error("POST", "/v1/ns/default/workflow-definitions", simple_wf,
		     409, "conflict");
	expect_error("POST",
		     "/v1/ns/default/workflow-definitions?overwrite=false",
		     simple_wf, 409, "conflict");
	assert_unchanged(before);
	free(before);

	/* overwrite=true replaces it: 200. */
	const char *changed =
		"{\"name\":\"order\",\"version\":1,\"description\":\"new\","
		"\"tasks\":[{\"name\":\"charge\",\"taskReferenceName\":"
		"\"c\"}]}";
	v = e2e_call("POST",
		     "/v1/ns/default/workflow-definitions?overwrite=true",
		     changed, 200);
	cr_assert_str_eq(e2e_str_at(v, "description"), "new");
	json_decref(v);
	cr_assert_eq(count_of("WorkflowDefinitions"), 1);
	char *desc = th_value(e2e_sql(),
			      "SELECT \"description\" FROM"
			      " \"WorkflowDefinitions\"",
			      0, NULL);
	cr_assert_str_eq(desc, "new");
	free(desc);

	/* overwrite=true on a new version creates it: 201. */
	e2e_call_ok("POST",
		    "/v1/ns/default/workflow-definitions?overwrite=true",
		    "{\"name\":\"order\",\"version\":5,\"tasks\":[{\"name\":"
		    "\"charge\",\"taskReferenceName\":\"c\"}]}",
		    201);
	cr_assert_eq(count_of("WorkflowDefinitions"), 2);
	stop();
}

Test(workflows, versions_listing_and_delete)
{
	e2e_start(NULL);
	register_task("default", "charge");
#define WF_FMT                                                             \
	"{\"name\":\"%s\",\"version\":%d,\"tasks\":[{\"name\":\"charge\"," \
	"\"taskReferenceName\":\"c\"}]}"
	char body[256];
	const struct {
		const char *name;
		int version;
	} defs[] = {{"b", 1}, {"a", 2}, {"a", 10}, {"a", 1}, {"b", 3}};
	for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
		snprintf(body, sizeof(body), WF_FMT, defs[i].name,
			 defs[i].version);
		e2e_call_ok("POST", "/v1/ns/default/workflow-definitions", body,
			    201);
	}

	json_t *v = e2e_call("GET", "/v1/ns/default/workflow-definitions/a",
			     NULL, 200);
	cr_assert_eq(int_at(v, "version"), 10, "the latest, by number");
	json_decref(v);
	v = e2e_call("GET", "/v1/ns/default/workflow-definitions/a/versions/2",
		     NULL, 200);
	cr_assert_eq(int_at(v, "version"), 2);
	cr_assert_str_eq(e2e_str_at(v, "name"), "a");
	json_decref(v);
	expect_error("GET", "/v1/ns/default/workflow-definitions/a/versions/3",
		     NULL, 404, "not_found");
	expect_error("GET", "/v1/ns/default/workflow-definitions/zz", NULL, 404,
		     "not_found");

	/* The latest of each name, by name. */
	v = e2e_call("GET", "/v1/ns/default/workflow-definitions", NULL, 200);
	json_t *items = json_object_get(v, "items");
	cr_assert_eq(json_array_size(items), 2, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(json_array_get(items, 0), "name"), "a");
	cr_assert_eq(int_at(json_array_get(items, 0), "version"), 10);
	cr_assert_str_eq(e2e_str_at(json_array_get(items, 1), "name"), "b");
	cr_assert_eq(int_at(json_array_get(items, 1), "version"), 3);
	json_decref(v);
	/* Every version. */
	v = e2e_call("GET",
		     "/v1/ns/default/workflow-definitions?allVersions=true",
		     NULL, 200);
	items = json_object_get(v, "items");
	cr_assert_eq(json_array_size(items), 5, "%s", e2e_last_body);
	const int order[] = {1, 2, 10, 1, 3};
	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(int_at(json_array_get(items, i), "version"),
			     order[i]);
	json_decref(v);
	v = e2e_call("GET",
		     "/v1/ns/default/workflow-definitions?allVersions=false",
		     NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(v, "items")), 2);
	json_decref(v);

	/* Delete one version: the latest falls back. */
	e2e_call_ok("DELETE",
		    "/v1/ns/default/workflow-definitions/a/versions/10", NULL,
		    204);
	expect_error("DELETE",
		     "/v1/ns/default/workflow-definitions/a/versions/10", NULL,
		     404, "not_found");
	v = e2e_call("GET", "/v1/ns/default/workflow-definitions/a", NULL, 200);
	cr_assert_eq(int_at(v, "version"), 2);
	json_decref(v);
	/* Delete every version of a name. */
	e2e_call_ok("DELETE", "/v1/ns/default/workflow-definitions/a", NULL,
		    204);
	expect_error("DELETE", "/v1/ns/default/workflow-definitions/a", NULL,
		     404, "not_found");
	expect_error("GET", "/v1/ns/default/workflow-definitions/a", NULL, 404,
		     "not_found");
	cr_assert_eq(count_of("WorkflowDefinitions"), 2);
	stop();
}

Test(workflows, worker_tasks_need_registered_definitions)
{
	e2e_start(NULL);
	char *before = tables_digest();
	json_t *e = error_of("POST", "/v1/ns/default/workflow-definitions",
			     simple_wf, 400, "invalid_argument");
	cr_assert_eq(n_details(e), 1, "%s", e2e_last_body);
	cr_assert(has_detail(e, "$.tasks[0]",
			     "task definition charge is not registered"),
		  "%s", e2e_last_body);
	json_decref(e);

	/* Alongside the document's own problems, in one answer. */
	e = error_of("POST", "/v1/ns/default/workflow-definitions",
		     "{\"name\":\"w\",\"version\":0,\"tasks\":["
		     "{\"name\":\"x\",\"taskReferenceName\":\"x1\"},"
		     "{\"name\":\"y\",\"taskReferenceName\":\"y1\","
		     "\"inputParameters\":{\"a\":\"${ghost.output}\"}},"
		     "{\"name\":\"z\",\"taskReferenceName\":\"x1\","
		     "\"taskDefinition\":{}}]}",
		     400, "invalid_argument");
	cr_assert(has_detail(e, "$.version", "must be at least 1"), "%s",
		  e2e_last_body);
	cr_assert(has_detail(e, "$.tasks[0]",
			     "task definition x is not registered"),
		  "%s", e2e_last_body);
	cr_assert(has_detail(e, "$.tasks[1]",
			     "task definition y is not registered"),
		  "%s", e2e_last_body);
	cr_assert(has_detail(e, "$.tasks[1].inputParameters",
			     "refers to task ghost, which is not in this "
			     "workflow"),
		  "%s", e2e_last_body);
	cr_assert(has_detail(e, "$.tasks[2].taskReferenceName",
			     "first used at $.tasks[0]"),
		  "%s", e2e_last_body);
	cr_assert_eq(n_details(e), 5, "%s", e2e_last_body);
	json_decref(e);
	assert_unchanged(before);
	free(before);

	/* An inline definition needs no registration. */
	e2e_call_ok("POST", "/v1/ns/default/workflow-definitions",
		    "{\"name\":\"inline\",\"tasks\":[{\"name\":\"adhoc\","
		    "\"taskReferenceName\":\"a\",\"taskDefinition\":{"
		    "\"retryCount\":0}}]}",
		    201);
	cr_assert_eq(count_of("TaskDefinitions"), 0);
	stop();
}

Test(workflows, invalid_definitions_are_400_with_paths)
{
	e2e_start(NULL);
	register_task("default", "charge");
	char *before = tables_digest();
	const char *p = "/v1/ns/default/workflow-definitions";
	expect_invalid("POST", p,
		       "{\"tasks\":[{\"name\":\"charge\","
		       "\"taskReferenceName\":\"c\"}]}",
		       "$.name", "is required");
	expect_invalid("POST", p, "{\"name\":\"w\"}", "$.tasks", "is required");
	expect_invalid("POST", p, "{\"name\":\"w\",\"tasks\":[]}", "$.tasks",
		       "must not be empty");
	expect_invalid("POST", p, "{\"name\":\"w\",\"tasks\":\"t\"}", "$.tasks",
		       "must be an array");
	expect_invalid("POST", p,
		       "{\"name\":\"w\",\"tasks\":[{\"name\":\"charge\","
		       "\"taskReferenceName\":\"c\",\"type\":\"TELEPORT\"}]}",
		       "$.tasks[0].type", "unknown task type TELEPORT");
	expect_invalid("POST", p,
		       "{\"name\":\"w\",\"schemaVersion\":1,\"tasks\":[{"
		       "\"name\":\"charge\",\"taskReferenceName\":\"c\"}]}",
		       "$.schemaVersion", "must be 2");
	expect_invalid("POST", p,
		       "{\"name\":\"w\",\"tasks\":[{\"name\":\"charge\","
		       "\"taskReferenceName\":\"c\",\"startDelay\":\"1\"}]}",
		       "$.tasks[0].startDelay", "must be a whole number");
	expect_invalid("POST", p,
		       "{\"name\":\"w\",\"tasks\":[{\"name\":\"charge\","
		       "\"taskReferenceName\":\"c\",\"taskDefinition\":{"
		       "\"retryCount\":-2}}]}",
		       "$.tasks[0].taskDefinition.retryCount",
		       "must not be negative");
	expect_invalid("POST", p,
		       "{\"name\":\"w\",\"tasks\":[{\"name\":\"charge\","
		       "\"taskReferenceName\":\"c\"},{\"name\":\"charge\","
		       "\"taskReferenceName\":\"c\"}]}",
		       "$.tasks[1].taskReferenceName",
		       "duplicate taskReferenceName \"c\": first used at "
		       "$.tasks[0]");
	expect_invalid("POST", p,
		       "{\"name\":\"w\",\"tasks\":[{\"name\":\"charge\","
		       "\"taskReferenceName\":\"c\"}],\"outputParameters\":{"
		       "\"x\":\"${workflow.input.a\"}}",
		       "$.outputParameters.x", "unterminated");
	expect_invalid("POST", p,
		       "{\"name\":\"w\",\"timeoutPolicy\":\"RETRY\",\"tasks\":"
		       "[{\"name\":\"charge\",\"taskReferenceName\":\"c\"}]}",
		       "$.timeoutPolicy", "must be one of TIME_OUT_WF");
	assert_unchanged(before);
	free(before);
	stop();
}

/* ---------------------------------------------------------------- errors */

Test(errors, bad_bodies)
{
	e2e_start(NULL);
	register_task("default", "keep");
	char *before = tables_digest();
	const char *paths[][2] = {
		{"PUT", "/v1/ns/default/task-definitions/t"},
		{"POST", "/v1/ns/default/workflow-definitions"},
	};
	for (size_t i = 0; i < 2; i++) {
		const char *m = paths[i][0], *p = paths[i][1];
		json_t *e = error_of(m, p, "{\"name\":", 400, "bad_json");
		cr_assert(strstr(e2e_str_at(e, "message"), "line 1"), "%s",
			  e2e_last_body);
		json_decref(e);
		expect_error(m, p, "{\"a\":1} x", 400, "bad_json");
		expect_error(m, p, "[1,2]", 400, "invalid_argument");
		expect_error(m, p, "\"s\"", 400, "invalid_argument");
		/* An empty body is no definition. */
		struct th_response r;
		th_http(e2e_server(), m, p, NULL, 0, &r);
		cr_assert_eq(r.status, 400, "%s %s: %s", m, p, r.body);
		th_response_free(&r);
	}
	assert_unchanged(before);
	free(before);
	stop();
}

Test(errors, unknown_namespace_is_404)
{
	e2e_start(NULL);
	register_task("default", "charge");
	char *before = tables_digest();
	expect_error("PUT", "/v1/ns/nope/task-definitions/charge", "{}", 404,
		     "not_found");
	expect_error("GET", "/v1/ns/nope/task-definitions/charge", NULL, 404,
		     "not_found");
	expect_error("GET", "/v1/ns/nope/task-definitions", NULL, 404,
		     "not_found");
	expect_error("DELETE", "/v1/ns/nope/task-definitions/charge", NULL, 404,
		     "not_found");
	expect_error("POST", "/v1/ns/nope/workflow-definitions", simple_wf, 404,
		     "not_found");
	expect_error("GET", "/v1/ns/nope/workflow-definitions", NULL, 404,
		     "not_found");
	expect_error("GET", "/v1/ns/nope/workflow-definitions/order", NULL, 404,
		     "not_found");
	expect_error("GET", "/v1/ns/nope/workflow-definitions/order/versions/1",
		     NULL, 404, "not_found");
	expect_error("DELETE", "/v1/ns/nope/workflow-definitions/order", NULL,
		     404, "not_found");
	expect_error("DELETE",
		     "/v1/ns/nope/workflow-definitions/order/versions/1", NULL,
		     404, "not_found");
	/* The namespace is looked at before the body. */
	expect_error("PUT", "/v1/ns/nope/task-definitions/charge", "{bad", 404,
		     "not_found");
	expect_error("POST", "/v1/ns/nope/workflow-definitions",
		     "{\"retryCount\":-1}", 404, "not_found");
	/* A name that could never be a namespace is just as unknown. */
	expect_error("GET", "/v1/ns/a*b/task-definitions", NULL, 404,
		     "not_found");
	assert_unchanged(before);
	free(before);
	stop();
}

Test(errors, bad_query_and_version)
{
	e2e_start(NULL);
	register_task("default", "charge");
	char *before = tables_digest();
	json_t *e = error_of(
		"POST", "/v1/ns/default/workflow-definitions?overwrite=yes",
		simple_wf, 400, "invalid_argument");
	cr_assert(strstr(e2e_str_at(e, "message"), "overwrite"), "%s",
		  e2e_last_body);
	json_decref(e);
	expect_error("GET", "/v1/ns/default/workflow-definitions?allVersions=1",
		     NULL, 400, "invalid_argument");
	const char *versions[] = {"0", "-1", "x", "1x", "2147483648"};
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		char path[128];
		snprintf(path, sizeof(path),
			 "/v1/ns/default/workflow-definitions/order/versions/"
			 "%s",
			 versions[i]);
		expect_error("GET", path, NULL, 400, "invalid_argument");
		expect_error("DELETE", path, NULL, 400, "invalid_argument");
	}
	/* Methods the routes do not have. */
	expect_error("POST", "/v1/ns/default/task-definitions/charge", "{}",
		     405, "method_not_allowed");
	expect_error("PUT", "/v1/ns/default/workflow-definitions", "{}", 405,
		     "method_not_allowed");
	assert_unchanged(before);
	free(before);
	stop();
}

Test(errors, oversized_body_is_413)
{
	const char *flags[] = {"--max-body-bytes", "1024", NULL};
	e2e_start(flags);
	register_task("default", "charge");
	char *before = tables_digest();
	size_t n = 4096;
	char *big = malloc(n + 64);
	snprintf(big, n + 64, "{\"name\":\"t\",\"description\":\"%0*d\"}",
		 (int)n, 0);
	expect_error("PUT", "/v1/ns/default/task-definitions/t", big, 413,
		     "payload_too_large");
	expect_error("POST", "/v1/ns/default/workflow-definitions", big, 413,
		     "payload_too_large");
	free(big);
	assert_unchanged(before);
	free(before);
	/* A small one still goes through. */
	e2e_call_ok("PUT", "/v1/ns/default/task-definitions/t", "{}", 201);
	stop();
}
