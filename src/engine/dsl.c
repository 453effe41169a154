#include "engine/dsl.h"

#include "engine/expr.h"
#include "engine/subflows.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/utf8.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --------------------------------------------------------------- errors */

/* s as valid UTF-8: messages quote names cut at a byte count ("%.200s"),
 * which can split a character, and JSON strings must be UTF-8. */
static char *
utf8_clean(const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	sb_puts(&sb, "");
	while (*s) {
		size_t n = utf8_len((const unsigned char *)s);
		if (n) {
			sb_append(&sb, s, n);
			s += n;
		} else {
			sb_puts(&sb, "\xef\xbf\xbd");
			s++;
		}
	}
	return sb_steal(&sb);
}

void
dsl_errors_add(struct dsl_errors *errs, const char *path, const char *fmt, ...)
{
	struct strbuf msg = STRBUF_INIT;
	sb_puts(&msg, "");
	va_list ap;
	va_start(ap, fmt);
	sb_vprintf(&msg, fmt, ap);
	va_end(ap);
	errs->items =
		xrealloc(errs->items, (errs->n + 1) * sizeof(*errs->items));
	errs->items[errs->n].path = utf8_clean(path);
	errs->items[errs->n].message = utf8_clean(sb_str(&msg));
	errs->n++;
	sb_free(&msg);
}

void
dsl_errors_free(struct dsl_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++) {
		free(errs->items[i].path);
		free(errs->items[i].message);
	}
	free(errs->items);
	errs->items = NULL;
	errs->n = 0;
}

json_t *
dsl_errors_json(const struct dsl_errors *errs)
{
	json_t *a = json_array();
	for (size_t i = 0; i < errs->n; i++)
		json_array_append_new(
			a, json_pack("{s:s,s:s}", "path", errs->items[i].path,
				     "message", errs->items[i].message));
	return a;
}

/* ------------------------------------------------------ field accessors */

/*
 * Each accessor reads one member of an object.  A member that is absent or
 * JSON null is absent (Conductor's clients send nulls for unset fields);
 * a present member of the wrong type or out of range adds an error at
 * base.key and leaves *out untouched.  They return whether a valid value
 * was stored.
 */

static char *
join(const char *base, const char *key)
{
	struct strbuf sb = STRBUF_INIT;
	sb_printf(&sb, "%s.%s", base, key);
	return sb_steal(&sb);
}

static const json_t *
member(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}

static void
fail_at(struct dsl_errors *errs, const char *base, const char *key,
	const char *message)
{
	char *path = join(base, key);
	dsl_errors_add(errs, path, "%s", message);
	free(path);
}

static void fail_at_fmt(struct dsl_errors *errs, const char *base,
			const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
fail_at_fmt(struct dsl_errors *errs, const char *base, const char *key,
	    const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fail_at(errs, base, key, msg);
}

/* A JSON number that is a whole number (3 and 3.0 alike, as Jackson
 * accepts them for Conductor's int fields). */
static bool
whole_number(const json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return true;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d >= -9.2e18 && d <= 9.2e18 && (double)(int64_t)d == d) {
			*out = (int64_t)d;
			return true;
		}
	}
	return false;
}

static bool
get_int(const json_t *obj, const char *base, const char *key, int64_t min,
	int64_t max, int64_t *out, struct dsl_errors *errs)
{
	const json_t *v = member(obj, key);
	if (!v)
		return false;
	int64_t x;
	char *path = join(base, key);
	bool ok = false;
	if (!whole_number(v, &x))
		dsl_errors_add(errs, path, "must be a whole number");
	else if (x < min && min == 0)
		dsl_errors_add(errs, path, "must not be negative");
	else if (x < min)
		dsl_errors_add(errs, path, "must be at least %" PRId64, min);
	else if (x > max)
		dsl_errors_add(errs, path, "must be at most %" PRId64, max);
	else
		ok = true;
	free(path);
	if (ok)
		*out = x;
	return ok;
}

/* get_int into an int field. */
static bool
get_int32(const json_t *obj, const char *base, const char *key, int min,
	  int *out, struct dsl_errors *errs)
{
	int64_t x;
	if (!get_int(obj, base, key, min, INT_MAX, &x, errs))
		return false;
	*out = (int)x;
	return true;
}

static bool
get_bool(const json_t *obj, const char *base, const char *key, bool *out,
	 struct dsl_errors *errs)
{
	const json_t *v = member(obj, key);
	if (!v)
		return false;
	if (!json_is_boolean(v)) {
		fail_at(errs, base, key, "must be a boolean");
		return false;
	}
	*out = json_is_true(v);
	return true;
}

/* Whether v is a string that holds no NUL (which no TEXT column can). */
static bool
clean_string(const json_t *v, const char *path, struct dsl_errors *errs)
{
	if (!json_is_string(v)) {
		dsl_errors_add(errs, path, "must be a string");
		return false;
	}
	if (strlen(json_string_value(v)) != json_string_length(v)) {
		dsl_errors_add(errs, path, "must not contain NUL characters");
		return false;
	}
	return true;
}

/* A string member into *out (replacing what was there).  required: absent
 * is an error; nonempty: "" is an error. */
static bool
get_string(const json_t *obj, const char *base, const char *key, bool required,
	   bool nonempty, char **out, struct dsl_errors *errs)
{
	const json_t *v = member(obj, key);
	if (!v) {
		if (required)
			fail_at(errs, base, key, "is required");
		return false;
	}
	char *path = join(base, key);
	bool ok = clean_string(v, path, errs);
	if (ok && nonempty && json_string_length(v) == 0) {
		dsl_errors_add(errs, path, "must not be empty");
		ok = false;
	}
	free(path);
	if (!ok)
		return false;
	free(*out);
	*out = xstrdup(json_string_value(v));
	return true;
}

