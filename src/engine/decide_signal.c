#include "engine/decide_signal.h"

#include "engine/channel.h"
#include "engine/decide_loop.h"

#include "runtime/metrics.h"
#include "store/db.h"
#include "store/notify.h"
#include "util/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* The sender: one per process, set while it runs. */
static pthread_mutex_t sender_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop *sender;
static atomic_bool pending;
static struct db *sender_db; /* the sender thread's own */
static char *sender_url;
static struct metric *m_sent;

static enum loop_result
send_tick(void *arg, struct arena *scratch, struct err *e)
{
	(void)arg;
	(void)scratch;
	if (!atomic_exchange(&pending, false))
		return LOOP_IDLE;
	if (!sender_db && !db_open(&sender_db, sender_url, DB_PLAIN, e)) {
		atomic_store(&pending, true); /* sent after the backoff */
		return LOOP_ERROR;
	}
	if (!notify_decide(sender_db, e)) {
		db_close(sender_db);
		sender_db = NULL;
		atomic_store(&pending, true);
		return LOOP_ERROR;
	}
	metric_add(m_sent, 1);
	return LOOP_IDLE; /* a raise during the send cuts the sleep short */
}

static void
send_finish(void *arg)
{
	(void)arg;
	db_close(sender_db);
	sender_db = NULL;
	free(sender_url);
	sender_url = NULL;
}

static const struct loop_def send_def = {
	.name = "decide-signal",
	.tick = send_tick,
	.finish = send_finish,
	.interval_ms = 1000,
	.max_backoff_ms = 5000,
};

void
decide_signal_send_start(const char *url)
{
	m_sent = metric_register(
		METRIC_COUNTER, "nodeflow_decide_signals_sent_total", "",
		"Notifications that woke other replicas' deciders (sent by a "
		"process that runs none)");
	sender_url = xstrdup(url);
	pthread_mutex_lock(&sender_lock);
	sender = loop_start(&send_def, NULL);
	pthread_mutex_unlock(&sender_lock);
}

void
decide_signal_send_stop(void)
{
	pthread_mutex_lock(&sender_lock);
	struct loop *l = sender;
	sender = NULL;
	pthread_mutex_unlock(&sender_lock);
	loop_stop(l);
}

void
decide_signal_raise(void)
{
	atomic_store(&pending, true);
	pthread_mutex_lock(&sender_lock);
	if (sender)
		loop_wake(sender);
	pthread_mutex_unlock(&sender_lock);
}

static void
on_payload(const char *payload, void *arg)
{
	(void)payload;
	(void)arg;
	decide_loop_wake();
}

/* Whatever was raised while nobody was listening. */
static void
on_connect(void *arg)
{
	(void)arg;
	decide_loop_wake();
}

struct loop *
decide_signal_listen(const char *url)
{
	struct channel_opts o = {
		.name = "decide-listen",
		.url = url,
		.channel = "node_flow_decide",
		.on_payload = on_payload,
		.on_connect = on_connect,
	};
	return channel_start(&o);
}
