/*
 * End-to-end tests of the tasks that reach other workflows, and of gates,
 * on the real nodeflow binary over HTTP:
 *
 *   sub_workflow    a child runs, its output reaches the parent's task and
 *                   the next task; the child carries its parent's ids.
 *   child_fails     a failing child fails the parent task and the parent.
 *   child_times_out a child past its timeoutSeconds fails the parent.
 *   child_terminated terminating a child fails the parent's task (its
 *                   TASK_FAILED event in the parent's history).
 *   cascade         terminating a parent terminates its child and
 *                   grandchild (an inline child definition).
 *   ended_with_its_child a parent that fails in the decider batch that
 *                   also holds its child's next evaluation: the child is
 *                   terminated, and what it would have scheduled (a
 *                   grandchild) is never written.
 *   terminate_deadlock a terminate that loses a deadlock on the child's
 *                   row (as against a decider batch that holds the child
 *                   and waits for the parent) runs again: it answers
 *                   only when parent and child are TERMINATED.
 *   retry           retrying a parent whose child failed retries that same
 *                   child, and the parent completes with it.
 *   start_workflow  fire and forget: the task completes with the new
 *                   workflow's id; the new one has no parent.  An unknown
 *                   definition fails the task.
 *   failure_wf      a failing workflow starts its failureWorkflow with the
 *                   failed workflow's id, reason, status and input.
 *   tree            the sub-workflow tree, depth-bounded; 404 for no such
 *                   workflow.
 *   wait            WAIT by duration completes through its timer; WAIT and
 *                   HUMAN without one complete (or fail) through the API.
 *   event           EVENT writes its outbox row and completes.
 *   event_async     EVENT with asyncComplete writes its outbox row and
 *                   stays IN_PROGRESS until Conductor's task update
 *                   completes it (by reference) or fails it (by id).
 *   validation      registration errors at their JSON paths.
 *   with_operators  children in parallel fork branches joined; an optional
 *                   child that fails (COMPLETED_WITH_ERRORS) lets the
 *                   workflow go on; a branch's child terminated with it.
 *   examples        examples/subflows/ registered and run as its README
 *                   tells (approved, rejected into the failure workflow,
 *                   a past `until`, an inline sub-workflow).
 *
 * Every test gets its own database and server.  Waits are deadlines
 * (th_wait_until), never bare sleeps.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WAIT_MS = 20000 };

#define NS E2E_NS

static void
setup(void)
{
	const char *flags[] = {"--timers-interval-ms", "100", NULL};
	e2e_start(flags);
}

TestSuite(subflows, .init = setup, .fini = e2e_stop, .timeout = 120);

/* ---------------------------------------------------------- HTTP helpers */

static void
define(const char *def)
{
	json_decref(e2e_call("POST", NS "/workflow-definitions", def, 201));
}

static void
define_task(const char *name, int retries)
{
	char path[256], body[256];
	snprintf(path, sizeof(path), NS "/task-definitions/%s", name);
	snprintf(body, sizeof(body),
		 "{\"name\":\"%s\",\"retryCount\":%d,"
		 "\"responseTimeoutSeconds\":60}",
		 name, retries);
	json_decref(e2e_call("PUT", path, body, 201));
}

static void
start(const char *body, char id[37])
{
	json_t *v = e2e_call("POST", NS "/workflows", body, 201);
	snprintf(id, 37, "%s", json_string_value(json_object_get(v, "id")));
	json_decref(v);
}

static const char *
str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

struct status_probe {
	const char *id;
	const char *want;
};

static bool
has_status(void *arg)
{
	struct status_probe *p = arg;
	json_t *v = e2e_get_workflow(p->id);
	bool ok = strcmp(str(v, "status"), p->want) == 0;
	json_decref(v);
	return ok;
}

static void
wait_status(const char *id, const char *want)
{
	struct status_probe p = {id, want};
	if (!th_wait_until(WAIT_MS, has_status, &p)) {
		json_t *v = e2e_get_workflow(id);
		char *text = json_dumps(v, JSON_COMPACT);
		cr_assert_fail("workflow %s never became %s: %s", id, want,
			       text);
	}
}

/* The latest attempt of task ref in execution v (borrowed), or NULL. */
static json_t *
task_of(json_t *v, const char *ref)
{
	json_t *best = NULL;
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(v, "tasks"), i, t) {
		if (strcmp(str(t, "refName"), ref) == 0)
			best = t;
	}
	return best;
}

struct task_probe {
	const char *id;
	const char *ref;
	const char *status;
	char sub[37];
};

static bool
task_in(void *arg)
{
	struct task_probe *p = arg;
	json_t *v = e2e_get_workflow(p->id);
	json_t *t = task_of(v, p->ref);
	bool ok = t && strcmp(str(t, "status"), p->status) == 0;
	if (ok)
		snprintf(p->sub, sizeof(p->sub), "%s",
			 str(json_object_get(t, "output"), "subWorkflowId"));
	json_decref(v);
	return ok;
}

/* Waits for task ref of workflow id to be in status; returns the child it
 * runs ("" for none). */
static const char *
wait_task(const char *id, const char *ref, const char *status)
{
	static struct task_probe p;
	p = (struct task_probe){id, ref, status, ""};
	cr_assert(th_wait_until(WAIT_MS, task_in, &p),
		  "task %s of %s never became %s: %s", ref, id, status,
		  e2e_last_body);
	return p.sub;
}

struct poll_probe {
	const char *queue;
	json_t *task;
};

static bool
polled(void *arg)
{
	struct poll_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/poll", p->queue);
	json_t *v = e2e_call("POST", path, "{\"workerId\":\"w\"}", 200);
	json_t *t = json_array_get(json_object_get(v, "tasks"), 0);
	if (t)
		p->task = json_incref(t);
	json_decref(v);
	return p->task != NULL;
}

static json_t *
poll_one(const char *queue)
{
	struct poll_probe p = {queue, NULL};
	cr_assert(th_wait_until(WAIT_MS, polled, &p), "nothing on queue %s",
		  queue);
	return p.task;
}

static void
finish(const char *queue, json_t *task, const char *verb, const char *body)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/queues/%s/tasks/%s/%s", queue,
		 str(task, "id"), verb);
	json_decref(e2e_call("POST", path, body, 200));
}

