#include "http/ui.h"

#include <string.h>

const struct ui_asset *
ui_find(const char *name)
{
	for (size_t i = 0; i < ui_assets_count; i++) {
		if (strcmp(ui_assets[i].name, name) == 0)
			return &ui_assets[i];
	}
	return NULL;
}

/* Whether an If-None-Match list names etag (or is "*"). */
static bool
etag_matches(const char *header, const char *etag)
{
	if (!header)
		return false;
	if (strcmp(header, "*") == 0)
		return true;
	size_t n = strlen(etag);
	for (const char *p = strstr(header, etag); p; p = strstr(p + 1, etag)) {
		char after = p[n];
		if (after == '\0' || after == ',' || after == ' ')
			return true;
	}
	return false;
}

static void
serve(struct http_request *req, struct http_response *res,
      const struct ui_asset *a)
{
	http_add_header(res, "ETag", a->etag);
	http_add_header(res, "Cache-Control", "no-cache");
	http_add_header(res, "X-Content-Type-Options", "nosniff");
	if (etag_matches(http_header(req, "If-None-Match"), a->etag)) {
		res->status = 304;
		res->content_type = NULL;
		sb_reset(&res->body);
		return;
	}
	if (strcmp(a->name, "index.html") == 0)
		http_add_header(res, "Content-Security-Policy",
				"default-src 'self'; img-src 'self' data:; "
				"style-src 'self' 'unsafe-inline'");
	res->status = 200;
	res->content_type = a->content_type;
	sb_reset(&res->body);
	sb_append(&res->body, a->data, a->len);
}

void
ui_index(struct http_request *req, struct http_response *res)
{
	const struct ui_asset *a = ui_find("index.html");
	if (!a) {
		http_fail(res, ERR_NOT_FOUND, "this build has no dashboard");
		return;
	}
	serve(req, res, a);
}

void
ui_file(struct http_request *req, struct http_response *res)
{
	const char *name = http_param(req, "file");
	const struct ui_asset *a = name ? ui_find(name) : NULL;
	if (!a) {
		http_fail(res, ERR_NOT_FOUND, "no dashboard file %s",
			  name ? name : "");
		return;
	}
	serve(req, res, a);
}