/* An object member (a new reference into *out, replacing what was there). */
static bool
get_object(const json_t *obj, const char *base, const char *key, json_t **out,
	   struct dsl_errors *errs)
{
	const json_t *v = member(obj, key);
	if (!v)
		return false;
	if (!json_is_object(v)) {
		fail_at(errs, base, key, "must be an object");
		return false;
	}
	json_decref(*out);
	*out = json_incref((json_t *)v);
	return true;
}

/* An array of strings (a new reference into *out). */
static bool
get_string_array(const json_t *obj, const char *base, const char *key,
		 json_t **out, struct dsl_errors *errs)
{
	const json_t *v = member(obj, key);
	if (!v)
		return false;
	if (!json_is_array(v)) {
		fail_at(errs, base, key, "must be an array of strings");
		return false;
	}
	bool ok = true;
	size_t i;
	const json_t *item;
	json_array_foreach (v, i, item) {
		struct strbuf path = STRBUF_INIT;
		sb_printf(&path, "%s.%s[%zu]", base, key, i);
		if (!clean_string(item, sb_str(&path), errs))
			ok = false;
		sb_free(&path);
	}
	if (!ok)
		return false;
	json_decref(*out);
	*out = json_incref((json_t *)v);
	return true;
}

/* ------------------------------------------------------------- TaskDef */

static void
enum_error(struct dsl_errors *errs, const char *base, const char *key,
	   const char *got, const char *allowed)
{
	char *path = join(base, key);
	dsl_errors_add(errs, path,
		       "unknown value \"%.100s\": must be one of %s", got,
		       allowed);
	free(path);
}

static void
parse_cache_config(const json_t *doc, const char *base, struct task_def *d,
		   struct dsl_errors *errs)
{
	json_t *cfg = NULL;
	if (!get_object(doc, base, "cacheConfig", &cfg, errs))
		return;
	char *path = join(base, "cacheConfig");
	size_t before = errs->n;
	char *key = NULL;
	int64_t ttl;
	get_string(cfg, path, "key", true, true, &key, errs);
	get_int(cfg, path, "ttlInSecond", 0, INT_MAX, &ttl, errs);
	free(key);
	free(path);
	if (errs->n == before) {
		json_decref(d->cache_config);
		d->cache_config = cfg;
	} else {
		json_decref(cfg);
	}
}

/*
 * Parses a TaskDef found at base ("$", or "$.tasks[0].taskDefinition").
 * An inline definition (task_name set, NULL when its task has no valid
 * name) needs no name of its own: it takes its task's, and one it does
 * carry must be that.
 */
static void
parse_task_def(const json_t *doc, const char *base, bool inline_def,
	       const char *task_name, struct task_def *d,
	       struct dsl_errors *errs)
{
	if (!json_is_object(doc)) {
		dsl_errors_add(errs, base, "must be an object");
		return;
	}
	if (!inline_def) {
		get_string(doc, base, "name", true, true, &d->name, errs);
	} else if (get_string(doc, base, "name", false, true, &d->name, errs)) {
		if (task_name && strcmp(d->name, task_name) != 0) {
			char *path = join(base, "name");
			dsl_errors_add(errs, path,
				       "must be the task's name \"%.200s\"",
				       task_name);
			free(path);
		}
	} else if (task_name) {
		free(d->name);
		d->name = xstrdup(task_name);
	}
	get_string(doc, base, "description", false, false, &d->description,
		   errs);

	int64_t x;
	get_int32(doc, base, "retryCount", 0, &d->retry_count, errs);
	const json_t *v = member(doc, "retryLogic");
	if (v) {
		char *path = join(base, "retryLogic");
		if (clean_string(v, path, errs) &&
		    !retry_logic_parse(json_string_value(v), &d->retry_logic))
			enum_error(
				errs, base, "retryLogic", json_string_value(v),
				"FIXED, EXPONENTIAL_BACKOFF, LINEAR_BACKOFF");
		free(path);
	}
	get_int32(doc, base, "retryDelaySeconds", 0, &d->retry_delay_seconds,
		  errs);
	get_int32(doc, base, "backoffScaleFactor", 1, &d->backoff_scale_factor,
		  errs);
	get_int32(doc, base, "maxRetryDelaySeconds", 0,
		  &d->max_retry_delay_seconds, errs);
	get_int32(doc, base, "backoffJitterMs", 0, &d->backoff_jitter_ms, errs);

	bool timeout_ok = true, response_ok = true;
	if (member(doc, "timeoutSeconds"))
		timeout_ok = get_int(doc, base, "timeoutSeconds", 0, INT64_MAX,
				     &d->timeout_seconds, errs);
	v = member(doc, "timeoutPolicy");
	if (v) {
		char *path = join(base, "timeoutPolicy");
		if (clean_string(v, path, errs) &&
		    !timeout_policy_parse(json_string_value(v),
					  &d->timeout_policy))
			enum_error(errs, base, "timeoutPolicy",
				   json_string_value(v),
				   "RETRY, TIME_OUT_WF, ALERT_ONLY");
		free(path);
	}
	if (member(doc, "responseTimeoutSeconds"))
		response_ok =
			get_int(doc, base, "responseTimeoutSeconds", 1,
				INT64_MAX, &d->response_timeout_seconds, errs);
	/* Conductor's TaskTimeoutConstraint, and the table's CHECK. */
	if (timeout_ok && response_ok && d->timeout_seconds > 0 &&
	    d->response_timeout_seconds > d->timeout_seconds) {
		char *path = join(base, "responseTimeoutSeconds");
		dsl_errors_add(errs, path,
			       "%" PRId64 " must not exceed timeoutSeconds "
			       "(%" PRId64 ")",
			       d->response_timeout_seconds, d->timeout_seconds);
		free(path);
	}
	get_int32(doc, base, "pollTimeoutSeconds", 0, &d->poll_timeout_seconds,
		  errs);
	if (get_int(doc, base, "totalTimeoutSeconds", 0, INT64_MAX, &x, errs))
		d->total_timeout_seconds = x;

