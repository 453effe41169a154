/*
 * End-to-end tests of the client commands (src/cli, src/client): the real
 * nodeflow binary run as a child, NODEFLOW_SERVER naming a real server.
 *
 *   flow      define (task definitions registered before the workflow
 *             definitions that need them, whatever the order of the files;
 *             409 on an existing version, --overwrite replaces it), defs,
 *             tasks, start (--input JSON and @file, --version,
 *             --correlation-id, --idempotency-key and its conflict), get
 *             (pretty JSON), list (table, --status, --name, --limit with
 *             the next cursor and --cursor), events.
 *   actions   pause, resume, terminate --reason, retry of a failed
 *             workflow; each refused (exit 1) with the server's conflict
 *             message when the status does not allow it.
 *   errors    a definition the server refuses: exit 1 with its message and
 *             each detail as "path: message", nothing registered; local
 *             file problems; an unknown namespace, workflow or limit.
 *   network   an unreachable server and a malformed URL: exit 1 with a
 *             clear message; --server wins over NODEFLOW_SERVER.
 *   usage     exit 2 without any request; help lists the commands.
 *
 * Every test that needs a server gets its own database and server.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	CLI_TIMEOUT_MS = 60000,
	DECIDE_TIMEOUT_MS = 10000,
	MAX_TEMP = 16,
};

/* ----------------------------------------------------- per-test fixtures */

static char temp_files[MAX_TEMP][64];
static int n_temp;

static void
cleanup(void)
{
	e2e_stop();
	for (int i = 0; i < n_temp; i++)
		unlink(temp_files[i]);
	n_temp = 0;
}

TestSuite(flow, .fini = cleanup);
TestSuite(actions, .fini = cleanup);
TestSuite(errors, .fini = cleanup);
TestSuite(network, .fini = cleanup);
TestSuite(usage, .fini = cleanup);

/* SIGTERM: a clean exit, which under the sanitizers also means no leak. */
static void
stop_server(void)
{
	int rc = e2e_server_stop(0);
	cr_assert_eq(rc, 0, "the server exited with %d:\n%s", rc, e2e_log());
}

/* A temporary file holding text; its path (removed in the fini). */
static const char *
temp_file(const char *text)
{
	cr_assert(n_temp < MAX_TEMP);
	char *path = temp_files[n_temp];
	snprintf(path, 64, "/tmp/nf_cli_test_XXXXXX.json");
	int fd = mkstemps(path, 5);
	cr_assert(fd >= 0, "mkstemps failed");
	n_temp++;
	size_t len = strlen(text);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

/* ------------------------------------------------------------ the child */

static char out[16384];

/* Runs nodeflow argv with NODEFLOW_SERVER naming server (the test's server
 * when NULL); returns the exit code, the output (stdout and stderr) in
 * out. */
static int
run_at(const char *server, const char *const *argv)
{
	char env[128];
	snprintf(env, sizeof(env), "NODEFLOW_SERVER=%s",
		 server ? server : e2e_server()->base);
	const char *envp[] = {env, NULL};
	return th_run_nodeflow(argv, envp, CLI_TIMEOUT_MS, out, sizeof(out));
}

#define RUN(...) run_at(NULL, (const char *[]){__VA_ARGS__, NULL})

/* Asserts the exit code and that the output holds each text. */
static void
expect(int rc, int want, const char *const *texts)
{
	cr_assert_eq(rc, want, "exit %d, wanted %d:\n%s", rc, want, out);
	for (size_t i = 0; texts && texts[i]; i++)
		cr_assert(strstr(out, texts[i]), "no \"%s\" in:\n%s", texts[i],
			  out);
}

#define EXPECT(rc, want, ...) \
	expect(rc, want, (const char *[]){__VA_ARGS__, NULL})

/* The id `start` printed: the whole output, one UUID and a newline. */
static void
started_id(int rc, char id[37])
{
	cr_assert_eq(rc, 0, "start: exit %d:\n%s", rc, out);
	cr_assert_eq(strlen(out), 37, "start printed more than an id:\n%s",
		     out);
	cr_assert_eq(out[36], '\n', "%s", out);
	cr_assert_eq(out[8], '-', "%s", out);
	snprintf(id, 37, "%.36s", out);
}

/* ------------------------------------------------------------ fixtures */

static const char task_def[] =
	"{\"name\":\"cli_task\",\"retryCount\":0,"
	"\"retryLogic\":\"FIXED\",\"retryDelaySeconds\":0,"
	"\"responseTimeoutSeconds\":30,"
	"\"description\":\"a task of the CLI tests\"}";

static const char workflow_def[] =
	"{\"name\":\"cli_flow\",\"version\":1,\"description\":\"one task\","
	"\"tasks\":[{\"name\":\"cli_task\",\"taskReferenceName\":\"only\","
	"\"type\":\"SIMPLE\",\"inputParameters\":{\"n\":\"${workflow.input.n}\"}}]}";

/* Registers the task and workflow definitions through the CLI. */
static void
define_all(void)
{
	const char *wf = temp_file(workflow_def);
	const char *task = temp_file(task_def);
	EXPECT(RUN("define", wf, task), 0,
	       "registered task definition cli_task",
	       "registered workflow definition cli_flow version 1");
}

static char *
workflow_status(const char *id)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/ns/default/workflows/%s", id);
	json_t *v = e2e_call("GET", path, NULL, 200);
	char *s = strdup(json_string_value(json_object_get(v, "status")));
	json_decref(v);
	return s;
}