static json_t *
signal_task(const char *id, const char *ref, const char *verb, const char *body,
	    long status)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tasks/%s/%s", id, ref,
		 verb);
	return e2e_call("POST", path, body, status);
}

static json_t *
action(const char *id, const char *name, long status)
{
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/%s", id, name);
	return e2e_call("POST", path, "{}", status);
}

static long long
sql_int(const char *q, const char *param)
{
	const char *params[] = {param};
	return th_int(e2e_sql(), q, 1, params);
}

/* ------------------------------------------------------------ the tests */

static void
define_child_and_parent(int child_retries)
{
	define_task("work", child_retries);
	define("{\"name\":\"child\",\"tasks\":[{\"name\":\"work\","
	       "\"taskReferenceName\":\"w\",\"inputParameters\":"
	       "{\"x\":\"${workflow.input.x}\"}}],"
	       "\"outputParameters\":{\"doubled\":\"${w.output.v}\"}}");
	define("{\"name\":\"parent\",\"tasks\":["
	       "{\"name\":\"child\",\"taskReferenceName\":\"c\","
	       "\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":{\"name\":"
	       "\"child\",\"version\":1},\"inputParameters\":"
	       "{\"x\":\"${workflow.input.x}\"}},"
	       "{\"name\":\"work\",\"taskReferenceName\":\"after\","
	       "\"inputParameters\":{\"got\":\"${c.output.doubled}\"}}]}");
}

Test(subflows, sub_workflow)
{
	define_child_and_parent(0);
	char parent[37];
	start("{\"name\":\"parent\",\"input\":{\"x\":21}}", parent);
	char child[37];
	snprintf(child, sizeof(child), "%s",
		 wait_task(parent, "c", "IN_PROGRESS"));
	cr_assert_eq(strlen(child), 36, "no subWorkflowId: %s", e2e_last_body);

	json_t *cv = e2e_get_workflow(child);
	cr_assert_str_eq(str(cv, "parentWorkflowId"), parent);
	json_t *pv = e2e_get_workflow(parent);
	cr_assert_str_eq(str(cv, "parentTaskId"), str(task_of(pv, "c"), "id"));
	cr_assert_str_eq(str(task_of(pv, "c"), "subWorkflowId"), child);
	cr_assert_eq(json_integer_value(json_object_get(
			     json_object_get(cv, "input"), "x")),
		     21);
	json_decref(cv);
	json_decref(pv);

	json_t *t = poll_one("work");
	cr_assert_str_eq(str(t, "workflowId"), child);
	finish("work", t, "complete",
	       "{\"workerId\":\"w\",\"output\":{\"v\":42}}");
	json_decref(t);
	wait_status(child, "COMPLETED");

	t = poll_one("work");
	cr_assert_str_eq(str(t, "workflowId"), parent);
	cr_assert_eq(json_integer_value(json_object_get(
			     json_object_get(t, "input"), "got")),
		     42, "the child's output did not reach the next task: %s",
		     e2e_last_body);
	finish("work", t, "complete", "{\"workerId\":\"w\",\"output\":{}}");
	json_decref(t);
	wait_status(parent, "COMPLETED");

	pv = e2e_get_workflow(parent);
	json_t *out = json_object_get(task_of(pv, "c"), "output");
	cr_assert_eq(json_integer_value(json_object_get(out, "doubled")), 42);
	cr_assert_str_eq(str(out, "subWorkflowId"), child);
	json_decref(pv);
}

Test(subflows, child_fails)
{
	define_child_and_parent(0);
	char parent[37], child[37];
	start("{\"name\":\"parent\",\"input\":{\"x\":1}}", parent);
	snprintf(child, sizeof(child), "%s",
		 wait_task(parent, "c", "IN_PROGRESS"));
	json_t *t = poll_one("work");
	finish("work", t, "fail", "{\"workerId\":\"w\",\"reason\":\"boom\"}");
	json_decref(t);
	wait_status(child, "FAILED");
	wait_status(parent, "FAILED");
	json_t *pv = e2e_get_workflow(parent);
	cr_assert(strstr(str(task_of(pv, "c"), "reason"), child),
		  "reason does not name the child: %s", e2e_last_body);
	cr_assert(strstr(str(task_of(pv, "c"), "reason"), "boom"), "%s",
		  e2e_last_body);
	cr_assert_str_eq(str(task_of(pv, "c"), "status"), "FAILED");
	json_decref(pv);
}

Test(subflows, child_times_out)
{
	define("{\"name\":\"slow\",\"timeoutSeconds\":1,\"timeoutPolicy\":"
	       "\"TIME_OUT_WF\",\"tasks\":[{\"name\":\"gate\","
	       "\"taskReferenceName\":\"g\",\"type\":\"HUMAN\"}]}");
	define("{\"name\":\"waiter\",\"tasks\":[{\"name\":\"slow\","
	       "\"taskReferenceName\":\"c\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"name\":\"slow\"}}]}");
	char parent[37], child[37];
	start("{\"name\":\"waiter\"}", parent);
	snprintf(child, sizeof(child), "%s",
		 wait_task(parent, "c", "IN_PROGRESS"));
	wait_status(child, "TIMED_OUT");
	wait_status(parent, "FAILED");
	json_t *pv = e2e_get_workflow(parent);
	cr_assert(strstr(str(task_of(pv, "c"), "reason"), "TIMED_OUT"), "%s",
		  e2e_last_body);
	json_decref(pv);
}

Test(subflows, cascade)
{
	/* parent → mid (registered) → leaf (inline definition) */
	define("{\"name\":\"mid\",\"tasks\":[{\"name\":\"leaf\","
	       "\"taskReferenceName\":\"l\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"workflowDefinition\":{\"name\":"
	       "\"leaf\",\"tasks\":[{\"name\":\"gate\",\"taskReferenceName\":"
	       "\"g\",\"type\":\"HUMAN\"}]}}}]}");
	define("{\"name\":\"top\",\"tasks\":[{\"name\":\"mid\","
	       "\"taskReferenceName\":\"m\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"name\":\"mid\"}}]}");
	char top[37], mid[37], leaf[37];
	start("{\"name\":\"top\"}", top);
	snprintf(mid, sizeof(mid), "%s", wait_task(top, "m", "IN_PROGRESS"));
	snprintf(leaf, sizeof(leaf), "%s", wait_task(mid, "l", "IN_PROGRESS"));
	wait_task(leaf, "g", "IN_PROGRESS");
	json_t *lv = e2e_get_workflow(leaf);
	cr_assert_str_eq(str(lv, "name"), "leaf");
	json_decref(lv);

	json_t *v = action(top, "terminate", 200);
	cr_assert_str_eq(str(v, "status"), "TERMINATED");
	json_decref(v);
	/* In the same transaction: no waiting needed. */
	v = e2e_get_workflow(mid);
	cr_assert_str_eq(str(v, "status"), "TERMINATED");
	json_decref(v);
	v = e2e_get_workflow(leaf);
	cr_assert_str_eq(str(v, "status"), "TERMINATED");
	cr_assert_str_eq(str(task_of(v, "g"), "status"), "CANCELED");
	json_decref(v);
}

Test(subflows, retry)
{
	define_child_and_parent(0);
	char parent[37], child[37];
	start("{\"name\":\"parent\",\"input\":{\"x\":2}}", parent);
	snprintf(child, sizeof(child), "%s",
		 wait_task(parent, "c", "IN_PROGRESS"));
	json_t *t = poll_one("work");
	finish("work", t, "fail", "{\"workerId\":\"w\",\"reason\":\"flaky\"}");
	json_decref(t);
	wait_status(parent, "FAILED");

	json_t *v = action(parent, "retry", 200);
	cr_assert_str_eq(str(v, "status"), "RUNNING");
	json_decref(v);
	v = e2e_get_workflow(child);
	cr_assert_str_eq(str(v, "status"), "RUNNING",
			 "the child was not retried");
	json_decref(v);
	cr_assert_str_eq(wait_task(parent, "c", "IN_PROGRESS"), child,
			 "the retried task runs another child");

	t = poll_one("work");
	cr_assert_str_eq(str(t, "workflowId"), child);
	cr_assert_eq(json_integer_value(json_object_get(t, "attempt")), 1);
	finish("work", t, "complete",
	       "{\"workerId\":\"w\",\"output\":{\"v\":5}}");
	json_decref(t);
	wait_status(child, "COMPLETED");
	t = poll_one("work");
	cr_assert_str_eq(str(t, "workflowId"), parent);
	finish("work", t, "complete", "{\"workerId\":\"w\",\"output\":{}}");
	json_decref(t);
	wait_status(parent, "COMPLETED");

	/* One child in all: both attempts of c ran it. */
	cr_assert_eq(sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
			     " WHERE \"parentWorkflowId\" = $1::uuid",
			     parent),
		     1);
	cr_assert_eq(
		sql_int("SELECT count(DISTINCT \"subWorkflowId\") FROM"
			" \"TaskExecutions\" WHERE \"workflowId\" = $1::uuid"
			" AND \"refName\" = 'c'",
			parent),
		1);
}

