/*
 * Unit tests of the decider's operators without a database: decide() on a
 * freshly started execution (nothing loaded yet) and the rows it decides.
 *
 *   chain     SET_VARIABLE, a SWITCH with no matching case and no default,
 *             NOOP: finished inline and seen, in order, up to the worker
 *             task after them (queued); the variables in the update.
 *   fork      a FORK_JOIN of operators and its JOIN finish in the same
 *             evaluation, and so does the workflow, with the JOIN's output.
 *   loop      DO_WHILE over items: one row per iteration of its body.
 *   cap       an endless loop of operators stops after the step limit,
 *             its last rows left unseen for the next evaluation.
 *   terminate TERMINATE keeps what finished before it and ends the
 *             workflow in its status.
 */
#include "engine/decider.h"
#include "engine/dsl.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

static struct wf_def *
parse(const char *text)
{
	json_t *doc = json_loads(text, 0, NULL);
	cr_assert_not_null(doc, "bad test JSON: %s", text);
	struct dsl_errors errs = {0};
	struct wf_def *def = NULL;
	bool ok = dsl_workflow_parse(doc, &def, &errs);
	cr_assert(ok, "rejected: %s: %s", text,
		  errs.n ? errs.items[0].message : "");
	json_decref(doc);
	return def;
}

/* Decides the first evaluation of a new execution of def with input. */
static void
first_decision(const struct wf_def *def, const char *input, struct decision *d)
{
	static struct loaded_execution x;
	memset(&x, 0, sizeof(x));
	snprintf(x.id, sizeof(x.id), "01a22e00-0000-7000-8000-000000000001");
	x.ns_name = "default";
	x.status = "RUNNING";
	x.def_name = def->name;
	x.def_version = def->version;
	x.input = json_loads(input, 0, NULL);
	x.variables = json_object();
	struct decider_input in = {def, &x, NULL, NULL, NULL};
	decide(&in, d);
	json_decref(x.input);
	json_decref(x.variables);
}

static const json_t *
row_of(const struct decision *d, const char *ref, int iteration)
{
	size_t i;
	const json_t *row;
	json_array_foreach (d->tasks, i, row) {
		if (strcmp(json_string_value(json_object_get(row, "refName")),
			   ref) == 0 &&
		    json_integer_value(json_object_get(row, "iteration")) ==
			    iteration)
			return row;
	}
	return NULL;
}

/* Whether have equals want (consumed). */
static bool
eq_new(const json_t *have, json_t *want)
{
	bool eq = json_equal((json_t *)have, want);
	json_decref(want);
	return eq;
}

static const char *
status(const json_t *row)
{
	return json_string_value(json_object_get(row, "status"));
}

Test(chain, operators_finish_inline_up_to_the_worker_task)
{
	struct wf_def *def = parse(
		"{\"name\":\"c\",\"tasks\":["
		"{\"name\":\"s\",\"taskReferenceName\":\"s\","
		" \"type\":\"SET_VARIABLE\",\"inputParameters\":{\"a\":1}},"
		"{\"name\":\"sw\",\"taskReferenceName\":\"sw\",\"type\":\"SWITCH\","
		" \"expression\":\"k\",\"inputParameters\":{\"k\":\"z\"},"
		" \"decisionCases\":{\"x\":[{\"name\":\"n\","
		"  \"taskReferenceName\":\"inx\",\"type\":\"NOOP\"}]}},"
		"{\"name\":\"n\",\"taskReferenceName\":\"n\",\"type\":\"NOOP\"},"
		"{\"name\":\"w\",\"taskReferenceName\":\"w\","
		" \"taskDefinition\":{},"
		" \"inputParameters\":{\"a\":\"${workflow.variables.a}\"}}]}");
	struct decision d;
	first_decision(def, "{}", &d);
	cr_assert_eq(json_array_size(d.tasks), 4);
	const char *refs[] = {"s", "sw", "n"};
	for (int i = 0; i < 3; i++) {
		const json_t *r = json_array_get(d.tasks, (size_t)i);
		cr_assert_str_eq(
			json_string_value(json_object_get(r, "refName")),
			refs[i]);
		cr_assert_str_eq(status(r), "COMPLETED");
		cr_assert(json_is_true(json_object_get(r, "seen")));
		cr_assert_null(json_object_get(r, "queueName"));
	}
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(row_of(&d, "sw", 0), "output"),
				 "selectedCase")),
			 "z");
	cr_assert_null(row_of(&d, "inx", 0));
	const json_t *w = row_of(&d, "w", 0);
	cr_assert_null(json_object_get(w, "status"));
	cr_assert_str_eq(json_string_value(json_object_get(w, "queueName")),
			 "default/w");
	cr_assert_eq(json_integer_value(
			     json_object_get(json_object_get(w, "input"), "a")),
		     1);
	cr_assert(eq_new(json_object_get(d.update, "variables"),
			 json_pack("{s:i}", "a", 1)));
	cr_assert_null(json_object_get(d.update, "status"));
	decision_free(&d);
	wf_def_free(def);
}

