#include "runtime/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t shutdown_flag;
static int wake_pipe[2] = {-1, -1};

static void
on_signal(int signo)
{
	(void)signo;
	int saved = errno;
	shutdown_flag = 1;
	if (wake_pipe[1] >= 0) {
		ssize_t rc = write(wake_pipe[1], "x", 1);
		(void)rc;
	}
	errno = saved;
}

void
signals_install(void)
{
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		perror("pipe2");
		abort();
	}
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

bool
signals_shutdown_requested(void)
{
	return shutdown_flag != 0;
}

void
signals_request_shutdown(void)
{
	on_signal(0);
}

bool
signals_wait(int timeout_ms)
{
	if (shutdown_flag)
		return true;
	struct pollfd pfd = {.fd = wake_pipe[0], .events = POLLIN};
	int rc = poll(&pfd, 1, timeout_ms);
	if (rc > 0) {
		char buf[16];
		while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
			;
	}
	return shutdown_flag != 0;
}
