/*
 * e2e — see e2e.h.
 */
#include "e2e.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { LOG_SIZE = 32768, MAX_SERVERS = 4 };

static struct th_db db;
static struct th_server servers[MAX_SERVERS];
static pthread_t drains[MAX_SERVERS];
static bool draining[MAX_SERVERS];
static int n_servers;
static int current; /* the server calls go to */
static PGconn *sql;
static bool opened;
static char server_log[LOG_SIZE];
static size_t log_len;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

char e2e_last_body[16384];

/* Keeps the latest output: when the buffer is full, its second half. */
static void *
drain_main(void *arg)
{
	struct th_server *s = arg;
	char buf[4096];
	for (;;) {
		ssize_t n = read(s->proc.out_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		pthread_mutex_lock(&log_mu);
		if (log_len + (size_t)n >= LOG_SIZE) { /* keep the tail */
			size_t keep = LOG_SIZE / 2;
			memmove(server_log, server_log + log_len - keep, keep);
			log_len = keep;
		}
		if ((size_t)n < LOG_SIZE - 1 - log_len) {
			memcpy(server_log + log_len, buf, (size_t)n);
			log_len += (size_t)n;
		}
		server_log[log_len] = '\0';
		pthread_mutex_unlock(&log_mu);
	}
	return NULL;
}

void
e2e_open(void)
{
	th_db_clone(&db);
	opened = true;
	sql = th_connect(db.url);
}

int
e2e_serve(const char *const *flags)
{
	cr_assert(n_servers < MAX_SERVERS, "too many servers");
	if (!opened)
		e2e_open();
	struct th_server *s = &servers[n_servers];
	th_server_start(s, db.url, flags);
	if (n_servers == 0) {
		pthread_mutex_lock(&log_mu);
		log_len = 0;
		server_log[0] = '\0';
		pthread_mutex_unlock(&log_mu);
	}
	cr_assert(pthread_create(&drains[n_servers], NULL, drain_main, s) == 0);
	draining[n_servers] = true;
	return n_servers++;
}

void
e2e_start(const char *const *flags)
{
	e2e_serve(flags);
}

void
e2e_setup(void)
{
	e2e_start(NULL);
}

void
e2e_stop(void)
{
	if (sql) {
		PQfinish(sql);
		sql = NULL;
	}
	for (int i = 0; i < n_servers; i++)
		e2e_kill(i);
	n_servers = 0;
	current = 0;
	if (opened)
		th_db_drop(&db);
	opened = false;
}

struct th_server *
e2e_server(void)
{
	return e2e_server_at(current);
}

void
e2e_use(int i)
{
	e2e_server_at(i);
	current = i;
}

struct th_server *
e2e_server_at(int i)
{
	cr_assert(i >= 0 && i < n_servers, "no server %d", i);
	return &servers[i];
}

PGconn *
e2e_sql(void)
{
	return sql;
}

const struct th_db *
e2e_db(void)
{
	return &db;
}

/* Reaps server i (already signalled) and joins its drain thread. */
static int
reap(int i)
{
	struct th_server *s = &servers[i];
	int status = 0;
	if (s->proc.pid > 0) {
		waitpid(s->proc.pid, &status, 0);
		s->proc.pid = 0;
	}
	if (draining[i]) {
		pthread_join(drains[i], NULL);
		draining[i] = false;
		close(s->proc.out_fd);
	}
	return status;
}

int
e2e_kill(int i)
{
	struct th_server *s = e2e_server_at(i);
	if (s->proc.pid > 0)
		kill(s->proc.pid, SIGKILL);
	return reap(i);
}

int
e2e_server_stop(int i)
{
	return th_server_stop(e2e_server_at(i));
}

void
e2e_restart(int i, const char *const *flags)
{
	struct th_server *s = e2e_server_at(i);
	th_server_stop(s);
	reap(i);
	th_server_start(s, db.url, flags);
	cr_assert(pthread_create(&drains[i], NULL, drain_main, s) == 0);
	draining[i] = true;
}

const char *
e2e_log(void)
{
	static char copy[LOG_SIZE];
	pthread_mutex_lock(&log_mu);
	memcpy(copy, server_log, log_len + 1);
	pthread_mutex_unlock(&log_mu);
	return copy;
}

json_t *
e2e_call_on(const struct th_server *s, const char *method, const char *path,
	    const char *body, long status)
{
	struct th_response r;
	th_http(s, method, path, body, body ? strlen(body) : 0, &r);
	snprintf(e2e_last_body, sizeof(e2e_last_body), "%s", r.body);
	cr_assert_eq(r.status, status, "%s %s: %ld, wanted %ld: %s", method,
		     path, r.status, status, e2e_last_body);
	json_t *v = NULL;
	if (r.body_len) {
		cr_assert(strncmp(r.content_type, "application/json", 16) == 0,
			  "%s %s: Content-Type %s", method, path,
			  r.content_type);
		v = json_loadb(r.body, r.body_len, 0, NULL);
		cr_assert_not_null(v, "%s %s: body is not JSON: %s", method,
				   path, e2e_last_body);
	}
	th_response_free(&r);
	return v;
}

json_t *
e2e_call(const char *method, const char *path, const char *body, long status)
{
	return e2e_call_on(e2e_server(), method, path, body, status);
}

json_t *
e2e_callj_on(const struct th_server *s, const char *method, const char *path,
	     long status, json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	json_t *v = e2e_call_on(s, method, path, text, status);
	free(text);
	return v;
}

json_t *
e2e_callj(const char *method, const char *path, long status, json_t *body)
{
	return e2e_callj_on(e2e_server(), method, path, status, body);
}

void
e2e_call_ok(const char *method, const char *path, const char *body, long status)
{
	json_decref(e2e_call(method, path, body, status));
}

long
e2e_send(const char *method, const char *path, const char *body)
{
	struct th_response r;
	th_http(e2e_server(), method, path, body, body ? strlen(body) : 0, &r);
	snprintf(e2e_last_body, sizeof(e2e_last_body), "%s", r.body);
	long status = r.status;
	th_response_free(&r);
	return status;
}

long long
e2e_metric_in(const char *text, const char *name)
{
	size_t len = strlen(name);
	for (const char *line = text; line && *line;) {
		if (strncmp(line, name, len) == 0 && line[len] == ' ')
			return atoll(line + len + 1);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}

long long
e2e_metric(const char *name)
{
	struct th_response r;
	th_http(e2e_server(), "GET", "/metrics", NULL, 0, &r);
	cr_assert_eq(r.status, 200, "GET /metrics: %ld", r.status);
	long long v = e2e_metric_in(r.body, name);
	th_response_free(&r);
	return v;
}

const char *
e2e_str_at(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	cr_assert(json_is_string(v), "\"%s\" is not a string: %s", key,
		  e2e_last_body);
	return json_string_value(v);
}

bool
e2e_has_detail(const json_t *err, const char *path)
{
	size_t i;
	const json_t *d;
	json_array_foreach (json_object_get(err, "details"), i, d) {
		const char *p = json_string_value(json_object_get(d, "path"));
		if (p && strcmp(p, path) == 0)
			return true;
	}
	return false;
}

void
e2e_start_workflow(const char *name, json_t *input, char id[37])
{
	json_t *v =
		e2e_callj("POST", E2E_NS "/workflows", 201,
			  json_pack("{s:s,s:o}", "name", name, "input", input));
	snprintf(id, 37, "%s", e2e_str_at(v, "id"));
	json_decref(v);
}

json_t *
e2e_get_workflow(const char *id)
{
	char path[256];
	snprintf(path, sizeof(path), E2E_NS "/workflows/%s", id);
	return e2e_call("GET", path, NULL, 200);
}

struct status_probe {
	const char *id;
	const char *want;
	char seen[32];
};

static bool
reached_status(void *arg)
{
	struct status_probe *p = arg;
	json_t *v = e2e_get_workflow(p->id);
	snprintf(p->seen, sizeof(p->seen), "%s", e2e_str_at(v, "status"));
	json_decref(v);
	return strcmp(p->seen, p->want) == 0;
}

json_t *
e2e_wait_status(const char *id, const char *status, int timeout_ms)
{
	struct status_probe p = {id, status, ""};
	cr_assert(th_wait_until(timeout_ms, reached_status, &p),
		  "workflow %s stayed %s, wanted %s; server:\n%s", id, p.seen,
		  status, e2e_log());
	return e2e_get_workflow(id);
}

const json_t *
e2e_task_of(const json_t *wf, const char *ref)
{
	size_t i;
	const json_t *t;
	json_array_foreach (json_object_get(wf, "tasks"), i, t) {
		const char *r =
			json_string_value(json_object_get(t, "refName"));
		if (r && strcmp(r, ref) == 0)
			return t;
	}
	cr_assert_fail("no task %s", ref);
	return NULL;
}

long long
e2e_sql_int(const char *q, const char *param)
{
	const char *params[] = {param};
	return th_int(sql, q, param ? 1 : 0, param ? params : NULL);
}