Test(fork, a_fork_of_operators_joins_and_completes_in_one_evaluation)
{
	struct wf_def *def = parse(
		"{\"name\":\"f\",\"tasks\":["
		"{\"name\":\"f\",\"taskReferenceName\":\"f\","
		" \"type\":\"FORK_JOIN\",\"forkTasks\":["
		"  [{\"name\":\"a\",\"taskReferenceName\":\"a\",\"type\":\"NOOP\"}],"
		"  [{\"name\":\"b\",\"taskReferenceName\":\"b\","
		"    \"type\":\"SET_VARIABLE\",\"inputParameters\":{\"b\":2}}]]},"
		"{\"name\":\"j\",\"taskReferenceName\":\"j\",\"type\":\"JOIN\","
		" \"joinOn\":[\"a\",\"b\"]}],"
		"\"outputParameters\":{\"j\":\"${j.output}\"}}");
	struct decision d;
	first_decision(def, "{}", &d);
	cr_assert_str_eq(status(row_of(&d, "j", 0)), "COMPLETED");
	cr_assert_str_eq(json_string_value(json_object_get(d.update, "status")),
			 "COMPLETED");
	cr_assert(eq_new(json_object_get(d.update, "output"),
			 json_pack("{s:{s:{},s:{}}}", "j", "a", "b")));
	decision_free(&d);
	wf_def_free(def);
}

Test(loop, items_make_one_row_per_iteration)
{
	struct wf_def *def = parse(
		"{\"name\":\"l\",\"tasks\":["
		"{\"name\":\"l\",\"taskReferenceName\":\"l\",\"type\":\"DO_WHILE\","
		" \"items\":\"${workflow.input.xs}\",\"loopOver\":["
		"  {\"name\":\"s\",\"taskReferenceName\":\"s\","
		"   \"type\":\"SET_VARIABLE\","
		"   \"inputParameters\":{\"x\":\"${l.output.loopItem}\"}}]}]}");
	struct decision d;
	first_decision(def, "{\"xs\":[\"p\",\"q\",\"r\"]}", &d);
	for (int i = 1; i <= 3; i++)
		cr_assert_str_eq(status(row_of(&d, "s", i)), "COMPLETED");
	cr_assert_null(row_of(&d, "s", 4));
	const json_t *l = row_of(&d, "l", 0);
	cr_assert_str_eq(status(l), "COMPLETED");
	cr_assert_eq(json_integer_value(json_object_get(
			     json_object_get(l, "output"), "iteration")),
		     3);
	cr_assert(eq_new(json_object_get(d.update, "variables"),
			 json_pack("{s:s}", "x", "r")));
	cr_assert_str_eq(json_string_value(json_object_get(d.update, "status")),
			 "COMPLETED");
	decision_free(&d);
	wf_def_free(def);
}

