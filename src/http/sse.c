#include "http/sse.h"

#include "engine/listener.h"
#include "http/api.h"
#include "http/app.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/events_repo.h"
#include "store/notify.h"
#include "store/pool.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/uuid.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum {
	BATCH = 200,         /* events read per query */
	TICK_MS = 1000,      /* the hub's pass when nothing wakes it */
	MAX_PENDING = 10000, /* notified events awaiting a namespace look-up */
	RETRY_MS = 100,      /* a namespace stream held back by a running
				transaction looks again */
	ACQUIRE_MS = 5000,   /* waiting for a pool connection */
	LIVE_TTL_S = 30,     /* a registration outlives its process by this */
	LIVE_REFRESH_MS = 10000, /* and is refreshed this often */
	SETTLE_MS = 1000,     /* re-read after registering (the hints missed) */
	LIVE_WAIT_MS = 15000, /* at most, for the hub to answer a new stream */
	CLIENT_BUCKETS = 64,
};

static const char KEEPALIVE[] = ": keepalive\n\n";

/* One open stream. */
struct sub {
	struct sub *next;
	struct sse_hub *h;
	struct http_stream *st;
	bool ns_stream;
	char ns_id[37];
	char wf_id[37]; /* workflow streams */
	char *name;     /* namespace streams: the ?name filter, or NULL */
	char client[HTTP_ADDR_LEN];
	/* Under the hub's lock: */
	bool dirty;  /* read it (again) */
	bool closed; /* the stream is over: reap */
	bool busy;   /* the hub's thread works on it outside the lock */
	bool cut;    /* cut off */
	bool held;   /* more to read, waiting for the client to take what is
			buffered (on_drained) */
	int64_t beat_due_ms;
	/* The hub's thread only: */
	int64_t cursor;           /* workflow streams: last seq sent */
	struct events_ns_pos pos; /* namespace streams: last change read */
	bool unsettled; /* namespace streams: a change waits for an older
			   transaction to end */
	bool beat;
	bool more;
	bool hold;             /* held back this pass */
	uint64_t sent_at_beat; /* bytes taken by the previous heartbeat */
	bool pending_at_beat;  /* and bytes were waiting then */
};

struct client_count {
	struct client_count *next;
	unsigned n;
	char addr[HTTP_ADDR_LEN];
};

struct sse_hub {
	struct sse_opts o;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool started, stop, wake;
	struct loop *listener;
	struct sub *subs;
	unsigned nstreams, ns_streams;
	struct client_count *clients[CLIENT_BUCKETS];
	/* Notified (workflowId, seq) pairs for the namespace streams. */
	char (*pend_ids)[37];
	int64_t *pend_seqs;
	int npend;
	bool overflow; /* some were not kept: read every namespace stream */
	int64_t retry_due_ms; /* the hub's thread: unsettled streams look
				 again (0: none) */
	struct metric *m_streams, *m_events, *m_cutoffs, *m_refused, *m_dropped;
	/* This process's row in "LiveStreamHolders" (the trigger notifies
	 * only while one is alive).  live and live_answered are written by
	 * the hub's thread under the lock (live_cond: either changed); the
	 * rest is the thread's.  live_asked counts the streams opened;
	 * live_answered is the last of them that a registration has counted
	 * (or that a failed attempt has given up on). */
	char process_id[37];
	bool live;
	uint64_t live_asked, live_answered;
	pthread_cond_t live_cond; /* CLOCK_MONOTONIC */
	int64_t live_refresh_ms;
	unsigned live_count; /* the streams it says */
};

/* ------------------------------------------------------------- requests */

bool
sse_wanted(const struct http_request *req)
{
	const char *accept = http_header(req, "Accept");
	if (!accept)
		return false;
	for (const char *p = accept; *p; p++)
		if (strncasecmp(p, "text/event-stream", 17) == 0)
			return true;
	return false;
}

static unsigned
client_bucket(const char *addr)
{
	uint32_t h = 2166136261u;
	for (; *addr; addr++)
		h = (h ^ (unsigned char)*addr) * 16777619u;
	return h % CLIENT_BUCKETS;
}

