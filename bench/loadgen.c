/*
 * loadgen — the node-flow load generator (bench/README.md).
 *
 * Measures node-flow the way the shared/bench/peers scripts measure the peers:
 *
 *   phased: ENQUEUE phase: N workflow starts, one POST /v1/ns/{ns}/workflows
 *           each, --concurrency in flight (no bulk API); then DRAIN phase:
 *           --workers worker threads, each long-polling
 *           /queues/bench_task/poll {count: --batch, waitMs} and reporting
 *           the whole batch in one POST /queues/bench_task/results; the
 *           drain timer starts before the first worker thread is created
 *           and stops when the API shows no RUNNING workflow of the run's
 *           definition (so the last workflow's completion commit counts).
 *   mixed:  starters and workers run together from t0 to the same end.
 *
 * e2e/s = N / (enqueue time + drain time); enqueue/s = N / enqueue time;
 * drain/s = N / drain time; tasks/s = N * tasks / drain time (and e2e).
 * Latency: per workflow, from the start call's response to the poll response
 * that carried its first task (refName t1).  In phased mode that includes
 * the wait for the drain phase; mixed mode is where it means "queue delay".
 * With more than one task, CHAIN|system|p50_ms|p90_ms|p99_ms|max_ms|n gives
 * the same from the start to the poll that carried its last task (refName
 * tT): T - 1 results, the decisions after them and the polls.
 *
 * Paced (--rate) runs of at least two minutes also print the latency per
 * minute, bucketed by when the worker received the task, over the whole
 * minutes during which starts were being made:
 *   MINUTE|system|m|n|p50_ms|p99_ms   and
 *   SOAK|system|first_p99_ms|last_p99_ms|last/first|minutes
 * (the soak target: the last minute's p99 within 1.2x the first's).
 * --label names the system in every line (default "node-flow T-task …").
 *
 * Each HTTP client is one thread with one curl easy handle: one keep-alive
 * connection per thread.  Output: a human line and
 *   RESULT|node-flow ...|e2e/s|enqueue/s|drain/s|setting|notes
 * plus RESULT-lines for tasks/s and latency, like the peers.
 *
 * Only libcurl, jansson and pthreads.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <jansson.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- options */

static struct {
	const char *server;
	const char *ns;
	long n;
	long tasks;
	long workers;
	long batch;
	long wait_ms;
	long concurrency;
	double rate; /* starts per second in total, 0: as fast as they go */
	const char *mode; /* phased | mixed */
	const char *setting;
	const char *hook; /* run as `hook LABEL` between phases (untimed) */
	const char *label; /* the system's name in the output, or NULL */
	long timeout_s;
	bool no_register;
	bool mixed;
} opt = {
	.server = "http://127.0.0.1:8080",
	.ns = "default",
	.n = 20000,
	.tasks = 1,
	.workers = 4,
	.batch = 100,
	.wait_ms = 1000,
	.concurrency = 16,
	.mode = "phased",
	.setting = "",
	.timeout_s = 900,
};

static const char *TASK = "bench_task";
static char wf_name[64];

static void
die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "loadgen: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory");
	return p;
}

/* ---------------------------------------------------------------- HTTP */

static atomic_bool server_gone;     /* too many transport errors in a row */
static atomic_long transport_fails; /* consecutive, over every client */

/* --server may list several replicas (comma-separated): each client (a
 * starter or worker thread's connection) talks to one, round robin. */
enum { MAX_SERVERS = 16 };
static char *servers[MAX_SERVERS];
static int n_servers;
static atomic_int next_server;

struct client {
	const char *base;
	CURL *h;
	struct curl_slist *hdrs;
	char *buf;
	size_t len, cap;
};

static size_t
on_data(char *p, size_t size, size_t nmemb, void *arg)
{
	struct client *c = arg;
	size_t n = size * nmemb;
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 4096;
		while (c->len + n + 1 > cap)
			cap *= 2;
		char *b = realloc(c->buf, cap);
		if (!b)
			return 0;
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	c->buf[c->len] = 0;
	return n;
}

