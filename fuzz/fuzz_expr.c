/* Expressions and JSONPath: the first byte picks what the rest is —
 * a template string, a JSON template, or a JSONPath. */
#include "fuzz.h"

#include "engine/expr.h"
#include "util/json.h"

static json_t *ctx;

static const char CTX[] =
	"{\"workflow\":{\"input\":{\"a\":1,\"b\":\"x\",\"r\":19.99,"
	"\"arr\":[1,2,{\"c\":3},[4,5]],\"o\":{\"k\":\"v\",\"my key\":null},"
	"\"p\":\"o.k\",\"n\":\"arr\"},\"variables\":{}},"
	"\"t1\":{\"output\":{\"y\":[0,1,2],\"s\":\"a.b\",\"e\":{}}},"
	"\"my task\":{\"output\":[{\"x\":1},{\"x\":2}]}}";

static void
count_source(const char *source, size_t len, void *arg)
{
	FUZZ_CHECK(source[len] == '\0', "source not terminated");
	(*(size_t *)arg)++;
}

static void
check_template(const json_t *tmpl)
{
	struct err ce = ERR_INIT, re = ERR_INIT;
	bool checked = expr_check(tmpl, "$.t", &ce);
	json_t *out = expr_resolve(tmpl, ctx, "$.t", &re);
	/* expr_resolve fails exactly when expr_check does, but for the
	 * wildcard data limit (expr.h). */
	FUZZ_CHECK(checked == (out != NULL) || strstr(re.msg, "wildcard"),
		   "check %d (%s) but resolve %d (%s)", checked, ce.msg,
		   out != NULL, re.msg);
	json_t *none = expr_resolve(tmpl, NULL, NULL, &re);
	json_decref(none);
	size_t n = 0;
	expr_sources(tmpl, count_source, &n);
	json_decref(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ctx) {
		struct err e = ERR_INIT;
		ctx = json_parse(CTX, strlen(CTX), 0, &e);
		FUZZ_CHECK(ctx, "context: %s", e.msg);
	}
	if (size == 0)
		return 0;
	const char *rest = (const char *)data + 1;
	size_t n = size - 1;
	switch (data[0] % 3) {
	case 0: {
		/* Strings reach the engine from parsed JSON: valid UTF-8. */
		json_t *s = json_stringn(rest, n);
		if (s)
			check_template(s);
		json_decref(s);
		break;
	}
	case 1: {
		struct err e = ERR_INIT;
		json_t *tmpl = json_parse(rest, n, 64, &e);
		if (tmpl)
			check_template(tmpl);
		json_decref(tmpl);
		break;
	}
	default: {
		char *path = fuzz_cstr((const uint8_t *)rest, n);
		struct err e = ERR_INIT;
		json_t *v = expr_path(ctx, path, &e);
		FUZZ_CHECK(v || e.code != ERR_OK, "NULL without an error");
		json_decref(v);
		free(path);
		break;
	}
	}
	return 0;
}
