/*
 * End-to-end tests of the operators the decider evaluates itself, on the
 * real nodeflow binary over HTTP with a worker driven by the test:
 *
 *   inline_rows  SET_VARIABLE and NOOP run in the evaluation that schedules
 *                them (no queue rows; started, ended and seen), a worker
 *                task after them sees the variables.
 *   switch_op    value-param cases, the default case, no matching case and
 *                no default (the workflow goes on after the switch), the
 *                legacy DECISION with an EXCLUSIVE_JOIN, the javascript
 *                evaluator, a script that throws.
 *   fork         static branches and the JOIN's output, a failed branch
 *                failing the JOIN and the workflow, a dynamic fork of 1,000
 *                branches completing, the forkTaskName form, a retry of
 *                the failed branch reopening the JOIN.
 *   loop         items with loopItem/loopIndex and the iteration column,
 *                loopCondition with keepLastN, a condition that throws, a
 *                loop of operators in one evaluation.
 *   misc         DYNAMIC, an optional task failing (COMPLETED_WITH_ERRORS),
 *                TERMINATE (COMPLETED and FAILED), startDelay.
 *   examples     every definition of examples/operators/ runs with its
 *                input to the output it documents.
 *
 * Every test gets its own database and server; the server's output is
 * drained by a thread and kept for failure messages.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	DECIDE_TIMEOUT_MS = 15000,
};

TestSuite(inline_rows, .fini = e2e_stop);
TestSuite(switch_op, .fini = e2e_stop);
TestSuite(fork, .fini = e2e_stop);
TestSuite(loop, .fini = e2e_stop);
TestSuite(misc, .fini = e2e_stop);

/* ---------------------------------------------------------- HTTP helpers */

#define MAYBE_UNUSED __attribute__((unused))

MAYBE_UNUSED static long long
int_at(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	cr_assert(json_is_integer(v), "\"%s\" is not an integer: %s", key,
		  e2e_last_body);
	return json_integer_value(v);
}

static bool
json_eq_text(const json_t *v, const char *text)
{
	json_t *want = json_loads(text, 0, NULL);
	cr_assert_not_null(want, "bad expected JSON %s", text);
	bool eq = json_equal((json_t *)v, want);
	json_decref(want);
	return eq;
}

#define NS E2E_NS

static void
put_task_def(const char *name, int retry_count)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", name);
	json_decref(e2e_callj("PUT", path, 201,
			      json_pack("{s:s,s:i,s:s,s:i,s:i}", "name", name,
					"retryCount", retry_count, "retryLogic",
					"FIXED", "retryDelaySeconds", 0,
					"responseTimeoutSeconds", 60)));
}

static void
put_workflow(const char *text)
{
	json_decref(e2e_call("POST", NS "/workflow-definitions", text, 201));
}

static void
start_workflow(const char *name, const char *input, char id[37])
{
	char body[8192];
	snprintf(body, sizeof(body), "{\"name\":\"%s\",\"input\":%s}", name,
		 input);
	json_t *v = e2e_call("POST", NS "/workflows", body, 201);
	snprintf(id, 37, "%s", e2e_str_at(v, "id"));
	json_decref(v);
}

struct poll_probe {
	const char *queue;
	int count;
	json_t *tasks;
};

static bool
polled_something(void *arg)
{
	struct poll_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", p->queue);
	json_t *v = e2e_callj(
		"POST", path, 200,
		json_pack("{s:s,s:i}", "workerId", "w1", "count", p->count));
	json_t *tasks = json_object_get(v, "tasks");
	cr_assert(json_is_array(tasks), "poll: %s", e2e_last_body);
	if (json_array_size(tasks) == 0) {
		json_decref(v);
		return false;
	}
	p->tasks = json_incref(tasks);
	json_decref(v);
	return true;
}

/* Polls until a task comes: the first task, a new reference. */
static json_t *
poll_one(const char *queue)
{
	struct poll_probe p = {queue, 1, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p),
		  "no task on queue %s: %s", queue, e2e_log());
	json_t *t = json_incref(json_array_get(p.tasks, 0));
	json_decref(p.tasks);
	return t;
}

/* Polls up to count tasks at once (waiting for at least one). */
MAYBE_UNUSED static json_t *
poll_many(const char *queue, int count)
{
	struct poll_probe p = {queue, count, NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled_something, &p),
		  "no task on queue %s: %s", queue, e2e_log());
	return p.tasks;
}

static long
task_op(const char *op, const char *queue, const char *task_id, json_t *body)
{
	char path[512];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/%s", queue,
		 task_id, op);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct th_response r;
	th_http(e2e_server(), "POST", path, text, strlen(text), &r);
	free(text);
	snprintf(e2e_last_body, sizeof(e2e_last_body), "%s", r.body);
	long status = r.status;
	th_response_free(&r);
	return status;
}

static void
complete(const char *queue, const json_t *task, json_t *output)
{
	cr_assert_eq(task_op("complete", queue, e2e_str_at(task, "id"),
			     json_pack("{s:s,s:o}", "workerId", "w1", "output",
				       output)),
		     200, "%s", e2e_last_body);
}