	/* Conductor reads 0 as "no limit" for both of these; so do we. */
	if (get_int32(doc, base, "concurrentExecLimit", 0,
		      &d->concurrent_exec_limit, errs) &&
	    d->concurrent_exec_limit == 0)
		d->concurrent_exec_limit = -1;
	if (get_int32(doc, base, "rateLimitPerFrequency", 0,
		      &d->rate_limit_per_frequency, errs) &&
	    d->rate_limit_per_frequency == 0)
		d->rate_limit_per_frequency = -1;
	get_int32(doc, base, "rateLimitFrequencyInSeconds", 0,
		  &d->rate_limit_frequency_seconds, errs);

	get_string_array(doc, base, "inputKeys", &d->input_keys, errs);
	get_string_array(doc, base, "outputKeys", &d->output_keys, errs);
	get_object(doc, base, "inputTemplate", &d->input_template, errs);
	get_string(doc, base, "ownerEmail", false, false, &d->owner_email,
		   errs);
	get_string_array(doc, base, "secretOutputFields",
			 &d->secret_output_fields, errs);
	get_string(doc, base, "isolationGroupId", false, false,
		   &d->isolation_group_id, errs);
	get_string(doc, base, "executionNameSpace", false, false,
		   &d->execution_name_space, errs);
	get_string(doc, base, "semaphore", false, true, &d->semaphore, errs);
	parse_cache_config(doc, base, d, errs);
	get_object(doc, base, "inputSchema", &d->input_schema, errs);
	get_object(doc, base, "outputSchema", &d->output_schema, errs);
	get_bool(doc, base, "enforceSchema", &d->enforce_schema, errs);
}

bool
dsl_task_def_parse(const json_t *doc, struct task_def *d,
		   struct dsl_errors *errs)
{
	size_t before = errs->n;
	task_def_init(d);
	parse_task_def(doc, "$", false, NULL, d, errs);
	return errs->n == before;
}

/* Epoch milliseconds of "YYYY-MM-DDTHH:MM:SS.mmmZ"; false otherwise. */
static bool
iso_ms(const char *s, int64_t *out)
{
	int y, mo, d, h, mi, sec, ms = 0, n = 0;
	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi,
			 &sec, &n) != 6)
		return false;
	if (s[n] == '.' && sscanf(s + n + 1, "%3d", &ms) != 1)
		return false;
	struct tm tm = {.tm_year = y - 1900,
			.tm_mon = mo - 1,
			.tm_mday = d,
			.tm_hour = h,
			.tm_min = mi,
			.tm_sec = sec};
	*out = (int64_t)timegm(&tm) * 1000 + ms;
	return true;
}

static void
set_time(json_t *obj, const char *key, const char *iso)
{
	int64_t ms;
	if (iso_ms(iso, &ms))
		json_object_set_new(obj, key, json_integer((json_int_t)ms));
}

static void
set_opt_string(json_t *obj, const char *key, const char *s)
{
	if (s)
		json_object_set_new(obj, key, json_string(s));
}

static void
set_opt_int(json_t *obj, const char *key, int64_t v)
{
	if (v >= 0)
		json_object_set_new(obj, key, json_integer((json_int_t)v));
}

static void
set_opt_json(json_t *obj, const char *key, json_t *v)
{
	if (v)
		json_object_set(obj, key, v);
}

json_t *
dsl_task_def_json(const struct task_def *d)
{
	json_t *o = json_object();
	set_opt_string(o, "name", d->name);
	set_opt_string(o, "description", d->description);
	set_opt_int(o, "retryCount", d->retry_count);
	json_object_set_new(o, "retryLogic",
			    json_string(retry_logic_name(d->retry_logic)));
	set_opt_int(o, "retryDelaySeconds", d->retry_delay_seconds);
	set_opt_int(o, "backoffScaleFactor", d->backoff_scale_factor);
	set_opt_int(o, "maxRetryDelaySeconds", d->max_retry_delay_seconds);
	set_opt_int(o, "backoffJitterMs", d->backoff_jitter_ms);
	set_opt_int(o, "timeoutSeconds", d->timeout_seconds);
	json_object_set_new(
		o, "timeoutPolicy",
		json_string(timeout_policy_name(d->timeout_policy)));
	set_opt_int(o, "responseTimeoutSeconds", d->response_timeout_seconds);
	set_opt_int(o, "pollTimeoutSeconds", d->poll_timeout_seconds);
	set_opt_int(o, "totalTimeoutSeconds", d->total_timeout_seconds);
	set_opt_int(o, "concurrentExecLimit", d->concurrent_exec_limit);
	set_opt_int(o, "rateLimitPerFrequency", d->rate_limit_per_frequency);
	set_opt_int(o, "rateLimitFrequencyInSeconds",
		    d->rate_limit_frequency_seconds);
	json_object_set_new(o, "inputKeys",
			    d->input_keys ? json_incref(d->input_keys)
					  : json_array());
	json_object_set_new(o, "outputKeys",
			    d->output_keys ? json_incref(d->output_keys)
					   : json_array());
	json_object_set_new(o, "inputTemplate",
			    d->input_template ? json_incref(d->input_template)
					      : json_object());
	set_opt_string(o, "ownerEmail", d->owner_email);
	json_object_set_new(o, "secretOutputFields",
			    d->secret_output_fields
				    ? json_incref(d->secret_output_fields)
				    : json_array());
	set_opt_string(o, "isolationGroupId", d->isolation_group_id);
	set_opt_string(o, "executionNameSpace", d->execution_name_space);
	set_opt_string(o, "semaphore", d->semaphore);
	set_opt_json(o, "cacheConfig", d->cache_config);
	set_opt_json(o, "inputSchema", d->input_schema);
	set_opt_json(o, "outputSchema", d->output_schema);
	json_object_set_new(o, "enforceSchema",
			    json_boolean(d->enforce_schema));
	set_time(o, "createTime", d->created_at);
	set_time(o, "updateTime", d->updated_at);
	return o;
}