/* ------------------------------------------------------------------ flow */

static bool
events_show_schedule(void *arg)
{
	const char *id = arg;
	int rc = RUN("events", id);
	cr_assert_eq(rc, 0, "events: exit %d:\n%s", rc, out);
	return strstr(out, "TASK_SCHEDULED") != NULL;
}

Test(flow, define_start_list_get_events)
{
	e2e_start(NULL);
	/* The workflow's file first: its task is still registered first. */
	const char *wf = temp_file(workflow_def);
	const char *task = temp_file(task_def);
	EXPECT(RUN("define", wf, task), 0,
	       "registered task definition cli_task",
	       "registered workflow definition cli_flow version 1");
	cr_assert(strstr(out, "cli_task") < strstr(out, "cli_flow"), "%s", out);
	json_decref(e2e_call("GET",
			     "/v1/ns/default/workflow-definitions/cli_flow",
			     NULL, 200));

	/* An existing version: the server's conflict, and the way out. */
	EXPECT(RUN("define", wf), 1,
	       "workflow definition \"cli_flow\" version 1 already exists",
	       "--overwrite");
	EXPECT(RUN("define", "--overwrite", wf), 0,
	       "replaced workflow definition cli_flow version 1");
	EXPECT(RUN("define", task), 0, "updated task definition cli_task");

	/* An array of definitions in one file. */
	const char *both = temp_file(
		"[{\"name\":\"cli_task2\"},{\"name\":\"cli_flow2\",\"tasks\":"
		"[{\"name\":\"cli_task2\",\"taskReferenceName\":\"t\"}]}]");
	EXPECT(RUN("define", both), 0, "registered task definition cli_task2",
	       "registered workflow definition cli_flow2 version 1");

	EXPECT(RUN("defs"), 0, "NAME", "VERSION", "TASKS", "DESCRIPTION",
	       "cli_flow ", "cli_flow2", "one task");
	EXPECT(RUN("tasks"), 0, "NAME", "RETRIES", "cli_task ", "cli_task2",
	       "a task of the CLI tests");

	/* start: --input from a file, then inline with a version and key. */
	char id1[37], id2[37];
	const char *input = temp_file("{\"n\": 7}");
	char at_input[80];
	snprintf(at_input, sizeof(at_input), "@%s", input);
	started_id(RUN("start", "cli_flow", "--input", at_input,
		       "--correlation-id", "corr-1"),
		   id1);
	started_id(RUN("start", "cli_flow", "--input={\"n\":8}", "--version",
		       "1", "--idempotency-key", "k1"),
		   id2);
	cr_assert_str_neq(id1, id2);
	EXPECT(RUN("start", "cli_flow", "--idempotency-key", "k1"), 1,
	       "idempotency key \"k1\" exists", id2);
	EXPECT(RUN("start", "nope"), 1, "workflow definition nope not found");

	/* get: the workflow, pretty-printed. */
	EXPECT(RUN("get", id1), 0, "\n  \"");
	json_t *v = json_loads(out, 0, NULL);
	cr_assert_not_null(v, "get printed no JSON:\n%s", out);
	cr_assert_str_eq(json_string_value(json_object_get(v, "id")), id1);
	cr_assert_str_eq(json_string_value(json_object_get(v, "status")),
			 "RUNNING");
	cr_assert_str_eq(json_string_value(json_object_get(v, "correlationId")),
			 "corr-1");
	cr_assert_eq(json_integer_value(
			     json_object_get(json_object_get(v, "input"), "n")),
		     7);
	cr_assert(json_is_array(json_object_get(v, "tasks")));
	json_decref(v);

	/* list: a table, newest first, paged by cursor. */
	EXPECT(RUN("list"), 0, "ID", "NAME", "VERSION", "STATUS", "STARTED",
	       id1, id2, "cli_flow", "RUNNING");
	cr_assert(strstr(out, id2) < strstr(out, id1), "newest first:\n%s",
		  out);
	cr_assert_null(strstr(out, "next cursor"), "%s", out);
	EXPECT(RUN("list", "--limit", "1"), 0, id2, "next cursor: ");
	cr_assert_null(strstr(out, id1), "%s", out);
	char cursor[256];
	cr_assert_eq(sscanf(strstr(out, "next cursor: "), "next cursor: %255s",
			    cursor),
		     1);
	EXPECT(RUN("list", "--limit", "1", "--cursor", cursor), 0, id1);
	cr_assert_null(strstr(out, id2), "%s", out);
	EXPECT(RUN("list", "--status", "completed"), 0, "no workflows");
	EXPECT(RUN("list", "--status", "RUNNING,FAILED", "--name", "cli_flow"),
	       0, id1, id2);
	EXPECT(RUN("list", "--name", "cli_flow2"), 0, "no workflows");

	/* events: the history, once the decider has scheduled the task. */
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, events_show_schedule, id1),
		  "no TASK_SCHEDULED:\n%s", out);
	EXPECT(RUN("events", id1), 0, "SEQ", "TYPE", "WORKFLOW_STARTED",
	       "\"name\":\"cli_flow\"");
	cr_assert(strstr(out, "WORKFLOW_STARTED") <
			  strstr(out, "TASK_SCHEDULED"),
		  "%s", out);
	stop_server();
}

