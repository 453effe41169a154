/*
 * Integration tests of the event listener (src/engine/listener.c over
 * src/store/notify.c) and the "WorkflowEvents" notify trigger, against a
 * real PostgreSQL 18:
 *   - the trigger, declared on the parent, fires for a row landing in a
 *     partition created after it;
 *   - nothing is announced before commit or for a rolled-back insert, and
 *     committed events arrive in order;
 *   - an empty payload (the spec's statement-level trigger mutation), a
 *     NOTIFY without payload and a garbage one are counted and ignored,
 *     never handed to the callback, and the listener stays alive;
 *   - the trigger raises nothing while no process holds a live stream
 *     (no "LiveStreamHolders" row, or only an expired one), so writers
 *     then never queue on PostgreSQL's notification lock at commit.
 * Waiting is by deadline: a "fence" notification sent after the statements
 * under test proves, by the channel's ordering, that everything before it
 * has been handled.
 */
#include "engine/listener.h"
#include "engine/partitions.h"
#include "harness.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "util/strbuf.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WAIT_MS = 15000, MAX_EVENTS = 64 };

/* Probes and fences carry this workflow id; the recorder keeps them apart. */
static const char PROBE_ID[] = "ffffffff-0000-4000-8000-00000000f00d";

struct recorder {
	pthread_mutex_t mu;
	struct workflow_event_ref ev[MAX_EVENTS];
	size_t n;
	size_t overflow;
	int64_t fence_seen; /* highest probe seq delivered */
	int64_t fence_sent; /* test thread only */
};

static void
recorder_init(struct recorder *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
}

/* The listener callback: runs on the loop's thread. */
static void
on_event(const struct workflow_event_ref *ev, void *arg)
{
	struct recorder *r = arg;
	pthread_mutex_lock(&r->mu);
	if (strcmp(ev->workflow_id, PROBE_ID) == 0) {
		if (ev->seq > r->fence_seen)
			r->fence_seen = ev->seq;
	} else if (r->n < MAX_EVENTS) {
		r->ev[r->n++] = *ev;
	} else {
		r->overflow++;
	}
	pthread_mutex_unlock(&r->mu);
}

/* A copy of what the callback saw (probes excluded). */
static size_t
recorded(struct recorder *r, struct workflow_event_ref out[MAX_EVENTS])
{
	pthread_mutex_lock(&r->mu);
	size_t n = r->n;
	memcpy(out, r->ev, n * sizeof(*out));
	cr_assert_eq(r->overflow, 0);
	pthread_mutex_unlock(&r->mu);
	return n;
}

static void
notify(PGconn *c, const char *payload)
{
	const char *params[] = {payload};
	PQclear(th_query(c, "SELECT pg_notify('node_flow_workflow_events', $1)",
			 1, params));
}

static void
send_probe(PGconn *c, int64_t seq)
{
	char payload[64];
	snprintf(payload, sizeof(payload), "%s:%" PRId64, PROBE_ID, seq);
	notify(c, payload);
}

struct probing {
	struct recorder *r;
	PGconn *c;
	int64_t last_ms;
};

static bool
probe_arrived(void *arg)
{
	struct probing *p = arg;
	pthread_mutex_lock(&p->r->mu);
	bool seen = p->r->fence_seen > 0;
	pthread_mutex_unlock(&p->r->mu);
	if (seen)
		return true;
	/* Until the listener has LISTENed, a notification is simply lost:
	 * send a fresh probe now and then. */
	if (th_now_ms() - p->last_ms >= 100) {
		p->last_ms = th_now_ms();
		send_probe(p->c, ++p->r->fence_sent);
	}
	return false;
}

/* Returns once the listener demonstrably receives notifications. */
static void
wait_listening(struct recorder *r, PGconn *c)
{
	struct probing p = {r, c, 0};
	cr_assert(th_wait_until(WAIT_MS, probe_arrived, &p),
		  "the listener never received a probe");
}

struct fence {
	struct recorder *r;
	int64_t seq;
};

