/*
 * End-to-end tests of the limits that protect the server
 * (docs/operations.md), each against the real nodeflow binary over real
 * HTTP, most with raw sockets to send what no well-behaved client would:
 *
 *   body      a body nested deeper than --max-json-depth is a JSON 400
 *             naming the limit; a pathologically deep one too
 *   headers   more headers than --max-headers, a request line or headers
 *             longer than --max-header-bytes: JSON 431 and 414; far over
 *             the limit, MHD's own 431; the server stays healthy
 *   slow      a client trickling its headers or body a byte at a time is
 *             closed after --request-timeout-seconds although it is never
 *             idle; keep-alive requests in time are unaffected
 *   parked    long-polls beyond --max-parked-per-client (per address) and
 *             --max-parked (in all) get a JSON 429 with Retry-After; the
 *             places come back once the polls are answered
 *   conns     connections beyond --max-connections-per-client from one
 *             address are closed at once, others are served
 *   pool      when every pooled connection is busy and --db-queue requests
 *             wait already, a request gets a JSON 503 with Retry-After at
 *             once; those that waited are answered when the pool frees
 *   waits     a request waiting on a lock holds up no other connection,
 *             whichever of the server's threads reads it; past
 *             --http-queue requests waiting for a handler thread, a new
 *             one gets a JSON 503 with Retry-After at once
 *
 * No assertion is about time: waits have deadlines, and what is asserted
 * is the answer (or the closed connection).
 */
#include "e2e.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

TestSuite(limits, .fini = e2e_stop);

/* SIGTERM: a clean exit, which under the sanitizers also means no leak. */
static void
stop(void)
{
	cr_assert_eq(e2e_server_stop(0), 0, "%s", e2e_log());
}

static void
assert_json_error(long status, const char *body, const char *code,
		  const char *mentions)
{
	json_error_t je;
	json_t *v = json_loads(body, 0, &je);
	cr_assert(v, "status %ld, body is not JSON: %s", status, body);
	json_t *e = json_object_get(v, "error");
	cr_assert_str_eq(json_string_value(json_object_get(e, "code")), code,
			 "%s", body);
	const char *msg = json_string_value(json_object_get(e, "message"));
	cr_assert(msg && strstr(msg, mentions), "message lacks \"%s\": %s",
		  mentions, body);
	json_decref(v);
}

/* ------------------------------------------------------------- sockets */

/* A connection to the server from source address 127.0.0.N. */
static int
dial_from(int n)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	struct sockaddr_in src = {.sin_family = AF_INET,
				  .sin_addr.s_addr =
					  htonl(INADDR_LOOPBACK - 1 + n)};
	cr_assert(bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0,
		  "bind 127.0.0.%d: %s", n, strerror(errno));
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port =
					 htons((uint16_t)e2e_server()->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	return fd;
}

static void
send_all(int fd, const char *data, size_t len)
{
	size_t sent = 0;
	while (sent < len) {
		ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);
		if (n <= 0)
			return; /* the server closed: the caller sees it */
		sent += (size_t)n;
	}
}

/* Reads one response (up to its Content-Length) within timeout_ms; "" when
 * the connection closed without one.  Malloc'd. */
static char *
read_response(int fd, int timeout_ms)
{
	size_t cap = 1 << 17, len = 0;
	char *out = calloc(1, cap);
	int64_t until = th_now_ms() + timeout_ms;
	while (th_now_ms() < until && len < cap - 1) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		ssize_t n = recv(fd, out + len, cap - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		const char *end = strstr(out, "\r\n\r\n");
		const char *cl = strcasestr(out, "\r\nContent-Length:");
		if (end && cl && cl < end &&
		    len >= (size_t)(end + 4 - out) + strtoul(cl + 17, NULL, 10))
			break;
	}
	return out;
}

static const char *
body_of(const char *raw)
{
	const char *end = strstr(raw, "\r\n\r\n");
	return end ? end + 4 : "";
}

static char *
exchange(const char *request)
{
	int fd = dial_from(1);
	send_all(fd, request, strlen(request));
	char *out = read_response(fd, 20000);
	close(fd);
	return out;
}

/* ------------------------------------------------------------- metrics */