MAYBE_UNUSED static void
fail(const char *queue, const json_t *task, const char *reason)
{
	cr_assert_eq(task_op("fail", queue, e2e_str_at(task, "id"),
			     json_pack("{s:s,s:s,s:b}", "workerId", "w1",
				       "reason", reason, "terminal", 1)),
		     200, "%s", e2e_last_body);
}

/* The latest task of wf with refName ref (NULL if none). */
static const json_t *
task_of(const json_t *wf, const char *ref)
{
	const json_t *found = NULL;
	size_t i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   ref) == 0)
			found = t;
	}
	return found;
}

MAYBE_UNUSED static size_t
count_ref(const json_t *wf, const char *ref)
{
	size_t n = 0, i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "refName")),
			   ref) == 0)
			n++;
	}
	return n;
}

static const char *
status_of(const json_t *wf, const char *ref)
{
	const json_t *t = task_of(wf, ref);
	cr_assert_not_null(t, "no task %s: %s", ref, e2e_last_body);
	return e2e_str_at(t, "status");
}

/* ============================================================= inline */

static const char chain_wf[] =
	"{\"name\":\"chain\",\"version\":1,\"tasks\":["
	"{\"name\":\"setv\",\"taskReferenceName\":\"setv\","
	" \"type\":\"SET_VARIABLE\","
	" \"inputParameters\":{\"x\":\"${workflow.input.x}\",\"k\":\"v\"}},"
	"{\"name\":\"nop\",\"taskReferenceName\":\"nop\",\"type\":\"NOOP\"},"
	"{\"name\":\"work\",\"taskReferenceName\":\"work\","
	" \"inputParameters\":{\"x\":\"${workflow.variables.x}\","
	"  \"k\":\"${workflow.variables.k}\"}},"
	"{\"name\":\"nop2\",\"taskReferenceName\":\"nop2\",\"type\":\"NOOP\"}],"
	"\"outputParameters\":{\"vars\":\"${workflow.variables}\","
	" \"w\":\"${work.output.r}\"}}";

Test(inline_rows, operators_chain_in_one_evaluation)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(chain_wf);
	char id[37];
	start_workflow("chain", "{\"x\":5}", id);
	json_t *t = poll_one("work");
	cr_assert(json_eq_text(json_object_get(t, "input"),
			       "{\"x\":5,\"k\":\"v\"}"),
		  "%s", e2e_last_body);
	/* One evaluation wrote SET_VARIABLE, NOOP and the worker task. */
	cr_assert_eq(
		e2e_sql_int("SELECT \"version\" FROM \"WorkflowExecutions\""
			    " WHERE \"id\" = $1::uuid",
			    id),
		1);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"workflowId\" = $1::uuid AND"
				 " \"queueName\" IS NULL AND \"deciderSeenAt\""
				 " IS NOT NULL AND \"endedAt\" IS NOT NULL"
				 " AND \"startedAt\" IS NOT NULL",
				 id),
		     2);
	cr_assert_eq(
		e2e_sql_int("SELECT count(*) FROM \"TaskQueues\" q JOIN"
			    " \"TaskExecutions\" t ON t.\"id\" = q.\"taskId\""
			    " WHERE t.\"taskType\" IN ('NOOP','SET_VARIABLE')",
			    NULL),
		0);
	complete("work", t, json_pack("{s:i}", "r", 9));
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert(json_eq_text(json_object_get(wf, "output"),
			       "{\"vars\":{\"x\":5,\"k\":\"v\"},\"w\":9}"),
		  "%s", e2e_last_body);
	cr_assert_str_eq(status_of(wf, "setv"), "COMPLETED");
	cr_assert_str_eq(status_of(wf, "nop2"), "COMPLETED");
	json_decref(wf);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"DecideQueues\"", NULL),
		     0);
}

/* ============================================================= switch */

static const char switch_wf[] =
	"{\"name\":\"sw\",\"version\":1,\"tasks\":["
	"{\"name\":\"sw\",\"taskReferenceName\":\"sw\",\"type\":\"SWITCH\","
	" \"evaluatorType\":\"value-param\",\"expression\":\"kind\","
	" \"inputParameters\":{\"kind\":\"${workflow.input.kind}\"},"
	" \"decisionCases\":{"
	"  \"a\":[{\"name\":\"work\",\"taskReferenceName\":\"in_a\"},"
	"        {\"name\":\"na\",\"taskReferenceName\":\"after_a\","
	"         \"type\":\"NOOP\"}],"
	"  \"b\":[{\"name\":\"sb\",\"taskReferenceName\":\"set_b\","
	"         \"type\":\"SET_VARIABLE\",\"inputParameters\":{\"b\":1}}]},"
	" \"defaultCase\":[{\"name\":\"nd\",\"taskReferenceName\":\"dflt\","
	"         \"type\":\"NOOP\"}]},"
	"{\"name\":\"work\",\"taskReferenceName\":\"last\","
	" \"inputParameters\":{\"case\":\"${sw.output.selectedCase}\"}}]}";

static const char switch_nodefault_wf[] =
	"{\"name\":\"swn\",\"version\":1,\"tasks\":["
	"{\"name\":\"sw\",\"taskReferenceName\":\"sw\",\"type\":\"SWITCH\","
	" \"evaluatorType\":\"value-param\",\"expression\":\"kind\","
	" \"inputParameters\":{\"kind\":\"${workflow.input.kind}\"},"
	" \"decisionCases\":{"
	"  \"a\":[{\"name\":\"work\",\"taskReferenceName\":\"in_a\"}]}},"
	"{\"name\":\"work\",\"taskReferenceName\":\"last\","
	" \"inputParameters\":{\"r\":\"${sw.output.evaluationResult}\"}}]}";

