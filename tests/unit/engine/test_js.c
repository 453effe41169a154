/*
 * Unit tests of src/engine/js: results of expressions, programs and
 * functions, the `$` input, JSON conversion, thrown errors, the time and
 * memory limits, heap reuse after failures, the sandbox, and several
 * threads evaluating at once.
 */
#include "engine/js.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *
parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	cr_assert(v, "bad test JSON: %s: %s", je.text, text);
	return v;
}

/* Evaluates script over input (JSON text) and returns the compact JSON
 * text of the result; asserts success. */
static char *
eval_ok(const char *script, const char *input)
{
	json_t *in = parse(input), *out = NULL;
	struct err e = ERR_INIT;
	cr_assert(js_eval(script, in, 30000, &out, &e), "%s failed: %s", script,
		  e.msg);
	char *text = json_dumps(out, JSON_ENCODE_ANY | JSON_COMPACT |
					     JSON_SORT_KEYS);
	json_decref(out);
	json_decref(in);
	return text;
}

static void
expect(const char *script, const char *input, const char *want)
{
	char *got = eval_ok(script, input);
	cr_assert_str_eq(got, want, "%s", script);
	free(got);
}

static struct err
eval_fail(const char *script, int timeout_ms)
{
	json_t *out = NULL;
	struct err e = ERR_INIT;
	cr_assert_not(js_eval(script, NULL, timeout_ms, &out, &e),
		      "%s succeeded", script);
	cr_assert_null(out);
	cr_assert_eq(e.code, ERR_INVALID);
	return e;
}

Test(js, expressions_programs_and_functions)
{
	expect("$.a + 1", "{\"a\": 41}", "42");
	expect("function f() { return $.a * 2 } f()", "{\"a\": 21}", "42");
	expect("(function () { return {sum: $.a + $.b} })",
	       "{\"a\": 1, \"b\": 2}", "{\"sum\":3}");
	expect("var x = 1; x + $.n;", "{\"n\": 2}", "3");
	expect("function e() { if ($.value == 1) { return {\"result\": true} }"
	       " else { return {\"result\": false} } } e();",
	       "{\"value\": 1}", "{\"result\":true}");
	expect("$.list.map(function (v) { return v * v })",
	       "{\"list\":[1,2,3]}", "[1,4,9]");
	expect("$", "\"text\"", "\"text\"");
	expect("$.name.toUpperCase()", "{\"name\":\"ä😀b\"}", "\"Ä😀B\"");
}

Test(js, results_convert_to_json)
{
	expect("undefined", "{}", "null");
	expect("var a = 1;", "{}", "null");
	expect("$.missing", "{}", "null");
	expect("({f: function () {}, u: undefined, n: null, x: NaN})", "{}",
	       "{\"n\":null,\"x\":null}");
	expect("1.5", "{}", "1.5");
	expect("'a\\u0000b'", "{}", "\"a\\u0000b\"");
	expect("[true, false, 'x']", "{}", "[true,false,\"x\"]");
	/* Surrogate pairs made by a script become UTF-8; a lone one U+FFFD. */
	expect("'a\\ud83d\\ude00b'", "{}", "\"a😀b\"");
	expect("({k: '\\ud83d'})", "{}", "{\"k\":\"\uFFFD\"}");
	expect("$.s.charAt(0) + '\\u00e9'", "{\"s\":\"xyz\"}", "\"xé\"");
}

Test(js, thrown_errors_give_their_message)
{
	struct err e = eval_fail("throw new Error('boom')", 0);
	cr_assert_str_eq(e.msg, "Error: boom");
	e = eval_fail("nosuch.thing", 0);
	cr_assert(strstr(e.msg, "ReferenceError"), "%s", e.msg);
	e = eval_fail("function (", 0);
	cr_assert(strstr(e.msg, "SyntaxError"), "%s", e.msg);
	e = eval_fail("x => x + 1", 0);
	cr_assert(strstr(e.msg, "SyntaxError"), "%s", e.msg);
	e = eval_fail("var o = {}; o.self = o; o", 0);
	cr_assert(strstr(e.msg, "TypeError"), "%s", e.msg);
	expect("1 + 1", "{}", "2");
}

