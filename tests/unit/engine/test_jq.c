/*
 * Unit tests of src/engine/jq: programs over JSON, several results,
 * Conductor's JSON_JQ_TRANSFORM output shape, compile and runtime errors,
 * the hidden environment, the per-thread cache and several threads.
 */
#include "engine/jq.h"

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

static char *
dump(const json_t *v)
{
	return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
}

static void
expect(const char *program, const char *input, const char *want)
{
	json_t *in = parse(input), *out = NULL;
	struct err e = ERR_INIT;
	cr_assert(jq_eval(program, in, 30000, &out, &e), "%s failed: %s",
		  program, e.msg);
	char *got = dump(out);
	cr_assert_str_eq(got, want, "%s: got %s", program, got);
	free(got);
	json_decref(out);
	json_decref(in);
}

static struct err
expect_fail(const char *program, const char *input)
{
	json_t *in = parse(input), *out = NULL;
	struct err e = ERR_INIT;
	cr_assert_not(jq_eval(program, in, 30000, &out, &e), "%s succeeded",
		      program);
	cr_assert_null(out);
	cr_assert_eq(e.code, ERR_INVALID);
	json_decref(in);
	return e;
}

Test(jq, programs)
{
	expect(".a + 1", "{\"a\": 41}", "[42]");
	expect(".[] | .x", "[{\"x\": 1}, {\"x\": \"s\"}]", "[1,\"s\"]");
	expect("{key3: (.key1.value1 + .key2.value2)}",
	       "{\"key1\":{\"value1\":[\"a\"]},\"key2\":{\"value2\":[\"b\"]}}",
	       "[{\"key3\":[\"a\",\"b\"]}]");
	expect("empty", "{}", "[]");
	expect(".s | length", "{\"s\": \"ä😀\"}", "[2]");
	expect(".n * 1.5", "{\"n\": 3}", "[4.5]");
	expect("def f: . * 2; .n | f", "{\"n\": 3}", "[6]");
	expect(".s", "{\"s\": \"a\\u0000b\"}", "[\"a\\u0000b\"]");
	expect("[.[] | select(. > 1)]", "[1, 2, 3]", "[[2,3]]");
}

Test(jq, errors_carry_jq_messages)
{
	struct err e = expect_fail(".a | ", "{}");
	cr_assert(strstr(e.msg, "jq program does not compile: "), "%s", e.msg);
	cr_assert(strstr(e.msg, "syntax error"), "%s", e.msg);
	e = expect_fail("nosuchfn(1)", "{}");
	cr_assert(strstr(e.msg, "nosuchfn/1 is not defined"), "%s", e.msg);
	e = expect_fail(".a + 1", "{\"a\": \"s\"}");
	cr_assert(strstr(e.msg, "jq error: "), "%s", e.msg);
	cr_assert(strstr(e.msg, "cannot be added"), "%s", e.msg);
	e = expect_fail("error(\"mine\")", "{}");
	cr_assert_str_eq(e.msg, "jq error: mine");
	e = expect_fail("input", "{}");
	/* The state still works after failures. */
	expect(".a + 1", "{\"a\": 1}", "[2]");
	expect("error(\"mine\")?", "{}", "[]");
}

Test(jq, an_endless_program_times_out)
{
	const char *progs[] = {"def f: f; f", "last(repeat(.))",
			       "last(range(1e15))", "[range(1e12)] | length"};
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		json_t *in = json_object(), *out = NULL;
		struct err e = ERR_INIT;
		cr_assert_not(jq_eval(progs[i], in, 200, &out, &e), "%s",
			      progs[i]);
		cr_assert_str_eq(e.msg, "jq program timed out after 200 ms",
				 "%s: %s", progs[i], e.msg);
		json_decref(in);
		/* The same state runs again, to its end. */
		expect(".a + 1", "{\"a\": 1}", "[2]");
	}
	expect("[limit(3; repeat(1))]", "{}", "[[1,1,1]]");
}

Test(jq, no_environment_and_no_modules)
{
	expect("env | length", "{}", "[0]");
	expect("$ENV | length", "{}", "[0]");
	expect_fail("import \"x\" as x; .", "{}");
	expect_fail("include \"x\"; .", "{}");
}

Test(jq, transform_output_shape)
{
	json_t *params =
		parse("{\"queryExpression\": \".a[]\", \"a\": [1, 2]}");
	json_t *out = NULL;
	struct err e = ERR_INIT;
	cr_assert(jq_transform(params, 30000, &out, &e), "%s", e.msg);
	char *got = dump(out);
	cr_assert_str_eq(got, "{\"result\":1,\"resultList\":[1,2]}");
	free(got);
	json_decref(out);
	json_decref(params);

	params = parse("{\"queryExpression\": \"empty\"}");
	cr_assert(jq_transform(params, 30000, &out, &e), "%s", e.msg);
	got = dump(out);
	cr_assert_str_eq(got, "{\"result\":null,\"resultList\":[]}");
	free(got);
	json_decref(out);
	json_decref(params);

	params = parse("{\"queryExpression\": \"{\"}");
	cr_assert_not(jq_transform(params, 30000, &out, &e));
	cr_assert(json_is_string(json_object_get(out, "error")));
	cr_assert_str_eq(json_string_value(json_object_get(out, "error")),
			 e.msg);
	json_decref(out);
	json_decref(params);

	params = parse("{\"a\": 1}");
	cr_assert_not(jq_transform(params, 30000, &out, &e));
	cr_assert(strstr(e.msg, "queryExpression"), "%s", e.msg);
	json_decref(out);
	json_decref(params);
}

Test(jq, more_programs_than_the_cache_holds)
{
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < JQ_CACHE_MAX + 5; i++) {
			char prog[32], want[32];
			snprintf(prog, sizeof prog, ".n + %d", i);
			snprintf(want, sizeof want, "[%d]", i + 1);
			expect(prog, "{\"n\": 1}", want);
		}
}

static void *
thread_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	for (int i = 0; i < 300; i++) {
		json_t *in = json_pack("{s:i,s:i}", "id", id, "i", i);
		json_t *out = NULL;
		struct err e = ERR_INIT;
		const char *prog = i % 7 == 3   ? ".id | tostring | error"
				   : i % 5 == 1 ? "{v: (.id * 1000 + .i)} | ."
						: "{v: (.id * 1000 + .i)}";
		bool ok = jq_eval(prog, in, 30000, &out, &e);
		if (i % 7 == 3) {
			char want[32];
			snprintf(want, sizeof want, "jq error: %d", id);
			if (ok || strcmp(e.msg, want))
				return (void *)1;
		} else if (!ok || json_integer_value(json_object_get(
					  json_array_get(out, 0), "v")) !=
					  id * 1000 + i) {
			return (void *)2;
		}
		json_decref(out);
		json_decref(in);
	}
	return NULL;
}

Test(jq, several_threads_at_once)
{
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, thread_main,
					    (void *)(intptr_t)i),
			     0);
	for (int i = 0; i < 4; i++) {
		void *rc;
		pthread_join(th[i], &rc);
		cr_assert_null(rc, "thread %d failed: %p", i, rc);
	}
}
