/*
 * metrics — process-wide counters and gauges, rendered in the Prometheus
 * text exposition format.
 *
 * A metric is registered once (by name plus an optional label set) and then
 * updated lock-free through the pointer returned.  Registering the same
 * name and labels twice returns the same metric.
 *
 * Threads: any; registration takes a mutex, updates are atomic.
 * Ownership: metrics live until the process exits.  Failure: none.
 */
#ifndef NF_RUNTIME_METRICS_H
#define NF_RUNTIME_METRICS_H

#include "util/strbuf.h"

#include <stdatomic.h>

enum metric_kind { METRIC_COUNTER, METRIC_GAUGE };

struct metric;

/* labels is "" or Prometheus label text such as `loop="decider"`. */
struct metric *metric_register(enum metric_kind kind, const char *name,
			       const char *labels, const char *help);
void metric_add(struct metric *m, long long delta);
void metric_set(struct metric *m, long long value);
long long metric_get(const struct metric *m);
/* Appends every metric, grouped by name with HELP and TYPE lines. */
void metrics_render(struct strbuf *out);

#endif