/*
 * The loop keeps its last two rounds in its output (keepLastN): without it
 * each round's loopCondition sees every earlier round, and the rounds cost
 * the square of their number (minutes under the sanitizers), which is not
 * what this tests.
 */
Test(cap, an_endless_loop_of_operators_stops_at_the_step_limit)
{
	struct wf_def *def = parse(
		"{\"name\":\"e\",\"tasks\":["
		"{\"name\":\"l\",\"taskReferenceName\":\"l\",\"type\":\"DO_WHILE\","
		" \"loopCondition\":\"true\",\"inputParameters\":{\"keepLastN\":2},"
		" \"loopOver\":[{\"name\":\"n\",\"taskReferenceName\":\"n\","
		"   \"type\":\"NOOP\"}]}]}");
	struct decision d;
	first_decision(def, "{}", &d);
	/* Neither ended nor failed (a loopCondition that timed out would
	 * fail it). */
	cr_assert_null(d.update);
	/* One round per step, and the round after the last step written but
	 * not reacted to: the next evaluation goes on from it. */
	size_t unseen = 0, rounds = 0, i;
	const json_t *row;
	json_array_foreach (d.tasks, i, row) {
		if (strcmp(json_string_value(json_object_get(row, "refName")),
			   "n") != 0)
			continue;
		rounds++;
		cr_assert_str_eq(status(row), "COMPLETED");
		if (!json_is_true(json_object_get(row, "seen"))) {
			unseen++;
			cr_assert_eq(json_integer_value(
					     json_object_get(row, "iteration")),
				     DECIDER_MAX_INLINE_STEPS + 1);
		}
	}
	cr_assert_eq(rounds, DECIDER_MAX_INLINE_STEPS + 1);
	cr_assert_eq(unseen, 1);
	cr_assert_eq(json_array_size(d.tasks), rounds + 1);
	const json_t *l = row_of(&d, "l", 0);
	cr_assert_str_eq(status(l), "IN_PROGRESS");
	const json_t *out = json_object_get(l, "output");
	cr_assert_eq(json_integer_value(json_object_get(out, "iteration")),
		     DECIDER_MAX_INLINE_STEPS + 1);
	cr_assert_eq(json_object_size(out), 3, "iteration and two rounds");
	decision_free(&d);
	wf_def_free(def);
}

Test(terminate, keeps_what_finished_before_it)
{
	struct wf_def *def = parse(
		"{\"name\":\"t\",\"tasks\":["
		"{\"name\":\"s\",\"taskReferenceName\":\"s\","
		" \"type\":\"SET_VARIABLE\",\"inputParameters\":{\"a\":1}},"
		"{\"name\":\"t\",\"taskReferenceName\":\"t\",\"type\":\"TERMINATE\","
		" \"inputParameters\":{\"terminationStatus\":\"TERMINATED\","
		"  \"terminationReason\":\"enough\"}},"
		"{\"name\":\"w\",\"taskReferenceName\":\"w\","
		" \"taskDefinition\":{}}]}");
	struct decision d;
	first_decision(def, "{}", &d);
	cr_assert_eq(json_array_size(d.tasks), 2);
	cr_assert_str_eq(status(row_of(&d, "s", 0)), "COMPLETED");
	cr_assert_str_eq(json_string_value(json_object_get(d.update, "status")),
			 "TERMINATED");
	cr_assert_str_eq(json_string_value(json_object_get(d.update, "reason")),
			 "enough");
	cr_assert_eq(json_integer_value(json_object_get(
			     json_object_get(d.update, "variables"), "a")),
		     1);
	decision_free(&d);
	wf_def_free(def);
}