json_t *
dsl_workflow_def_json(const struct workflow_def_row *r)
{
	json_t *o = json_is_object(r->definition)
			    ? json_deep_copy(r->definition)
			    : json_object();
	json_object_set_new(o, "name", json_string(r->name));
	json_object_set_new(o, "version", json_integer(r->version));
	set_time(o, "createTime", r->created_at);
	set_time(o, "updateTime", r->updated_at);
	return o;
}

/* --------------------------------------------------------- WorkflowDef */

/* What the parse of one definition carries from task to task. */
struct parser {
	struct dsl_errors *errs;
	struct wf_task **all; /* every task, in document order */
	size_t n_all, cap_all;
};

static void task_list_free(struct wf_task_list *l);

static void
task_free(struct wf_task *t)
{
	free(t->name);
	free(t->ref);
	free(t->semaphore);
	free(t->type);
	free(t->path);
	free(t->cache_key);
	json_decref(t->input_parameters);
	if (t->inline_def) {
		task_def_free(t->inline_def);
		free(t->inline_def);
	}
	for (size_t i = 0; i < t->n_refs_used; i++)
		free(t->refs_used[i]);
	free(t->refs_used);
	for (size_t i = 0; i < t->n_branches; i++)
		task_list_free(&t->branches[i]);
	free(t->branches);
	for (size_t i = 0; i < t->n_reads; i++)
		free(t->reads[i]);
	free(t->reads);
	json_decref(t->raw);
}

static void
task_list_free(struct wf_task_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		task_free(&l->items[i]);
	free(l->items);
	free(l->key);
	l->items = NULL;
	l->key = NULL;
	l->n = 0;
}

static void parse_task_list(struct parser *p, const json_t *arr,
			    const char *path, struct wf_task_list *list,
			    const struct wf_task *owner);

/* A member that must be an array of tasks, parsed into *list. */
static bool
nested_list(struct parser *p, const json_t *arr, const char *path,
	    struct wf_task_list *list, const struct wf_task *owner)
{
	list->owner = owner;
	if (!json_is_array(arr)) {
		dsl_errors_add(p->errs, path, "must be an array of tasks");
		return false;
	}
	parse_task_list(p, arr, path, list, owner);
	return true;
}

static struct wf_task_list *
add_branch(struct wf_task *t)
{
	t->branches = xrealloc(t->branches,
			       (t->n_branches + 1) * sizeof(*t->branches));
	struct wf_task_list *l = &t->branches[t->n_branches++];
	memset(l, 0, sizeof(*l));
	return l;
}

/*
 * The nested lists of an operator (task_kind.h, nest).  The branches array
 * is sized before any list is parsed: tasks point at their list, so it
 * must not move afterwards.
 */
static void
parse_nested(struct parser *p, const json_t *doc, struct wf_task *t)
{
	struct dsl_errors *errs = p->errs;
	const json_t *v;
	char *path;
	switch (t->kind->nest) {
	case NEST_NONE: return;
	case NEST_CASES: {
		const json_t *cases = member(doc, "decisionCases");
		const json_t *def = member(doc, "defaultCase");
		if (cases && !json_is_object(cases)) {
			fail_at(errs, t->path, "decisionCases",
				"must be an object of task lists");
			cases = NULL;
		}
		size_t n = json_object_size(cases) + 1;
		t->branches = xcalloc(n, sizeof(*t->branches));
		const char *key;
		json_t *list;
		json_object_foreach ((json_t *)cases, key, list) {
			struct strbuf sb = STRBUF_INIT;
			sb_printf(&sb, "%s.decisionCases['%s']", t->path, key);
			struct wf_task_list *l = &t->branches[t->n_branches++];
			l->key = xstrdup(key);
			nested_list(p, list, sb_str(&sb), l, t);
			sb_free(&sb);
		}
		struct wf_task_list *l = &t->branches[t->n_branches++];
		if (def) {
			path = join(t->path, "defaultCase");
			nested_list(p, def, path, l, t);
			free(path);
		} else {
			l->owner = t;
		}
		return;
	}
	case NEST_FORK:
		v = member(doc, "forkTasks");
		if (!v) {
			fail_at(errs, t->path, "forkTasks", "is required");
			return;
		}
		if (!json_is_array(v) || json_array_size(v) == 0) {
			fail_at(errs, t->path, "forkTasks",
				"must be a non-empty array of task lists");
			return;
		}
		t->branches = xcalloc(json_array_size(v), sizeof(*t->branches));
		for (size_t i = 0; i < json_array_size(v); i++) {
			struct strbuf sb = STRBUF_INIT;
			sb_printf(&sb, "%s.forkTasks[%zu]", t->path, i);
			nested_list(p, json_array_get(v, i), sb_str(&sb),
				    &t->branches[t->n_branches++], t);
			sb_free(&sb);
		}
		return;
	case NEST_LOOP:
		v = member(doc, "loopOver");
		path = join(t->path, "loopOver");
		if (!v)
			dsl_errors_add(errs, path, "is required");
		else if (!json_is_array(v) || json_array_size(v) == 0)
			dsl_errors_add(errs, path,
				       "must be a non-empty array of tasks");
		else
			nested_list(p, v, path, add_branch(t), t);
		free(path);
		return;
	}
}