Test(js, an_endless_loop_times_out)
{
	struct err e = eval_fail("for (;;) {}", 100);
	cr_assert_str_eq(e.msg, "script timed out after 100 ms");
	/* A script cannot swallow the timeout. */
	e = eval_fail("for (;;) { try { for (;;) {} } catch (x) {} }", 100);
	cr_assert_str_eq(e.msg, "script timed out after 100 ms");
	unsigned heaps = js_heaps_created();
	expect("$.a + 1", "{\"a\": 1}", "2");
	cr_assert_eq(js_heaps_created(), heaps, "the heap was kept");
}

Test(js, a_huge_allocation_hits_the_memory_limit)
{
	js_set_memory_limit(4 * 1024 * 1024);
	expect("1", "{}", "1"); /* heap created under the limit */
	/* A time limit far beyond what filling 4 MiB takes, even under the
	 * sanitizers on a loaded machine: the memory limit must come first. */
	struct err e = eval_fail(
		"var a = []; for (var i = 0; i < 1e8; i++) a.push('x' + i); a",
		120000);
	cr_assert_str_eq(e.msg, "script exceeded its memory limit");
	e = eval_fail("new Array(1e9).join('x')", 120000);
	cr_assert_str_eq(e.msg, "script exceeded its memory limit");
	expect("$.a + 1", "{\"a\": 1}", "2");
}

Test(js, the_heap_is_reused_and_survives_failures)
{
	expect("1", "{}", "1");
	unsigned heaps = js_heaps_created();
	cr_assert_eq(heaps, 1);
	for (int i = 0; i < 50; i++) {
		char script[64];
		snprintf(script, sizeof script, "$.n + %d", i);
		char want[16];
		snprintf(want, sizeof want, "%d", i + 1);
		expect(script, "{\"n\": 1}", want);
		eval_fail("throw new TypeError('x')", 0);
		eval_fail("null.x", 0);
	}
	cr_assert_eq(js_heaps_created(), heaps);
	/* More distinct scripts than the cache holds. */
	for (int i = 0; i < JS_CACHE_MAX + 10; i++) {
		char script[64], want[16];
		snprintf(script, sizeof script, "%d + $.n", i);
		snprintf(want, sizeof want, "%d", i + 1);
		expect(script, "{\"n\": 1}", want);
	}
}

Test(js, the_sandbox_hides_the_host)
{
	expect("typeof Duktape", "{}", "\"undefined\"");
	expect("typeof require", "{}", "\"undefined\"");
	expect("typeof print", "{}", "\"undefined\"");
	/* `$` is set afresh for each evaluation. */
	expect("$ = 5; $", "{}", "5");
	expect("$.a", "{\"a\": 1}", "1");
}

static void *
thread_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	for (int i = 0; i < 200; i++) {
		json_t *in = json_pack("{s:i,s:i}", "id", id, "i", i);
		json_t *out = NULL;
		struct err e = ERR_INIT;
		const char *script = i % 50 == 7 ? "for (;;) {}"
				     : i % 10 == 3
					     ? "throw new Error('t' + $.id)"
					     : "({v: $.id * 1000 + $.i})";
		bool ok =
			js_eval(script, in, i % 50 == 7 ? 50 : 30000, &out, &e);
		if (i % 50 == 7) {
			if (ok || strcmp(e.msg, "script timed out after 50 ms"))
				return (void *)1;
		} else if (i % 10 == 3) {
			char want[32];
			snprintf(want, sizeof want, "Error: t%d", id);
			if (ok || strcmp(e.msg, want))
				return (void *)2;
		} else if (!ok || json_integer_value(json_object_get(
					  out, "v")) != id * 1000 + i) {
			return (void *)3;
		}
		json_decref(out);
		json_decref(in);
	}
	return NULL;
}

Test(js, several_threads_at_once)
{
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, thread_main,
					    (void *)(intptr_t)i),
			     0);
	for (int i = 0; i < 4; i++) {
		void *rc;
		pthread_join(th[i], &rc);
		cr_assert_null(rc, "thread %d failed at step %p", i, rc);
	}
}
