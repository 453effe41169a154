/*
 * ui — the dashboard: its files (ui/ in the source tree), embedded in the
 * binary at build time by tools/embed_ui.py, and the handlers that serve
 * them.  `GET /` answers index.html, `GET /ui/{file}` the others.  The
 * dashboard itself speaks only the public API (docs/api.md, docs/ui.md).
 *
 * Every answer carries the file's ETag (a hash of its bytes) and
 * `Cache-Control: no-cache`: a browser revalidates and gets 304 until a
 * new build changes the file.  No internet is needed: nothing is loaded
 * from elsewhere (a Content-Security-Policy of 'self' says so).
 *
 * Threads: any; the table is constant.  Failure: 404 JSON for a file that
 * is not embedded.
 */
#ifndef NF_HTTP_UI_H
#define NF_HTTP_UI_H

#include "http/http.h"

#include <stddef.h>

struct ui_asset {
	const char *name;
	const char *content_type;
	const char *etag;
	const unsigned char *data;
	size_t len;
};

/* Generated (tools/embed_ui.py, ui/meson.build). */
extern const struct ui_asset ui_assets[];
extern const size_t ui_assets_count;

/* The embedded file of that name, or NULL. */
const struct ui_asset *ui_find(const char *name);

void ui_index(struct http_request *req, struct http_response *res);
void ui_file(struct http_request *req, struct http_response *res);

#endif
