/*
 * End-to-end tests of the nodeflow binary (NODEFLOW_BIN), run as a child
 * process and spoken to over real HTTP:
 *
 *   server   /healthz; /readyz when ready, with a migration pending, with
 *            one the binary does not know, with the database down, and
 *            turning ready once `migrate` runs; /metrics in the Prometheus
 *            text format; JSON error bodies for 404 (paths that are not
 *            UTF-8 included), 405 and 413 (by Content-Length, chunked, and
 *            Expect: 100-continue); the idle timeout; graceful shutdown on
 *            SIGTERM and SIGINT, a request in progress being answered
 *            first; --roles; a port in use; --log-format json;
 *            NODEFLOW_LISTEN read from the environment.
 *   cli      `migrate`, `migrate status` (exit 0, 3 pending, 4 ahead),
 *            `migrate down`, `partitions ensure` (idempotent), an
 *            unreachable database (exit 1), usage errors (exit 2), --help
 *            listing every NODEFLOW_* variable.
 *   pg15     migrate, migrate status, partitions ensure and serve refuse
 *            PostgreSQL 15.
 *
 * Every test gets its own database (dropped in the suite's fini, even when
 * an assertion fails) and its own server on a free port.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The binary's migrations: update with each new one. */
#define KNOWN_MIGRATIONS 15
#define LATEST_MIGRATION "0015_queue_name_stats"

extern char **environ;

enum {
	CLI_TIMEOUT_MS = 60000,
	STOP_TIMEOUT_MS = 10000,
	START_TIMEOUT_MS = 15000,
};

/* ---------------------------------------------------------- child helper */

/*
 * A nodeflow child with stdout and stderr kept apart (the harness merges
 * them): the JSON-log test must see stderr alone, and the NODEFLOW_LISTEN
 * test must run serve without the --listen the harness adds.
 */
struct child {
	pid_t pid;
	int fd[2]; /* stdout, stderr; -1 at EOF */
	char buf[2][65536];
	size_t len[2];
};

static void
child_spawn(struct child *c, const char *const *argv, const char *const *set)
{
	const char *bin = th_env("NODEFLOW_BIN");
	size_t argc = 0, nset = 0, nenv = 0;
	while (argv[argc])
		argc++;
	while (set && set[nset])
		nset++;
	while (environ[nenv])
		nenv++;
	char **full = calloc(argc + 2, sizeof(*full));
	full[0] = (char *)bin;
	for (size_t i = 0; i < argc; i++)
		full[i + 1] = (char *)argv[i];
	char **env = calloc(nenv + nset + 1, sizeof(*env));
	size_t j = 0;
	for (size_t i = 0; i < nset; i++)
		env[j++] = (char *)set[i];
	for (size_t i = 0; i < nenv; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t len =
			eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool overridden = false;
		for (size_t k = 0; k < nset; k++)
			if (strncmp(set[k], environ[i], len) == 0 &&
			    set[k][len] == '=')
				overridden = true;
		if (!overridden)
			env[j++] = environ[i];
	}

	int out[2], err[2];
	cr_assert(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0);
	memset(c, 0, sizeof(*c));
	c->pid = fork();
	cr_assert(c->pid >= 0);
	if (c->pid == 0) {
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		execve(bin, full, env);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	c->fd[0] = out[0];
	c->fd[1] = err[0];
	free(full);
	free(env);
}

/* Reads whatever the child wrote within timeout_ms. */
static void
child_pump(struct child *c, int timeout_ms)
{
	struct pollfd pfd[2];
	for (int i = 0; i < 2; i++)
		pfd[i] = (struct pollfd){.fd = c->fd[i], .events = POLLIN};
	if (poll(pfd, 2, timeout_ms) <= 0)
		return;
	for (int i = 0; i < 2; i++) {
		if (c->fd[i] < 0 || !(pfd[i].revents & (POLLIN | POLLHUP)))
			continue;
		size_t room = sizeof(c->buf[i]) - 1 - c->len[i];
		cr_assert(room > 0, "the child wrote more than %zu bytes",
			  sizeof(c->buf[i]));
		ssize_t n = read(c->fd[i], c->buf[i] + c->len[i], room);
		if (n <= 0) {
			close(c->fd[i]);
			c->fd[i] = -1;
			continue;
		}
		c->len[i] += (size_t)n;
		c->buf[i][c->len[i]] = '\0';
	}
}

/* Waits for the child's stdout (which 0) or stderr (1) to hold a whole line
 * containing marker; returns where the marker starts, or NULL on timeout or
 * exit. */
static const char *
child_wait_output(struct child *c, int which, const char *marker,
		  int timeout_ms)
{
	int64_t until = th_now_ms() + timeout_ms;
	while (th_now_ms() < until) {
		const char *at = strstr(c->buf[which], marker);
		if (at && strchr(at, '\n'))
			return at;
		if (c->fd[0] < 0 && c->fd[1] < 0)
			return NULL;
		child_pump(c, 20);
	}
	return NULL;
}

static const char *
child_wait_line(struct child *c, const char *marker, int timeout_ms)
{
	return child_wait_output(c, 0, marker, timeout_ms);
}

/* Waits for the exit, reading all output; -1 on timeout (child killed). */
static int
child_wait_exit(struct child *c, int timeout_ms)
{
	int64_t until = th_now_ms() + timeout_ms;
	int status;
	for (;;) {
		pid_t r = waitpid(c->pid, &status, WNOHANG);
		if (r == c->pid)
			break;
		if (th_now_ms() >= until) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &status, 0);
			c->pid = 0;
			return -1;
		}
		child_pump(c, 10);
	}
	c->pid = 0;
	while (c->fd[0] >= 0 || c->fd[1] >= 0)
		child_pump(c, 1000);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The port of the "listening on http://HOST:PORT" line, or -1. */
static int
listening_port(const char *at)
{
	const char *colon = strchr(at + strlen("listening on http://"), ':');
	return colon ? atoi(colon + 1) : -1;
}

static void
child_kill(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		c->pid = 0;
	}
	for (int i = 0; i < 2; i++) {
		if (c->fd[i] >= 0)
			close(c->fd[i]);
		c->fd[i] = -1;
	}
}

/* ----------------------------------------------------- per-test fixtures */

static struct th_db db;
static struct th_server srv;
static struct child kid = {.fd = {-1, -1}};

static void
cleanup(void)
{
	if (srv.proc.pid > 0) {
		kill(srv.proc.pid, SIGKILL);
		waitpid(srv.proc.pid, NULL, 0);
		srv.proc.pid = 0;
	}
	child_kill(&kid);
	th_db_drop(&db);
}

TestSuite(server, .fini = cleanup);
TestSuite(cli, .fini = cleanup);
TestSuite(pg15, .fini = cleanup);