static void
client_init(struct client *c)
{
	memset(c, 0, sizeof(*c));
	c->base = servers[atomic_fetch_add(&next_server, 1) % n_servers];
	c->h = curl_easy_init();
	if (!c->h)
		die("curl_easy_init failed");
	c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	c->hdrs = curl_slist_append(c->hdrs, "Expect:"); /* no 100-continue */
	curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdrs);
	curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, opt.wait_ms + 60000L);
	on_data("", 1, 0, c); /* allocate */
}

static void
client_free(struct client *c)
{
	curl_easy_cleanup(c->h);
	curl_slist_free_all(c->hdrs);
	free(c->buf);
}

/* One request; returns the HTTP status, or -1 on a transport error (the
 * body then holds curl's message).  body NULL: GET; otherwise `method`
 * (POST or PUT) with that body. */
static long
http(struct client *c, const char *method, const char *path, const char *body)
{
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", c->base, path);
	c->len = 0;
	c->buf[0] = 0;
	curl_easy_setopt(c->h, CURLOPT_URL, url);
	if (body) {
		curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE,
				 (long)strlen(body));
		curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST,
				 strcmp(method, "POST") ? method : NULL);
	} else {
		curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, NULL);
	}
	CURLcode rc = curl_easy_perform(c->h);
	if (rc != CURLE_OK) {
		snprintf(c->buf, c->cap, "%s", curl_easy_strerror(rc));
		c->len = strlen(c->buf);
		if (atomic_fetch_add(&transport_fails, 1) >= 200 &&
		    !atomic_exchange(&server_gone, true))
			fprintf(stderr, "loadgen: the server does not answer "
					"(200 transport errors in a row): giving "
					"up\n");
		return -1;
	}
	atomic_store(&transport_fails, 0);
	long status = 0;
	curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

/* ------------------------------------------------------ shared counters */

static atomic_long started_ok;    /* successful starts */
static atomic_long start_errors;  /* starts answered non-2xx / transport */
static atomic_long next_start;    /* next start index to take */
static atomic_long tasks_done;    /* results accepted (ok:true) */
static atomic_long result_errors; /* results refused (ok:false) or failed */
static atomic_long poll_calls, poll_empty, results_calls;
static atomic_bool workers_stop;

static atomic_bool starters_done;
static double t_begin;   /* when the starters began (for --rate) */
static double t_results; /* when the last task result was accepted */

/* Per start: the workflow id (16 bytes) and when the start answered (for
 * a first-task receipt: when the worker received it). */
struct stamp {
	unsigned char id[16];
	double t;
};

static struct stamp *starts; /* index = start number; t = 0 if failed */

static bool
parse_uuid(const char *s, unsigned char out[16])
{
	int k = 0;
	for (const char *p = s; *p && k < 32; p++) {
		int v;
		if (*p == '-')
			continue;
		if (*p >= '0' && *p <= '9')
			v = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			v = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			v = *p - 'A' + 10;
		else
			return false;
		if (k % 2 == 0)
			out[k / 2] = (unsigned char)(v << 4);
		else
			out[k / 2] |= (unsigned char)v;
		k++;
	}
	return k == 32;
}

static int
stamp_cmp(const void *a, const void *b)
{
	return memcmp(((const struct stamp *)a)->id,
		      ((const struct stamp *)b)->id, 16);
}

/* ------------------------------------------------------------ starters */

static void
note_error(const char *what, long status, const struct client *c)
{
	static atomic_int shown;
	if (atomic_fetch_add(&shown, 1) < 5)
		fprintf(stderr, "loadgen: %s: HTTP %ld: %.300s\n", what,
			status, c->buf);
}

