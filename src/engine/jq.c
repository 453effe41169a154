/*
 * jq — see jq.h.  Values cross between jansson and jv by walking them, so
 * neither library's text parser or printer sits in the way.
 */
#include "engine/jq.h"

#include <jq.h>
#include <jv.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* `env` and `$ENV` would show the server's environment to any definition
 * author; a program is placed after these definitions, which also rule out
 * `import`/`include` (they must open a program). */
static const char PRELUDE[] = "def env: {}; {} as $ENV | ";

struct jq_entry {
	char *program;
	jq_state *jq;
	uint64_t used; /* tick of the last use */
};

struct jq_tls {
	struct jq_entry entries[JQ_CACHE_MAX];
	uint64_t tick;
};

struct compile_msgs {
	char text[400];
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static _Thread_local struct jq_tls *tls;

static void
tls_destroy(void *p)
{
	struct jq_tls *t = p;
	for (int i = 0; i < JQ_CACHE_MAX; i++) {
		if (t->entries[i].jq)
			jq_teardown(&t->entries[i].jq);
		free(t->entries[i].program);
	}
	free(t);
}

/* At exit, the exiting thread's states (the key's destructor only runs
 * for threads that end before the process does). */
static void
tls_at_exit(void)
{
	if (tls) {
		pthread_setspecific(tls_key, NULL);
		tls_destroy(tls);
		tls = NULL;
	}
}

static void
tls_key_init(void)
{
	if (pthread_key_create(&tls_key, tls_destroy) != 0)
		abort();
	atexit(tls_at_exit);
}

static void
on_error(void *data, jv msg)
{
	struct compile_msgs *m = data;
	if (m && !m->text[0]) {
		jv s = jv_get_kind(msg) == JV_KIND_STRING
			       ? jv_copy(msg)
			       : jq_format_error(jv_copy(msg));
		if (jv_get_kind(s) == JV_KIND_STRING)
			snprintf(m->text, sizeof m->text, "%s",
				 jv_string_value(s));
		jv_free(s);
	}
	jv_free(msg);
}

static void
on_debug(void *data, jv msg)
{
	(void)data;
	jv_free(msg);
}

static jv
no_input(jq_state *jq, void *data)
{
	(void)jq;
	(void)data;
	return jv_invalid();
}

/* The compiled state for program, from the cache or compiled now. */
static jq_state *
state_for(const char *program, struct err *e)
{
	if (!tls) {
		pthread_once(&tls_once, tls_key_init);
		tls = calloc(1, sizeof *tls);
		if (!tls) {
			err_set(e, ERR_INTERNAL, "out of memory");
			return NULL;
		}
		pthread_setspecific(tls_key, tls);
	}
	struct jq_tls *t = tls;
	struct jq_entry *victim = &t->entries[0];
	for (int i = 0; i < JQ_CACHE_MAX; i++) {
		struct jq_entry *en = &t->entries[i];
		if (en->program && strcmp(en->program, program) == 0) {
			en->used = ++t->tick;
			return en->jq;
		}
		if (!en->program) {
			if (victim->program)
				victim = en;
		} else if (victim->program && en->used < victim->used) {
			victim = en;
		}
	}

	size_t plen = strlen(PRELUDE), len = strlen(program);
	char *text = malloc(plen + len + 1);
	jq_state *jq = text ? jq_init() : NULL;
	if (!jq) {
		free(text);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	memcpy(text, PRELUDE, plen);
	memcpy(text + plen, program, len + 1);
	struct compile_msgs msgs = {{0}};
	jq_set_error_cb(jq, on_error, &msgs);
	jq_set_debug_cb(jq, on_debug, NULL);
	jq_set_input_cb(jq, no_input, NULL);
	int ok = jq_compile(jq, text);
	free(text);
	jq_set_error_cb(jq, on_error, NULL);
	if (!ok) {
		err_set(e, ERR_INVALID, "jq program does not compile: %s",
			msgs.text[0] ? msgs.text : "unknown error");
		jq_teardown(&jq);
		return NULL;
	}
	char *copy = strdup(program);
	if (!copy) {
		jq_teardown(&jq);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (victim->jq)
		jq_teardown(&victim->jq);
	free(victim->program);
	victim->program = copy;
	victim->jq = jq;
	victim->used = ++t->tick;
	return jq;
}

static jv
to_jv(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		jv o = jv_object();
		const char *k;
		json_t *m;
		json_object_foreach ((json_t *)v, k, m) {
			o = jv_object_set(o, jv_string(k), to_jv(m));
		}
		return o;
	}
	case JSON_ARRAY: {
		jv a = jv_array();
		size_t i;
		json_t *m;
		json_array_foreach (v, i, m) {
			a = jv_array_append(a, to_jv(m));
		}
		return a;
	}
	case JSON_STRING:
		return jv_string_sized(json_string_value(v),
				       (int)json_string_length(v));
	case JSON_INTEGER: return jv_number((double)json_integer_value(v));
	case JSON_REAL: return jv_number(json_real_value(v));
	case JSON_TRUE: return jv_true();
	case JSON_FALSE: return jv_false();
	default: return jv_null();
	}
}

/* Consumes v. */
static json_t *
from_jv(jv v)
{
	json_t *out = NULL;
	switch (jv_get_kind(v)) {
	case JV_KIND_OBJECT:
		out = json_object();
		jv_object_foreach(v, k, m)
		{
			json_object_setn_new(
				out, jv_string_value(k),
				(size_t)jv_string_length_bytes(jv_copy(k)),
				from_jv(m));
			jv_free(k);
		}
		break;
	case JV_KIND_ARRAY:
		out = json_array();
		jv_array_foreach(v, i, m)
		{
			json_array_append_new(out, from_jv(m));
		}
		break;
	case JV_KIND_STRING:
		out = json_stringn(jv_string_value(v),
				   (size_t)jv_string_length_bytes(jv_copy(v)));
		break;
	case JV_KIND_NUMBER: {
		double d = jv_number_value(v);
		if (!isfinite(d))
			out = json_null();
		else if (d == floor(d) && fabs(d) < 9007199254740992.0)
			out = json_integer((json_int_t)d);
		else
			out = json_real(d);
		break;
	}
	case JV_KIND_TRUE: out = json_true(); break;
	case JV_KIND_FALSE: out = json_false(); break;
	default: out = json_null(); break;
	}
	jv_free(v);
	return out ? out : json_null();
}

/* The message of an error value jq raised; consumes err. */
static void
set_runtime_error(jv err, struct err *e)
{
	jv msg = jv_invalid_get_msg(err);
	if (jv_get_kind(msg) == JV_KIND_STRING) {
		err_set(e, ERR_INVALID, "jq error: %s", jv_string_value(msg));
	} else {
		jv text = jv_dump_string(msg, 0);
		err_set(e, ERR_INVALID, "jq error (not a string): %s",
			jv_get_kind(text) == JV_KIND_STRING
				? jv_string_value(text)
				: "?");
		jv_free(text);
		return;
	}
	jv_free(msg);
}

/*
 * The watchdog: one thread for the process, started on first use, halting
 * the programs that ran past their deadline.  A run registers its state
 * while it calls jq_next; the watchdog halts a state only while it is
 * registered (under the lock the run unregisters with), so it never
 * touches a state that is not running.
 */
struct jq_watch {
	jq_state *jq;
	struct timespec deadline; /* CLOCK_MONOTONIC */
	bool fired;
	struct jq_watch *next;
};

static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond;
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;
static struct jq_watch *watches;

static bool
ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *
watchdog_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&watch_mu);
	for (;;) {
		struct timespec now, next = {0, 0};
		clock_gettime(CLOCK_MONOTONIC, &now);
		bool any = false;
		for (struct jq_watch *w = watches; w; w = w->next) {
			if (w->fired)
				continue;
			if (!ts_before(&now, &w->deadline)) {
				w->fired = true;
				if (!jq_halted(w->jq))
					jq_halt(w->jq, jv_number(1),
						jv_string("timed out"));
			} else if (!any || ts_before(&w->deadline, &next)) {
				next = w->deadline;
				any = true;
			}
		}
		if (any)
			pthread_cond_timedwait(&watch_cond, &watch_mu, &next);
		else
			pthread_cond_wait(&watch_cond, &watch_mu);
	}
	return NULL;
}

