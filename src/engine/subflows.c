#include "engine/subflows.h"

#include "engine/decide_loop.h"
#include "engine/defcache.h"
#include "engine/dsl.h"
#include "engine/expr.h"
#include "engine/operators.h"
#include "runtime/log.h"
#include "store/actions_repo.h"
#include "store/db.h"
#include "store/decide_repo.h"
#include "store/payload_repo.h"
#include "store/subflows_repo.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum { MAX_CASCADE_DEPTH = 32 };

/* ------------------------------------------------------------ durations */

struct unit {
	const char *name;
	int64_t seconds;
};

static const struct unit units[] = {
	{"days", 86400}, {"day", 86400}, {"d", 86400},  {"hours", 3600},
	{"hour", 3600},  {"hrs", 3600},  {"hr", 3600},  {"h", 3600},
	{"minutes", 60}, {"minute", 60}, {"mins", 60},  {"min", 60},
	{"m", 60},       {"seconds", 1}, {"second", 1}, {"secs", 1},
	{"sec", 1},      {"s", 1},
};

bool
subflows_parse_duration(const char *s, int64_t *seconds)
{
	int64_t total = 0;
	bool any = false;
	const char *p = s;
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		if (!isdigit((unsigned char)*p))
			return false;
		int64_t n = 0;
		while (isdigit((unsigned char)*p)) {
			n = n * 10 + (*p++ - '0');
			if (n > 100000000)
				return false;
		}
		while (isspace((unsigned char)*p))
			p++;
		size_t len = 0;
		while (isalpha((unsigned char)p[len]))
			len++;
		const struct unit *u = NULL;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strlen(units[i].name) == len &&
			    strncasecmp(units[i].name, p, len) == 0)
				u = &units[i];
		if (!u)
			return false;
		p += len;
		total += n * u->seconds;
		any = true;
		if (*p == ',')
			p++;
	}
	if (!any || total > (int64_t)100 * 365 * 86400)
		return false;
	*seconds = total;
	return true;
}

/* Offsets of zone abbreviations Java's "z" accepts, in minutes. */
static const struct {
	const char *name;
	int minutes;
} zones[] = {
	{"Z", 0},       {"UTC", 0},     {"GMT", 0},    {"UT", 0},
	{"WET", 0},     {"BST", 60},    {"CET", 60},   {"CEST", 120},
	{"EET", 120},   {"EEST", 180},  {"MSK", 180},  {"IST", 330},
	{"SGT", 480},   {"HKT", 480},   {"JST", 540},  {"KST", 540},
	{"AEST", 600},  {"AEDT", 660},  {"NZST", 720}, {"NZDT", 780},
	{"EST", -300},  {"EDT", -240},  {"CST", -360}, {"CDT", -300},
	{"MST", -420},  {"MDT", -360},  {"PST", -480}, {"PDT", -420},
	{"AKST", -540}, {"AKDT", -480}, {"HST", -600},
};

/* "+05:30", "-0800", "+5": minutes east of UTC. */
static bool
parse_offset(const char *s, int *minutes)
{
	if (*s != '+' && *s != '-')
		return false;
	int sign = *s == '-' ? -1 : 1;
	s++;
	int h = 0, m = 0, digits = 0;
	while (isdigit((unsigned char)*s) && digits < 2) {
		h = h * 10 + (*s++ - '0');
		digits++;
	}
	if (!digits)
		return false;
	if (*s == ':')
		s++;
	if (*s) {
		if (!isdigit((unsigned char)s[0]) ||
		    !isdigit((unsigned char)s[1]) || s[2])
			return false;
		m = (s[0] - '0') * 10 + (s[1] - '0');
	}
	if (h > 18 || m > 59)
		return false;
	*minutes = sign * (h * 60 + m);
	return true;
}

static bool
parse_zone(const char *z, int *minutes)
{
	if (parse_offset(z, minutes))
		return true;
	for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
		size_t n = strlen(zones[i].name);
		if (strncasecmp(z, zones[i].name, n) != 0)
			continue;
		if (!z[n]) {
			*minutes = zones[i].minutes;
			return true;
		}
		/* GMT+05:30, UTC-3 */
		if (zones[i].minutes == 0 && parse_offset(z + n, minutes))
			return true;
	}
	return false;
}

bool
subflows_parse_until(const char *s, int64_t *epoch_seconds)
{
	int y, mo, d, h = 0, mi = 0, sec = 0, n = 0;
	if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3)
		return false;
	const char *p = s + n;
	if (*p == ' ' || *p == 'T') {
		int k = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &h, &mi, &k) == 2) {
			p += 1 + k;
			if (*p == ':' && sscanf(p + 1, "%2d%n", &sec, &k) == 1)
				p += 1 + k;
		}
	}
	while (*p == ' ')
		p++;
	int offset = 0;
	if (*p) {
		char zone[32];
		size_t len = strlen(p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len == 0 || len >= sizeof(zone))
			return false;
		memcpy(zone, p, len);
		zone[len] = '\0';
		if (!parse_zone(zone, &offset))
			return false;
	}
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    sec > 60 || y < 1970 || y > 9999)
		return false;
	struct tm tm = {.tm_year = y - 1900,
			.tm_mon = mo - 1,
			.tm_mday = d,
			.tm_hour = h,
			.tm_min = mi,
			.tm_sec = sec};
	time_t t = timegm(&tm);
	/* timegm normalises 31 February; refuse it instead. */
	struct tm back;
	gmtime_r(&t, &back);
	if (back.tm_mday != d || back.tm_mon != mo - 1)
		return false;
	*epoch_seconds = (int64_t)t - (int64_t)offset * 60;
	return true;
}

