#include "util/json.h"

#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

void
json_db_clean(struct strbuf *out, const char *text, size_t len)
{
	size_t i = 0, run = 0;
	sb_reserve(out, len);
	while (i < len) {
		if (text[i] != '\\') {
			i++;
			continue;
		}
		/* An escape: "\u0000" is dropped, anything else is copied. */
		if (i + 5 < len && memcmp(text + i + 1, "u0000", 5) == 0) {
			sb_append(out, text + run, i - run);
			i += 6;
			run = i;
		} else {
			i += 2; /* the backslash and the character it escapes */
		}
	}
	if (run < len)
		sb_append(out, text + run, len - run);
}

char *
json_db_text(const json_t *v)
{
	char *raw = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!raw) /* only on allocation failure or an invalid value */
		return xstrdup("null");
	if (!strstr(raw, "\\u0000"))
		return raw;
	struct strbuf sb = STRBUF_INIT;
	json_db_clean(&sb, raw, strlen(raw));
	free(raw);
	return sb_steal(&sb);
}

static size_t
depth_of(const json_t *v)
{
	size_t max = 0, d;
	const char *key;
	json_t *child;
	size_t idx;

	if (json_is_object(v)) {
		json_object_foreach ((json_t *)v, key, child) {
			d = depth_of(child);
			if (d > max)
				max = d;
		}
		return max + 1;
	}
	if (json_is_array(v)) {
		json_array_foreach (v, idx, child) {
			d = depth_of(child);
			if (d > max)
				max = d;
		}
		return max + 1;
	}
	return 0;
}

json_t *
json_parse(const char *buf, size_t len, size_t max_depth, struct err *e)
{
	json_error_t je;
	json_t *v = json_loadb(buf, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (!v) {
		err_set(e, ERR_BAD_JSON,
			"invalid JSON at line %d, column %d: %s", je.line,
			je.column, je.text);
		return NULL;
	}
	if (max_depth && depth_of(v) > max_depth) {
		json_decref(v);
		err_set(e, ERR_BAD_JSON, "JSON nested deeper than %zu levels",
			max_depth);
		return NULL;
	}
	return v;
}
