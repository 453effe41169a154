/*
 * Unit tests of src/engine/dsl without a database:
 *
 *   task_def   Conductor's defaults; every field parsed and rendered back;
 *              null read as absent; each kind of violation (missing, wrong
 *              type, not whole, negative, too large, unknown enum value,
 *              responseTimeoutSeconds beyond timeoutSeconds, NUL in a
 *              string, bad array items, a bad cacheConfig) at its exact
 *              JSON path, all of them in one pass.
 *   workflow   defaults; tasks' paths, indexes, lists and kinds; required
 *              fields; wrong types; unknown task types; schemaVersion;
 *              inline task definitions (errors under their path, no
 *              registration needed); duplicate reference names (top level);
 *              expressions (syntax errors, references to tasks that are not
 *              in the definition, refs_used); required_task_defs;
 *              dsl_find_task; dsl_error_missing_task_def; the partial
 *              parse; the errors' JSON, valid UTF-8 even when a quoted name
 *              is cut inside a character.
 *   operators  nested lists (decisionCases, defaultCase, forkTasks,
 *              loopOver) with their owner, case and paths; each operator's
 *              own fields checked at their paths; one reference namespace
 *              across nested lists; whether the definition can start a
 *              child workflow.
 */
#include "engine/dsl.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

static json_t *
doc(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	cr_assert_not_null(v, "test JSON does not parse: %s: %s", je.text,
			   text);
	return v;
}

static char *
dump_errors(const struct dsl_errors *errs)
{
	static char buf[8192];
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < errs->n && used < sizeof(buf) - 1; i++)
		used += (size_t)snprintf(buf + used, sizeof(buf) - used,
					 "\n  %s: %s", errs->items[i].path,
					 errs->items[i].message);
	return buf;
}

/* Whether errs holds an error at exactly path whose message contains
 * text. */
static bool
has_error(const struct dsl_errors *errs, const char *path, const char *text)
{
	for (size_t i = 0; i < errs->n; i++)
		if (strcmp(errs->items[i].path, path) == 0 &&
		    strstr(errs->items[i].message, text))
			return true;
	return false;
}

#define assert_error(errs, path, text)                                   \
	cr_assert(has_error((errs), (path), (text)),                     \
		  "no error at %s containing \"%s\"; errors:%s", (path), \
		  (text), dump_errors(errs))

/* Parses a TaskDef that must be rejected with exactly one error, at path,
 * whose message contains text. */
static void
task_def_rejects(const char *text, const char *path, const char *message)
{
	json_t *v = doc(text);
	struct dsl_errors errs = {0};
	struct task_def d;
	cr_assert_not(dsl_task_def_parse(v, &d, &errs), "accepted: %s", text);
	cr_assert_eq(errs.n, 1, "%s: %zu errors:%s", text, errs.n,
		     dump_errors(&errs));
	assert_error(&errs, path, message);
	task_def_free(&d);
	dsl_errors_free(&errs);
	json_decref(v);
}

static void
task_def_accepts(const char *text, struct task_def *d)
{
	json_t *v = doc(text);
	struct dsl_errors errs = {0};
	cr_assert(dsl_task_def_parse(v, d, &errs), "%s rejected:%s", text,
		  dump_errors(&errs));
	cr_assert_eq(errs.n, 0);
	json_decref(v);
}

/* Parses a workflow that must be valid. */
static struct wf_def *
workflow_ok(const char *text)
{
	json_t *v = doc(text);
	struct dsl_errors errs = {0};
	struct wf_def *def = NULL;
	cr_assert(dsl_workflow_parse(v, &def, &errs), "%s rejected:%s", text,
		  dump_errors(&errs));
	cr_assert_not_null(def);
	json_decref(v);
	return def;
}

/* Parses a workflow that must be invalid; the caller frees errs. */
static void
workflow_bad(const char *text, struct dsl_errors *errs)
{
	json_t *v = doc(text);
	struct wf_def *def = (struct wf_def *)1;
	cr_assert_not(dsl_workflow_parse(v, &def, errs), "accepted: %s", text);
	cr_assert_null(def, "*out must be NULL on failure");
	cr_assert_gt(errs->n, 0);
	json_decref(v);
}

/* An invalid workflow with exactly one error. */
static void
workflow_rejects(const char *text, const char *path, const char *message)
{
	struct dsl_errors errs = {0};
	workflow_bad(text, &errs);
	cr_assert_eq(errs.n, 1, "%s: %zu errors:%s", text, errs.n,
		     dump_errors(&errs));
	assert_error(&errs, path, message);
	dsl_errors_free(&errs);
}

/* A one-task workflow around the given task members. */
static char *
one_task(const char *members)
{
	static char buf[4096];
	snprintf(buf, sizeof(buf),
		 "{\"name\":\"wf\",\"tasks\":[{\"name\":\"t\","
		 "\"taskReferenceName\":\"t1\"%s%s}]}",
		 *members ? "," : "", members);
	return buf;
}

/* ------------------------------------------------------------ task_def */

