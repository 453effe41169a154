/*
 * Unit tests of src/engine/expr: Conductor-style `${...}` parameter
 * expressions (type preservation, interpolation, nesting, escapes), the
 * JSONPath subset, the depth limits, the error messages naming the JSON
 * path of the offending string, expr_check and expr_sources.
 */
#include "engine/expr.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A context most tests resolve against. */
static const char CTX[] =
	"{\"workflow\": {\"input\": {\"n\": 42, \"pi\": 3.5, \"price\": 19.99,"
	"  \"s\": \"hello\", \"t\": true, \"f\": false, \"z\": null,"
	"  \"obj\": {\"a\": 1, \"b\": [1, 2]}, \"list\": [10, 20, 30],"
	"  \"key\": \"s\", \"dotted\": \"a.b\", \"quote\": \"it's\","
	"  \"a.b\": \"DOT\", \"it's\": \"QUOTE\", \"with space\": \"SP\","
	"  \"src\": \"task1\", \"empty\": \"\"},"
	" \"variables\": {\"count\": 7}, \"workflowId\": \"wf-1\"},"
	" \"task1\": {\"output\": {\"items\": [{\"id\": 1, \"v\": \"x\"},"
	"   {\"id\": 2}, {\"id\": 3, \"v\": \"z\"}], \"m\": {\"p\": 1, \"q\": 2}},"
	"   \"status\": \"COMPLETED\"},"
	" \"my task\": {\"output\": {\"ok\": true}}}";

static json_t *
parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	cr_assert(v, "bad test JSON: %s: %s", je.text, text);
	return v;
}

/* Resolves a template given as JSON text against CTX; asserts success. */
static json_t *
resolve_json(const char *tmpl_text)
{
	json_t *ctx = parse(CTX), *tmpl = parse(tmpl_text);
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, "$.inputParameters", &e);
	cr_assert(out, "resolve of %s failed: %s", tmpl_text, e.msg);
	json_decref(tmpl);
	json_decref(ctx);
	return out;
}

/* Resolves the single string s against CTX. */
static json_t *
resolve_str(const char *s)
{
	json_t *ctx = parse(CTX), *tmpl = json_string(s);
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, "$.x", &e);
	cr_assert(out, "resolve of %s failed: %s", s, e.msg);
	json_decref(tmpl);
	json_decref(ctx);
	return out;
}

static void
assert_json_eq(json_t *got, const char *want_text)
{
	json_t *want = parse(want_text);
	char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
	cr_assert(json_equal(got, want), "got %s, want %s", g, want_text);
	free(g);
	json_decref(want);
}

static void
assert_resolves(const char *s, const char *want_json)
{
	json_t *out = resolve_str(s);
	assert_json_eq(out, want_json);
	json_decref(out);
}

static void
assert_text(const char *s, const char *want)
{
	json_t *out = resolve_str(s);
	cr_assert(json_is_string(out), "%s did not give a string", s);
	cr_assert_str_eq(json_string_value(out), want, "for %s", s);
	json_decref(out);
}

/* Resolves a template that must fail; returns the message. */
static void
resolve_fails(const char *tmpl_text, const char *where, struct err *e)
{
	json_t *ctx = parse(CTX), *tmpl = parse(tmpl_text);
	json_t *out = expr_resolve(tmpl, ctx, where, e);
	cr_assert_null(out, "resolve of %s should fail", tmpl_text);
	cr_assert_eq(e->code, ERR_INVALID);
	json_decref(tmpl);
	json_decref(ctx);
}

static void
assert_path(const char *doc_text, const char *path, const char *want_json)
{
	json_t *doc = parse(doc_text);
	struct err e = ERR_INIT;
	json_t *out = expr_path(doc, path, &e);
	cr_assert(out, "path %s failed: %s", path, e.msg);
	json_t *want = parse(want_json);
	char *g = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
	cr_assert(json_equal(out, want), "path %s: got %s, want %s", path, g,
		  want_json);
	free(g);
	json_decref(want);
	json_decref(out);
	json_decref(doc);
}

static void
assert_bad_path(const char *path, const char *why)
{
	json_t *doc = parse("{\"a\": 1}");
	struct err e = ERR_INIT;
	json_t *out = expr_path(doc, path, &e);
	cr_assert_null(out, "path %s should fail", path);
	cr_assert_eq(e.code, ERR_INVALID);
	cr_assert(strstr(e.msg, why), "path %s: message \"%s\" lacks \"%s\"",
		  path, e.msg, why);
	json_decref(doc);
}