/* cacheConfig {"key": "<template>", "ttlInSecond": N}: the key is
 * required and non-empty, the time to live at least one second.  The key's
 * expressions are checked with the inputParameters (check_expressions). */
static void
parse_task_cache_config(const json_t *doc, struct wf_task *t,
			struct dsl_errors *errs)
{
	const json_t *cc = member(doc, "cacheConfig");
	if (!cc)
		return;
	char *path = join(t->path, "cacheConfig");
	if (!json_is_object(cc)) {
		dsl_errors_add(errs, path, "must be an object");
		free(path);
		return;
	}
	char *key = NULL;
	int ttl = 0;
	bool ok = get_string(cc, path, "key", true, true, &key, errs);
	if (!member(cc, "ttlInSecond")) {
		fail_at(errs, path, "ttlInSecond", "is required");
		ok = false;
	} else if (!get_int32(cc, path, "ttlInSecond", 1, &ttl, errs)) {
		ok = false;
	}
	if (ok && t->kind && t->kind->exec == TASK_EXEC_INLINE) {
		dsl_errors_add(errs, path,
			       "is not supported on a %s task (it is run by "
			       "the decider, never queued)",
			       t->kind->type);
		ok = false;
	}
	if (ok) {
		t->cache_key = key;
		t->cache_ttl_seconds = ttl;
	} else {
		free(key);
	}
	free(path);
}

static void
parse_task(struct parser *p, const json_t *doc, struct wf_task *t)
{
	struct dsl_errors *errs = p->errs;
	t->input_parameters = json_object();
	t->retry_count = -1;
	t->raw = json_incref((json_t *)doc);
	if (!json_is_object(doc)) {
		dsl_errors_add(errs, t->path, "must be an object");
		return;
	}
	get_string(doc, t->path, "name", true, true, &t->name, errs);
	get_string(doc, t->path, "taskReferenceName", true, true, &t->ref,
		   errs);
	if (!member(doc, "type")) {
		t->type = xstrdup("SIMPLE");
		t->kind = task_kind_find(t->type);
	} else if (get_string(doc, t->path, "type", false, false, &t->type,
			      errs)) {
		t->kind = task_kind_find(t->type);
		if (!t->kind) {
			char *path = join(t->path, "type");
			dsl_errors_add(errs, path, "unknown task type %.100s",
				       t->type);
			free(path);
		}
	}
	get_object(doc, t->path, "inputParameters", &t->input_parameters, errs);
	get_bool(doc, t->path, "optional", &t->optional, errs);
	get_bool(doc, t->path, "asyncComplete", &t->async_complete, errs);
	get_int32(doc, t->path, "startDelay", 0, &t->start_delay_seconds, errs);
	get_int32(doc, t->path, "retryCount", 0, &t->retry_count, errs);
	get_string(doc, t->path, "semaphore", false, true, &t->semaphore, errs);
	parse_task_cache_config(doc, t, errs);
	const json_t *inline_doc = member(doc, "taskDefinition");
	if (inline_doc) {
		char *path = join(t->path, "taskDefinition");
		t->inline_def = xmalloc(sizeof(*t->inline_def));
		task_def_init(t->inline_def);
		parse_task_def(inline_doc, path, true, t->name, t->inline_def,
			       errs);
		free(path);
	}
	/* Only worker tasks are leased through the gate: a semaphore on
	 * any other kind would be a promise nothing keeps. */
	if (t->kind && t->kind->exec != TASK_EXEC_WORKER &&
	    (t->semaphore || (t->inline_def && t->inline_def->semaphore)))
		fail_at(errs, t->path, "semaphore",
			"applies to worker (SIMPLE) tasks only: tasks of this "
			"type are not gated");
	if (t->kind)
		parse_nested(p, doc, t);
}

static void
remember_task(struct parser *p, struct wf_task *t)
{
	if (p->n_all == p->cap_all) {
		p->cap_all = p->cap_all ? 2 * p->cap_all : 16;
		p->all = xrealloc(p->all, p->cap_all * sizeof(*p->all));
	}
	p->all[p->n_all++] = t;
}

/* Parses the array at path into list (operators' own lists recurse from
 * parse_task); owner is the operator that holds it, NULL at the top. */
static void
parse_task_list(struct parser *p, const json_t *arr, const char *path,
		struct wf_task_list *list, const struct wf_task *owner)
{
	size_t n = json_array_size(arr);
	list->items = xcalloc(n ? n : 1, sizeof(*list->items));
	list->n = n;
	list->owner = owner;
	for (size_t i = 0; i < n; i++) {
		struct wf_task *t = &list->items[i];
		struct strbuf sb = STRBUF_INIT;
		sb_printf(&sb, "%s[%zu]", path, i);
		t->path = sb_steal(&sb);
		t->index = i;
		t->list = list;
		remember_task(p, t);
		parse_task(p, json_array_get(arr, i), t);
	}
}

/* Orders tasks by reference name, then by document position (the address
 * of a task says nothing about it: positions are compared via seq). */
struct ref_entry {
	struct wf_task *task;
	size_t seq;
};

