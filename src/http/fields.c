#include "http/fields.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *
field_str(const json_t *obj, const char *key, bool required, size_t max_len,
	  struct dsl_errors *errs)
{
	json_t *v = json_object_get(obj, key);
	char path[128];
	snprintf(path, sizeof(path), "$.%s", key);
	if (!v || json_is_null(v)) {
		if (required)
			dsl_errors_add(errs, path, "is required");
		return NULL;
	}
	if (!json_is_string(v)) {
		dsl_errors_add(errs, path, "must be a string");
		return NULL;
	}
	if (json_string_length(v) == 0 && required) {
		dsl_errors_add(errs, path, "must not be empty");
		return NULL;
	}
	if (json_string_length(v) > max_len ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		dsl_errors_add(errs, path,
			       "must be at most %zu characters, without NUL",
			       max_len);
		return NULL;
	}
	return json_string_value(v);
}

long
field_int(const json_t *obj, const char *key, long def, long min, long max,
	  struct dsl_errors *errs)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v))
		return def;
	char path[128];
	snprintf(path, sizeof(path), "$.%s", key);
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max) {
		dsl_errors_add(errs, path,
			       "must be a whole number from %ld to %ld", min,
			       max);
		return def;
	}
	return (long)json_integer_value(v);
}

double
field_num(const json_t *obj, const char *key, double def, double min,
	  double max, struct dsl_errors *errs)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v))
		return def;
	char path[128];
	snprintf(path, sizeof(path), "$.%s", key);
	double x = json_number_value(v);
	if (!json_is_number(v) || isnan(x) || x < min || x > max) {
		dsl_errors_add(errs, path, "must be a number from %g to %g",
			       min, max);
		return def;
	}
	return x;
}

bool
field_bool(const json_t *obj, const char *key, bool def,
	   struct dsl_errors *errs)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v))
		return def;
	if (!json_is_boolean(v)) {
		char path[128];
		snprintf(path, sizeof(path), "$.%s", key);
		dsl_errors_add(errs, path, "must be true or false");
		return def;
	}
	return json_is_true(v);
}

const json_t *
field_obj(const json_t *obj, const char *key, struct dsl_errors *errs)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v))
		return NULL;
	if (!json_is_object(v)) {
		char path[128];
		snprintf(path, sizeof(path), "$.%s", key);
		dsl_errors_add(errs, path, "must be an object");
		return NULL;
	}
	return v;
}
