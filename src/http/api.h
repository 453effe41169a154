/*
 * api — what every native API handler does first: take a database
 * connection, resolve the namespace, parse the JSON body; and how it
 * answers a validation failure.
 *
 * Each helper answers the request itself when it fails (503 without a
 * connection, 404 for an unknown namespace, 400/415 for a bad body), so a
 * handler reads:
 *
 *     char ns[37];
 *     struct db *db = api_db_ns(req, res, ns);
 *     if (!db) return;
 *     ... call the store; api_reply(…) or http_error(res, &e) ...
 *     api_db_release(req, db);
 *
 * Threads: MHD's.  Ownership: the connection goes back with
 * api_db_release; a parsed body is owned by the caller (json_decref).
 */
#ifndef NF_HTTP_API_H
#define NF_HTTP_API_H

#include "http/http.h"

#include <jansson.h>
#include <stdbool.h>

struct db;
struct dsl_errors;

struct db *api_db(struct http_request *req, struct http_response *res);
void api_db_release(struct http_request *req, struct db *db);

/* The {ns} path parameter's id; answers 404 when unknown. */
bool api_namespace(struct http_request *req, struct http_response *res,
		   struct db *db, char id_out[37]);

/* api_db, then api_namespace into ns_out: the connection, or NULL once
 * either has answered (the connection given back). */
struct db *api_db_ns(struct http_request *req, struct http_response *res,
		     char ns_out[37]);

/* Answers v (taken) as JSON with status. */
void api_reply(struct http_response *res, int status, json_t *v);
/* Answers the JSON text json with status. */
void api_reply_text(struct http_response *res, int status, const char *json);
/* 204 with no body. */
void api_no_content(struct http_response *res);

/* The body as a JSON object (an empty body is an error unless
 * empty_ok, which yields {}); answers 400 with line and column otherwise. */
json_t *api_body_object(struct http_request *req, struct http_response *res,
			bool empty_ok);

/* 400 {"error":{"code":"invalid_argument","message":…,"details":[{path,
 * message}…]}} */
void api_fail_validation(struct http_response *res, const char *message,
			 const struct dsl_errors *errs);

/* A query argument as a whole number in [min, max], or def when absent;
 * answers 400 naming the argument when it is not. */
bool api_query_int(struct http_request *req, struct http_response *res,
		   const char *name, long def, long min, long max, long *out);

#endif