static int
cmp_ref_entry(const void *a, const void *b)
{
	const struct ref_entry *x = a, *y = b;
	int c = strcmp(x->task->ref, y->task->ref);
	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int
cmp_task_ref(const void *a, const void *b)
{
	const struct wf_task *const *x = a, *const *y = b;
	return strcmp((*x)->ref, (*y)->ref);
}

/* Fills def->by_ref, and reports each reference name used twice at its
 * second (third…) use, naming the first. */
static void
index_refs(struct parser *p, struct wf_def *def)
{
	struct ref_entry *e = xcalloc(p->n_all + 1, sizeof(*e));
	size_t n = 0;
	for (size_t i = 0; i < p->n_all; i++)
		if (p->all[i]->ref)
			e[n++] = (struct ref_entry){p->all[i], i};
	qsort(e, n, sizeof(*e), cmp_ref_entry);

	/* first_of[seq]: the first task with the same reference, if it is
	 * another one. */
	struct wf_task **first_of = xcalloc(p->n_all + 1, sizeof(*first_of));
	def->by_ref = xcalloc(n + 1, sizeof(*def->by_ref));
	def->n_tasks = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(e[i].task->ref, e[i - 1].task->ref) == 0) {
			size_t g = i;
			while (g > 0 &&
			       strcmp(e[g - 1].task->ref, e[i].task->ref) == 0)
				g--;
			first_of[e[i].seq] = e[g].task;
			continue;
		}
		def->by_ref[def->n_tasks++] = e[i].task;
	}
	for (size_t i = 0; i < p->n_all; i++) {
		if (!first_of[i])
			continue;
		char *path = join(p->all[i]->path, "taskReferenceName");
		dsl_errors_add(p->errs, path,
			       "duplicate taskReferenceName \"%.200s\": first "
			       "used at %s",
			       p->all[i]->ref, first_of[i]->path);
		free(path);
	}
	free(first_of);
	free(e);
}

const struct wf_task *
dsl_find_task(const struct wf_def *def, const char *ref)
{
	if (!def->n_tasks)
		return NULL;
	struct wf_task key = {.ref = (char *)ref};
	const struct wf_task *pk = &key;
	struct wf_task **hit = bsearch(&pk, def->by_ref, def->n_tasks,
				       sizeof(*def->by_ref), cmp_task_ref);
	return hit ? *hit : NULL;
}

/* Collects the distinct task references a template reads. */
struct sources {
	const struct wf_def *def;
	char **refs;
	size_t n;
	char **unknown; /* references that are not tasks of def */
	size_t n_unknown;
};