/* ------------------------------------------------------------ validation */

static char *
at(const char *base, const char *key)
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

/* Whether v is a string holding an expression (checked at run time). */
static bool
is_expression(const json_t *v)
{
	return json_is_string(v) && strstr(json_string_value(v), "${");
}

/* A version: a whole number ≥ 1, or an expression. */
static void
check_version(const json_t *obj, const char *base, struct dsl_errors *errs)
{
	const json_t *v = member(obj, "version");
	if (!v || is_expression(v))
		return;
	double x = json_is_integer(v) ? (double)json_integer_value(v)
		   : json_is_real(v)  ? json_real_value(v)
				      : -1;
	if (x < 1 || x != (double)(int64_t)x || x > 1000000) {
		char *path = at(base, "version");
		dsl_errors_add(errs, path, "must be a whole number from 1");
		free(path);
	}
}

static void
check_name(const json_t *obj, const char *base, bool required,
	   struct dsl_errors *errs)
{
	const json_t *v = member(obj, "name");
	char *path = at(base, "name");
	if (!v) {
		if (required)
			dsl_errors_add(errs, path, "is required");
	} else if (!json_is_string(v)) {
		dsl_errors_add(errs, path, "must be a string");
	} else if (json_string_length(v) == 0) {
		dsl_errors_add(errs, path, "must not be empty");
	}
	free(path);
}

/* Problems of a nested definition, re-rooted at base. */
static void
check_inline_definition(const json_t *doc, const char *base,
			struct dsl_errors *errs)
{
	struct wf_def *def = NULL;
	struct dsl_errors inner = {0};
	if (!dsl_workflow_parse(doc, &def, &inner)) {
		for (size_t i = 0; i < inner.n; i++) {
			const char *p = inner.items[i].path;
			struct strbuf sb = STRBUF_INIT;
			sb_printf(&sb, "%s%s", base, p[0] == '$' ? p + 1 : p);
			dsl_errors_add(errs, sb_str(&sb), "%s",
				       inner.items[i].message);
			sb_free(&sb);
		}
	}
	dsl_errors_free(&inner);
	wf_def_free(def);
}

static void
validate_sub_workflow(const json_t *task, const char *path,
		      struct dsl_errors *errs)
{
	char *base = at(path, "subWorkflowParam");
	const json_t *p = member(task, "subWorkflowParam");
	if (!p) {
		dsl_errors_add(errs, base, "is required");
	} else if (!json_is_object(p)) {
		dsl_errors_add(errs, base, "must be an object");
	} else {
		const json_t *inl = member(p, "workflowDefinition");
		char *dpath = at(base, "workflowDefinition");
		if (inl && json_is_object(inl))
			check_inline_definition(inl, dpath, errs);
		else if (inl && !is_expression(inl))
			dsl_errors_add(errs, dpath,
				       "must be a workflow definition (an "
				       "object) or an expression");
		free(dpath);
		check_name(p, base, !(inl && json_is_object(inl)), errs);
		check_version(p, base, errs);
		const json_t *ttd = member(p, "taskToDomain");
		if (ttd && !json_is_object(ttd)) {
			char *tpath = at(base, "taskToDomain");
			dsl_errors_add(errs, tpath, "must be an object");
			free(tpath);
		}
	}
	free(base);
}

static void
validate_start_workflow(const json_t *task, const char *path,
			struct dsl_errors *errs)
{
	char *ip = at(path, "inputParameters");
	char *base = at(ip, "startWorkflow");
	const json_t *sw =
		member(member(task, "inputParameters"), "startWorkflow");
	if (!sw) {
		dsl_errors_add(errs, base, "is required");
	} else if (is_expression(sw)) {
		/* resolved at run time */
	} else if (!json_is_object(sw)) {
		dsl_errors_add(errs, base, "must be an object");
	} else {
		check_name(sw, base, true, errs);
		check_version(sw, base, errs);
		const json_t *in = member(sw, "input");
		if (in && !json_is_object(in) && !is_expression(in)) {
			char *p = at(base, "input");
			dsl_errors_add(errs, p, "must be an object");
			free(p);
		}
		const json_t *c = member(sw, "correlationId");
		if (c && !json_is_string(c)) {
			char *p = at(base, "correlationId");
			dsl_errors_add(errs, p, "must be a string");
			free(p);
		}
	}
	free(base);
	free(ip);
}

static void
validate_wait(const json_t *task, const char *path, struct dsl_errors *errs)
{
	const json_t *in = member(task, "inputParameters");
	const json_t *dur = member(in, "duration");
	const json_t *until = member(in, "until");
	char *ip = at(path, "inputParameters");
	if (dur && until) {
		char *p = at(ip, "until");
		dsl_errors_add(errs, p,
			       "a WAIT task takes duration or until, not both");
		free(p);
	}
	int64_t x;
	if (dur && !is_expression(dur) &&
	    (!json_is_string(dur) ||
	     !subflows_parse_duration(json_string_value(dur), &x))) {
		char *p = at(ip, "duration");
		dsl_errors_add(
			errs, p,
			"is not a duration (\"30s\", \"2m\", \"1h 30m\", "
			"\"2 days 3 hours\")");
		free(p);
	}
	if (until && !is_expression(until) &&
	    (!json_is_string(until) ||
	     !subflows_parse_until(json_string_value(until), &x))) {
		char *p = at(ip, "until");
		dsl_errors_add(errs, p,
			       "is not a time (\"2026-12-01 10:00\", "
			       "\"2026-12-01 10:00 CET\", \"2026-12-01\")");
		free(p);
	}
	free(ip);
}

