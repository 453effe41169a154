/*
 * js — see js.h.  One Duktape heap per thread behind a counting allocator
 * (the memory limit) and the execution timeout hook (the time limit).
 */
#include "engine/js.h"

#include "util/strbuf.h"

#include "duktape.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct js_tls {
	duk_context *ctx;
	size_t used;  /* bytes the heap holds now */
	size_t limit; /* cap for this heap */
	bool refused; /* an allocation was refused since the last reset */
	bool armed;   /* a deadline applies */
	bool timed_out;
	uint64_t deadline_ns;
	unsigned cached; /* entries in the compiled-script cache */
	unsigned heaps;  /* heaps created by this thread */
};

static _Atomic size_t memory_limit = JS_DEFAULT_MEMORY_LIMIT;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static _Thread_local struct js_tls *tls;

/* Every block carries its size in front, so the heap's total is known. */
#define HDR_SIZE (sizeof(max_align_t))

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Called by Duktape every few thousand instructions (duk_config.h, see
 * tools/duktape_config.py); non-zero makes it throw a RangeError that a
 * script's own catch cannot swallow. */
int nf_js_timeout_check(void *udata);

int
nf_js_timeout_check(void *udata)
{
	struct js_tls *t = udata;
	if (!t || !t->armed)
		return 0;
	if (t->timed_out)
		return 1;
	if (now_ns() >= t->deadline_ns) {
		t->timed_out = true;
		return 1;
	}
	return 0;
}

static void *
js_alloc(void *udata, duk_size_t size)
{
	struct js_tls *t = udata;
	if (size > t->limit || t->used + size > t->limit) {
		t->refused = true;
		return NULL;
	}
	unsigned char *p = malloc(HDR_SIZE + size);
	if (!p)
		return NULL;
	memcpy(p, &size, sizeof size);
	t->used += size;
	return p + HDR_SIZE;
}

static void
js_free(void *udata, void *ptr)
{
	struct js_tls *t = udata;
	if (!ptr)
		return;
	unsigned char *p = (unsigned char *)ptr - HDR_SIZE;
	size_t size;
	memcpy(&size, p, sizeof size);
	t->used -= size;
	free(p);
}

static void *
js_realloc(void *udata, void *ptr, duk_size_t size)
{
	struct js_tls *t = udata;
	if (!ptr)
		return js_alloc(udata, size);
	if (size == 0) {
		js_free(udata, ptr);
		return NULL;
	}
	unsigned char *p = (unsigned char *)ptr - HDR_SIZE;
	size_t old;
	memcpy(&old, p, sizeof old);
	if (size > old &&
	    (size > t->limit || t->used - old + size > t->limit)) {
		t->refused = true;
		return NULL;
	}
	unsigned char *np = realloc(p, HDR_SIZE + size);
	if (!np)
		return NULL;
	memcpy(np, &size, sizeof size);
	t->used = t->used - old + size;
	return np + HDR_SIZE;
}

static void
js_fatal(void *udata, const char *msg)
{
	(void)udata;
	fprintf(stderr, "js: fatal error in the script engine: %s\n",
		msg ? msg : "(no message)");
	abort();
}

static void
heap_destroy(struct js_tls *t)
{
	if (t->ctx) {
		t->armed = false;
		duk_destroy_heap(t->ctx);
		t->ctx = NULL;
	}
	t->cached = 0;
}

static void
tls_destroy(void *p)
{
	struct js_tls *t = p;
	heap_destroy(t);
	free(t);
}

/* At exit, the exiting thread's heap (the key's destructor only runs for
 * threads that end before the process does). */
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

/* This thread's state with a usable heap, or NULL (out of memory). */
static struct js_tls *
tls_get(void)
{
	if (!tls) {
		pthread_once(&tls_once, tls_key_init);
		tls = calloc(1, sizeof *tls);
		if (!tls)
			return NULL;
		pthread_setspecific(tls_key, tls);
	}
	struct js_tls *t = tls;
	if (t->ctx)
		return t;
	t->used = 0;
	t->limit = atomic_load(&memory_limit);
	t->refused = false;
	t->armed = false;
	t->cached = 0;
	t->ctx = duk_create_heap(js_alloc, js_realloc, js_free, t, js_fatal);
	if (!t->ctx)
		return NULL;
	t->heaps++;
	duk_push_global_object(t->ctx);
	duk_del_prop_string(t->ctx, -1, "Duktape");
	duk_pop(t->ctx);
	return t;
}

struct call_args {
	struct js_tls *t;
	const char *script;
	const char *input; /* JSON text */
	int timeout_ms;
};

/* [ ] -> [ result JSON text ]; runs inside duk_safe_call. */
static duk_ret_t
eval_safe(duk_context *ctx, void *udata)
{
	struct call_args *a = udata;

	duk_push_heap_stash(ctx);
	if (!duk_get_prop_string(ctx, -1, "scripts") ||
	    a->t->cached >= JS_CACHE_MAX) {
		duk_pop(ctx);
		duk_push_bare_object(ctx);
		duk_dup_top(ctx);
		duk_put_prop_string(ctx, -3, "scripts");
		a->t->cached = 0;
	}
	/* [ stash cache ] */
	if (!duk_get_prop_string(ctx, -1, a->script)) {
		duk_pop(ctx);
		duk_push_string(ctx, a->script);
		duk_push_string(ctx, "script");
		duk_compile(ctx, DUK_COMPILE_EVAL);
		duk_dup_top(ctx);
		duk_put_prop_string(ctx, -3, a->script);
		a->t->cached++;
	}
	/* [ stash cache fn ] */
	duk_push_global_object(ctx);
	duk_push_string(ctx, a->input);
	duk_json_decode(ctx, -1);
	duk_put_prop_string(ctx, -2, "$");
	duk_pop(ctx);

	/* The time limit is the script's: compiling it and decoding its input
	 * (as large as a long DO_WHILE's output) do not count, or a busy
	 * machine would fail a script for the size of its input. */
	a->t->deadline_ns = now_ns() + (uint64_t)a->timeout_ms * 1000000u;
	a->t->armed = true;
	duk_call(ctx, 0);
	if (duk_is_function(ctx, -1))
		duk_call(ctx, 0);
	if (duk_is_undefined(ctx, -1)) {
		duk_pop(ctx);
		duk_push_string(ctx, "null");
		return 1;
	}
	duk_json_encode(ctx, -1);
	if (!duk_is_string(ctx, -1)) {
		duk_pop(ctx);
		duk_push_string(ctx, "null");
	}
	return 1;
}

