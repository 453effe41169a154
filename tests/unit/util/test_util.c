/* Unit tests of src/util: buffers, arenas, errors and the JSON funnel. */
#include "util/arena.h"
#include "util/err.h"
#include "util/json.h"
#include "util/strbuf.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

Test(strbuf, appends_and_formats)
{
	struct strbuf sb = STRBUF_INIT;
	cr_assert_str_eq(sb_str(&sb), "");
	sb_puts(&sb, "abc");
	sb_printf(&sb, "-%d-", 42);
	sb_putc(&sb, 'z');
	cr_assert_str_eq(sb_str(&sb), "abc-42-z");
	cr_assert_eq(sb.len, 8);
	for (int i = 0; i < 1000; i++)
		sb_puts(&sb, "0123456789");
	cr_assert_eq(sb.len, 10008);
	char *s = sb_steal(&sb);
	cr_assert_eq(sb.len, 0);
	cr_assert_eq(strlen(s), 10008);
	free(s);
}

Test(arena, allocations_are_aligned_and_reset)
{
	struct arena a = ARENA_INIT;
	for (int i = 1; i < 5000; i += 7) {
		void *p = arena_alloc(&a, (size_t)i);
		cr_assert_eq((uintptr_t)p % _Alignof(max_align_t), 0);
		memset(p, 0xab, (size_t)i);
	}
	char *big = arena_zalloc(&a, 1 << 20);
	cr_assert_eq(big[12345], 0);
	cr_assert_str_eq(arena_printf(&a, "%s-%d", "x", 7), "x-7");
	arena_reset(&a);
	cr_assert_str_eq(arena_strdup(&a, "again"), "again");
	arena_free(&a);
}

Test(err, codes_map_to_wire_names_and_statuses)
{
	struct err e = ERR_INIT;
	err_set(&e, ERR_NOT_FOUND, "workflow %s not found", "w1");
	cr_assert_str_eq(e.msg, "workflow w1 not found");
	cr_assert_str_eq(err_code_name(e.code), "not_found");
	cr_assert_eq(err_http_status(e.code), 404);
	err_prefix(&e, "loading %s", "x");
	cr_assert_str_eq(e.msg, "loading x: workflow w1 not found");
	cr_assert_eq(err_http_status(ERR_INVALID), 400);
	cr_assert_eq(err_http_status(ERR_UNAVAILABLE), 503);
}

Test(err, prefix_truncates_instead_of_overflowing)
{
	struct err e = ERR_INIT;
	char long_msg[1000];
	memset(long_msg, 'm', sizeof(long_msg) - 1);
	long_msg[sizeof(long_msg) - 1] = '\0';
	err_set(&e, ERR_DB, "%s", long_msg);
	err_prefix(&e, "%s", long_msg);
	cr_assert_eq(strlen(e.msg), sizeof(e.msg) - 1);
}

static char *
cleaned(const char *text)
{
	struct strbuf sb = STRBUF_INIT;
	json_db_clean(&sb, text, strlen(text));
	return sb_steal(&sb);
}

Test(json_funnel, strips_nul_escapes_only)
{
	char *s = cleaned("{\"a\":\"x\\u0000y\",\"b\":\"\\\\u0000\"}");
	/* The NUL escape goes; an escaped backslash followed by u0000 is
	 * content and stays. */
	cr_assert_str_eq(s, "{\"a\":\"xy\",\"b\":\"\\\\u0000\"}");
	free(s);
	s = cleaned("\"\\u0000\\u0000\"");
	cr_assert_str_eq(s, "\"\"");
	free(s);
	s = cleaned("\"\\\\\\u0000\"");
	cr_assert_str_eq(s, "\"\\\\\"");
	free(s);
	s = cleaned("\"\\u00001\"");
	cr_assert_str_eq(s, "\"1\"");
	free(s);
}

Test(json_funnel, serialises_values_with_nul)
{
	json_t *v = json_pack("{s:s#}", "body", "ok\0tail", (int)7);
	char *text = json_db_text(v);
	cr_assert_str_eq(text, "{\"body\":\"oktail\"}");
	free(text);
	json_decref(v);
}

Test(json_parse, reports_line_and_column)
{
	struct err e = ERR_INIT;
	const char *doc = "{\"a\": 1,\n \"b\": [1, 2,, 3]}";
	cr_assert_null(json_parse(doc, strlen(doc), 0, &e));
	cr_assert_eq(e.code, ERR_BAD_JSON);
	cr_assert(strstr(e.msg, "line 2"), "%s", e.msg);
	cr_assert(strstr(e.msg, "column"), "%s", e.msg);
}

Test(json_parse, enforces_depth)
{
	struct err e = ERR_INIT;
	const char *deep = "[[[[[[1]]]]]]";
	cr_assert_null(json_parse(deep, strlen(deep), 5, &e));
	cr_assert(strstr(e.msg, "deeper"), "%s", e.msg);
	json_t *v = json_parse(deep, strlen(deep), 6, &e);
	cr_assert_not_null(v);
	json_decref(v);
}

Test(json_parse, accepts_nul_escapes)
{
	struct err e = ERR_INIT;
	const char *doc = "{\"s\":\"a\\u0000b\"}";
	json_t *v = json_parse(doc, strlen(doc), 0, &e);
	cr_assert_not_null(v, "%s", e.msg);
	cr_assert_eq(json_string_length(json_object_get(v, "s")), 3);
	json_decref(v);
}