static void
validate_event(const json_t *task, const char *path, struct dsl_errors *errs)
{
	const json_t *sink = member(task, "sink");
	char *p = at(path, "sink");
	if (!sink)
		dsl_errors_add(errs, p,
			       "is required (\"provider:destination\")");
	else if (!json_is_string(sink))
		dsl_errors_add(errs, p, "must be a string");
	else if (json_string_length(sink) == 0)
		dsl_errors_add(errs, p, "must not be empty");
	free(p);
}

/* ------------------------------------------------------------ scheduling */

json_t *
subflows_expr_fields(const json_t *task)
{
	const char *type = json_string_value(member(task, "type"));
	if (!type ||
	    (strcmp(type, "SUB_WORKFLOW") != 0 && strcmp(type, "EVENT") != 0))
		return NULL;
	json_t *t = json_object();
	const json_t *p = member(task, "subWorkflowParam");
	if (json_is_object(p)) {
		json_t *sp = json_object();
		static const char *const keys[] = {"name", "version",
						   "priority", NULL};
		for (int i = 0; keys[i]; i++)
			if (member(p, keys[i]))
				json_object_set(sp, keys[i],
						json_object_get(p, keys[i]));
		const json_t *wd = member(p, "workflowDefinition");
		if (json_is_string(wd))
			json_object_set(sp, "workflowDefinition", (json_t *)wd);
		json_object_set_new(t, "subWorkflowParam", sp);
	}
	if (json_is_string(member(task, "sink")))
		json_object_set(t, "sink", json_object_get(task, "sink"));
	if (json_object_size(t) == 0) {
		json_decref(t);
		return NULL;
	}
	return t;
}

static void fail_row(json_t *row, const char *status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
fail_row(json_t *row, const char *status, const char *fmt, ...)
{
	char reason[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	json_object_set_new(row, "status", json_string(status));
	json_object_set_new(row, "reason", json_string(reason));
	json_object_set_new(row, "output", json_object());
}

/* A version given as a number or a numeric string; 0 when absent (the
 * latest), -1 when it is neither. */
static int
version_of(const json_t *v)
{
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 1 &&
	    json_integer_value(v) <= 1000000)
		return (int)json_integer_value(v);
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d >= 1 && d <= 1000000 && d == (double)(int)d)
			return (int)d;
	}
	if (json_is_string(v)) {
		char *end;
		long n = strtol(json_string_value(v), &end, 10);
		if (*json_string_value(v) && !*end && n >= 1 && n <= 1000000)
			return (int)n;
	}
	return -1;
}

static json_t *
start_entry(const char *id, const char *name, int version,
	    const json_t *definition, const json_t *input,
	    const char *correlation_id, int priority, bool parent)
{
	json_t *s = json_pack("{s:s,s:s,s:i,s:b,s:i}", "id", id, "name", name,
			      "version", version, "parent", parent, "priority",
			      priority);
	json_object_set_new(s, "input",
			    json_is_object(input) ? json_deep_copy(input)
						  : json_object());
	json_object_set_new(s, "workflowDefinition",
			    definition ? json_deep_copy(definition)
				       : json_null());
	json_object_set_new(s, "correlationId",
			    correlation_id ? json_string(correlation_id)
					   : json_null());
	return s;
}

static void
schedule_sub_workflow(const struct wf_task *wt,
		      const struct loaded_execution *x, const json_t *ctx,
		      json_t *row)
{
	struct err e = ERR_INIT;
	char where[512];
	snprintf(where, sizeof(where), "%s.subWorkflowParam", wt->path);
	json_t *fields = subflows_expr_fields(wt->raw);
	json_t *resolved =
		fields ? expr_resolve(fields, ctx, wt->path, &e) : NULL;
	json_decref(fields);
	json_t *p = json_incref(json_object_get(resolved, "subWorkflowParam"));
	json_decref(resolved);
	if (!json_is_object(p)) {
		fail_row(row, "FAILED", "could not compute %s: %s", where,
			 p ? "not an object" : e.msg);
		json_decref(p);
		return;
	}
	const json_t *raw = json_object_get(wt->raw, "subWorkflowParam");
	const json_t *inl = member(p, "workflowDefinition");
	if (!inl)
		inl = member(raw, "workflowDefinition");
	if (inl && !json_is_object(inl)) {
		fail_row(row, "FAILED",
			 "%s.workflowDefinition is not a workflow definition",
			 where);
		json_decref(p);
		return;
	}
	const json_t *name = member(p, "name");
	if (!json_is_string(name) && inl)
		name = member(inl, "name");
	int version = version_of(member(p, "version"));
	if (!json_is_string(name) || version < 0) {
		fail_row(row, "FAILED", "%s: %s", where,
			 version < 0 ? "version is not a whole number"
				     : "name is not a string");
		json_decref(p);
		return;
	}
	int priority = x->priority;
	int pv = version_of(member(p, "priority"));
	if (pv > 0 && pv <= 99)
		priority = pv;
	char id[37];
	uuid_v7(id);
	json_object_set_new(row, "start",
			    start_entry(id, json_string_value(name), version,
					inl, json_object_get(row, "input"),
					x->correlation_id, priority, true));
	json_object_set_new(row, "status", json_string("IN_PROGRESS"));
	json_object_set_new(row, "output",
			    json_pack("{s:s}", "subWorkflowId", id));
	json_decref(p);
}

