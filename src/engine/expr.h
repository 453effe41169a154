/*
 * expr — parameter expressions: `${workflow.input.x}`, `${ref.output.y[0]}`
 * inside any JSON value, resolved against a context document.
 *
 * The context is {"workflow": {...}, "<taskRef>": {...}, ...}: the first
 * path segment picks the source (`workflow` or a task reference name), the
 * rest is a JSONPath evaluated inside it (dot and bracket member access,
 * array indexes including negative ones, and the `*` wildcard, which turns
 * the result into an array of all matches).  A path that matches nothing is
 * null (a wildcard path that matches nothing is []), never an error; so is
 * a source missing from the context.
 *
 * Path syntax: an optional `$` root; `.name` (a name in dot form is any run
 * of characters but `.` and `[`, spaces included; `.*` is the wildcard);
 * `['name']` and `["name"]` (a backslash takes the next character
 * literally); `[n]`, `[-n]` (from the end) and `[*]`.  Blanks around the
 * whole path and inside brackets are ignored.  In an expression the first
 * segment must be a name (`${['my task'].output}` and `${$.workflow}` are
 * fine, `${[0]}` and `${*.x}` are errors).
 *
 * Resolution (as Conductor does it):
 *   - a string that is exactly one `${...}` is replaced by the value found,
 *     keeping its JSON type (a number stays a number, an object an object);
 *   - a string with expressions among other text is interpolated: a string
 *     value is inserted as it is, null (or a missing path) as nothing, a
 *     real as its shortest exact text (19.99, 100.0), and any other value
 *     as its compact JSON text;
 *   - `${}` (nothing but blanks inside) is the empty string;
 *   - `${a.${b}}` resolves the inner expression first and splices its text
 *     into the path; inside a quoted bracket name (`${a['${b}']}`) the text
 *     is escaped, so it is taken as one name whatever it holds;
 *   - `$${` is an escape for a literal `${`;
 *   - objects and arrays are resolved member by member (keys are not);
 *     values found are never resolved again.
 *
 * Errors depend on the template alone: a path spliced from inner values
 * that does not parse resolves to null, like a path that matches nothing.
 * So expr_resolve fails exactly when expr_check does, except for the one
 * data limit: a wildcard path selecting more than 4194304 values.  Limits:
 * `${` nested 64 deep, objects and arrays nested 64 deep in the template.
 *
 * Threads: any; nothing is shared.  Ownership: results carry one reference
 * owned by the caller and share nothing with ctx (values are copied);
 * inputs are borrowed.  Failure: a malformed expression (an unterminated
 * `${`, a bad path) fails with ERR_INVALID and a message starting with the
 * JSON path of the string inside the template, e.g.
 * `$.inputParameters.url: unterminated "${" in "${workflow.input.x"`.
 */
#ifndef NF_ENGINE_EXPR_H
#define NF_ENGINE_EXPR_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Resolves every expression in tmpl against ctx.  `where` is the JSON path
 * of tmpl itself, used in error messages ("$.tasks[0].inputParameters";
 * NULL means "$").  NULL on failure; a NULL ctx holds no source. */
json_t *expr_resolve(const json_t *tmpl, const json_t *ctx, const char *where,
		     struct err *e);

/* Evaluates one JSONPath ("$.a.b", "a.b", "a['b'][0]", "a[*].c") inside doc.
 * Missing paths give json_null(), wildcard paths an array; NULL (and e) only
 * when the path does not parse. */
json_t *expr_path(const json_t *doc, const char *path, struct err *e);

/* Checks the syntax of every expression in tmpl without a context. */
bool expr_check(const json_t *tmpl, const char *where, struct err *e);

/* Calls fn once for each distinct source named by tmpl's expressions (the
 * first path segment: "workflow" or a task reference name), in order of
 * appearance, an inner expression before the one around it; source[len]
 * is '\0'.  A source computed by an inner expression (`${${x}.output}`)
 * cannot be known and is skipped, as are escaped `$${` and malformed
 * strings. */
typedef void expr_source_fn(const char *source, size_t len, void *arg);
void expr_sources(const json_t *tmpl, expr_source_fn *fn, void *arg);

#endif
