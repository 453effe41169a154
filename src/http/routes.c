#include "http/routes.h"

#include "http/ops.h"

const struct http_route http_routes[] = {
	{"GET", "/healthz", ops_healthz},
	{"GET", "/readyz", ops_readyz},
	{"GET", "/metrics", ops_metrics},
};

const size_t http_routes_count = sizeof(http_routes) / sizeof(http_routes[0]);
