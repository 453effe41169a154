#include "harness.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

const char *
th_env(const char *name)
{
	const char *v = getenv(name);
	cr_assert(v && *v, "%s is not set: run the tests with `make test`",
		  name);
	return v;
}

int64_t
th_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
th_wait_until(int timeout_ms, bool (*pred)(void *), void *arg)
{
	int64_t until = th_now_ms() + timeout_ms;
	for (;;) {
		if (pred(arg))
			return true;
		if (th_now_ms() >= until)
			return false;
		struct timespec nap = {0, 5 * 1000000};
		nanosleep(&nap, NULL);
	}
}

/* ------------------------------------------------------------ databases */

void
th_url_for(const char *base_url, const char *name, char *out, size_t size)
{
	char *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(base_url, &errmsg);
	cr_assert(opts, "bad connection string %s: %s", base_url,
		  errmsg ? errmsg : "?");
	size_t used = 0;
	out[0] = '\0';
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		const char *v =
			strcmp(o->keyword, "dbname") == 0 ? name : o->val;
		if (!v || !*v)
			continue;
		used += (size_t)snprintf(out + used, size - used, "%s%s='%s'",
					 used ? " " : "", o->keyword, v);
		cr_assert(used < size, "connection string too long");
	}
	PQconninfoFree(opts);
}

PGconn *
th_connect(const char *url)
{
	PGconn *c = PQconnectdb(url);
	cr_assert(PQstatus(c) == CONNECTION_OK, "could not connect to %s: %s",
		  url, PQerrorMessage(c));
	return c;
}

void
th_exec(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK,
		  "SQL failed: %s\n%s", PQerrorMessage(c), sql);
	PQclear(r);
}

PGresult *
th_query(PGconn *c, const char *sql, int n, const char *const *params)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(r);
	cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK,
		  "SQL failed: %s\n%s", PQerrorMessage(c), sql);
	return r;
}

char *
th_value(PGconn *c, const char *sql, int n, const char *const *params)
{
	PGresult *r = th_query(c, sql, n, params);
	cr_assert(PQntuples(r) >= 1, "no row from: %s", sql);
	char *v = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

long long
th_int(PGconn *c, const char *sql, int n, const char *const *params)
{
	char *v = th_value(c, sql, n, params);
	long long x = strtoll(v, NULL, 10);
	free(v);
	return x;
}

const char *
th_sqlstate_of(PGconn *c, const char *sql, int n, const char *const *params)
{
	static char state[6];
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(r);
	cr_assert(st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK,
		  "SQL was expected to fail but succeeded: %s", sql);
	const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(state, sizeof(state), "%s", s ? s : "");
	PQclear(r);
	return state;
}

static void
create_database(struct th_db *db, const char *template)
{
	static atomic_int counter;
	const char *admin = th_env("NODEFLOW_TEST_ADMIN_URL");
	/* nf_test_<run>_…: tests/run.sh cleans up after its own run only. */
	const char *run = getenv("NODEFLOW_TEST_RUN");
	snprintf(db->name, sizeof(db->name), "nf_test_%s_%d_%d_%lld",
		 run && *run ? run : "0", (int)getpid(),
		 atomic_fetch_add(&counter, 1),
		 (long long)(th_now_ms() % 100000));
	th_url_for(admin, db->name, db->url, sizeof(db->url));
	PGconn *c = th_connect(admin);
	char sql[256];
	snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\" TEMPLATE \"%s\"",
		 db->name, template);
	th_exec(c, sql);
	PQfinish(c);
}

void
th_db_clone(struct th_db *db)
{
	const char *t = getenv("NODEFLOW_TEST_TEMPLATE");
	create_database(db, t && *t ? t : "nf_test_template");
}

void
th_db_empty(struct th_db *db)
{
	create_database(db, "template0");
}

void
th_db_drop(struct th_db *db)
{
	if (!db->name[0])
		return;
	PGconn *c = th_connect(th_env("NODEFLOW_TEST_ADMIN_URL"));
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", db->name);
	th_exec(c, sql);
	PQfinish(c);
	db->name[0] = '\0';
}

/* ------------------------------------------------------------- processes */

static char **
merged_env(const char *const *extra)
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	while (extra && extra[k])
		k++;
	char **env = calloc(n + k + 1, sizeof(*env));
	size_t j = 0;
	for (size_t i = 0; i < k; i++)
		env[j++] = (char *)extra[i];
	for (size_t i = 0; i < n; i++) {
		/* An extra entry overrides the inherited one of the same name.
		 */
		const char *eq = strchr(environ[i], '=');
		size_t len =
			eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool overridden = false;
		for (size_t x = 0; x < k; x++)
			if (strncmp(extra[x], environ[i], len) == 0 &&
			    extra[x][len] == '=')
				overridden = true;
		if (!overridden)
			env[j++] = environ[i];
	}
	env[j] = NULL;
	return env;
}

static void
spawn(struct th_proc *p, const char *const *argv, const char *const *extra_env)
{
	int fds[2];
	cr_assert(pipe2(fds, O_CLOEXEC) == 0);
	const char *bin = th_env("NODEFLOW_BIN");
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char **full = calloc(argc + 2, sizeof(*full));
	full[0] = (char *)bin;
	for (size_t i = 0; i < argc; i++)
		full[i + 1] = (char *)argv[i];
	char **env = merged_env(extra_env);
	memset(p, 0, sizeof(*p));
	p->pid = fork();
	cr_assert(p->pid >= 0);
	if (p->pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		execve(bin, full, env);
		_exit(127);
	}
	close(fds[1]);
	p->out_fd = fds[0];
	free(full);
	free(env);
}