static void
schedule_start_workflow(const struct loaded_execution *x, json_t *row)
{
	const json_t *sw =
		member(json_object_get(row, "input"), "startWorkflow");
	const json_t *name = member(sw, "name");
	const json_t *in = member(sw, "input");
	const json_t *corr = member(sw, "correlationId");
	int version = version_of(member(sw, "version"));
	if (!json_is_object(sw) || !json_is_string(name) || version < 0 ||
	    (in && !json_is_object(in)) || json_is_object(corr) ||
	    json_is_array(corr)) {
		fail_row(row, "FAILED_WITH_TERMINAL_ERROR",
			 "input startWorkflow must be an object with a name "
			 "(string), and optionally version (number), input "
			 "(object) and correlationId (text)");
		return;
	}
	/* A number or boolean correlation id is taken as its text. */
	char *corr_text = !corr ? NULL
			  : json_is_string(corr)
				  ? xstrdup(json_string_value(corr))
				  : json_dumps(corr, JSON_ENCODE_ANY);
	char id[37];
	uuid_v7(id);
	json_object_set_new(row, "start",
			    start_entry(id, json_string_value(name), version,
					NULL, in, corr_text, x->priority,
					false));
	free(corr_text);
	json_object_set_new(row, "status", json_string("IN_PROGRESS"));
	json_object_set_new(row, "output", json_object());
}

static void
schedule_wait(json_t *row)
{
	const json_t *in = json_object_get(row, "input");
	const json_t *dur = member(in, "duration");
	const json_t *until = member(in, "until");
	int64_t x;
	json_object_set_new(row, "status", json_string("IN_PROGRESS"));
	json_object_set_new(row, "output", json_object());
	if (dur && until) {
		fail_row(row, "FAILED_WITH_TERMINAL_ERROR",
			 "a WAIT task takes duration or until, not both");
	} else if (dur) {
		if (json_is_string(dur) &&
		    subflows_parse_duration(json_string_value(dur), &x))
			json_object_set_new(
				row, "wait",
				json_pack("{s:I}", "seconds", (json_int_t)x));
		else
			fail_row(row, "FAILED_WITH_TERMINAL_ERROR",
				 "duration %.100s is not a duration",
				 json_is_string(dur) ? json_string_value(dur)
						     : "(not a string)");
	} else if (until) {
		if (json_is_string(until) &&
		    subflows_parse_until(json_string_value(until), &x)) {
			char iso[64];
			time_t t = (time_t)x;
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
			json_object_set_new(row, "wait",
					    json_pack("{s:s}", "fireAt", iso));
		} else {
			fail_row(row, "FAILED_WITH_TERMINAL_ERROR",
				 "until %.100s is not a time",
				 json_is_string(until)
					 ? json_string_value(until)
					 : "(not a string)");
		}
	}
	/* Neither: waits for a signal through the API. */
}

static void
schedule_event(const struct wf_task *wt, const struct loaded_execution *x,
	       const json_t *ctx, json_t *row)
{
	struct err e = ERR_INIT;
	char where[512];
	snprintf(where, sizeof(where), "%s.sink", wt->path);
	const json_t *raw_sink = json_object_get(wt->raw, "sink");
	json_t *sink = raw_sink ? expr_resolve(raw_sink, ctx, where, &e) : NULL;
	if (!json_is_string(sink) || json_string_length(sink) == 0) {
		fail_row(row, "FAILED_WITH_TERMINAL_ERROR",
			 "%s is not a sink name: %s", where,
			 sink ? "not a non-empty string" : e.msg);
		json_decref(sink);
		return;
	}
	json_t *payload = json_deep_copy(json_object_get(row, "input"));
	if (!json_is_object(payload)) {
		json_decref(payload);
		payload = json_object();
	}
	json_object_set_new(payload, "workflowInstanceId", json_string(x->id));
	json_object_set_new(payload, "workflowType", json_string(x->def_name));
	json_object_set_new(payload, "workflowVersion",
			    json_integer(x->def_version));
	json_object_set_new(payload, "correlationId",
			    x->correlation_id ? json_string(x->correlation_id)
					      : json_null());
	/* The outbox row keeps its payload inline (no payload store entry is
	 * referenced from it, and the relay reads it on every attempt), so an
	 * event is held to the offload threshold: above it the task fails for
	 * good, as an input above the maximum does. */
	size_t size = json_dumpb(payload, NULL, 0, JSON_COMPACT);
	long limit = payload_offload_bytes();
	if ((long)size > limit) {
		fail_row(row, "FAILED_WITH_TERMINAL_ERROR",
			 "event payload of %zu bytes exceeds the payload "
			 "offload threshold of %ld bytes: an event is kept "
			 "in its outbox row and delivered whole",
			 size, limit);
		json_decref(payload);
		json_decref(sink);
		return;
	}
	json_t *output = json_deep_copy(payload);
	/* "conductor" alone names the workflow's own event queue. */
	const char *s = json_string_value(sink);
	struct strbuf produced = STRBUF_INIT;
	if (strcmp(s, "conductor") == 0)
		sb_printf(&produced, "conductor:%s:%s", x->def_name, wt->ref);
	else
		sb_puts(&produced, s);
	json_object_set_new(output, "event_produced",
			    json_string(sb_str(&produced)));
	json_object_set_new(row, "outbox",
			    json_pack("{s:s,s:o}", "sink", sb_str(&produced),
				      "payload", payload));
	sb_free(&produced);
	/* asyncComplete: published, then open until the API completes it. */
	json_object_set_new(
		row, "status",
		json_string(wt->async_complete ? "IN_PROGRESS" : "COMPLETED"));
	json_object_set_new(row, "output", output);
	json_decref(sink);
}