Test(subflows, start_workflow)
{
	define("{\"name\":\"target\",\"tasks\":[{\"name\":\"gate\","
	       "\"taskReferenceName\":\"g\",\"type\":\"HUMAN\"}]}");
	define("{\"name\":\"launcher\",\"tasks\":[{\"name\":\"go\","
	       "\"taskReferenceName\":\"s\",\"type\":\"START_WORKFLOW\","
	       "\"inputParameters\":{\"startWorkflow\":{\"name\":\"target\","
	       "\"input\":{\"k\":\"${workflow.input.k}\"},"
	       "\"correlationId\":\"c-1\"}}}]}");
	char id[37];
	start("{\"name\":\"launcher\",\"input\":{\"k\":\"v\"}}", id);
	wait_status(id, "COMPLETED");
	json_t *v = e2e_get_workflow(id);
	const char *started =
		str(json_object_get(task_of(v, "s"), "output"), "workflowId");
	cr_assert_eq(strlen(started), 36, "%s", e2e_last_body);
	char target[37];
	snprintf(target, sizeof(target), "%s", started);
	json_decref(v);
	v = e2e_get_workflow(target);
	cr_assert_str_eq(str(v, "name"), "target");
	cr_assert_str_eq(str(v, "status"), "RUNNING");
	cr_assert_str_eq(str(v, "correlationId"), "c-1");
	cr_assert_str_eq(str(json_object_get(v, "input"), "k"), "v");
	cr_assert(json_is_null(json_object_get(v, "parentWorkflowId")));
	json_decref(v);

	/* An unknown definition fails the task, and the workflow. */
	define("{\"name\":\"misfire\",\"tasks\":[{\"name\":\"go\","
	       "\"taskReferenceName\":\"s\",\"type\":\"START_WORKFLOW\","
	       "\"inputParameters\":{\"startWorkflow\":{\"name\":\"nope\"}}}]}");
	start("{\"name\":\"misfire\"}", id);
	wait_status(id, "FAILED");
	v = e2e_get_workflow(id);
	cr_assert(strstr(str(task_of(v, "s"), "reason"), "nope"), "%s",
		  e2e_last_body);
	json_decref(v);
	/* Once it exists, a retry runs the task again, and it starts. */
	define("{\"name\":\"nope\",\"tasks\":[{\"name\":\"n\","
	       "\"taskReferenceName\":\"n\",\"type\":\"NOOP\"}]}");
	json_decref(action(id, "retry", 200));
	wait_status(id, "COMPLETED");
	v = e2e_get_workflow(id);
	snprintf(target, sizeof(target), "%s",
		 str(json_object_get(task_of(v, "s"), "output"), "workflowId"));
	json_decref(v);
	wait_status(target, "COMPLETED");
}

