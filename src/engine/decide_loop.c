#include "engine/decide_loop.h"

#include "engine/decide_batch.h"
#include "engine/decide_signal.h"
#include "engine/queue_signal.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "store/decide_repo.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/timeutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* SHARE_AT: a batch this large (or a full one) wakes a resting loop to
 * share what may follow: split over two loops, a batch's work outweighs
 * the cost of a second batch. */
enum { MAX_LOOPS = 16, SHARE_AT = 32 };

/* A turn is a batch long (milliseconds).  One that lasts TURN_WAIT_MS is a
 * decider stuck mid-batch (a replica cut off from the database holds its
 * transaction until the server notices): the loop then claims without
 * turns for TURN_SKIP_MS, as every replica's loops did before turns. */
enum { TURN_WAIT_MS = 5000, TURN_SKIP_MS = 60000 };

struct decide_loop {
	struct loop_def def;
	struct decide_loop_opts opts;
	char *url;
	struct db *db;
	struct metric *m_decisions;
	struct metric *m_failures;
	bool guarded;       /* the next batch takes savepoints */
	bool backlog;       /* the last batch was large: share, not wait */
	int64_t turns_from; /* no turns before then (monotonic ms) */
	struct loop *loop;
	atomic_bool working; /* in a tick that claimed work */
};

/* This process's decide loops (under loops_lock), and the next one a wake
 * goes to when all of them are working. */
static pthread_mutex_t loops_lock = PTHREAD_MUTEX_INITIALIZER;
static struct decide_loop *loops[MAX_LOOPS];
static size_t n_loops, next_wake;

/* Wakes one loop other than `except` that is not working, if there is
 * one; the lock is held. */
static bool
wake_resting(const struct decide_loop *except)
{
	for (size_t k = 0; k < n_loops; k++) {
		struct decide_loop *dl = loops[(next_wake + k) % n_loops];
		if (dl != except && !atomic_load(&dl->working)) {
			next_wake = (next_wake + k + 1) % n_loops;
			loop_wake(dl->loop);
			return true;
		}
	}
	return false;
}

/*
 * A short queue is claimed in turns, across replicas: three replicas'
 * deciders each claiming at once split it into three batches, each with
 * its statements and commit.  A backlog is shared at once.  Called in a
 * new transaction; when the turn is not had in time, that transaction is
 * lost and a new one begins without it.
 */
static bool
take_turn(struct decide_loop *dl, struct err *e)
{
	if (dl->backlog || mono_ms() < dl->turns_from)
		return true;
	struct err te = ERR_INIT;
	if (decide_take_turn(dl->db, TURN_WAIT_MS, &te))
		return true;
	if (te.code != ERR_CONFLICT) {
		*e = te;
		return false;
	}
	log_warn("decider",
		 "the deciders' turn was held over %d ms (a decider stuck "
		 "mid-batch?): claiming without turns for %d s",
		 TURN_WAIT_MS, TURN_SKIP_MS / 1000);
	dl->turns_from = mono_ms() + TURN_SKIP_MS;
	db_rollback(dl->db);
	return db_begin(dl->db, e);
}