/* ---------------------------------------------------------- HTTP helpers */

static json_t *
json_body(const struct th_response *r)
{
	json_error_t je;
	json_t *v = json_loadb(r->body, r->body_len, 0, &je);
	cr_assert_not_null(v, "body is not JSON (%s): %s", je.text, r->body);
	return v;
}

static const char *
str_at(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	cr_assert(json_is_string(v), "\"%s\" is not a string", key);
	return json_string_value(v);
}

/* Whether the JSON array a holds exactly the strings of want (NULL-ended). */
static bool
list_is(json_t *a, const char *const *want)
{
	if (!json_is_array(a))
		return false;
	size_t n = 0;
	while (want[n])
		n++;
	if (json_array_size(a) != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(a, i));
		if (!s || strcmp(s, want[i]) != 0)
			return false;
	}
	return true;
}

/* The value of header name in a raw header block (static buffer), or NULL. */
static const char *
header_of(const struct th_response *r, const char *name)
{
	static char value[256];
	size_t n = strlen(name);
	for (const char *line = r->headers; line && *line;) {
		const char *end = strstr(line, "\r\n");
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len > n && strncasecmp(line, name, n) == 0 &&
		    line[n] == ':') {
			const char *v = line + n + 1;
			while (*v == ' ')
				v++;
			size_t vlen = (size_t)(line + len - v);
			if (vlen >= sizeof(value))
				vlen = sizeof(value) - 1;
			memcpy(value, v, vlen);
			value[vlen] = '\0';
			return value;
		}
		line = end ? end + 2 : line + len;
	}
	return NULL;
}

/* The error body: JSON, exactly {"error":{"code":code,"message":"…"}}, and
 * nothing that looks like HTML or a stack trace. */
static void
assert_json_error(const struct th_response *r, long status, const char *code)
{
	cr_assert_eq(r->status, status, "status %ld, wanted %ld: %s", r->status,
		     status, r->body);
	cr_assert(strncmp(r->content_type, "application/json", 16) == 0,
		  "Content-Type %s", r->content_type);
	json_t *v = json_body(r);
	cr_assert(json_is_object(v) && json_object_size(v) == 1, "%s", r->body);
	json_t *e = json_object_get(v, "error");
	cr_assert(json_is_object(e) && json_object_size(e) == 2, "%s", r->body);
	cr_assert_str_eq(str_at(e, "code"), code);
	cr_assert_gt(strlen(str_at(e, "message")), 0);
	json_decref(v);
	const char *const leaks[] = {"<html", "<HTML",     "<!DOCTYPE",
				     "<body", "Traceback", "backtrace",
				     ".c:",   "#0 "};
	for (size_t i = 0; i < sizeof(leaks) / sizeof(leaks[0]); i++)
		cr_assert_null(strstr(r->body, leaks[i]),
			       "body leaks \"%s\": %s", leaks[i], r->body);
}

static void
start_on_clone(const char *const *flags)
{
	th_db_clone(&db);
	th_server_start(&srv, db.url, flags);
}

/* start_on_clone, once sql has changed the clone. */
static void
start_on_changed_clone(const char *sql, const char *const *flags)
{
	th_db_clone(&db);
	PGconn *c = th_connect(db.url);
	th_exec(c, sql);
	PQfinish(c);
	th_server_start(&srv, db.url, flags);
}

/* What makes a clone's migration 0002 pending. */
#define UNAPPLY_0002 \
	"DELETE FROM \"SchemaMigrations\" WHERE \"name\" = '0002_engine'"

/* Delivers sig to the harness's server and waits for its exit (reading its
 * output so that it never blocks on a full pipe); the exit status, -1 on
 * timeout. */