static void *
starter(void *arg)
{
	(void)arg;
	struct client c;
	client_init(&c);
	char path[256], body[256];
	snprintf(path, sizeof(path), "/v1/ns/%s/workflows", opt.ns);
	for (;;) {
		long i = atomic_fetch_add(&next_start, 1);
		if (i >= opt.n || atomic_load(&server_gone))
			break;
		if (opt.rate > 0) { /* open loop: start i is due at i / rate */
			double due = t_begin + (double)i / opt.rate,
			       wait = due - now_s();
			if (wait > 0)
				usleep((useconds_t)(wait * 1e6));
		}
		/* The peers' payload: {"i":n,"kind":"bench","note":"small payload"} */
		snprintf(body, sizeof(body),
			 "{\"name\":\"%s\",\"input\":{\"i\":%ld,\"kind\":"
			 "\"bench\",\"note\":\"small payload\"}}",
			 wf_name, i);
		long st = http(&c, "POST", path, body);
		double t = now_s();
		const char *id = st == 201 ? strstr(c.buf, "\"id\":\"") : NULL;
		if (id && parse_uuid(id + 6, starts[i].id)) {
			starts[i].t = t;
			atomic_fetch_add(&started_ok, 1);
		} else {
			atomic_fetch_add(&start_errors, 1);
			note_error("start", st, &c);
		}
	}
	client_free(&c);
	return NULL;
}

/* ------------------------------------------------------------- workers */

/* When a worker received tasks of a kind (a workflow's first or last). */
struct receipts {
	struct stamp *v;
	size_t n, cap;
};

struct worker {
	pthread_t th;
	int idx;
	struct receipts firsts; /* first-task receipts (refName t1) */
	struct receipts lasts;	/* last-task receipts (refName tT, T > 1) */
};

static void
receipt_add(struct receipts *r, const char *workflow_id, double t)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 1024;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		if (!r->v)
			die("out of memory");
	}
	if (parse_uuid(workflow_id, r->v[r->n].id)) {
		r->v[r->n].t = t;
		r->n++;
	}
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct client c;
	client_init(&c);
	char wid[32], poll_path[256], res_path[256], poll_body[256];
	snprintf(wid, sizeof(wid), "bench-w%d", w->idx);
	snprintf(poll_path, sizeof(poll_path), "/v1/ns/%s/queues/%s/poll",
		 opt.ns, TASK);
	snprintf(res_path, sizeof(res_path), "/v1/ns/%s/queues/%s/results",
		 opt.ns, TASK);
	snprintf(poll_body, sizeof(poll_body),
		 "{\"workerId\":\"%s\",\"count\":%ld,\"waitMs\":%ld}", wid,
		 opt.batch, opt.wait_ms);
	size_t rcap = 256 + (size_t)opt.batch * 160;
	char *rbody = xmalloc(rcap);
	char (*ids)[37] = xmalloc((size_t)opt.batch * sizeof(*ids));
	char last_ref[32] = "";
	if (opt.tasks > 1)
		snprintf(last_ref, sizeof(last_ref), "t%ld", opt.tasks);

	while (!atomic_load(&workers_stop) && !atomic_load(&server_gone)) {
		long st = http(&c, "POST", poll_path, poll_body);
		double t_recv = now_s();
		atomic_fetch_add(&poll_calls, 1);
		if (st != 200) {
			note_error("poll", st, &c);
			usleep(100000);
			continue;
		}
		json_error_t je;
		json_t *doc = json_loadb(c.buf, c.len, 0, &je);
		json_t *tasks = json_object_get(doc, "tasks");
		size_t n = json_array_size(tasks);
		if (n == 0) {
			atomic_fetch_add(&poll_empty, 1);
			json_decref(doc);
			continue;
		}
		size_t k = 0;
		for (size_t i = 0; i < n && k < (size_t)opt.batch; i++) {
			json_t *t = json_array_get(tasks, i);
			const char *id =
				json_string_value(json_object_get(t, "id"));
			const char *ref =
				json_string_value(json_object_get(t, "refName"));
			const char *wfid = json_string_value(
				json_object_get(t, "workflowId"));
			if (!id)
				continue;
			snprintf(ids[k++], 37, "%s", id);
			if (ref && wfid && strcmp(ref, "t1") == 0)
				receipt_add(&w->firsts, wfid, t_recv);
			else if (ref && wfid && strcmp(ref, last_ref) == 0)
				receipt_add(&w->lasts, wfid, t_recv);
		}
		json_decref(doc);
		/* The whole batch in one request. */
		size_t len = (size_t)snprintf(rbody, rcap, "{\"results\":[");
		for (size_t i = 0; i < k; i++)
			len += (size_t)snprintf(
				rbody + len, rcap - len,
				"%s{\"taskId\":\"%s\",\"workerId\":\"%s\","
				"\"status\":\"COMPLETED\",\"output\":{\"ok\":1}}",
				i ? "," : "", ids[i], wid);
		snprintf(rbody + len, rcap - len, "]}");
		st = http(&c, "POST", res_path, rbody);
		atomic_fetch_add(&results_calls, 1);
		if (st != 200) {
			note_error("results", st, &c);
			atomic_fetch_add(&result_errors, (long)k);
			continue;
		}
		long bad = 0;
		for (const char *p = c.buf; (p = strstr(p, "\"ok\":false"));
		     p++)
			bad++;
		if (bad) {
			note_error("results (some refused)", st, &c);
			atomic_fetch_add(&result_errors, bad);
		}
		atomic_fetch_add(&tasks_done, (long)k - bad);
	}
	free(rbody);
	free(ids);
	client_free(&c);
	return NULL;
}

