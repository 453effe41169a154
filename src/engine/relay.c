#include "engine/relay.h"

#include "engine/channel.h"
#include "engine/sink_kind.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/db.h"
#include "store/outbox_repo.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/timeutil.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
	PRUNE_BATCH = 1000,
	PRUNE_EVERY_MS = 60000,
	BODY_KEEP = 200, /* bytes of an error answer kept in lastError */
};

/* ------------------------------------------------------------- checks */

static bool
name_in(const char *s, const char *const *names)
{
	for (size_t i = 0; names[i]; i++)
		if (strcmp(s, names[i]) == 0)
			return true;
	return false;
}

bool
relay_sink_body(const json_t *body, const char **kind, json_t **config,
		char **secret, struct dsl_errors *errs)
{
	*config = NULL;
	*secret = NULL;
	*kind = json_string_value(json_object_get(body, "kind"));
	const struct sink_kind *k = sink_kind_find(*kind);
	if (!*kind) {
		dsl_errors_add(errs, "$.kind", "required: one of %s",
			       sink_kind_names());
		return false;
	}
	if (!k) {
		dsl_errors_add(errs, "$.kind",
			       "unknown sink kind \"%.100s\" (known: %s)",
			       *kind, sink_kind_names());
		return false;
	}
	json_t *cfg = json_object();
	k->check(body, cfg, secret, errs);
	if (errs->n) {
		json_decref(cfg);
		return false;
	}
	*config = cfg;
	return true;
}

static const char *const workflow_states[] = {
	"STARTED",    "COMPLETED", "FAILED",  "TIMED_OUT",
	"TERMINATED", "PAUSED",    "RESUMED", "RETRIED",
	"RESTARTED",  "RERUN",     NULL};
static const char *const task_states[] = {"SCHEDULED",
					  "STARTED",
					  "IN_PROGRESS",
					  "COMPLETED",
					  "COMPLETED_WITH_ERRORS",
					  "FAILED",
					  "FAILED_WITH_TERMINAL_ERROR",
					  "TIMED_OUT",
					  "CANCELED",
					  "SKIPPED",
					  "AWAITING_COMPLETION",
					  NULL};

static void
add_type(json_t *types, const char *prefix, const char *state)
{
	char t[96];
	snprintf(t, sizeof(t), "%s%s", prefix, state);
	size_t i;
	json_t *v;
	json_array_foreach (types, i, v)
		if (strcmp(json_string_value(v), t) == 0)
			return;
	json_array_append_new(types, json_string(t));
}

static json_t *
transitions(const json_t *body, const char *member, const char *prefix,
	    const char *const *states, json_t *types, struct dsl_errors *errs)
{
	json_t *out = json_array();
	const json_t *a = json_object_get(body, member);
	char path[64];
	snprintf(path, sizeof(path), "$.%s", member);
	if (!a || json_is_null(a))
		return out;
	if (!json_is_array(a)) {
		dsl_errors_add(errs, path, "must be an array of status names");
		return out;
	}
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		const char *s = json_string_value(v);
		/* RUNNING is how a workflow's start reads as a status. */
		const char *state = s && strcmp(prefix, "WORKFLOW_") == 0 &&
						    strcmp(s, "RUNNING") == 0
					    ? "STARTED"
					    : s;
		if (!state || !name_in(state, states)) {
			struct strbuf known = STRBUF_INIT;
			for (size_t k = 0; states[k]; k++)
				sb_printf(&known, "%s%s", k ? ", " : "",
					  states[k]);
			dsl_errors_add(errs, path,
				       "[%zu]: not a status name (one of %s)",
				       i, sb_str(&known));
			sb_free(&known);
			continue;
		}
		json_array_append(out, v);
		add_type(types, prefix, state);
		/* A task goes IN_PROGRESS when a worker takes it: TASK_STARTED
		 */
		if (strcmp(prefix, "TASK_") == 0 &&
		    strcmp(state, "IN_PROGRESS") == 0)
			add_type(types, prefix, "STARTED");
	}
	return out;
}

