/* The list API's keyset cursors: any text decodes or is refused, and what
 * decodes encodes back to a cursor that decodes to the same. */
#include "fuzz.h"

#include "http/workflows.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *cursor = fuzz_cstr(data, size);
	char *at = NULL, *id = NULL;
	if (workflows_cursor_decode(cursor, &at, &id)) {
		char *again = workflows_cursor_encode(at, id);
		char *at2 = NULL, *id2 = NULL;
		FUZZ_CHECK(workflows_cursor_decode(again, &at2, &id2),
			   "re-encoded cursor %s refused", again);
		FUZZ_CHECK(strcmp(at, at2) == 0 && strcmp(id, id2) == 0,
			   "round trip changed the cursor");
		free(at2);
		free(id2);
		free(again);
	}
	free(at);
	free(id);
	free(cursor);
	return 0;
}