Test(task_def, defaults_are_conductors)
{
	struct task_def d;
	task_def_accepts("{\"name\":\"t\"}", &d);
	cr_assert_str_eq(d.name, "t");
	cr_assert_null(d.description);
	cr_assert_eq(d.retry_count, 3);
	cr_assert_eq(d.retry_logic, RETRY_FIXED);
	cr_assert_eq(d.retry_delay_seconds, 60);
	cr_assert_eq(d.backoff_scale_factor, 1);
	cr_assert_eq(d.max_retry_delay_seconds, 0);
	cr_assert_eq(d.backoff_jitter_ms, 0);
	cr_assert_eq(d.timeout_seconds, 0);
	cr_assert_eq(d.timeout_policy, TIMEOUT_TIME_OUT_WF);
	cr_assert_eq(d.response_timeout_seconds, 3600);
	cr_assert_eq(d.poll_timeout_seconds, -1);
	cr_assert_eq(d.total_timeout_seconds, 0);
	cr_assert_eq(d.concurrent_exec_limit, -1);
	cr_assert_eq(d.rate_limit_per_frequency, -1);
	cr_assert_eq(d.rate_limit_frequency_seconds, -1);
	cr_assert(json_is_array(d.input_keys) &&
		  json_array_size(d.input_keys) == 0);
	cr_assert(json_is_array(d.output_keys) &&
		  json_array_size(d.output_keys) == 0);
	cr_assert(json_is_object(d.input_template) &&
		  json_object_size(d.input_template) == 0);
	cr_assert(json_is_array(d.secret_output_fields) &&
		  json_array_size(d.secret_output_fields) == 0);
	cr_assert_null(d.owner_email);
	cr_assert_null(d.isolation_group_id);
	cr_assert_null(d.execution_name_space);
	cr_assert_null(d.semaphore);
	cr_assert_null(d.cache_config);
	cr_assert_null(d.input_schema);
	cr_assert_null(d.output_schema);
	cr_assert_not(d.enforce_schema);

	/* task_def_init alone gives the same. */
	struct task_def i;
	task_def_init(&i);
	json_t *a = dsl_task_def_json(&i);
	free(i.name);
	i.name = strdup("t");
	json_t *b = dsl_task_def_json(&d);
	json_object_del(a, "name");
	json_object_del(b, "name");
	cr_assert(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	task_def_free(&i);
	task_def_free(&d);
}

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
	"\"inputTemplate\":{\"currency\":\"EUR\"},"
	"\"ownerEmail\":\"pay@example.com\","
	"\"secretOutputFields\":[\"token\"],\"isolationGroupId\":\"iso\","
	"\"executionNameSpace\":\"ens\",\"semaphore\":\"cards\","
	"\"cacheConfig\":{\"key\":\"${card}\",\"ttlInSecond\":60},"
	"\"inputSchema\":{\"name\":\"in\",\"version\":1},"
	"\"outputSchema\":{\"name\":\"out\",\"version\":2},"
	"\"enforceSchema\":true}";

Test(task_def, every_field_is_parsed_and_rendered_back)
{
	struct task_def d;
	task_def_accepts(full_task_def, &d);
	cr_assert_str_eq(d.name, "charge");
	cr_assert_str_eq(d.description, "charges a card");
	cr_assert_eq(d.retry_count, 5);
	cr_assert_eq(d.retry_logic, RETRY_EXPONENTIAL_BACKOFF);
	cr_assert_eq(d.retry_delay_seconds, 2);
	cr_assert_eq(d.backoff_scale_factor, 3);
	cr_assert_eq(d.max_retry_delay_seconds, 120);
	cr_assert_eq(d.backoff_jitter_ms, 250);
	cr_assert_eq(d.timeout_seconds, 600);
	cr_assert_eq(d.timeout_policy, TIMEOUT_RETRY);
	cr_assert_eq(d.response_timeout_seconds, 300);
	cr_assert_eq(d.poll_timeout_seconds, 30);
	cr_assert_eq(d.total_timeout_seconds, 3600);
	cr_assert_eq(d.concurrent_exec_limit, 10);
	cr_assert_eq(d.rate_limit_per_frequency, 100);
	cr_assert_eq(d.rate_limit_frequency_seconds, 60);
	cr_assert_eq(json_array_size(d.input_keys), 2);
	cr_assert_str_eq(json_string_value(json_array_get(d.output_keys, 0)),
			 "receipt");
	cr_assert_str_eq(json_string_value(
				 json_object_get(d.input_template, "currency")),
			 "EUR");
	cr_assert_str_eq(d.owner_email, "pay@example.com");
	cr_assert_str_eq(
		json_string_value(json_array_get(d.secret_output_fields, 0)),
		"token");
	cr_assert_str_eq(d.isolation_group_id, "iso");
	cr_assert_str_eq(d.execution_name_space, "ens");
	cr_assert_str_eq(d.semaphore, "cards");
	cr_assert_not_null(d.cache_config);
	cr_assert_not_null(d.input_schema);
	cr_assert_not_null(d.output_schema);
	cr_assert(d.enforce_schema);

	/* Rendered back, it is the document it came from. */
	json_t *want = doc(full_task_def);
	json_t *got = dsl_task_def_json(&d);
	char *g = json_dumps(got, JSON_SORT_KEYS);
	cr_assert(json_equal(want, got), "rendered: %s", g);
	free(g);
	json_decref(want);
	json_decref(got);
	task_def_free(&d);
}

Test(task_def, renders_times_as_epoch_milliseconds)
{
	struct task_def d;
	task_def_accepts("{\"name\":\"t\"}", &d);
	d.created_at = strdup("2026-01-02T03:04:05.678Z");
	d.updated_at = strdup("1970-01-01T00:00:01.000Z");
	json_t *v = dsl_task_def_json(&d);
	cr_assert_eq(json_integer_value(json_object_get(v, "createTime")),
		     1767323045678LL);
	cr_assert_eq(json_integer_value(json_object_get(v, "updateTime")),
		     1000);
	json_decref(v);
	task_def_free(&d);

	/* Without them (never stored), no times. */
	task_def_accepts("{\"name\":\"t\"}", &d);
	v = dsl_task_def_json(&d);
	cr_assert_null(json_object_get(v, "createTime"));
	cr_assert_null(json_object_get(v, "updateTime"));
	json_decref(v);
	task_def_free(&d);
}

Test(task_def, null_is_absent)
{
	struct task_def d;
	task_def_accepts(
		"{\"name\":\"t\",\"description\":null,\"retryCount\":null,"
		"\"retryLogic\":null,\"timeoutPolicy\":null,"
		"\"pollTimeoutSeconds\":null,\"inputKeys\":null,"
		"\"inputTemplate\":null,\"cacheConfig\":null,"
		"\"enforceSchema\":null,\"ownerEmail\":null}",
		&d);
	cr_assert_null(d.description);
	cr_assert_eq(d.retry_count, 3);
	cr_assert_eq(d.retry_logic, RETRY_FIXED);
	cr_assert_eq(d.timeout_policy, TIMEOUT_TIME_OUT_WF);
	cr_assert_eq(d.poll_timeout_seconds, -1);
	cr_assert_eq(json_array_size(d.input_keys), 0);
	cr_assert_null(d.cache_config);
	cr_assert_null(d.owner_email);
	task_def_free(&d);
}

Test(task_def, unknown_fields_are_ignored)
{
	struct task_def d;
	task_def_accepts("{\"name\":\"t\",\"ownerApp\":\"x\",\"createdBy\":7,"
			 "\"tags\":[{}]}",
			 &d);
	task_def_free(&d);
}

Test(task_def, whole_reals_are_numbers_and_zero_limits_are_none)
{
	struct task_def d;
	task_def_accepts("{\"name\":\"t\",\"retryCount\":2.0,"
			 "\"concurrentExecLimit\":0,"
			 "\"rateLimitPerFrequency\":0,"
			 "\"rateLimitFrequencyInSeconds\":1}",
			 &d);
	cr_assert_eq(d.retry_count, 2);
	/* Conductor reads 0 as "no limit" (the SDK's helper sends it). */
	cr_assert_eq(d.concurrent_exec_limit, -1);
	cr_assert_eq(d.rate_limit_per_frequency, -1);
	cr_assert_eq(d.rate_limit_frequency_seconds, 1);
	task_def_free(&d);
}

Test(task_def, name_is_required_and_a_non_empty_string)
{
	task_def_rejects("{}", "$.name", "is required");
	task_def_rejects("{\"name\":null}", "$.name", "is required");
	task_def_rejects("{\"name\":7}", "$.name", "must be a string");
	task_def_rejects("{\"name\":\"\"}", "$.name", "must not be empty");
	task_def_rejects("{\"name\":\"a\\u0000b\"}", "$.name",
			 "must not contain NUL");
}

Test(task_def, not_an_object)
{
	task_def_rejects("[]", "$", "must be an object");
	task_def_rejects("\"t\"", "$", "must be an object");
}

Test(task_def, numbers_are_checked_at_their_paths)
{
	task_def_rejects("{\"name\":\"t\",\"retryCount\":-1}", "$.retryCount",
			 "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"retryCount\":\"3\"}",
			 "$.retryCount", "must be a whole number");
	task_def_rejects("{\"name\":\"t\",\"retryCount\":1.5}", "$.retryCount",
			 "must be a whole number");
	task_def_rejects("{\"name\":\"t\",\"retryCount\":true}", "$.retryCount",
			 "must be a whole number");
	task_def_rejects("{\"name\":\"t\",\"retryCount\":2147483648}",
			 "$.retryCount", "must be at most 2147483647");
	task_def_rejects("{\"name\":\"t\",\"retryDelaySeconds\":-5}",
			 "$.retryDelaySeconds", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"backoffScaleFactor\":0}",
			 "$.backoffScaleFactor", "must be at least 1");
	task_def_rejects("{\"name\":\"t\",\"maxRetryDelaySeconds\":-1}",
			 "$.maxRetryDelaySeconds", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"backoffJitterMs\":-1}",
			 "$.backoffJitterMs", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"timeoutSeconds\":-1}",
			 "$.timeoutSeconds", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"responseTimeoutSeconds\":0}",
			 "$.responseTimeoutSeconds", "must be at least 1");
	task_def_rejects("{\"name\":\"t\",\"pollTimeoutSeconds\":-1}",
			 "$.pollTimeoutSeconds", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"totalTimeoutSeconds\":-1}",
			 "$.totalTimeoutSeconds", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"concurrentExecLimit\":-1}",
			 "$.concurrentExecLimit", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"rateLimitPerFrequency\":-2}",
			 "$.rateLimitPerFrequency", "must not be negative");
	task_def_rejects("{\"name\":\"t\",\"rateLimitFrequencyInSeconds\":-1}",
			 "$.rateLimitFrequencyInSeconds",
			 "must not be negative");
	/* The BIGINT budgets take more than an int. */
	struct task_def d;
	task_def_accepts("{\"name\":\"t\",\"timeoutSeconds\":5000000000,"
			 "\"totalTimeoutSeconds\":6000000000}",
			 &d);
	cr_assert_eq(d.timeout_seconds, 5000000000LL);
	cr_assert_eq(d.total_timeout_seconds, 6000000000LL);
	task_def_free(&d);
}

Test(task_def, enums_must_be_known)
{
	task_def_rejects("{\"name\":\"t\",\"retryLogic\":\"RANDOM\"}",
			 "$.retryLogic",
			 "must be one of FIXED, EXPONENTIAL_BACKOFF, "
			 "LINEAR_BACKOFF");
	task_def_rejects("{\"name\":\"t\",\"retryLogic\":\"fixed\"}",
			 "$.retryLogic", "unknown value \"fixed\"");
	task_def_rejects("{\"name\":\"t\",\"retryLogic\":1}", "$.retryLogic",
			 "must be a string");
	task_def_rejects("{\"name\":\"t\",\"timeoutPolicy\":\"IGNORE\"}",
			 "$.timeoutPolicy",
			 "must be one of RETRY, TIME_OUT_WF, ALERT_ONLY");
	struct task_def d;
	task_def_accepts("{\"name\":\"t\",\"retryLogic\":\"LINEAR_BACKOFF\","
			 "\"timeoutPolicy\":\"ALERT_ONLY\"}",
			 &d);
	cr_assert_eq(d.retry_logic, RETRY_LINEAR_BACKOFF);
	cr_assert_eq(d.timeout_policy, TIMEOUT_ALERT_ONLY);
	task_def_free(&d);
}

Test(task_def, response_timeout_within_timeout)
{
	task_def_rejects("{\"name\":\"t\",\"timeoutSeconds\":60,"
			 "\"responseTimeoutSeconds\":61}",
			 "$.responseTimeoutSeconds",
			 "must not exceed timeoutSeconds (60)");
	/* The default response timeout (3600) counts too, as in Conductor. */
	task_def_rejects("{\"name\":\"t\",\"timeoutSeconds\":60}",
			 "$.responseTimeoutSeconds",
			 "3600 must not exceed timeoutSeconds (60)");
	struct task_def d;
	task_def_accepts("{\"name\":\"t\",\"timeoutSeconds\":60,"
			 "\"responseTimeoutSeconds\":60}",
			 &d);
	task_def_free(&d);
	/* No timeout: any response timeout. */
	task_def_accepts("{\"name\":\"t\",\"timeoutSeconds\":0,"
			 "\"responseTimeoutSeconds\":99999}",
			 &d);
	task_def_free(&d);
}

Test(task_def, arrays_objects_and_booleans)
{
	task_def_rejects("{\"name\":\"t\",\"inputKeys\":\"a\"}", "$.inputKeys",
			 "must be an array of strings");
	task_def_rejects("{\"name\":\"t\",\"inputKeys\":[\"a\",1]}",
			 "$.inputKeys[1]", "must be a string");
	task_def_rejects("{\"name\":\"t\",\"outputKeys\":[null]}",
			 "$.outputKeys[0]", "must be a string");
	task_def_rejects(
		"{\"name\":\"t\",\"secretOutputFields\":[\"\\u0000\"]}",
		"$.secretOutputFields[0]", "must not contain NUL");
	task_def_rejects("{\"name\":\"t\",\"inputTemplate\":[]}",
			 "$.inputTemplate", "must be an object");
	task_def_rejects("{\"name\":\"t\",\"inputSchema\":\"s\"}",
			 "$.inputSchema", "must be an object");
	task_def_rejects("{\"name\":\"t\",\"outputSchema\":1}",
			 "$.outputSchema", "must be an object");
	task_def_rejects("{\"name\":\"t\",\"enforceSchema\":\"yes\"}",
			 "$.enforceSchema", "must be a boolean");
	task_def_rejects("{\"name\":\"t\",\"description\":[]}", "$.description",
			 "must be a string");
	task_def_rejects("{\"name\":\"t\",\"ownerEmail\":1}", "$.ownerEmail",
			 "must be a string");
	task_def_rejects("{\"name\":\"t\",\"isolationGroupId\":{}}",
			 "$.isolationGroupId", "must be a string");
	task_def_rejects("{\"name\":\"t\",\"executionNameSpace\":false}",
			 "$.executionNameSpace", "must be a string");
	task_def_rejects("{\"name\":\"t\",\"semaphore\":\"\"}", "$.semaphore",
			 "must not be empty");
}

Test(task_def, cache_config)
{
	task_def_rejects("{\"name\":\"t\",\"cacheConfig\":true}",
			 "$.cacheConfig", "must be an object");
	task_def_rejects("{\"name\":\"t\",\"cacheConfig\":{\"ttlInSecond\":5}}",
			 "$.cacheConfig.key", "is required");
	task_def_rejects("{\"name\":\"t\",\"cacheConfig\":{\"key\":\"k\","
			 "\"ttlInSecond\":-5}}",
			 "$.cacheConfig.ttlInSecond", "must not be negative");
}

Test(task_def, every_problem_in_one_pass)
{
	json_t *v = doc("{\"retryCount\":-1,\"retryLogic\":\"X\","
			"\"timeoutSeconds\":\"a\",\"inputKeys\":[1,2],"
			"\"enforceSchema\":0}");
	struct dsl_errors errs = {0};
	struct task_def d;
	cr_assert_not(dsl_task_def_parse(v, &d, &errs));
	cr_assert_eq(errs.n, 7, "%zu errors:%s", errs.n, dump_errors(&errs));
	assert_error(&errs, "$.name", "is required");
	assert_error(&errs, "$.retryCount", "must not be negative");
	assert_error(&errs, "$.retryLogic", "unknown value");
	assert_error(&errs, "$.timeoutSeconds", "must be a whole number");
	assert_error(&errs, "$.inputKeys[0]", "must be a string");
	assert_error(&errs, "$.inputKeys[1]", "must be a string");
	assert_error(&errs, "$.enforceSchema", "must be a boolean");
	task_def_free(&d);
	dsl_errors_free(&errs);
	json_decref(v);
}

/* ------------------------------------------------------------- workflow */

Test(workflow, minimal_definition_and_defaults)
{
	struct wf_def *def = workflow_ok(
		"{\"name\":\"wf\",\"tasks\":[{\"name\":\"a\","
		"\"taskReferenceName\":\"a1\"},{\"name\":\"b\","
		"\"taskReferenceName\":\"b1\",\"type\":\"SIMPLE\"}]}");
	cr_assert_str_eq(def->name, "wf");
	cr_assert_eq(def->version, 1);
	cr_assert_null(def->description);
	cr_assert(json_is_array(def->input_parameters));
	cr_assert_null(def->output_parameters);
	cr_assert(json_is_object(def->input_template) &&
		  json_object_size(def->input_template) == 0);
	cr_assert(json_is_object(def->variables) &&
		  json_object_size(def->variables) == 0);
	cr_assert_null(def->failure_workflow);
	cr_assert_eq(def->failure_workflow_version, 0);
	cr_assert_eq(def->timeout_seconds, 0);
	cr_assert_eq(def->timeout_policy, TIMEOUT_ALERT_ONLY);
	cr_assert(def->restartable);
	cr_assert_null(def->owner_email);
	cr_assert_not_null(def->raw);
	cr_assert_eq(def->n_refs_used, 0);

	cr_assert_eq(def->tasks.n, 2);
	for (size_t i = 0; i < 2; i++) {
		const struct wf_task *t = &def->tasks.items[i];
		char path[32];
		snprintf(path, sizeof(path), "$.tasks[%zu]", i);
		cr_assert_str_eq(t->path, path);
		cr_assert_eq(t->index, i);
		cr_assert_eq(t->list, &def->tasks);
		cr_assert_str_eq(t->type, "SIMPLE");
		cr_assert_not_null(t->kind);
		cr_assert_str_eq(t->kind->type, "SIMPLE");
		cr_assert(json_is_object(t->input_parameters));
		cr_assert_not(t->optional);
		cr_assert_not(t->async_complete);
		cr_assert_eq(t->start_delay_seconds, 0);
		cr_assert_eq(t->retry_count, -1);
		cr_assert_null(t->inline_def);
		cr_assert_eq(t->n_refs_used, 0);
		cr_assert_eq(t->n_branches, 0);
		cr_assert(json_is_object(t->raw));
	}
	cr_assert_str_eq(def->tasks.items[0].name, "a");
	cr_assert_str_eq(def->tasks.items[1].ref, "b1");
	cr_assert_eq(def->n_required_task_defs, 2);
	cr_assert_str_eq(def->required_task_defs[0], "a");
	cr_assert_str_eq(def->required_task_defs[1], "b");
	wf_def_free(def);
}

Test(workflow, every_field)
{
	struct wf_def *def = workflow_ok(
		"{\"name\":\"wf\",\"version\":7,\"description\":\"d\","
		"\"schemaVersion\":2,\"inputParameters\":[\"x\",\"y\"],"
		"\"outputParameters\":{\"r\":\"${a1.output.r}\"},"
		"\"inputTemplate\":{\"x\":1},\"variables\":{\"v\":true},"
		"\"failureWorkflow\":\"cleanup\",\"failureWorkflowVersion\":3,"
		"\"timeoutSeconds\":120,\"timeoutPolicy\":\"TIME_OUT_WF\","
		"\"restartable\":false,\"ownerEmail\":\"o@example.com\","
		"\"tasks\":[{\"name\":\"a\",\"taskReferenceName\":\"a1\","
		"\"inputParameters\":{\"x\":\"${workflow.input.x}\"},"
		"\"optional\":true,\"startDelay\":5,\"retryCount\":0,"
		"\"asyncComplete\":true}]}");
	cr_assert_eq(def->version, 7);
	cr_assert_str_eq(def->description, "d");
	cr_assert_eq(json_array_size(def->input_parameters), 2);
	cr_assert(json_is_object(def->output_parameters));
	cr_assert_eq(
		json_integer_value(json_object_get(def->input_template, "x")),
		1);
	cr_assert(json_is_true(json_object_get(def->variables, "v")));
	cr_assert_str_eq(def->failure_workflow, "cleanup");
	cr_assert_eq(def->failure_workflow_version, 3);
	cr_assert_eq(def->timeout_seconds, 120);
	cr_assert_eq(def->timeout_policy, TIMEOUT_TIME_OUT_WF);
	cr_assert_not(def->restartable);
	cr_assert_str_eq(def->owner_email, "o@example.com");
	const struct wf_task *t = &def->tasks.items[0];
	cr_assert(t->optional);
	cr_assert(t->async_complete);
	cr_assert_eq(t->start_delay_seconds, 5);
	cr_assert_eq(t->retry_count, 0);
	cr_assert_str_eq(
		json_string_value(json_object_get(t->input_parameters, "x")),
		"${workflow.input.x}");
	/* outputParameters reads a1. */
	cr_assert_eq(def->n_refs_used, 1);
	cr_assert_str_eq(def->refs_used[0], "a1");
	wf_def_free(def);
}

Test(workflow, unknown_fields_are_ignored)
{
	struct wf_def *def = workflow_ok(
		"{\"name\":\"wf\",\"ownerApp\":\"x\",\"createTime\":1,"
		"\"workflowStatusListenerEnabled\":false,\"tasks\":[{\"name\":"
		"\"a\",\"taskReferenceName\":\"a1\",\"asyncComplete\":false,"
		"\"description\":\"d\"}]}");
	wf_def_free(def);
}

Test(workflow, required_fields)
{
	workflow_rejects("{\"tasks\":[{\"name\":\"a\","
			 "\"taskReferenceName\":\"a1\"}]}",
			 "$.name", "is required");
	workflow_rejects("{\"name\":\"\",\"tasks\":[{\"name\":\"a\","
			 "\"taskReferenceName\":\"a1\"}]}",
			 "$.name", "must not be empty");
	workflow_rejects("{\"name\":1,\"tasks\":[{\"name\":\"a\","
			 "\"taskReferenceName\":\"a1\"}]}",
			 "$.name", "must be a string");
	workflow_rejects("{\"name\":\"a/b\",\"tasks\":[{\"name\":\"a\","
			 "\"taskReferenceName\":\"a1\"}]}",
			 "$.name", "must not contain '/'");
	workflow_rejects("{\"name\":\"wf\"}", "$.tasks", "is required");
	workflow_rejects("{\"name\":\"wf\",\"tasks\":null}", "$.tasks",
			 "is required");
	workflow_rejects("{\"name\":\"wf\",\"tasks\":[]}", "$.tasks",
			 "must not be empty");
	workflow_rejects("{\"name\":\"wf\",\"tasks\":{}}", "$.tasks",
			 "must be an array");
	workflow_rejects("[]", "$", "must be an object");
}

Test(workflow, task_fields)
{
	workflow_rejects("{\"name\":\"wf\",\"tasks\":[{\"name\":\"a\","
			 "\"taskReferenceName\":\"a1\"},7]}",
			 "$.tasks[1]", "must be an object");
	workflow_rejects("{\"name\":\"wf\",\"tasks\":[{"
			 "\"taskReferenceName\":\"a1\"}]}",
			 "$.tasks[0].name", "is required");
	workflow_rejects("{\"name\":\"wf\",\"tasks\":[{\"name\":\"a\"}]}",
			 "$.tasks[0].taskReferenceName", "is required");
	workflow_rejects("{\"name\":\"wf\",\"tasks\":[{\"name\":\"a\","
			 "\"taskReferenceName\":\"\"}]}",
			 "$.tasks[0].taskReferenceName", "must not be empty");
	workflow_rejects(one_task("\"type\":\"NOPE\""), "$.tasks[0].type",
			 "unknown task type NOPE");
	workflow_rejects(one_task("\"type\":\"simple\""), "$.tasks[0].type",
			 "unknown task type simple");
	workflow_rejects(one_task("\"type\":3"), "$.tasks[0].type",
			 "must be a string");
	workflow_rejects(one_task("\"inputParameters\":[]"),
			 "$.tasks[0].inputParameters", "must be an object");
	workflow_rejects(one_task("\"optional\":\"yes\""),
			 "$.tasks[0].optional", "must be a boolean");
	workflow_rejects(one_task("\"startDelay\":-1"), "$.tasks[0].startDelay",
			 "must not be negative");
	workflow_rejects(one_task("\"startDelay\":\"1s\""),
			 "$.tasks[0].startDelay", "must be a whole number");
	workflow_rejects(one_task("\"retryCount\":-1"), "$.tasks[0].retryCount",
			 "must not be negative");
}

Test(workflow, workflow_fields)
{
	const char *task = "\"tasks\":[{\"name\":\"a\","
			   "\"taskReferenceName\":\"a1\"}]";
	char buf[512];
#define WF(members)                                                            \
	(snprintf(buf, sizeof(buf), "{\"name\":\"wf\",%s,%s}", task, members), \
	 buf)
	workflow_rejects(WF("\"version\":0"), "$.version",
			 "must be at least 1");
	workflow_rejects(WF("\"version\":\"1\""), "$.version",
			 "must be a whole number");
	workflow_rejects(WF("\"version\":2147483648"), "$.version",
			 "must be at most 2147483647");
	workflow_rejects(WF("\"schemaVersion\":1"), "$.schemaVersion",
			 "must be 2");
	workflow_rejects(WF("\"schemaVersion\":\"2\""), "$.schemaVersion",
			 "must be 2");
	workflow_rejects(WF("\"description\":5"), "$.description",
			 "must be a string");
	workflow_rejects(WF("\"inputParameters\":{}"), "$.inputParameters",
			 "must be an array");
	workflow_rejects(WF("\"inputParameters\":[1]"), "$.inputParameters[0]",
			 "must be a string");
	workflow_rejects(WF("\"outputParameters\":[]"), "$.outputParameters",
			 "must be an object");
	workflow_rejects(WF("\"inputTemplate\":1"), "$.inputTemplate",
			 "must be an object");
	workflow_rejects(WF("\"variables\":\"v\""), "$.variables",
			 "must be an object");
	workflow_rejects(WF("\"failureWorkflow\":\"\""), "$.failureWorkflow",
			 "must not be empty");
	workflow_rejects(WF("\"failureWorkflowVersion\":-1"),
			 "$.failureWorkflowVersion", "must not be negative");
	workflow_rejects(WF("\"timeoutSeconds\":-1"), "$.timeoutSeconds",
			 "must not be negative");
	workflow_rejects(WF("\"timeoutPolicy\":\"RETRY\""), "$.timeoutPolicy",
			 "must be one of TIME_OUT_WF, ALERT_ONLY");
	workflow_rejects(WF("\"restartable\":1"), "$.restartable",
			 "must be a boolean");
	workflow_rejects(WF("\"ownerEmail\":[]"), "$.ownerEmail",
			 "must be a string");
#undef WF
}

Test(workflow, every_problem_in_one_pass)
{
	struct dsl_errors errs = {0};
	workflow_bad("{\"version\":-3,\"schemaVersion\":1,\"tasks\":["
		     "{\"name\":\"a\"},{\"taskReferenceName\":\"b1\","
		     "\"type\":\"X\"},{\"name\":\"c\",\"taskReferenceName\":"
		     "\"b1\",\"startDelay\":-1}]}",
		     &errs);
	assert_error(&errs, "$.name", "is required");
	assert_error(&errs, "$.version", "must be at least 1");
	assert_error(&errs, "$.schemaVersion", "must be 2");
	assert_error(&errs, "$.tasks[0].taskReferenceName", "is required");
	assert_error(&errs, "$.tasks[1].name", "is required");
	assert_error(&errs, "$.tasks[1].type", "unknown task type X");
	assert_error(&errs, "$.tasks[2].startDelay", "must not be negative");
	assert_error(&errs, "$.tasks[2].taskReferenceName", "$.tasks[1]");
	cr_assert_eq(errs.n, 8, "%zu errors:%s", errs.n, dump_errors(&errs));
	dsl_errors_free(&errs);
}

Test(workflow, duplicate_reference_names)
{
	struct dsl_errors errs = {0};
	workflow_bad("{\"name\":\"wf\",\"tasks\":["
		     "{\"name\":\"a\",\"taskReferenceName\":\"x\"},"
		     "{\"name\":\"b\",\"taskReferenceName\":\"y\"},"
		     "{\"name\":\"c\",\"taskReferenceName\":\"x\"},"
		     "{\"name\":\"d\",\"taskReferenceName\":\"x\"}]}",
		     &errs);
	/* Each later use is reported, naming the first. */
	cr_assert_eq(errs.n, 2, "%zu errors:%s", errs.n, dump_errors(&errs));
	cr_assert_str_eq(errs.items[0].path, "$.tasks[2].taskReferenceName");
	cr_assert_str_eq(errs.items[1].path, "$.tasks[3].taskReferenceName");
	assert_error(&errs, "$.tasks[2].taskReferenceName",
		     "duplicate taskReferenceName \"x\": first used at "
		     "$.tasks[0]");
	assert_error(&errs, "$.tasks[3].taskReferenceName",
		     "first used at $.tasks[0]");
	dsl_errors_free(&errs);
}

Test(workflow, inline_task_definitions)
{
	struct wf_def *def = workflow_ok(
		"{\"name\":\"wf\",\"tasks\":["
		"{\"name\":\"a\",\"taskReferenceName\":\"a1\","
		"\"taskDefinition\":{\"retryCount\":1,\"timeoutSeconds\":10,"
		"\"responseTimeoutSeconds\":5}},"
		"{\"name\":\"b\",\"taskReferenceName\":\"b1\","
		"\"taskDefinition\":{\"name\":\"b\"}},"
		"{\"name\":\"c\",\"taskReferenceName\":\"c1\"}]}");
	const struct wf_task *a = &def->tasks.items[0];
	cr_assert_not_null(a->inline_def);
	/* It takes its task's name, and Conductor's defaults elsewhere. */
	cr_assert_str_eq(a->inline_def->name, "a");
	cr_assert_eq(a->inline_def->retry_count, 1);
	cr_assert_eq(a->inline_def->timeout_seconds, 10);
	cr_assert_eq(a->inline_def->retry_delay_seconds, 60);
	cr_assert_str_eq(def->tasks.items[1].inline_def->name, "b");
	/* Only c needs a registered definition. */
	cr_assert_eq(def->n_required_task_defs, 1);
	cr_assert_str_eq(def->required_task_defs[0], "c");
	wf_def_free(def);

	/* Errors are reported under the inline definition's path. */
	struct dsl_errors errs = {0};
	workflow_bad("{\"name\":\"wf\",\"tasks\":[{\"name\":\"a\","
		     "\"taskReferenceName\":\"a1\"},{\"name\":\"b\","
		     "\"taskReferenceName\":\"b1\",\"taskDefinition\":{"
		     "\"retryCount\":-1,\"retryLogic\":\"NEVER\","
		     "\"timeoutSeconds\":10}}]}",
		     &errs);
	cr_assert_eq(errs.n, 3, "%zu errors:%s", errs.n, dump_errors(&errs));
	assert_error(&errs, "$.tasks[1].taskDefinition.retryCount",
		     "must not be negative");
	assert_error(&errs, "$.tasks[1].taskDefinition.retryLogic",
		     "unknown value \"NEVER\"");
	assert_error(&errs, "$.tasks[1].taskDefinition.responseTimeoutSeconds",
		     "must not exceed timeoutSeconds (10)");
	dsl_errors_free(&errs);

	workflow_rejects(one_task("\"taskDefinition\":[]"),
			 "$.tasks[0].taskDefinition", "must be an object");
	workflow_rejects(one_task("\"taskDefinition\":{\"name\":\"other\"}"),
			 "$.tasks[0].taskDefinition.name",
			 "must be the task's name \"t\"");
}

Test(workflow, required_task_defs_are_distinct_in_order)
{
	struct wf_def *def =
		workflow_ok("{\"name\":\"wf\",\"tasks\":["
			    "{\"name\":\"b\",\"taskReferenceName\":\"b1\"},"
			    "{\"name\":\"a\",\"taskReferenceName\":\"a1\"},"
			    "{\"name\":\"b\",\"taskReferenceName\":\"b2\"},"
			    "{\"name\":\"c\",\"taskReferenceName\":\"c1\"}]}");
	cr_assert_eq(def->n_required_task_defs, 3);
	cr_assert_str_eq(def->required_task_defs[0], "b");
	cr_assert_str_eq(def->required_task_defs[1], "a");
	cr_assert_str_eq(def->required_task_defs[2], "c");
	wf_def_free(def);
}

Test(workflow, find_task_by_reference)
{
	struct wf_def *def =
		workflow_ok("{\"name\":\"wf\",\"tasks\":["
			    "{\"name\":\"t\",\"taskReferenceName\":\"m\"},"
			    "{\"name\":\"t\",\"taskReferenceName\":\"z\"},"
			    "{\"name\":\"t\",\"taskReferenceName\":\"a\"},"
			    "{\"name\":\"t\",\"taskReferenceName\":\"q\"}]}");
	cr_assert_eq(def->n_tasks, 4);
	for (size_t i = 1; i < def->n_tasks; i++)
		cr_assert_lt(
			strcmp(def->by_ref[i - 1]->ref, def->by_ref[i]->ref),
			0);
	const char *refs[] = {"m", "z", "a", "q"};
	for (size_t i = 0; i < 4; i++) {
		const struct wf_task *t = dsl_find_task(def, refs[i]);
		cr_assert_not_null(t, "%s", refs[i]);
		cr_assert_eq(t, &def->tasks.items[i]);
	}
	cr_assert_null(dsl_find_task(def, "b"));
	cr_assert_null(dsl_find_task(def, ""));
	cr_assert_null(dsl_find_task(def, "zz"));
	wf_def_free(def);
}

Test(workflow, expressions_name_tasks_of_the_workflow)
{
	struct wf_def *def = workflow_ok(
		"{\"name\":\"wf\",\"tasks\":["
		"{\"name\":\"t\",\"taskReferenceName\":\"first\","
		"\"inputParameters\":{\"x\":\"${workflow.input.x}\","
		"\"env\":\"${workflow.env.HOME}\"}},"
		"{\"name\":\"t\",\"taskReferenceName\":\"second\","
		"\"inputParameters\":{\"a\":\"${first.output.a}\","
		"\"b\":[\"id ${first.taskId} of ${workflow.workflowId}\"],"
		"\"c\":{\"d\":\"${first.output.d}\"},\"n\":5}}],"
		"\"outputParameters\":{\"r\":\"${second.output.r}\","
		"\"s\":\"${first.output.s}\"}}");
	const struct wf_task *first = &def->tasks.items[0];
	const struct wf_task *second = &def->tasks.items[1];
	cr_assert_eq(first->n_refs_used, 0);
	cr_assert_eq(second->n_refs_used, 1);
	cr_assert_str_eq(second->refs_used[0], "first");
	cr_assert_eq(def->n_refs_used, 2);
	bool saw_first = false, saw_second = false;
	for (size_t i = 0; i < def->n_refs_used; i++) {
		saw_first |= strcmp(def->refs_used[i], "first") == 0;
		saw_second |= strcmp(def->refs_used[i], "second") == 0;
	}
	cr_assert(saw_first && saw_second);
	wf_def_free(def);

	workflow_rejects(one_task("\"inputParameters\":{\"x\":"
				  "\"${nope.output.x}\"}"),
			 "$.tasks[0].inputParameters",
			 "refers to task nope, which is not in this workflow");

	struct dsl_errors errs = {0};
	workflow_bad("{\"name\":\"wf\",\"tasks\":[{\"name\":\"t\","
		     "\"taskReferenceName\":\"t1\"}],"
		     "\"outputParameters\":{\"a\":\"${ghost.output}\","
		     "\"b\":\"${ghost.input}\",\"c\":\"${t1.output}\"}}",
		     &errs);
	/* One error per missing task, however often it is named. */
	cr_assert_eq(errs.n, 1, "%zu errors:%s", errs.n, dump_errors(&errs));
	assert_error(&errs, "$.outputParameters",
		     "refers to task ghost, which is not in this workflow");
	dsl_errors_free(&errs);
}

Test(workflow, malformed_expressions)
{
	struct dsl_errors errs = {0};
	workflow_bad(one_task("\"inputParameters\":{\"u\":"
			      "\"${workflow.input.x\"}"),
		     &errs);
	/* At the string that holds it, with expr's message. */
	cr_assert_eq(errs.n, 1, "%zu errors:%s", errs.n, dump_errors(&errs));
	assert_error(&errs, "$.tasks[0].inputParameters.u", "unterminated");
	cr_assert(strncmp(errs.items[0].message, "$.", 2) != 0, "%s",
		  errs.items[0].message);
	dsl_errors_free(&errs);

	/* Inside arrays, and under keys that need brackets. */
	workflow_bad(one_task("\"inputParameters\":{\"a\":[1,{\"b: c\":"
			      "[\"ok\",\"${workflow.input.x\"]}]}"),
		     &errs);
	cr_assert_eq(errs.n, 1, "%zu errors:%s", errs.n, dump_errors(&errs));
	assert_error(&errs, "$.tasks[0].inputParameters.a[1]['b: c'][1]",
		     "unterminated");
	dsl_errors_free(&errs);

	workflow_bad("{\"name\":\"wf\",\"tasks\":[{\"name\":\"t\","
		     "\"taskReferenceName\":\"t1\"}],"
		     "\"outputParameters\":{\"o\":\"${t1.output\"}}",
		     &errs);
	cr_assert_eq(errs.n, 1, "%zu errors:%s", errs.n, dump_errors(&errs));
	assert_error(&errs, "$.outputParameters.o", "unterminated");
	dsl_errors_free(&errs);
}

Test(workflow, missing_task_definitions_are_reported_at_their_tasks)
{
	struct wf_def *def =
		workflow_ok("{\"name\":\"wf\",\"tasks\":["
			    "{\"name\":\"a\",\"taskReferenceName\":\"a1\"},"
			    "{\"name\":\"b\",\"taskReferenceName\":\"b1\"},"
			    "{\"name\":\"a\",\"taskReferenceName\":\"a2\"},"
			    "{\"name\":\"a\",\"taskReferenceName\":\"a3\","
			    "\"taskDefinition\":{}}]}");
	json_t *missing = doc("[\"a\"]");
	struct dsl_errors errs = {0};
	dsl_error_missing_task_def(def, missing, &errs);
	/* a3 carries its own definition. */
	cr_assert_eq(errs.n, 2, "%zu errors:%s", errs.n, dump_errors(&errs));
	assert_error(&errs, "$.tasks[0]",
		     "task definition a is not registered");
	assert_error(&errs, "$.tasks[2]",
		     "task definition a is not registered");
	dsl_errors_free(&errs);
	json_decref(missing);
	wf_def_free(def);
}

Test(workflow, partial_parse_keeps_what_parsed)
{
	json_t *v = doc("{\"name\":\"wf\",\"version\":0,\"tasks\":["
			"{\"name\":\"a\",\"taskReferenceName\":\"a1\"},"
			"{\"name\":\"b\"}]}");
	struct dsl_errors errs = {0};
	struct wf_def *def = NULL;
	cr_assert_not(dsl_workflow_parse_partial(v, &def, &errs));
	cr_assert_not_null(def);
	cr_assert_eq(errs.n, 2, "%zu errors:%s", errs.n, dump_errors(&errs));
	cr_assert_eq(def->n_required_task_defs, 2);
	json_t *missing = doc("[\"b\"]");
	dsl_error_missing_task_def(def, missing, &errs);
	assert_error(&errs, "$.tasks[1]",
		     "task definition b is not registered");
	json_decref(missing);
	wf_def_free(def);
	dsl_errors_free(&errs);

	/* Not even an object: still a definition to free. */
	json_decref(v);
	v = doc("5");
	cr_assert_not(dsl_workflow_parse_partial(v, &def, &errs));
	cr_assert_not_null(def);
	cr_assert_eq(def->tasks.n, 0);
	wf_def_free(def);
	dsl_errors_free(&errs);
	json_decref(v);
	wf_def_free(NULL);
}

/* --------------------------------------------------------------- errors */

Test(errors, as_json)
{
	struct dsl_errors errs = {0};
	json_t *empty = dsl_errors_json(&errs);
	cr_assert(json_is_array(empty) && json_array_size(empty) == 0);
	json_decref(empty);

	dsl_errors_add(&errs, "$.a", "is %s", "required");
	dsl_errors_add(&errs, "$.b[0]", "must be a string");
	json_t *v = dsl_errors_json(&errs);
	json_t *want = doc("[{\"path\":\"$.a\",\"message\":\"is required\"},"
			   "{\"path\":\"$.b[0]\",\"message\":"
			   "\"must be a string\"}]");
	cr_assert(json_equal(v, want));
	json_decref(v);
	json_decref(want);
	dsl_errors_free(&errs);
	cr_assert_eq(errs.n, 0);
	cr_assert_null(errs.items);
}

Test(errors, quoted_names_cut_inside_a_character_stay_utf8)
{
	/* 150 three-byte characters: "%.100s" cuts the 34th. */
	char name[600] = "";
	for (int i = 0; i < 150; i++)
		strcat(name, "\xe2\x82\xac");
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"name\":\"wf\",\"tasks\":[{\"name\":\"t\","
		 "\"taskReferenceName\":\"t1\",\"type\":\"%s\"}]}",
		 name);
	struct dsl_errors errs = {0};
	workflow_bad(text, &errs);
	json_t *v = dsl_errors_json(&errs);
	cr_assert_eq(json_array_size(v), 1);
	const char *msg = json_string_value(
		json_object_get(json_array_get(v, 0), "message"));
	cr_assert_not_null(msg, "the message did not survive as JSON");
	cr_assert(strncmp(msg, "unknown task type \xe2\x82\xac", 21) == 0, "%s",
		  msg);
	json_decref(v);
	dsl_errors_free(&errs);
}

