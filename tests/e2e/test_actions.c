/*
 * Operator actions over HTTP against the real server: terminate, pause,
 * resume, retry, skip, restart and rerun; each refused with 409 from a
 * status that does not allow it, each leaving a gap-free history.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(actions, .init = e2e_setup, .fini = e2e_stop, .timeout = 120);

static void
define_two_tasks(void)
{
	json_decref(e2e_call("PUT", "/v1/ns/default/task-definitions/act",
			     "{\"name\":\"act\",\"retryCount\":0}", 201));
	json_decref(e2e_call("POST", "/v1/ns/default/workflow-definitions",
			     "{\"name\":\"two\",\"tasks\":["
			     "{\"name\":\"act\",\"taskReferenceName\":\"a\"},"
			     "{\"name\":\"act\",\"taskReferenceName\":\"b\","
			     "\"inputParameters\":{\"x\":\"${a.output.v}\"}}]}",
			     201));
}

static char wf[37];
static char path[256];

static void
start(void)
{
	json_t *v = e2e_call("POST", "/v1/ns/default/workflows",
			     "{\"name\":\"two\"}", 201);
	snprintf(wf, sizeof(wf), "%s",
		 json_string_value(json_object_get(v, "id")));
	json_decref(v);
}

static json_t *
action(const char *name, const char *body, long want)
{
	snprintf(path, sizeof(path), "/v1/ns/default/workflows/%s/%s", wf,
		 name);
	return e2e_call("POST", path, body ? body : "{}", want);
}

static const char *
status_of(json_t *v)
{
	return json_string_value(json_object_get(v, "status"));
}

/* Polls one task (waiting up to 5 s), fills ref and input. */
static bool
poll_one(char id[37], char *ref, size_t ref_size, json_t **input)
{
	json_t *v = e2e_call("POST", "/v1/ns/default/queues/act/poll",
			     "{\"workerId\":\"w\",\"waitMs\":5000}", 200);
	json_t *t = json_array_get(json_object_get(v, "tasks"), 0);
	bool got = t != NULL;
	if (got) {
		snprintf(id, 37, "%s",
			 json_string_value(json_object_get(t, "id")));
		snprintf(ref, ref_size, "%s",
			 json_string_value(json_object_get(t, "refName")));
		if (input)
			*input = json_incref(json_object_get(t, "input"));
	}
	json_decref(v);
	return got;
}

static void
complete(const char *task, const char *output)
{
	char p[256], body[256];
	snprintf(p, sizeof(p), "/v1/ns/default/queues/act/tasks/%s/complete",
		 task);
	snprintf(body, sizeof(body), "{\"workerId\":\"w\",\"output\":%s}",
		 output);
	json_decref(e2e_call("POST", p, body, 200));
}

static bool
is_status(void *want)
{
	snprintf(path, sizeof(path),
		 "/v1/ns/default/workflows/%s?includeTasks=false", wf);
	json_t *v = e2e_call("GET", path, NULL, 200);
	bool ok = strcmp(status_of(v), want) == 0;
	json_decref(v);
	return ok;
}

/* Runs the workflow's open tasks to the end; returns how many ran. */
static int
drain(void)
{
	int n = 0;
	char id[37], ref[64];
	while (!is_status("COMPLETED") &&
	       poll_one(id, ref, sizeof(ref), NULL)) {
		complete(id, "{\"v\":7}");
		n++;
	}
	return n;
}

static bool
has_a_task(void *unused)
{
	(void)unused;
	snprintf(path, sizeof(path), "/v1/ns/default/workflows/%s", wf);
	json_t *v = e2e_call("GET", path, NULL, 200);
	bool ok = json_array_size(json_object_get(v, "tasks")) > 0;
	json_decref(v);
	return ok;
}

static void
assert_gap_free(void)
{
	snprintf(path, sizeof(path), "/v1/ns/default/workflows/%s/events", wf);
	json_t *v = e2e_call("GET", path, NULL, 200);
	size_t i;
	json_t *ev;
	json_array_foreach (json_object_get(v, "events"), i, ev)
		cr_assert_eq(json_integer_value(json_object_get(ev, "seq")),
			     (json_int_t)i + 1, "history has a gap at %zu", i);
	json_decref(v);
}

Test(actions, pause_resume_terminate)
{
	define_two_tasks();
	start();
	json_t *v = action("pause", NULL, 200);
	cr_assert_str_eq(status_of(v), "PAUSED");
	json_decref(v);
	json_decref(action("pause", NULL, 409));
	v = action("resume", NULL, 200);
	cr_assert_str_eq(status_of(v), "RUNNING");
	json_decref(v);
	v = action("terminate", "{\"reason\":\"enough\"}", 200);
	cr_assert_str_eq(status_of(v), "TERMINATED");
	cr_assert_str_eq(json_string_value(json_object_get(v, "reason")),
			 "enough");
	json_decref(v);
	json_decref(action("terminate", NULL, 409));
	json_decref(action("resume", NULL, 409));
	/* The open task was cancelled: nothing to poll. */
	char id[37], ref[64];
	json_t *none = e2e_call("POST", "/v1/ns/default/queues/act/poll",
				"{\"workerId\":\"w\"}", 200);
	cr_assert_eq(json_array_size(json_object_get(none, "tasks")), 0);
	json_decref(none);
	(void)id;
	(void)ref;
	assert_gap_free();
}

