#include "runtime/config.h"

#include "util/mem.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum config_type { CONFIG_STRING, CONFIG_INT };

struct config_def {
	const char *flag; /* without the leading "--" */
	const char *env;
	enum config_type type;
	const char *def;
	long min, max; /* for CONFIG_INT */
	size_t offset;
	const char *doc;
};

#define STR(flag, env, def, field, doc)                     \
	{                                                   \
		flag, env, CONFIG_STRING, def, 0, 0,        \
			offsetof(struct config, field), doc \
	}
#define INT(flag, env, def, min, max, field, doc)           \
	{                                                   \
		flag, env, CONFIG_INT, def, min, max,       \
			offsetof(struct config, field), doc \
	}

static const struct config_def defs[] = {
	STR("database-url", "NODEFLOW_DATABASE_URL",
	    "postgresql://postgres@127.0.0.1:55432/nodeflow", database_url,
	    "PostgreSQL 18 connection URL or libpq key=value string"),
	STR("listen", "NODEFLOW_LISTEN", "127.0.0.1:8080", listen,
	    "HTTP listen address, HOST:PORT (port 0 picks a free one)"),
	STR("log-level", "NODEFLOW_LOG_LEVEL", "info", log_level,
	    "debug, info, warn or error"),
	STR("log-format", "NODEFLOW_LOG_FORMAT", "text", log_format,
	    "text, or json for one JSON object per line"),
	STR("roles", "NODEFLOW_ROLES", "api,engine", roles,
	    "what this process runs: api (HTTP), engine (background loops), or both"),
	INT("http-threads", "NODEFLOW_HTTP_THREADS", "8", 1, 256, http_threads,
	    "HTTP handler threads (requests run at once)"),
	INT("http-queue", "NODEFLOW_HTTP_QUEUE", "1024", 0, 1000000, http_queue,
	    "requests that may wait for a handler thread; beyond, 503 at once "
	    "(0: no limit)"),
	INT("max-body-bytes", "NODEFLOW_MAX_BODY_BYTES", "1048576", 1024,
	    1073741824, max_body_bytes,
	    "largest request body accepted; larger ones get 413"),
	INT("idle-timeout-seconds", "NODEFLOW_IDLE_TIMEOUT_SECONDS", "30", 1,
	    3600, idle_timeout_seconds,
	    "an HTTP connection silent this long is closed"),
	INT("request-timeout-seconds", "NODEFLOW_REQUEST_TIMEOUT_SECONDS", "30",
	    1, 3600, request_timeout_seconds,
	    "a connection that has not delivered a whole request (headers and "
	    "body) this long after it opened or got its previous answer is "
	    "closed"),
	INT("max-header-bytes", "NODEFLOW_MAX_HEADER_BYTES", "8192", 1024,
	    1048576, max_header_bytes,
	    "largest request line and headers accepted; larger get 414 or 431"),
	INT("max-headers", "NODEFLOW_MAX_HEADERS", "100", 1, 10000, max_headers,
	    "most request headers accepted; more get 431"),
	INT("max-json-depth", "NODEFLOW_MAX_JSON_DEPTH", "64", 1, 1000,
	    max_json_depth,
	    "deepest nesting of objects and arrays accepted in a request body; "
	    "deeper gets 400"),
	INT("max-connections", "NODEFLOW_MAX_CONNECTIONS", "4096", 16, 1000000,
	    max_connections,
	    "HTTP connections open at once; more wait in the listen backlog"),
	INT("max-connections-per-client", "NODEFLOW_MAX_CONNECTIONS_PER_CLIENT",
	    "0", 0, 1000000, max_connections_per_client,
	    "HTTP connections one client address may hold open (0: no limit); "
	    "more are closed at once"),
	INT("max-parked", "NODEFLOW_MAX_PARKED", "10000", 0, 1000000,
	    max_parked,
	    "long-polls one server keeps waiting at once (0: no limit); more "
	    "get 429"),
	INT("max-parked-per-client", "NODEFLOW_MAX_PARKED_PER_CLIENT", "1000",
	    0, 1000000, max_parked_per_client,
	    "long-polls one client address may keep waiting at once (0: no "
	    "limit); more get 429"),
	INT("db-pool-size", "NODEFLOW_DB_POOL_SIZE", "8", 1, 500, db_pool_size,
	    "database connections shared by HTTP handlers"),
	INT("db-queue", "NODEFLOW_DB_QUEUE", "64", 0, 100000, db_queue,
	    "requests that may wait for a busy pool's connection; beyond, 503 at "
	    "once"),
	INT("db-acquire-timeout-ms", "NODEFLOW_DB_ACQUIRE_TIMEOUT_MS", "5000",
	    0, 60000, db_acquire_timeout_ms,
	    "how long a request waits for a pool connection before 503"),
	INT("partitions-interval-seconds",
	    "NODEFLOW_PARTITIONS_INTERVAL_SECONDS", "300", 1, 86400,
	    partitions_interval_seconds,
	    "how often the partition manager checks partitions"),
	INT("executions-months-ahead", "NODEFLOW_EXECUTIONS_MONTHS_AHEAD", "3",
	    1, 120, executions_months_ahead,
	    "monthly WorkflowExecutions partitions kept ready ahead of now"),
	INT("events-months-ahead", "NODEFLOW_EVENTS_MONTHS_AHEAD", "3", 1, 120,
	    events_months_ahead,
	    "monthly WorkflowEvents partitions kept ready ahead of now"),
	INT("timers-hours-ahead", "NODEFLOW_TIMERS_HOURS_AHEAD", "24", 1, 8760,
	    timers_hours_ahead,
	    "hourly Timers partitions kept ready ahead of now"),
	INT("executions-retention-months",
	    "NODEFLOW_EXECUTIONS_RETENTION_MONTHS", "12", 1, 1200,
	    executions_retention_months,
	    "WorkflowExecutions partitions older than this many months are dropped"),
	INT("events-retention-months", "NODEFLOW_EVENTS_RETENTION_MONTHS", "12",
	    1, 1200, events_retention_months,
	    "WorkflowEvents partitions older than this many months are dropped"),
	INT("timers-retention-hours", "NODEFLOW_TIMERS_RETENTION_HOURS", "48",
	    1, 87600, timers_retention_hours,
	    "Timers partitions older than this many hours are dropped"),
	INT("decider-threads", "NODEFLOW_DECIDER_THREADS", "2", 1, 64,
	    decider_threads,
	    "decider loops (each its own thread and connection)"),
	INT("decider-batch", "NODEFLOW_DECIDER_BATCH", "64", 1, 10000,
	    decider_batch,
	    "workflows one decider transaction evaluates at most"),
	INT("decider-interval-ms", "NODEFLOW_DECIDER_INTERVAL_MS", "200", 10,
	    600000, decider_interval_ms,
	    "how often an idle decider looks for work nobody woke it for"),
	INT("start-decides", "NODEFLOW_START_DECIDES", "1", 0, 2, start_decides,
	    "1: a start that did not wait behind other starts decides its "
	    "workflow's first step in its own transaction; 2: every group of "
	    "starts does, but in a burst (start-burst-size); 0: the deciders "
	    "do, after it"),
	INT("start-burst-size", "NODEFLOW_START_BURST_SIZE", "10", 0, 64,
	    start_burst_size,
	    "with start-decides 2, groups of workflow starts averaging this "
	    "many are a burst, whose first steps are left to the deciders "
	    "until the average falls to two fifths of it (0: never)"),
	INT("start-writers", "NODEFLOW_START_WRITERS", "1", 1, 8, start_writers,
	    "groups of workflow starts written at once, each by one of its "
	    "starts on that start's connection"),
	INT("results-decide", "NODEFLOW_RESULTS_DECIDE", "0", 0, 1,
	    results_decide,
	    "1: a worker's results decide what follows in their workflows "
	    "in their own transaction (lower latency at low load, higher "
	    "near capacity); 0: the deciders do, after them"),
	INT("retry-budget-per-minute", "NODEFLOW_RETRY_BUDGET_PER_MINUTE",
	    "600", 1, 1000000, retry_budget_per_minute,
	    "retries of one task definition per minute before further retries "
	    "wait a minute"),
	INT("sweeper-interval-ms", "NODEFLOW_SWEEPER_INTERVAL_MS", "250", 10,
	    60000, sweeper_interval_ms,
	    "how often expired leases and deferred tasks are swept"),
	INT("timers-interval-ms", "NODEFLOW_TIMERS_INTERVAL_MS", "250", 10,
	    60000, timers_interval_ms,
	    "how often due timers (task and workflow timeouts) are swept"),
	STR("conductor-namespace", "NODEFLOW_CONDUCTOR_NAMESPACE", "default",
	    conductor_namespace,
	    "the namespace the Conductor-compatible API (/api/...) works in"),
	INT("system-task-threads", "NODEFLOW_SYSTEM_TASK_THREADS", "2", 0, 64,
	    system_task_threads,
	    "threads running INLINE and JSON_JQ_TRANSFORM tasks (scripts at "
	    "once); 0 runs no system tasks of those types here"),
	INT("system-tasks-interval-ms", "NODEFLOW_SYSTEM_TASKS_INTERVAL_MS",
	    "1000", 10, 60000, system_tasks_interval_ms,
	    "how often an idle system-task runner looks for work (work any "
	    "replica queues wakes it at once)"),
	INT("http-max-in-flight", "NODEFLOW_HTTP_MAX_IN_FLIGHT", "64", 0, 10000,
	    http_max_in_flight,
	    "HTTP tasks in flight at once; 0 runs no HTTP tasks here"),
	INT("script-timeout-ms", "NODEFLOW_SCRIPT_TIMEOUT_MS", "4000", 10,
	    600000, script_timeout_ms,
	    "time limit of one INLINE script or JSON_JQ_TRANSFORM program "
	    "(longer: the task fails)"),
	INT("outbox-interval-ms", "NODEFLOW_OUTBOX_INTERVAL_MS", "1000", 10,
	    600000, outbox_interval_ms,
	    "how often an idle outbox relay looks for deliverable events (new "
	    "events wake it at once)"),
	INT("outbox-max-in-flight", "NODEFLOW_OUTBOX_MAX_IN_FLIGHT", "16", 0,
	    1000, outbox_max_in_flight,
	    "outbox deliveries in flight at once; 0 runs no relay here"),
	INT("outbox-max-attempts", "NODEFLOW_OUTBOX_MAX_ATTEMPTS", "10", 1,
	    1000, outbox_max_attempts,
	    "failed deliveries of an outbox event before it is dead-lettered"),
	INT("outbox-backoff-ms", "NODEFLOW_OUTBOX_BACKOFF_MS", "1000", 1,
	    3600000, outbox_backoff_ms,
	    "delay after an event's first failed delivery, doubled after each "
	    "further one (with jitter)"),
	INT("outbox-backoff-max-ms", "NODEFLOW_OUTBOX_BACKOFF_MAX_MS", "600000",
	    1, 86400000, outbox_backoff_max_ms,
	    "the longest delay between two deliveries of an event"),
	INT("outbox-timeout-ms", "NODEFLOW_OUTBOX_TIMEOUT_MS", "10000", 100,
	    600000, outbox_timeout_ms,
	    "time limit of one delivery (connecting included)"),
	INT("outbox-retention-hours", "NODEFLOW_OUTBOX_RETENTION_HOURS", "72",
	    0, 87600, outbox_retention_hours,
	    "published outbox events are deleted after this many hours"),
	INT("outbox-dead-letter-retention-hours",
	    "NODEFLOW_OUTBOX_DEAD_LETTER_RETENTION_HOURS", "720", 0, 876000,
	    outbox_dead_letter_retention_hours,
	    "dead-lettered outbox events are deleted this many hours after "
	    "they were dead-lettered (0: kept until deleted by hand)"),
	INT("semaphore-default-permits", "NODEFLOW_SEMAPHORE_DEFAULT_PERMITS",
	    "1", 0, 1000000, semaphore_default_permits,
	    "permits of a semaphore a task names but nobody configured "
	    "(PUT /v1/ns/{ns}/semaphores/{name} configures one)"),
	STR("server", "NODEFLOW_SERVER", "http://127.0.0.1:8080", server,
	    "the node-flow server the client commands talk to"),
	STR("namespace", "NODEFLOW_NAMESPACE", "default", namespace_name,
	    "the namespace of the client commands"),
	INT("sse-heartbeat-seconds", "NODEFLOW_SSE_HEARTBEAT_SECONDS", "15", 1,
	    3600, sse_heartbeat_seconds,
	    "seconds between keepalive comments on an idle event stream (each "
	    "also re-reads the stream's history)"),
	INT("sse-buffer-bytes", "NODEFLOW_SSE_BUFFER_BYTES", "1048576", 4096,
	    1073741824, sse_buffer_bytes,
	    "bytes an event stream may hold unsent; reading waits while half "
	    "of it waits, and a client that takes nothing for a heartbeat, "
	    "or would pass it, is cut off"),
	INT("sse-max-streams", "NODEFLOW_SSE_MAX_STREAMS", "10000", 0, 1000000,
	    sse_max_streams,
	    "event streams one server keeps open at once (0: no limit); more "
	    "get 429"),
	INT("sse-max-streams-per-client", "NODEFLOW_SSE_MAX_STREAMS_PER_CLIENT",
	    "100", 0, 1000000, sse_max_streams_per_client,
	    "event streams one client address may keep open at once (0: no "
	    "limit); more get 429"),
	INT("payload-offload-bytes", "NODEFLOW_PAYLOAD_OFFLOAD_BYTES", "262144",
	    1024, 1073741824, payload_offload_bytes,
	    "task and workflow inputs and outputs larger than this (as JSON "
	    "text) are stored in the payload store, their row keeping a "
	    "reference"),
	INT("payload-max-bytes", "NODEFLOW_PAYLOAD_MAX_BYTES", "16777216", 1024,
	    1073741824, payload_max_bytes,
	    "largest input or output accepted: a task output above it fails "
	    "the task, a workflow input above it is refused with 413"),
	STR("payload-store", "NODEFLOW_PAYLOAD_STORE", "postgres",
	    payload_store,
	    "where offloaded payloads go: \"postgres\" (the Payloads table) or "
	    "\"dir:/path\" (one file each in that directory, shared by every "
	    "replica)"),
	INT("payload-gc-interval-ms", "NODEFLOW_PAYLOAD_GC_INTERVAL_MS",
	    "60000", 10, 86400000, payload_gc_interval_ms,
	    "how often payloads no execution references any more are collected"),
	INT("payload-gc-grace-seconds", "NODEFLOW_PAYLOAD_GC_GRACE_SECONDS",
	    "3600", 0, 31536000, payload_gc_grace_seconds,
	    "how old an unreferenced payload must be before it is collected "
	    "(covers a payload written just before its row commits)"),
	INT("cache-prune-interval-seconds",
	    "NODEFLOW_CACHE_PRUNE_INTERVAL_SECONDS", "3600", 1, 86400,
	    cache_prune_interval_seconds,
	    "how often expired task output cache entries are deleted"),
	INT("task-log-max-bytes", "NODEFLOW_TASK_LOG_MAX_BYTES", "16384", 64,
	    1048576, task_log_max_bytes,
	    "longest task log line accepted (UTF-8 bytes); a longer one is "
	    "refused with 413"),
	INT("task-logs-max-per-task", "NODEFLOW_TASK_LOGS_MAX_PER_TASK", "1000",
	    1, 100000, task_logs_max_per_task,
	    "log lines kept per task attempt; appending past it is refused "
	    "with 409"),
	INT("task-logs-months-ahead", "NODEFLOW_TASK_LOGS_MONTHS_AHEAD", "3", 1,
	    120, task_logs_months_ahead,
	    "monthly TaskLogs partitions kept ready ahead of now"),
	INT("task-logs-retention-months", "NODEFLOW_TASK_LOGS_RETENTION_MONTHS",
	    "12", 1, 1200, task_logs_retention_months,
	    "TaskLogs partitions older than this many months are dropped"),
};

