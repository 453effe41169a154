#include "engine/channel.h"

#include "util/mem.h"

#include <stdlib.h>

enum { WAIT_MS = 500 };

struct channel {
	struct loop_def def;
	struct channel_opts opts; /* its strings are copies */
	struct notify_conn *conn;
};

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct channel *c = arg;
	(void)scratch;
	if (!c->conn) {
		c->conn = notify_open(c->opts.url, c->opts.channel, e);
		if (!c->conn)
			return LOOP_ERROR;
		if (c->opts.on_connect)
			c->opts.on_connect(c->opts.arg);
	}
	if (!notify_wait(c->conn, WAIT_MS, c->opts.on_payload, c->opts.arg,
			 e)) {
		notify_close(c->conn);
		c->conn = NULL;
		return LOOP_ERROR;
	}
	return LOOP_BUSY; /* the wait itself is the pause */
}

static void
finish(void *arg)
{
	struct channel *c = arg;
	notify_close(c->conn);
	if (c->opts.on_finish)
		c->opts.on_finish(c->opts.arg);
	free((char *)c->opts.name);
	free((char *)c->opts.url);
	free((char *)c->opts.channel);
	free(c);
}

struct loop *
channel_start(const struct channel_opts *o)
{
	struct channel *c = xcalloc(1, sizeof(*c));
	c->opts = *o;
	c->opts.name = xstrdup(o->name);
	c->opts.url = xstrdup(o->url);
	c->opts.channel = xstrdup(o->channel);
	c->def = (struct loop_def){
		.name = c->opts.name,
		.tick = tick,
		.finish = finish,
		.interval_ms = WAIT_MS,
		.max_backoff_ms = 10000,
	};
	return loop_start(&c->def, c);
}
