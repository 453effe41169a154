#include "runtime/loop.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "util/mem.h"
#include "util/timeutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { BACKOFF_START_MS = 1000 };

struct loop {
	const struct loop_def *def;
	void *ctx;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	bool stop;
	bool woken;
	struct metric *ticks;
	struct metric *errors;
};

/* Sleeps up to ms unless woken or stopped; returns false once stopping. */
static bool
nap(struct loop *l, int ms)
{
	struct timespec until = mono_deadline(ms);
	pthread_mutex_lock(&l->lock);
	while (!l->stop && !l->woken) {
		if (pthread_cond_timedwait(&l->cond, &l->lock, &until) != 0)
			break;
	}
	l->woken = false;
	bool go_on = !l->stop;
	pthread_mutex_unlock(&l->lock);
	return go_on;
}

static bool
stopping(struct loop *l)
{
	pthread_mutex_lock(&l->lock);
	bool s = l->stop;
	pthread_mutex_unlock(&l->lock);
	return s;
}

static void *
run(void *arg)
{
	struct loop *l = arg;
	const struct loop_def *def = l->def;
	struct arena scratch = ARENA_INIT;
	int backoff = 0;

	log_debug(def->name, "loop started");
	while (!stopping(l)) {
		struct err e = ERR_INIT;
		enum loop_result r = def->tick(l->ctx, &scratch, &e);
		arena_reset(&scratch);
		metric_add(l->ticks, 1);
		switch (r) {
		case LOOP_BUSY: backoff = 0; continue;
		case LOOP_IDLE:
			backoff = 0;
			nap(l, def->interval_ms);
			break;
		case LOOP_ERROR:
			metric_add(l->errors, 1);
			backoff = backoff ? backoff * 2 : BACKOFF_START_MS;
			if (backoff > def->max_backoff_ms)
				backoff = def->max_backoff_ms;
			if (backoff < BACKOFF_START_MS)
				backoff = BACKOFF_START_MS;
			log_error(def->name, "%s (retrying in %d ms)", e.msg,
				  backoff);
			nap(l, backoff);
			break;
		}
	}
	arena_free(&scratch);
	log_debug(def->name, "loop stopped");
	/* Last: finish may free the definition itself. */
	if (def->finish)
		def->finish(l->ctx);
	return NULL;
}

struct loop *
loop_start(const struct loop_def *def, void *ctx)
{
	struct loop *l = xcalloc(1, sizeof(*l));
	l->def = def;
	l->ctx = ctx;
	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &attr);
	pthread_condattr_destroy(&attr);

	char labels[96];
	snprintf(labels, sizeof(labels), "loop=\"%s\"", def->name);
	l->ticks = metric_register(METRIC_COUNTER, "nodeflow_loop_ticks_total",
				   labels, "Ticks run by each engine loop");
	l->errors =
		metric_register(METRIC_COUNTER, "nodeflow_loop_errors_total",
				labels, "Ticks that failed, per engine loop");
	if (pthread_create(&l->thread, NULL, run, l) != 0) {
		fprintf(stderr, "fatal: could not start loop thread %s\n",
			def->name);
		abort();
	}
	return l;
}

void
loop_wake(struct loop *l)
{
	pthread_mutex_lock(&l->lock);
	l->woken = true;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

void
loop_stop(struct loop *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