/* --------------------------------------------------------------- actions */

static bool
is_failed(void *arg)
{
	char *s = workflow_status(arg);
	bool failed = strcmp(s, "FAILED") == 0;
	free(s);
	return failed;
}

struct poll_probe {
	json_t *task;
};

static bool
polled(void *arg)
{
	struct poll_probe *p = arg;
	json_t *v = e2e_call("POST", "/v1/ns/default/queues/cli_task/poll",
			     "{\"workerId\":\"w1\",\"count\":1}", 200);
	json_t *tasks = json_object_get(v, "tasks");
	if (json_array_size(tasks))
		p->task = json_incref(json_array_get(tasks, 0));
	json_decref(v);
	return p->task != NULL;
}

Test(actions, pause_resume_terminate_retry)
{
	e2e_start(NULL);
	define_all();
	char id[37];
	started_id(RUN("start", "cli_flow", "--input", "{\"n\":1}"), id);

	/* What a running workflow refuses, in the server's words. */
	char msg[128];
	snprintf(msg, sizeof(msg), "cannot resume workflow %s: it is RUNNING",
		 id);
	EXPECT(RUN("resume", id), 1, msg);
	snprintf(msg, sizeof(msg), "cannot retry workflow %s: it is RUNNING",
		 id);
	EXPECT(RUN("retry", id), 1, msg);

	EXPECT(RUN("pause", id), 0, "is PAUSED");
	snprintf(msg, sizeof(msg), "cannot pause workflow %s: it is PAUSED",
		 id);
	EXPECT(RUN("pause", id), 1, msg);
	EXPECT(RUN("resume", id), 0, "is RUNNING");

	EXPECT(RUN("terminate", id, "--reason", "enough of it"), 0,
	       "is TERMINATED");
	EXPECT(RUN("get", id), 0, "\"TERMINATED\"", "enough of it");
	snprintf(msg, sizeof(msg),
		 "cannot terminate workflow %s: it is TERMINATED", id);
	EXPECT(RUN("terminate", id), 1, msg);
	snprintf(msg, sizeof(msg), "cannot pause workflow %s: it is TERMINATED",
		 id);
	EXPECT(RUN("pause", id), 1, msg);

	/* retry: a workflow whose only task failed for good runs again. */
	char id2[37];
	started_id(RUN("start", "cli_flow", "--input", "{\"n\":2}"), id2);
	struct poll_probe p = {NULL};
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, polled, &p),
		  "no task to poll");
	char path[256];
	snprintf(path, sizeof(path),
		 "/v1/ns/default/queues/cli_task/tasks/%s/fail",
		 json_string_value(json_object_get(p.task, "id")));
	json_decref(p.task);
	json_decref(e2e_call(
		"POST", path,
		"{\"workerId\":\"w1\",\"reason\":\"broke\",\"terminal\":true}",
		200));
	cr_assert(th_wait_until(DECIDE_TIMEOUT_MS, is_failed, id2),
		  "the workflow did not fail");
	EXPECT(RUN("retry", id2), 0, "is RUNNING");
	char *s = workflow_status(id2);
	cr_assert_str_eq(s, "RUNNING");
	free(s);
	EXPECT(RUN("events", id2), 0, "WORKFLOW_RETRIED");
	stop_server();
}

