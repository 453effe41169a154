/*
 * conductor — what the handlers of the Conductor-compatible API (/api/...)
 * share: a database connection and the namespace the API is mapped onto
 * (--conductor-namespace, created on first use), Conductor's error body,
 * plain-text and bare-204 answers, and query arguments.
 *
 * The API is an adapter: its handlers (conductor_tasks.c,
 * conductor_workflows.c, conductor_metadata.c) translate Conductor's
 * requests and answers and call the same engine and store functions as the
 * native /v1 API.  docs/conductor.md lists what is covered.
 *
 * Error body, as Conductor's ErrorResponse, which the SDKs read "message"
 * from: {"status":404,"code":"not_found","message":"…","retryable":false,
 * "validationErrors":[{"path":"$.x","message":"…"}]} (validationErrors only
 * for a request that did not validate).
 *
 * Threads: MHD's.  Ownership: a cond_call's connection goes back with
 * cond_end; a parsed body is the caller's (json_decref).
 */
#ifndef NF_HTTP_CONDUCTOR_H
#define NF_HTTP_CONDUCTOR_H

#include "http/http.h"

#include <jansson.h>
#include <stdbool.h>

struct db;
struct dsl_errors;

struct cond_call {
	struct db *db;
	char ns_id[37];
	const char *ns_name;
};

/* Takes a connection and resolves the namespace; answers 503 (or 500)
 * itself when it cannot.  cond_end is safe either way. */
bool cond_begin(struct http_request *req, struct http_response *res,
		struct cond_call *c);
/* Gives the connection back (the call may then park). */
void cond_end(struct http_request *req, struct cond_call *c);

void cond_error(struct http_response *res, const struct err *e);
void cond_fail(struct http_response *res, enum err_code code, const char *fmt,
	       ...) __attribute__((format(printf, 3, 4)));
void cond_fail_validation(struct http_response *res, const char *message,
			  const struct dsl_errors *errs);

/* 200 text/plain (a workflow or task id). */
void cond_text(struct http_response *res, const char *text);
/* 204 with no body and no Content-Type (the SDK reads a 204 carrying
 * application/json as an empty object). */
void cond_no_content(struct http_response *res);
/* 200 with no body (Conductor's void answers). */
void cond_ok_empty(struct http_response *res);
/* 200 application/json with JSON text (taken, freed). */
void cond_json_text(struct http_response *res, char *text);
void cond_json(struct http_response *res, int status, json_t *v /* taken */);

/* The body as JSON of any type; an empty body is NULL with *empty set (not
 * an error); answers 400 when it does not parse. */
json_t *cond_body(struct http_request *req, struct http_response *res,
		  bool *empty);

/* Removes the members of obj whose value is null (Conductor's clients send
 * unset fields as null; they mean "absent"). */
void cond_drop_nulls(json_t *obj);

/* Query arguments; answer 400 naming the argument when malformed. */
bool cond_query_long(struct http_request *req, struct http_response *res,
		     const char *name, long def, long min, long max, long *out);
bool cond_query_bool(struct http_request *req, struct http_response *res,
		     const char *name, bool def, bool *out);

/* The {name} path parameter as a UUID; answers 404 when it is not one. */
const char *cond_path_uuid(struct http_request *req, struct http_response *res,
			   const char *name, const char *what);

#endif