/* Type preservation: a string that is exactly one expression. */

Test(types, exact_expression_keeps_the_json_type)
{
	assert_resolves("${workflow.input.n}", "42");
	assert_resolves("${workflow.input.pi}", "3.5");
	assert_resolves("${workflow.input.s}", "\"hello\"");
	assert_resolves("${workflow.input.t}", "true");
	assert_resolves("${workflow.input.f}", "false");
	assert_resolves("${workflow.input.z}", "null");
	assert_resolves("${workflow.input.obj}", "{\"a\": 1, \"b\": [1, 2]}");
	assert_resolves("${workflow.input.list}", "[10, 20, 30]");
	assert_resolves("${workflow.variables.count}", "7");
	assert_resolves("${task1.status}", "\"COMPLETED\"");
}

Test(types, missing_path_is_null)
{
	assert_resolves("${workflow.input.nope}", "null");
	assert_resolves("${workflow.input.n.deeper}", "null");
	assert_resolves("${workflow.input.list[3]}", "null");
	assert_resolves("${workflow.input.obj[0]}", "null");
	assert_resolves("${workflow.input.list.x}", "null");
}

Test(types, missing_source_is_null)
{
	assert_resolves("${nosuchtask.output.x}", "null");
	assert_resolves("${nosuchtask}", "null");
	assert_text("a${nosuchtask.output}b", "ab");
}

Test(types, null_context_resolves_everything_to_null)
{
	json_t *tmpl = parse("{\"a\": \"${workflow.input.x}\","
			     " \"b\": \"<${workflow.input.x}>\","
			     " \"c\": \"${t.output[*]}\"}");
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, NULL, NULL, &e);
	cr_assert(out, "%s", e.msg);
	assert_json_eq(out, "{\"a\": null, \"b\": \"<>\", \"c\": []}");
	json_decref(out);
	json_decref(tmpl);
}

Test(types, whole_source_is_addressable)
{
	json_t *out = resolve_str("${my task}");
	assert_json_eq(out, "{\"output\": {\"ok\": true}}");
	json_decref(out);
}

Test(types, result_is_a_copy_not_a_view_of_the_context)
{
	json_t *ctx = parse(CTX), *tmpl = json_string("${workflow.input.obj}");
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
	cr_assert(out);
	json_object_set_new(out, "a", json_integer(99));
	json_t *orig = json_object_get(
		json_object_get(json_object_get(ctx, "workflow"), "input"),
		"obj");
	cr_assert_eq(json_integer_value(json_object_get(orig, "a")), 1);
	json_decref(out);
	json_decref(tmpl);
	json_decref(ctx);
}

Test(types, templates_recurse_through_objects_and_arrays)
{
	json_t *out = resolve_json(
		"{\"url\": \"http://x/${workflow.input.s}\","
		" \"list\": [1, \"${workflow.input.n}\", [\"${task1.status}\"],"
		"          {\"deep\": \"${workflow.input.t}\"}],"
		" \"plain\": \"no expressions $ here {}\","
		" \"num\": 1.25, \"b\": false, \"nil\": null, \"empty\": {}}");
	assert_json_eq(out,
		       "{\"url\": \"http://x/hello\","
		       " \"list\": [1, 42, [\"COMPLETED\"], {\"deep\": true}],"
		       " \"plain\": \"no expressions $ here {}\","
		       " \"num\": 1.25, \"b\": false, \"nil\": null,"
		       " \"empty\": {}}");
	json_decref(out);
}

Test(types, a_resolved_value_is_not_resolved_again)
{
	json_t *ctx = parse("{\"workflow\": {\"input\": "
			    "{\"x\": \"${workflow.input.y}\", \"y\": 1}}}");
	json_t *tmpl =
		json_string("${workflow.input.x} and ${workflow.input.x}");
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
	cr_assert_str_eq(json_string_value(out),
			 "${workflow.input.y} and ${workflow.input.y}");
	json_decref(out);
	json_decref(tmpl);
	json_decref(ctx);
}

/* Interpolation inside longer strings. */