/* ---------------------------------------------------------------- errors */

Test(errors, refused_definitions_and_requests)
{
	e2e_start(NULL);
	/* The server's message and every detail, "path: message". */
	const char *bad_wf = temp_file(
		"{\"name\":\"bad\",\"version\":0,\"tasks\":[{\"name\":\"ghost\","
		"\"taskReferenceName\":\"g\"}]}");
	EXPECT(RUN("define", bad_wf), 1, "workflow definition bad",
	       "invalid workflow definition", "  $.version: must be at least 1",
	       "  $.tasks[0]: task definition ghost is not registered");
	const char *bad_task =
		temp_file("{\"name\":\"t\",\"retryCount\":\"3\"}");
	EXPECT(RUN("define", bad_task), 1, "invalid task definition",
	       "  $.retryCount: ");

	/* Local problems with the files: no request is sent. */
	EXPECT(RUN("define", temp_file("{\"name\": ")), 1,
	       "invalid JSON at line");
	EXPECT(RUN("define", "/nonexistent/defs.json"), 1,
	       "could not open /nonexistent/defs.json");
	EXPECT(RUN("define", temp_file("42")), 1, "not a definition");
	EXPECT(RUN("define", temp_file("[{\"name\":\"a\"}, 3]")), 1,
	       "item 1 is not a JSON object");
	EXPECT(RUN("define", temp_file("{\"retryCount\":1}")), 1,
	       "a task definition needs a \"name\"");
	EXPECT(RUN("start", "x", "--input", "@/nonexistent/input.json"), 1,
	       "could not open /nonexistent/input.json");

	/* Nothing was registered by any of them. */
	EXPECT(RUN("defs"), 0, "no workflow definitions");
	EXPECT(RUN("tasks"), 0, "no task definitions");

	/* The server's refusals of other requests. */
	EXPECT(RUN("tasks", "--namespace", "nope"), 1,
	       "namespace \"nope\" does not exist");
	EXPECT(RUN("get", "0190d6e2-0000-7000-8000-000000000000"), 1,
	       "workflow 0190d6e2-0000-7000-8000-000000000000 not found");
	EXPECT(RUN("events", "not-a-uuid"), 1, "not found");
	EXPECT(RUN("list", "--limit", "0"), 1, "limit must be a whole number");
	EXPECT(RUN("list", "--status", "SLEEPING"), 1,
	       "status \"SLEEPING\" is not one of");
	EXPECT(RUN("list", "--cursor", "garbage!"), 1, "cursor");
	stop_server();
}

/* --------------------------------------------------------------- network */