static bool
assign(struct config *c, const struct config_def *d, const char *value,
       const char *source, struct err *e)
{
	char *field = (char *)c + d->offset;
	if (d->type == CONFIG_STRING) {
		char **slot = (char **)(void *)field;
		free(*slot);
		*slot = xstrdup(value);
		return true;
	}
	char *end;
	errno = 0;
	long v = strtol(value, &end, 10);
	if (errno || end == value || *end != '\0') {
		err_set(e, ERR_INVALID, "%s: \"%s\" is not a whole number",
			source, value);
		return false;
	}
	if (v < d->min || v > d->max) {
		err_set(e, ERR_INVALID, "%s: %ld is out of range (%ld to %ld)",
			source, v, d->min, d->max);
		return false;
	}
	*(long *)(void *)field = v;
	return true;
}

static const struct config_def *
find_flag(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_LEN(defs); i++) {
		if (strlen(defs[i].flag) == len &&
		    strncmp(defs[i].flag, name, len) == 0)
			return &defs[i];
	}
	return NULL;
}

bool
config_init(struct config *c, struct err *e)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < ARRAY_LEN(defs); i++) {
		if (!assign(c, &defs[i], defs[i].def, "default", e))
			return false;
		const char *env = getenv(defs[i].env);
		if (env && *env && !assign(c, &defs[i], env, defs[i].env, e))
			return false;
	}
	return true;
}