Test(interpolation, strings_numbers_and_booleans)
{
	assert_text("say ${workflow.input.s}!", "say hello!");
	assert_text("n=${workflow.input.n}", "n=42");
	assert_text("pi=${workflow.input.pi}", "pi=3.5");
	assert_text("t=${workflow.input.t},f=${workflow.input.f}",
		    "t=true,f=false");
	assert_text("${workflow.input.s}${workflow.input.s}", "hellohello");
	assert_text(" ${workflow.input.n}", " 42");
	assert_text("${workflow.input.n} ", "42 ");
}

Test(interpolation, reals_use_the_shortest_text)
{
	assert_text("$${workflow.input.price}=${workflow.input.price}",
		    "${workflow.input.price}=19.99");
	json_t *ctx = parse("{\"w\": {\"a\": 0.1, \"b\": 100.0, \"c\": 1e300,"
			    " \"d\": 1.5e-7, \"e\": -2.5, \"f\": 1e16}}");
	json_t *tmpl = json_string("${w.a} ${w.b} ${w.c} ${w.d} ${w.e} ${w.f}");
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
	cr_assert_str_eq(json_string_value(out),
			 "0.1 100.0 1e+300 1.5e-07 -2.5 10000000000000000.0");
	json_decref(out);
	json_decref(tmpl);
	json_decref(ctx);
}

Test(interpolation, objects_and_arrays_as_compact_json)
{
	assert_text("o=${workflow.input.obj}", "o={\"a\":1,\"b\":[1,2]}");
	assert_text("l=${workflow.input.list}", "l=[10,20,30]");
	assert_text("ids=${task1.output.items[*].id}", "ids=[1,2,3]");
}

Test(interpolation, null_and_missing_are_empty)
{
	assert_text("[${workflow.input.z}]", "[]");
	assert_text("[${workflow.input.nope}]", "[]");
	assert_text("[${nosuch.output.x}]", "[]");
}

Test(interpolation, strings_with_nul_bytes_survive)
{
	json_t *ctx = parse("{\"w\": {\"s\": \"a\\u0000b\"}}");
	json_t *tmpl = json_stringn("<${w.s}>\0tail", 13);
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
	cr_assert(out, "%s", e.msg);
	cr_assert_eq(json_string_length(out), 10);
	cr_assert_eq(memcmp(json_string_value(out), "<a\0b>\0tail", 10), 0);
	json_decref(out);
	json_decref(tmpl);
	json_decref(ctx);
}

Test(interpolation, dollar_signs_that_are_not_expressions_stay)
{
	assert_text("$", "$");
	assert_text("$$", "$$");
	assert_text("cost: $5 {x}", "cost: $5 {x}");
	assert_text("end$", "end$");
	assert_text("${workflow.input.n}$", "42$");
	assert_text("a}b", "a}b");
}

/* `${}`, escapes and nesting. */

Test(special, empty_expression_is_the_empty_string)
{
	assert_resolves("${}", "\"\"");
	assert_resolves("${  }", "\"\"");
	assert_text("a${}b", "ab");
}

Test(special, double_dollar_escapes)
{
	assert_resolves("$${workflow.input.n}", "\"${workflow.input.n}\"");
	assert_text("x $${a} ${workflow.input.n}", "x ${a} 42");
	/* Three dollars: a literal "$", then the escape. */
	assert_text("$$${workflow.input.n}", "$${workflow.input.n}");
	/* An escape needs no closing brace. */
	assert_text("$${", "${");
	assert_text("$${}", "${}");
}

Test(special, nested_expressions_resolve_inner_first)
{
	assert_resolves("${workflow.input.${workflow.input.key}}", "\"hello\"");
	assert_resolves("${${workflow.input.src}.status}", "\"COMPLETED\"");
	assert_resolves("${workflow.input.list[${workflow.variables.count}]}",
			"null");
	assert_text("v=${workflow.input.${workflow.input.key}}!", "v=hello!");
	/* Three levels. */
	json_t *ctx = parse("{\"w\": {\"a\": \"b\", \"b\": \"c\", \"c\": 5}}");
	json_t *tmpl = json_string("${w.${w.${w.a}}}");
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
	cr_assert(out, "%s", e.msg);
	cr_assert_eq(json_integer_value(out), 5);
	json_decref(out);
	json_decref(tmpl);
	json_decref(ctx);
}