static bool
listed(char **list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

static void
on_source(const char *source, size_t len, void *arg)
{
	struct sources *s = arg;
	char *name = xstrndup(source, len);
	if (strcmp(name, "workflow") == 0 || listed(s->refs, s->n, name) ||
	    listed(s->unknown, s->n_unknown, name)) {
		free(name);
		return;
	}
	if (dsl_find_task(s->def, name)) {
		s->refs = xrealloc(s->refs, (s->n + 1) * sizeof(*s->refs));
		s->refs[s->n++] = name;
	} else {
		s->unknown = xrealloc(s->unknown,
				      (s->n_unknown + 1) * sizeof(*s->unknown));
		s->unknown[s->n_unknown++] = name;
	}
}

/*
 * expr's errors read "<path of the string>: <problem>", the path being
 * `where` followed by ".key", "['key']" and "[n]" steps.  Returns the
 * length of that path in msg, or 0 when msg does not have this shape.
 */
static size_t
expr_error_path(const char *msg, const char *where)
{
	size_t i = strlen(where);
	if (strncmp(msg, where, i) != 0)
		return 0;
	for (;;) {
		if (msg[i] == '.') {
			i++;
			while (msg[i] && strchr("abcdefghijklmnopqrstuvwxyz"
						"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						"0123456789_-",
						msg[i]))
				i++;
		} else if (msg[i] == '[' && msg[i + 1] == '\'') {
			for (i += 2; msg[i] && msg[i] != '\''; i++)
				if (msg[i] == '\\' && msg[i + 1])
					i++;
			if (msg[i] != '\'' || msg[i + 1] != ']')
				return 0;
			i += 2;
		} else if (msg[i] == '[') {
			for (i++; msg[i] >= '0' && msg[i] <= '9'; i++)
				;
			if (msg[i] != ']')
				return 0;
			i++;
		} else {
			break;
		}
	}
	return msg[i] == ':' && msg[i + 1] == ' ' ? i : 0;
}

/*
 * Checks the expressions of tmpl (found at path) and returns the task
 * references they read.  A malformed expression is reported at the path of
 * the string that holds it; a reference to a task that is not in the
 * definition at path.
 */
static void
check_template(struct parser *p, const struct wf_def *def, const json_t *tmpl,
	       const char *path, char ***refs, size_t *n_refs)
{
	struct err e = ERR_INIT;
	if (!expr_check(tmpl, path, &e)) {
		size_t n = expr_error_path(e.msg, path);
		if (n) {
			char *at = xstrndup(e.msg, n);
			dsl_errors_add(p->errs, at, "%s", e.msg + n + 2);
			free(at);
		} else {
			dsl_errors_add(p->errs, path, "%s", e.msg);
		}
		return;
	}
	struct sources s = {.def = def};
	expr_sources(tmpl, on_source, &s);
	for (size_t i = 0; i < s.n_unknown; i++) {
		dsl_errors_add(p->errs, path,
			       "refers to task %.200s, which is not in this "
			       "workflow",
			       s.unknown[i]);
		free(s.unknown[i]);
	}
	free(s.unknown);
	*refs = s.refs;
	*n_refs = s.n;
}

static void
check_expressions(struct parser *p, struct wf_def *def)
{
	for (size_t i = 0; i < p->n_all; i++) {
		struct wf_task *t = p->all[i];
		char *path = join(t->path, "inputParameters");
		check_template(p, def, t->input_parameters, path, &t->refs_used,
			       &t->n_refs_used);
		free(path);
		/* Expressions in the kind's own fields (subWorkflowParam,
		 * sink): their references are loaded too. */
		json_t *extra = subflows_expr_fields(t->raw);
		if (t->cache_key) {
			/* The cache key reads like inputParameters do. */
			if (!extra)
				extra = json_object();
			json_t *cc = json_object();
			json_object_set_new(cc, "key",
					    json_string(t->cache_key));
			json_object_set_new(extra, "cacheConfig", cc);
		}
		char **more = NULL;
		size_t n_more = 0;
		if (extra)
			check_template(p, def, extra, t->path, &more, &n_more);
		for (size_t k = 0; k < n_more; k++) {
			if (listed(t->refs_used, t->n_refs_used, more[k])) {
				free(more[k]);
				continue;
			}
			t->refs_used = xrealloc(t->refs_used,
						(t->n_refs_used + 1) *
							sizeof(*t->refs_used));
			t->refs_used[t->n_refs_used++] = more[k];
		}
		free(more);
		json_decref(extra);
	}
	if (def->output_parameters)
		check_template(p, def, def->output_parameters,
			       "$.outputParameters", &def->refs_used,
			       &def->n_refs_used);
}

static bool
needs_registered_def(const struct wf_task *t)
{
	return t->name && t->kind && t->kind->needs_task_def && !t->inline_def;
}

static void
collect_required(struct parser *p, struct wf_def *def)
{
	for (size_t i = 0; i < p->n_all; i++) {
		struct wf_task *t = p->all[i];
		if (!needs_registered_def(t) ||
		    listed(def->required_task_defs, def->n_required_task_defs,
			   t->name))
			continue;
		def->required_task_defs =
			xrealloc(def->required_task_defs,
				 (def->n_required_task_defs + 1) *
					 sizeof(*def->required_task_defs));
		def->required_task_defs[def->n_required_task_defs++] =
			xstrdup(t->name);
	}
}

static bool
starts_children(const struct parser *p)
{
	for (size_t i = 0; i < p->n_all; i++) {
		const char *type = p->all[i]->type;
		if (type && (strcmp(type, "SUB_WORKFLOW") == 0 ||
			     strcmp(type, "DYNAMIC") == 0 ||
			     strcmp(type, "FORK_JOIN_DYNAMIC") == 0))
			return true;
	}
	return false;
}

static void
parse_workflow_fields(struct parser *p, const json_t *doc, struct wf_def *def)
{
	struct dsl_errors *errs = p->errs;
	/* The name is a path segment of the API. */
	if (get_string(doc, "$", "name", true, true, &def->name, errs) &&
	    strchr(def->name, '/'))
		dsl_errors_add(errs, "$.name", "must not contain '/'");
	int64_t x;
	get_int32(doc, "$", "version", 1, &def->version, errs);
	get_string(doc, "$", "description", false, false, &def->description,
		   errs);

	const json_t *tasks = member(doc, "tasks");
	if (!tasks)
		dsl_errors_add(errs, "$.tasks", "is required");
	else if (!json_is_array(tasks))
		dsl_errors_add(errs, "$.tasks", "must be an array");
	else if (json_array_size(tasks) == 0)
		dsl_errors_add(errs, "$.tasks", "must not be empty");
	else
		parse_task_list(p, tasks, "$.tasks", &def->tasks, NULL);

	get_string_array(doc, "$", "inputParameters", &def->input_parameters,
			 errs);
	get_object(doc, "$", "outputParameters", &def->output_parameters, errs);
	get_object(doc, "$", "inputTemplate", &def->input_template, errs);
	get_object(doc, "$", "variables", &def->variables, errs);
	get_string(doc, "$", "failureWorkflow", false, true,
		   &def->failure_workflow, errs);
	get_int32(doc, "$", "failureWorkflowVersion", 0,
		  &def->failure_workflow_version, errs);
	if (get_int(doc, "$", "timeoutSeconds", 0, INT64_MAX, &x, errs))
		def->timeout_seconds = x;
	const json_t *v = member(doc, "timeoutPolicy");
	if (v && clean_string(v, "$.timeoutPolicy", errs)) {
		const char *s = json_string_value(v);
		if (strcmp(s, "TIME_OUT_WF") == 0)
			def->timeout_policy = TIMEOUT_TIME_OUT_WF;
		else if (strcmp(s, "ALERT_ONLY") == 0)
			def->timeout_policy = TIMEOUT_ALERT_ONLY;
		else
			enum_error(errs, "$", "timeoutPolicy", s,
				   "TIME_OUT_WF, ALERT_ONLY");
	}
	get_bool(doc, "$", "restartable", &def->restartable, errs);
	get_string(doc, "$", "ownerEmail", false, false, &def->owner_email,
		   errs);
	v = member(doc, "schemaVersion");
	if (v && (!whole_number(v, &x) || x != 2))
		dsl_errors_add(errs, "$.schemaVersion", "must be 2");
}

bool
dsl_workflow_parse_partial(const json_t *doc, struct wf_def **out,
			   struct dsl_errors *errs)
{
	size_t before = errs->n;
	struct parser p = {.errs = errs};
	struct wf_def *def = xcalloc(1, sizeof(*def));
	def->version = 1;
	def->input_parameters = json_array();
	def->input_template = json_object();
	def->variables = json_object();
	/* Conductor's WorkflowDef default; it matters only with a timeout. */
	def->timeout_policy = TIMEOUT_ALERT_ONLY;
	def->restartable = true;
	def->raw = json_incref((json_t *)doc);
	if (!json_is_object(doc)) {
		dsl_errors_add(errs, "$", "must be an object");
	} else {
		parse_workflow_fields(&p, doc, def);
		index_refs(&p, def);
		check_expressions(&p, def);
		for (size_t i = 0; i < p.n_all; i++)
			if (p.all[i]->kind && p.all[i]->kind->validate &&
			    p.all[i]->ref)
				p.all[i]->kind->validate(p.all[i], def, errs);
		collect_required(&p, def);
		def->starts_children = starts_children(&p);
	}
	free(p.all);
	*out = def;
	return errs->n == before;
}

bool
dsl_workflow_parse(const json_t *doc, struct wf_def **out,
		   struct dsl_errors *errs)
{
	if (dsl_workflow_parse_partial(doc, out, errs))
		return true;
	wf_def_free(*out);
	*out = NULL;
	return false;
}

static void
free_strings(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

void
wf_def_free(struct wf_def *def)
{
	if (!def)
		return;
	free(def->name);
	free(def->description);
	task_list_free(&def->tasks);
	json_decref(def->input_parameters);
	json_decref(def->output_parameters);
	json_decref(def->input_template);
	json_decref(def->variables);
	free(def->failure_workflow);
	free(def->owner_email);
	free(def->by_ref);
	free_strings(def->required_task_defs, def->n_required_task_defs);
	free_strings(def->refs_used, def->n_refs_used);
	json_decref(def->raw);
	free(def);
}

static bool
json_list_has(const json_t *names, const char *name)
{
	size_t i;
	const json_t *v;
	json_array_foreach (names, i, v)
		if (json_is_string(v) &&
		    strcmp(json_string_value(v), name) == 0)
			return true;
	return false;
}

static void
missing_in_list(const struct wf_task_list *l, const json_t *missing,
		struct dsl_errors *errs)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct wf_task *t = &l->items[i];
		if (needs_registered_def(t) && json_list_has(missing, t->name))
			dsl_errors_add(errs, t->path,
				       "task definition %.200s is not "
				       "registered",
				       t->name);
		for (size_t b = 0; b < t->n_branches; b++)
			missing_in_list(&t->branches[b], missing, errs);
	}
}