static bool
fence_passed(void *arg)
{
	struct fence *f = arg;
	pthread_mutex_lock(&f->r->mu);
	bool done = f->r->fence_seen >= f->seq;
	pthread_mutex_unlock(&f->r->mu);
	return done;
}

/* Sends a probe after everything c committed so far and waits for it:
 * notifications arrive in commit order, so all earlier ones have been
 * handled by then. */
static void
fence(struct recorder *r, PGconn *c)
{
	struct fence f = {r, ++r->fence_sent};
	send_probe(c, f.seq);
	cr_assert(th_wait_until(WAIT_MS, fence_passed, &f),
		  "fence %" PRId64 " never arrived", f.seq);
}

struct count_wait {
	struct recorder *r;
	size_t n;
};

static bool
has_events(void *arg)
{
	struct count_wait *w = arg;
	pthread_mutex_lock(&w->r->mu);
	bool ok = w->r->n >= w->n;
	pthread_mutex_unlock(&w->r->mu);
	return ok;
}

static void
wait_events(struct recorder *r, size_t n)
{
	struct count_wait w = {r, n};
	cr_assert(th_wait_until(WAIT_MS, has_events, &w),
		  "fewer than %zu events arrived", n);
}

static char *
new_uuid(PGconn *c)
{
	return th_value(c, "SELECT uuidv7()::text", 0, NULL);
}

/* One "WorkflowEvents" row; at is epoch seconds, 0 for now(). */
static void
insert_event(PGconn *c, const char *workflow_id, int64_t seq, int64_t at)
{
	char s[24], t[24];
	snprintf(s, sizeof(s), "%" PRId64, seq);
	snprintf(t, sizeof(t), "%" PRId64, at);
	const char *params[] = {workflow_id, s, at ? t : NULL};
	PQclear(th_query(
		c,
		"INSERT INTO \"WorkflowEvents\""
		" (\"workflowId\", \"namespaceId\", \"seq\", \"type\", \"at\")"
		" VALUES ($1::uuid, uuidv7(), $2::bigint, 'listener-test',"
		" coalesce(to_timestamp($3::bigint), now()))",
		3, params));
}

/* Registers a (pretend) process holding a live stream for an hour, or, with
 * a negative ttl, one whose registration has expired. */
static void
hold_live(PGconn *c, int ttl_seconds)
{
	char ttl[16];
	snprintf(ttl, sizeof(ttl), "%d", ttl_seconds);
	const char *params[] = {ttl};
	PQclear(th_query(c,
			 "INSERT INTO \"LiveStreamHolders\""
			 " (\"processId\", \"streams\", \"expiresAt\")"
			 " VALUES (uuidv7(), 1,"
			 " now() + make_interval(secs => $1::int))",
			 1, params));
}

static void
assert_event(const struct workflow_event_ref *ev, const char *workflow_id,
	     int64_t seq)
{
	cr_assert_str_eq(ev->workflow_id, workflow_id);
	cr_assert_eq(ev->seq, seq, "seq %" PRId64 ", expected %" PRId64,
		     ev->seq, seq);
}

/* ------------------------------------------------------------- tests */