bool
relay_listener_body(const json_t *body, json_t **workflow_transitions,
		    json_t **task_transitions, json_t **event_types,
		    struct dsl_errors *errs)
{
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)body, key, v) {
		if (strcmp(key, "sink") && strcmp(key, "workflowTransitions") &&
		    strcmp(key, "taskTransitions") &&
		    strcmp(key, "workflowName"))
			dsl_errors_add(errs, "$", "unknown member \"%.100s\"",
				       key);
	}
	const json_t *sink = json_object_get(body, "sink");
	if (!json_is_string(sink) || json_string_length(sink) == 0)
		dsl_errors_add(errs, "$.sink", "required: a sink's name");
	json_t *types = json_array();
	json_t *wt = transitions(body, "workflowTransitions", "WORKFLOW_",
				 workflow_states, types, errs);
	json_t *tt = transitions(body, "taskTransitions", "TASK_", task_states,
				 types, errs);
	if (!errs->n && json_array_size(types) == 0)
		dsl_errors_add(errs, "$",
			       "name at least one transition in "
			       "workflowTransitions or taskTransitions");
	if (errs->n) {
		json_decref(types);
		json_decref(wt);
		json_decref(tt);
		return false;
	}
	*workflow_transitions = wt;
	*task_transitions = tt;
	*event_types = types;
	return true;
}

long
relay_backoff_ms(int attempts, long base_ms, long max_ms, unsigned *seed)
{
	long d = base_ms;
	for (int i = 0; i < attempts && d < max_ms; i++)
		d *= 2;
	if (d > max_ms)
		d = max_ms;
	long half = d / 2;
	return half + (long)(rand_r(seed) % (unsigned long)(d - half + 1));
}

/* --------------------------------------------------------------- relay */

struct delivery {
	struct outbox_item *it;
	CURL *h;
	struct sink_request rq;
	struct strbuf answer;
	char errbuf[CURL_ERROR_SIZE];
	struct strbuf error; /* empty: delivered */
	bool done;
	bool dead; /* dead-letter at once */
};

struct relay {
	struct loop_def def;
	struct relay_opts o;
	char *url;
	struct db *db;
	CURLM *multi;
	int64_t next_prune_ms;
	unsigned seed;
	struct metric *m_published;
	struct metric *m_failed;
	struct metric *m_dead;
	struct metric *m_pruned;
	struct metric *m_pruned_dead;
};

static struct loop *relay_loop;
static struct loop *relay_channel;

static size_t
on_answer(char *p, size_t size, size_t n, void *arg)
{
	struct delivery *d = arg;
	size_t len = size * n;
	if (d->answer.len < BODY_KEEP)
		sb_append(&d->answer, p,
			  len < BODY_KEEP - d->answer.len
				  ? len
				  : BODY_KEEP - d->answer.len);
	return len;
}

/* The start of an answer's body, on one printable line. */
static void
put_excerpt(struct strbuf *out, const struct strbuf *body)
{
	for (size_t i = 0; i < body->len; i++) {
		unsigned char c = (unsigned char)sb_str(body)[i];
		sb_putc(out, c < 0x20 || c == 0x7f ? ' ' : (char)c);
	}
}

/* Why a claimed row cannot be sent at all (dead-lettered at once), or
 * NULL; fills the request otherwise. */