/* Takes a stream place for sub's client, or answers 429 (lock held). */
static bool
take_place(struct sse_hub *h, struct sub *s, struct http_response *res)
{
	struct client_count **cp = &h->clients[client_bucket(s->client)];
	while (*cp && strcmp((*cp)->addr, s->client) != 0)
		cp = &(*cp)->next;
	unsigned mine = *cp ? (*cp)->n : 0;
	if (h->o.max_streams_per_client &&
	    mine >= h->o.max_streams_per_client) {
		http_fail(res, ERR_TOO_MANY,
			  "%u event streams of %s are open already, the most "
			  "one client may hold (--sse-max-streams-per-client)",
			  mine, s->client);
		return false;
	}
	if (h->o.max_streams && h->nstreams >= h->o.max_streams) {
		http_fail(res, ERR_TOO_MANY,
			  "%u event streams are open already, the most this "
			  "server holds (--sse-max-streams)",
			  h->nstreams);
		return false;
	}
	if (!*cp) {
		*cp = xcalloc(1, sizeof(**cp));
		snprintf((*cp)->addr, sizeof((*cp)->addr), "%s", s->client);
	}
	(*cp)->n++;
	h->nstreams++;
	if (s->ns_stream)
		h->ns_streams++;
	return true;
}

static void
give_place(struct sse_hub *h, struct sub *s)
{
	struct client_count **cp = &h->clients[client_bucket(s->client)];
	while (*cp && strcmp((*cp)->addr, s->client) != 0)
		cp = &(*cp)->next;
	if (*cp && --(*cp)->n == 0) {
		struct client_count *gone = *cp;
		*cp = gone->next;
		free(gone);
	}
	h->nstreams--;
	if (s->ns_stream)
		h->ns_streams--;
}

/* The stream is over (an MHD thread): give its place back, let the hub's
 * thread reap it. */
static void
on_closed(void *arg)
{
	struct sub *s = arg;
	struct sse_hub *h = s->h;
	pthread_mutex_lock(&h->lock);
	s->closed = true;
	give_place(h, s);
	h->wake = true;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->lock);
	metric_add(h->m_streams, -1);
}

