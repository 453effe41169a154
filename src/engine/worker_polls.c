#include "engine/worker_polls.h"

#include "runtime/metrics.h"
#include "store/db.h"
#include "store/polls_repo.h"
#include "util/mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { SLOTS = 4096, FLUSH_MS = 1000 };

struct slot {
	char ns[37];
	char *queue;
	char *worker;
	long count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot slots[SLOTS];
static size_t used;
static struct metric *m_dropped;

static void
note(const char *ns_id, const char *queue, const char *worker, long count)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < used; i++) {
		struct slot *s = &slots[i];
		if (strcmp(s->worker, worker) == 0 &&
		    strcmp(s->queue, queue) == 0 && strcmp(s->ns, ns_id) == 0) {
			s->count += count;
			pthread_mutex_unlock(&lock);
			return;
		}
	}
	if (used < SLOTS) {
		struct slot *s = &slots[used++];
		snprintf(s->ns, sizeof(s->ns), "%s", ns_id);
		s->queue = xstrdup(queue);
		s->worker = xstrdup(worker);
		s->count = count;
	} else if (m_dropped) {
		metric_add(m_dropped, count);
	}
	pthread_mutex_unlock(&lock);
}

void
worker_polls_note(const char *ns_id, const char *queue, const char *worker)
{
	note(ns_id, queue, worker, 1);
}

struct flusher {
	struct loop_def def;
	char *url;
	struct db *db;
};

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct flusher *f = arg;
	(void)scratch;
	/* Take the table, so noting never waits on the database. */
	pthread_mutex_lock(&lock);
	size_t n = used;
	struct slot *taken = n ? xmalloc(n * sizeof(*taken)) : NULL;
	if (n)
		memcpy(taken, slots, n * sizeof(*taken));
	used = 0;
	pthread_mutex_unlock(&lock);
	if (!n)
		return LOOP_IDLE;

	json_t *rows = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
			rows, json_pack("{s:s,s:s,s:s,s:I}", "ns", taken[i].ns,
					"queue", taken[i].queue, "worker",
					taken[i].worker, "count",
					(json_int_t)taken[i].count));
	bool ok = true;
	if (f->db && !db_healthy(f->db)) {
		db_close(f->db);
		f->db = NULL;
	}
	ok = (f->db || db_open(&f->db, f->url, DB_PLAIN, e)) &&
	     polls_record(f->db, rows, e);
	json_decref(rows);
	for (size_t i = 0; i < n; i++) {
		if (!ok) /* keep the counts for the next flush */
			note(taken[i].ns, taken[i].queue, taken[i].worker,
			     taken[i].count);
		free(taken[i].queue);
		free(taken[i].worker);
	}
	free(taken);
	return ok ? LOOP_IDLE : LOOP_ERROR;
}

static void
finish(void *arg)
{
	struct flusher *f = arg;
	struct err e = ERR_INIT;
	(void)tick(f, NULL, &e); /* what was noted last */
	db_close(f->db);
	free(f->url);
	free(f);
}

struct loop *
worker_polls_start(const char *database_url)
{
	struct flusher *f = xcalloc(1, sizeof(*f));
	f->url = xstrdup(database_url);
	f->def = (struct loop_def){
		.name = "worker-polls",
		.tick = tick,
		.finish = finish,
		.interval_ms = FLUSH_MS,
		.max_backoff_ms = 10000,
	};
	m_dropped = metric_register(METRIC_COUNTER,
				    "nodeflow_worker_polls_dropped_total", "",
				    "Polls not recorded: too many distinct "
				    "workers between two flushes");
	return loop_start(&f->def, f);
}