/* ------------------------------------------------------------ register */

static void
must(struct client *c, const char *method, const char *path, const char *body,
     const char *what)
{
	long st = http(c, method, path, body);
	if (st < 200 || st > 299)
		die("%s: HTTP %ld: %.500s", what, st, c->buf);
}

static void
register_defs(struct client *c)
{
	char path[256];
	snprintf(path, sizeof(path), "/v1/ns/%s/task-definitions/%s", opt.ns,
		 TASK);
	must(c, "PUT", path,
	     "{\"name\":\"bench_task\",\"responseTimeoutSeconds\":300,"
	     "\"retryCount\":0,\"timeoutSeconds\":0,"
	     "\"ownerEmail\":\"bench@node-flow.invalid\"}",
	     "register task definition");

	json_t *tasks = json_array();
	for (long i = 1; i <= opt.tasks; i++) {
		char ref[24];
		snprintf(ref, sizeof(ref), "t%ld", i);
		json_array_append_new(
			tasks, json_pack("{s:s,s:s,s:s,s:{s:s}}", "name", TASK,
					 "taskReferenceName", ref, "type",
					 "SIMPLE", "inputParameters", "i",
					 "${workflow.input.i}"));
	}
	json_t *wf = json_pack("{s:s,s:i,s:i,s:o}", "name", wf_name, "version",
			       1, "schemaVersion", 2, "tasks", tasks);
	char *text = json_dumps(wf, JSON_COMPACT);
	snprintf(path, sizeof(path),
		 "/v1/ns/%s/workflow-definitions?overwrite=true", opt.ns);
	must(c, "POST", path, text, "register workflow definition");
	free(text);
	json_decref(wf);
}

/* ------------------------------------------------------------ the end */

/* Any workflow of this run's definition still in one of `statuses`? */
static int
any_in(struct client *c, const char *statuses)
{
	char path[512];
	snprintf(path, sizeof(path),
		 "/v1/ns/%s/workflows?name=%s&status=%s&limit=1", opt.ns,
		 wf_name, statuses);
	long st = http(c, NULL, path, NULL);
	if (st != 200) {
		note_error("list", st, c);
		return -1;
	}
	return strstr(c->buf, "\"items\":[]") ? 0 : 1;
}

/* Waits for every accepted task result, then until the API shows no
 * RUNNING workflow of the definition.  The peers poll a count(*) every
 * 10 ms; the list endpoint costs ~8 ms of database time at 20,000
 * executions, so it is asked every 50 ms, not to slow the decider it is
 * waiting for.  Returns the time that was seen, or 0 on timeout. */