/* ============================================================ operators */

#define WF(tasks) "{\"name\":\"wf\",\"tasks\":[" tasks "]}"
#define T(ref, extra) \
	"{\"name\":\"" ref "\",\"taskReferenceName\":\"" ref "\"" extra "}"

Test(operators, nested_lists_know_their_owner_and_case)
{
	struct wf_def *def = workflow_ok(WF(T(
		"sw",
		",\"type\":\"SWITCH\",\"expression\":\"k\","
		"\"inputParameters\":{\"k\":\"${workflow.input.k}\"},"
		"\"decisionCases\":{\"a\":[" T(
			"in_a",
			",\"type\":\"NOOP\"") "]},"
					      "\"defaultCase\":[" T(
						      "in_d",
						      ",\"type\":"
						      "\"NOOP\"") "]") "," T("f",
									     ",\"type\":\"FORK_JOIN\",\"forkTasks\":[[" T("b1", ",\"type\":\"NOOP\"") "],[" T(
										     "b2",
										     ",\"type\":"
										     "\"NOOP\"") "]]") "," T("j",
													     ",\"type\":\"JOIN\",\"joinOn\":[\"b1\",\"b2\"]") "," T("loop",
																				    ",\"type\":\"DO_WHILE\",\"items\":\"${workflow.input.l}\","
																				    "\"loopOver\":[" T(
																					    "body",
																					    ",\"type\":\"NOOP\"") "]")));
	const struct wf_task *sw = dsl_find_task(def, "sw");
	cr_assert_eq(sw->n_branches, 2);
	cr_assert_str_eq(sw->branches[0].key, "a");
	cr_assert_null(sw->branches[1].key);
	const struct wf_task *in_a = dsl_find_task(def, "in_a");
	cr_assert_eq(in_a->list->owner, sw);
	cr_assert_str_eq(in_a->path, "$.tasks[0].decisionCases['a'][0]");
	cr_assert_eq(dsl_find_task(def, "in_d")->list->owner, sw);
	const struct wf_task *f = dsl_find_task(def, "f");
	cr_assert_eq(f->n_branches, 2);
	cr_assert_eq(dsl_find_task(def, "b2")->list->owner, f);
	cr_assert_null(f->list->owner);
	const struct wf_task *j = dsl_find_task(def, "j");
	cr_assert_eq(j->n_reads, 3); /* joinOn, and itself */
	const struct wf_task *loop = dsl_find_task(def, "loop");
	cr_assert_eq(loop->n_reads, 1);
	cr_assert_str_eq(loop->reads[0], "body");
	cr_assert_eq(dsl_find_task(def, "body")->list->owner, loop);
	wf_def_free(def);
}

