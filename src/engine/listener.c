#include "engine/listener.h"

#include "engine/channel.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/notify.h"
#include "util/mem.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char CHANNEL[] = "node_flow_workflow_events";

bool
listener_parse(const char *payload, struct workflow_event_ref *out)
{
	if (!payload || strlen(payload) < 38 || payload[36] != ':')
		return false;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? payload[i] != '-'
			 : !isxdigit((unsigned char)payload[i]))
			return false;
	}
	const char *s = payload + 37;
	int64_t seq = 0;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return false;
		int digit = *s - '0';
		/* Exact: every bigint seq up to INT64_MAX parses. */
		if (seq > (INT64_MAX - digit) / 10)
			return false;
		seq = seq * 10 + digit;
	}
	memcpy(out->workflow_id, payload, 36);
	out->workflow_id[36] = '\0';
	out->seq = seq;
	return true;
}

struct listener {
	listener_fn *fn;
	void (*on_connect)(void *arg);
	void *arg;
	struct metric *received;
	struct metric *ignored;
};

static void
on_payload(const char *payload, void *arg)
{
	struct listener *l = arg;
	struct workflow_event_ref ev;
	if (!listener_parse(payload, &ev)) {
		metric_add(l->ignored, 1);
		log_debug("listener",
			  "ignored notification with payload \"%.80s\"",
			  payload);
		return;
	}
	metric_add(l->received, 1);
	l->fn(&ev, l->arg);
}

static void
connected(void *arg)
{
	struct listener *l = arg;
	if (l->on_connect)
		l->on_connect(l->arg);
}

static void
finish(void *arg)
{
	free(arg);
}

struct loop *
listener_start(const char *url, listener_fn *fn, void *arg)
{
	return listener_start_ex(url, fn, NULL, arg);
}

struct loop *
listener_start_ex(const char *url, listener_fn *fn,
		  void (*on_connect)(void *arg), void *arg)
{
	struct listener *l = xcalloc(1, sizeof(*l));
	l->fn = fn;
	l->on_connect = on_connect;
	l->arg = arg;
	l->received = metric_register(
		METRIC_COUNTER, "nodeflow_listener_notifications_total", "",
		"Workflow event notifications received");
	l->ignored = metric_register(
		METRIC_COUNTER, "nodeflow_listener_ignored_total", "",
		"Notifications ignored because their payload did not parse");
	struct channel_opts o = {
		.name = "listener",
		.url = url,
		.channel = CHANNEL,
		.on_payload = on_payload,
		.on_connect = connected,
		.on_finish = finish,
		.arg = l,
	};
	return channel_start(&o);
}
