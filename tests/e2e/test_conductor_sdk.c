/*
 * Conductor's own JavaScript SDK (@io-orkes/conductor-javascript, pinned by
 * tests/conductor_sdk/package-lock.json and installed there by tests/run.sh)
 * drives the real nodeflow binary, unchanged:
 *
 *   sdk.workers  tests/conductor_sdk/run.js registers task and workflow
 *                definitions, starts twelve workflows (idempotency key
 *                RETURN_EXISTING checked) and one more, runs two TaskManagers
 *                with three concurrent workers per task type, one worker
 *                throwing on each task's first attempt and one throwing
 *                NonRetryableException; every workflow completes with the
 *                expected output, each failed first attempt was retried (its
 *                reason and log kept), and the terminal failure failed its
 *                workflow without a retry.
 *
 * The script runs under a deadline; its last line says OK or what failed.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SCRIPT_DEADLINE_MS = 180000, OUT_SIZE = 65536 };

TestSuite(sdk, .fini = e2e_stop);

/* Runs `node run.js url` in dir under a deadline; returns its exit status
 * (-1 when killed at the deadline) with its output in out. */
static int
run_node(const char *dir, const char *url, char *out, size_t size)
{
	int fds[2];
	cr_assert(pipe(fds) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		if (chdir(dir) != 0)
			_exit(126);
		execlp("node", "node", "run.js", url, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t len = 0;
	out[0] = '\0';
	int64_t deadline = th_now_ms() + SCRIPT_DEADLINE_MS;
	bool killed = false;
	for (;;) {
		int64_t left = deadline - th_now_ms();
		if (left <= 0) {
			kill(pid, SIGKILL);
			killed = true;
			break;
		}
		struct pollfd p = {fds[0], POLLIN, 0};
		int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		char buf[4096];
		ssize_t n = read(fds[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		if (len + (size_t)n >= size) { /* keep the tail */
			size_t keep = size / 2;
			memmove(out, out + len - keep, keep);
			len = keep;
		}
		memcpy(out + len, buf, (size_t)n);
		len += (size_t)n;
		out[len] = '\0';
	}
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (killed)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(sdk, workers)
{
	const char *dir = NF_SOURCE_ROOT "/tests/conductor_sdk";
	struct stat st;
	cr_assert(stat(NF_SOURCE_ROOT "/tests/conductor_sdk/node_modules/"
				      "@io-orkes/conductor-javascript",
		       &st) == 0,
		  "the Conductor SDK is not installed in %s/node_modules "
		  "(tests/run.sh installs it)",
		  dir);
	e2e_start(NULL);

	char url[128];
	snprintf(url, sizeof(url), "%s/api", e2e_server()->base);
	static char out[OUT_SIZE];
	int rc = run_node(dir, url, out, sizeof(out));
	cr_assert_eq(rc, 0, "run.js exited %d:\n%s", rc, out);
	cr_assert(strstr(out, "OK 12 workflows completed"), "%s", out);
}
