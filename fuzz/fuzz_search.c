/* The list API's search terms: `q=input.a.b:1 output.x:"y"`. */
#include "fuzz.h"

#include "http/workflows.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *q = fuzz_cstr(data, size);
	json_t *in, *out;
	struct err e = ERR_INIT;
	bool ok = workflows_search_terms(q, &in, &out, &e);
	if (ok) {
		FUZZ_CHECK(!in || json_is_object(in), "input not an object");
		FUZZ_CHECK(!out || json_is_object(out), "output not an object");
	} else {
		FUZZ_CHECK(!in && !out && e.code == ERR_INVALID,
			   "failed but returned objects");
	}
	json_decref(in);
	json_decref(out);
	free(q);
	return 0;
}