Test(special, inner_value_is_text_inside_the_path)
{
	/* "a.b" spliced into dot form reads as two names... */
	assert_resolves("${workflow.input.${workflow.input.dotted}}", "null");
	/* ...but inside a quoted bracket it is one name, quotes escaped. */
	assert_resolves("${workflow.input['${workflow.input.dotted}']}",
			"\"DOT\"");
	assert_resolves("${workflow.input['${workflow.input.quote}']}",
			"\"QUOTE\"");
	assert_resolves("${workflow.input[\"${workflow.input.quote}\"]}",
			"\"QUOTE\"");
	/* A missing inner value is an empty name there. */
	assert_resolves("${workflow.input['${workflow.input.nope}']}", "null");
	assert_resolves("${task1.output.m['${workflow.input.z}']}", "null");
}

Test(special, data_that_breaks_a_nested_path_gives_null)
{
	/* The inner value is empty: "workflow.input." does not parse. */
	assert_resolves("${workflow.input.${workflow.input.empty}}", "null");
	assert_resolves("${workflow.input.${workflow.input.nope}}", "null");
	/* The whole path is the inner value, and it is empty. */
	assert_resolves("${${workflow.input.empty}}", "\"\"");
	/* An inner value making brackets unbalanced. */
	json_t *ctx = parse("{\"w\": {\"k\": \"['x\"}}");
	json_t *tmpl = json_string("${w.a${w.k}}");
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
	cr_assert(json_is_null(out), "%s", e.msg);
	json_decref(out);
	json_decref(tmpl);
	json_decref(ctx);
}

Test(special, quoted_names_may_hold_braces)
{
	json_t *ctx = parse("{\"w\": {\"a}b\": 1, \"c{d\": 2, \"e'f\": 3,"
			    " \"g\\\\h\": 4}}");
	json_t *tmpl = parse("[\"${w['a}b']}\", \"${w[\\\"c{d\\\"]}\","
			     " \"${w['e\\\\'f']}\", \"${w['g\\\\\\\\h']}\"]");
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
	cr_assert(out, "%s", e.msg);
	assert_json_eq(out, "[1, 2, 3, 4]");
	json_decref(out);
	json_decref(tmpl);
	json_decref(ctx);
}

Test(special, whitespace_around_the_path_is_ignored)
{
	assert_resolves("${ workflow.input.n }", "42");
	assert_resolves("${workflow.input['with space']}", "\"SP\"");
	assert_resolves("${workflow.input.with space}", "\"SP\"");
}

/* The JSONPath subset. */

static const char DOC[] =
	"{\"a\": {\"b\": [1, 2, {\"c\": \"deep\"}], \"x y\": 5, \"q\\\"q\": 6,"
	"  \"]\": 7, \"\": 8},"
	" \"arr\": [{\"n\": 1}, {\"n\": 2}, {\"m\": 3}, 4],"
	" \"obj\": {\"p\": {\"n\": 10}, \"q\": {\"n\": 20}}}";

Test(path, dot_and_root)
{
	assert_path(DOC, "$.a.x y", "5");
	assert_path(DOC, "a.x y", "5");
	assert_path(DOC, "  $.a.b[0]  ", "1");
	assert_path(DOC, "$", DOC);
	assert_path(DOC, "a.]", "7");
	assert_path(DOC, "$.nope", "null");
	assert_path("[1, 2]", "$[1]", "2");
	assert_path("{\"$x\": 1}", "$x", "1");
}

Test(path, brackets)
{
	assert_path(DOC, "$['a']['x y']", "5");
	assert_path(DOC, "a[\"x y\"]", "5");
	assert_path(DOC, "a['q\"q']", "6");
	assert_path(DOC, "a[\"q\\\"q\"]", "6");
	assert_path(DOC, "a['']", "8");
	assert_path(DOC, "a[ 'b' ][ 2 ].c", "\"deep\"");
	assert_path(DOC, "['a'].b[2]['c']", "\"deep\"");
}

Test(path, indexes)
{
	assert_path(DOC, "a.b[0]", "1");
	assert_path(DOC, "a.b[2].c", "\"deep\"");
	assert_path(DOC, "a.b[-1].c", "\"deep\"");
	assert_path(DOC, "a.b[-3]", "1");
	assert_path(DOC, "a.b[-4]", "null");
	assert_path(DOC, "a.b[3]", "null");
	assert_path(DOC, "a.b[-0]", "1");
	assert_path(DOC, "a.b[99999999999999999999999999]", "null");
	assert_path(DOC, "a.b[-99999999999999999999999999]", "null");
	assert_path(DOC, "a[0]", "null");
	assert_path(DOC, "a.b.0", "null");
}