static void
schedule(const struct wf_task *wt, const struct loaded_execution *x,
	 const json_t *ctx, json_t *row)
{
	const char *type = wt->kind->type;
	if (strcmp(type, "SUB_WORKFLOW") == 0)
		schedule_sub_workflow(wt, x, ctx, row);
	else if (strcmp(type, "START_WORKFLOW") == 0)
		schedule_start_workflow(x, row);
	else if (strcmp(type, "WAIT") == 0)
		schedule_wait(row);
	else if (strcmp(type, "EVENT") == 0)
		schedule_event(wt, x, ctx, row);
	else { /* HUMAN: a gate until the API completes it */
		json_object_set_new(row, "status", json_string("IN_PROGRESS"));
		json_object_set_new(row, "output", json_object());
	}
}

void
subflows_kind_start(struct eval *ev, const struct wf_task *wt,
		    struct op_run *run)
{
	static const char *const statuses[] = {
		"IN_PROGRESS", "COMPLETED", "FAILED",
		"FAILED_WITH_TERMINAL_ERROR", NULL};
	json_t *row = json_pack("{s:O}", "input", run->input);
	schedule(wt, decider_execution(ev), decider_context(ev), row);
	const char *st = json_string_value(json_object_get(row, "status"));
	run->status = statuses[0];
	for (int i = 0; st && statuses[i]; i++)
		if (strcmp(st, statuses[i]) == 0)
			run->status = statuses[i];
	run->output = json_incref(json_object_get(row, "output"));
	const char *reason = json_string_value(json_object_get(row, "reason"));
	if (reason)
		snprintf(run->reason, sizeof(run->reason), "%s", reason);
	static const char *const extras[] = {"start", "wait", "outbox", NULL};
	for (int i = 0; extras[i]; i++) {
		json_t *v = json_object_get(row, extras[i]);
		if (!v)
			continue;
		if (!run->extra)
			run->extra = json_object();
		json_object_set(run->extra, extras[i], v);
	}
	json_decref(row);
}

/* ------------------------------------------------------------ applying */

/* Fills the keys of input that are absent or null from the template. */
static void
fill_template(json_t *input, const json_t *tmpl)
{
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)tmpl, key, v) {
		json_t *have = json_object_get(input, key);
		if (!have || json_is_null(have))
			json_object_set(input, key, v);
	}
}

/* The store's row for starting def (a new reference). */
static json_t *
start_row(const char *id, const struct wf_def *def, const json_t *snapshot,
	  const json_t *input, const char *correlation_id, int priority,
	  const char *parent_id, const char *parent_task_id,
	  const char *guard_task_id)
{
	json_t *in =
		json_is_object(input) ? json_deep_copy(input) : json_object();
	fill_template(in, def->input_template);
	json_t *r = json_pack(
		"{s:s,s:s,s:i,s:o,s:O,s:i,s:I,s:s}", "id", id, "defName",
		def->name, "defVersion", def->version, "input", in, "variables",
		def->variables, "priority", priority, "timeoutSeconds",
		(json_int_t)def->timeout_seconds, "timeoutPolicy",
		def->timeout_policy == TIMEOUT_ALERT_ONLY ? "ALERT_ONLY"
							  : "TIME_OUT_WF");
	json_object_set_new(r, "definition",
			    snapshot ? json_incref((json_t *)snapshot)
				     : json_null());
	json_object_set_new(r, "correlationId",
			    correlation_id ? json_string(correlation_id)
					   : json_null());
	json_object_set_new(r, "parentWorkflowId",
			    parent_id ? json_string(parent_id) : json_null());
	json_object_set_new(r, "parentTaskId",
			    parent_task_id ? json_string(parent_task_id)
					   : json_null());
	json_object_set_new(r, "guardTaskId",
			    guard_task_id ? json_string(guard_task_id)
					  : json_null());
	return r;
}

/* A start row's input to the payload store when it is large ("inputRef"
 * set to its reference); false with ERR_TOO_LARGE above the maximum. */
static bool
offload_input(struct db *db, const char *ns_id, json_t *row, struct err *e)
{
	json_t *in = json_incref(json_object_get(row, "input"));
	char ref[48];
	bool ok =
		payload_offload_json(db, ns_id, "workflow input", &in, ref, e);
	if (ok && ref[0]) {
		json_object_set(row, "input", in);
		json_object_set_new(row, "inputRef", json_string(ref));
	}
	json_decref(in);
	return ok;
}

static void
finish(json_t *finish_rows, const char *task_id, const char *status,
       json_t *output, const char *reason)
{
	json_t *r = json_pack("{s:s,s:s}", "taskId", task_id, "status", status);
	json_object_set_new(r, "output", output ? output : json_null());
	json_object_set_new(r, "reason",
			    reason ? json_string(reason) : json_null());
	json_array_append_new(finish_rows, r);
}

/* Resolves one start; a definition that cannot be had fails its task.
 * False only for a database error. */
