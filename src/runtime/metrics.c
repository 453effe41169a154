#include "runtime/metrics.h"

#include "util/mem.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

struct metric {
	struct metric *next;
	enum metric_kind kind;
	char *name;
	char *labels;
	char *help;
	atomic_llong value;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct metric *registry_head;
static struct metric **registry_tail = &registry_head;

struct metric *
metric_register(enum metric_kind kind, const char *name, const char *labels,
		const char *help)
{
	pthread_mutex_lock(&registry_lock);
	for (struct metric *m = registry_head; m; m = m->next) {
		if (strcmp(m->name, name) == 0 &&
		    strcmp(m->labels, labels) == 0) {
			pthread_mutex_unlock(&registry_lock);
			return m;
		}
	}
	struct metric *m = xcalloc(1, sizeof(*m));
	m->kind = kind;
	m->name = xstrdup(name);
	m->labels = xstrdup(labels);
	m->help = xstrdup(help);
	atomic_init(&m->value, 0);
	/* Appended, so that metrics of one name stay together when they were
	 * registered together; render groups by name regardless. */
	*registry_tail = m;
	registry_tail = &m->next;
	pthread_mutex_unlock(&registry_lock);
	return m;
}

void
metric_add(struct metric *m, long long delta)
{
	atomic_fetch_add_explicit(&m->value, delta, memory_order_relaxed);
}

void
metric_set(struct metric *m, long long value)
{
	atomic_store_explicit(&m->value, value, memory_order_relaxed);
}

long long
metric_get(const struct metric *m)
{
	return atomic_load_explicit(&((struct metric *)m)->value,
				    memory_order_relaxed);
}

void
metrics_render(struct strbuf *out)
{
	pthread_mutex_lock(&registry_lock);
	for (struct metric *m = registry_head; m; m = m->next) {
		/* Print a name's block once, at its first occurrence. */
		bool seen = false;
		for (struct metric *p = registry_head; p != m; p = p->next) {
			if (strcmp(p->name, m->name) == 0) {
				seen = true;
				break;
			}
		}
		if (seen)
			continue;
		sb_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help,
			  m->name,
			  m->kind == METRIC_COUNTER ? "counter" : "gauge");
		for (struct metric *q = m; q; q = q->next) {
			if (strcmp(q->name, m->name) != 0)
				continue;
			if (q->labels[0])
				sb_printf(out, "%s{%s} %lld\n", q->name,
					  q->labels, metric_get(q));
			else
				sb_printf(out, "%s %lld\n", q->name,
					  metric_get(q));
		}
	}
	pthread_mutex_unlock(&registry_lock);
}