static double
wait_done(struct client *c, double t0)
{
	double deadline = t0 + (double)opt.timeout_s;
	for (;;) {
		bool starting = !atomic_load(&starters_done);
		long want = atomic_load(&started_ok) * opt.tasks;
		if (!starting && atomic_load(&tasks_done) +
					 atomic_load(&result_errors) >=
				 want)
			break;
		if (atomic_load(&server_gone))
			return 0;
		if (now_s() > deadline) {
			fprintf(stderr,
				"loadgen: timeout: %ld of %ld task results\n",
				atomic_load(&tasks_done), want);
			return 0;
		}
		usleep(2000);
	}
	t_results = now_s();
	for (;;) {
		int r = any_in(c, "RUNNING");
		if (r == 0)
			return now_s();
		if (atomic_load(&server_gone))
			return 0;
		if (now_s() > deadline) {
			fprintf(stderr, "loadgen: timeout: workflows still "
					"RUNNING after every task finished\n");
			return 0;
		}
		usleep(50000);
	}
}

static void
hook(const char *label)
{
	if (!opt.hook || !*opt.hook)
		return;
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "%s %s", opt.hook, label);
	fflush(stdout);
	if (system(cmd) != 0)
		fprintf(stderr, "loadgen: hook \"%s\" failed\n", cmd);
	fflush(stdout);
}

static int
dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double
pct(const double *v, size_t n, double p)
{
	if (!n)
		return 0;
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

/* Joins one worker's receipts r with the start stamps (sorted, n_st of
 * them): appends each receipt's latency since its start (ms) to lat and
 * its time since t0 (s) to at, from index n up to n_ok; counts receipts
 * that came before their start's response in *negative (as 0 ms).  Frees
 * r's stamps; returns the new count. */
static size_t
join_receipts(struct receipts *r, size_t n_st, long n_ok, double t0,
	      double *lat, double *at, size_t n, size_t *negative)
{
	for (size_t k = 0; k < r->n; k++) {
		struct stamp *s = bsearch(&r->v[k], starts, n_st,
					  sizeof(*starts), stamp_cmp);
		if (!s || (long)n >= n_ok)
			continue;
		double d = r->v[k].t - s->t;
		if (d < 0) {
			/* the task reached a worker before the start
			 * call's response reached its starter */
			(*negative)++;
			d = 0;
		}
		at[n] = r->v[k].t - t0;
		lat[n++] = d * 1000.0;
	}
	free(r->v);
	r->v = NULL;
	return n;
}

/* ---------------------------------------------------------------- main */

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: loadgen [options]\n"
		"  --server URL[,URL]  node-flow base URL(s); several replicas are\n"
		"                      used round robin, per connection (default %s)\n"
		"  --ns NAME           namespace (default default)\n"
		"  --n N               workflows (default 20000)\n"
		"  --tasks T           SIMPLE tasks per workflow, in sequence "
		"(default 1)\n"
		"  --workers W         worker threads (default 4)\n"
		"  --batch B           tasks per poll, results per request "
		"(default 100)\n"
		"  --wait-ms MS        long-poll wait (default 1000)\n"
		"  --concurrency C     starts in flight (default 16)\n"
		"  --rate R            at most R starts per second in total "
		"(default: no limit)\n"
		"  --mode phased|mixed enqueue then drain, or both at once "
		"(default phased)\n"
		"  --setting TEXT      server settings, echoed in the RESULT "
		"line\n"
		"  --hook CMD          run `CMD LABEL` between phases "
		"(untimed)\n"
		"  --label TEXT        the system's name in the output lines\n"
		"  --no-register       the definitions exist already\n"
		"  --timeout S         give up after S seconds (default 900)\n",
		opt.server);
}

static long
num(const char *s, const char *name, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		die("--%s: \"%s\" is not a number from %ld to %ld", name, s,
		    lo, hi);
	return v;
}