/* The client took every byte written: a stream held back reads on. */
static void
on_drained(void *arg)
{
	struct sub *s = arg;
	struct sse_hub *h = s->h;
	pthread_mutex_lock(&h->lock);
	if (s->held) {
		s->held = false;
		s->dirty = true;
		h->wake = true;
		pthread_cond_signal(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
}

/* Registers s and opens its stream, or answers 429 (and frees s). */
static void
open_stream(struct sse_hub *h, struct http_request *req,
	    struct http_response *res, struct sub *s)
{
	s->h = h;
	http_client_address(req, s->client);
	pthread_mutex_lock(&h->lock);
	bool ok = !h->stop && take_place(h, s, res);
	if (ok) {
		s->st = http_stream_open(req, res, "text/event-stream",
					 on_closed, on_drained, s);
		if (!s->st) { /* the server is stopping */
			give_place(h, s);
			ok = false;
			http_fail(res, ERR_UNAVAILABLE,
				  "the server is stopping");
		}
	} else if (h->stop) {
		http_fail(res, ERR_UNAVAILABLE, "the server is stopping");
	}
	if (ok) {
		/* The opening comment sends the headers at once. */
		http_stream_write(s->st, KEEPALIVE, sizeof(KEEPALIVE) - 1);
		s->dirty = true;
		s->beat_due_ms =
			mono_ms() + 1000 * (int64_t)h->o.heartbeat_seconds;
		s->next = h->subs;
		h->subs = s;
		h->wake = true;
		pthread_cond_signal(&h->cond);
		/* A stream waits for the hub's next pass to count it, so that
		 * what its client does next is announced (a namespace stream
		 * sees only what is announced): that pass registers the
		 * process, or finds it registered, or fails and says so in
		 * the log.  Not for ever: the stream reads its events at the
		 * heartbeat regardless. */
		uint64_t mine = ++h->live_asked;
		struct timespec until = mono_deadline(LIVE_WAIT_MS);
		while (h->live_answered < mine && !h->stop &&
		       pthread_cond_timedwait(&h->live_cond, &h->lock,
					      &until) == 0)
			;
	}
	pthread_mutex_unlock(&h->lock);
	if (ok) {
		metric_add(h->m_streams, 1);
		return;
	}
	if (res->status == 429) {
		metric_add(h->m_refused, 1);
		http_add_header(res, "Retry-After", "1");
	}
	free(s->name);
	free(s);
}

/* Last-Event-ID, when sent, wins over ?after: it is what a reconnecting
 * EventSource sends with the URL it first opened. */
static bool
resume_point(struct http_request *req, struct http_response *res,
	     int64_t *after)
{
	const char *last = http_header(req, "Last-Event-ID");
	if (!last || !*last)
		return true;
	char *end;
	errno = 0;
	long long v = strtoll(last, &end, 10);
	if (errno || *end || v < 0 || end == last) {
		http_fail(res, ERR_INVALID,
			  "Last-Event-ID \"%.40s\" is not an event id (a seq)",
			  last);
		return false;
	}
	*after = v;
	return true;
}

void
sse_workflow_stream(struct sse_hub *h, struct http_request *req,
		    struct http_response *res, struct db *db, const char *ns_id,
		    const char *id, int64_t after)
{
	if (!h) {
		http_fail(res, ERR_UNAVAILABLE,
			  "event streams are not served here");
		return;
	}
	if (!resume_point(req, res, &after))
		return;
	struct err e = ERR_INIT;
	bool found;
	if (!events_workflow_exists(db, ns_id, id, &found, &e)) {
		http_error(res, &e);
		return;
	}
	if (!found) {
		http_fail(res, ERR_NOT_FOUND, "workflow %s not found", id);
		return;
	}
	struct sub *s = xcalloc(1, sizeof(*s));
	snprintf(s->ns_id, sizeof(s->ns_id), "%s", ns_id);
	snprintf(s->wf_id, sizeof(s->wf_id), "%s", id);
	s->cursor = after;
	open_stream(h, req, res, s);
}

void
sse_namespace_events(struct http_request *req, struct http_response *res)
{
	struct app *app = req->app;
	if (!sse_wanted(req)) {
		http_fail(res, ERR_INVALID,
			  "this endpoint is an event stream: send Accept: "
			  "text/event-stream");
		return;
	}
	if (!app->sse) {
		http_fail(res, ERR_UNAVAILABLE,
			  "event streams are not served here");
		return;
	}
	const char *name = http_query(req, "name");
	if (name && !*name) {
		http_fail(res, ERR_INVALID,
			  "query argument name must not be empty");
		return;
	}
	/* Where to start: after the change a client last saw (Last-Event-ID,
	 * winning over ?after), else at the present. */
	struct events_ns_pos pos;
	const char *last = http_header(req, "Last-Event-ID");
	const char *given = last && *last ? last : http_query(req, "after");
	bool resume = given && *given;
	if (resume && !events_ns_pos_parse(given, &pos)) {
		http_fail(res, ERR_INVALID,
			  "%s \"%.100s\" is not an event id of this stream",
			  given == last ? "Last-Event-ID"
					: "query argument after",
			  given);
		return;
	}
	struct db *db = api_db(req, res);
	if (!db)
		return;
	char ns_id[37];
	struct err e = ERR_INIT;
	bool ok = api_namespace(req, res, db, ns_id);
	if (ok && !resume && !events_ns_now(db, &pos, &e)) {
		http_error(res, &e);
		ok = false;
	}
	api_db_release(req, db);
	if (!ok)
		return;
	struct sub *s = xcalloc(1, sizeof(*s));
	s->ns_stream = true;
	snprintf(s->ns_id, sizeof(s->ns_id), "%s", ns_id);
	s->name = name ? xstrdup(name) : NULL;
	s->pos = pos;
	open_stream(app->sse, req, res, s);
}

/* ------------------------------------------------------------ listener */

/* A notification (the listener's thread; must not block). */
static void
on_event(const struct workflow_event_ref *ev, void *arg)
{
	struct sse_hub *h = arg;
	bool wake = false;
	pthread_mutex_lock(&h->lock);
	for (struct sub *s = h->subs; s; s = s->next)
		if (!s->ns_stream && !s->closed &&
		    strcmp(s->wf_id, ev->workflow_id) == 0) {
			s->dirty = true;
			wake = true;
		}
	if (h->ns_streams) {
		if (h->npend < MAX_PENDING) {
			memcpy(h->pend_ids[h->npend], ev->workflow_id, 37);
			h->pend_seqs[h->npend] = ev->seq;
			h->npend++;
		} else {
			/* Not looked up: every namespace stream reads. */
			h->overflow = true;
			metric_add(h->m_dropped, 1);
		}
		wake = true;
	}
	if (wake) {
		h->wake = true;
		pthread_cond_signal(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
}

/* After a reconnection notifications may have been lost: re-read all. */
static void
on_connect(struct sse_hub *h)
{
	pthread_mutex_lock(&h->lock);
	for (struct sub *s = h->subs; s; s = s->next)
		s->dirty = true;
	h->wake = true;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

/* --------------------------------------------------------------- writing */

static void
cut_off(struct sub *s, const char *why)
{
	struct sse_hub *h = s->h;
	s->cut = true;
	http_stream_end(s->st, true);
	metric_add(h->m_cutoffs, 1);
	log_info("sse", "cut off an event stream of %s: %s", s->client, why);
}

/* Writes to s's stream, cutting it off when its unsent bytes would pass
 * the cap (one event, however large, always fits an empty buffer); false
 * when the stream is over. */
static bool
sub_write(struct sub *s, const char *text, size_t n)
{
	struct sse_hub *h = s->h;
	if (s->cut)
		return false;
	size_t buffered = http_stream_buffered(s->st);
	if (buffered && buffered + n > h->o.buffer_bytes) {
		cut_off(s, "its unsent bytes would pass --sse-buffer-bytes");
		return false;
	}
	return http_stream_write(s->st, text, n);
}

struct read_ctx {
	struct sub *s;
	struct strbuf sb;
	bool ok;
	bool full; /* stopped: half the cap is buffered */
};

static void
on_row(int64_t seq, const char *type, const char *json, void *arg)
{
	struct read_ctx *c = arg;
	if (!c->ok)
		return;
	sb_reset(&c->sb);
	sb_printf(&c->sb, "id: %" PRId64 "\nevent: %s\ndata: %s\n\n", seq, type,
		  json);
	c->ok = sub_write(c->s, sb_str(&c->sb), c->sb.len);
	if (c->ok) {
		c->s->cursor = seq;
		metric_add(c->s->h->m_events, 1);
		/* Enough buffered: the rest waits for the client. */
		if (http_stream_buffered(c->s->st) >=
		    c->s->h->o.buffer_bytes / 2) {
			c->full = true;
			c->ok = false;
		}
	}
}

/* Reads one batch of s's events after its cursor; sets s->more when there
 * may be more. */
static bool
read_batch(struct db *db, struct sub *s, struct err *e)
{
	struct read_ctx c = {s, STRBUF_INIT, true, false};
	int n = 0;
	bool ok = events_read(db, s->ns_id, s->wf_id, s->cursor, BATCH, on_row,
			      &c, &n, e);
	sb_free(&c.sb);
	s->more = ok && c.ok && n == BATCH;
	s->hold = ok && c.full;
	return ok;
}

struct ns_ctx {
	struct sub *s;
	struct strbuf sb;
	bool ok;
	bool full;    /* stopped: half the cap is buffered */
	bool waiting; /* stopped at a change not yet settled */
};

static void
on_ns_row(const struct events_ns_pos *pos, bool settled, const char *def_name,
	  const char *json, void *arg)
{
	struct ns_ctx *c = arg;
	struct sub *s = c->s;
	if (!c->ok || c->waiting)
		return;
	if (!settled) {
		/* An older transaction still runs: what it commits comes
		 * before this one.  Look again shortly. */
		c->waiting = true;
		s->unsettled = true;
		return;
	}
	if (json && (!s->name || strcmp(s->name, def_name) == 0)) {
		char id[EVENTS_NS_POS_LEN];
		events_ns_pos_format(pos, id);
		sb_reset(&c->sb);
		sb_printf(&c->sb, "id: %s\nevent: workflow\ndata: %s\n\n", id,
			  json);
		c->ok = sub_write(s, sb_str(&c->sb), c->sb.len);
		if (!c->ok)
			return;
		metric_add(s->h->m_events, 1);
	}
	s->pos = *pos;
	/* Enough buffered: the rest waits for the client. */
	if (http_stream_buffered(s->st) >= s->h->o.buffer_bytes / 2) {
		c->full = true;
		c->ok = false;
	}
}

/* Reads one batch of a namespace stream's changes after its position. */
static bool
read_ns_batch(struct db *db, struct sub *s, struct err *e)
{
	struct ns_ctx c = {s, STRBUF_INIT, true, false, false};
	int n = 0;
	s->unsettled = false;
	bool ok = events_ns_read(db, s->ns_id, &s->pos, BATCH, on_ns_row, &c,
				 &n, e);
	sb_free(&c.sb);
	s->more = ok && c.ok && !c.waiting && n == BATCH;
	s->hold = ok && c.full;
	return ok;
}

/* The namespaces with status changes among a pass's notifications. */
struct ns_list {
	struct strbuf ids; /* 37 bytes each */
	int n;
};

static void
on_changed_ns(const char *ns_id, void *arg)
{
	struct ns_list *l = arg;
	char id[37];
	snprintf(id, sizeof(id), "%s", ns_id);
	sb_append(&l->ids, id, sizeof(id));
	l->n++;
}

/* Marks the namespace streams of l's namespaces (every one when l is
 * NULL) to be read (hub lock held). */
static void
mark_ns_streams(struct sse_hub *h, const struct ns_list *l)
{
	for (struct sub *s = h->subs; s; s = s->next) {
		if (!s->ns_stream || s->closed)
			continue;
		for (int i = 0; l && i < l->n && !s->dirty; i++)
			if (strcmp(s->ns_id, l->ids.ptr + 37 * i) == 0)
				s->dirty = true;
		if (!l)
			s->dirty = true;
	}
}

/* ------------------------------------------------------------- the loop */

static void
reap(struct sse_hub *h)
{
	for (struct sub **sp = &h->subs; *sp;) {
		struct sub *s = *sp;
		if (s->closed && !s->busy) {
			*sp = s->next;
			http_stream_release(s->st);
			free(s->name);
			free(s);
		} else {
			sp = &s->next;
		}
	}
}

enum live_step { LIVE_SAME, LIVE_NEW };

/*
 * Keeps this process's "LiveStreamHolders" row alive while it holds a
 * stream and removes it with the last one (the hub's thread, which
 * acquires *db when it needs it).  A failure is logged and tried again on
 * the next pass; meanwhile streams still see every event, at the
 * heartbeat.
 */
static enum live_step
live_holding(struct sse_hub *h, unsigned nstreams, int64_t now, struct db **db,
	     struct err *e)
{
	bool want = nstreams > 0;
	if (want == h->live &&
	    (!want || (now < h->live_refresh_ms && nstreams == h->live_count)))
		return LIVE_SAME;
	if (!*db)
		*db = db_pool_acquire(h->o.pool, ACQUIRE_MS, e);
	bool ok = *db && (want ? notify_live_hold(*db, h->process_id, nstreams,
						  LIVE_TTL_S, e)
			       : notify_live_release(*db, h->process_id, e));
	if (!ok) {
		log_warn("sse", "registering the open event streams failed: %s",
			 e->msg);
		*e = (struct err)ERR_INIT;
		return LIVE_SAME;
	}
	bool fresh = want && !h->live;
	pthread_mutex_lock(&h->lock);
	h->live = want;
	pthread_cond_broadcast(&h->live_cond);
	pthread_mutex_unlock(&h->lock);
	h->live_refresh_ms = now + LIVE_REFRESH_MS;
	h->live_count = nstreams;
	return fresh ? LIVE_NEW : LIVE_SAME;
}

/* Notifications are raised from the registration's commit on; events
 * whose writers checked before it are read at the latest SETTLE_MS from
 * now, not at the next heartbeat. */
static void
settle(struct sse_hub *h, int64_t now)
{
	pthread_mutex_lock(&h->lock);
	for (struct sub *s = h->subs; s; s = s->next)
		if (s->beat_due_ms > now + SETTLE_MS)
			s->beat_due_ms = now + SETTLE_MS;
	pthread_mutex_unlock(&h->lock);
}

static void *
hub_main(void *arg)
{
	struct sse_hub *h = arg;
	struct sub **work = NULL;
	size_t work_cap = 0;
	int pend_cap = 0;
	char(*ids)[37] = NULL;
	int64_t *seqs = NULL;
	const char **id_ptrs = NULL;
	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		if (!h->wake) {
			int64_t wait = TICK_MS;
			if (h->retry_due_ms) {
				int64_t left = h->retry_due_ms - mono_ms();
				wait = left < 1 ? 1 : left < wait ? left : wait;
			}
			struct timespec until = mono_deadline(wait);
			pthread_cond_timedwait(&h->cond, &h->lock, &until);
			if (h->stop)
				break;
		}
		h->wake = false;
		reap(h);
		struct db *db = NULL;
		struct err e = ERR_INIT;
		bool failed = false;

		/* Which namespaces the notifications have status changes in:
		 * their streams read in this pass. */
		int npend = h->npend;
		if (npend) {
			if (npend > pend_cap) {
				pend_cap = npend;
				ids = xrealloc(ids, (size_t)npend * 37);
				seqs = xrealloc(seqs,
						(size_t)npend * sizeof(*seqs));
				id_ptrs = xrealloc(id_ptrs,
						   (size_t)npend *
							   sizeof(*id_ptrs));
			}
			memcpy(ids, h->pend_ids, (size_t)npend * 37);
			memcpy(seqs, h->pend_seqs,
			       (size_t)npend * sizeof(*seqs));
			h->npend = 0;
			pthread_mutex_unlock(&h->lock);
			for (int i = 0; i < npend; i++)
				id_ptrs[i] = ids[i];
			struct ns_list l = {STRBUF_INIT, 0};
			db = db_pool_acquire(h->o.pool, ACQUIRE_MS, &e);
			bool found = db && events_changed_namespaces(
						   db, id_ptrs, seqs, npend,
						   on_changed_ns, &l, &e);
			pthread_mutex_lock(&h->lock);
			/* A failure reads them all (and likely fails too:
			 * then the tick tries again). */
			mark_ns_streams(h, found ? &l : NULL);
			sb_free(&l.ids);
		}
		if (h->overflow) {
			h->overflow = false;
			mark_ns_streams(h, NULL);
		}
		int64_t now = mono_ms();
		if (h->retry_due_ms && now >= h->retry_due_ms) {
			h->retry_due_ms = 0;
			for (struct sub *s = h->subs; s; s = s->next)
				if (s->ns_stream && s->unsettled)
					s->dirty = true;
		}
		size_t nwork = 0;
		for (struct sub *s = h->subs; s; s = s->next) {
			if (s->closed)
				continue;
			s->beat = now >= s->beat_due_ms;
			if (s->beat) {
				s->beat_due_ms =
					now +
					1000 * (int64_t)h->o.heartbeat_seconds;
				s->dirty = true; /* and look again */
			}
			if (!s->dirty)
				continue;
			s->dirty = false;
			s->busy = true;
			if (nwork == work_cap) {
				work_cap = work_cap ? 2 * work_cap : 64;
				work = xrealloc(work, work_cap * sizeof(*work));
			}
			work[nwork++] = s;
		}
		unsigned nstreams = h->nstreams;
		uint64_t asked = h->live_asked;
		pthread_mutex_unlock(&h->lock);

		/* Registered before the streams are read: their next events
		 * are announced. */
		if (live_holding(h, nstreams, now, &db, &e) == LIVE_NEW)
			settle(h, now);
		pthread_mutex_lock(&h->lock);
		if (h->live_answered != asked) {
			h->live_answered = asked;
			pthread_cond_broadcast(&h->live_cond);
		}
		pthread_mutex_unlock(&h->lock);
		for (size_t i = 0; i < nwork; i++) {
			struct sub *s = work[i];
			s->more = false;
			s->hold = false;
			size_t buffered = http_stream_buffered(s->st);
			if (s->beat) {
				/* Bytes waiting at the last heartbeat and not
				 * one taken since: the client does not read. */
				uint64_t sent = http_stream_sent(s->st);
				if (s->pending_at_beat && buffered &&
				    sent == s->sent_at_beat) {
					cut_off(s, "it took nothing in a "
						   "heartbeat");
					continue;
				}
				s->sent_at_beat = sent;
				s->pending_at_beat = buffered > 0;
				if (!buffered &&
				    !sub_write(s, KEEPALIVE,
					       sizeof(KEEPALIVE) - 1))
					continue;
			}
			if (s->cut)
				continue;
			if (failed) { /* the database is away: next pass */
				s->more = true;
				continue;
			}
			if (buffered >= h->o.buffer_bytes / 2) {
				s->hold = true; /* until it drains */
				continue;
			}
			if (!db)
				db = db_pool_acquire(h->o.pool, ACQUIRE_MS, &e);
			if (!db || !(s->ns_stream ? read_ns_batch(db, s, &e)
						  : read_batch(db, s, &e))) {
				failed = true;
				s->more = true; /* again on the next pass */
			}
		}
		if (db)
			db_pool_release(h->o.pool, db);
		if (failed)
			log_warn("sse", "reading events failed: %s", e.msg);

		pthread_mutex_lock(&h->lock);
		for (size_t i = 0; i < nwork; i++) {
			struct sub *s = work[i];
			s->busy = false;
			/* Under the lock, so on_drained either finds the flag
			 * or ran before the buffer is looked at. */
			if (s->hold && !s->cut) {
				if (http_stream_buffered(s->st))
					s->held = true;
				else
					s->more = true;
			}
			if (s->more) {
				s->dirty = true;
				if (!failed) /* a failure waits for the tick */
					h->wake = true;
			}
			if (s->unsettled && !s->cut && !h->retry_due_ms)
				h->retry_due_ms = mono_ms() + RETRY_MS;
		}
	}
	pthread_mutex_unlock(&h->lock);
	struct db *db = NULL;
	struct err e = ERR_INIT;
	(void)live_holding(h, 0, mono_ms(), &db, &e);
	if (db)
		db_pool_release(h->o.pool, db);
	free(work);
	free(ids);
	free(seqs);
	free(id_ptrs);
	return NULL;
}

static void
listener_connected(void *arg)
{
	on_connect(arg);
}

struct sse_hub *
sse_start(const struct sse_opts *o)
{
	struct sse_hub *h = xcalloc(1, sizeof(*h));
	h->o = *o;
	if (h->o.heartbeat_seconds < 1)
		h->o.heartbeat_seconds = 1;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &attr);
	pthread_cond_init(&h->live_cond, &attr);
	pthread_condattr_destroy(&attr);
	uuid_v7(h->process_id);
	h->pend_ids = xcalloc(MAX_PENDING, sizeof(*h->pend_ids));
	h->pend_seqs = xcalloc(MAX_PENDING, sizeof(*h->pend_seqs));
	h->m_streams = metric_register(METRIC_GAUGE, "nodeflow_sse_streams", "",
				       "Event streams open");
	h->m_events =
		metric_register(METRIC_COUNTER, "nodeflow_sse_events_total", "",
				"Events written to event streams");
	h->m_cutoffs = metric_register(
		METRIC_COUNTER, "nodeflow_sse_cutoffs_total", "",
		"Event streams cut off for not reading (--sse-buffer-bytes)");
	h->m_refused = metric_register(
		METRIC_COUNTER, "nodeflow_sse_refused_total", "",
		"Event streams refused because too many are open (429)");
	h->m_dropped = metric_register(
		METRIC_COUNTER, "nodeflow_sse_changes_dropped_total", "",
		"Notifications not read for namespace streams (too many "
		"waiting)");
	if (pthread_create(&h->thread, NULL, hub_main, h) != 0) {
		fprintf(stderr, "fatal: could not start the event streams\n");
		abort();
	}
	h->started = true;
	h->listener = listener_start_ex(o->database_url, on_event,
					listener_connected, h);
	return h;
}

void
sse_stop(struct sse_hub *h)
{
	if (!h)
		return;
	loop_stop(h->listener);
	h->listener = NULL;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_signal(&h->cond);
	pthread_cond_broadcast(&h->live_cond);
	pthread_mutex_unlock(&h->lock);
	if (h->started)
		pthread_join(h->thread, NULL);
	h->started = false;
}

void
sse_free(struct sse_hub *h)
{
	if (!h)
		return;
	sse_stop(h);
	for (struct sub *s = h->subs; s;) {
		struct sub *next = s->next;
		http_stream_release(s->st);
		free(s->name);
		free(s);
		s = next;
	}
	for (int i = 0; i < CLIENT_BUCKETS; i++)
		while (h->clients[i]) {
			struct client_count *next = h->clients[i]->next;
			free(h->clients[i]);
			h->clients[i] = next;
		}
	free(h->pend_ids);
	free(h->pend_seqs);
	pthread_cond_destroy(&h->cond);
	pthread_cond_destroy(&h->live_cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