struct metric_want {
	const char *line; /* "nodeflow_http_parked 2\n" */
};

static bool
metric_is(void *arg)
{
	struct metric_want *w = arg;
	struct th_response r;
	th_http(e2e_server(), "GET", "/metrics", NULL, 0, &r);
	bool ok = r.status == 200 && strstr(r.body, w->line);
	th_response_free(&r);
	return ok;
}

static void
wait_metric(const char *line)
{
	struct metric_want w = {line};
	cr_assert(th_wait_until(30000, metric_is, &w), "never saw %s", line);
}

/* ---------------------------------------------------------------- body */

static char *
nested(int depth)
{
	/* {"name":"x","input":{"a":{"a":...{}...}}} */
	size_t cap = (size_t)depth * 8 + 64;
	char *s = malloc(cap);
	size_t n = (size_t)snprintf(s, cap, "{\"name\":\"x\",\"input\":");
	for (int i = 0; i < depth - 2; i++)
		n += (size_t)snprintf(s + n, cap - n, "{\"a\":");
	n += (size_t)snprintf(s + n, cap - n, "{}");
	for (int i = 0; i < depth - 2; i++)
		s[n++] = '}';
	s[n++] = '}';
	s[n] = '\0';
	return s;
}

Test(limits, json_deeper_than_the_limit_is_a_json_400)
{
	const char *flags[] = {"--max-json-depth", "8", NULL};
	e2e_start(flags);
	struct th_response r;

	/* At the limit it is parsed: the answer is about the workflow. */
	char *ok = nested(8);
	th_http(e2e_server(), "POST", "/v1/ns/default/workflows", ok,
		strlen(ok), &r);
	cr_assert_neq(r.status, 400, "depth 8: %s", r.body);
	th_response_free(&r);
	free(ok);

	char *deep = nested(9);
	th_http(e2e_server(), "POST", "/v1/ns/default/workflows", deep,
		strlen(deep), &r);
	cr_assert_eq(r.status, 400, "depth 9: %s", r.body);
	assert_json_error(r.status, r.body, "bad_json", "--max-json-depth");
	cr_assert(strstr(r.body, "8 levels"), "names the limit: %s", r.body);
	th_response_free(&r);
	free(deep);

	/* 200000 brackets: far past the parser's own limit, still a 400. */
	size_t n = 200000;
	char *brackets = malloc(n + 1);
	memset(brackets, '[', n);
	brackets[n] = '\0';
	th_http(e2e_server(), "POST", "/v1/ns/default/workflows", brackets, n,
		&r);
	cr_assert_eq(r.status, 400, "%s", r.body);
	assert_json_error(r.status, r.body, "bad_json", "");
	th_response_free(&r);
	free(brackets);

	th_http(e2e_server(), "GET", "/healthz", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	th_response_free(&r);
	stop();
}

/* ------------------------------------------------------------- headers */

Test(limits, headers_over_the_limits_are_json_431_and_414)
{
	const char *flags[] = {"--max-header-bytes", "2048", "--max-headers",
			       "10", NULL};
	e2e_start(flags);
	char req[8192];

	/* Eleven headers (Host and ten more). */
	size_t n = (size_t)snprintf(req, sizeof(req),
				    "GET /healthz HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < 10; i++)
		n += (size_t)snprintf(req + n, sizeof(req) - n, "X-H%d: %d\r\n",
				      i, i);
	snprintf(req + n, sizeof(req) - n, "\r\n");
	char *raw = exchange(req);
	cr_assert(strncmp(raw, "HTTP/1.1 431", 12) == 0, "%s", raw);
	cr_assert(strcasestr(raw, "\r\nContent-Type: application/json"), "%s",
		  raw);
	assert_json_error(431, body_of(raw), "header_fields_too_large",
			  "--max-headers");
	free(raw);

	/* Ten are fine (Host, eight, Connection). */
	n = (size_t)snprintf(req, sizeof(req),
			     "GET /healthz HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < 8; i++)
		n += (size_t)snprintf(req + n, sizeof(req) - n, "X-H%d: %d\r\n",
				      i, i);
	snprintf(req + n, sizeof(req) - n, "Connection: close\r\n\r\n");
	raw = exchange(req);
	cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%s", raw);
	free(raw);

	/* One header of 3000 bytes. */
	char big[3001];
	memset(big, 'v', 3000);
	big[3000] = '\0';
	snprintf(req, sizeof(req),
		 "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", big);
	raw = exchange(req);
	cr_assert(strncmp(raw, "HTTP/1.1 431", 12) == 0, "%.200s", raw);
	assert_json_error(431, body_of(raw), "header_fields_too_large",
			  "--max-header-bytes");
	free(raw);

	/* A path of 3000 bytes. */
	memset(big, 'p', 3000);
	snprintf(req, sizeof(req), "GET /%s HTTP/1.1\r\nHost: x\r\n\r\n", big);
	raw = exchange(req);
	cr_assert(strncmp(raw, "HTTP/1.1 414", 12) == 0, "%.200s", raw);
	assert_json_error(414, body_of(raw), "uri_too_long",
			  "--max-header-bytes");
	free(raw);

	/* Far over (more than MHD's memory for a connection): MHD refuses
	 * it itself, with its own 431 page (docs/operations.md). */
	size_t huge = 100000;
	char *hreq = malloc(huge + 128);
	size_t h = (size_t)snprintf(
		hreq, 128, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: ");
	memset(hreq + h, 'v', huge);
	memcpy(hreq + h + huge, "\r\n\r\n", 5);
	raw = exchange(hreq);
	cr_assert(strncmp(raw, "HTTP/1.1 431", 12) == 0 || raw[0] == '\0',
		  "%.300s", raw);
	free(raw);
	free(hreq);

	struct th_response r;
	th_http(e2e_server(), "GET", "/healthz", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	th_response_free(&r);
	th_http(e2e_server(), "GET", "/metrics", NULL, 0, &r);
	cr_assert(strstr(r.body, "nodeflow_http_header_limit_total 3\n"), "%s",
		  r.body);
	th_response_free(&r);
	stop();
}

/* ---------------------------------------------------------- slow client */

/* Sends text one byte every 100 ms (paced by waiting for the server to
 * close) until the server closes the connection or deadline_ms passes;
 * returns whether it closed.  *answer gets what the server sent. */
static bool
trickle(int fd, const char *text, int deadline_ms, char *answer, size_t cap)
{
	size_t len = strlen(text), i = 0, got = 0;
	int64_t until = th_now_ms() + deadline_ms;
	answer[0] = '\0';
	while (th_now_ms() < until) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 100) > 0) {
			ssize_t n = recv(fd, answer + got, cap - 1 - got, 0);
			if (n <= 0)
				return true;
			got += (size_t)n;
			answer[got] = '\0';
			continue;
		}
		char c = text[i++ % len];
		if (send(fd, &c, 1, MSG_NOSIGNAL) != 1)
			return true;
	}
	return false;
}

Test(limits, a_slow_client_cannot_hold_a_connection)
{
	/* Never idle for a second, so only the request deadline applies. */
	const char *flags[] = {"--request-timeout-seconds", "1",
			       "--idle-timeout-seconds", "60", NULL};
	e2e_start(flags);
	char answer[4096];

	/* Headers, one byte at a time, never finished. */
	int fd = dial_from(1);
	send_all(fd, "GET /healthz HTTP/1.1\r\n", 23);
	bool closed = trickle(fd, "X-Slow: abcdefgh\r\n", 30000, answer,
			      sizeof(answer));
	close(fd);
	cr_assert(closed, "a trickle of headers held the connection 30 s");
	cr_assert_null(strstr(answer, "200 OK"), "%s", answer);

	/* Headers complete, the body a byte at a time. */
	fd = dial_from(1);
	const char *head = "POST /v1/ns/default/workflows HTTP/1.1\r\n"
			   "Host: x\r\nContent-Type: application/json\r\n"
			   "Content-Length: 100000\r\n\r\n";
	send_all(fd, head, strlen(head));
	closed = trickle(fd, "{\"name\":", 30000, answer, sizeof(answer));
	close(fd);
	cr_assert(closed, "a trickle of body held the connection 30 s");

	/* A keep-alive connection sending whole requests is unaffected. */
	fd = dial_from(1);
	for (int i = 0; i < 3; i++) {
		const char *get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
		send_all(fd, get, strlen(get));
		char *raw = read_response(fd, 20000);
		cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0,
			  "request %d: %s", i, raw);
		free(raw);
	}
	close(fd);

	struct th_response r;
	th_http(e2e_server(), "GET", "/metrics", NULL, 0, &r);
	cr_assert(strstr(r.body, "nodeflow_http_request_timeouts_total 2\n"),
		  "%s", r.body);
	th_response_free(&r);
	stop();
}

/* -------------------------------------------------------------- parked */

static int
poll_from(int client, int wait_ms)
{
	int fd = dial_from(client);
	char body[128], req[512];
	int n = snprintf(body, sizeof(body),
			 "{\"workerId\":\"w%d\",\"waitMs\":%d}", client,
			 wait_ms);
	snprintf(req, sizeof(req),
		 "POST /v1/ns/default/queues/idle/poll HTTP/1.1\r\n"
		 "Host: x\r\nContent-Type: application/json\r\n"
		 "Content-Length: %d\r\n\r\n%s",
		 n, body);
	send_all(fd, req, strlen(req));
	return fd;
}

static void
assert_429(int fd, const char *mentions)
{
	char *raw = read_response(fd, 20000);
	cr_assert(strncmp(raw, "HTTP/1.1 429", 12) == 0, "%s", raw);
	cr_assert(strcasestr(raw, "\r\nRetry-After: "), "%s", raw);
	assert_json_error(429, body_of(raw), "too_many_requests", mentions);
	free(raw);
	close(fd);
}

Test(limits, parked_long_polls_are_capped_per_client_and_in_all)
{
	const char *flags[] = {"--max-parked-per-client", "2", "--max-parked",
			       "3", NULL};
	e2e_start(flags);
	/* Two from 127.0.0.1 park. */
	int a = poll_from(1, 8000), b = poll_from(1, 8000);
	wait_metric("nodeflow_http_parked 2\n");
	/* A third from the same address is refused. */
	assert_429(poll_from(1, 8000), "--max-parked-per-client");
	/* Another address parks: three in all. */
	int c = poll_from(2, 8000);
	wait_metric("nodeflow_http_parked 3\n");
	/* A fourth address finds the server full. */
	assert_429(poll_from(3, 8000), "--max-parked");

	/* Once answered (empty, at their deadline), the places are free. */
	int fds[] = {a, b, c};
	for (int i = 0; i < 3; i++) {
		char *raw = read_response(fds[i], 30000);
		cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%s", raw);
		cr_assert(strstr(raw, "{\"tasks\":[]}"), "%s", raw);
		free(raw);
		close(fds[i]);
	}
	wait_metric("nodeflow_http_parked 0\n");
	int d = poll_from(1, 1), e = poll_from(1, 1), f = poll_from(3, 1);
	int again[] = {d, e, f};
	for (int i = 0; i < 3; i++) {
		char *raw = read_response(again[i], 30000);
		cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%s", raw);
		free(raw);
		close(again[i]);
	}
	struct th_response r;
	th_http(e2e_server(), "GET", "/metrics", NULL, 0, &r);
	cr_assert(strstr(r.body, "nodeflow_http_park_refused_total 2\n"), "%s",
		  r.body);
	th_response_free(&r);
	stop();
}

/* ---------------------------------------------------------------- pool */

struct lock_wait {
	PGconn *c;
	const char *db;
	long want;
};

static bool
lock_waiters_are(void *arg)
{
	struct lock_wait *w = arg;
	const char *params[] = {w->db};
	return th_int(w->c,
		      "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
		      "AND wait_event_type = 'Lock' AND query LIKE '%Workflow%'",
		      1, params) == w->want;
}

/* "WorkflowExecutions" locked by a transaction of the test's own, with a
 * second connection to watch who waits for it. */
struct table_lock {
	PGconn *c, *watch;
};

/* Locks the table, sends request (a list, which reads it) on fd, and
 * returns once that request waits for the lock. */
static void
hold_on_lock(struct table_lock *l, int fd, const char *request)
{
	l->c = th_connect(e2e_db()->url);
	th_exec(l->c, "BEGIN");
	th_exec(l->c,
		"LOCK TABLE \"WorkflowExecutions\" IN ACCESS EXCLUSIVE MODE");
	l->watch = th_connect(e2e_db()->url);
	send_all(fd, request, strlen(request));
	struct lock_wait w = {l->watch, e2e_db()->name, 1};
	cr_assert(th_wait_until(30000, lock_waiters_are, &w),
		  "the request never waited for the lock");
}

/* Ends the lock's transaction: what waited for it goes on. */
static void
release_lock(struct table_lock *l)
{
	th_exec(l->c, "COMMIT");
	PQfinish(l->watch);
	PQfinish(l->c);
}

static const char keep_alive_list[] =
	"GET /v1/ns/default/workflows HTTP/1.1\r\n"
	"Host: x\r\n\r\n";

Test(limits, a_busy_pool_answers_503_at_once_beyond_its_queue)
{
	/* The API alone: no engine loop of its own may queue on the lock. */
	const char *flags[] = {"--roles",
			       "api",
			       "--db-pool-size",
			       "1",
			       "--db-queue",
			       "1",
			       "--db-acquire-timeout-ms",
			       "60000",
			       "--http-threads",
			       "4",
			       NULL};
	e2e_start(flags);
	const char *list = "GET /v1/ns/default/workflows HTTP/1.1\r\n"
			   "Host: x\r\nConnection: close\r\n\r\n";
	/* Warm the pool's one connection (and the namespace cache). */
	char *raw = exchange(list);
	cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%s", raw);
	free(raw);

	/* Hold the table the list reads, so a list holds the connection. */
	struct table_lock lock;
	int holder = dial_from(1);
	hold_on_lock(&lock, holder, list);
	/* The next waits for the connection: the queue's one place. */
	int waiter = dial_from(2);
	send_all(waiter, list, strlen(list));
	wait_metric("nodeflow_db_pool_waiting 1\n");

	/* And the one after is refused at once. */
	struct th_response r;
	th_http(e2e_server(), "GET", "/v1/ns/default/workflows", NULL, 0, &r);
	cr_assert_eq(r.status, 503, "%s", r.body);
	cr_assert(strcasestr(r.headers, "\r\nRetry-After: "), "%s", r.headers);
	assert_json_error(r.status, r.body, "unavailable", "--db-queue");
	th_response_free(&r);

	/* The lock goes: the two that waited are answered. */
	release_lock(&lock);
	int fds[] = {holder, waiter};
	for (int i = 0; i < 2; i++) {
		raw = read_response(fds[i], 30000);
		cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%s", raw);
		free(raw);
		close(fds[i]);
	}
	th_http(e2e_server(), "GET", "/metrics", NULL, 0, &r);
	cr_assert(strstr(r.body, "nodeflow_db_pool_refused_total 1\n"), "%s",
		  r.body);
	th_response_free(&r);
	stop();
}

/* --------------------------------------------------------- connections */

/* Whether the server closes fd (EOF or reset) before deadline_ms. */
static bool
closed_within(int fd, int deadline_ms)
{
	int64_t until = th_now_ms() + deadline_ms;
	while (th_now_ms() < until) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		char buf[512];
		if (recv(fd, buf, sizeof(buf), 0) <= 0)
			return true;
	}
	return false;
}

