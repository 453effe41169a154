/*
 * err — the one error type.  Fallible functions return bool (false on
 * failure) and fill a caller-provided struct err.
 *
 * Every code comes from ERR_CODES below, which also gives the code's wire
 * name (the "code" of an API error body) and its HTTP status, so the mapping
 * lives in one place.  Messages follow PostgreSQL's style: lower case, no
 * trailing period, "could not X: reason".
 *
 * Threads: any; an err is owned by its caller.  Failure: none (messages
 * longer than the buffer are truncated).
 */
#ifndef NF_UTIL_ERR_H
#define NF_UTIL_ERR_H

#include <stdbool.h>

/*  X(enum suffix, wire name, HTTP status) */
#define ERR_CODES(X)                                         \
	X(OK, "ok", 200)                                     \
	X(INVALID, "invalid_argument", 400)                  \
	X(BAD_JSON, "bad_json", 400)                         \
	X(UNAUTHENTICATED, "unauthenticated", 401)           \
	X(FORBIDDEN, "forbidden", 403)                       \
	X(NOT_FOUND, "not_found", 404)                       \
	X(METHOD, "method_not_allowed", 405)                 \
	X(CONFLICT, "conflict", 409)                         \
	X(TOO_LARGE, "payload_too_large", 413)               \
	X(URI_TOO_LONG, "uri_too_long", 414)                 \
	X(HEADERS_TOO_LARGE, "header_fields_too_large", 431) \
	X(UNSUPPORTED_MEDIA, "unsupported_media_type", 415)  \
	X(TOO_MANY, "too_many_requests", 429)                \
	X(INTERNAL, "internal", 500)                         \
	X(DB, "database_error", 500)                         \
	X(UNAVAILABLE, "unavailable", 503)                   \
	X(VERSION, "unsupported_database", 503)

#define ERR_ENUM_(name, wire, status) ERR_##name,
enum err_code { ERR_CODES(ERR_ENUM_) ERR_CODE_COUNT };
#undef ERR_ENUM_

struct err {
	enum err_code code;
	char sqlstate[6]; /* "" unless the error came from PostgreSQL */
	char msg[480];
};

#define ERR_INIT               \
	{                      \
		ERR_OK, "", "" \
	}

/* Sets code and message; an earlier message is replaced. */
void err_set(struct err *e, enum err_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefixes the current message with "context: ". */
void err_prefix(struct err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void err_clear(struct err *e);
const char *err_code_name(enum err_code code);
int err_http_status(enum err_code code);

#endif
