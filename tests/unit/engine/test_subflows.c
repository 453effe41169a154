/*
 * Unit tests of src/engine/subflows without a database: WAIT durations and
 * points in time (zones as Conductor reads them), and the validation of
 * SUB_WORKFLOW, START_WORKFLOW, WAIT and EVENT tasks at their JSON paths.
 */
#include "engine/dsl.h"
#include "engine/subflows.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

Test(duration, forms)
{
	static const struct {
		const char *text;
		long long seconds;
	} ok[] = {
		{"10s", 10},
		{"2m", 120},
		{"1h 30m", 5400},
		{"2 days 3 hours", 2 * 86400 + 3 * 3600},
		{"1d2h3m4s", 86400 + 7200 + 180 + 4},
		{"45 seconds", 45},
		{" 5 MINS ", 300},
		{"0s", 0},
		{"1 day, 2 hrs", 86400 + 7200},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t s = -1;
		cr_assert(subflows_parse_duration(ok[i].text, &s), "%s",
			  ok[i].text);
		cr_assert_eq(s, ok[i].seconds, "%s: %lld", ok[i].text,
			     (long long)s);
	}
	static const char *const bad[] = {"",       "10",         "s",
					  "10x",    "1h junk",    "-5s",
					  "10 s s", "ten seconds"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t s;
		cr_assert_not(subflows_parse_duration(bad[i], &s), "%s",
			      bad[i]);
	}
}

Test(until, zones)
{
	/* 2026-12-01 10:00 UTC */
	const int64_t base = 1796119200;
	static const struct {
		const char *text;
		long long delta;
	} ok[] = {
		{"2026-12-01 10:00", 0},
		{"2026-12-01 10:00 UTC", 0},
		{"2026-12-01 10:00 GMT", 0},
		{"2026-12-01 10:00 Z", 0},
		{"2026-12-01T10:00:30", 30},
		{"2026-12-01 10:00 +05:30", -(5 * 3600 + 1800)},
		{"2026-12-01 10:00 -0800", 8 * 3600},
		{"2026-12-01 10:00 GMT+2", -7200},
		{"2026-12-01 10:00 PST", 8 * 3600},
		{"2026-12-01 10:00 CET", -3600},
		{"2026-12-01", -10 * 3600},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t t = 0;
		cr_assert(subflows_parse_until(ok[i].text, &t), "%s",
			  ok[i].text);
		cr_assert_eq(t, base + ok[i].delta, "%s: %lld", ok[i].text,
			     (long long)(t - base));
	}
	static const char *const bad[] = {"tomorrow",
					  "2026-13-01 10:00",
					  "2026-02-31",
					  "2026-12-01 25:00",
					  "2026-12-01 10:00 Mars/Olympus",
					  "2026-12-01 10:00 +25:00"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t t;
		cr_assert_not(subflows_parse_until(bad[i], &t), "%s", bad[i]);
	}
}

/* Parses a workflow of one task (JSON text of the task) and returns its
 * errors as "path: message" lines. */
static char *
errors_of(const char *task)
{
	char text[4096];
	snprintf(text, sizeof(text), "{\"name\":\"w\",\"tasks\":[%s]}", task);
	json_t *doc = json_loads(text, 0, NULL);
	cr_assert_not_null(doc, "%s", text);
	struct wf_def *def = NULL;
	struct dsl_errors errs = {0};
	(void)dsl_workflow_parse(doc, &def, &errs);
	static char buf[4096];
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < errs.n && used < sizeof(buf) - 1; i++)
		used += (size_t)snprintf(buf + used, sizeof(buf) - used,
					 "%s: %s\n", errs.items[i].path,
					 errs.items[i].message);
	dsl_errors_free(&errs);
	wf_def_free(def);
	json_decref(doc);
	return buf;
}

#define assert_valid(task)                                             \
	do {                                                           \
		char *e_ = errors_of(task);                            \
		cr_assert_str_empty(e_, "%s rejected:\n%s", task, e_); \
	} while (0)

#define assert_rejected(task, line)                                          \
	do {                                                                 \
		char *e_ = errors_of(task);                                  \
		cr_assert(strstr(e_, line), "%s: want \"%s\" in:\n%s", task, \
			  line, e_);                                         \
	} while (0)