static int
stop_with(struct th_server *s, int sig, int timeout_ms)
{
	cr_assert_gt(s->proc.pid, 0);
	cr_assert(kill(s->proc.pid, sig) == 0);
	int64_t until = th_now_ms() + timeout_ms;
	int status;
	for (;;) {
		pid_t r = waitpid(s->proc.pid, &status, WNOHANG);
		if (r == s->proc.pid)
			break;
		if (th_now_ms() >= until)
			return -1; /* cleanup() kills it */
		struct pollfd pfd = {.fd = s->proc.out_fd, .events = POLLIN};
		if (poll(&pfd, 1, 10) > 0) {
			char sink[4096];
			if (read(s->proc.out_fd, sink, sizeof(sink)) <= 0) {
				struct timespec nap = {0, 2 * 1000000};
				nanosleep(&nap, NULL);
			}
		}
	}
	s->proc.pid = 0;
	close(s->proc.out_fd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* SIGTERM; the server must exit 0, and soon: well inside the 10 s it
 * grants requests in progress, so none is left counted as running. */
static void
stop_server(void)
{
	int64_t t0 = th_now_ms();
	int rc = th_server_stop(&srv);
	cr_assert_eq(rc, 0, "exit status %d", rc);
	cr_assert_lt(th_now_ms() - t0, 5000, "stopping took %lld ms",
		     (long long)(th_now_ms() - t0));
}

/* A TCP port on 127.0.0.1 that nothing listens on. */
static int
closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	socklen_t len = sizeof(sa);
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* ------------------------------------------------------------- /healthz */

Test(server, healthz_is_ok)
{
	start_on_clone(NULL);
	struct th_response r;
	th_http(&srv, "GET", "/healthz", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strncmp(r.content_type, "application/json", 16) == 0, "%s",
		  r.content_type);
	json_t *v = json_body(&r);
	cr_assert(json_is_object(v) && json_object_size(v) == 1, "%s", r.body);
	cr_assert_str_eq(str_at(v, "status"), "ok");
	json_decref(v);
	th_response_free(&r);

	/* A query string does not change the route. */
	th_http(&srv, "GET", "/healthz?probe=kubelet", NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	th_response_free(&r);
	stop_server();
}

/* A server started at its defaults, or with enough handler threads for
 * a pool of HTTP threads (one per sixteen), says nothing is amiss: it
 * once warned on every start that a pool of one thread is ignored. */
Test(server, a_start_warns_of_nothing)
{
	const char *const pooled[] = {"--http-threads", "40", NULL};
	const char *const *flags[] = {NULL, pooled};
	th_db_clone(&db);
	for (size_t i = 0; i < 2; i++) {
		th_server_start(&srv, db.url, flags[i]);
		struct th_response r;
		th_http(&srv, "GET", "/healthz", NULL, 0, &r);
		cr_assert_eq(r.status, 200, "%s", r.body);
		th_response_free(&r);
		cr_assert_null(strstr(srv.proc.output, " warn "), "%s",
			       srv.proc.output);
		stop_server();
	}
}

/* -------------------------------------------------------------- /readyz */

/* The body of the last /readyz, for failure messages. */
static char last_readyz[4096];

/* GETs /readyz, checks the status code and returns the parsed body. */
static json_t *
readyz(long want_status)
{
	struct th_response r;
	th_http(&srv, "GET", "/readyz", NULL, 0, &r);
	cr_assert_eq(r.status, want_status, "/readyz %ld: %s", r.status,
		     r.body);
	cr_assert(strncmp(r.content_type, "application/json", 16) == 0, "%s",
		  r.content_type);
	snprintf(last_readyz, sizeof(last_readyz), "%s", r.body);
	json_t *v = json_body(&r);
	th_response_free(&r);
	return v;
}

Test(server, readyz_is_ready_on_a_migrated_database)
{
	start_on_clone(NULL);
	json_t *v = readyz(200);
	cr_assert_str_eq(str_at(v, "status"), "ready");
	json_t *dbv = json_object_get(v, "database");
	cr_assert(json_is_true(json_object_get(dbv, "ok")));
	json_t *m = json_object_get(v, "migrations");
	const char *none[] = {NULL};
	cr_assert(list_is(json_object_get(m, "pending"), none));
	cr_assert(list_is(json_object_get(m, "unknown"), none));
	cr_assert_eq(json_integer_value(json_object_get(m, "applied")),
		     KNOWN_MIGRATIONS);
	json_decref(v);
	stop_server();
}

Test(server, readyz_lists_a_pending_migration)
{
	start_on_changed_clone(UNAPPLY_0002, NULL);
	json_t *v = readyz(503);
	cr_assert_str_eq(str_at(v, "status"), "not_ready");
	cr_assert(json_is_true(
		json_object_get(json_object_get(v, "database"), "ok")));
	json_t *m = json_object_get(v, "migrations");
	const char *pending[] = {"0002_engine", NULL}, *none[] = {NULL};
	cr_assert(list_is(json_object_get(m, "pending"), pending), "%s",
		  last_readyz);
	cr_assert(list_is(json_object_get(m, "unknown"), none));
	json_decref(v);
	stop_server();
}

Test(server, readyz_lists_an_unknown_migration)
{
	start_on_changed_clone("INSERT INTO \"SchemaMigrations\" (\"name\") "
			       "VALUES ('9999_future')",
			       NULL);
	json_t *v = readyz(503);
	cr_assert_str_eq(str_at(v, "status"), "not_ready");
	json_t *m = json_object_get(v, "migrations");
	const char *unknown[] = {"9999_future", NULL}, *none[] = {NULL};
	cr_assert(list_is(json_object_get(m, "unknown"), unknown), "%s",
		  last_readyz);
	cr_assert(list_is(json_object_get(m, "pending"), none));
	json_decref(v);
	stop_server();
}

Test(server, readyz_reports_an_unreachable_database)
{
	char url[256];
	snprintf(url, sizeof(url),
		 "host=127.0.0.1 port=%d dbname=nodeflow user=postgres "
		 "connect_timeout=2",
		 closed_port());
	th_server_start(&srv, url, NULL);

	struct th_response r;
	th_http(&srv, "GET", "/healthz", NULL, 0, &r);
	cr_assert_eq(r.status, 200, "the process is alive: %s", r.body);
	th_response_free(&r);

	/* Twice: the first attempt connects, the second meets the back-off. */
	for (int i = 0; i < 2; i++) {
		json_t *v = readyz(503);
		cr_assert_str_eq(str_at(v, "status"), "not_ready");
		json_t *dbv = json_object_get(v, "database");
		cr_assert(json_is_false(json_object_get(dbv, "ok")), "%s",
			  last_readyz);
		cr_assert_gt(strlen(str_at(dbv, "error")), 0);
		json_decref(v);
	}
	stop_server();
}

struct ready_probe {
	long status;
};

static bool
becomes_ready(void *arg)
{
	struct ready_probe *p = arg;
	struct th_response r;
	th_http(&srv, "GET", "/readyz", NULL, 0, &r);
	p->status = r.status;
	th_response_free(&r);
	return p->status == 200;
}

Test(server, readyz_turns_ready_once_migrated)
{
	th_db_empty(&db);
	th_server_start(&srv, db.url, NULL);
	json_t *v = readyz(503);
	json_t *m = json_object_get(v, "migrations");
	const char *both[] = {"0001_partitioning",
			      "0002_engine",
			      "0003_engine_runtime",
			      "0004_system_tasks",
			      "0005_flow_control",
			      "0006_payloads",
			      "0007_outbox",
			      "0008_live_notify",
			      "0009_task_logs",
			      "0010_namespace_events",
			      "0011_lease_candidates",
			      "0012_execution_fillfactor",
			      "0013_lease_candidates_keyed",
			      "0014_decide_queue_due",
			      LATEST_MIGRATION,
			      NULL};
	cr_assert(list_is(json_object_get(m, "pending"), both), "%s",
		  last_readyz);
	json_decref(v);

	char out[16384];
	const char *argv[] = {"migrate", "--database-url", db.url, NULL};
	int rc = th_run_nodeflow(argv, NULL, CLI_TIMEOUT_MS, out, sizeof(out));
	cr_assert_eq(rc, 0, "migrate exited %d:\n%s", rc, out);

	/* No restart needed: readiness is checked on every request. */
	struct ready_probe p = {0};
	cr_assert(th_wait_until(5000, becomes_ready, &p), "/readyz stayed %ld",
		  p.status);
	stop_server();
}

/* ------------------------------------------------------------- /metrics */

static bool
is_name_start(char c)
{
	return isalpha((unsigned char)c) || c == '_' || c == ':';
}

static bool
is_name_char(char c)
{
	return is_name_start(c) || isdigit((unsigned char)c);
}

/*
 * Parses one sample line, `name{l="v",…} value [timestamp]` or `name value`,
 * copying the name out; false when it is malformed.
 */
static bool
parse_sample(const char *line, char *name, size_t size, double *value)
{
	const char *p = line;
	if (!is_name_start(*p))
		return false;
	while (is_name_char(*p))
		p++;
	size_t n = (size_t)(p - line);
	if (n >= size)
		return false;
	memcpy(name, line, n);
	name[n] = '\0';
	if (*p == '{') {
		p++;
		while (*p != '}') {
			if (!is_name_start(*p) || *p == ':')
				return false;
			while (is_name_char(*p) && *p != ':')
				p++;
			if (*p++ != '=' || *p++ != '"')
				return false;
			while (*p != '"') {
				if (!*p || *p == '\n')
					return false;
				if (*p == '\\') {
					p++;
					if (*p != '\\' && *p != '"' &&
					    *p != 'n')
						return false;
				}
				p++;
			}
			p++; /* the closing quote */
			if (*p == ',')
				p++;
			else if (*p != '}')
				return false;
		}
		p++;
	}
	if (*p++ != ' ')
		return false;
	char *end;
	errno = 0;
	*value = strtod(p, &end);
	if (end == p || errno)
		return false;
	if (*end == ' ') { /* an optional timestamp */
		p = end + 1;
		(void)strtoll(p, &end, 10);
		if (end == p)
			return false;
	}
	return *end == '\0';
}

Test(server, metrics_are_prometheus_text)
{
	start_on_clone(NULL);
	struct th_response r;
	th_http(&srv, "GET", "/healthz", NULL, 0, &r);
	th_response_free(&r);
	th_http(&srv, "GET", "/no/such/path", NULL, 0, &r);
	th_response_free(&r);

	th_http(&srv, "GET", "/metrics", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strncmp(r.content_type, "text/plain", 10) == 0, "%s",
		  r.content_type);
	cr_assert(
		strstr(r.body, "# TYPE nodeflow_http_requests_total counter\n"),
		"%s", r.body);
	cr_assert(strstr(r.body, "\nnodeflow_loop_ticks_total{"), "%s", r.body);
	cr_assert(
		strstr(r.body, "\nnodeflow_http_requests_total{code=\"200\"} "),
		"%s", r.body);
	cr_assert(strstr(r.body,
			 "\nnodeflow_http_requests_total{code=\"404\"} 1\n"),
		  "%s", r.body);
	cr_assert_eq(r.body[r.body_len - 1], '\n', "no final newline");

	/* Every line parses; each name's TYPE comes once, before its samples.
	 */
	char typed[64][128];
	int ntyped = 0, samples = 0;
	char *copy = strdup(r.body), *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char name[128];
		if (line[0] == '#') {
			char kind[16] = "";
			if (sscanf(line, "# TYPE %127s %15s", name, kind) ==
			    2) {
				cr_assert(strcmp(kind, "counter") == 0 ||
						  strcmp(kind, "gauge") == 0,
					  "bad TYPE line: %s", line);
				for (int i = 0; i < ntyped; i++)
					cr_assert_str_neq(typed[i], name,
							  "TYPE of %s twice",
							  name);
				cr_assert_lt(ntyped, 64);
				snprintf(typed[ntyped++], sizeof(typed[0]),
					 "%s", name);
			} else {
				cr_assert(strncmp(line, "# HELP ", 7) == 0,
					  "bad comment line: %s", line);
			}
			continue;
		}
		double value;
		cr_assert(parse_sample(line, name, sizeof(name), &value),
			  "malformed sample line: \"%s\"", line);
		cr_assert(ntyped > 0 && strcmp(typed[ntyped - 1], name) == 0,
			  "sample %s outside its TYPE block", name);
		samples++;
	}
	cr_assert_gt(samples, 3);
	free(copy);
	th_response_free(&r);
	stop_server();
}

/* nodeflow_db_pool_connections, read before any request used the pool. */
static long
pool_connections(void)
{
	struct th_response r;
	th_http(&srv, "GET", "/metrics", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	const char *at = strstr(r.body, "\nnodeflow_db_pool_connections ");
	cr_assert_not_null(at, "%s", r.body);
	long n = strtol(at + strlen("\nnodeflow_db_pool_connections "), NULL,
			10);
	th_response_free(&r);
	return n;
}

/* Pooled connections of the server on the clone whose last statement was
 * the batch of results: the last statement a warmed connection runs. */
static long long
warmed_connections(void)
{
	PGconn *c = th_connect(db.url);
	long long n = th_int(
		c,
		"SELECT count(*) FROM pg_stat_activity WHERE \"datname\" ="
		" current_database() AND \"pid\" <> pg_backend_pid() AND"
		" \"query\" LIKE 'WITH i AS (SELECT * FROM"
		" jsonb_to_recordset($2::jsonb) AS i(\"n\" int,%'",
		0, NULL);
	PQfinish(c);
	return n;
}

/* On a migrated database the HTTP threads' share of the pool is connected
 * before the server listens, so the first requests do not each wait on a
 * new backend, and each has run the statements of starts, polls and
 * results (one of them has answered /readyz since); on a database not
 * ready to serve, nothing is connected ahead. */
Test(server, pool_is_connected_before_the_first_request)
{
	const char *flags[] = {"--http-threads", "3", "--db-pool-size", "5",
			       NULL};
	start_on_clone(flags);
	cr_assert_eq(pool_connections(), 3);
	cr_assert_geq(warmed_connections(), 2);
	stop_server();

	start_on_changed_clone(UNAPPLY_0002, flags);
	cr_assert_eq(pool_connections(), 0);
	stop_server();
}

/* --------------------------------------------------------------- errors */

Test(server, unknown_path_is_a_json_404)
{
	start_on_clone(NULL);
	/* /%FF reaches the router as a byte that is not UTF-8.  "/" is the
	 * dashboard (test_ui.c); "/ui/" names none of its files. */
	const char *const paths[] = {"/nope",      "/healthz/",     "/ui/",
				     "/v1/ns/x/y", "/%3Cscript%3E", "/%FF",
				     "/caf%C3%A9"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct th_response r;
		th_http(&srv, "GET", paths[i], NULL, 0, &r);
		assert_json_error(&r, 404, "not_found");
		th_response_free(&r);
	}
	struct th_response r;
	th_http(&srv, "POST", "/nope", "{}", 2, &r);
	assert_json_error(&r, 404, "not_found");
	th_response_free(&r);
	stop_server();
}

Test(server, wrong_method_is_a_json_405_with_allow)
{
	start_on_clone(NULL);
	const char *const cases[][2] = {{"POST", "/healthz"},
					{"DELETE", "/readyz"},
					{"PUT", "/metrics"}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct th_response r;
		th_http(&srv, cases[i][0], cases[i][1],
			strcmp(cases[i][0], "DELETE") ? "{}" : NULL, 2, &r);
		assert_json_error(&r, 405, "method_not_allowed");
		const char *allow = header_of(&r, "Allow");
		cr_assert_not_null(allow, "no Allow header:\n%s", r.headers);
		cr_assert_str_eq(allow, "GET");
		th_response_free(&r);
	}
	stop_server();
}

/* Sends raw bytes over a fresh connection and returns what came back
 * (malloc'd), reading until the server closes or timeout_ms passes. */
static char *
raw_exchange(int port, const char *head, const char *body, size_t body_len,
	     int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cr_assert(send(fd, head, strlen(head), MSG_NOSIGNAL) ==
		  (ssize_t)strlen(head));
	/* The server may answer and close before taking the whole body. */
	size_t sent = 0;
	while (sent < body_len) {
		ssize_t n =
			send(fd, body + sent, body_len - sent, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	size_t cap = 65536, len = 0;
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
		/* A complete response: stop at its end. */
		const char *hdr_end = strstr(out, "\r\n\r\n");
		const char *cl = strcasestr(out, "\r\nContent-Length:");
		if (hdr_end && cl && cl < hdr_end &&
		    len >= (size_t)(hdr_end + 4 - out) +
				    strtoul(cl + 17, NULL, 10))
			break;
	}
	close(fd);
	return out;
}

Test(server, oversized_body_is_a_json_413)
{
	const char *flags[] = {"--max-body-bytes", "2048", NULL};
	start_on_clone(flags);
	size_t big = 8192;
	char *body = malloc(big + 1);
	memset(body, 'x', big);
	body[0] = '"';
	body[big - 1] = '"';
	body[big] = '\0';

	/* Declared by Content-Length: refused before it is read. */
	struct th_response r;
	th_http(&srv, "POST", "/healthz", body, big, &r);
	assert_json_error(&r, 413, "payload_too_large");
	cr_assert(strstr(r.body, "2048"), "the message names the limit: %s",
		  r.body);
	th_response_free(&r);

	/* At the limit it is read and routed (here: the wrong method). */
	th_http(&srv, "POST", "/healthz", body, 2048, &r);
	assert_json_error(&r, 405, "method_not_allowed");
	th_response_free(&r);

	/* Chunked, with no length announced: refused once it outgrows. */
	char head[256];
	snprintf(
		head, sizeof(head),
		"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%zx\r\n",
		big);
	char *chunked = malloc(big + 16);
	memcpy(chunked, body, big);
	memcpy(chunked + big, "\r\n0\r\n\r\n", 8);
	char *raw = raw_exchange(srv.port, head, chunked, big + 7, 10000);
	cr_assert(strncmp(raw, "HTTP/1.1 413", 12) == 0, "chunked: %s", raw);
	cr_assert(strcasestr(raw, "\r\nContent-Type: application/json"), "%s",
		  raw);
	cr_assert(strstr(raw, "\"payload_too_large\""), "%s", raw);
	free(raw);
	free(chunked);

	/* Announced with Expect: 100-continue: refused at once, the body
	 * never asked for. */
	snprintf(head, sizeof(head),
		 "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Expect: 100-continue\r\n\r\n",
		 big);
	raw = raw_exchange(srv.port, head, NULL, 0, 10000);
	cr_assert(strncmp(raw, "HTTP/1.1 413", 12) == 0, "expect: %s", raw);
	cr_assert_null(strstr(raw, "100 Continue"), "%s", raw);
	cr_assert(strstr(raw, "\"payload_too_large\""), "%s", raw);
	free(raw);
	free(body);

	/* The server is still healthy afterwards. */
	th_http(&srv, "GET", "/healthz", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	th_response_free(&r);
	th_http(&srv, "GET", "/metrics", NULL, 0, &r);
	cr_assert(strstr(r.body, "nodeflow_http_body_too_large_total 3\n"),
		  "%s", r.body);
	th_response_free(&r);
	stop_server();
}

Test(server, idle_connection_is_closed_after_the_timeout)
{
	const char *flags[] = {"--idle-timeout-seconds", "1", NULL};
	start_on_clone(flags);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)srv.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	/* Half a request, then silence. */
	const char *part = "GET /heal";
	cr_assert(send(fd, part, strlen(part), MSG_NOSIGNAL) > 0);
	int64_t t0 = th_now_ms();
	bool closed = false;
	while (!closed && th_now_ms() - t0 < 5000) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 50) > 0) {
			char buf[256];
			closed = recv(fd, buf, sizeof(buf), 0) <= 0;
		}
	}
	close(fd);
	cr_assert(closed, "still open after 5 s");
	cr_assert_geq(th_now_ms() - t0, 500, "closed before the timeout");
	stop_server();
}

/* ------------------------------------------------------------- shutdown */

Test(server, sigterm_stops_cleanly)
{
	start_on_clone(NULL);
	struct th_response r;
	th_http(&srv, "GET", "/readyz", NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	th_response_free(&r);
	int64_t t0 = th_now_ms();
	cr_assert_eq(th_server_stop(&srv), 0, "exit status");
	cr_assert_lt(th_now_ms() - t0, STOP_TIMEOUT_MS);
}

/* A listening socket on 127.0.0.1 that plays a database which never
 * answers; returns the fd and sets *port. */
static int
silent_database(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cr_assert(listen(fd, 16) == 0);
	socklen_t len = sizeof(sa);
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Accepts the next connection on fd within timeout_ms, or returns -1. */
static int
accept_within(int fd, int timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return -1;
	return accept4(fd, NULL, NULL, SOCK_CLOEXEC);
}

/*
 * A request in progress when SIGTERM arrives is answered before the process
 * exits.  /readyz is held in progress by a "database" that accepts the
 * connection and says nothing until the test lets go of it.
 */
Test(server, sigterm_lets_a_request_in_progress_finish)
{
	int port;
	int fake = silent_database(&port);
	char url[256];
	snprintf(url, sizeof(url),
		 "host=127.0.0.1 port=%d dbname=nodeflow user=postgres", port);
	const char *argv[] = {"serve",    "--roles",     "api",
			      "--listen", "127.0.0.1:0", "--database-url",
			      url,        "--log-level", "info",
			      NULL};
	child_spawn(&kid, argv, NULL);
	/* The start-up check connects first: hang up on it at once. */
	int pre = accept_within(fake, START_TIMEOUT_MS);
	cr_assert_geq(pre, 0, "no start-up connection");
	close(pre);
	const char *at = child_wait_line(
		&kid, "listening on http://127.0.0.1:", START_TIMEOUT_MS);
	cr_assert_not_null(at, "%s%s", kid.buf[0], kid.buf[1]);
	int http_port = listening_port(at);

	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)http_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	const char *req = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			  "Connection: close\r\n\r\n";
	cr_assert(send(c, req, strlen(req), MSG_NOSIGNAL) ==
		  (ssize_t)strlen(req));
	/* The handler is now connecting to the silent database, and so are
	 * the queue-signal listener and the event listener of the api role:
	 * hold all three, whichever comes first. */
	int held = accept_within(fake, 5000);
	cr_assert_geq(held, 0, "/readyz did not reach the database");
	int held2 = accept_within(fake, 5000);
	cr_assert_geq(held2, 0, "only one connection reached the database");
	int held3 = accept_within(fake, 5000);
	cr_assert_geq(held3, 0, "only two connections reached the database");

	cr_assert(kill(kid.pid, SIGTERM) == 0);
	cr_assert_not_null(child_wait_output(&kid, 1, "shutting down", 5000),
			   "%s", kid.buf[1]);
	/* Let the request finish: the database hangs up, readyz says 503. */
	close(held);
	close(held2);
	close(held3);

	char resp[8192] = "";
	size_t len = 0;
	int64_t until = th_now_ms() + 10000;
	while (th_now_ms() < until && len < sizeof(resp) - 1) {
		struct pollfd pfd = {.fd = c, .events = POLLIN};
		child_pump(&kid, 0);
		if (poll(&pfd, 1, 20) <= 0)
			continue;
		ssize_t n = recv(c, resp + len, sizeof(resp) - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		resp[len] = '\0';
	}
	close(c);
	close(fake);
	cr_assert(strncmp(resp, "HTTP/1.1 503", 12) == 0,
		  "the request in progress got no answer: \"%s\"\n%s", resp,
		  kid.buf[1]);
	cr_assert(strstr(resp, "\"not_ready\""), "%s", resp);
	cr_assert_eq(child_wait_exit(&kid, STOP_TIMEOUT_MS), 0, "%s",
		     kid.buf[1]);
}

Test(server, abandoned_upload_does_not_hold_shutdown)
{
	start_on_clone(NULL);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)srv.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	const char *req = "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			  "Content-Length: 100\r\n\r\n{\"partial\":";
	cr_assert(send(c, req, strlen(req), MSG_NOSIGNAL) ==
		  (ssize_t)strlen(req));
	/* A request on another connection proves the first was read. */
	struct th_response r;
	th_http(&srv, "GET", "/healthz", NULL, 0, &r);
	th_response_free(&r);
	close(c);
	th_http(&srv, "GET", "/healthz", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	th_response_free(&r);
	stop_server();
}

Test(server, sigint_stops_cleanly)
{
	start_on_clone(NULL);
	struct th_response r;
	th_http(&srv, "GET", "/readyz", NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	th_response_free(&r);
	cr_assert_eq(stop_with(&srv, SIGINT, STOP_TIMEOUT_MS), 0);
}

Test(server, port_in_use_fails_naming_the_address)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cr_assert(listen(fd, 1) == 0);
	socklen_t len = sizeof(sa);
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	char listen_at[64], url[256];
	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%d",
		 ntohs(sa.sin_port));
	snprintf(url, sizeof(url),
		 "host=127.0.0.1 port=%d dbname=nodeflow user=postgres",
		 closed_port());
	const char *argv[] = {"serve",          "--listen", listen_at,
			      "--database-url", url,        NULL};
	char text[16384];
	int rc =
		th_run_nodeflow(argv, NULL, CLI_TIMEOUT_MS, text, sizeof(text));
	close(fd);
	cr_assert_eq(rc, 1, "exit %d:\n%s", rc, text);
	cr_assert(strstr(text, listen_at), "the address is named:\n%s", text);
	cr_assert_null(strstr(text, "listening on"), "%s", text);
}

Test(server, roles_choose_what_runs)
{
	th_db_clone(&db);
	/* api only: HTTP (with its queue-signal listener), and no engine loop
	 * registers its metrics. */
	const char *api[] = {"--roles", "api", NULL};
	th_server_start(&srv, db.url, api);
	struct th_response r;
	th_http(&srv, "GET", "/metrics", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_null(strstr(r.body, "loop=\"decider\""), "%s", r.body);
	cr_assert_null(strstr(r.body, "loop=\"partitions\""), "%s", r.body);
	th_response_free(&r);
	stop_server();

	/* engine only: no listener at all. */
	const char *argv[] = {"serve",          "--roles", "engine",
			      "--database-url", db.url,    NULL};
	child_spawn(&kid, argv, NULL);
	cr_assert_not_null(child_wait_line(&kid, "running the engine loops",
					   START_TIMEOUT_MS),
			   "%s%s", kid.buf[0], kid.buf[1]);
	cr_assert_null(strstr(kid.buf[0], "listening"), "%s", kid.buf[0]);
	cr_assert(kill(kid.pid, SIGTERM) == 0);
	cr_assert_eq(child_wait_exit(&kid, STOP_TIMEOUT_MS), 0, "%s",
		     kid.buf[1]);

	/* Anything else is a usage error. */
	const char *bad[] = {"serve", "--roles", "api,web", NULL};
	char text[16384];
	int rc = th_run_nodeflow(bad, NULL, CLI_TIMEOUT_MS, text, sizeof(text));
	cr_assert_eq(rc, 2, "exit %d:\n%s", rc, text);
	cr_assert(strstr(text, "api,web"), "%s", text);
}

/* ------------------------------------------------- environment, log JSON */

Test(server, listen_address_from_the_environment)
{
	th_db_clone(&db);
	const char *argv[] = {"serve", "--database-url", db.url, NULL};
	const char *env[] = {"NODEFLOW_LISTEN=127.0.0.1:0", NULL};
	child_spawn(&kid, argv, env);
	const char *at = child_wait_line(
		&kid, "listening on http://127.0.0.1:", START_TIMEOUT_MS);
	cr_assert_not_null(at, "no listening line:\n%s%s", kid.buf[0],
			   kid.buf[1]);
	int port = listening_port(at);
	cr_assert(port > 0 && port != 8080, "port %d", port);

	struct th_server s = {.port = port};
	snprintf(s.base, sizeof(s.base), "http://127.0.0.1:%d", port);
	struct th_response r;
	th_http(&s, "GET", "/healthz", NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	th_response_free(&r);

	cr_assert(kill(kid.pid, SIGTERM) == 0);
	cr_assert_eq(child_wait_exit(&kid, STOP_TIMEOUT_MS), 0, "%s",
		     kid.buf[1]);
}

Test(server, json_log_lines)
{
	th_db_clone(&db);
	const char *argv[] = {
		"serve", "--listen",         "127.0.0.1:0", "--database-url",
		db.url,  "--log-format",     "json",        "--log-level",
		"debug", "--max-body-bytes", "1024",        NULL};
	child_spawn(&kid, argv, NULL);
	const char *at = child_wait_line(
		&kid, "listening on http://127.0.0.1:", START_TIMEOUT_MS);
	cr_assert_not_null(at, "no listening line:\n%s%s", kid.buf[0],
			   kid.buf[1]);
	struct th_server s = {.port = listening_port(at)};
	snprintf(s.base, sizeof(s.base), "http://127.0.0.1:%d", s.port);

	/* Something to log: requests of every kind. */
	const char *const paths[] = {"/healthz", "/readyz",    "/metrics",
				     "/nope",    "/%FF%22%5C", "/caf%C3%A9"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct th_response r;
		th_http(&s, "GET", paths[i], NULL, 0, &r);
		th_response_free(&r);
	}
	char body[4096];
	memset(body, 'a', sizeof(body));
	struct th_response r;
	th_http(&s, "POST", "/healthz", body, sizeof(body), &r);
	cr_assert_eq(r.status, 413);
	th_response_free(&r);

	cr_assert(kill(kid.pid, SIGTERM) == 0);
	cr_assert_eq(child_wait_exit(&kid, STOP_TIMEOUT_MS), 0, "%s",
		     kid.buf[1]);

	int lines = 0;
	bool saw_started = false, saw_http = false;
	char *save = NULL;
	for (char *line = strtok_r(kid.buf[1], "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_error_t je;
		json_t *o = json_loads(line, 0, &je);
		cr_assert_not_null(o, "stderr line is not JSON (%s): %s",
				   je.text, line);
		cr_assert(json_is_object(o), "%s", line);
		const char *keys[] = {"ts", "level", "component", "msg"};
		for (size_t i = 0; i < 4; i++)
			cr_assert(json_is_string(json_object_get(o, keys[i])),
				  "no string \"%s\": %s", keys[i], line);
		const char *level = str_at(o, "level");
		cr_assert(strcmp(level, "debug") == 0 ||
				  strcmp(level, "info") == 0 ||
				  strcmp(level, "warn") == 0 ||
				  strcmp(level, "error") == 0,
			  "level %s", level);
		if (strcmp(str_at(o, "component"), "server") == 0 &&
		    strncmp(str_at(o, "msg"), "started", 7) == 0)
			saw_started = true;
		if (strcmp(str_at(o, "component"), "http") == 0)
			saw_http = true;
		json_decref(o);
		lines++;
	}
	cr_assert_gt(lines, 3);
	cr_assert(saw_started, "no \"started\" line");
	cr_assert(saw_http, "no debug line from http");
}

/* ------------------------------------------------------------------ CLI */

static char out[16384];

/* Runs nodeflow with argv (NULL-terminated) against the test database. */
static int
cli(const char *const *argv)
{
	const char *full[16];
	size_t n = 0;
	for (; argv[n]; n++)
		full[n] = argv[n];
	full[n++] = "--database-url";
	full[n++] = db.url;
	full[n] = NULL;
	return th_run_nodeflow(full, NULL, CLI_TIMEOUT_MS, out, sizeof(out));
}

/* The line of out starting with prefix (static buffer), or "". */
static const char *
line_of(const char *prefix)
{
	static char line[1024];
	line[0] = '\0';
	for (const char *p = out; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (strncmp(p, prefix, strlen(prefix)) == 0) {
			snprintf(line, sizeof(line), "%.*s", (int)len, p);
			break;
		}
		p = nl ? nl + 1 : NULL;
	}
	return line;
}

Test(cli, migrate_status_on_an_empty_database)
{
	th_db_empty(&db);
	const char *status[] = {"migrate", "status", NULL};
	int rc = cli(status);
	cr_assert_eq(rc, 3, "exit %d:\n%s", rc, out);
	const char *pending = line_of("pending:");
	cr_assert(strstr(pending, "0001_partitioning"), "%s", out);
	cr_assert(strstr(pending, "0002_engine"), "%s", out);
	cr_assert_str_eq(line_of("unknown:"), "unknown: none", "%s", out);
}

Test(cli, migrate_then_status_is_up_to_date)
{
	th_db_empty(&db);
	const char *migrate[] = {"migrate", NULL};
	int rc = cli(migrate);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "applied 0001_partitioning\n"), "%s", out);
	cr_assert(strstr(out, "applied 0002_engine\n"), "%s", out);
	cr_assert(strstr(out, "database is up to date"), "%s", out);

	const char *status[] = {"migrate", "status", NULL};
	rc = cli(status);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
	cr_assert_str_eq(line_of("pending:"), "pending: none", "%s", out);
	cr_assert_str_eq(line_of("unknown:"), "unknown: none", "%s", out);

	/* Again: nothing to do, still up to date. */
	rc = cli(migrate);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
	cr_assert_null(strstr(out, "applied "), "%s", out);
	cr_assert(strstr(out, "database is up to date"), "%s", out);
}

Test(cli, database_ahead_of_the_binary)
{
	th_db_clone(&db);
	PGconn *c = th_connect(db.url);
	th_exec(c, "INSERT INTO \"SchemaMigrations\" (\"name\") VALUES "
		   "('9999_future')");
	PQfinish(c);

	const char *status[] = {"migrate", "status", NULL};
	int rc = cli(status);
	cr_assert_eq(rc, 4, "exit %d:\n%s", rc, out);
	cr_assert(strstr(line_of("unknown:"), "9999_future"), "%s", out);
	cr_assert_str_eq(line_of("pending:"), "pending: none", "%s", out);

	const char *migrate[] = {"migrate", NULL};
	rc = cli(migrate);
	cr_assert_neq(rc, 0, "migrate ran on a database ahead:\n%s", out);
	cr_assert(strstr(out, "9999_future"), "the refusal names it:\n%s", out);
	cr_assert_null(strstr(out, "up to date"), "%s", out);
	/* Nothing was touched. */
	c = th_connect(db.url);
	cr_assert_eq(
		th_int(c, "SELECT count(*) FROM \"SchemaMigrations\"", 0, NULL),
		KNOWN_MIGRATIONS + 1);
	PQfinish(c);
}

Test(cli, migrate_down_reverts_the_latest)
{
	th_db_clone(&db);
	const char *down[] = {"migrate", "down", "1", NULL};
	int rc = cli(down);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "reverted " LATEST_MIGRATION), "%s", out);
	cr_assert_null(strstr(out, "0001_partitioning"), "%s", out);

	const char *status[] = {"migrate", "status", NULL};
	rc = cli(status);
	cr_assert_eq(rc, 3, "exit %d:\n%s", rc, out);
	cr_assert_str_eq(line_of("pending:"), "pending: " LATEST_MIGRATION,
			 "%s", out);

	/* And forward again. */
	const char *migrate[] = {"migrate", NULL};
	rc = cli(migrate);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "applied " LATEST_MIGRATION), "%s", out);
	rc = cli(status);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);

	const char *bad[] = {"migrate", "down", "0", NULL};
	rc = cli(bad);
	cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
}

