#include "engine/start_group.h"

#include "engine/decide_batch.h"
#include "engine/decide_loop.h"
#include "engine/queue_signal.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "store/decide_repo.h"
#include "store/executions_repo.h"
#include "util/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * A leader that takes over less than BUSY_NS after the last write ended
 * (starts arriving back to back), or while another group is being
 * written, first waits LINGER_NS, so that the starts on their way join
 * its group: a statement and a commit cost about the same for one start
 * or a dozen.  Three replicas sharing sixteen starters made groups of two
 * (of six on one server) until they did; lingering halved their number.
 * A start that comes alone is written at once.
 *
 * Up to `writers` groups are written at once (start_group_init; one by
 * default).  A group of nine starts took 3.2 ms to write on two cores,
 * its statement running 1.1 ms of it and its commit's WAL flush another
 * 1.1 ms, and with one writer the machine idled while sixteen starters
 * queued behind it: two writers started 23-33 % more workflows a second
 * in seven of nine alternating runs.  But paced starts near the machine's
 * capacity then came in groups of one or two, twice the statements, and
 * at half the peak two of four runs fell behind where one writer kept up
 * in five of five (docs/benchmarks.md): a second writer is for bursts of
 * starts on a machine with CPU to spare.  With two, a start held in its
 * statement (its idempotency key taken by a transaction not yet
 * committed) does not hold up every other start either.
 *
 * A start that came while no group was being gathered or written (so is
 * written alone: every start joining a leader's group came after the
 * leader set "writing") decides its first step too: its one commit saved
 * is its first task's latency (p99 2.2-2.4 ms against 6.0-7.0 ms at 25
 * starts/s).  A start that waited is the mark of a load, under which the
 * decisions, which hold the group's transaction several times as long,
 * cost the starters more than the deciders' own batches do beside them
 * (1,127-1,360 against 1,629-2,267 workflows/s phased, in alternating
 * runs; docs/benchmarks.md), however small its group: starts paced at
 * hundreds a second, or spread over replicas, queue in groups of a few,
 * and each group's decisions would be a statement of their own where a
 * decider writes one for many.
 *
 * START_DECIDE_GROUPS has every group decide its first steps, so that a
 * start's answer always comes with its first tasks queued: a decider's
 * round after the commit (its turn, claim, loads, write and commit, queued
 * behind the results' decisions) was most of a first task's latency, p99
 * 26-69 ms at 1,000 starts/s paced on two cores against 11-16 ms.  But the
 * decisions hold the one writer about twice as long (a group of 13: 2.7 ms
 * of its 5.2), and a burst of starts that keeps it busy is started faster
 * by the deciders beside it (2,250-2,700 starts/s against 3,350-4,200
 * phased).  So groups averaging `burst_size` starts (a moving average over
 * about sixteen groups) are a burst, whose groups leave their first steps
 * to the deciders until the average falls to two fifths of that.  Paced at
 * 1,000 a second, the groups averaged seven starts; sixteen starters at
 * once, thirteen, and nine to eleven once the deciders decided for them.
 * Three replicas sharing sixteen starters average five a server, below any
 * such size, and lost a third of their starts' rate (docs/benchmarks.md):
 * hence not the default.
 */
enum { BUSY_NS = 1000000, LINGER_NS = 500000 };

/* A caller's start, queued until a leader writes it. */
struct job {
	const struct exec_start *s;
	const struct start_first *first; /* NULL: the deciders decide it */
	struct job *next;
	bool done;
	bool queued; /* it came while a group was gathered or written */
	/* How it went, once done: */
	bool alone;     /* its group's statement failed: its caller writes it */
	bool decided;   /* its first step was written with it */
	struct err err; /* a group of one that failed: why */
	struct exec_started out;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct job *head, **tail = &head; /* waiting, oldest first */
static int writing;                      /* leaders writing a group */
static struct timespec last_end;         /* when the last write ended */

static bool burst;      /* groups leave their first steps to the deciders */
static long long avg16; /* the groups' moving average size, times 16 */

static atomic_int decides = START_DECIDE_ALONE;
static atomic_int writers = 1;
static atomic_int burst_size = 10;
static atomic_int retry_budget = 600;

static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;
static struct metric *m_writes, *m_starts, *m_waiting, *m_decided, *m_decisions,
	*m_decide_failed, *m_bursts;

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
	m_decided = metric_register(
		METRIC_COUNTER, "nodeflow_start_decided_total", "",
		"Workflow starts whose first step was decided and written in "
		"their own transaction.");
	m_decide_failed = metric_register(
		METRIC_COUNTER, "nodeflow_start_decide_failures_total", "",
		"Groups of starts whose first steps could not be decided with "
		"them (written without, for the deciders).");
	m_bursts = metric_register(
		METRIC_COUNTER, "nodeflow_start_bursts_total", "",
		"Bursts of workflow starts: times the groups' average size "
		"reached --start-burst-size, after which groups left their "
		"first steps to the deciders.");
	m_decisions =
		metric_register(METRIC_COUNTER, "nodeflow_decisions_total", "",
				"Workflow evaluations applied");
}

/* What a fresh execution looks like to the decider: what decide_claim
 * would load of it, with no task yet. */
static void
fresh_execution(struct loaded_execution *x, const struct exec_start *s,
		const struct start_first *f, const struct exec_started *o)
{
	*x = (struct loaded_execution){.version = 0, .priority = s->priority};
	memcpy(x->id, o->id, sizeof(x->id));
	snprintf(x->ns_id, sizeof(x->ns_id), "%s", s->ns_id);
	x->ns_name = xstrdup(o->ns_name);
	x->status = xstrdup("RUNNING");
	x->def_name = xstrdup(s->def_name);
	x->def_version = s->def_version;
	x->input = json_incref((json_t *)f->input);
	x->variables = json_incref((json_t *)f->variables);
	x->correlation_id =
		s->correlation_id ? xstrdup(s->correlation_id) : NULL;
	x->started_at = xstrdup(o->started_at);
}

enum group_write {
	GROUP_WRITTEN,   /* with what could be decided */
	GROUP_REFUSED,   /* the starts' statement failed: e says why */
	GROUP_UNDECIDED, /* the decisions failed: nothing was written */
};

/*
 * The group's starts and the first steps of those created with a
 * definition to decide from, in one transaction: the decide loop's batch
 * (decide_batch.h) on executions nobody else can see yet, whose
 * "DecideQueues" rows the write removes again.  A decision that leaves
 * its workflow queued (a task it wrote finished unseen) wakes the
 * deciders.
 */
static enum group_write
write_deciding(struct db *db, struct job *const *jobs,
	       const struct exec_start *const *s, size_t n,
	       struct exec_started *out, struct err *e)
{
	/* The decisions' statements were written for their generic plans,
	 * which the pool's connections would replan on every call. */
	if (!db_begin_generic(db, e))
		return GROUP_REFUSED;
	if (!exec_start_many(db, s, n, out, e)) {
		db_rollback(db);
		return GROUP_REFUSED;
	}
	struct decide_batch b = {xcalloc(n, sizeof(*b.items)), 0};
	const struct wf_def *wfs[START_GROUP_MAX];
	size_t at[START_GROUP_MAX];
	for (size_t i = 0; i < n; i++) {
		if (!out[i].created || !jobs[i]->first || !out[i].ns_name[0])
			continue;
		fresh_execution(&b.items[b.n], s[i], jobs[i]->first, &out[i]);
		wfs[b.n] = jobs[i]->first->wf;
		at[b.n++] = i;
	}
	struct decide_run r;
	decide_run_init(&r, db, atomic_load(&retry_budget));
	r.own_rows = true;
	bool ok = decide_batch_run(&r, &b, wfs, e) == DECIDE_OK;
	if (ok && json_object_size(r.queues))
		ok = queue_signal_send(db, r.queues, e);
	ok = ok && db_commit(db, e);
	if (ok) {
		for (size_t k = 0; k < b.n; k++)
			jobs[at[k]]->decided = true;
		metric_add(m_decided, (long long)b.n);
		metric_add(m_decisions, r.decisions);
		decide_run_signal(&r);
		if (r.left_queued)
			decide_loop_wake();
	} else {
		db_rollback(db);
	}
	decide_run_free(&r);
	decide_batch_free(&b);
	return ok ? GROUP_WRITTEN : GROUP_UNDECIDED;
}

/* Whether a group of n starts decides its first steps, and (with
 * START_DECIDE_GROUPS) the burst state after it.  The lock is held. */
static bool
group_decides(struct job *const *jobs, size_t n)
{
	int mode = atomic_load(&decides);
	bool alone = n == 1 && !jobs[0]->queued;
	if (mode != START_DECIDE_GROUPS)
		return mode != START_DECIDE_NEVER && alone;
	bool in_burst = burst;
	long long size = atomic_load(&burst_size);
	avg16 += (long long)n - avg16 / 16;
	if (size > 0 && !burst && avg16 >= 16 * size) {
		burst = true;
		metric_add(m_bursts, 1);
	} else if (burst && (size == 0 || avg16 * 5 <= 16 * size * 2)) {
		burst = false;
	}
	return !in_burst || alone;
}

/* The group's starts, with their first steps when `decide` and they can
 * be: decisions that fail are left out of the write. */
static bool
write_group(struct db *db, struct job *const *jobs,
	    const struct exec_start *const *s, size_t n, bool decide,
	    struct exec_started *out, struct err *e)
{
	bool any_first = false;
	for (size_t i = 0; i < n; i++)
		any_first = any_first || jobs[i]->first;
	if (decide && any_first) {
		switch (write_deciding(db, jobs, s, n, out, e)) {
		case GROUP_WRITTEN: return true;
		case GROUP_REFUSED: return false;
		case GROUP_UNDECIDED:
			metric_add(m_decide_failed, 1);
			log_warn("start",
				 "the first steps of a group of %zu starts "
				 "were not decided (%s): the deciders decide "
				 "them",
				 n, e->msg);
			*e = (struct err)ERR_INIT;
			break;
		}
	}
	return exec_start_many(db, s, n, out, e);
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
 * Called with the lock held, starts waiting and fewer than `writers`
 * groups being written: lingers when the last write just ended (BUSY_NS)
 * or another is in progress, then takes the oldest waiting starts,
 * writes them with db (the lock released meanwhile, so the next ones
 * queue), marks them done and wakes their callers.  Returns with the lock
 * held.
 */
static void
lead(struct db *db)
{
	writing++;
	if (writing > 1 || ns_since(&last_end) < BUSY_NS) {
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
	bool decide = group_decides(batch, n);
	pthread_mutex_unlock(&lock);

	struct exec_started out[START_GROUP_MAX];
	struct err e = ERR_INIT;
	bool ok = write_group(db, batch, s, n, decide, out, &e);
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
	writing--;
	clock_gettime(CLOCK_MONOTONIC, &last_end);
	pthread_cond_broadcast(&cond);
}

void
start_group_init(enum start_decide decide_first, int writers_at_once,
		 int burst_group_size, int retry_budget_per_minute)
{
	pthread_once(&metrics_once, register_metrics);
	atomic_store(&decides, decide_first);
	atomic_store(&writers, writers_at_once < 1 ? 1 : writers_at_once);
	atomic_store(&burst_size, burst_group_size < 0 ? 0 : burst_group_size);
	atomic_store(&retry_budget, retry_budget_per_minute);
}

bool
start_group_write(struct db *db, const struct exec_start *s,
		  const struct start_first *first, char id_out[37],
		  bool *created, bool *decided, struct err *e)
{
	pthread_once(&metrics_once, register_metrics);
	*decided = false;
	/* A large input goes to the payload store first, on this caller's
	 * connection; too large a one is refused before anything waits. */
	struct exec_start x;
	char *stored, ref[48];
	if (!exec_start_offload(db, s, &x, &stored, ref, e))
		return false;

	struct job j = {.s = &x, .first = first, .err = ERR_INIT};
	pthread_mutex_lock(&lock);
	j.queued = writing > 0;
	*tail = &j;
	tail = &j.next;
	metric_add(m_waiting, 1);
	while (!j.done) {
		/* An empty queue: a leader took this start and writes it. */
		if (!head || writing >= atomic_load(&writers))
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
		*decided = j.decided;
		if (*created)
			memcpy(id_out, j.out.id, sizeof(j.out.id));
		ok = *created || exec_start_existing(db, &x, id_out, e);
	}
	free(stored);
	return ok;
}