/* Runs a workflow to its last task: completes every "work" task polled
 * until "last" comes; returns the ref names polled, joined by spaces. */
static void
work_until_last(char *seen, size_t len, json_t **last_input)
{
	seen[0] = '\0';
	for (int i = 0; i < 10; i++) {
		json_t *t = poll_one("work");
		const char *ref = e2e_str_at(t, "refName");
		snprintf(seen + strlen(seen), len - strlen(seen), "%s%s",
			 seen[0] ? " " : "", ref);
		bool last = strcmp(ref, "last") == 0;
		if (last && last_input)
			*last_input = json_incref(json_object_get(t, "input"));
		complete("work", t, json_pack("{s:s}", "by", ref));
		json_decref(t);
		if (last)
			return;
	}
	cr_assert_fail("never reached the last task: %s", seen);
}

Test(switch_op, value_param_cases_default_and_what_follows)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(switch_wf);
	char a[37], b[37], other[37];
	char seen[256];
	json_t *in;

	start_workflow("sw", "{\"kind\":\"a\"}", a);
	work_until_last(seen, sizeof(seen), &in);
	cr_assert_str_eq(seen, "in_a last");
	cr_assert(json_eq_text(in, "{\"case\":\"a\"}"), "%s", e2e_last_body);
	json_decref(in);
	json_t *wf = e2e_wait_status(a, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "after_a"), "COMPLETED");
	cr_assert(json_eq_text(json_object_get(task_of(wf, "sw"), "output"),
			       "{\"evaluationResult\":[\"a\"],"
			       "\"selectedCase\":\"a\"}"),
		  "%s", e2e_last_body);
	cr_assert_null(task_of(wf, "dflt"));
	json_decref(wf);

	start_workflow("sw", "{\"kind\":\"b\"}", b);
	work_until_last(seen, sizeof(seen), NULL);
	cr_assert_str_eq(seen, "last");
	wf = e2e_wait_status(b, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "set_b"), "COMPLETED");
	cr_assert(json_eq_text(json_object_get(wf, "variables"), "{\"b\":1}"),
		  "%s", e2e_last_body);
	json_decref(wf);

	start_workflow("sw", "{\"kind\":\"zzz\"}", other);
	work_until_last(seen, sizeof(seen), NULL);
	cr_assert_str_eq(seen, "last");
	wf = e2e_wait_status(other, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "dflt"), "COMPLETED");
	json_decref(wf);
}

Test(switch_op, no_matching_case_and_no_default_goes_on_after_the_switch)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(switch_nodefault_wf);
	char id[37];
	char seen[256];
	json_t *in;
	start_workflow("swn", "{\"kind\":7}", id);
	work_until_last(seen, sizeof(seen), &in);
	cr_assert_str_eq(seen, "last");
	cr_assert(json_eq_text(in, "{\"r\":[\"7\"]}"), "%s", e2e_last_body);
	json_decref(in);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "sw"), "COMPLETED");
	cr_assert_null(task_of(wf, "in_a"));
	json_decref(wf);
}

static const char decision_wf[] =
	"{\"name\":\"dec\",\"version\":1,\"tasks\":["
	"{\"name\":\"d\",\"taskReferenceName\":\"d\",\"type\":\"DECISION\","
	" \"caseValueParam\":\"k\","
	" \"inputParameters\":{\"k\":\"${workflow.input.k}\"},"
	" \"decisionCases\":{"
	"  \"x\":[{\"name\":\"work\",\"taskReferenceName\":\"wx\"}],"
	"  \"y\":[{\"name\":\"work\",\"taskReferenceName\":\"wy\"}]}},"
	"{\"name\":\"ej\",\"taskReferenceName\":\"ej\","
	" \"type\":\"EXCLUSIVE_JOIN\",\"joinOn\":[\"wx\",\"wy\"]},"
	"{\"name\":\"work\",\"taskReferenceName\":\"last\","
	" \"inputParameters\":{\"j\":\"${ej.output.by}\"}}]}";

Test(switch_op, legacy_decision_and_exclusive_join)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(decision_wf);
	char id[37];
	char seen[256];
	json_t *in;
	start_workflow("dec", "{\"k\":\"y\"}", id);
	work_until_last(seen, sizeof(seen), &in);
	cr_assert_str_eq(seen, "wy last");
	cr_assert(json_eq_text(in, "{\"j\":\"wy\"}"), "%s", e2e_last_body);
	json_decref(in);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "ej"), "COMPLETED");
	json_decref(wf);
}

/* =============================================================== fork */