/* Reads what the child wrote, waiting up to timeout_ms; false at EOF. */
static bool
read_some(struct th_proc *p, int timeout_ms)
{
	struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return true;
	size_t room = sizeof(p->output) - 1 - p->output_len;
	if (room == 0) { /* keep the tail */
		memmove(p->output, p->output + sizeof(p->output) / 2,
			sizeof(p->output) / 2);
		p->output_len = sizeof(p->output) / 2 - 1;
		room = sizeof(p->output) - 1 - p->output_len;
	}
	ssize_t n = read(p->out_fd, p->output + p->output_len, room);
	if (n <= 0)
		return false;
	p->output_len += (size_t)n;
	p->output[p->output_len] = '\0';
	return true;
}

static int
wait_exit(struct th_proc *p, int timeout_ms)
{
	int64_t until = th_now_ms() + timeout_ms;
	int status;
	for (;;) {
		pid_t r = waitpid(p->pid, &status, WNOHANG);
		if (r == p->pid)
			break;
		if (th_now_ms() >= until) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			close(p->out_fd);
			return -1;
		}
		if (!read_some(p, 10)) {
			/* EOF: the child is exiting; reap it. */
			struct timespec nap = {0, 2 * 1000000};
			nanosleep(&nap, NULL);
		}
	}
	while (read_some(p, 0) && p->output_len < sizeof(p->output) - 1) {
		struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
		if (poll(&pfd, 1, 0) <= 0)
			break;
	}
	close(p->out_fd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int
th_run_nodeflow(const char *const *argv, const char *const *env, int timeout_ms,
		char *output, size_t size)
{
	struct th_proc *p = calloc(1, sizeof(*p));
	spawn(p, argv, env);
	int rc = wait_exit(p, timeout_ms);
	if (output)
		snprintf(output, size, "%s", p->output);
	free(p);
	return rc;
}

void
th_server_start(struct th_server *s, const char *db_url,
		const char *const *flags)
{
	const char *argv[32] = {"serve", "--listen", "127.0.0.1:0",
				"--database-url", db_url};
	size_t n = 5;
	for (size_t i = 0; flags && flags[i]; i++) {
		cr_assert(n < 31, "too many flags");
		argv[n++] = flags[i];
	}
	argv[n] = NULL;
	memset(s, 0, sizeof(*s));
	spawn(&s->proc, argv, NULL);
	int64_t until = th_now_ms() + 15000;
	const char *marker = "listening on http://127.0.0.1:";
	while (th_now_ms() < until) {
		char *at = strstr(s->proc.output, marker);
		if (at && strchr(at, '\n')) {
			s->port = atoi(at + strlen(marker));
			snprintf(s->base, sizeof(s->base),
				 "http://127.0.0.1:%d", s->port);
			return;
		}
		if (!read_some(&s->proc, 50)) {
			int status;
			waitpid(s->proc.pid, &status, 0);
			cr_assert_fail("server exited before listening:\n%s",
				       s->proc.output);
		}
	}
	kill(s->proc.pid, SIGKILL);
	cr_assert_fail("server did not start within 15 s:\n%s", s->proc.output);
}

int
th_server_stop(struct th_server *s)
{
	if (s->proc.pid <= 0)
		return -1;
	kill(s->proc.pid, SIGTERM);
	int rc = wait_exit(&s->proc, 15000);
	s->proc.pid = 0;
	return rc;
}

/* ------------------------------------------------------------------ HTTP */

struct buf {
	char *ptr;
	size_t len;
	size_t cap;
};

/* Grows geometrically: a body of megabytes comes in many small pieces. */
static size_t
collect(char *data, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t n = size * nmemb;
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->ptr = realloc(b->ptr, b->cap);
	}
	memcpy(b->ptr + b->len, data, n);
	b->len += n;
	b->ptr[b->len] = '\0';
	return n;
}

void
th_http(const struct th_server *s, const char *method, const char *path,
	const char *body, size_t body_len, struct th_response *r)
{
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", s->base, path);
	struct buf out = {calloc(1, 1), 0, 1}, hdr = {calloc(1, 1), 0, 1};
	CURL *h = curl_easy_init();
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &hdr);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	struct curl_slist *headers = NULL;
	if (body) {
		headers = curl_slist_append(headers,
					    "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)body_len);
	}
	CURLcode rc = curl_easy_perform(h);
	cr_assert(rc == CURLE_OK, "%s %s: %s", method, url,
		  curl_easy_strerror(rc));
	memset(r, 0, sizeof(*r));
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	char *ct = NULL;
	curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
	r->content_type = strdup(ct ? ct : "");
	r->body = out.ptr;
	r->body_len = out.len;
	r->headers = hdr.ptr;
	curl_slist_free_all(headers);
	curl_easy_cleanup(h);
}

void
th_response_free(struct th_response *r)
{
	free(r->body);
	free(r->content_type);
	free(r->headers);
	memset(r, 0, sizeof(*r));
}
