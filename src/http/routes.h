/*
 * routes — the route table of the HTTP API: every endpoint, its method and
 * its handler, in one place.
 */
#ifndef NF_HTTP_ROUTES_H
#define NF_HTTP_ROUTES_H

#include "http/http.h"

extern const struct http_route http_routes[];
extern const size_t http_routes_count;

#endif