static const char keep_alive_get[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

/* A keep-alive request on fd; whether it was answered 200. */
static bool
healthy_on(int fd)
{
	send_all(fd, keep_alive_get, strlen(keep_alive_get));
	char *raw = read_response(fd, 20000);
	bool ok = strncmp(raw, "HTTP/1.1 200", 12) == 0;
	free(raw);
	return ok;
}

static bool
new_connection_served(void *arg)
{
	int fd = dial_from(*(int *)arg);
	bool ok = healthy_on(fd);
	close(fd);
	return ok;
}

/* ------------------------------------------------------- head of line */

Test(limits, a_waiting_request_holds_up_no_other_connection)
{
	/* Two handler threads, one of which a list will hold. */
	const char *flags[] = {"--roles", "api", "--http-threads", "2", NULL};
	e2e_start(flags);
	/* Keep-alive connections opened first, each answered once: whatever
	 * thread reads them, they are open when the list starts to wait. */
	enum { CONNS = 6 };
	int fds[CONNS];
	for (int i = 0; i < CONNS; i++) {
		fds[i] = dial_from(6);
		cr_assert(healthy_on(fds[i]), "connection %d", i);
	}
	struct table_lock lock;
	hold_on_lock(&lock, fds[0], keep_alive_list);

	/* The other connections are answered while it waits, and so is a
	 * new one. */
	for (int i = 1; i < CONNS; i++)
		cr_assert(healthy_on(fds[i]),
			  "connection %d was not answered while another "
			  "request waited",
			  i);
	int other = 7;
	cr_assert(new_connection_served(&other));

	/* The lock goes: the list is answered, on its own connection. */
	release_lock(&lock);
	char *raw = read_response(fds[0], 30000);
	cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%s", raw);
	free(raw);
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
	stop();
}

/* Which of fds[0..1] has something to read first, within deadline_ms
 * (-1: neither). */
static int
first_readable(const int fds[2], int deadline_ms)
{
	struct pollfd pfd[2] = {{.fd = fds[0], .events = POLLIN},
				{.fd = fds[1], .events = POLLIN}};
	if (poll(pfd, 2, deadline_ms) <= 0)
		return -1;
	return (pfd[0].revents & POLLIN) ? 0 : 1;
}

Test(limits, a_full_handler_queue_answers_503_at_once)
{
	const char *flags[] = {"--roles", "api",          "--http-threads",
			       "1",       "--http-queue", "1",
			       NULL};
	e2e_start(flags);
	/* The one handler thread waits on the lock. */
	struct table_lock lock;
	int holder = dial_from(8);
	hold_on_lock(&lock, holder, keep_alive_list);

	/* Two more: one takes the queue's one place, the other is refused
	 * at once, whichever came first. */
	int fds[2] = {dial_from(8), dial_from(8)};
	for (int i = 0; i < 2; i++)
		send_all(fds[i], keep_alive_get, strlen(keep_alive_get));
	int refused = first_readable(fds, 20000);
	cr_assert(refused >= 0, "neither request was answered at once");
	char *raw = read_response(fds[refused], 20000);
	cr_assert(strncmp(raw, "HTTP/1.1 503", 12) == 0, "%s", raw);
	cr_assert(strcasestr(raw, "\r\nRetry-After: "), "%s", raw);
	assert_json_error(503, body_of(raw), "unavailable", "--http-queue");
	free(raw);

	/* The lock goes: the list and the one that waited are answered. */
	release_lock(&lock);
	int answered[] = {holder, fds[1 - refused]};
	for (int i = 0; i < 2; i++) {
		raw = read_response(answered[i], 30000);
		cr_assert(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%s", raw);
		free(raw);
	}
	struct th_response r;
	th_http(e2e_server(), "GET", "/metrics", NULL, 0, &r);
	cr_assert(strstr(r.body, "nodeflow_http_queue_refused_total 1\n"), "%s",
		  r.body);
	th_response_free(&r);
	close(holder);
	close(fds[0]);
	close(fds[1]);
	stop();
}

Test(limits, connections_are_capped_per_client)
{
	const char *flags[] = {"--max-connections-per-client", "3", NULL};
	e2e_start(flags);
	int held[3];
	for (int i = 0; i < 3; i++) {
		held[i] = dial_from(4);
		cr_assert(healthy_on(held[i]), "connection %d", i);
	}
	/* A fourth from the same address is closed unanswered. */
	int extra = dial_from(4);
	send_all(extra, keep_alive_get, strlen(keep_alive_get));
	cr_assert(closed_within(extra, 20000), "a fourth connection was kept");
	close(extra);
	/* Another address is served; so is this one once it closes one. */
	int other = 5;
	cr_assert(new_connection_served(&other));
	close(held[0]);
	int same = 4;
	cr_assert(th_wait_until(20000, new_connection_served, &same),
		  "a place freed by a closed connection was not reused");
	close(held[1]);
	close(held[2]);
	stop();
}
