#include "engine/queue_signal.h"

#include "engine/channel.h"

#include "store/db.h"
#include "store/notify.h"
#include "util/mem.h"
#include "util/strbuf.h"

#include <stdlib.h>
#include <string.h>

/* PostgreSQL caps a payload at 8000 bytes; past that, signal everything. */
enum { MAX_PAYLOAD = 7900 };

bool
queue_signal_send(struct db *db, const json_t *queues, struct err *e)
{
	struct strbuf sb = STRBUF_INIT;
	size_t i;
	json_t *q;
	json_array_foreach (queues, i, q) {
		const char *name = json_string_value(q);
		if (!name)
			continue;
		/* Skip a name already in the payload (a batch repeats them). */
		bool seen = false;
		for (size_t k = 0; k < i && !seen; k++) {
			const char *other =
				json_string_value(json_array_get(queues, k));
			seen = other && strcmp(other, name) == 0;
		}
		if (seen)
			continue;
		if (sb.len)
			sb_putc(&sb, '\n');
		sb_puts(&sb, name);
	}
	if (sb.len == 0) {
		sb_free(&sb);
		return true;
	}
	bool ok =
		notify_queues(db, sb.len > MAX_PAYLOAD ? "*" : sb_str(&sb), e);
	sb_free(&sb);
	return ok;
}

bool
queue_signal_send_all(struct db *db, struct err *e)
{
	return notify_queues(db, "*", e);
}

struct signal_listener {
	queue_signal_fn *fn;
	void *arg;
};

static void
on_payload(const char *payload, void *arg)
{
	struct signal_listener *l = arg;
	if (strcmp(payload, "*") == 0) {
		l->fn(NULL, l->arg);
		return;
	}
	const char *p = payload;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len) {
			char *name = xstrndup(p, len);
			l->fn(name, l->arg);
			free(name);
		}
		p += len + (nl ? 1 : 0);
	}
}

/* Whatever was signalled while nobody was listening. */
static void
on_connect(void *arg)
{
	struct signal_listener *l = arg;
	l->fn(NULL, l->arg);
}

static void
finish(void *arg)
{
	free(arg);
}

struct loop *
queue_signal_start(const char *url, queue_signal_fn *fn, void *arg)
{
	struct signal_listener *l = xcalloc(1, sizeof(*l));
	l->fn = fn;
	l->arg = arg;
	struct channel_opts o = {
		.name = "queue-signal",
		.url = url,
		.channel = "node_flow_task_queues",
		.on_payload = on_payload,
		.on_connect = on_connect,
		.on_finish = finish,
		.arg = l,
	};
	return channel_start(&o);
}
