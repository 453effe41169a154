#include "engine/sweeper.h"

#include "engine/decide_loop.h"
#include "engine/queue_signal.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "store/queue_repo.h"
#include "store/semaphores_repo.h"
#include "util/mem.h"
#include "util/timeutil.h"

#include <stdlib.h>

/* Semaphore holders are swept every HOLDERS_MS, rate-limit windows pruned
 * every PRUNE_MS (sooner while a batch comes back full). */
enum { BATCH = 500, HOLDERS_MS = 1000, PRUNE_MS = 60000 };

struct sweeper {
	struct loop_def def;
	char *url;
	struct db *db;
	void (*on_released)(void *arg);
	void *arg;
	struct metric *m_released;
	struct metric *m_expired;
	struct metric *m_holders;
	int64_t next_holders, next_prune;
};

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct sweeper *s = arg;
	(void)scratch;
	if (s->db && !db_healthy(s->db)) {
		db_close(s->db);
		s->db = NULL;
	}
	if (!s->db && !db_open(&s->db, s->url, DB_KEYED, e))
		return LOOP_ERROR;
	size_t released = 0, expired = 0;
	if (!queue_sweep_deferred(s->db, BATCH, &released, e) ||
	    !queue_sweep_expired(s->db, BATCH, &expired, e))
		return LOOP_ERROR;
	/* Semaphore holders whose lease ran out or whose task ended
	 * without giving its permit back (a terminated workflow). */
	size_t holders = 0, windows = 0;
	int64_t now = mono_ms();
	if (now >= s->next_holders) {
		if (!semaphores_sweep_holders(s->db, BATCH, &holders, e))
			return LOOP_ERROR;
		s->next_holders = holders == BATCH ? now : now + HOLDERS_MS;
	}
	if (now >= s->next_prune) {
		if (!semaphores_prune_rate_windows(s->db, BATCH, &windows, e))
			return LOOP_ERROR;
		s->next_prune = windows == BATCH ? now : now + PRUNE_MS;
	}
	metric_add(s->m_released, (long long)released);
	metric_add(s->m_expired, (long long)expired);
	metric_add(s->m_holders, (long long)holders);
	if (released || holders) {
		if (s->on_released)
			s->on_released(s->arg);
		struct err se = ERR_INIT;
		(void)queue_signal_send_all(s->db, &se);
	}
	if (expired)
		decide_loop_wake();
	return released == BATCH || expired == BATCH || holders == BATCH ||
			       windows == BATCH
		       ? LOOP_BUSY
		       : LOOP_IDLE;
}

static void
finish(void *arg)
{
	struct sweeper *s = arg;
	db_close(s->db);
	free(s->url);
	free(s);
}

struct loop *
sweeper_start(const char *database_url, int interval_ms,
	      void (*on_released)(void *arg), void *arg)
{
	struct sweeper *s = xcalloc(1, sizeof(*s));
	s->url = xstrdup(database_url);
	s->on_released = on_released;
	s->arg = arg;
	s->def = (struct loop_def){
		.name = "sweeper",
		.tick = tick,
		.finish = finish,
		.interval_ms = interval_ms,
		.max_backoff_ms = 10000,
	};
	s->m_released = metric_register(
		METRIC_COUNTER, "nodeflow_queue_deferred_released_total", "",
		"Deferred queue rows returned to their queue");
	s->m_expired = metric_register(
		METRIC_COUNTER, "nodeflow_queue_leases_expired_total", "",
		"Leases that ran out (attempt timed out)");
	s->m_holders = metric_register(
		METRIC_COUNTER, "nodeflow_semaphore_holders_swept_total", "",
		"Semaphore permits returned by the sweeper (lease ran out, or "
		"task ended without a result)");
	return loop_start(&s->def, s);
}
