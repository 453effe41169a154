/*
 * ops — the operational endpoints: /healthz (the process is alive),
 * /readyz (it can serve: see platform/health.h; 503 with the reasons
 * otherwise) and /metrics (Prometheus text format).
 *
 * Threads: MHD's.  Ownership: none kept.  Failure: reported in the response.
 */
#ifndef NF_HTTP_OPS_H
#define NF_HTTP_OPS_H

#include "http/http.h"

http_handler ops_healthz;
http_handler ops_readyz;
http_handler ops_metrics;

#endif