static bool
prepare(struct relay *r, struct delivery *d, int64_t now_s)
{
	struct outbox_item *it = d->it;
	if (!it->sink[0]) {
		sb_puts(&d->error, "the event names no sink");
		return false;
	}
	if (!it->sink_found) {
		sb_printf(&d->error,
			  "no sink named \"%.200s\" in the event's namespace "
			  "(create it, then replay the event)",
			  it->sink);
		return false;
	}
	const struct sink_kind *k = sink_kind_find(it->kind);
	if (!k) {
		sb_printf(&d->error, "sink \"%.200s\" is of unknown kind %s",
			  it->sink_name, it->kind);
		return false;
	}
	/* "webhook:NAME" must reach a webhook; "kafka:NAME" (a provider
	 * this server has no kind for) reaches the sink NAME of any kind. */
	const char *colon = strchr(it->sink, ':');
	if (colon && strcmp(it->sink_name, it->sink) != 0) {
		char *prefix = xstrndup(it->sink, (size_t)(colon - it->sink));
		bool mismatch =
			sink_kind_find(prefix) && strcmp(prefix, it->kind) != 0;
		if (mismatch)
			sb_printf(&d->error,
				  "sink \"%.200s\" is a %s sink, not %s",
				  it->sink_name, it->kind, prefix);
		free(prefix);
		if (mismatch)
			return false;
	}
	struct sink_delivery sd = {
		.event_id = it->id,
		.event_type = it->event_type,
		.body = it->body,
		.config = it->config,
		.secret = it->secret,
		.now_s = now_s,
	};
	struct err e = ERR_INIT;
	if (!k->prepare(&sd, &d->rq, &e)) {
		sb_printf(&d->error, "sink \"%.200s\": %s", it->sink_name,
			  e.msg);
		return false;
	}
	CURL *h = curl_easy_init();
	curl_easy_setopt(h, CURLOPT_URL, d->rq.url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, r->o.timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, r->o.timeout_ms);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, d->rq.headers);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, it->body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(it->body));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_answer);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, d);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, d->errbuf);
	curl_easy_setopt(h, CURLOPT_PRIVATE, d);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "node-flow/" NODEFLOW_VERSION);
	d->h = h;
	curl_multi_add_handle(r->multi, h);
	return true;
}

static void
finished(struct delivery *d, CURLcode code)
{
	d->done = true;
	if (code != CURLE_OK) {
		sb_printf(&d->error, "%s",
			  d->errbuf[0] ? d->errbuf : curl_easy_strerror(code));
		return;
	}
	long status = 0;
	curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300)
		return;
	sb_printf(&d->error, "HTTP %ld", status);
	if (d->answer.len) {
		sb_puts(&d->error, ": ");
		put_excerpt(&d->error, &d->answer);
	}
}

static void
run_transfers(struct relay *r, size_t pending)
{
	while (pending) {
		int running = 0;
		curl_multi_perform(r->multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(r->multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			struct delivery *d = NULL;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  (char **)&d);
			finished(d, m->data.result);
			curl_multi_remove_handle(r->multi, m->easy_handle);
			pending--;
		}
		if (pending)
			curl_multi_poll(r->multi, NULL, 0, 1000, NULL);
	}
}

