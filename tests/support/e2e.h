/*
 * e2e — what the end-to-end tests share on top of the harness: the test's
 * own database, nodeflow servers on it whose output threads drain (a full
 * pipe would stall a server) and keep for failure messages, a SQL
 * connection for assertions, and the native API's everyday calls.
 *
 * Threads: the test's thread (a helper thread of a test uses th_http).
 * Ownership: JSON returned
 * is the caller's (json_decref) unless said borrowed.  Failure: every
 * helper fails the current test (cr_assert) on an unexpected answer.
 */
#ifndef NF_TESTS_E2E_H
#define NF_TESTS_E2E_H

#include "harness.h"

#include <jansson.h>
#include <libpq-fe.h>

/* The default namespace's API root. */
#define E2E_NS "/v1/ns/default"

/* Clones a database and connects to it. */
void e2e_open(void);
/* Starts a server (one of up to four replicas) on that database (opened
 * first when it is not yet) with flags (NULL-terminated, may be NULL) and
 * drains its output; returns its index (the first is 0). */
int e2e_serve(const char *const *flags);
/* The first server: e2e_serve. */
void e2e_start(const char *const *flags);
/* e2e_start(NULL): a suite's .init. */
void e2e_setup(void);
/* Kills the servers, closes the connection, drops the database: the
 * suites' .fini. */
void e2e_stop(void);

/* The server the calls below go to: the first, unless e2e_use said
 * otherwise. */
struct th_server *e2e_server(void);
struct th_server *e2e_server_at(int i);
void e2e_use(int i);
/* SIGTERM to server i, then its exit status (th_server_stop): under the
 * sanitizers 0 also means no leak. */
int e2e_server_stop(int i);
/* SIGKILL to server i; its wait status once reaped. */
int e2e_kill(int i);
/* Stops server i (SIGTERM) and starts it again with flags. */
void e2e_restart(int i, const char *const *flags);
PGconn *e2e_sql(void);
const struct th_db *e2e_db(void);
/* The server's latest output (up to 32 KiB): a copy, valid until the next
 * call. */
const char *e2e_log(void);

/* The body of the latest answer (cut at 16 KiB), for failure messages. */
extern char e2e_last_body[16384];

/* Sends a request (body may be NULL) and asserts its status; a non-empty
 * answer must be JSON (Content-Type and body) and is returned, else NULL. */
json_t *e2e_call(const char *method, const char *path, const char *body,
		 long status);
/* e2e_call with a JSON body (taken). */
json_t *e2e_callj(const char *method, const char *path, long status,
		  json_t *body);
/* e2e_call and e2e_callj to server s. */
json_t *e2e_call_on(const struct th_server *s, const char *method,
		    const char *path, const char *body, long status);
json_t *e2e_callj_on(const struct th_server *s, const char *method,
		     const char *path, long status, json_t *body);
/* e2e_call, the answer dropped. */
void e2e_call_ok(const char *method, const char *path, const char *body,
		 long status);
/* Sends a request and returns its status, asserting nothing else. */
long e2e_send(const char *method, const char *path, const char *body);

/* The value of the unlabelled metric name in GET /metrics, or -1 when
 * the server shows none. */
long long e2e_metric(const char *name);
/* The same, read from text (a /metrics answer fetched otherwise). */
long long e2e_metric_in(const char *text, const char *name);

/* obj's string member key (borrowed); fails the test when it is not one. */
const char *e2e_str_at(const json_t *obj, const char *key);
/* Whether err (an "error" object) has a detail at path. */
bool e2e_has_detail(const json_t *err, const char *path);

/* Starts workflow name with input (taken); its id into id. */
void e2e_start_workflow(const char *name, json_t *input, char id[37]);
json_t *e2e_get_workflow(const char *id);
/* Waits up to timeout_ms for workflow id to reach status (failing with the
 * server's output when it does not); then returns the workflow. */
json_t *e2e_wait_status(const char *id, const char *status, int timeout_ms);
/* The first task of wf with refName ref (borrowed); fails without one. */
const json_t *e2e_task_of(const json_t *wf, const char *ref);

/* The integer answer of q with one text parameter (or none when NULL). */
long long e2e_sql_int(const char *q, const char *param);

#endif