Test(validate, sub_workflow)
{
	assert_valid("{\"name\":\"c\",\"taskReferenceName\":\"c\","
		     "\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":"
		     "{\"name\":\"child\",\"version\":2}}");
	assert_valid("{\"name\":\"c\",\"taskReferenceName\":\"c\","
		     "\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":"
		     "{\"name\":\"${workflow.input.n}\"}}");
	assert_valid("{\"name\":\"c\",\"taskReferenceName\":\"c\","
		     "\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":"
		     "{\"workflowDefinition\":{\"name\":\"inl\",\"tasks\":"
		     "[{\"name\":\"h\",\"taskReferenceName\":\"h\","
		     "\"type\":\"HUMAN\"}]}}}");
	assert_rejected("{\"name\":\"c\",\"taskReferenceName\":\"c\","
			"\"type\":\"SUB_WORKFLOW\"}",
			"$.tasks[0].subWorkflowParam: is required");
	assert_rejected("{\"name\":\"c\",\"taskReferenceName\":\"c\","
			"\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":{}}",
			"$.tasks[0].subWorkflowParam.name: is required");
	assert_rejected("{\"name\":\"c\",\"taskReferenceName\":\"c\","
			"\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":"
			"{\"name\":\"x\",\"version\":0}}",
			"$.tasks[0].subWorkflowParam.version: must be");
	/* The inline definition's problems are at their own paths. */
	assert_rejected("{\"name\":\"c\",\"taskReferenceName\":\"c\","
			"\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":"
			"{\"workflowDefinition\":{\"name\":\"inl\",\"tasks\":"
			"[{\"name\":\"h\"}]}}}",
			"$.tasks[0].subWorkflowParam.workflowDefinition."
			"tasks[0].taskReferenceName: is required");
	/* Its expressions name tasks of the parent, and are checked. */
	assert_rejected("{\"name\":\"c\",\"taskReferenceName\":\"c\","
			"\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":"
			"{\"name\":\"${nope.output.n}\"}}",
			"refers to task nope");
}

Test(validate, start_workflow)
{
	assert_valid("{\"name\":\"s\",\"taskReferenceName\":\"s\","
		     "\"type\":\"START_WORKFLOW\",\"inputParameters\":"
		     "{\"startWorkflow\":{\"name\":\"x\",\"input\":{}}}}");
	assert_rejected("{\"name\":\"s\",\"taskReferenceName\":\"s\","
			"\"type\":\"START_WORKFLOW\"}",
			"$.tasks[0].inputParameters.startWorkflow: is "
			"required");
	assert_rejected("{\"name\":\"s\",\"taskReferenceName\":\"s\","
			"\"type\":\"START_WORKFLOW\",\"inputParameters\":"
			"{\"startWorkflow\":{\"input\":[]}}}",
			"$.tasks[0].inputParameters.startWorkflow.name: is "
			"required");
	assert_rejected("{\"name\":\"s\",\"taskReferenceName\":\"s\","
			"\"type\":\"START_WORKFLOW\",\"inputParameters\":"
			"{\"startWorkflow\":{\"name\":\"x\",\"input\":[]}}}",
			"$.tasks[0].inputParameters.startWorkflow.input: "
			"must be an object");
}

Test(validate, wait_and_event)
{
	assert_valid("{\"name\":\"w\",\"taskReferenceName\":\"w\","
		     "\"type\":\"WAIT\"}");
	assert_valid("{\"name\":\"w\",\"taskReferenceName\":\"w\","
		     "\"type\":\"WAIT\",\"inputParameters\":"
		     "{\"duration\":\"1h 30m\"}}");
	assert_valid("{\"name\":\"w\",\"taskReferenceName\":\"w\","
		     "\"type\":\"WAIT\",\"inputParameters\":"
		     "{\"until\":\"${workflow.input.at}\"}}");
	assert_rejected("{\"name\":\"w\",\"taskReferenceName\":\"w\","
			"\"type\":\"WAIT\",\"inputParameters\":"
			"{\"duration\":\"soon\"}}",
			"$.tasks[0].inputParameters.duration: is not a "
			"duration");
	assert_rejected("{\"name\":\"w\",\"taskReferenceName\":\"w\","
			"\"type\":\"WAIT\",\"inputParameters\":"
			"{\"until\":\"2026-12-01 10:00 XYZ\"}}",
			"$.tasks[0].inputParameters.until: is not a time");
	assert_rejected("{\"name\":\"w\",\"taskReferenceName\":\"w\","
			"\"type\":\"WAIT\",\"inputParameters\":"
			"{\"duration\":\"1s\",\"until\":\"2026-12-01\"}}",
			"not both");
	assert_valid("{\"name\":\"h\",\"taskReferenceName\":\"h\","
		     "\"type\":\"HUMAN\"}");
	assert_valid("{\"name\":\"e\",\"taskReferenceName\":\"e\","
		     "\"type\":\"EVENT\",\"sink\":\"kafka:orders\"}");
	assert_rejected("{\"name\":\"e\",\"taskReferenceName\":\"e\","
			"\"type\":\"EVENT\"}",
			"$.tasks[0].sink: is required");
	assert_rejected("{\"name\":\"e\",\"taskReferenceName\":\"e\","
			"\"type\":\"EVENT\",\"sink\":\"\"}",
			"$.tasks[0].sink: must not be empty");
}