static enum loop_result
run_batch(struct decide_loop *dl, struct err *e)
{
	if (dl->db && !db_healthy(dl->db)) {
		db_close(dl->db);
		dl->db = NULL;
	}
	/* Generic plans: the batch's statements, custom-planned, were
	 * planned again on every batch (the task load, over every partition
	 * of "TaskExecutions", at several times its running cost). */
	if (!dl->db) {
		if (!db_open(&dl->db, dl->url, DB_GENERIC_PLANS | DB_KEYED, e))
			return LOOP_ERROR;
		struct err we = ERR_INIT;
		if (!decide_warm(dl->db, &we)) /* only slower without it */
			log_warn("decider", "could not plan ahead: %s", we.msg);
	}

	struct decide_batch b = {0};
	if (!db_begin(dl->db, e) || !take_turn(dl, e) ||
	    !decide_claim(dl->db, dl->opts.batch_size, &b, e)) {
		db_rollback(dl->db);
		return LOOP_ERROR;
	}
	if (b.n == 0) {
		dl->backlog = false;
		bool ok = db_commit(dl->db, e);
		decide_batch_free(&b);
		return ok ? LOOP_IDLE : LOOP_ERROR;
	}
	struct decide_run r;
	decide_run_init(&r, dl->db, dl->opts.retry_budget_per_minute);
	r.m_failures = dl->m_failures;
	bool guarded = dl->guarded;
	dl->guarded = false;
	struct err we = ERR_INIT;
	enum decide_result dr = decide_batch_decide(&r, &b, guarded, &we);
	bool ok = dr != DECIDE_LOST;
	bool redo = dr == DECIDE_REDO;
	if (redo) { /* at once, each evaluation apart */
		log_warn("decider",
			 "%s (its batch is done again, each evaluation apart)",
			 we.msg);
		db_rollback(dl->db);
		dl->guarded = true;
	} else if (!ok) {
		*e = we;
	}
	if (ok && !redo && json_object_size(r.queues)) {
		/* Other replicas' polls: one notification for the whole
		 * batch, delivered at its commit. */
		ok = queue_signal_send(dl->db, r.queues, e);
	}
	ok = ok && !redo && db_commit(dl->db, e);
	if (ok) {
		metric_add(dl->m_decisions, r.decisions);
		decide_run_signal(&r);
	} else if (!redo) {
		db_rollback(dl->db);
	}

	bool left_queued = r.left_queued;
	decide_run_free(&r);
	bool full = b.n == (size_t)dl->opts.batch_size;
	bool share = full || b.n >= SHARE_AT;
	dl->backlog = share;
	decide_batch_free(&b);
	/* A full batch, or one that left work queued, may have more behind
	 * it: claim again at once.  A short one took all there was: anything
	 * queued since woke this loop (the wake is kept while it works), or,
	 * queued by another replica, is that replica's deciders' or found at
	 * the next idle look.  An empty claim after every batch cost a
	 * transaction per batch under a steady load. */
	bool more = redo || left_queued || full;
	if (!ok && !redo)
		return LOOP_ERROR;
	if (share) { /* a backlog: a resting loop shares it */
		pthread_mutex_lock(&loops_lock);
		(void)wake_resting(dl);
		pthread_mutex_unlock(&loops_lock);
	}
	return more ? LOOP_BUSY : LOOP_IDLE;
}

/* Marked working while it runs: a wake then waits for this batch to end
 * (the loop claims again at once) rather than starting a second loop on
 * the little that came meanwhile, so a steady load is decided in batches
 * one loop gathers, not in one-workflow batches each loop takes; a large
 * batch brings in a second loop (SHARE_AT). */
static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct decide_loop *dl = arg;
	(void)scratch;
	atomic_store(&dl->working, true);
	enum loop_result r = run_batch(dl, e);
	atomic_store(&dl->working, false);
	return r;
}

static void
finish(void *arg)
{
	struct decide_loop *dl = arg;
	db_close(dl->db);
	free(dl->url);
	free(dl);
}

void
decide_loop_start(const struct decide_loop_opts *o)
{
	struct decide_loop *dl = xcalloc(1, sizeof(*dl));
	dl->opts = *o;
	dl->url = xstrdup(o->database_url);
	dl->def = (struct loop_def){
		.name = "decider",
		.tick = tick,
		.finish = finish,
		.interval_ms = o->interval_ms,
		.max_backoff_ms = 10000,
	};
	dl->m_decisions =
		metric_register(METRIC_COUNTER, "nodeflow_decisions_total", "",
				"Workflow evaluations applied");
	dl->m_failures = metric_register(
		METRIC_COUNTER, "nodeflow_decision_failures_total", "",
		"Workflow evaluations that failed and were postponed");
	pthread_mutex_lock(&loops_lock);
	dl->loop = loop_start(&dl->def, dl);
	if (n_loops < MAX_LOOPS)
		loops[n_loops++] = dl;
	pthread_mutex_unlock(&loops_lock);
}

void
decide_loops_stop(void)
{
	pthread_mutex_lock(&loops_lock);
	size_t n = n_loops;
	struct loop *stopping[MAX_LOOPS];
	for (size_t i = 0; i < n; i++)
		stopping[i] = loops[i]->loop;
	n_loops = 0;
	pthread_mutex_unlock(&loops_lock);
	for (size_t i = 0; i < n; i++)
		loop_stop(stopping[i]);
}

void
decide_loop_wake(void)
{
	pthread_mutex_lock(&loops_lock);
	if (n_loops == 0) { /* an api-only replica: the engine replicas' */
		pthread_mutex_unlock(&loops_lock);
		decide_signal_raise();
		return;
	}
	bool working = false;
	for (size_t i = 0; i < n_loops && !working; i++) {
		if (atomic_load(&loops[i]->working)) {
			/* It claims again as soon as its batch is done. */
			loop_wake(loops[i]->loop);
			working = true;
		}
	}
	if (!working)
		(void)wake_resting(NULL);
	pthread_mutex_unlock(&loops_lock);
}