static const char fork_wf[] =
	"{\"name\":\"fk\",\"version\":1,\"tasks\":["
	"{\"name\":\"f\",\"taskReferenceName\":\"f\",\"type\":\"FORK_JOIN\","
	" \"forkTasks\":["
	"  [{\"name\":\"work\",\"taskReferenceName\":\"b1\"},"
	"   {\"name\":\"n1\",\"taskReferenceName\":\"b1n\",\"type\":\"NOOP\"}],"
	"  [{\"name\":\"work\",\"taskReferenceName\":\"b2\"}],"
	"  [{\"name\":\"n3\",\"taskReferenceName\":\"b3\",\"type\":\"NOOP\"}]]},"
	"{\"name\":\"j\",\"taskReferenceName\":\"j\",\"type\":\"JOIN\","
	" \"joinOn\":[\"b1n\",\"b2\",\"b3\"]},"
	"{\"name\":\"work\",\"taskReferenceName\":\"last\","
	" \"inputParameters\":{\"j\":\"${j.output}\"}}]}";

Test(fork, static_branches_join_with_their_outputs)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(fork_wf);
	char id[37];
	start_workflow("fk", "{}", id);
	json_t *t1 = poll_one("work");
	json_t *t2 = poll_one("work");
	cr_assert_str_neq(e2e_str_at(t1, "refName"), e2e_str_at(t2, "refName"));
	json_t *wf = e2e_get_workflow(id);
	cr_assert_str_eq(status_of(wf, "j"), "IN_PROGRESS");
	cr_assert_str_eq(status_of(wf, "b3"), "COMPLETED");
	json_decref(wf);
	complete("work", t1,
		 json_pack("{s:s}", "by", e2e_str_at(t1, "refName")));
	complete("work", t2,
		 json_pack("{s:s}", "by", e2e_str_at(t2, "refName")));
	json_decref(t1);
	json_decref(t2);
	json_t *last = poll_one("work");
	cr_assert_str_eq(e2e_str_at(last, "refName"), "last");
	cr_assert(json_eq_text(json_object_get(last, "input"),
			       "{\"j\":{\"b1n\":{},\"b2\":{\"by\":\"b2\"},"
			       "\"b3\":{}}}"),
		  "%s", e2e_last_body);
	complete("work", last, json_object());
	json_decref(last);
	wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "j"), "COMPLETED");
	json_decref(wf);
}

Test(fork, a_failed_branch_fails_the_join_and_the_workflow)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(fork_wf);
	char id[37];
	start_workflow("fk", "{}", id);
	json_t *t = poll_one("work");
	char ref[64];
	snprintf(ref, sizeof(ref), "%s", e2e_str_at(t, "refName"));
	fail("work", t, "broken branch");
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "j"), "FAILED");
	cr_assert(strstr(e2e_str_at(wf, "reason"), ref), "%s", e2e_last_body);
	cr_assert(strstr(e2e_str_at(wf, "reason"), "broken branch"), "%s",
		  e2e_last_body);
	const char *other = strcmp(ref, "b1") == 0 ? "b2" : "b1";
	cr_assert_str_eq(status_of(wf, other), "CANCELED");
	cr_assert_null(task_of(wf, "last"));
	json_decref(wf);
}

static const char dynfork_wf[] =
	"{\"name\":\"dyn\",\"version\":1,\"tasks\":["
	"{\"name\":\"df\",\"taskReferenceName\":\"df\","
	" \"type\":\"FORK_JOIN_DYNAMIC\","
	" \"dynamicForkTasksParam\":\"tasks\","
	" \"dynamicForkTasksInputParamName\":\"inputs\","
	" \"inputParameters\":{\"tasks\":\"${workflow.input.tasks}\","
	"  \"inputs\":\"${workflow.input.inputs}\"}},"
	"{\"name\":\"j\",\"taskReferenceName\":\"j\",\"type\":\"JOIN\"},"
	"{\"name\":\"nop\",\"taskReferenceName\":\"end\",\"type\":\"NOOP\"}],"
	"\"outputParameters\":{\"j\":\"${j.output}\"}}";

struct drain_probe {
	int done;
};

/* Completes what one poll of up to 100 hands out, in one batch of
 * results, each with {"i": its input's i}. */
static bool
drained_all(void *arg)
{
	struct drain_probe *p = arg;
	struct poll_probe pp = {"work", 100, NULL};
	if (polled_something(&pp)) {
		json_t *results = json_array();
		size_t i;
		json_t *t;
		json_array_foreach (pp.tasks, i, t) {
			json_t *in = json_object_get(t, "input");
			json_array_append_new(
				results,
				json_pack("{s:s,s:s,s:s,s:{s:O}}", "taskId",
					  e2e_str_at(t, "id"), "workerId", "w1",
					  "status", "COMPLETED", "output", "i",
					  json_object_get(in, "i")));
		}
		json_t *v = e2e_callj("POST", NS "/queues/work/results", 200,
				      json_pack("{s:o}", "results", results));
		json_array_foreach (json_object_get(v, "results"), i, t) {
			cr_assert(json_is_true(json_object_get(t, "ok")), "%s",
				  e2e_last_body);
			p->done++;
		}
		json_decref(v);
		json_decref(pp.tasks);
	}
	return p->done >= 1000;
}

