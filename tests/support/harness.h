/*
 * harness — what the integration and end-to-end tests share: a database of
 * their own, raw libpq access for assertions, the real server as a child
 * process, an HTTP client, and deadline polling instead of sleeps.
 *
 * Environment (set by tests/run.sh):
 *   NODEFLOW_TEST_ADMIN_URL  a superuser connection to the PostgreSQL 18
 *                            server the tests may create databases on
 *   NODEFLOW_TEST_TEMPLATE   a migrated database to clone (default
 *                            "nf_test_template")
 *   NODEFLOW_TEST_PG15_URL   a PostgreSQL 15 server, for the refusal tests
 *   NODEFLOW_BIN             the nodeflow binary under test
 *   NODEFLOW_TEST_RUN        an id of this run, part of every database name
 *
 * Every helper fails the current Criterion test (cr_assert) on error, so
 * tests read as straight-line code.
 */
#ifndef NF_TESTS_HARNESS_H
#define NF_TESTS_HARNESS_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------ databases */

struct th_db {
	char name[64];
	char url[512]; /* key=value conninfo */
};

/* A fresh database cloned from the migrated template. */
void th_db_clone(struct th_db *db);
/* A fresh, empty database (no migrations). */
void th_db_empty(struct th_db *db);
void th_db_drop(struct th_db *db);
/* The conninfo of database `name` on the server of `base_url`. */
void th_url_for(const char *base_url, const char *name, char *out, size_t size);
const char *th_env(const char *name); /* fails the test when unset */

PGconn *th_connect(const char *url);
/* Runs SQL (no parameters), asserting success. */
void th_exec(PGconn *c, const char *sql);
/* Runs SQL with text parameters, asserting success; the result is the
 * caller's (PQclear). */
PGresult *th_query(PGconn *c, const char *sql, int n,
		   const char *const *params);
/* The first column of the first row as a malloc'd string ("" for NULL);
 * asserts there is a row. */
char *th_value(PGconn *c, const char *sql, int n, const char *const *params);
/* th_value read as an integer. */
long long th_int(PGconn *c, const char *sql, int n, const char *const *params);
/* Runs SQL expecting it to fail; returns the SQLSTATE (static buffer). */
const char *th_sqlstate_of(PGconn *c, const char *sql, int n,
			   const char *const *params);

/* ------------------------------------------------------------- processes */

struct th_proc {
	pid_t pid;
	int out_fd; /* the child's stdout and stderr, merged */
	char output[16384];
	size_t output_len;
};

/* Runs NODEFLOW_BIN with argv (NULL-terminated) and extra environment
 * entries ("K=V", NULL-terminated, may be NULL); waits up to timeout_ms;
 * returns the exit code (-1 on timeout, the process killed) and fills
 * output. */
int th_run_nodeflow(const char *const *argv, const char *const *env,
		    int timeout_ms, char *output, size_t size);

struct th_server {
	struct th_proc proc;
	int port;
	char base[64]; /* "http://127.0.0.1:PORT" */
};

/* Starts `nodeflow serve --listen 127.0.0.1:0` against db_url with extra
 * flags (NULL-terminated, may be NULL) and waits for its listening line. */
void th_server_start(struct th_server *s, const char *db_url,
		     const char *const *flags);
/* SIGTERM, then waits for a clean exit; returns the exit status. */
int th_server_stop(struct th_server *s);

/* ------------------------------------------------------------------ HTTP */

struct th_response {
	long status;
	char *body; /* NUL-terminated, malloc'd */
	size_t body_len;
	char *content_type; /* malloc'd; "" when absent */
	char *headers;      /* raw header block, malloc'd */
};

/* Sends a request; body may be NULL.  Asserts the transport worked. */
void th_http(const struct th_server *s, const char *method, const char *path,
	     const char *body, size_t body_len, struct th_response *r);
void th_response_free(struct th_response *r);

/* ------------------------------------------------------------- deadlines */

int64_t th_now_ms(void);
/* Calls pred until it returns true or timeout_ms passes; returns whether it
 * did.  Polls every few milliseconds; never a bare sleep in a test. */
bool th_wait_until(int timeout_ms, bool (*pred)(void *), void *arg);

#endif