/* A loaded task of the test execution (strings are literals). */
static struct loaded_task
loaded(const char *id, const char *ref, const char *type, int attempt,
       const char *st, bool seen, const char *ended_at)
{
	struct loaded_task t = {0};
	snprintf(t.id, sizeof(t.id), "%s", id);
	snprintf(t.workflow_id, sizeof(t.workflow_id),
		 "01a22e00-0000-7000-8000-000000000001");
	t.ref = (char *)ref;
	t.task_def_name = (char *)ref;
	t.task_type = (char *)type;
	t.attempt = attempt;
	t.status = (char *)st;
	t.input = strcmp(type, "JOIN") == 0
			  ? json_pack("{s:[s,s]}", "joinOn", "a", "b")
			  : json_object();
	t.output = json_object();
	t.seen = seen;
	t.terminal = ended_at != NULL;
	t.scheduled_at = "2026-11-30 23:31:56+00";
	t.ended_at = (char *)ended_at;
	return t;
}

/* Both branch tasks ended before one evaluation: a completed first, then b
 * timed out.  Reacting to a must not complete the JOIN on b's failed
 * attempt: b is retried and the JOIN waits for the retry. */
Test(fork, a_branch_task_that_failed_is_retried_before_the_join_completes)
{
	struct wf_def *def = parse(
		"{\"name\":\"f\",\"tasks\":["
		"{\"name\":\"f\",\"taskReferenceName\":\"f\","
		" \"type\":\"FORK_JOIN\",\"forkTasks\":["
		"  [{\"name\":\"a\",\"taskReferenceName\":\"a\","
		"    \"taskDefinition\":{},\"retryCount\":2}],"
		"  [{\"name\":\"b\",\"taskReferenceName\":\"b\","
		"    \"taskDefinition\":{},\"retryCount\":2}]]},"
		"{\"name\":\"j\",\"taskReferenceName\":\"j\",\"type\":\"JOIN\","
		" \"joinOn\":[\"a\",\"b\"]}]}");
	struct loaded_task tasks[] = {
		loaded("01a22e00-0000-7000-8000-00000000000a", "f", "FORK_JOIN",
		       0, "COMPLETED", true, "2026-11-30 23:31:56+00"),
		loaded("01a22e00-0000-7000-8000-00000000000b", "j", "JOIN", 0,
		       "IN_PROGRESS", true, NULL),
		loaded("01a22e00-0000-7000-8000-00000000000c", "a", "SIMPLE", 0,
		       "COMPLETED", false, "2026-11-30 23:33:02+00"),
		loaded("01a22e00-0000-7000-8000-00000000000d", "b", "SIMPLE", 0,
		       "TIMED_OUT", false, "2026-11-30 23:33:06+00"),
	};
	static struct loaded_execution x;
	memset(&x, 0, sizeof(x));
	snprintf(x.id, sizeof(x.id), "01a22e00-0000-7000-8000-000000000001");
	x.ns_name = "default";
	x.status = "RUNNING";
	x.def_name = def->name;
	x.def_version = def->version;
	x.input = json_object();
	x.variables = json_object();
	x.tasks = tasks;
	x.n_tasks = sizeof(tasks) / sizeof(tasks[0]);
	struct decider_input in = {def, &x, NULL, NULL, NULL};
	struct decision d;
	decide(&in, &d);

	const json_t *j = row_of(&d, "j", 0);
	cr_assert(!j || !status(j) || strcmp(status(j), "COMPLETED") != 0,
		  "the JOIN completed on a failed attempt that is retried");
	cr_assert_null(
		json_object_get(d.update ? d.update : json_null(), "status"),
		"the workflow ended");
	const json_t *row;
	size_t i;
	bool retried = false;
	json_array_foreach (d.tasks, i, row) {
		if (strcmp(json_string_value(json_object_get(row, "refName")),
			   "b") == 0 &&
		    json_integer_value(json_object_get(row, "attempt")) == 1)
			retried = true;
	}
	cr_assert(retried, "b was not retried");
	decision_free(&d);
	for (size_t k = 0; k < x.n_tasks; k++) {
		json_decref(tasks[k].input);
		json_decref(tasks[k].output);
	}
	json_decref(x.input);
	json_decref(x.variables);
	wf_def_free(def);
}