Test(fork, a_dynamic_fork_of_1000_branches_completes, .timeout = 300)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(dynfork_wf);
	json_t *tasks = json_array(), *inputs = json_object();
	for (int i = 0; i < 1000; i++) {
		char ref[32];
		snprintf(ref, sizeof(ref), "br%d", i);
		json_array_append_new(tasks,
				      json_pack("{s:s,s:s}", "name", "work",
						"taskReferenceName", ref));
		json_object_set_new(inputs, ref, json_pack("{s:i}", "i", i));
	}
	json_t *input =
		json_pack("{s:o,s:o}", "tasks", tasks, "inputs", inputs);
	char *text = json_dumps(input, JSON_COMPACT);
	json_decref(input);
	char *body = malloc(strlen(text) + 64);
	sprintf(body, "{\"name\":\"dyn\",\"input\":%s}", text);
	free(text);
	json_t *v = e2e_call("POST", NS "/workflows", body, 201);
	free(body);
	char id[37];
	snprintf(id, sizeof(id), "%s", e2e_str_at(v, "id"));
	json_decref(v);

	struct drain_probe p = {0};
	cr_assert(th_wait_until(240000, drained_all, &p),
		  "only %d branches done: %s", p.done, e2e_log());
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	json_t *j = json_object_get(json_object_get(wf, "output"), "j");
	cr_assert_eq(json_object_size(j), 1000, "%s", e2e_last_body);
	cr_assert(json_eq_text(json_object_get(j, "br517"), "{\"i\":517}"));
	json_decref(wf);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
				 " WHERE \"workflowId\" = $1::uuid"
				 " AND \"forkRef\" = 'df'",
				 id),
		     1000);
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"DecideQueues\"", NULL),
		     0);
}

static const char dynfork_simple_wf[] =
	"{\"name\":\"dyns\",\"version\":1,\"tasks\":["
	"{\"name\":\"df\",\"taskReferenceName\":\"df\","
	" \"type\":\"FORK_JOIN_DYNAMIC\","
	" \"inputParameters\":{\"forkTaskName\":\"work\","
	"  \"forkTaskInputs\":\"${workflow.input.items}\"}},"
	"{\"name\":\"j\",\"taskReferenceName\":\"j\",\"type\":\"JOIN\"}]}";

Test(fork, dynamic_fork_simple_form)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(dynfork_simple_wf);
	char id[37];
	start_workflow("dyns", "{\"items\":[{\"i\":1},{\"i\":2}]}", id);
	for (int k = 0; k < 2; k++) {
		json_t *t = poll_one("work");
		const char *ref = e2e_str_at(t, "refName");
		cr_assert(strcmp(ref, "df_0") == 0 || strcmp(ref, "df_1") == 0,
			  "%s", ref);
		complete("work", t, json_pack("{s:s}", "ref", ref));
		json_decref(t);
	}
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert(json_eq_text(json_object_get(wf, "output"),
			       "{\"df_0\":{\"ref\":\"df_0\"},"
			       "\"df_1\":{\"ref\":\"df_1\"}}"),
		  "%s", e2e_last_body);
	json_decref(wf);
}

/* =============================================================== loop */

static const char items_wf[] =
	"{\"name\":\"items\",\"version\":1,\"tasks\":["
	"{\"name\":\"loop\",\"taskReferenceName\":\"loop\","
	" \"type\":\"DO_WHILE\",\"items\":\"${workflow.input.list}\","
	" \"loopOver\":["
	"  {\"name\":\"work\",\"taskReferenceName\":\"body\","
	"   \"inputParameters\":{\"item\":\"${loop.output.loopItem}\","
	"    \"index\":\"${loop.output.loopIndex}\"}},"
	"  {\"name\":\"n\",\"taskReferenceName\":\"tail\",\"type\":\"NOOP\"}]},"
	"{\"name\":\"work\",\"taskReferenceName\":\"last\","
	" \"inputParameters\":{\"it\":\"${loop.output.iteration}\","
	"  \"second\":\"${loop.output.2.body.got}\"}}]}";

Test(loop, items_iterate_with_the_iteration_in_the_identity)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(items_wf);
	char id[37];
	start_workflow("items", "{\"list\":[\"x\",\"y\",\"z\"]}", id);
	const char *want[] = {"x", "y", "z"};
	for (int i = 0; i < 3; i++) {
		json_t *t = poll_one("work");
		cr_assert_str_eq(e2e_str_at(t, "refName"), "body");
		json_t *in = json_object_get(t, "input");
		cr_assert_str_eq(e2e_str_at(in, "item"), want[i]);
		cr_assert_eq(int_at(in, "index"), i);
		complete("work", t, json_pack("{s:s}", "got", want[i]));
		json_decref(t);
	}
	json_t *t = poll_one("work");
	cr_assert_str_eq(e2e_str_at(t, "refName"), "last");
	cr_assert(json_eq_text(json_object_get(t, "input"),
			       "{\"it\":3,\"second\":\"y\"}"),
		  "%s", e2e_last_body);
	complete("work", t, json_object());
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_eq(count_ref(wf, "body"), 3);
	const json_t *loop = task_of(wf, "loop");
	cr_assert_str_eq(e2e_str_at(loop, "status"), "COMPLETED");
	cr_assert(json_eq_text(
			  json_object_get(json_object_get(loop, "output"), "1"),
			  "{\"body\":{\"got\":\"x\"},\"tail\":{}}"),
		  "%s", e2e_last_body);
	json_decref(wf);
	cr_assert_eq(e2e_sql_int("SELECT max(\"iteration\") FROM"
				 " \"TaskExecutions\" WHERE \"workflowId\" ="
				 " $1::uuid AND \"refName\" = 'body'",
				 id),
		     3);
}

/* =============================================================== misc */

