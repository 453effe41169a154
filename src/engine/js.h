/*
 * js — JavaScript evaluation for INLINE tasks and javascript evaluators, on
 * an embedded Duktape 2.7 (ES5: no arrow functions, no let, no classes, no
 * template literals).
 *
 * A script is a program: the value of its last expression statement is the
 * result, and if that value is a function it is called with no arguments,
 * so both `$.a + 1` and `function f() { return $.a + 1 } f()` and
 * `(function () { return $.a + 1 })` work.  The global `$` is the input.
 * The result is converted to JSON as JSON.stringify would (undefined,
 * functions and a missing result become null; NaN and Infinity null).
 *
 * Sandbox: each thread has its own heap, created on first use; scripts see
 * the ECMAScript built-ins only (no `Duktape` global, no require, no I/O).
 * A script runs at most timeout_ms (then "script timed out after N ms";
 * the clock starts when the script does, after its input is decoded) and
 * a heap may hold at most js_memory_limit bytes (then "script exceeded its
 * memory limit"); after either, or after a thrown error, the next
 * evaluation works normally (a heap that ran out of memory is thrown away
 * and rebuilt).  Globals a script creates may be seen by later scripts on
 * the same thread; `$` is set afresh for each.  Compiled scripts are cached
 * per thread (at most JS_CACHE_MAX, then the cache starts over).
 *
 * Threads: any; heaps are per thread and freed when the thread exits.
 * Ownership: input is borrowed; *out carries one reference owned by the
 * caller.  Failure: false with ERR_INVALID and a message (a syntax error,
 * the thrown error as "Error: message", the timeout, the memory limit, a
 * result that is not representable as JSON).
 */
#ifndef NF_ENGINE_JS_H
#define NF_ENGINE_JS_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define JS_DEFAULT_TIMEOUT_MS   1000
#define JS_DEFAULT_MEMORY_LIMIT ((size_t)64 * 1024 * 1024)
#define JS_CACHE_MAX            256

/* Evaluates script (a JS program; the value of its last expression
 * statement is the result; if that value is a function it is called with no
 * arguments) with the global `$` bound to input (JSON; NULL is null).
 * timeout_ms <= 0 means JS_DEFAULT_TIMEOUT_MS. */
bool js_eval(const char *script, const json_t *input, int timeout_ms,
	     json_t **out, struct err *e);

/* Sets the memory limit of heaps created from now on (bytes; 0 restores the
 * default).  Any thread. */
void js_set_memory_limit(size_t bytes);

/* How many heaps this thread has created so far (for tests and metrics). */
unsigned js_heaps_created(void);

#endif