Test(path, wildcards)
{
	assert_path(DOC, "arr[*].n", "[1, 2]");
	assert_path(DOC, "arr.*.n", "[1, 2]");
	assert_path(DOC, "obj.*.n", "[10, 20]");
	assert_path(DOC, "obj[*]", "[{\"n\": 10}, {\"n\": 20}]");
	assert_path(DOC, "arr[*]", "[{\"n\": 1}, {\"n\": 2}, {\"m\": 3}, 4]");
	assert_path(DOC, "$.*.p.n", "[10]");
	assert_path(DOC, "arr[*].zzz", "[]");
	assert_path(DOC, "nope[*]", "[]");
	assert_path(DOC, "a.x y[*]", "[]");
	assert_path("[[1, 2], [3], 4]", "$[*][-1]", "[2, 3]");
	assert_path("[[1, 2], [3]]", "$[*][*]", "[1, 2, 3]");
	assert_path("{\"*\": 1, \"a\": 2}", "$['*']", "1");
	assert_path("{\"*x\": 1}", "$.*x", "1");
}

Test(path, null_document)
{
	struct err e = ERR_INIT;
	json_t *out = expr_path(NULL, "a.b", &e);
	cr_assert(json_is_null(out));
	json_decref(out);
	out = expr_path(NULL, "a[*]", &e);
	cr_assert(json_is_array(out) && json_array_size(out) == 0);
	json_decref(out);
}

Test(path, malformed)
{
	assert_bad_path("", "empty path");
	assert_bad_path("   ", "empty path");
	assert_bad_path("a.", "expected a name");
	assert_bad_path("a..b", "deep scan");
	assert_bad_path(".a", "at the start");
	assert_bad_path("a[", "unterminated \"[\"");
	assert_bad_path("a[0", "expected \"]\"");
	assert_bad_path("a['x", "unterminated quoted name");
	assert_bad_path("a['x\\", "unterminated quoted name");
	assert_bad_path("a[x]", "expected a quoted name, an index");
	assert_bad_path("a[]", "expected a quoted name, an index");
	assert_bad_path("a[-]", "expected digits");
	assert_bad_path("a[1:2]", "expected \"]\"");
	assert_bad_path("a['x','y']", "expected \"]\"");
	assert_bad_path("a[?(@.x)]", "expected a quoted name");
	assert_bad_path("a[0]b", "expected \".\" or \"[\"");
	assert_bad_path("$a[0]]", "expected \".\" or \"[\"");
	assert_bad_path("a[0]b", "near \"b\"");
}

/* Limits. */

static char *
repeat(const char *head, int n, const char *mid, const char *tail)
{
	size_t hl = strlen(head), tl = strlen(tail), ml = strlen(mid);
	char *s = malloc(hl * (size_t)n + ml + tl * (size_t)n + 1), *p = s;
	for (int i = 0; i < n; i++, p += hl)
		memcpy(p, head, hl);
	memcpy(p, mid, ml);
	p += ml;
	for (int i = 0; i < n; i++, p += tl)
		memcpy(p, tail, tl);
	*p = '\0';
	return s;
}

Test(limits, expression_nesting_is_capped)
{
	/* 64 levels of `${` in all: fine (the innermost is `${}`). */
	char *s = repeat("${", 64, "", "}");
	json_t *ctx = parse(CTX), *tmpl = json_string(s);
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tmpl, ctx, "$.p", &e);
	cr_assert(out, "%s", e.msg);
	json_decref(out);
	json_decref(tmpl);
	free(s);

	s = repeat("${", 65, "", "}");
	tmpl = json_string(s);
	cr_assert_null(expr_resolve(tmpl, ctx, "$.p", &e));
	cr_assert(strstr(e.msg, "$.p: expressions nested deeper than 64"), "%s",
		  e.msg);
	cr_assert_not(expr_check(tmpl, "$.p", &e));
	json_decref(tmpl);
	free(s);
	json_decref(ctx);
}

