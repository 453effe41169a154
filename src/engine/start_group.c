#include "engine/start_group.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/executions_repo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * A leader that takes over less than BUSY_NS after the last write ended
 * (starts arriving back to back) first waits LINGER_NS, so that the
 * starts on their way join its group: a statement and a commit cost about
 * the same for one start or a dozen.  Three replicas sharing sixteen
 * starters made groups of two (of six on one server) until they did;
 * lingering halved their number.  A start that comes alone is written at
 * once.
 */
enum { BUSY_NS = 1000000, LINGER_NS = 500000 };

/* A caller's start, queued until a leader writes it. */
struct job {
	const struct exec_start *s;
	struct job *next;
	bool done;
	/* How it went, once done: */
	bool alone;     /* its group's statement failed: its caller writes it */
	struct err err; /* a group of one that failed: why */
	struct exec_started out;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct job *head, **tail = &head; /* waiting, oldest first */
static bool writing;                     /* a leader is writing a group */
static struct timespec last_end;         /* when the last write ended */

static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;
static struct metric *m_writes, *m_starts, *m_waiting;

static void
register_metrics(void)
{
	m_writes = metric_register(
		METRIC_COUNTER, "nodeflow_start_writes_total", "",
		"Statements that wrote workflow starts (one per group).");
	m_starts = metric_register(METRIC_COUNTER,
				   "nodeflow_start_writes_starts_total", "",
				   "Workflow starts those statements wrote.");
	m_waiting = metric_register(
		METRIC_GAUGE, "nodeflow_start_group_waiting", "",
		"Workflow starts waiting for the write in progress to end.");
}

static long long
ns_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long long)(now.tv_sec - t->tv_sec) * 1000000000LL +
	       (now.tv_nsec - t->tv_nsec);
}

/*
 * Called with the lock held and no write in progress: lingers when the
 * last write just ended (BUSY_NS), then takes the oldest waiting starts,
 * writes them with db (the lock released meanwhile, so the next ones
 * queue), marks them done and wakes their callers.  Returns with the lock
 * held.
 */
static void
lead(struct db *db)
{
	writing = true;
	if (ns_since(&last_end) < BUSY_NS) {
		pthread_mutex_unlock(&lock);
		nanosleep(&(struct timespec){0, LINGER_NS}, NULL);
		pthread_mutex_lock(&lock);
	}
	struct job *batch[START_GROUP_MAX];
	const struct exec_start *s[START_GROUP_MAX];
	size_t n = 0;
	while (head && n < START_GROUP_MAX) {
		batch[n] = head;
		s[n++] = head->s;
		head = head->next;
	}
	if (!head)
		tail = &head;
	metric_add(m_waiting, -(long long)n);
	pthread_mutex_unlock(&lock);

	struct exec_started out[START_GROUP_MAX];
	struct err e = ERR_INIT;
	bool ok = exec_start_many(db, s, n, out, &e);
	if (!ok && n > 1)
		log_warn("start",
			 "a group of %zu starts was refused (%s): each is "
			 "written alone",
			 n, e.msg);
	metric_add(m_writes, 1);
	if (ok)
		metric_add(m_starts, (long long)n);

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n; i++) {
		struct job *j = batch[i];
		if (ok)
			j->out = out[i];
		else if (n > 1)
			j->alone = true;
		else
			j->err = e;
		j->done = true;
	}
	writing = false;
	clock_gettime(CLOCK_MONOTONIC, &last_end);
	pthread_cond_broadcast(&cond);
}

void
start_group_init(void)
{
	pthread_once(&metrics_once, register_metrics);
}

bool
start_group_write(struct db *db, const struct exec_start *s, char id_out[37],
		  bool *created, struct err *e)
{
	start_group_init();
	/* A large input goes to the payload store first, on this caller's
	 * connection; too large a one is refused before anything waits. */
	struct exec_start x;
	char *stored, ref[48];
	if (!exec_start_offload(db, s, &x, &stored, ref, e))
		return false;

	struct job j = {.s = &x, .err = ERR_INIT};
	pthread_mutex_lock(&lock);
	*tail = &j;
	tail = &j.next;
	metric_add(m_waiting, 1);
	while (!j.done) {
		if (writing)
			pthread_cond_wait(&cond, &lock);
		else
			lead(db);
	}
	pthread_mutex_unlock(&lock);

	bool ok;
	if (j.alone) {
		ok = exec_start(db, &x, id_out, created, e);
	} else if (j.err.code != ERR_OK) {
		*e = j.err;
		ok = false;
	} else {
		*created = j.out.created;
		if (*created)
			memcpy(id_out, j.out.id, sizeof(j.out.id));
		ok = *created || exec_start_existing(db, &x, id_out, e);
	}
	free(stored);
	return ok;
}
