/*
 * fields — reading members of a JSON request body, each problem recorded
 * with the member's JSON path ("$.priority: must be a whole number from 0
 * to 99"), so a request is answered with every problem at once.
 *
 * Threads: any.  Ownership: strings returned point into the JSON object
 * (valid while it lives).  Failure: problems go to errs; the functions
 * return the default when a member is absent or wrong.
 */
#ifndef NF_HTTP_FIELDS_H
#define NF_HTTP_FIELDS_H

#include "engine/dsl.h"

#include <jansson.h>
#include <stdbool.h>

/* A string member; NULL when absent (an error if required), or when it is
 * not a string, or longer than max_len. */
const char *field_str(const json_t *obj, const char *key, bool required,
		      size_t max_len, struct dsl_errors *errs);
/* A whole number in [min, max]; def when absent. */
long field_int(const json_t *obj, const char *key, long def, long min, long max,
	       struct dsl_errors *errs);
/* A number (fractions allowed) in [min, max]; def when absent. */
double field_num(const json_t *obj, const char *key, double def, double min,
		 double max, struct dsl_errors *errs);
bool field_bool(const json_t *obj, const char *key, bool def,
		struct dsl_errors *errs);
/* An object member; NULL when absent (not an error) or not an object. */
const json_t *field_obj(const json_t *obj, const char *key,
			struct dsl_errors *errs);

#endif
