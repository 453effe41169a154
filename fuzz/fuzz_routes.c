/* Request routing: "METHOD PATH" through the server's route table (each
 * handler replaced by a stub), to a handler, a 405 with Allow, or a 404,
 * whose JSON error body quotes the path as valid UTF-8. */
#include "fuzz.h"

#include "http/routes.h"
#include "util/json.h"

enum { MAX_ROUTES = 256 };

static struct http_route table[MAX_ROUTES];
static size_t ntable;

static void
stub(struct http_request *req, struct http_response *res)
{
	for (int i = 0; i < req->nparams; i++)
		FUZZ_CHECK(req->param_values[i][0] != '\0' &&
				   !strchr(req->param_values[i], '/'),
			   "parameter %s is \"%s\"", req->param_names[i],
			   req->param_values[i]);
	res->status = 200;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ntable) {
		FUZZ_CHECK(http_routes_count <= MAX_ROUTES, "too many routes");
		for (size_t i = 0; i < http_routes_count; i++) {
			table[i] = http_routes[i];
			table[i].handler = stub;
		}
		ntable = http_routes_count;
	}
	char *line = fuzz_cstr(data, size);
	char *sp = strchr(line, ' ');
	const char *method = "GET", *path = line;
	if (sp) {
		*sp = '\0';
		method = line;
		path = sp + 1;
	}
	struct arena arena = ARENA_INIT;
	struct http_request req = {
		.method = method, .path = path, .body = "", .arena = &arena};
	struct http_response res = {.status = 0};
	http_dispatch(table, ntable, &req, &res);
	FUZZ_CHECK(res.status == 200 || res.status == 404 || res.status == 405,
		   "status %d", res.status);
	if (res.status != 200) {
		struct err e = ERR_INIT;
		json_t *body = json_parse(sb_str(&res.body), res.body.len, 0,
					  &e);
		FUZZ_CHECK(body && json_is_object(json_object_get(body,
								  "error")),
			   "error body is not JSON: %s", sb_str(&res.body));
		json_decref(body);
	}
	sb_free(&res.body);
	arena_free(&arena);
	free(line);
	return 0;
}