static void
parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
		{"server", 1, 0, 's'},	 {"ns", 1, 0, 'N'},
		{"n", 1, 0, 'n'},	 {"tasks", 1, 0, 't'},
		{"workers", 1, 0, 'w'},	 {"batch", 1, 0, 'b'},
		{"wait-ms", 1, 0, 'W'},	 {"concurrency", 1, 0, 'c'},
		{"mode", 1, 0, 'm'},	 {"setting", 1, 0, 'S'},
		{"hook", 1, 0, 'H'},	 {"no-register", 0, 0, 'R'},
		{"timeout", 1, 0, 'T'},	 {"help", 0, 0, 'h'},
		{"rate", 1, 0, 'r'},	 {"label", 1, 0, 'L'},
		{0, 0, 0, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 's': opt.server = optarg; break;
		case 'N': opt.ns = optarg; break;
		case 'n': opt.n = num(optarg, "n", 1, 10000000); break;
		case 't': opt.tasks = num(optarg, "tasks", 1, 100); break;
		case 'w': opt.workers = num(optarg, "workers", 1, 1000); break;
		case 'b': opt.batch = num(optarg, "batch", 1, 1000); break;
		case 'W': opt.wait_ms = num(optarg, "wait-ms", 0, 60000); break;
		case 'c':
			opt.concurrency = num(optarg, "concurrency", 1, 1000);
			break;
		case 'm': opt.mode = optarg; break;
		case 'r': opt.rate = (double)num(optarg, "rate", 0, 1000000); break;
		case 'S': opt.setting = optarg; break;
		case 'H': opt.hook = optarg; break;
		case 'L': opt.label = optarg; break;
		case 'R': opt.no_register = true; break;
		case 'T': opt.timeout_s = num(optarg, "timeout", 1, 86400); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc) {
		usage(stderr);
		exit(2);
	}
	if (strcmp(opt.mode, "phased") == 0)
		opt.mixed = false;
	else if (strcmp(opt.mode, "mixed") == 0)
		opt.mixed = true;
	else
		die("--mode: \"%s\" is not phased or mixed", opt.mode);
	char *list = strdup(opt.server);
	for (char *save = NULL, *u = strtok_r(list, ",", &save); u;
	     u = strtok_r(NULL, ",", &save)) {
		if (n_servers == MAX_SERVERS)
			die("--server: more than %d URLs", MAX_SERVERS);
		size_t sl = strlen(u);
		while (sl && u[sl - 1] == '/') /* no double slash */
			u[--sl] = 0;
		servers[n_servers++] = u;
	}
	if (!n_servers)
		die("--server: no URL");
}