bool
config_parse_flag(struct config *c, int argc, char **argv, int *argi,
		  bool *known, struct err *e)
{
	const char *arg = argv[*argi];
	*known = false;
	if (strncmp(arg, "--", 2) != 0)
		return true;
	const char *name = arg + 2;
	const char *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct config_def *d = find_flag(name, len);
	if (!d)
		return true;
	*known = true;
	const char *value = eq ? eq + 1 : NULL;
	if (!value) {
		if (*argi + 1 >= argc) {
			err_set(e, ERR_INVALID, "option --%s needs a value",
				d->flag);
			return false;
		}
		value = argv[++*argi];
	}
	char source[64];
	snprintf(source, sizeof(source), "--%s", d->flag);
	if (!assign(c, d, value, source, e))
		return false;
	(*argi)++;
	return true;
}

bool
config_parse_flags(struct config *c, int argc, char **argv, int *argi,
		   struct err *e)
{
	while (*argi < argc) {
		const char *arg = argv[*argi];
		if (strcmp(arg, "--") == 0) {
			(*argi)++;
			break;
		}
		if (strncmp(arg, "--", 2) != 0 || strcmp(arg, "--help") == 0)
			break; /* a positional argument, or help for the caller
				*/
		bool known;
		if (!config_parse_flag(c, argc, argv, argi, &known, e))
			return false;
		if (!known) {
			err_set(e, ERR_INVALID,
				"unknown option \"%s\" (see --help)", arg);
			return false;
		}
	}
	return true;
}

void
config_free(struct config *c)
{
	for (size_t i = 0; i < ARRAY_LEN(defs); i++) {
		if (defs[i].type == CONFIG_STRING) {
			char **slot =
				(char **)(void *)((char *)c + defs[i].offset);
			free(*slot);
			*slot = NULL;
		}
	}
}

void
config_help(FILE *out)
{
	for (size_t i = 0; i < ARRAY_LEN(defs); i++) {
		const struct config_def *d = &defs[i];
		fprintf(out, "  --%s VALUE   (env %s, default %s)\n      %s\n",
			d->flag, d->env, d->def, d->doc);
	}
}