static const char misc_wf[] =
	"{\"name\":\"misc\",\"version\":1,\"tasks\":["
	"{\"name\":\"dyn\",\"taskReferenceName\":\"dyn\",\"type\":\"DYNAMIC\","
	" \"dynamicTaskNameParam\":\"which\","
	" \"inputParameters\":{\"which\":\"${workflow.input.which}\"}},"
	"{\"name\":\"opt\",\"taskReferenceName\":\"opt\",\"optional\":true},"
	"{\"name\":\"t\",\"taskReferenceName\":\"stop\",\"type\":\"TERMINATE\","
	" \"inputParameters\":{\"terminationStatus\":\"COMPLETED\","
	"  \"workflowOutput\":{\"opt\":\"${opt.status}\"}}},"
	"{\"name\":\"work\",\"taskReferenceName\":\"never\"}]}";

Test(misc, dynamic_optional_and_terminate)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_task_def("other", 0);
	put_task_def("opt", 0);
	put_workflow(misc_wf);
	char id[37];
	start_workflow("misc", "{\"which\":\"other\"}", id);
	json_t *t = poll_one("other");
	cr_assert_str_eq(e2e_str_at(t, "refName"), "dyn");
	complete("other", t, json_object());
	json_decref(t);
	t = poll_one("opt");
	fail("opt", t, "not today");
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "opt"), "COMPLETED_WITH_ERRORS");
	cr_assert(json_eq_text(json_object_get(wf, "output"),
			       "{\"opt\":\"COMPLETED_WITH_ERRORS\"}"),
		  "%s", e2e_last_body);
	cr_assert_null(task_of(wf, "never"));
	json_decref(wf);
}

static const char terminate_wf[] =
	"{\"name\":\"term\",\"version\":1,\"tasks\":["
	"{\"name\":\"t\",\"taskReferenceName\":\"stop\",\"type\":\"TERMINATE\","
	" \"inputParameters\":{\"terminationStatus\":\"FAILED\","
	"  \"terminationReason\":\"nope\",\"workflowOutput\":{\"a\":1}}}]}";

Test(misc, terminate_failed)
{
	e2e_start(NULL);
	put_workflow(terminate_wf);
	char id[37];
	start_workflow("term", "{}", id);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(e2e_str_at(wf, "reason"), "nope");
	cr_assert(json_eq_text(json_object_get(wf, "output"), "{\"a\":1}"),
		  "%s", e2e_last_body);
	json_decref(wf);
}

/* ========================================================= JavaScript */

static const char switch_js_wf[] =
	"{\"name\":\"swjs\",\"version\":1,\"tasks\":["
	"{\"name\":\"sw\",\"taskReferenceName\":\"sw\",\"type\":\"SWITCH\","
	" \"evaluatorType\":\"graaljs\","
	" \"expression\":\"$.n > 5 ? 'big' : 'small'\","
	" \"inputParameters\":{\"n\":\"${workflow.input.n}\"},"
	" \"decisionCases\":{"
	"  \"big\":[{\"name\":\"work\",\"taskReferenceName\":\"w_big\"}],"
	"  \"small\":[{\"name\":\"work\",\"taskReferenceName\":\"w_small\"}]}},"
	"{\"name\":\"work\",\"taskReferenceName\":\"last\"}]}";

Test(switch_op, javascript_evaluator)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(switch_js_wf);
	char big[37], small[37];
	char seen[256];
	start_workflow("swjs", "{\"n\":9}", big);
	work_until_last(seen, sizeof(seen), NULL);
	cr_assert_str_eq(seen, "w_big last");
	start_workflow("swjs", "{\"n\":1}", small);
	work_until_last(seen, sizeof(seen), NULL);
	cr_assert_str_eq(seen, "w_small last");
	json_decref(e2e_wait_status(big, "COMPLETED", DECIDE_TIMEOUT_MS * 4));
	json_decref(e2e_wait_status(small, "COMPLETED", DECIDE_TIMEOUT_MS * 4));
}

static const char switch_throw_wf[] =
	"{\"name\":\"swthrow\",\"version\":1,\"tasks\":["
	"{\"name\":\"sw\",\"taskReferenceName\":\"sw\",\"type\":\"SWITCH\","
	" \"evaluatorType\":\"javascript\","
	" \"expression\":\"throw new Error('no case for you')\","
	" \"decisionCases\":{\"a\":[]}}]}";

Test(switch_op, a_script_that_throws_fails_the_workflow)
{
	e2e_start(NULL);
	put_workflow(switch_throw_wf);
	char id[37];
	start_workflow("swthrow", "{}", id);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS * 4);
	cr_assert(strstr(e2e_str_at(wf, "reason"), "no case for you"), "%s",
		  e2e_last_body);
	cr_assert_str_eq(status_of(wf, "sw"), "FAILED");
	json_decref(wf);
}

static const char loop_wf[] =
	"{\"name\":\"loopc\",\"version\":1,\"tasks\":["
	"{\"name\":\"loop\",\"taskReferenceName\":\"loop\","
	" \"type\":\"DO_WHILE\","
	" \"loopCondition\":\"$.loop['iteration'] < $.times\","
	" \"inputParameters\":{\"times\":\"${workflow.input.times}\","
	"  \"keepLastN\":2},"
	" \"loopOver\":[{\"name\":\"work\",\"taskReferenceName\":\"body\","
	"   \"inputParameters\":{\"it\":\"${loop.output.iteration}\"}}]}]}";

