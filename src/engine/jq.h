/*
 * jq — jq programs for JSON_JQ_TRANSFORM tasks, on libjq 1.6.
 *
 * libjq 1.6 is not thread-safe across states, and a state holds one
 * compiled program; so each thread keeps its own small cache of compiled
 * programs (at most JQ_CACHE_MAX states, least recently used replaced),
 * never shared.  Programs see no environment: `env` and `$ENV` are empty
 * objects and modules cannot be imported; `input`/`inputs` find no input;
 * `debug` and `stderr` print nothing.  A program runs at most timeout_ms:
 * past it a watchdog thread halts it (jq 1.6 checks for a halt before each
 * instruction) and it fails with "jq program timed out after N ms".  There
 * is no memory limit beyond what the time limit bounds.
 *
 * Threads: any; states are per thread and freed when the thread exits.
 * Ownership: inputs are borrowed; results carry one reference owned by the
 * caller.  Failure: false with ERR_INVALID and jq's own message (a program
 * that does not compile, or an error raised while it runs).
 */
#ifndef NF_ENGINE_JQ_H
#define NF_ENGINE_JQ_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>

#define JQ_CACHE_MAX          32
#define JQ_MAX_RESULTS        100000
#define JQ_DEFAULT_TIMEOUT_MS 1000

/* Runs program over input; *results is an array of every value it
 * emitted.  timeout_ms <= 0 means JQ_DEFAULT_TIMEOUT_MS. */
bool jq_eval(const char *program, const json_t *input, int timeout_ms,
	     json_t **results, struct err *e);

/* A JSON_JQ_TRANSFORM task: params are its inputParameters; the program is
 * `queryExpression`, the input is every other parameter.  *out is the
 * task output as Conductor shapes it: {result, resultList} (result is the
 * first value, null when there is none), or {error} on failure, when false
 * is returned and e holds the reason. */
bool jq_transform(const json_t *params, int timeout_ms, json_t **out,
		  struct err *e);

#endif
