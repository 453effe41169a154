/* Request bodies: the JSON parser with the server's depth limit, the jsonb
 * funnel, and the field readers every handler applies to a body. */
#include "fuzz.h"

#include "http/fields.h"
#include "util/json.h"

#include <jansson.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err e = ERR_INIT;
	json_t *v = json_parse((const char *)data, size, 64, &e);
	if (!v) {
		FUZZ_CHECK(e.code == ERR_BAD_JSON, "code %d", e.code);
	} else {
		/* What goes to the database parses again, and holds no NUL
		 * (jansson refuses "\u0000" unless told to allow it). */
		char *text = json_db_text(v);
		FUZZ_CHECK(text, "no db text");
		json_error_t je;
		json_t *again =
			json_loadb(text, strlen(text), JSON_DECODE_ANY, &je);
		FUZZ_CHECK(again, "db text does not parse: %s: %s", je.text,
			   text);
		json_decref(again);
		free(text);
		if (json_is_object(v)) {
			struct dsl_errors errs = {0};
			field_str(v, "workerId", true, 255, &errs);
			field_int(v, "count", 1, 1, 1000, &errs);
			field_num(v, "delaySeconds", 0, 0, 31536000, &errs);
			field_bool(v, "terminal", false, &errs);
			field_obj(v, "output", &errs);
			json_decref(dsl_errors_json(&errs));
			dsl_errors_free(&errs);
		}
		json_decref(v);
	}
	/* The text funnel takes any bytes. */
	struct strbuf sb = STRBUF_INIT;
	json_db_clean(&sb, (const char *)data, size);
	FUZZ_CHECK(sb.len <= size, "clean grew %zu -> %zu", size, sb.len);
	sb_free(&sb);
	return 0;
}