void
dsl_error_missing_task_def(const struct wf_def *def, const json_t *missing,
			   struct dsl_errors *errs)
{
	missing_in_list(&def->tasks, missing, errs);
}

static bool
self_run(const struct wf_task *t)
{
	return t->name && t->kind && t->kind->exec != TASK_EXEC_WORKER &&
	       !t->inline_def;
}

static void
self_run_names(const struct wf_task_list *l, json_t *names)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct wf_task *t = &l->items[i];
		if (self_run(t) && !json_list_has(names, t->name))
			json_array_append_new(names, json_string(t->name));
		for (size_t b = 0; b < t->n_branches; b++)
			self_run_names(&t->branches[b], names);
	}
}

json_t *
dsl_self_run_task_names(const struct wf_def *def)
{
	json_t *names = json_array();
	self_run_names(&def->tasks, names);
	return names;
}

void
dsl_flow_control_describe(const json_t *controls, char *out, size_t size)
{
	const char *sem =
		json_string_value(json_object_get(controls, "semaphore"));
	json_t *conc = json_object_get(controls, "concurrentExecLimit");
	json_t *rate = json_object_get(controls, "rateLimitPerFrequency");
	if (sem)
		snprintf(out, size, "semaphore %.200s", sem);
	else if (conc)
		snprintf(out, size, "concurrentExecLimit %lld",
			 (long long)json_integer_value(conc));
	else if (rate)
		snprintf(out, size, "rateLimitPerFrequency %lld",
			 (long long)json_integer_value(rate));
	else
		snprintf(out, size, "flow control");
}

static void
self_run_flow_control(const struct wf_task_list *l, const json_t *controls,
		      struct dsl_errors *errs)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct wf_task *t = &l->items[i];
		const json_t *c =
			self_run(t) ? json_object_get(controls, t->name) : NULL;
		if (c) {
			char what[256];
			dsl_flow_control_describe(c, what, sizeof(what));
			fail_at_fmt(errs, t->path, "name",
				    "names task definition %.200s, which has "
				    "%s, but a task of type %.60s is run by "
				    "the server and never held back by flow "
				    "control: a semaphore, concurrentExecLimit "
				    "and rate limit apply to worker (SIMPLE) "
				    "tasks only",
				    t->name, what,
				    t->type ? t->type : "system");
		}
		for (size_t b = 0; b < t->n_branches; b++)
			self_run_flow_control(&t->branches[b], controls, errs);
	}
}

void
dsl_error_self_run_flow_control(const struct wf_def *def,
				const json_t *controls, struct dsl_errors *errs)
{
	self_run_flow_control(&def->tasks, controls, errs);
}

static const struct wf_task *
find_self_run(const struct wf_task_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct wf_task *t = &l->items[i];
		if (self_run(t) && strcmp(t->name, name) == 0)
			return t;
		for (size_t b = 0; b < t->n_branches; b++) {
			const struct wf_task *f =
				find_self_run(&t->branches[b], name);
			if (f)
				return f;
		}
	}
	return NULL;
}

const struct wf_task *
dsl_find_self_run(const struct wf_def *def, const char *name)
{
	return find_self_run(&def->tasks, name);
}
