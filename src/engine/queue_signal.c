#include "engine/queue_signal.h"

#include "engine/channel.h"

#include "store/db.h"
#include "store/notify.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PostgreSQL caps a payload at 8000 bytes; past that, signal everything. */
enum { MAX_PAYLOAD = 7900 };

/* This process's listener, set once by queue_signal_start. */
static struct {
	queue_signal_fn *fn;
	void *arg;
} listener;
static atomic_bool listening;

/* The first line of this process's payloads. */
static char origin[40];
static pthread_once_t origin_once = PTHREAD_ONCE_INIT;

static void
make_origin(void)
{
	char id[37];
	uuid_v7(id);
	snprintf(origin, sizeof(origin), "@%s", id);
}

void
queue_signal_add(json_t *queues, const char *queue, unsigned long tasks)
{
	json_int_t had = json_integer_value(json_object_get(queues, queue));
	json_object_set_new(queues, queue,
			    json_integer(had + (json_int_t)tasks));
}

static bool
send_payload(struct db *db, const json_t *queues, struct err *e)
{
	pthread_once(&origin_once, make_origin);
	struct strbuf sb = STRBUF_INIT;
	sb_puts(&sb, origin);
	size_t head = sb.len;
	const char *name;
	json_t *count;
	if (queues)
		json_object_foreach ((json_t *)queues, name, count)
			sb_printf(&sb, "\n%s\t%lu", name,
				  (unsigned long)json_integer_value(count));
	if (!queues || sb.len > MAX_PAYLOAD) {
		sb.len = head;
		sb_puts(&sb, "\n*");
	}
	bool ok = sb.len == head || notify_queues(db, sb_str(&sb), e);
	sb_free(&sb);
	return ok;
}

bool
queue_signal_send(struct db *db, const json_t *queues, struct err *e)
{
	return send_payload(db, queues, e);
}

bool
queue_signal_send_all(struct db *db, struct err *e)
{
	return send_payload(db, NULL, e);
}

void
queue_signal_local(const json_t *queues)
{
	if (!atomic_load(&listening))
		return;
	const char *name;
	json_t *count;
	json_object_foreach ((json_t *)queues, name, count)
		listener.fn(name, (unsigned long)json_integer_value(count),
			    listener.arg);
}

/* One line of a payload: "*", a queue name, or a name, a tab and a count. */
static void
on_line(const char *line, size_t len)
{
	if (len == 1 && line[0] == '*') {
		listener.fn(NULL, 0, listener.arg);
		return;
	}
	const char *tab = memrchr(line, '\t', len);
	unsigned long n = 0;
	size_t name_len = len;
	if (tab && tab + 1 < line + len && line + len - tab <= 10) {
		const char *d = tab + 1;
		while (d < line + len && *d >= '0' && *d <= '9')
			n = n * 10 + (unsigned long)(*d++ - '0');
		if (d == line + len)
			name_len = (size_t)(tab - line);
		else
			n = 0;
	}
	char *name = xstrndup(line, name_len);
	listener.fn(name, n, listener.arg);
	free(name);
}

static void
on_payload(const char *payload, void *arg)
{
	(void)arg;
	const char *p = payload;
	if (*p == '@') { /* the sender; this process delivered its own */
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		pthread_once(&origin_once, make_origin);
		if (len == strlen(origin) && memcmp(p, origin, len) == 0)
			return;
		p += len + (nl ? 1 : 0);
	}
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len)
			on_line(p, len);
		p += len + (nl ? 1 : 0);
	}
}

/* Whatever was signalled while nobody was listening. */
static void
on_connect(void *arg)
{
	(void)arg;
	listener.fn(NULL, 0, listener.arg);
}

static void
finish(void *arg)
{
	(void)arg;
	atomic_store(&listening, false);
}

struct loop *
queue_signal_start(const char *url, queue_signal_fn *fn, void *arg)
{
	listener.fn = fn;
	listener.arg = arg;
	atomic_store(&listening, true);
	struct channel_opts o = {
		.name = "queue-signal",
		.url = url,
		.channel = "node_flow_task_queues",
		.on_payload = on_payload,
		.on_connect = on_connect,
		.on_finish = finish,
		.arg = NULL,
	};
	return channel_start(&o);
}