Test(subflows, failure_wf)
{
	define_task("work", 0);
	define("{\"name\":\"cleanup\",\"tasks\":[{\"name\":\"gate\","
	       "\"taskReferenceName\":\"g\",\"type\":\"HUMAN\"}]}");
	define("{\"name\":\"fragile\",\"failureWorkflow\":\"cleanup\","
	       "\"tasks\":[{\"name\":\"work\",\"taskReferenceName\":\"w\"}]}");
	char id[37];
	start("{\"name\":\"fragile\",\"input\":{\"order\":7},"
	      "\"correlationId\":\"o-7\"}",
	      id);
	json_t *t = poll_one("work");
	finish("work", t, "fail", "{\"workerId\":\"w\",\"reason\":\"broken\"}");
	json_decref(t);
	wait_status(id, "FAILED");
	json_t *v = e2e_get_workflow(id);
	char cleanup[37];
	snprintf(cleanup, sizeof(cleanup), "%s", str(v, "failureWorkflowId"));
	cr_assert_eq(strlen(cleanup), 36, "no failureWorkflowId: %s",
		     e2e_last_body);
	json_decref(v);

	v = e2e_get_workflow(cleanup);
	cr_assert_str_eq(str(v, "name"), "cleanup");
	cr_assert_str_eq(str(v, "correlationId"), "o-7");
	json_t *in = json_object_get(v, "input");
	cr_assert_str_eq(str(in, "workflowId"), id);
	cr_assert_str_eq(str(in, "failureStatus"), "FAILED");
	cr_assert(strstr(str(in, "reason"), "broken"), "%s", e2e_last_body);
	cr_assert_eq(json_integer_value(json_object_get(in, "order")), 7);
	cr_assert_eq(strlen(str(in, "failureTaskId")), 36, "%s", e2e_last_body);
	json_t *fw = json_object_get(in, "failedWorkflow");
	cr_assert_str_eq(str(fw, "workflowType"), "fragile");
	cr_assert_eq(json_integer_value(json_object_get(
			     json_object_get(fw, "input"), "order")),
		     7);
	json_decref(v);
}

Test(subflows, tree)
{
	define("{\"name\":\"leaf\",\"tasks\":[{\"name\":\"gate\","
	       "\"taskReferenceName\":\"g\",\"type\":\"HUMAN\"}]}");
	define("{\"name\":\"mid\",\"tasks\":[{\"name\":\"leaf\","
	       "\"taskReferenceName\":\"l\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"name\":\"leaf\"}}]}");
	define("{\"name\":\"root\",\"tasks\":[{\"name\":\"mid\","
	       "\"taskReferenceName\":\"m\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"name\":\"mid\"}}]}");
	char root[37], mid[37], leaf[37];
	start("{\"name\":\"root\"}", root);
	snprintf(mid, sizeof(mid), "%s", wait_task(root, "m", "IN_PROGRESS"));
	snprintf(leaf, sizeof(leaf), "%s", wait_task(mid, "l", "IN_PROGRESS"));

	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tree", root);
	json_t *v = e2e_call("GET", path, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(v, "size")), 3, "%s",
		     e2e_last_body);
	cr_assert(json_is_false(json_object_get(v, "truncated")));
	json_t *r = json_object_get(v, "tree");
	cr_assert_str_eq(str(r, "id"), root);
	cr_assert_str_eq(str(r, "name"), "root");
	json_t *m = json_array_get(json_object_get(r, "children"), 0);
	cr_assert_str_eq(str(m, "id"), mid);
	cr_assert_str_eq(str(m, "parentTaskRefName"), "m");
	cr_assert_str_eq(str(m, "status"), "RUNNING");
	json_t *l = json_array_get(json_object_get(m, "children"), 0);
	cr_assert_str_eq(str(l, "id"), leaf);
	cr_assert_str_eq(str(l, "name"), "leaf");
	cr_assert_eq(json_array_size(json_object_get(l, "children")), 0);
	json_decref(v);

	snprintf(path, sizeof(path), NS "/workflows/%s/tree?maxDepth=1", root);
	v = e2e_call("GET", path, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(v, "size")), 2, "%s",
		     e2e_last_body);
	json_decref(v);
	snprintf(path, sizeof(path), NS "/workflows/%s/tree?limit=1", root);
	v = e2e_call("GET", path, NULL, 200);
	cr_assert(json_is_true(json_object_get(v, "truncated")), "%s",
		  e2e_last_body);
	json_decref(v);
	/* From the middle: its own subtree. */
	snprintf(path, sizeof(path), NS "/workflows/%s/tree", mid);
	v = e2e_call("GET", path, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(v, "size")), 2);
	json_decref(v);
	json_decref(e2e_call("GET",
			     NS
			     "/workflows/01900000-0000-7000-8000-000000000000"
			     "/tree",
			     NULL, 404));
}

Test(subflows, wait)
{
	define("{\"name\":\"pause\",\"tasks\":[{\"name\":\"nap\","
	       "\"taskReferenceName\":\"n\",\"type\":\"WAIT\","
	       "\"inputParameters\":{\"duration\":\"1s\"}}]}");
	char id[37];
	start("{\"name\":\"pause\"}", id);
	wait_status(id, "COMPLETED");
	cr_assert_eq(sql_int("SELECT count(*) FROM \"Timers\" WHERE"
			     " \"workflowId\" = $1::uuid AND \"kind\" = 'wait'"
			     " AND \"claimedAt\" IS NOT NULL",
			     id),
		     1, "the wait timer did not fire");

	/* Signalled: WAIT without a duration, then HUMAN. */
	define("{\"name\":\"gates\",\"tasks\":[{\"name\":\"hold\","
	       "\"taskReferenceName\":\"w\",\"type\":\"WAIT\"},"
	       "{\"name\":\"approve\",\"taskReferenceName\":\"h\","
	       "\"type\":\"HUMAN\",\"inputParameters\":{\"seen\":"
	       "\"${w.output.note}\"}}]}");
	start("{\"name\":\"gates\"}", id);
	wait_task(id, "w", "IN_PROGRESS");
	json_decref(signal_task(id, "h", "complete", "{}", 404));
	json_decref(signal_task(id, "w", "complete",
				"{\"output\":{\"note\":\"hi\"}}", 200));
	json_decref(signal_task(id, "w", "complete", "{}", 409));
	wait_task(id, "h", "IN_PROGRESS");
	json_t *v = e2e_get_workflow(id);
	cr_assert_str_eq(str(json_object_get(task_of(v, "h"), "input"), "seen"),
			 "hi");
	json_decref(v);
	json_decref(signal_task(id, "h", "complete",
				"{\"output\":{\"approved\":true}}", 200));
	wait_status(id, "COMPLETED");
	v = e2e_get_workflow(id);
	cr_assert(json_is_true(json_object_get(json_object_get(v, "output"),
					       "approved")),
		  "%s", e2e_last_body);
	json_decref(v);

	/* A gate failed through the API fails the workflow. */
	start("{\"name\":\"gates\"}", id);
	wait_task(id, "w", "IN_PROGRESS");
	json_decref(
		signal_task(id, "w", "fail", "{\"reason\":\"rejected\"}", 200));
	wait_status(id, "FAILED");
	v = e2e_get_workflow(id);
	cr_assert(strstr(str(v, "reason"), "rejected"), "%s", e2e_last_body);
	json_decref(v);
	/* Retried, the gate opens again. */
	json_decref(action(id, "retry", 200));
	wait_task(id, "w", "IN_PROGRESS");
	json_decref(signal_task(id, "w", "complete", "{}", 200));
	wait_task(id, "h", "IN_PROGRESS");

	/* Only gates are completed here. */
	define_task("work", 0);
	define("{\"name\":\"plain\",\"tasks\":[{\"name\":\"work\","
	       "\"taskReferenceName\":\"p\"}]}");
	start("{\"name\":\"plain\"}", id);
	wait_task(id, "p", "SCHEDULED");
	json_decref(signal_task(id, "p", "complete", "{}", 409));
}