Test(loop, loop_condition_and_keep_last_n)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(loop_wf);
	char id[37];
	start_workflow("loopc", "{\"times\":4}", id);
	for (int i = 1; i <= 4; i++) {
		json_t *t = poll_one("work");
		cr_assert_eq(int_at(json_object_get(t, "input"), "it"), i);
		cr_assert_eq(int_at(t, "iteration"), i, "%s", e2e_last_body);
		complete("work", t, json_pack("{s:i}", "n", i));
		json_decref(t);
	}
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	json_t *out = json_object_get(task_of(wf, "loop"), "output");
	cr_assert_eq(int_at(out, "iteration"), 4, "%s", e2e_last_body);
	cr_assert_null(json_object_get(out, "1"), "%s", e2e_last_body);
	cr_assert_null(json_object_get(out, "2"), "%s", e2e_last_body);
	cr_assert(
		json_eq_text(json_object_get(out, "4"), "{\"body\":{\"n\":4}}"),
		"%s", e2e_last_body);
	json_decref(wf);
}

static const char loop_throw_wf[] =
	"{\"name\":\"loopt\",\"version\":1,\"tasks\":["
	"{\"name\":\"loop\",\"taskReferenceName\":\"loop\","
	" \"type\":\"DO_WHILE\","
	" \"loopCondition\":\"$.body.missing.field > 1\","
	" \"loopOver\":[{\"name\":\"n\",\"taskReferenceName\":\"body\","
	"   \"type\":\"NOOP\"}]},"
	"{\"name\":\"n\",\"taskReferenceName\":\"after\",\"type\":\"NOOP\"}]}";

Test(loop, a_condition_that_throws_fails_the_loop_and_the_workflow)
{
	e2e_start(NULL);
	put_workflow(loop_throw_wf);
	char id[37];
	start_workflow("loopt", "{}", id);
	json_t *wf = e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "loop"), "FAILED");
	cr_assert(strstr(e2e_str_at(wf, "reason"), "loopCondition"), "%s",
		  e2e_last_body);
	cr_assert(strstr(e2e_str_at(wf, "reason"), "TypeError"), "%s",
		  e2e_last_body);
	cr_assert_null(task_of(wf, "after"));
	json_decref(wf);
}

static const char noop_loop_wf[] =
	"{\"name\":\"loopn\",\"version\":1,\"tasks\":["
	"{\"name\":\"loop\",\"taskReferenceName\":\"loop\","
	" \"type\":\"DO_WHILE\","
	" \"loopCondition\":\"$.loop.iteration < 50\","
	" \"loopOver\":[{\"name\":\"n\",\"taskReferenceName\":\"body\","
	"   \"type\":\"SET_VARIABLE\","
	"   \"inputParameters\":{\"i\":\"${loop.output.iteration}\"}}]}],"
	"\"outputParameters\":{\"i\":\"${workflow.variables.i}\"}}";

Test(loop, a_loop_of_operators_runs_in_one_evaluation)
{
	e2e_start(NULL);
	put_workflow(noop_loop_wf);
	char id[37];
	start_workflow("loopn", "{}", id);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert(json_eq_text(json_object_get(wf, "output"), "{\"i\":50}"),
		  "%s", e2e_last_body);
	cr_assert_eq(count_ref(wf, "body"), 50);
	json_decref(wf);
	cr_assert_eq(
		e2e_sql_int("SELECT \"version\" FROM \"WorkflowExecutions\""
			    " WHERE \"id\" = $1::uuid",
			    id),
		1);
}

/* ========================================================= startDelay */

static const char delay_wf[] =
	"{\"name\":\"delay\",\"version\":1,\"tasks\":["
	"{\"name\":\"work\",\"taskReferenceName\":\"late\",\"startDelay\":2}]}";

static bool
scheduled(void *arg)
{
	return e2e_sql_int("SELECT count(*) FROM \"TaskExecutions\""
			   " WHERE \"workflowId\" = $1::uuid",
			   arg) > 0;
}

Test(misc, start_delay_holds_the_task_back)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(delay_wf);
	char id[37];
	start_workflow("delay", "{}", id);
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, scheduled, id));
	/* Queued, but not available before its delay. */
	cr_assert_eq(e2e_sql_int("SELECT count(*) FROM \"TaskQueues\" q"
				 " WHERE q.\"workflowId\" = $1::uuid"
				 " AND q.\"leasedBy\" IS NULL"
				 " AND q.\"leaseExpiresAt\" > now()",
				 id),
		     1);
	cr_assert_eq(e2e_sql_int("SELECT \"startDelaySeconds\" FROM"
				 " \"TaskExecutions\" WHERE \"workflowId\" ="
				 " $1::uuid",
				 id),
		     2);
	json_t *t = poll_one("work");
	complete("work", t, json_object());
	json_decref(t);
	json_decref(e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4));
}

/* ============================================================ examples */

static char *
read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s (run from the repository root)",
			   path);
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

/* Registers examples/operators/<name>.workflow.json and starts it with
 * its input; returns the workflow's id in id. */
