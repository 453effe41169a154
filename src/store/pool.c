#include "store/pool.h"

#include "store/db.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "util/mem.h"
#include "util/timeutil.h"

#include <pthread.h>
#include <stdlib.h>

enum { BACKOFF_MIN_MS = 100, BACKOFF_MAX_MS = 5000 };

struct db_pool {
	pthread_mutex_t lock;
	pthread_cond_t freed; /* CLOCK_MONOTONIC */
	char *url;
	unsigned flags;
	int size;
	int open; /* connections that exist, idle or lent out */
	int idle_count;
	struct db **idle;
	int64_t next_connect_ms; /* backoff: no connect attempt before this */
	int backoff_ms;
	int max_waiters; /* -1: no limit */
	int waiting;
	struct metric *m_open;
	struct metric *m_failures;
	struct metric *m_waiting;
	struct metric *m_refused;
};

struct db_pool *
db_pool_create(const char *url, int size, unsigned flags)
{
	struct db_pool *p = xcalloc(1, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&p->freed, &attr);
	pthread_condattr_destroy(&attr);
	p->url = xstrdup(url);
	p->flags = flags;
	p->size = size;
	p->idle = xcalloc((size_t)size, sizeof(*p->idle));
	p->max_waiters = -1;
	p->m_waiting = metric_register(
		METRIC_GAUGE, "nodeflow_db_pool_waiting", "",
		"Requests waiting for a connection of the HTTP pool");
	p->m_refused = metric_register(
		METRIC_COUNTER, "nodeflow_db_pool_refused_total", "",
		"Requests refused at once: every connection busy, the queue "
		"full");
	p->m_open =
		metric_register(METRIC_GAUGE, "nodeflow_db_pool_connections",
				"", "Open connections of the HTTP pool");
	p->m_failures = metric_register(
		METRIC_COUNTER, "nodeflow_db_connect_failures_total", "",
		"Failed attempts to open a database connection");
	return p;
}

void
db_pool_set_queue(struct db_pool *p, int max_waiters)
{
	pthread_mutex_lock(&p->lock);
	p->max_waiters = max_waiters;
	pthread_mutex_unlock(&p->lock);
}

void
db_pool_destroy(struct db_pool *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->idle_count; i++)
		db_close(p->idle[i]);
	free(p->idle);
	free(p->url);
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Opens a connection outside the lock; the slot was reserved by the caller. */
static struct db *
open_one(struct db_pool *p, struct err *e)
{
	struct db *db;
	bool ok = db_open(&db, p->url, p->flags, e);
	pthread_mutex_lock(&p->lock);
	if (ok) {
		p->backoff_ms = 0;
		p->next_connect_ms = 0;
	} else {
		p->open--;
		p->backoff_ms =
			p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
		if (p->backoff_ms > BACKOFF_MAX_MS)
			p->backoff_ms = BACKOFF_MAX_MS;
		p->next_connect_ms = mono_ms() + p->backoff_ms;
		metric_add(p->m_failures, 1);
		pthread_cond_signal(&p->freed);
	}
	metric_set(p->m_open, p->open);
	pthread_mutex_unlock(&p->lock);
	if (!ok)
		log_warn("db", "%s", e->msg);
	return ok ? db : NULL;
}

struct fill_job {
	struct db_pool *pool;
	db_pool_warm_fn *warm;
	pthread_t thread;
	bool started;
	struct db *db;
};

static void *
fill_one(void *arg)
{
	struct fill_job *j = arg;
	struct err e = ERR_INIT;
	j->db = open_one(j->pool, &e);
	if (j->db && j->warm)
		j->warm(j->db);
	return NULL;
}

/* Reserves up to n slots for connections about to be opened (open_one
 * gives a failed one back): how many. */
static int
reserve(struct db_pool *p, int n)
{
	pthread_mutex_lock(&p->lock);
	int k = n < p->size - p->open ? n : p->size - p->open;
	if (k < 0)
		k = 0;
	p->open += k;
	pthread_mutex_unlock(&p->lock);
	return k;
}

int
db_pool_fill(struct db_pool *p, int n, db_pool_warm_fn *warm)
{
	/* One first, alone: when the database cannot be reached, that is
	 * one failure (one step of the backoff), not one per slot.  It is
	 * warmed with the others. */
	struct err e = ERR_INIT;
	struct db *first = n > 0 && reserve(p, 1) ? open_one(p, &e) : NULL;
	if (!first)
		return 0;
	int k = n > 1 ? reserve(p, n - 1) : 0;
	struct fill_job *jobs = xcalloc((size_t)k + 1, sizeof(*jobs));
	jobs[k] = (struct fill_job){.pool = p, .warm = warm, .db = first};
	for (int i = 0; i < k; i++) {
		jobs[i].pool = p;
		jobs[i].warm = warm;
		jobs[i].started = pthread_create(&jobs[i].thread, NULL,
						 fill_one, &jobs[i]) == 0;
		if (!jobs[i].started)
			fill_one(&jobs[i]);
	}
	if (warm)
		warm(first);
	int opened = 0;
	for (int i = 0; i <= k; i++) {
		if (jobs[i].started)
			pthread_join(jobs[i].thread, NULL);
		if (jobs[i].db) {
			db_pool_release(p, jobs[i].db);
			opened++;
		}
	}
	free(jobs);
	return opened;
}

struct db *
db_pool_acquire(struct db_pool *p, int timeout_ms, struct err *e)
{
	struct timespec until = mono_deadline(timeout_ms);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (p->idle_count > 0) {
			struct db *db = p->idle[--p->idle_count];
			pthread_mutex_unlock(&p->lock);
			/* It may have died while idle (e.g. a database
			 * restart): replace it rather than hand it out. */
			if (db_healthy(db))
				return db;
			db_close(db);
			pthread_mutex_lock(&p->lock);
			p->open--;
			metric_set(p->m_open, p->open);
			continue;
		}
		if (p->open < p->size) {
			if (p->next_connect_ms &&
			    mono_ms() < p->next_connect_ms) {
				pthread_mutex_unlock(&p->lock);
				err_set(e, ERR_UNAVAILABLE,
					"database unavailable (reconnecting)");
				return NULL;
			}
			p->open++;
			pthread_mutex_unlock(&p->lock);
			return open_one(p, e);
		}
		if (p->max_waiters >= 0 && p->waiting >= p->max_waiters) {
			int busy = p->size, queued = p->waiting;
			pthread_mutex_unlock(&p->lock);
			metric_add(p->m_refused, 1);
			err_set(e, ERR_UNAVAILABLE,
				"all %d database connections are busy and %d "
				"requests wait for one already (--db-queue); "
				"retry later",
				busy, queued);
			return NULL;
		}
		p->waiting++;
		metric_set(p->m_waiting, p->waiting);
		int rc = pthread_cond_timedwait(&p->freed, &p->lock, &until);
		p->waiting--;
		metric_set(p->m_waiting, p->waiting);
		if (rc != 0) {
			pthread_mutex_unlock(&p->lock);
			err_set(e, ERR_UNAVAILABLE,
				"no database connection free within %d ms",
				timeout_ms);
			return NULL;
		}
	}
}

void
db_pool_release(struct db_pool *p, struct db *db)
{
	if (!db)
		return;
	db_rollback(db);
	bool keep = db_healthy(db);
	if (!keep)
		db_close(db);
	pthread_mutex_lock(&p->lock);
	if (keep)
		p->idle[p->idle_count++] = db;
	else
		p->open--;
	metric_set(p->m_open, p->open);
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}