Test(cli, partitions_ensure_is_idempotent)
{
	th_db_clone(&db);
	/* Further ahead than the template was prepared: the first run has
	 * something to create. */
	const char *ensure[] = {"partitions",
				"ensure",
				"--executions-months-ahead",
				"8",
				"--timers-hours-ahead",
				"72",
				NULL};
	int rc = cli(ensure);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "created partition "), "%s", out);

	rc = cli(ensure);
	cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
	cr_assert_null(strstr(out, "created partition"), "second run:\n%s",
		       out);

	const char *bad[] = {"partitions", "nonsense", NULL};
	rc = cli(bad);
	cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
}

Test(cli, unreachable_database_is_a_failure)
{
	char url[256];
	snprintf(url, sizeof(url),
		 "host=127.0.0.1 port=%d dbname=nodeflow user=postgres",
		 closed_port());
	const char *const *cases[] = {
		(const char *[]){"migrate", "--database-url", url, NULL},
		(const char *[]){"migrate", "status", "--database-url", url,
				 NULL},
		(const char *[]){"partitions", "ensure", "--database-url", url,
				 NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = th_run_nodeflow(cases[i], NULL, CLI_TIMEOUT_MS, out,
					 sizeof(out));
		cr_assert_eq(rc, 1, "%s %s: exit %d:\n%s", cases[i][0],
			     cases[i][1], rc, out);
		cr_assert(strstr(out, "could not connect"), "%s", out);
	}
}

Test(cli, unknown_flag_is_a_usage_error)
{
	const char *const *cases[] = {
		(const char *[]){"serve", "--bogus-flag", "1", NULL},
		(const char *[]){"migrate", "status", "--bogus-flag=1", NULL},
		(const char *[]){"partitions", "ensure", "--bogus-flag", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = th_run_nodeflow(cases[i], NULL, CLI_TIMEOUT_MS, out,
					 sizeof(out));
		cr_assert_eq(rc, 2, "%s: exit %d:\n%s", cases[i][0], rc, out);
		cr_assert(strstr(out, "--bogus-flag"), "%s", out);
		cr_assert_null(strstr(out, "listening"), "%s", out);
	}
	const char *verb[] = {"frobnicate", NULL};
	int rc = th_run_nodeflow(verb, NULL, CLI_TIMEOUT_MS, out, sizeof(out));
	cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "frobnicate"), "%s", out);
	const char *none[] = {NULL};
	rc = th_run_nodeflow(none, NULL, CLI_TIMEOUT_MS, out, sizeof(out));
	cr_assert_eq(rc, 2, "no command: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "usage"), "%s", out);
}

Test(cli, out_of_range_value_is_a_usage_error)
{
	const char *argv[] = {"serve",          "--listen", "127.0.0.1:0",
			      "--http-threads", "0",        NULL};
	int rc = th_run_nodeflow(argv, NULL, CLI_TIMEOUT_MS, out, sizeof(out));
	cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "--http-threads"), "%s", out);
	cr_assert(strstr(out, "1 to 256"), "the range is named:\n%s", out);
	cr_assert_null(strstr(out, "listening"), "%s", out);

	/* From the environment, the variable is named. */
	const char *env[] = {"NODEFLOW_HTTP_THREADS=many", NULL};
	const char *serve[] = {"serve", NULL};
	rc = th_run_nodeflow(serve, env, CLI_TIMEOUT_MS, out, sizeof(out));
	cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "NODEFLOW_HTTP_THREADS"), "%s", out);

	const char *level[] = {"serve", "--log-level", "loud", NULL};
	rc = th_run_nodeflow(level, NULL, CLI_TIMEOUT_MS, out, sizeof(out));
	cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "loud"), "%s", out);
}