static bool
record(struct relay *r, struct delivery *ds, size_t n, struct err *e)
{
	if (!db_begin(r->db, e))
		return false;
	for (size_t i = 0; i < n; i++) {
		struct delivery *d = &ds[i];
		bool ok;
		if (d->error.len == 0) {
			bool recorded;
			ok = outbox_published(r->db, d->it, &recorded, e);
			if (ok && recorded)
				metric_add(r->m_published, 1);
		} else {
			long delay = relay_backoff_ms(
				d->it->attempts, r->o.backoff_ms,
				r->o.backoff_max_ms, &r->seed);
			bool dead = false;
			ok = outbox_failed(r->db, d->it, sb_str(&d->error),
					   delay, r->o.max_attempts, d->dead,
					   &dead, e);
			metric_add(r->m_failed, 1);
			if (ok && dead) {
				metric_add(r->m_dead, 1);
				log_warn("relay",
					 "outbox event %lld dead-lettered "
					 "after %d attempts: %s",
					 d->it->id, d->it->attempts + 1,
					 sb_str(&d->error));
			}
		}
		if (!ok) {
			db_rollback(r->db);
			return false;
		}
	}
	return db_commit(r->db, e);
}

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct relay *r = arg;
	(void)scratch;
	if (r->db && !db_healthy(r->db)) {
		db_close(r->db);
		r->db = NULL;
	}
	if (!r->db && !db_open(&r->db, r->url, DB_PLAIN, e))
		return LOOP_ERROR;
	int64_t now = mono_ms();
	if (now >= r->next_prune_ms) {
		size_t pruned = 0, dead = 0;
		if (r->o.dead_letter_retention_hours > 0 &&
		    !outbox_prune_dead(r->db, r->o.dead_letter_retention_hours,
				       PRUNE_BATCH, &dead, e))
			return LOOP_ERROR;
		metric_add(r->m_pruned_dead, (long long)dead);
		if (!outbox_prune(r->db, r->o.retention_hours, PRUNE_BATCH,
				  &pruned, e))
			return LOOP_ERROR;
		metric_add(r->m_pruned, (long long)pruned);
		r->next_prune_ms = pruned == PRUNE_BATCH || dead == PRUNE_BATCH
					   ? now
					   : now + PRUNE_EVERY_MS;
	}
	struct outbox_item *items;
	size_t n;
	/* The claim outlives the slowest delivery of the batch. */
	long lease = r->o.timeout_ms * 2 + 5000;
	if (!outbox_claim(r->db, r->o.max_in_flight, lease, &items, &n, e))
		return LOOP_ERROR;
	if (n == 0) {
		outbox_items_free(items, n);
		return LOOP_IDLE;
	}
	struct delivery *ds = xcalloc(n, sizeof(*ds));
	int64_t now_s = (int64_t)time(NULL);
	size_t pending = 0;
	for (size_t i = 0; i < n; i++) {
		ds[i].it = &items[i];
		if (prepare(r, &ds[i], now_s))
			pending++;
		else
			ds[i].dead = true;
	}
	run_transfers(r, pending);
	bool ok = record(r, ds, n, e);
	for (size_t i = 0; i < n; i++) {
		if (ds[i].h)
			curl_easy_cleanup(ds[i].h);
		sink_request_free(&ds[i].rq);
		sb_free(&ds[i].answer);
		sb_free(&ds[i].error);
	}
	free(ds);
	bool full = n == (size_t)r->o.max_in_flight;
	outbox_items_free(items, n);
	if (!ok)
		return LOOP_ERROR;
	return full ? LOOP_BUSY : LOOP_IDLE;
}

static void
finish(void *arg)
{
	struct relay *r = arg;
	db_close(r->db);
	curl_multi_cleanup(r->multi);
	free(r->url);
	free(r);
}

static void
on_notified(const char *payload, void *arg)
{
	(void)payload;
	(void)arg;
	if (relay_loop)
		loop_wake(relay_loop);
}

static void
on_connect(void *arg)
{
	on_notified("", arg);
}

void
relay_start(const struct relay_opts *o)
{
	if (o->max_in_flight <= 0 || relay_loop)
		return;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct relay *r = xcalloc(1, sizeof(*r));
	r->o = *o;
	r->url = xstrdup(o->database_url);
	r->o.database_url = r->url;
	r->multi = curl_multi_init();
	r->seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)r;
	r->def = (struct loop_def){
		.name = "relay",
		.tick = tick,
		.finish = finish,
		.interval_ms = o->interval_ms,
		.max_backoff_ms = 10000,
	};
	r->m_published = metric_register(
		METRIC_COUNTER, "nodeflow_outbox_published_total", "",
		"Outbox events delivered to their sink");
	r->m_failed = metric_register(
		METRIC_COUNTER, "nodeflow_outbox_failed_attempts_total", "",
		"Outbox deliveries that failed (retried or dead-lettered)");
	r->m_dead = metric_register(METRIC_COUNTER,
				    "nodeflow_outbox_dead_lettered_total", "",
				    "Outbox events dead-lettered");
	r->m_pruned = metric_register(
		METRIC_COUNTER, "nodeflow_outbox_pruned_total", "",
		"Published outbox events deleted after their retention");
	r->m_pruned_dead = metric_register(
		METRIC_COUNTER, "nodeflow_outbox_dead_letter_pruned_total", "",
		"Dead-lettered outbox events deleted after their retention");
	relay_loop = loop_start(&r->def, r);
	struct channel_opts co = {
		.name = "relay-signal",
		.url = o->database_url,
		.channel = "node_flow_outbox",
		.on_payload = on_notified,
		.on_connect = on_connect,
	};
	relay_channel = channel_start(&co);
}

void
relay_stop(void)
{
	loop_stop(relay_channel);
	relay_channel = NULL;
	loop_stop(relay_loop);
	relay_loop = NULL;
}