static bool
resolve_start(struct db *db, const struct loaded_execution *x,
	      const json_t *row, const json_t *s, json_t *starts,
	      json_t *finish_rows, struct err *e)
{
	const char *task_id = json_string_value(json_object_get(row, "id"));
	const char *name = json_string_value(json_object_get(s, "name"));
	int version = (int)json_integer_value(json_object_get(s, "version"));
	const json_t *inl = member(s, "workflowDefinition");
	bool parent = json_is_true(json_object_get(s, "parent"));
	struct def_ref ref = {0};
	struct wf_def *own = NULL;
	const struct wf_def *def = NULL;
	char reason[512] = "";
	if (inl) {
		struct dsl_errors errs = {0};
		if (dsl_workflow_parse(inl, &own, &errs))
			def = own;
		else
			snprintf(reason, sizeof(reason),
				 "invalid workflowDefinition: %s %s",
				 errs.n ? errs.items[0].path : "",
				 errs.n ? errs.items[0].message : "");
		dsl_errors_free(&errs);
	} else {
		struct err de = ERR_INIT;
		if (defcache_workflow(db, x->ns_id, name, version, &ref, &de))
			def = ref.wf;
		else if (de.code != ERR_NOT_FOUND) {
			*e = de;
			return false;
		} else if (version)
			snprintf(reason, sizeof(reason),
				 "workflow definition %.200s version %d not "
				 "found",
				 name, version);
		else
			snprintf(reason, sizeof(reason),
				 "workflow definition %.200s not found", name);
	}
	if (!def) {
		finish(finish_rows, task_id, "FAILED", NULL, reason);
		return true;
	}
	const char *id = json_string_value(json_object_get(s, "id"));
	json_t *start = start_row(
		id, def, inl, json_object_get(s, "input"),
		json_string_value(json_object_get(s, "correlationId")),
		(int)json_integer_value(json_object_get(s, "priority")),
		parent ? x->id : NULL, parent ? task_id : NULL, task_id);
	defcache_release(&ref);
	wf_def_free(own);
	/* An input above the payload maximum fails the task for good: the
	 * same input would be refused on every retry. */
	struct err pe = ERR_INIT;
	if (!offload_input(db, x->ns_id, start, &pe)) {
		json_decref(start);
		if (pe.code != ERR_TOO_LARGE) {
			*e = pe;
			return false;
		}
		finish(finish_rows, task_id, "FAILED_WITH_TERMINAL_ERROR", NULL,
		       pe.msg);
		return true;
	}
	json_array_append_new(starts, start);
	if (!parent)
		finish(finish_rows, task_id, "COMPLETED",
		       json_pack("{s:s}", "workflowId", id), NULL);
	return true;
}

static bool
write_rows(struct db *db, json_t *rows,
	   bool (*fn)(struct db *, const char *, const char *, const char *,
		      struct err *),
	   const char *a, const char *b, struct err *e)
{
	if (!json_array_size(rows))
		return true;
	char *text = json_db_text(rows);
	bool ok = fn(db, a, b, text, e);
	free(text);
	return ok;
}

static bool
start_all(struct db *db, const char *ns_id, const char *guard, const char *text,
	  struct err *e)
{
	int n;
	return subflows_start_executions(db, ns_id, guard, text, &n, e);
}

static bool
finish_all(struct db *db, const char *workflow_id, const char *unused,
	   const char *text, struct err *e)
{
	(void)unused;
	return subflows_finish_tasks(db, workflow_id, text, e);
}

bool
subflows_apply(struct db *db, const struct loaded_execution *x,
	       const json_t *tasks, struct err *e)
{
	json_t *starts = json_array(), *finished = json_array();
	json_t *waits = json_array(), *outbox = json_array();
	bool ok = true;
	size_t i;
	json_t *row;
	json_array_foreach ((json_t *)tasks, i, row) {
		json_t *id = json_object_get(row, "id");
		const json_t *s = json_object_get(row, "start");
		if (s && ok)
			ok = resolve_start(db, x, row, s, starts, finished, e);
		json_t *w = json_object_get(row, "wait");
		if (w) {
			json_t *c = json_copy(w);
			json_object_set(c, "taskId", id);
			json_array_append_new(waits, c);
		}
		json_t *o = json_object_get(row, "outbox");
		if (o) {
			json_t *c = json_copy(o);
			json_object_set(c, "taskId", id);
			json_array_append_new(outbox, c);
		}
	}
	ok = ok && write_rows(db, starts, start_all, x->ns_id, x->id, e) &&
	     write_rows(db, finished, finish_all, x->id, NULL, e) &&
	     write_rows(db, waits, subflows_arm_waits, x->id, x->ns_id, e) &&
	     write_rows(db, outbox, subflows_outbox, x->id, x->ns_id, e);
	json_decref(starts);
	json_decref(finished);
	json_decref(waits);
	json_decref(outbox);
	return ok;
}

/* ------------------------------------------------------------ endings */

/* The failure workflow's input, as Conductor shapes it: the failed
 * workflow's input with workflowId, reason, failureStatus, failureTaskId
 * and failedWorkflow on top.  With omitted (why), the failed workflow's
 * input is left out of both places and "inputOmitted" says why. */
static json_t *
failure_input(const char *id, const struct subflows_ended *x,
	      const char *omitted)
{
	json_t *orig =
		x->input && !omitted ? json_loads(x->input, 0, NULL) : NULL;
	json_t *in =
		json_is_object(orig) ? json_deep_copy(orig) : json_object();
	json_object_set_new(in, "workflowId", json_string(id));
	json_object_set_new(in, "reason",
			    x->reason ? json_string(x->reason) : json_null());
	json_object_set_new(in, "failureStatus", json_string(x->status));
	if (x->failed_task_id)
		json_object_set_new(in, "failureTaskId",
				    json_string(x->failed_task_id));
	json_t *fw = json_pack("{s:s,s:s,s:i,s:s}", "workflowId", id,
			       "workflowType", x->def_name, "version",
			       x->def_version, "status", x->status);
	if (!omitted)
		json_object_set_new(fw, "input",
				    orig ? json_incref(orig) : json_object());
	json_object_set_new(fw, "reasonForIncompletion",
			    x->reason ? json_string(x->reason) : json_null());
	json_object_set_new(fw, "correlationId",
			    x->correlation_id ? json_string(x->correlation_id)
					      : json_null());
	json_object_set_new(fw, "failedReferenceTaskName",
			    x->failed_ref ? json_string(x->failed_ref)
					  : json_null());
	json_object_set_new(in, "failedWorkflow", fw);
	if (omitted)
		json_object_set_new(in, "inputOmitted", json_string(omitted));
	json_decref(orig);
	return in;
}