static void
run_example(const char *name, char id[37])
{
	char path[256];
	snprintf(path, sizeof(path), "examples/operators/%s.workflow.json",
		 name);
	char *def = read_text(path);
	put_workflow(def);
	json_t *d = json_loads(def, 0, NULL);
	free(def);
	snprintf(path, sizeof(path), "examples/operators/%s.input.json", name);
	char *input = read_text(path);
	start_workflow(json_string_value(json_object_get(d, "name")), input,
		       id);
	free(input);
	json_decref(d);
}

static void
example_output(const char *name, const char *want)
{
	char id[37];
	run_example(name, id);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert(json_eq_text(json_object_get(wf, "output"), want),
		  "example %s: %s", name, e2e_last_body);
	json_decref(wf);
}

TestSuite(examples, .fini = e2e_stop);

Test(examples, every_operator_example_runs)
{
	e2e_start(NULL);
	example_output("switch", "{\"case\":\"fruit\",\"shelf\":\"produce\"}");
	example_output("switch_js", "{\"review\":true}");
	example_output("decision", "{\"case\":\"fr\"}");
	example_output("fork_join", "{\"joined\":{\"left\":{},\"right\":{}},"
				    "\"side\":\"right\"}");
	example_output("dynamic_fork",
		       "{\"branches\":{\"step_a\":{},\"step_b\":{}}}");
	example_output("do_while", "{\"iterations\":3,\"last\":3}");
	example_output("terminate", "{\"shipped\":false}");
	example_output("set_variable", "{\"text\":\"hello, world\"}");

	char id[37];
	run_example("do_while_items", id);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	json_t *rounds =
		json_object_get(json_object_get(wf, "output"), "rounds");
	cr_assert_eq(int_at(rounds, "iteration"), 3, "%s", e2e_last_body);
	cr_assert_str_eq(e2e_str_at(rounds, "loopItem"), "blue");
	cr_assert(json_eq_text(json_object_get(wf, "variables"),
			       "{\"color\":\"blue\",\"index\":2}"),
		  "%s", e2e_last_body);
	json_decref(wf);

	char *greet = read_text("examples/hello/greet.task.json");
	json_decref(e2e_call("PUT", NS "/task-definitions/greet", greet, 201));
	free(greet);
	run_example("dynamic", id);
	json_t *t = poll_one("greet");
	cr_assert_str_eq(e2e_str_at(t, "refName"), "pick");
	complete("greet", t, json_pack("{s:s}", "greeting", "Hello, Ada"));
	json_decref(t);
	t = poll_one("greet");
	cr_assert_str_eq(e2e_str_at(t, "refName"), "maybe");
	fail("greet", t, "not in the mood");
	json_decref(t);
	wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert(json_eq_text(json_object_get(wf, "output"),
			       "{\"greeting\":\"Hello, Ada\","
			       "\"maybe\":\"COMPLETED_WITH_ERRORS\"}"),
		  "%s", e2e_last_body);
	json_decref(wf);
}

Test(fork, retrying_a_failed_branch_reopens_the_join)
{
	e2e_start(NULL);
	put_task_def("work", 0);
	put_workflow(fork_wf);
	char id[37];
	start_workflow("fk", "{}", id);
	json_t *t = poll_one("work");
	char ref[64];
	snprintf(ref, sizeof(ref), "%s", e2e_str_at(t, "refName"));
	fail("work", t, "broken branch");
	json_decref(t);
	json_decref(e2e_wait_status(id, "FAILED", DECIDE_TIMEOUT_MS * 4));

	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/retry", id);
	json_decref(e2e_call("POST", path, NULL, 200));
	/* Both worker branches run again: the failed one, and the one the
	 * failure cancelled (counting it as ended would let the JOIN finish
	 * without it). */
	bool seen_b1 = false, seen_b2 = false;
	for (int i = 0; i < 2; i++) {
		t = poll_one("work");
		const char *r = e2e_str_at(t, "refName");
		cr_assert(strcmp(r, "b1") == 0 || strcmp(r, "b2") == 0, "%s",
			  r);
		cr_assert_eq(int_at(t, "attempt"), 1, "%s", r);
		if (strcmp(r, "b1") == 0)
			seen_b1 = true;
		else
			seen_b2 = true;
		complete("work", t, json_pack("{s:s}", "by", r));
		json_decref(t);
	}
	cr_assert(seen_b1 && seen_b2);
	t = poll_one("work");
	cr_assert_str_eq(e2e_str_at(t, "refName"), "last");
	json_t *j = json_object_get(json_object_get(t, "input"), "j");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(j, "b2"), "by")),
			 "b2", "%s", json_dumps(j, 0));
	complete("work", t, json_object());
	json_decref(t);
	json_t *wf = e2e_wait_status(id, "COMPLETED", DECIDE_TIMEOUT_MS * 4);
	cr_assert_str_eq(status_of(wf, "j"), "COMPLETED");
	cr_assert_eq(count_ref(wf, "j"), 2);
	json_decref(wf);
	snprintf(path, sizeof(path), NS "/workflows/%s/events", id);
	json_t *h = e2e_call("GET", path, NULL, 200);
	size_t i;
	json_t *ev;
	json_array_foreach (json_object_get(h, "events"), i, ev)
		cr_assert_eq(json_integer_value(json_object_get(ev, "seq")),
			     (json_int_t)i + 1, "history has a gap at %zu", i);
	json_decref(h);
}