Test(limits, template_depth_is_capped)
{
	char *ok = repeat("[", 64, "\"${workflow.input.n}\"", "]");
	char *bad = repeat("[", 65, "1", "]");
	json_t *tok = parse(ok), *tbad = parse(bad);
	json_t *ctx = parse(CTX);
	struct err e = ERR_INIT;
	json_t *out = expr_resolve(tok, ctx, NULL, &e);
	cr_assert(out, "%s", e.msg);
	json_t *leaf = out;
	for (int i = 0; i < 64; i++)
		leaf = json_array_get(leaf, 0);
	cr_assert_eq(json_integer_value(leaf), 42);
	json_decref(out);
	cr_assert_null(expr_resolve(tbad, ctx, NULL, &e));
	cr_assert(strstr(e.msg, "nested deeper than 64 levels"), "%s", e.msg);
	cr_assert(strstr(e.msg, "$[0][0]"), "%s", e.msg);
	cr_assert_not(expr_check(tbad, NULL, &e));
	json_decref(tok);
	json_decref(tbad);
	json_decref(ctx);
	free(ok);
	free(bad);
}

Test(limits, long_strings_are_linear, .timeout = 60)
{
	/* Two million characters of each shape; quadratic work would take
	 * hours; the timeout leaves room for the sanitizers on a loaded
	 * machine and only stops a runaway.  (Not above 60 s: Criterion 2.4's
	 * runner then leaks, which fails the binary under LeakSanitizer.) */
	enum { N = 500000 };
	static const char *units[] = {"$${a", "${}x", "${a}",
				      "$$$$", "${$$", "[${'"};
	json_t *ctx = parse(CTX);
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		char *s = repeat(units[u], N, "", "");
		json_t *tmpl = json_string(s);
		struct err e = ERR_INIT;
		json_t *out = expr_resolve(tmpl, ctx, NULL, &e);
		json_decref(out);
		(void)expr_check(tmpl, NULL, &e);
		json_decref(tmpl);
		free(s);
	}
	/* One very long path. */
	char *s = repeat(".a", N, "", "");
	s[0] = '$';
	struct err e = ERR_INIT;
	json_t *out = expr_path(ctx, s, &e);
	cr_assert(json_is_null(out));
	json_decref(out);
	free(s);
	json_decref(ctx);
}

/* Malformed expressions and the JSON path in errors. */

Test(errors, unterminated_expression_names_the_member)
{
	struct err e = ERR_INIT;
	resolve_fails("{\"url\": \"http://${workflow.input.s\"}",
		      "$.inputParameters", &e);
	cr_assert(strstr(e.msg, "$.inputParameters.url: unterminated \"${\""),
		  "%s", e.msg);
	cr_assert(strstr(e.msg, "${workflow.input.s"), "%s", e.msg);
}

Test(errors, bad_bracket_names_the_array_element)
{
	struct err e = ERR_INIT;
	resolve_fails("{\"list\": [1, \"ok ${workflow.input.n}\","
		      " \"${workflow.input[x]}\"]}",
		      "$.inputParameters", &e);
	cr_assert(strstr(e.msg, "$.inputParameters.list[2]: "), "%s", e.msg);
	cr_assert(strstr(e.msg, "expected a quoted name, an index or \"*\""),
		  "%s", e.msg);
	cr_assert(strstr(e.msg, "in \"${workflow.input[x]}\""), "%s", e.msg);
}

Test(errors, odd_keys_are_quoted_in_the_path)
{
	struct err e = ERR_INIT;
	resolve_fails("{\"a.b\": {\"it's\": \"${\"}}", NULL, &e);
	cr_assert(strstr(e.msg, "$['a.b']['it\\'s']: unterminated"), "%s",
		  e.msg);
}

Test(errors, nested_unterminated_and_bad_inner_paths)
{
	struct err e = ERR_INIT;
	resolve_fails("{\"a\": \"${workflow.input.${x}\"}", "$.in", &e);
	cr_assert(strstr(e.msg, "$.in.a: unterminated"), "%s", e.msg);
	resolve_fails("{\"a\": \"${workflow.input.${x..y}}\"}", "$.in", &e);
	cr_assert(strstr(e.msg, "deep scan"), "%s", e.msg);
	/* A bad outer shape is an error whatever the inner value. */
	resolve_fails("{\"a\": \"${workflow.input[${workflow.input.n}}\"}",
		      "$.in", &e);
	cr_assert(strstr(e.msg, "$.in.a: expected \"]\""), "%s", e.msg);
}