Test(subflows, event)
{
	define("{\"name\":\"notify\",\"tasks\":[{\"name\":\"emit\","
	       "\"taskReferenceName\":\"e\",\"type\":\"EVENT\","
	       "\"sink\":\"kafka:orders\",\"inputParameters\":"
	       "{\"orderId\":\"${workflow.input.id}\"}}]}");
	char id[37];
	start("{\"name\":\"notify\",\"input\":{\"id\":99}}", id);
	wait_status(id, "COMPLETED");
	cr_assert_eq(
		sql_int("SELECT count(*) FROM \"OutboxEvents\" WHERE"
			" \"workflowId\" = $1::uuid AND \"sink\" ="
			" 'kafka:orders' AND (\"payload\"->>'orderId')::int"
			" = 99 AND \"payload\"->>'workflowType' = 'notify'"
			" AND \"publishedAt\" IS NULL",
			id),
		1);
	json_t *v = e2e_get_workflow(id);
	json_t *out = json_object_get(task_of(v, "e"), "output");
	cr_assert_str_eq(str(out, "event_produced"), "kafka:orders");
	cr_assert_eq(json_integer_value(json_object_get(out, "orderId")), 99);
	json_decref(v);
}

Test(subflows, event_async)
{
	define("{\"name\":\"ask\",\"tasks\":[{\"name\":\"emit\","
	       "\"taskReferenceName\":\"e\",\"type\":\"EVENT\","
	       "\"asyncComplete\":true,\"sink\":\"kafka:asks\","
	       "\"inputParameters\":{\"q\":\"${workflow.input.q}\"}}]}");
	char id[37];
	start("{\"name\":\"ask\",\"input\":{\"q\":\"why\"}}", id);
	wait_task(id, "e", "IN_PROGRESS");
	cr_assert_eq(sql_int("SELECT count(*) FROM \"OutboxEvents\" WHERE"
			     " \"workflowId\" = $1::uuid AND \"sink\" ="
			     " 'kafka:asks' AND \"payload\"->>'q' = 'why'",
			     id),
		     1);
	json_t *v = e2e_get_workflow(id);
	cr_assert_str_eq(str(v, "status"), "RUNNING");
	cr_assert_str_eq(str(json_object_get(task_of(v, "e"), "output"),
			     "event_produced"),
			 "kafka:asks");
	json_decref(v);

	/* Completed by reference: the body merged over its output. */
	char path[256];
	snprintf(path, sizeof(path), "/api/tasks/%s/e/COMPLETED", id);
	cr_assert_eq(e2e_send("POST", path, "{\"answer\":42}"), 200);
	wait_status(id, "COMPLETED");
	v = e2e_get_workflow(id);
	json_t *out = json_object_get(task_of(v, "e"), "output");
	cr_assert_eq(json_integer_value(json_object_get(out, "answer")), 42,
		     "%s", e2e_last_body);
	cr_assert_str_eq(str(out, "event_produced"), "kafka:asks");
	json_decref(v);
	cr_assert_eq(e2e_send("POST", path, "{}"), 200); /* finished: ignored */

	/* Failed by id through a TaskResult. */
	start("{\"name\":\"ask\",\"input\":{\"q\":\"who\"}}", id);
	wait_task(id, "e", "IN_PROGRESS");
	v = e2e_get_workflow(id);
	char body[512], progress[512];
	snprintf(body, sizeof(body),
		 "{\"taskId\":\"%s\",\"workflowInstanceId\":\"%s\","
		 "\"status\":\"FAILED\",\"reasonForIncompletion\":\"nobody\"}",
		 str(task_of(v, "e"), "id"), id);
	snprintf(progress, sizeof(progress),
		 "{\"taskId\":\"%s\",\"workflowInstanceId\":\"%s\","
		 "\"status\":\"IN_PROGRESS\"}",
		 str(task_of(v, "e"), "id"), id);
	json_decref(v);
	/* Progress is a worker's word: no worker holds this one. */
	json_decref(e2e_call("POST", "/api/tasks", progress, 409));
	cr_assert_eq(e2e_send("POST", "/api/tasks", body), 200);
	wait_status(id, "FAILED");
	v = e2e_get_workflow(id);
	cr_assert(strstr(str(v, "reason"), "nobody"), "%s", e2e_last_body);
	json_decref(v);
}

static void
rejected(const char *def, const char *path)
{
	json_t *v = e2e_call("POST", NS "/workflow-definitions", def, 400);
	char *text = json_dumps(v, JSON_COMPACT);
	cr_assert(strstr(text, path), "no error at %s: %s", path, text);
	free(text);
	json_decref(v);
}