Test(network, unreachable_server)
{
	/* Nothing listens on ports 1 and 2 (binding them needs root). */
	const char *argv[] = {"list", NULL};
	int rc = run_at("http://127.0.0.1:1", argv);
	EXPECT(rc, 1, "could not reach node-flow at http://127.0.0.1:1");

	const char *flag[] = {"get", "--server", "http://127.0.0.1:2/",
			      "0190d6e2-0000-7000-8000-000000000000", NULL};
	rc = run_at("http://127.0.0.1:1", flag);
	EXPECT(rc, 1, "could not reach node-flow at http://127.0.0.1:2:");

	const char *bad[] = {"tasks", "--server=http://[nope", NULL};
	rc = run_at("", bad);
	EXPECT(rc, 1, "is not a node-flow server URL");
}

Test(network, server_flag_wins)
{
	e2e_start(NULL);
	define_all();
	char server[80];
	snprintf(server, sizeof(server), "--server=%s", e2e_server()->base);
	const char *argv[] = {"tasks", server, NULL};
	int rc = run_at("http://127.0.0.1:1", argv);
	EXPECT(rc, 0, "cli_task");
	stop_server();
}

/* ----------------------------------------------------------------- usage */

Test(usage, exit_2_without_a_request)
{
	/* Against an unreachable server: a request would exit 1. */
	static const struct {
		const char *argv[8];
		const char *text;
	} cases[] = {
		{{"start", NULL}, "NAME is missing"},
		{{"define", NULL}, "FILE... is missing"},
		{{"get", "a", "b", NULL}, "unexpected argument \"b\""},
		{{"events", NULL}, "usage: nodeflow events ID"},
		{{"list", "--bogus", NULL}, "unknown option \"--bogus\""},
		{{"list", "x", NULL}, "unexpected argument \"x\""},
		{{"list", "--limit", NULL}, "--limit needs a value"},
		{{"list", "--server", NULL}, "--server needs a value"},
		{{"defs", "--all=yes", NULL}, "--all takes no value"},
		{{"define", "--overwrite=1", "f.json", NULL},
		 "--overwrite takes no value"},
		{{"start", "x", "--version", "two", NULL},
		 "--version: \"two\" is not a whole number"},
		{{"start", "x", "--input", "{nope", NULL},
		 "--input: invalid JSON"},
		{{"pause", "-x", NULL}, "unknown option \"-x\""},
		{{"terminate", "a", "--reason", NULL},
		 "--reason needs a value"},
		{{"retry", "a", "--http-threads", "0", NULL},
		 "--http-threads: 0 is out of range"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = run_at("http://127.0.0.1:1", cases[i].argv);
		cr_assert_eq(rc, 2, "%s: exit %d:\n%s", cases[i].argv[0], rc,
			     out);
		cr_assert(strstr(out, cases[i].text), "%s: no \"%s\" in:\n%s",
			  cases[i].argv[0], cases[i].text, out);
		cr_assert_null(strstr(out, "could not reach"), "%s", out);
	}
}

Test(usage, help)
{
	const char *help[] = {"help", NULL};
	int rc = run_at("http://127.0.0.1:1", help);
	EXPECT(rc, 0, "define FILE...", "start NAME", "get ID", "list",
	       "events ID", "terminate ID", "pause ID", "resume ID", "retry ID",
	       "defs, tasks", "--server", "NODEFLOW_SERVER", "--namespace",
	       "NODEFLOW_NAMESPACE", "http://127.0.0.1:8080");

	const char *start[] = {"start", "--help", NULL};
	rc = run_at("http://127.0.0.1:1", start);
	EXPECT(rc, 0, "usage: nodeflow start NAME", "--idempotency-key KEY",
	       "--input JSON|@FILE", "NODEFLOW_SERVER");
	const char *list[] = {"list", "-h", NULL};
	rc = run_at("http://127.0.0.1:1", list);
	EXPECT(rc, 0, "--cursor CURSOR", "--status");

	/* After "--", --help is an argument (and here one too many). */
	const char *dashes[] = {"get", "x", "--", "--help", NULL};
	rc = run_at("http://127.0.0.1:1", dashes);
	EXPECT(rc, 2, "unexpected argument \"--help\"");
}