Test(errors, expression_needs_a_source_name)
{
	static const char *bad[] = {"\"${[0]}\"",    "\"${*.output}\"",
				    "\"${$}\"",      "\"${$.*}\"",
				    "\"${$[0].a}\"", "\"${.a}\""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct err e = ERR_INIT;
		resolve_fails(bad[i], "$.p", &e);
		cr_assert(strstr(e.msg, "$.p: "), "%s", e.msg);
	}
	struct err e = ERR_INIT;
	resolve_fails("\"${[0]}\"", "$.p", &e);
	cr_assert(strstr(e.msg, "must start with a source name"), "%s", e.msg);
	/* `$` and a bracket in front of the source are fine. */
	assert_resolves("${$.workflow.input.n}", "42");
	assert_resolves("${['my task'].output.ok}", "true");
}

Test(errors, long_excerpts_are_cut_on_character_boundaries)
{
	/* é is two bytes: the cut must not split one. */
	char *body = repeat("é", 200, "", "");
	size_t n = strlen(body) + 16;
	char *s = malloc(n);
	snprintf(s, n, "${%s", body);
	json_t *tmpl = json_string(s);
	struct err e = ERR_INIT;
	cr_assert_null(expr_resolve(tmpl, NULL, NULL, &e));
	cr_assert(strstr(e.msg, "...\""), "%s", e.msg);
	json_t *as_json = json_string(e.msg);
	cr_assert(as_json, "message is not valid UTF-8: %s", e.msg);
	json_decref(as_json);
	json_decref(tmpl);
	free(s);
	free(body);
}

/* expr_check */

Test(check, accepts_valid_templates_without_a_context)
{
	json_t *tmpl = parse(
		"{\"a\": \"${workflow.input.x}\", \"b\": [\"x ${t1.output[*].y}\","
		" \"${t2.output['k'][-1]}\", \"$${not.an[expression\"],"
		" \"c\": \"${${workflow.input.src}.output}\", \"d\": \"${}\","
		" \"e\": 5, \"f\": \"plain\"}");
	struct err e = ERR_INIT;
	cr_assert(expr_check(tmpl, "$.inputParameters", &e), "%s", e.msg);
	cr_assert(expr_check(NULL, NULL, &e));
	json_decref(tmpl);
}