Test(subflows, validation)
{
	rejected("{\"name\":\"bad\",\"tasks\":[{\"name\":\"c\","
		 "\"taskReferenceName\":\"c\",\"type\":\"SUB_WORKFLOW\","
		 "\"subWorkflowParam\":{\"version\":1}}]}",
		 "$.tasks[0].subWorkflowParam.name");
	rejected("{\"name\":\"bad\",\"tasks\":[{\"name\":\"w\","
		 "\"taskReferenceName\":\"w\",\"type\":\"WAIT\","
		 "\"inputParameters\":{\"duration\":\"a while\"}}]}",
		 "$.tasks[0].inputParameters.duration");
	rejected("{\"name\":\"bad\",\"tasks\":[{\"name\":\"e\","
		 "\"taskReferenceName\":\"e\",\"type\":\"EVENT\"}]}",
		 "$.tasks[0].sink");
	rejected("{\"name\":\"bad\",\"tasks\":[{\"name\":\"s\","
		 "\"taskReferenceName\":\"s\",\"type\":\"START_WORKFLOW\"}]}",
		 "$.tasks[0].inputParameters.startWorkflow");
}

/* ------------------------------------------------ examples/subflows/ */

static void
register_example(const char *name)
{
	char file[256];
	snprintf(file, sizeof(file), "examples/subflows/%s.workflow.json",
		 name);
	FILE *f = fopen(file, "r");
	cr_assert_not_null(f, "cannot open %s (run from the repository root)",
			   file);
	static char buf[16384];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	define(buf);
}

struct tree_probe {
	const char *id;
	char child[37];
};

static bool
has_child(void *arg)
{
	struct tree_probe *p = arg;
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tree", p->id);
	json_t *v = e2e_call("GET", path, NULL, 200);
	json_t *c = json_array_get(
		json_object_get(json_object_get(v, "tree"), "children"), 0);
	if (c)
		snprintf(p->child, sizeof(p->child), "%s", str(c, "id"));
	json_decref(v);
	return c != NULL;
}

Test(subflows, examples)
{
	static const char *const files[] = {
		"approval", "audit", "order_failed", "order", "reminder", NULL};
	for (int i = 0; files[i]; i++)
		register_example(files[i]);

	/* The README's walk-through. */
	char id[37];
	start("{\"name\":\"order\",\"input\":{\"orderId\":\"o-1\","
	      "\"amount\":120}}",
	      id);
	struct tree_probe p = {id, ""};
	cr_assert(th_wait_until(WAIT_MS, has_child, &p), "no approval child");
	wait_task(p.child, "approve", "IN_PROGRESS");
	json_decref(signal_task(
		p.child, "approve", "complete",
		"{\"output\":{\"approved\":true,\"by\":\"ada\"}}", 200));
	wait_task(id, "shipped", "IN_PROGRESS");
	json_decref(signal_task(id, "shipped", "complete",
				"{\"output\":{\"tracking\":\"1Z999\"}}", 200));
	wait_status(id, "COMPLETED");
	json_t *v = e2e_get_workflow(id);
	json_t *out = json_object_get(v, "output");
	cr_assert_str_eq(str(out, "approvedBy"), "ada", "%s", e2e_last_body);
	cr_assert_str_eq(str(out, "tracking"), "1Z999");
	char audit[37];
	snprintf(audit, sizeof(audit), "%s", str(out, "auditId"));
	json_decref(v);
	wait_status(audit, "COMPLETED");
	cr_assert_eq(sql_int("SELECT count(*) FROM \"OutboxEvents\" WHERE"
			     " \"workflowId\" = $1::uuid AND \"sink\" ="
			     " 'kafka:orders'",
			     id),
		     1);
	cr_assert_eq(sql_int("SELECT count(*) FROM \"OutboxEvents\" WHERE"
			     " \"workflowId\" = $1::uuid AND \"sink\" ="
			     " 'conductor:audit:record'",
			     audit),
		     1);

	/* Rejected: the order fails and order_failed reports it. */
	start("{\"name\":\"order\",\"input\":{\"orderId\":\"o-2\","
	      "\"amount\":1e6}}",
	      id);
	struct tree_probe q = {id, ""};
	cr_assert(th_wait_until(WAIT_MS, has_child, &q), "no approval child");
	wait_task(q.child, "approve", "IN_PROGRESS");
	json_decref(signal_task(q.child, "approve", "fail",
				"{\"reason\":\"too much\"}", 200));
	wait_status(id, "FAILED");
	v = e2e_get_workflow(id);
	char failed[37];
	snprintf(failed, sizeof(failed), "%s", str(v, "failureWorkflowId"));
	json_decref(v);
	wait_status(failed, "COMPLETED");
	cr_assert_eq(
		sql_int("SELECT count(*) FROM \"OutboxEvents\" WHERE"
			" \"workflowId\" = $1::uuid AND \"sink\" ="
			" 'kafka:order-failures' AND \"payload\"->>'reason'"
			" LIKE '%too much%' AND \"payload\"->>'orderId' ="
			" 'o-2'",
			failed),
		1);

	/* The reminder: a time already past, then its inline checklist. */
	start("{\"name\":\"reminder\",\"input\":{\"at\":\"2020-01-01 09:00 "
	      "CET\",\"note\":\"call back\"}}",
	      id);
	const char *child = wait_task(id, "checklist", "IN_PROGRESS");
	char cl[37];
	snprintf(cl, sizeof(cl), "%s", child);
	v = e2e_get_workflow(cl);
	cr_assert_str_eq(str(v, "name"), "checklist");
	json_decref(v);
	wait_task(cl, "tick", "IN_PROGRESS");
	json_decref(signal_task(cl, "tick", "complete", "{}", 200));
	wait_status(id, "COMPLETED");
}