/* After a failure: forget the heap if it may be left in a bad state. */
static void
heap_after_failure(struct js_tls *t)
{
	if (t->refused) {
		heap_destroy(t);
		return;
	}
	duk_gc(t->ctx, 0);
	if (t->used > t->limit / 2)
		heap_destroy(t);
}

/*
 * Duktape keeps strings as CESU-8: a character beyond U+FFFF that a script
 * built from a surrogate pair ("\ud83d\ude00") comes out as two 3-byte
 * surrogate sequences, which is not UTF-8.  Pairs become their 4-byte
 * character, a lone surrogate U+FFFD.  Everything else is copied.
 */
static unsigned
surrogate_at(const unsigned char *p, const unsigned char *end)
{
	if (end - p < 3 || p[0] != 0xED || p[1] < 0xA0 || p[1] > 0xBF ||
	    (p[2] & 0xC0) != 0x80)
		return 0;
	return 0xD000u | ((unsigned)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
}

static void
cesu_to_utf8(const char *text, size_t len, struct strbuf *out)
{
	const unsigned char *p = (const unsigned char *)text, *end = p + len;
	while (p < end) {
		unsigned hi = surrogate_at(p, end);
		if (!hi) {
			sb_putc(out, (char)*p++);
			continue;
		}
		unsigned lo = surrogate_at(p + 3, end);
		if (hi < 0xDC00 && lo >= 0xDC00) {
			unsigned cp = 0x10000u + ((hi - 0xD800u) << 10) +
				      (lo - 0xDC00u);
			char u[4] = {(char)(0xF0 | (cp >> 18)),
				     (char)(0x80 | ((cp >> 12) & 0x3F)),
				     (char)(0x80 | ((cp >> 6) & 0x3F)),
				     (char)(0x80 | (cp & 0x3F))};
			sb_append(out, u, 4);
			p += 6;
		} else {
			sb_puts(out, "\xEF\xBF\xBD");
			p += 3;
		}
	}
}

bool
js_eval(const char *script, const json_t *input, int timeout_ms, json_t **out,
	struct err *e)
{
	*out = NULL;
	if (!script) {
		err_set(e, ERR_INVALID, "script is missing");
		return false;
	}
	if (timeout_ms <= 0)
		timeout_ms = JS_DEFAULT_TIMEOUT_MS;
	struct js_tls *t = tls_get();
	if (!t) {
		err_set(e, ERR_INTERNAL,
			"could not create a script heap: out of memory");
		return false;
	}
	char *in = input ? json_dumps(input, JSON_ENCODE_ANY | JSON_COMPACT)
			 : NULL;
	if (input && !in) {
		err_set(e, ERR_INTERNAL,
			"could not pass the input to the script: out of memory");
		return false;
	}
	struct call_args a = {t, script, in ? in : "null", timeout_ms};
	duk_context *ctx = t->ctx;
	duk_idx_t top = duk_get_top(ctx);

	t->refused = false;
	t->timed_out = false;
	t->armed = false; /* eval_safe arms it when the script starts */
	duk_int_t rc = duk_safe_call(ctx, eval_safe, &a, 0, 1);
	t->armed = false;
	free(in);

	bool ok = false;
	if (rc == DUK_EXEC_SUCCESS) {
		duk_size_t len = 0;
		const char *text = duk_get_lstring(ctx, -1, &len);
		struct strbuf fixed = STRBUF_INIT;
		if (text && memchr(text, 0xED, len)) {
			cesu_to_utf8(text, len, &fixed);
			text = sb_str(&fixed);
			len = fixed.len;
		}
		json_error_t je;
		json_t *v =
			text ? json_loadb(text, len,
					  JSON_DECODE_ANY | JSON_ALLOW_NUL, &je)
			     : NULL;
		if (v) {
			*out = v;
			ok = true;
		} else {
			err_set(e, ERR_INVALID,
				"the script's result is not valid JSON: %s",
				text ? je.text : "no text");
		}
		sb_free(&fixed);
	} else if (t->timed_out) {
		err_set(e, ERR_INVALID, "script timed out after %d ms",
			timeout_ms);
	} else if (t->refused) {
		err_set(e, ERR_INVALID, "script exceeded its memory limit");
	} else {
		const char *msg = duk_safe_to_string(ctx, -1);
		err_set(e, ERR_INVALID, "%s", msg ? msg : "script failed");
	}
	duk_set_top(ctx, top);
	if (!ok)
		heap_after_failure(t);
	return ok;
}

void
js_set_memory_limit(size_t bytes)
{
	atomic_store(&memory_limit, bytes ? bytes : JS_DEFAULT_MEMORY_LIMIT);
}

unsigned
js_heaps_created(void)
{
	return tls ? tls->heaps : 0;
}
