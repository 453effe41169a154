/*
 * json — jansson helpers, and the funnel every jsonb write passes through.
 *
 * PostgreSQL's jsonb cannot store U+0000 inside a string: an insert of
 * "a\u0000b" fails with "unsupported Unicode escape sequence".  A task whose
 * HTTP call returned such a body would then never record its result and its
 * workflow would wait forever.  So every value bound to a jsonb parameter is
 * serialised by json_db_text() (or cleaned by json_db_clean() when it is
 * already text), which drops the escape: a NUL inside text is a truncation
 * marker or a fuzzer's leftover, never content, and losing it is far better
 * than losing the result.
 *
 * Threads: any (jansson is used with the C locale only).  Ownership: strings
 * returned are the caller's to free(); a json_t returned has one reference
 * owned by the caller.  Failure: json_parse() returns NULL and fills err with
 * the line, column and reason.
 */
#ifndef NF_UTIL_JSON_H
#define NF_UTIL_JSON_H

#include "util/err.h"
#include "util/strbuf.h"

#include <jansson.h>
#include <stddef.h>

/* Compact JSON text of v for a jsonb parameter, "\u0000" escapes removed. */
char *json_db_text(const json_t *v);

/* Appends the JSON text `text` to out with every "\u0000" escape removed.
 * Escaped backslashes are honoured: "\\u0000" (a backslash followed by the
 * letters u0000) is content and is kept. */
void json_db_clean(struct strbuf *out, const char *text, size_t len);

/* Parses a JSON document of any type; NUL escapes are accepted (they are
 * dropped when stored).  Rejects documents nested deeper than max_depth
 * (0 = jansson's own limit). */
json_t *json_parse(const char *buf, size_t len, size_t max_depth,
		   struct err *e);

#endif
