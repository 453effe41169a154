/*
 * summary — the read-only overviews behind the dashboard's Queues and
 * Overview pages and its namespace switcher (docs/api.md, "Summaries"):
 *
 *   GET /v1/namespaces             every namespace
 *   GET /v1/ns/{ns}/queues         depth, in-flight and workers per queue
 *   GET /v1/ns/{ns}/stats          per-minute starts, completions and
 *                                  failures, slowest and most-failing
 *                                  definitions (?minutes=1..1440, 60)
 *
 * Each is one bounded statement (store/dashboard_repo.h).
 *
 * Threads: MHD's.  Failure: 503 without a database, 404 for an unknown
 * namespace, 400 for a bad argument.
 */
#ifndef NF_HTTP_SUMMARY_H
#define NF_HTTP_SUMMARY_H

#include "http/http.h"

void summary_namespaces(struct http_request *req, struct http_response *res);
void summary_queues(struct http_request *req, struct http_response *res);
void summary_stats(struct http_request *req, struct http_response *res);

#endif