/*
 * The row that starts failure workflow fid, its input offloaded when it is
 * large.  The input holds the failed workflow's input twice, so it can be
 * above the payload maximum when that one was not: the failure workflow
 * then starts without it (it can read it by workflowId) rather than not at
 * all.  NULL with e set when it cannot be started.
 */
static json_t *
failure_start(struct db *db, const char *id, const struct subflows_ended *x,
	      const struct wf_def *fdef, const char *fid, struct err *e)
{
	char why[sizeof(e->msg)] = "";
	for (int pass = 0; pass < 2; pass++) {
		json_t *input = failure_input(id, x, pass ? why : NULL);
		json_t *row =
			start_row(fid, fdef, NULL, input, x->correlation_id,
				  x->priority, NULL, NULL, NULL);
		json_decref(input);
		struct err pe = ERR_INIT;
		if (offload_input(db, x->ns_id, row, &pe))
			return row;
		json_decref(row);
		if (pe.code != ERR_TOO_LARGE || pass) {
			*e = pe;
			return NULL;
		}
		snprintf(why, sizeof(why), "%s", pe.msg);
		log_warn("subflows",
			 "workflow %s: its failure workflow %s starts without "
			 "its input: %s",
			 id, fid, why);
	}
	return NULL;
}

static bool
start_failure_workflow(struct db *db, const char *id, json_t *enqueued,
		       struct err *e)
{
	struct subflows_ended x;
	if (!subflows_ended_load(db, id, &x, e))
		return false;
	bool ok = true;
	if ((strcmp(x.status, "FAILED") != 0 &&
	     strcmp(x.status, "TIMED_OUT") != 0) ||
	    x.has_failure_workflow) {
		subflows_ended_free(&x);
		return true;
	}
	struct def_ref ref = {0}, fref = {0};
	struct wf_def *own = NULL;
	const struct wf_def *def = NULL;
	struct err de = ERR_INIT;
	if (x.definition) {
		json_t *doc = json_loads(x.definition, 0, NULL);
		struct dsl_errors errs = {0};
		if (doc && dsl_workflow_parse(doc, &own, &errs))
			def = own;
		dsl_errors_free(&errs);
		json_decref(doc);
	} else if (defcache_workflow(db, x.ns_id, x.def_name, x.def_version,
				     &ref, &de)) {
		def = ref.wf;
	}
	if (def && def->failure_workflow) {
		if (defcache_workflow(db, x.ns_id, def->failure_workflow,
				      def->failure_workflow_version, &fref,
				      &de)) {
			char fid[37];
			uuid_v7(fid);
			struct err se = ERR_INIT;
			json_t *row =
				failure_start(db, id, &x, fref.wf, fid, &se);
			if (row) {
				json_t *rows = json_array();
				json_array_append_new(rows, row);
				char *text = json_db_text(rows);
				json_decref(rows);
				int n = 0;
				ok = subflows_start_executions(
					     db, x.ns_id, NULL, text, &n, e) &&
				     subflows_set_failure_workflow(db, id, fid,
								   e);
				free(text);
				if (ok)
					json_array_append_new(enqueued,
							      json_string(fid));
			} else if (se.code != ERR_TOO_LARGE) {
				*e = se;
				ok = false;
			} else {
				log_warn("subflows",
					 "workflow %s %s: its failureWorkflow "
					 "%s could not be started: %s",
					 id, x.status, def->failure_workflow,
					 se.msg);
			}
		} else {
			log_warn("subflows",
				 "workflow %s %s: its failureWorkflow %s could "
				 "not be started: %s",
				 id, x.status, def->failure_workflow, de.msg);
		}
	}
	defcache_release(&ref);
	defcache_release(&fref);
	wf_def_free(own);
	subflows_ended_free(&x);
	return ok;
}

static bool
ended(struct db *db, const char *ns_id, const char *id, bool failure_wf,
      int depth, json_t *enqueued, struct err *e)
{
	char parent[37];
	char(*kids)[37] = NULL;
	size_t n = 0;
	if (!subflows_child_ended(db, id, parent, &kids, &n, e))
		return false;
	if (parent[0])
		json_array_append_new(enqueued, json_string(parent));
	bool ok = true;
	char reason[128];
	snprintf(reason, sizeof(reason), "parent workflow %s ended", id);
	for (size_t i = 0; ok && i < n; i++) {
		struct err te = ERR_INIT;
		if (!action_terminate(db, ns_id, kids[i], reason, &te)) {
			/* A child that ended (or went) meanwhile is left as it
			 * is.  An error of the database is no such answer,
			 * though its code may be CONFLICT too (a deadlock, a
			 * serialization failure): it aborted the transaction,
			 * and goes to the caller. */
			if (te.sqlstate[0] || (te.code != ERR_CONFLICT &&
					       te.code != ERR_NOT_FOUND)) {
				*e = te;
				ok = false;
			}
			continue;
		}
		if (depth < MAX_CASCADE_DEPTH)
			ok = ended(db, ns_id, kids[i], false, depth + 1,
				   enqueued, e);
	}
	free(kids);
	return ok &&
	       (!failure_wf || start_failure_workflow(db, id, enqueued, e));
}

bool
subflows_workflow_ended(struct db *db, const char *ns_id, const char *id,
			bool failure_workflow, json_t *enqueued, struct err *e)
{
	json_t *mine = enqueued ? json_incref(enqueued) : json_array();
	bool ok = ended(db, ns_id, id, failure_workflow, 0, mine, e);
	json_decref(mine);
	return ok;
}