Test(check, rejects_malformed_templates_naming_the_path)
{
	static const struct {
		const char *tmpl, *where;
	} cases[] = {
		{"{\"url\": \"${workflow.input.x\"}", "$.inputParameters.url"},
		{"{\"l\": [0, 1, \"${a[\"]}", "$.inputParameters.l[2]"},
		{"{\"l\": [\"${a['x]}\"]}", "$.inputParameters.l[0]"},
		{"\"${a[0]x}\"", "$.inputParameters"},
		{"{\"o\": {\"p\": \"x${a.}\"}}", "$.inputParameters.o.p"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *tmpl = parse(cases[i].tmpl);
		struct err e = ERR_INIT;
		cr_assert_not(expr_check(tmpl, "$.inputParameters", &e), "%s",
			      cases[i].tmpl);
		cr_assert_eq(e.code, ERR_INVALID);
		char want[128];
		snprintf(want, sizeof(want), "%s: ", cases[i].where);
		cr_assert(strncmp(e.msg, want, strlen(want)) == 0,
			  "%s: message \"%s\"", cases[i].tmpl, e.msg);
		json_decref(tmpl);
	}
}

/*
 * A small deterministic fuzz: random strings over the characters that
 * matter.  expr_resolve fails exactly when expr_check does (errors depend
 * on the template only), and neither crashes (the sanitizers watch).
 */
Test(check, resolve_fails_exactly_when_check_does)
{
	static const char alphabet[] = "${}[]'\"\\.*-09aw $$${{}}";
	json_t *ctx = parse("{\"w\": {\"a\": [1, {\"b\": \"a\"}], \"0\": \"w\","
			    " \"9\": \"}\", \"\": \"$\"}, \"a\": \"'\"}");
	uint32_t seed = 12345;
	char s[40];
	for (int round = 0; round < 40000; round++) {
		size_t len = 1 + round % (sizeof(s) - 1);
		for (size_t i = 0; i < len - 1; i++) {
			seed = seed * 1103515245u + 12345u;
			s[i] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
		}
		s[len - 1] = '\0';
		json_t *tmpl = json_string(s);
		struct err e1 = ERR_INIT, e2 = ERR_INIT;
		json_t *out = expr_resolve(tmpl, ctx, "$", &e1);
		bool ok = expr_check(tmpl, "$", &e2);
		cr_assert_eq(out != NULL, ok, "\"%s\": resolve %s, check %s", s,
			     e1.msg, e2.msg);
		if (!ok)
			cr_assert_str_eq(e1.msg, e2.msg);
		json_decref(out);
		json_decref(tmpl);
		/* And as a bare path. */
		out = expr_path(ctx, s, &e1);
		json_decref(out);
	}
	json_decref(ctx);
}

/* expr_sources */

struct seen {
	char names[16][32];
	int n;
};

static void
collect(const char *source, size_t len, void *arg)
{
	struct seen *s = arg;
	cr_assert_lt(s->n, 16);
	cr_assert_lt(len, 32);
	cr_assert_eq(source[len], '\0');
	memcpy(s->names[s->n], source, len);
	s->names[s->n][len] = '\0';
	s->n++;
}

static void
assert_sources(const char *tmpl_text, const char *const *want, int n)
{
	json_t *tmpl = parse(tmpl_text);
	struct seen s = {{{0}}, 0};
	expr_sources(tmpl, collect, &s);
	cr_assert_eq(s.n, n, "%s: %d sources, want %d", tmpl_text, s.n, n);
	for (int i = 0; i < n; i++)
		cr_assert_str_eq(s.names[i], want[i], "%s: source %d",
				 tmpl_text, i);
	json_decref(tmpl);
}

Test(sources, distinct_in_order_of_appearance)
{
	static const char *const want[] = {"workflow", "t1", "t2"};
	assert_sources("{\"a\": \"${workflow.input.x}\","
		       " \"b\": [\"${t1.output} and ${workflow.input.y}\","
		       "        {\"c\": \"${t2.output[0]}\"}],"
		       " \"d\": \"${t1.status}\"}",
		       want, 3);
}

Test(sources, nested_ones_count_and_dynamic_ones_do_not)
{
	static const char *const want[] = {"t2", "workflow", "t3"};
	/* t2 is inside a path whose own source is "workflow"; the source of
	 * the third expression is computed, so only its inner one counts. */
	assert_sources("[\"${workflow.input.${t2.output.key}}\","
		       " \"${${t3.output.name}.output}\","
		       " \"${wf${t3.x}.y}\"]",
		       want, 3);
}

Test(sources, escaped_and_empty_ones_are_ignored)
{
	static const char *const want[] = {"real"};
	assert_sources("[\"$${fake.output}\", \"${}\", \"${real.x}\","
		       " \"$$${alsofake}\", 5, null]",
		       want, 1);
}

Test(sources, quoted_and_rooted_sources)
{
	static const char *const want[] = {"my task", "workflow", "a.b"};
	assert_sources("[\"${['my task'].output}\", \"${$.workflow.input}\","
		       " \"${$['a.b'].x}\"]",
		       want, 3);
}

Test(sources, malformed_strings_are_skipped_not_fatal)
{
	static const char *const want[] = {"good", "later"};
	assert_sources("[\"${good.x}\", \"${bad[\", \"${later.y}\"]", want, 2);
	expr_sources(NULL, collect, NULL); /* no template: no calls */
}

Test(limits, wildcards_over_shared_values_are_capped, .timeout = 60)
{
	/* Each level holds its child twice (shared, not copied), so 23
	 * wildcards would select 2^23 values from a tiny document. */
	json_t *v = json_integer(1);
	for (int i = 0; i < 23; i++) {
		json_t *a = json_array();
		json_array_append(a, v);
		json_array_append_new(a, v);
		v = a;
	}
	json_t *ctx = json_pack("{s:o}", "w", v);
	char *path = repeat("[*]", 23, "", "");
	char text[128];
	snprintf(text, sizeof(text), "${w%s}", path);
	json_t *tmpl = json_string(text);
	struct err e = ERR_INIT;
	cr_assert_null(expr_resolve(tmpl, ctx, "$.p", &e));
	cr_assert(strstr(e.msg, "$.p: the path selects more than 4194304"),
		  "%s", e.msg);
	cr_assert(expr_check(tmpl, "$.p", &e), "a data limit, not syntax");
	json_decref(tmpl);
	free(path);
	json_decref(ctx);
}