/* The NODEFLOW_* names config.c declares (read from the source when the
 * tests run from the checkout, as tests/run.sh does), else a fixed list. */
static size_t
config_variables(char names[][64], size_t max)
{
	size_t n = 0;
	FILE *f = fopen("src/runtime/config.c", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f) && n < max) {
			for (char *p = strstr(line, "\"NODEFLOW_"); p;
			     p = strstr(p + 1, "\"NODEFLOW_")) {
				char *end = strchr(p + 1, '"');
				if (end && end - p - 1 < 64 && n < max)
					snprintf(names[n++], 64, "%.*s",
						 (int)(end - p - 1), p + 1);
			}
		}
		fclose(f);
	}
	if (n)
		return n;
	const char *fixed[] = {
		"NODEFLOW_DATABASE_URL",  "NODEFLOW_LISTEN",
		"NODEFLOW_LOG_LEVEL",     "NODEFLOW_LOG_FORMAT",
		"NODEFLOW_ROLES",         "NODEFLOW_HTTP_THREADS",
		"NODEFLOW_MAX_BODY_BYTES"};
	for (; n < sizeof(fixed) / sizeof(fixed[0]); n++)
		snprintf(names[n], 64, "%s", fixed[n]);
	return n;
}

Test(cli, help_lists_every_variable)
{
	static char names[256][64];
	size_t n = config_variables(names, 256);
	cr_assert_geq(n, 3);
	cr_assert_lt(n, 256, "config.c declares more variables than are read");
	const char *const *cases[] = {
		(const char *[]){"--help", NULL},
		(const char *[]){"help", NULL},
		(const char *[]){"serve", "--help", NULL},
		(const char *[]){"migrate", "status", "--help", NULL},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int rc = th_run_nodeflow(cases[c], NULL, CLI_TIMEOUT_MS, out,
					 sizeof(out));
		cr_assert_eq(rc, 0, "%s: exit %d:\n%s", cases[c][0], rc, out);
		const char *must[] = {"NODEFLOW_DATABASE_URL",
				      "NODEFLOW_LISTEN",
				      "NODEFLOW_LOG_FORMAT",
				      "--max-body-bytes",
				      "serve",
				      "migrate status",
				      "partitions ensure"};
		for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
			cr_assert(strstr(out, must[i]), "help lacks %s:\n%s",
				  must[i], out);
		for (size_t i = 0; i < n; i++)
			cr_assert(strstr(out, names[i]), "help lacks %s:\n%s",
				  names[i], out);
		cr_assert_null(strstr(out, "listening"), "%s", out);
	}
}

