/*
 * channel — the one engine loop that LISTENs on a notification channel:
 * it connects, waits for notifications, hands each payload on, and after a
 * lost connection logs, backs off (the loop skeleton's) and connects again.
 * The event listener and the queue signal are thin users of it.
 *
 * Notifications are hints: those sent while the loop was reconnecting are
 * lost, so on_connect (may be NULL) is called after every (re)connection to
 * let the user catch up on whatever it may have missed.
 *
 * Threads: the loop has its own thread and connection; the callbacks run
 * there and must not block.  Ownership: `arg` stays the caller's until
 * on_finish (may be NULL) is called on the loop's thread as it stops.
 */
#ifndef NF_ENGINE_CHANNEL_H
#define NF_ENGINE_CHANNEL_H

#include "runtime/loop.h"
#include "store/notify.h"

struct channel_opts {
	const char *name; /* the loop's name in logs and metrics */
	const char *url;
	const char *channel; /* a channel store/notify.h knows */
	notify_fn *on_payload;
	void (*on_connect)(void *arg);
	void (*on_finish)(void *arg);
	void *arg;
};

struct loop *channel_start(const struct channel_opts *o);

#endif