int
main(int argc, char **argv)
{
	parse_args(argc, argv);
	snprintf(wf_name, sizeof(wf_name), "bench_%ld", opt.tasks);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	starts = calloc((size_t)opt.n, sizeof(*starts));
	if (!starts)
		die("out of memory");

	struct client ctl;
	client_init(&ctl);
	if (!opt.no_register)
		register_defs(&ctl);

	pthread_t *st = xmalloc((size_t)opt.concurrency * sizeof(*st));
	struct worker *ws = calloc((size_t)opt.workers, sizeof(*ws));
	if (!ws)
		die("out of memory");

	hook("start");
	double t0 = now_s(), t1, td0 = t0;
	t_begin = t0;
	if (opt.mixed) {
		td0 = t0;
		for (long i = 0; i < opt.workers; i++) {
			ws[i].idx = (int)i;
			pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
		}
	}
	for (long i = 0; i < opt.concurrency; i++)
		pthread_create(&st[i], NULL, starter, NULL);
	for (long i = 0; i < opt.concurrency; i++)
		pthread_join(st[i], NULL);
	t1 = now_s();
	atomic_store(&starters_done, true);
	if (!opt.mixed) {
		hook("enqueued");
		td0 = now_s();
		for (long i = 0; i < opt.workers; i++) {
			ws[i].idx = (int)i;
			pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
		}
	}
	double tdone = wait_done(&ctl, t0);
	/* Before the workers stop: their last long polls (up to --wait-ms)
	 * are not the phase's. */
	if (tdone)
		hook("done");
	atomic_store(&workers_stop, true);
	for (long i = 0; i < opt.workers; i++)
		pthread_join(ws[i].th, NULL);
	if (!tdone)
		die("did not finish");

	long n_ok = atomic_load(&started_ok);
	int failed = any_in(&ctl, "FAILED,TIMED_OUT,TERMINATED,PAUSED");
	if (failed != 0)
		fprintf(stderr, "loadgen: WARNING: some workflows did not "
				"complete (see GET /workflows?status=FAILED)\n");

	/* Latency: join the start stamps with the first-task receipts. */
	size_t n_st = 0;
	for (long i = 0; i < opt.n; i++)
		if (starts[i].t > 0)
			starts[n_st++] = starts[i];
	qsort(starts, n_st, sizeof(*starts), stamp_cmp);
	double *lat = xmalloc((n_ok + 1) * sizeof(double));
	double *lat_at = xmalloc((n_ok + 1) * sizeof(double)); /* receipt */
	size_t n_lat = 0, negative = 0;
	for (long i = 0; i < opt.workers; i++)
		n_lat = join_receipts(&ws[i].firsts, n_st, n_ok, t0, lat,
				      lat_at, n_lat, &negative);
	/* Start -> last task: the chain of T - 1 results, decisions and
	 * polls (tasks > 1). */
	double *chain = xmalloc((n_ok + 1) * sizeof(double));
	double *chain_at = xmalloc((n_ok + 1) * sizeof(double));
	size_t n_chain = 0, chain_negative = 0;
	for (long i = 0; i < opt.workers; i++)
		n_chain = join_receipts(&ws[i].lasts, n_st, n_ok, t0, chain,
					chain_at, n_chain, &chain_negative);
	free(chain_at);
	qsort(chain, n_chain, sizeof(double), dbl_cmp);
	/* Per whole minute of starts, before lat is sorted. */
	double paced_s = opt.rate > 0 ? (double)opt.n / opt.rate : 0;
	int minutes = opt.mixed && paced_s >= 120 ? (int)(paced_s / 60) : 0;
	double *by_min = minutes ? xmalloc((n_lat + 1) * sizeof(double)) : NULL;
	double p99_first = 0, p99_last = 0;
	char minute_lines[64][160];
	int n_minute_lines = 0;
	for (int m = 0; m < minutes; m++) {
		size_t k = 0;
		for (size_t i = 0; i < n_lat; i++)
			if (lat_at[i] >= 60.0 * m && lat_at[i] < 60.0 * (m + 1))
				by_min[k++] = lat[i];
		qsort(by_min, k, sizeof(double), dbl_cmp);
		double p99 = pct(by_min, k, 0.99);
		if (m == 0)
			p99_first = p99;
		p99_last = p99;
		if (n_minute_lines < 64)
			snprintf(minute_lines[n_minute_lines++],
				 sizeof(minute_lines[0]), "%d|%zu|%.2f|%.2f",
				 m + 1, k, pct(by_min, k, 0.5), p99);
	}
	free(by_min);
	free(lat_at);
	qsort(lat, n_lat, sizeof(double), dbl_cmp);

	double enq_s = t1 - t0, drain_s = tdone - td0;
	double total_s = opt.mixed ? tdone - t0 : enq_s + drain_s;
	double e2e = (double)n_ok / total_s;
	double enq = (double)n_ok / enq_s;
	double drain = (double)n_ok / drain_s;
	double tasks_drain = (double)(n_ok * opt.tasks) / drain_s;
	double tasks_e2e = (double)(n_ok * opt.tasks) / total_s;
	char rate[48] = "";
	if (opt.rate > 0)
		snprintf(rate, sizeof(rate), " rate=%.0f/s", opt.rate);
	char setting[1024];
	snprintf(setting, sizeof(setting),
		 "%s %ld-task wf, %s, workers=%ld batch=%ld waitMs=%ld "
		 "enqConc=%ld%s%s%s",
		 opt.mixed ? "mixed" : "phased", opt.tasks, wf_name,
		 opt.workers, opt.batch, opt.wait_ms, opt.concurrency,
		 rate,
		 *opt.setting ? "; server " : "", opt.setting);
	char sys[64];
	char reps[32] = "";
	if (n_servers > 1)
		snprintf(reps, sizeof(reps), " x%d replicas", n_servers);
	snprintf(sys, sizeof(sys), "node-flow %ld-task%s%s%s", opt.tasks,
		 opt.mixed ? " mixed" : "", opt.rate > 0 ? " paced" : "", reps);
	if (opt.label && *opt.label)
		snprintf(sys, sizeof(sys), "%s", opt.label);

	printf("%s [%s] N=%ld: e2e %.1f wf/s | enqueue %.1f/s (%.2f s) | "
	       "drain %.1f/s (%.2f s) | tasks/s drain %.1f e2e %.1f | "
	       "enqueue->worker latency p50 %.1f ms p99 %.1f ms (n=%zu)\n",
	       sys, setting, n_ok, e2e, enq, enq_s, drain, drain_s,
	       tasks_drain, tasks_e2e, pct(lat, n_lat, 0.5),
	       pct(lat, n_lat, 0.99), n_lat);
	printf("RESULT|%s|%.1f|%.1f|%.1f|%s|n=%ld tasks_per_s_drain=%.1f "
	       "tasks_per_s_e2e=%.1f lat_p50_ms=%.1f lat_p99_ms=%.1f "
	       "last_result_to_last_completion_s=%.2f "
	       "start_errors=%ld result_errors=%ld polls=%ld empty_polls=%ld "
	       "results_calls=%ld\n",
	       sys, e2e, enq, opt.mixed ? e2e : drain, setting, n_ok, tasks_drain,
	       tasks_e2e, pct(lat, n_lat, 0.5), pct(lat, n_lat, 0.99),
	       tdone - t_results, atomic_load(&start_errors), atomic_load(&result_errors),
	       atomic_load(&poll_calls), atomic_load(&poll_empty),
	       atomic_load(&results_calls));
	printf("TASKS|%s|%.1f|%.1f|%ld\n", sys, tasks_drain, tasks_e2e,
	       n_ok * opt.tasks);
	printf("LATENCY|%s|p50_ms=%.2f|p90_ms=%.2f|p99_ms=%.2f|max_ms=%.2f|"
	       "n=%zu|worker_before_response=%zu\n",
	       sys, pct(lat, n_lat, 0.5), pct(lat, n_lat, 0.9),
	       pct(lat, n_lat, 0.99), n_lat ? lat[n_lat - 1] : 0.0, n_lat,
	       negative);
	if (opt.tasks > 1)
		printf("CHAIN|%s|p50_ms=%.2f|p90_ms=%.2f|p99_ms=%.2f|"
		       "max_ms=%.2f|n=%zu\n",
		       sys, pct(chain, n_chain, 0.5), pct(chain, n_chain, 0.9),
		       pct(chain, n_chain, 0.99),
		       n_chain ? chain[n_chain - 1] : 0.0, n_chain);
	for (int m = 0; m < n_minute_lines; m++)
		printf("MINUTE|%s|%s\n", sys, minute_lines[m]);
	if (minutes >= 2)
		printf("SOAK|%s|%.2f|%.2f|%.2f|%d\n", sys, p99_first, p99_last,
		       p99_first > 0 ? p99_last / p99_first : 0.0, minutes);
	fflush(stdout);

	free(lat);
	free(chain);
	free(st);
	free(ws);
	free(starts);
	client_free(&ctl);
	curl_global_cleanup();
	return (atomic_load(&start_errors) || atomic_load(&result_errors) ||
		failed)
		       ? 1
		       : 0;
}