/* --------------------------------------------------------- PostgreSQL 15 */

static void
assert_refused(const char *const *argv)
{
	const char *url = th_env("NODEFLOW_TEST_PG15_URL");
	const char *full[8];
	size_t n = 0;
	for (; argv[n]; n++)
		full[n] = argv[n];
	full[n++] = "--database-url";
	full[n++] = url;
	full[n] = NULL;
	int rc = th_run_nodeflow(full, NULL, CLI_TIMEOUT_MS, out, sizeof(out));
	cr_assert_eq(rc, 1, "%s: exit %d:\n%s", argv[0], rc, out);
	cr_assert(strstr(out, "PostgreSQL 15"), "%s:\n%s", argv[0], out);
	cr_assert(strstr(out, "requires PostgreSQL 18"), "%s:\n%s", argv[0],
		  out);
	cr_assert_null(strstr(out, "listening"), "%s:\n%s", argv[0], out);
}

Test(pg15, migrate_refuses)
{
	assert_refused((const char *[]){"migrate", NULL});
}

Test(pg15, migrate_status_refuses)
{
	assert_refused((const char *[]){"migrate", "status", NULL});
}

Test(pg15, serve_refuses)
{
	assert_refused(
		(const char *[]){"serve", "--listen", "127.0.0.1:0", NULL});
}

Test(pg15, partitions_ensure_refuses)
{
	assert_refused((const char *[]){"partitions", "ensure", NULL});
}