Test(subflows, child_terminated)
{
	define("{\"name\":\"gated\",\"tasks\":[{\"name\":\"gate\","
	       "\"taskReferenceName\":\"g\",\"type\":\"HUMAN\"}]}");
	define("{\"name\":\"holder\",\"tasks\":[{\"name\":\"gated\","
	       "\"taskReferenceName\":\"c\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"name\":\"gated\"}}]}");
	char parent[37], child[37];
	start("{\"name\":\"holder\"}", parent);
	snprintf(child, sizeof(child), "%s",
		 wait_task(parent, "c", "IN_PROGRESS"));
	/* Terminating the child, not the parent, fails the parent's task. */
	json_decref(action(child, "terminate", 200));
	wait_status(parent, "FAILED");
	json_t *v = e2e_get_workflow(parent);
	cr_assert(strstr(str(task_of(v, "c"), "reason"), "TERMINATED"), "%s",
		  e2e_last_body);
	json_decref(v);
	/* The history of the parent records the task's end. */
	cr_assert_eq(sql_int("SELECT count(*) FROM \"WorkflowEvents\" WHERE"
			     " \"workflowId\" = $1::uuid AND \"type\" ="
			     " 'TASK_FAILED'",
			     parent),
		     1);
}

struct async_call {
	const char *path;
	struct th_response r;
};

static void *
async_post(void *arg)
{
	struct async_call *c = arg;
	th_http(e2e_server(), "POST", c->path, "{}", 2, &c->r);
	return NULL;
}

struct lock_probe {
	const char *blocker_pid;
};

/* Some session waits for a lock the blocker holds. */
static bool
blocked_by(void *arg)
{
	struct lock_probe *p = arg;
	return sql_int("SELECT count(*) FROM pg_stat_activity WHERE"
		       " $1::int = ANY (pg_blocking_pids(\"pid\"))",
		       p->blocker_pid) > 0;
}

struct quiet_probe {
	const char *a, *b;
};

static bool
nothing_queued(void *arg)
{
	struct quiet_probe *p = arg;
	const char *params[] = {p->a, p->b};
	return th_int(e2e_sql(),
		      "SELECT count(*) FROM \"DecideQueues\" WHERE"
		      " \"workflowId\" IN ($1::uuid, $2::uuid)",
		      2, params) == 0;
}

/*
 * One results batch ends a task of the child and fails the parent (both in
 * queue "work"): one commit queues both, so one decider batch claims both.
 * The parent's ending terminates the child; the child's own decision (its
 * next task, a sub-workflow) was made on what it was before and is not
 * written: no grandchild is started under a terminated child.
 */