Test(operators, each_operator_checks_its_own_fields)
{
	workflow_rejects(WF(T("sw", ",\"type\":\"SWITCH\","
				    "\"evaluatorType\":\"python\","
				    "\"expression\":\"x\"")),
			 "$.tasks[0].evaluatorType", "must be one of");
	workflow_rejects(WF(T("sw", ",\"type\":\"SWITCH\"")),
			 "$.tasks[0].expression", "is required");
	workflow_rejects(WF(T("d", ",\"type\":\"DECISION\"")),
			 "$.tasks[0].caseValueParam", "caseExpression");
	workflow_rejects(WF(T("f", ",\"type\":\"FORK_JOIN\",\"forkTasks\":[["
				   "]]")),
			 "$.tasks[0]", "must be followed by a JOIN");
	workflow_rejects(WF(T("f", ",\"type\":\"FORK_JOIN\"") "," T(
				 "j", ",\"type\":\"JOIN\"")),
			 "$.tasks[0].forkTasks", "is required");
	workflow_rejects(WF(T("a", ",\"type\":\"NOOP\"") "," T(
				 "j", ",\"type\":\"JOIN\"")),
			 "$.tasks[1]", "must follow a FORK_JOIN");
	workflow_rejects(
		WF(T("f",
		     ",\"type\":\"FORK_JOIN\",\"forkTasks\":[["
		     "]]") "," T("j",
				 ",\"type\":\"JOIN\",\"joinOn\":[\"zz\"]")),
		"$.tasks[1].joinOn[0]", "not in this workflow");
	workflow_rejects(WF(T("l", ",\"type\":\"DO_WHILE\",\"loopOver\":[" T(
					   "b", ",\"type\":\"NOOP\"") "]")),
			 "$.tasks[0].loopCondition", "loopCondition or items");
	workflow_rejects(WF(T("l", ",\"type\":\"DO_WHILE\","
				   "\"loopCondition\":\"true\"")),
			 "$.tasks[0].loopOver", "is required");
	workflow_rejects(
		WF(T("l", ",\"type\":\"DO_WHILE\",\"loopCondition\":\"true\","
			  "\"loopOver\":[" T(
				  "l2", ",\"type\":\"DO_WHILE\","
					"\"loopCondition\":\"true\","
					"\"loopOver\":[" T(
						"b", ",\"type\":"
						     "\"NOOP\"") "]") "]")),
		"$.tasks[0].loopOver[0]", "inside a DO_WHILE");
	workflow_rejects(WF(T("t", ",\"type\":\"TERMINATE\","
				   "\"inputParameters\":{"
				   "\"terminationStatus\":\"DONE\"}")),
			 "$.tasks[0].inputParameters.terminationStatus",
			 "COMPLETED, FAILED or TERMINATED");
	workflow_rejects(WF(T("d", ",\"type\":\"DYNAMIC\"")),
			 "$.tasks[0].dynamicTaskNameParam",
			 "names no key of inputParameters");
	workflow_rejects(WF(T("x", ",\"type\":\"EXCLUSIVE_JOIN\"")),
			 "$.tasks[0].joinOn", "is required");
}

