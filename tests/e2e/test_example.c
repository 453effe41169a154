/*
 * The README's worked example, run as written: the example definitions of
 * examples/hello/ registered over HTTP, a workflow started, the example
 * worker (python3, standard library only) run against a real server, and
 * the workflow's output checked.  Run from the repository root
 * (tests/run.sh does).
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *
read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s (run from the repository root)",
			   path);
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

static void
send_file(const char *method, const char *path, const char *file, long want)
{
	char *body = read_file(file);
	struct th_response r;
	th_http(e2e_server(), method, path, body, strlen(body), &r);
	cr_assert_eq(r.status, want, "%s %s: %ld %s", method, path, r.status,
		     r.body);
	th_response_free(&r);
	free(body);
}

/* Runs the example worker with --once; returns its exit status. */
static int
run_worker(char *output, size_t size)
{
	int fds[2];
	cr_assert(pipe(fds) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		execlp("python3", "python3", "examples/hello/worker.py",
		       "--once", "--server", e2e_server()->base, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t len = 0;
	int64_t until = th_now_ms() + 30000;
	int status = -1;
	for (;;) {
		ssize_t n = read(fds[0], output + len, size - 1 - len);
		if (n > 0) {
			len += (size_t)n;
			continue;
		}
		break; /* EOF: the worker exited */
	}
	output[len] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (th_now_ms() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			cr_assert_fail("the worker did not finish:\n%s",
				       output);
		}
		struct timespec nap = {0, 5000000};
		nanosleep(&nap, NULL);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct wait_ctx {
	const char *path;
	json_t *last;
};

static bool
completed(void *arg)
{
	struct wait_ctx *w = arg;
	struct th_response r;
	th_http(e2e_server(), "GET", w->path, NULL, 0, &r);
	json_decref(w->last);
	w->last = json_loads(r.body, 0, NULL);
	th_response_free(&r);
	const char *st = json_string_value(json_object_get(w->last, "status"));
	return st && strcmp(st, "COMPLETED") == 0;
}

Test(example, readme_worked_example, .fini = e2e_stop, .timeout = 120)
{
	e2e_start(NULL);
	send_file("PUT", "/v1/ns/default/task-definitions/greet",
		  "examples/hello/greet.task.json", 201);
	send_file("POST", "/v1/ns/default/workflow-definitions",
		  "examples/hello/hello.workflow.json", 201);

	const char *start = "{\"name\":\"hello\",\"input\":{\"name\":\"Ada\"}}";
	struct th_response r;
	th_http(e2e_server(), "POST", "/v1/ns/default/workflows", start,
		strlen(start), &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	json_t *v = json_loads(r.body, 0, NULL);
	char path[128];
	snprintf(path, sizeof(path), "/v1/ns/default/workflows/%s",
		 json_string_value(json_object_get(v, "id")));
	json_decref(v);
	th_response_free(&r);

	char out[8192];
	int rc = run_worker(out, sizeof(out));
	cr_assert_eq(rc, 0, "worker exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "greet_ref: Hello, Ada!"), "%s", out);
	cr_assert(strstr(out, "shout_ref: HELLO, ADA!"), "%s", out);

	struct wait_ctx w = {path, NULL};
	cr_assert(th_wait_until(10000, completed, &w), "not completed");
	json_t *output = json_object_get(w.last, "output");
	cr_assert_str_eq(json_string_value(json_object_get(output, "first")),
			 "Hello, Ada!");
	cr_assert_str_eq(json_string_value(json_object_get(output, "final")),
			 "HELLO, ADA!");
	json_decref(w.last);
}