Test(listener, trigger_fires_for_a_partition_created_after_it)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	hold_live(c, 3600);

	/* A month the template has no partition for (it keeps 3 ahead). */
	int64_t now = th_int(
		c, "SELECT floor(extract(epoch FROM now()))::bigint", 0, NULL);
	int64_t m0 = partition_period_start(PERIOD_MONTH, now);
	int64_t m6 = partition_period_add(PERIOD_MONTH, m0, 6);
	char lo[24];
	snprintf(lo, sizeof(lo), "%" PRId64, m6);
	const char *name_params[] = {lo};
	char *part = th_value(c,
			      "SELECT \"nf_partition_name\"('WorkflowEvents',"
			      " to_timestamp($1::bigint), 'month')",
			      1, name_params);
	const char *part_params[] = {part};
	cr_assert_eq(th_int(c,
			    "SELECT count(*) FROM \"pg_catalog\".\"pg_class\""
			    " WHERE \"relname\" = $1",
			    1, part_params),
		     0, "%s exists already", part);

	/* The partition manager creates it, long after the trigger. */
	struct db *db;
	struct err e = ERR_INIT;
	cr_assert(db_open(&db, d.url, DB_PLAIN, &e), "%s", e.msg);
	struct partition_table t = {"WorkflowEvents", PERIOD_MONTH, 6, 12};
	struct partition_report r;
	cr_assert(partitions_ensure(db, &t, 1, now, &r, &e), "%s", e.msg);
	bool created = false;
	for (size_t i = 0; i < r.n_created; i++)
		created = created || strcmp(r.created[i], part) == 0;
	cr_assert(created, "%s was not created", part);
	partition_report_free(&r);
	db_close(db);

	struct recorder rec;
	recorder_init(&rec);
	struct loop *l = listener_start(d.url, on_event, &rec);
	wait_listening(&rec, c);

	char *wf = new_uuid(c);
	insert_event(c, wf, 1, m6 + 12 * 86400 + 3600);
	wait_events(&rec, 1);
	fence(&rec, c);

	struct workflow_event_ref seen[MAX_EVENTS];
	cr_assert_eq(recorded(&rec, seen), 1);
	assert_event(&seen[0], wf, 1);

	/* And the row really is in the new partition. */
	const char *row_params[] = {wf, part};
	cr_assert_eq(
		th_int(c,
		       "SELECT count(*) FROM \"WorkflowEvents\""
		       " WHERE \"workflowId\" = $1::uuid"
		       "   AND \"tableoid\" = to_regclass(quote_ident($2))",
		       2, row_params),
		1);

	loop_stop(l);
	pthread_mutex_destroy(&rec.mu);
	free(wf);
	free(part);
	PQfinish(c);
	th_db_drop(&d);
}

Test(listener, nothing_is_announced_before_commit_or_after_rollback)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	hold_live(c, 3600);
	PGconn *side =
		th_connect(d.url); /* fences while c is in a transaction */

	struct recorder rec;
	recorder_init(&rec);
	struct loop *l = listener_start(d.url, on_event, &rec);
	wait_listening(&rec, side);

	char *rolled = new_uuid(c);
	char *wf = new_uuid(c);
	struct workflow_event_ref seen[MAX_EVENTS];

	th_exec(c, "BEGIN");
	insert_event(c, rolled, 1, 0);
	th_exec(c, "ROLLBACK");

	/* Inserted but not committed: nothing yet. */
	th_exec(c, "BEGIN");
	insert_event(c, wf, 1, 0);
	fence(&rec, side);
	cr_assert_eq(recorded(&rec, seen), 0, "announced before commit");
	th_exec(c, "COMMIT");

	insert_event(c, wf, 2, 0);
	wait_events(&rec, 2);
	fence(&rec, c);

	cr_assert_eq(recorded(&rec, seen), 2);
	assert_event(&seen[0], wf, 1);
	assert_event(&seen[1], wf, 2);

	loop_stop(l);
	pthread_mutex_destroy(&rec.mu);
	free(rolled);
	free(wf);
	PQfinish(side);
	PQfinish(c);
	th_db_drop(&d);
}