static void
watchdog_init(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&watch_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	if (pthread_create(&th, &attr, watchdog_main, NULL) != 0)
		abort();
	pthread_attr_destroy(&attr);
}

static void
watch_add(struct jq_watch *w, jq_state *jq, int timeout_ms)
{
	pthread_once(&watch_once, watchdog_init);
	clock_gettime(CLOCK_MONOTONIC, &w->deadline);
	w->deadline.tv_sec += timeout_ms / 1000;
	w->deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (w->deadline.tv_nsec >= 1000000000L) {
		w->deadline.tv_sec++;
		w->deadline.tv_nsec -= 1000000000L;
	}
	w->jq = jq;
	w->fired = false;
	pthread_mutex_lock(&watch_mu);
	w->next = watches;
	watches = w;
	pthread_cond_signal(&watch_cond);
	pthread_mutex_unlock(&watch_mu);
}

/* Unregisters w; whether the watchdog halted its run. */
static bool
watch_remove(struct jq_watch *w)
{
	pthread_mutex_lock(&watch_mu);
	for (struct jq_watch **p = &watches; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	bool fired = w->fired;
	pthread_mutex_unlock(&watch_mu);
	return fired;
}

/* Collects every value of the started program into all. */
static bool
run(jq_state *jq, json_t *all, struct err *e)
{
	for (;;) {
		jv r = jq_next(jq);
		if (jv_is_valid(r)) {
			if (json_array_size(all) >= JQ_MAX_RESULTS) {
				jv_free(r);
				err_set(e, ERR_INVALID,
					"jq program emitted more than %d "
					"values",
					JQ_MAX_RESULTS);
				return false;
			}
			json_array_append_new(all, from_jv(r));
			continue;
		}
		if (jq_halted(jq)) {
			jv_free(r);
			jv code = jq_get_exit_code(jq);
			bool failed = jv_is_valid(code) &&
				      !(jv_get_kind(code) == JV_KIND_NUMBER &&
					jv_number_value(code) == 0);
			jv_free(code);
			if (failed) {
				jv msg = jq_get_error_message(jq);
				err_set(e, ERR_INVALID, "jq program halted: %s",
					jv_get_kind(msg) == JV_KIND_STRING
						? jv_string_value(msg)
						: "with an error");
				jv_free(msg);
				return false;
			}
			return true;
		}
		if (jv_invalid_has_msg(jv_copy(r))) {
			set_runtime_error(r, e);
			return false;
		}
		jv_free(r);
		return true;
	}
}

bool
jq_eval(const char *program, const json_t *input, int timeout_ms,
	json_t **results, struct err *e)
{
	*results = NULL;
	if (!program) {
		err_set(e, ERR_INVALID, "jq program is missing");
		return false;
	}
	if (timeout_ms <= 0)
		timeout_ms = JQ_DEFAULT_TIMEOUT_MS;
	jq_state *jq = state_for(program, e);
	if (!jq)
		return false;
	jq_start(jq, input ? to_jv(input) : jv_null(), 0);
	json_t *all = json_array();
	struct jq_watch watch;
	watch_add(&watch, jq, timeout_ms);
	bool ok = run(jq, all, e);
	if (watch_remove(&watch)) {
		err_set(e, ERR_INVALID, "jq program timed out after %d ms",
			timeout_ms);
		ok = false;
	}
	if (!ok) {
		/* Leave the state ready for its next run. */
		jq_start(jq, jv_null(), 0);
		json_decref(all);
		return false;
	}
	*results = all;
	return true;
}

bool
jq_transform(const json_t *params, int timeout_ms, json_t **out, struct err *e)
{
	*out = NULL;
	json_t *q = json_is_object(params)
			    ? json_object_get(params, "queryExpression")
			    : NULL;
	json_t *results = NULL;
	bool ok;
	if (!json_is_string(q)) {
		err_set(e, ERR_INVALID,
			"inputParameters.queryExpression must be a string");
		ok = false;
	} else {
		json_t *input = json_deep_copy(params);
		json_object_del(input, "queryExpression");
		ok = jq_eval(json_string_value(q), input, timeout_ms, &results,
			     e);
		json_decref(input);
	}
	if (!ok) {
		*out = json_pack("{s:s}", "error", e->msg);
		return false;
	}
	json_t *first = json_array_size(results) ? json_array_get(results, 0)
						 : json_null();
	*out = json_pack("{s:O,s:o}", "result", first, "resultList", results);
	return true;
}