/* Whether a transaction failed only because PostgreSQL chose it to break
 * a deadlock or a serialization conflict: run again, it can succeed. */
static bool
transient(const struct err *e)
{
	return strcmp(e->sqlstate, "40P01") == 0 ||
	       strcmp(e->sqlstate, "40001") == 0;
}

static bool
terminate_tx(struct db *db, const char *ns_id, const char *id,
	     const char *reason, json_t *enqueued, struct err *e)
{
	if (!db_begin(db, e))
		return false;
	bool ok = action_terminate(db, ns_id, id, reason, e) &&
		  subflows_workflow_ended(db, ns_id, id, false, enqueued, e) &&
		  db_commit(db, e);
	if (!ok)
		db_rollback(db);
	return ok;
}

/*
 * The terminate locks the parent, then each child; a decider batch may
 * hold a child (its evaluation) and then ask for the parent (another
 * evaluation of the same batch).  PostgreSQL breaks that deadlock by
 * aborting one of the two; when it is the terminate, it runs again, so it
 * answers only once the whole tree has ended (or with a real error).
 */
enum { TERMINATE_ATTEMPTS = 5 };

bool
subflows_terminate(struct db *db, const char *ns_id, const char *id,
		   const char *reason, struct err *e)
{
	json_t *enqueued = json_array();
	bool ok = false;
	for (int attempt = 1; attempt <= TERMINATE_ATTEMPTS; attempt++) {
		json_array_clear(enqueued);
		struct err te = ERR_INIT;
		ok = terminate_tx(db, ns_id, id, reason, enqueued, &te);
		if (ok)
			break;
		*e = te;
		if (!transient(&te))
			break;
		log_info("subflows",
			 "terminate of workflow %s: %s (attempt %d of %d)", id,
			 te.msg, attempt, TERMINATE_ATTEMPTS);
	}
	if (ok && json_array_size(enqueued))
		decide_loop_wake();
	json_decref(enqueued);
	return ok;
}

static bool
retry_tx(struct db *db, const char *ns_id, const char *id, int depth,
	 struct err *e)
{
	char sub[37], child_status[16];
	bool found;
	if (!subflows_failed_task(db, ns_id, id, sub, child_status, &found, e))
		return false;
	if (sub[0] && depth < MAX_CASCADE_DEPTH &&
	    strcmp(child_status, "RUNNING") != 0 &&
	    strcmp(child_status, "PAUSED") != 0 &&
	    strcmp(child_status, "COMPLETED") != 0) {
		struct err ce = ERR_INIT;
		if (!retry_tx(db, ns_id, sub, depth + 1, &ce)) {
			/* A database error (even a deadlock) is no answer. */
			if (ce.sqlstate[0] || ce.code != ERR_CONFLICT) {
				*e = ce;
				return false;
			}
			/* Not retriable (terminated, or timed out as a
			 * whole): it runs again from the start, same id. */
			if (!action_restart(db, ns_id, sub, e))
				return false;
		}
	}
	if (!action_retry(db, ns_id, id, e))
		return false;
	/* A child that completed meanwhile completes the new attempt. */
	char parent[37];
	return !sub[0] || subflows_child_ended(db, sub, parent, NULL, NULL, e);
}

bool
subflows_retry(struct db *db, const char *ns_id, const char *id, struct err *e)
{
	if (!db_begin(db, e))
		return false;
	bool ok = retry_tx(db, ns_id, id, 0, e) && db_commit(db, e);
	if (!ok)
		db_rollback(db);
	else
		decide_loop_wake();
	return ok;
}

bool
subflows_tree(struct db *db, const char *ns_id, const char *id, int max_depth,
	      int limit, json_t **out, struct err *e)
{
	char *text;
	if (!subflows_tree_rows(db, ns_id, id, max_depth, limit, &text, e))
		return false;
	json_t *rows = json_loads(text, 0, NULL);
	free(text);
	size_t n = json_array_size(rows);
	bool truncated = n > (size_t)limit;
	if (truncated)
		n = (size_t)limit;
	/* Breadth first: a parent always comes before its children. */
	json_t *by_id = json_object();
	json_t *root = NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *node = json_array_get(rows, i);
		json_object_set_new(node, "children", json_array());
		const char *nid =
			json_string_value(json_object_get(node, "id"));
		json_object_set(by_id, nid, node);
		if (i == 0) {
			root = node;
			continue;
		}
		json_t *p = json_object_get(by_id,
					    json_string_value(json_object_get(
						    node, "parentWorkflowId")));
		if (p)
			json_array_append(json_object_get(p, "children"), node);
	}
	*out = json_pack("{s:O,s:I,s:b}", "tree", root, "size", (json_int_t)n,
			 "truncated", truncated);
	json_decref(by_id);
	json_decref(rows);
	return true;
}

/* ------------------------------------------------------------ the kinds */

void
subflows_validate_sub_workflow(struct wf_task *t, const struct wf_def *def,
			       struct dsl_errors *errs)
{
	(void)def;
	validate_sub_workflow(t->raw, t->path, errs);
}

void
subflows_validate_start_workflow(struct wf_task *t, const struct wf_def *def,
				 struct dsl_errors *errs)
{
	(void)def;
	validate_start_workflow(t->raw, t->path, errs);
}

void
subflows_validate_wait(struct wf_task *t, const struct wf_def *def,
		       struct dsl_errors *errs)
{
	(void)def;
	validate_wait(t->raw, t->path, errs);
}

void
subflows_validate_event(struct wf_task *t, const struct wf_def *def,
			struct dsl_errors *errs)
{
	(void)def;
	validate_event(t->raw, t->path, errs);
}