Test(operators, nested_tasks_share_the_reference_namespace)
{
	workflow_rejects(
		WF(T("a", ",\"type\":\"NOOP\"") "," T(
			"sw", ",\"type\":\"SWITCH\",\"expression\":\"k\","
			      "\"decisionCases\":{\"x\":[" T(
				      "a", ",\"type\":\"NOOP\"") "]}")),
		"$.tasks[1].decisionCases['x'][0].taskReferenceName",
		"duplicate taskReferenceName");
}

/* starts_children: a SUB_WORKFLOW anywhere, or a DYNAMIC task (which may
 * turn out to be one); operators alone start none. */
Test(operators, starts_children_when_a_task_may_start_a_child)
{
	struct wf_def *def = workflow_ok(WF(T("a", ",\"type\":\"NOOP\"")));
	cr_assert_not(def->starts_children);
	wf_def_free(def);
	def = workflow_ok(WF(T(
		"f",
		",\"type\":\"FORK_JOIN\",\"forkTasks\":[[" T(
			"c",
			",\"type\":\"SUB_WORKFLOW\","
			"\"subWorkflowParam\":{\"name\":\"child\"}") "]]") "," T("j",
										 ",\"type\":\"JOIN\",\"joinOn\":[\"c\"]")));
	cr_assert(def->starts_children);
	wf_def_free(def);
	def = workflow_ok(WF(T("d", ",\"type\":\"DYNAMIC\","
				    "\"dynamicTaskNameParam\":\"t\","
				    "\"inputParameters\":{\"t\":\"${workflow."
				    "input.t}\"}")));
	cr_assert(def->starts_children);
	wf_def_free(def);
}