/* A pause that lands before the first evaluation: after resume the first
 * task is still scheduled (the pause bumped the version; what says "not
 * started" is that the first task has no row).  The API-only server runs
 * no decider, and its starts leave their first steps to the deciders
 * (--start-decides 0), so the pause is certain to come first. */
Test(actions, paused_before_its_first_evaluation_starts_on_resume)
{
	static const char *const api_only[] = {"--roles", "api",
					       "--start-decides", "0", NULL};
	e2e_restart(0, api_only);
	define_two_tasks();
	start();
	json_decref(action("pause", NULL, 200));
	json_decref(action("resume", NULL, 200));
	cr_assert_not(has_a_task(NULL));
	e2e_restart(0, NULL);
	cr_assert(th_wait_until(10000, has_a_task, NULL),
		  "the first task was never scheduled after resume");
	cr_assert_eq(drain(), 2);
	cr_assert(is_status("COMPLETED"));
	assert_gap_free();
}

Test(actions, skip_moves_past_an_open_task)
{
	define_two_tasks();
	start();
	cr_assert(th_wait_until(5000, has_a_task, NULL), "a was not scheduled");
	json_t *v = action("skip", "{\"taskRefName\":\"a\"}", 200);
	json_decref(v);
	json_decref(action("skip", "{\"taskRefName\":\"a\"}", 409));
	json_decref(action("skip", "{}", 400));
	char id[37], ref[64];
	json_t *input = NULL;
	cr_assert(poll_one(id, ref, sizeof(ref), &input));
	cr_assert_str_eq(ref, "b", "the skipped task is not handed out");
	cr_assert(json_is_null(json_object_get(input, "x")));
	json_decref(input);
	complete(id, "{}");
	cr_assert(th_wait_until(5000, is_status, "COMPLETED"));
	assert_gap_free();
}

Test(actions, restart_runs_again_from_the_first_task)
{
	define_two_tasks();
	start();
	json_decref(action("restart", NULL, 409)); /* still running */
	cr_assert_eq(drain(), 2);
	cr_assert(th_wait_until(5000, is_status, "COMPLETED"));
	json_t *v = action("restart", NULL, 200);
	cr_assert_str_eq(status_of(v), "RUNNING");
	json_decref(v);
	char id[37], ref[64];
	cr_assert(poll_one(id, ref, sizeof(ref), NULL));
	cr_assert_str_eq(ref, "a");
	complete(id, "{\"v\":1}");
	cr_assert(poll_one(id, ref, sizeof(ref), NULL));
	cr_assert_str_eq(ref, "b");
	complete(id, "{}");
	cr_assert(th_wait_until(5000, is_status, "COMPLETED"));
	snprintf(path, sizeof(path), "/v1/ns/default/workflows/%s", wf);
	v = e2e_call("GET", path, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(v, "tasks")), 2,
		     "the restarted run's two tasks only");
	json_decref(v);
	assert_gap_free();
}

Test(actions, rerun_from_a_task_with_new_input)
{
	define_two_tasks();
	start();
	cr_assert_eq(drain(), 2);
	cr_assert(th_wait_until(5000, is_status, "COMPLETED"));
	json_decref(action("rerun", "{\"taskRefName\":\"nope\"}", 409));
	json_t *v =
		action("rerun",
		       "{\"taskRefName\":\"b\",\"taskInput\":{\"x\":99}}", 200);
	cr_assert_str_eq(status_of(v), "RUNNING");
	json_decref(v);
	char id[37], ref[64];
	json_t *input = NULL;
	cr_assert(poll_one(id, ref, sizeof(ref), &input));
	cr_assert_str_eq(ref, "b");
	cr_assert_eq(json_integer_value(json_object_get(input, "x")), 99);
	json_decref(input);
	complete(id, "{}");
	cr_assert(th_wait_until(5000, is_status, "COMPLETED"));
	assert_gap_free();
}

Test(actions, retry_after_a_terminal_failure)
{
	define_two_tasks();
	start();
	char id[37], ref[64];
	cr_assert(poll_one(id, ref, sizeof(ref), NULL));
	char p[256];
	snprintf(p, sizeof(p), "/v1/ns/default/queues/act/tasks/%s/fail", id);
	json_decref(e2e_call(
		"POST", p,
		"{\"workerId\":\"w\",\"reason\":\"boom\",\"terminal\":true}",
		200));
	cr_assert(th_wait_until(5000, is_status, "FAILED"));
	json_t *v = action("retry", NULL, 200);
	cr_assert_str_eq(status_of(v), "RUNNING");
	json_decref(v);
	cr_assert_eq(drain(), 2);
	cr_assert(th_wait_until(5000, is_status, "COMPLETED"));
	assert_gap_free();
}

Test(actions, unknown_action_and_workflow)
{
	define_two_tasks();
	start();
	json_decref(action("explode", NULL, 404));
	snprintf(wf, sizeof(wf), "%s", "01a22d00-0000-7000-8000-000000000000");
	json_decref(action("pause", NULL, 404));
}