Test(listener, empty_and_garbage_payloads_are_ignored_not_fatal)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);
	hold_live(c, 3600);

	struct recorder rec;
	recorder_init(&rec);
	struct loop *l = listener_start(d.url, on_event, &rec);
	/* Registering again returns the listener's own metrics. */
	struct metric *ignored = metric_register(
		METRIC_COUNTER, "nodeflow_listener_ignored_total", "",
		"Notifications ignored because their payload did not parse");
	struct metric *errors = metric_register(
		METRIC_COUNTER, "nodeflow_loop_errors_total",
		"loop=\"listener\"", "Ticks that failed, per engine loop");
	wait_listening(&rec, c);
	long long ignored_before = metric_get(ignored);
	long long errors_before = metric_get(errors);

	/* The spec's mutation: a statement-level trigger whose function
	 * concatenates NEW fires with NEW null, and pg_notify gets "". */
	th_exec(c,
		"DROP TRIGGER \"WorkflowEvents_notify\" ON \"WorkflowEvents\"");
	th_exec(c, "CREATE TRIGGER \"WorkflowEvents_notify\""
		   " AFTER INSERT ON \"WorkflowEvents\""
		   " FOR EACH STATEMENT"
		   " EXECUTE FUNCTION \"nf_notify_workflow_event\"()");
	char *bad = new_uuid(c);
	insert_event(c, bad, 1, 0);
	/* A NOTIFY without payload, and one that is not "uuid:seq". */
	th_exec(c, "NOTIFY \"node_flow_workflow_events\"");
	notify(c, "not-a-uuid:x");

	/* Back to the real trigger: a valid event still gets through. */
	th_exec(c,
		"DROP TRIGGER \"WorkflowEvents_notify\" ON \"WorkflowEvents\"");
	th_exec(c, "CREATE TRIGGER \"WorkflowEvents_notify\""
		   " AFTER INSERT ON \"WorkflowEvents\""
		   " FOR EACH ROW"
		   " EXECUTE FUNCTION \"nf_notify_workflow_event\"()");
	char *wf = new_uuid(c);
	insert_event(c, wf, 1, 0);
	wait_events(&rec, 1);
	fence(&rec, c);

	struct workflow_event_ref seen[MAX_EVENTS];
	cr_assert_eq(recorded(&rec, seen), 1, "the callback saw a bad payload");
	assert_event(&seen[0], wf, 1);
	cr_assert_eq(metric_get(ignored) - ignored_before, 3,
		     "ignored %lld, expected 3",
		     metric_get(ignored) - ignored_before);
	/* Alive all along: no failed tick, hence no reconnect. */
	cr_assert_eq(metric_get(errors), errors_before);

	/* The exposition shows the same count. */
	struct strbuf sb = STRBUF_INIT;
	metrics_render(&sb);
	char line[96];
	snprintf(line, sizeof(line), "\nnodeflow_listener_ignored_total %lld\n",
		 metric_get(ignored));
	cr_assert(strstr(sb_str(&sb), line), "no \"%s\" in:\n%s", line + 1,
		  sb_str(&sb));
	sb_free(&sb);

	loop_stop(l);
	pthread_mutex_destroy(&rec.mu);
	free(bad);
	free(wf);
	PQfinish(c);
	th_db_drop(&d);
}

Test(listener, nothing_is_raised_while_no_stream_is_open)
{
	struct th_db d;
	th_db_clone(&d);
	PGconn *c = th_connect(d.url);

	struct recorder rec;
	recorder_init(&rec);
	struct loop *l = listener_start(d.url, on_event, &rec);
	wait_listening(&rec, c);
	struct workflow_event_ref seen[MAX_EVENTS];
	char *wf = new_uuid(c);

	/* Nobody holds a stream: the event is written, no hint is raised. */
	insert_event(c, wf, 1, 0);
	fence(&rec, c);
	cr_assert_eq(recorded(&rec, seen), 0, "notified with no stream open");

	/* A holder whose process died (its registration expired): none. */
	hold_live(c, -1);
	insert_event(c, wf, 2, 0);
	fence(&rec, c);
	cr_assert_eq(recorded(&rec, seen), 0,
		     "notified for an expired registration");

	/* A live holder: every writer's event is announced again. */
	hold_live(c, 3600);
	insert_event(c, wf, 3, 0);
	wait_events(&rec, 1);
	fence(&rec, c);
	cr_assert_eq(recorded(&rec, seen), 1);
	assert_event(&seen[0], wf, 3);

	loop_stop(l);
	pthread_mutex_destroy(&rec.mu);
	free(wf);
	PQfinish(c);
	th_db_drop(&d);
}