Test(subflows, ended_with_its_child)
{
	define_task("work", 0);
	define("{\"name\":\"kid\",\"tasks\":[{\"name\":\"work\","
	       "\"taskReferenceName\":\"w1\"},{\"name\":\"leaf\","
	       "\"taskReferenceName\":\"l\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"workflowDefinition\":{\"name\":"
	       "\"leaf\",\"tasks\":[{\"name\":\"gate\",\"taskReferenceName\":"
	       "\"g\",\"type\":\"HUMAN\"}]}}}]}");
	define("{\"name\":\"forked\",\"tasks\":[{\"name\":\"fork\","
	       "\"taskReferenceName\":\"fork\",\"type\":\"FORK_JOIN\","
	       "\"forkTasks\":[[{\"name\":\"kid\",\"taskReferenceName\":\"c\","
	       "\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":{\"name\":"
	       "\"kid\"}}],[{\"name\":\"work\",\"taskReferenceName\":"
	       "\"boom\"}]]},{\"name\":\"join\",\"taskReferenceName\":\"join\","
	       "\"type\":\"JOIN\",\"joinOn\":[\"c\",\"boom\"]}]}");
	char parent[37], child[37];
	start("{\"name\":\"forked\"}", parent);
	snprintf(child, sizeof(child), "%s",
		 wait_task(parent, "c", "IN_PROGRESS"));
	wait_task(child, "w1", "SCHEDULED");
	json_t *t1 = poll_one("work");
	json_t *t2 = poll_one("work");
	const char *w1 = strcmp(str(t1, "workflowId"), child) == 0
				 ? str(t1, "id")
				 : str(t2, "id");
	const char *boom = strcmp(str(t1, "workflowId"), child) == 0
				   ? str(t2, "id")
				   : str(t1, "id");
	char body[1024];
	snprintf(body, sizeof(body),
		 "{\"results\":[{\"taskId\":\"%s\",\"workerId\":\"w\","
		 "\"status\":\"COMPLETED\",\"output\":{}},{\"taskId\":\"%s\","
		 "\"workerId\":\"w\",\"status\":\"FAILED_WITH_TERMINAL_ERROR\","
		 "\"reason\":\"boom\"}]}",
		 w1, boom);
	json_decref(e2e_call("POST", NS "/queues/work/results", body, 200));
	json_decref(t1);
	json_decref(t2);

	wait_status(parent, "FAILED");
	wait_status(child, "TERMINATED");
	struct quiet_probe q = {parent, child};
	cr_assert(th_wait_until(WAIT_MS, nothing_queued, &q));
	cr_assert_eq(sql_int("SELECT count(*) FROM \"WorkflowExecutions\""
			     " WHERE \"parentWorkflowId\" = $1::uuid",
			     child),
		     0, "a grandchild was started under a terminated child");
	cr_assert_eq(th_int(e2e_sql(),
			    "SELECT count(*) FROM \"WorkflowExecutions\""
			    " WHERE \"status\" = 'RUNNING'",
			    0, NULL),
		     0);
	json_t *v = e2e_get_workflow(child);
	cr_assert_str_eq(str(task_of(v, "w1"), "status"), "COMPLETED", "%s",
			 e2e_last_body);
	json_decref(v);
	/* Both histories stay gap-free. */
	const char *ids[] = {parent, child};
	for (int i = 0; i < 2; i++)
		cr_assert_eq(
			sql_int("SELECT count(*) FROM \"WorkflowEvents\""
				" WHERE \"workflowId\" = $1::uuid",
				ids[i]),
			sql_int("SELECT max(\"seq\") FROM \"WorkflowEvents\""
				" WHERE \"workflowId\" = $1::uuid",
				ids[i]));
}

Test(subflows, terminate_deadlock)
{
	define("{\"name\":\"gated\",\"tasks\":[{\"name\":\"gate\","
	       "\"taskReferenceName\":\"g\",\"type\":\"HUMAN\"}]}");
	define("{\"name\":\"holder\",\"tasks\":[{\"name\":\"gated\","
	       "\"taskReferenceName\":\"c\",\"type\":\"SUB_WORKFLOW\","
	       "\"subWorkflowParam\":{\"name\":\"gated\"}}]}");
	char parent[37], child[37];
	start("{\"name\":\"holder\"}", parent);
	snprintf(child, sizeof(child), "%s",
		 wait_task(parent, "c", "IN_PROGRESS"));
	wait_task(child, "g", "IN_PROGRESS");
	struct quiet_probe q = {parent, child};
	cr_assert(th_wait_until(WAIT_MS, nothing_queued, &q));

	/* A session that does what a decider batch may do: it holds the
	 * child's row, and will ask for the parent's.  Its own deadlock check
	 * waits longer than the server's, so the terminate is the one the
	 * deadlock aborts. */
	PGconn *blocker = th_connect(e2e_db()->url);
	th_exec(blocker, "SET deadlock_timeout = '10s'");
	th_exec(blocker, "BEGIN");
	const char *cp[] = {child}, *pp[] = {parent};
	PQclear(th_query(blocker,
			 "SELECT 1 FROM \"WorkflowExecutions\" WHERE \"id\" ="
			 " $1::uuid FOR NO KEY UPDATE",
			 1, cp));
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", PQbackendPID(blocker));

	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/terminate", parent);
	struct async_call tc = {path, {0}};
	pthread_t th;
	cr_assert(pthread_create(&th, NULL, async_post, &tc) == 0);
	/* The terminate holds the parent and waits for the child. */
	struct lock_probe lp = {pid};
	cr_assert(th_wait_until(WAIT_MS, blocked_by, &lp),
		  "the terminate never waited for the child");
	/* Waiting for the parent closes the cycle; the server's session
	 * detects it first and is aborted.  Either way this session goes
	 * on. */
	PQclear(PQexecParams(blocker,
			     "SELECT 1 FROM \"WorkflowExecutions\" WHERE \"id\""
			     " = $1::uuid FOR NO KEY UPDATE",
			     1, NULL, pp, NULL, NULL, 0));
	PQclear(PQexec(blocker, "COMMIT"));
	PQfinish(blocker);
	pthread_join(th, NULL);
	cr_assert_eq(tc.r.status, 200, "%s", tc.r.body);
	th_response_free(&tc.r);

	/* Answered: the cascade is done. */
	json_t *v = e2e_get_workflow(parent);
	cr_assert_str_eq(str(v, "status"), "TERMINATED", "%s", e2e_last_body);
	json_decref(v);
	v = e2e_get_workflow(child);
	cr_assert_str_eq(str(v, "status"), "TERMINATED", "%s", e2e_last_body);
	json_decref(v);
}

Test(subflows, with_operators)
{
	/* Two children in parallel branches of a fork, then a join; and an
	 * optional child that fails lets its workflow go on. */
	define("{\"name\":\"gated\",\"tasks\":[{\"name\":\"gate\","
	       "\"taskReferenceName\":\"g\",\"type\":\"HUMAN\"}],"
	       "\"outputParameters\":{\"v\":\"${g.output.v}\"}}");
	define("{\"name\":\"pair\",\"tasks\":[{\"name\":\"fork\","
	       "\"taskReferenceName\":\"fork\",\"type\":\"FORK_JOIN\","
	       "\"forkTasks\":[[{\"name\":\"gated\",\"taskReferenceName\":"
	       "\"a\",\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":{\"name\":"
	       "\"gated\"}}],[{\"name\":\"gated\",\"taskReferenceName\":\"b\","
	       "\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":{\"name\":"
	       "\"gated\"}}]]},{\"name\":\"join\",\"taskReferenceName\":"
	       "\"join\",\"type\":\"JOIN\",\"joinOn\":[\"a\",\"b\"]}],"
	       "\"outputParameters\":{\"a\":\"${a.output.v}\",\"b\":"
	       "\"${b.output.v}\"}}");
	char id[37], a[37], b[37];
	start("{\"name\":\"pair\"}", id);
	snprintf(a, sizeof(a), "%s", wait_task(id, "a", "IN_PROGRESS"));
	snprintf(b, sizeof(b), "%s", wait_task(id, "b", "IN_PROGRESS"));
	cr_assert_str_neq(a, b);
	char path[256];
	snprintf(path, sizeof(path), NS "/workflows/%s/tree", id);
	json_t *v = e2e_call("GET", path, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(v, "size")), 3);
	json_decref(v);
	wait_task(a, "g", "IN_PROGRESS");
	wait_task(b, "g", "IN_PROGRESS");
	json_decref(
		signal_task(a, "g", "complete", "{\"output\":{\"v\":1}}", 200));
	json_decref(
		signal_task(b, "g", "complete", "{\"output\":{\"v\":2}}", 200));
	wait_status(id, "COMPLETED");
	v = e2e_get_workflow(id);
	json_t *out = json_object_get(v, "output");
	cr_assert_eq(json_integer_value(json_object_get(out, "a")), 1, "%s",
		     e2e_last_body);
	cr_assert_eq(json_integer_value(json_object_get(out, "b")), 2);
	json_decref(v);

	define("{\"name\":\"lenient\",\"tasks\":[{\"name\":\"gated\","
	       "\"taskReferenceName\":\"c\",\"type\":\"SUB_WORKFLOW\","
	       "\"optional\":true,\"subWorkflowParam\":{\"name\":\"gated\"}},"
	       "{\"name\":\"after\",\"taskReferenceName\":\"after\","
	       "\"type\":\"HUMAN\"}]}");
	start("{\"name\":\"lenient\"}", id);
	snprintf(a, sizeof(a), "%s", wait_task(id, "c", "IN_PROGRESS"));
	wait_task(a, "g", "IN_PROGRESS");
	json_decref(signal_task(a, "g", "fail", "{\"reason\":\"no\"}", 200));
	wait_task(id, "c", "COMPLETED_WITH_ERRORS");
	wait_task(id, "after", "IN_PROGRESS");

	/* Terminating the parent ends the child of a branch too. */
	start("{\"name\":\"pair\"}", id);
	snprintf(a, sizeof(a), "%s", wait_task(id, "a", "IN_PROGRESS"));
	json_decref(action(id, "terminate", 200));
	v = e2e_get_workflow(a);
	cr_assert_str_eq(str(v, "status"), "TERMINATED");
	json_decref(v);
}
