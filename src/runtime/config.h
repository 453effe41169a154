/*
 * config — the configuration table: every setting the server reads, with
 * its flag, environment variable, type, default, range and documentation.
 *
 * A setting comes from, in rising order of precedence: its default, its
 * NODEFLOW_* environment variable, its --flag.  `--help` is generated from
 * the same table, so the documentation cannot drift from the code.  Every
 * setting is read at start-up only; changing one means a restart.
 *
 * Threads: load once on the main thread before any other starts; afterwards
 * a struct config is read-only and may be shared.  Ownership: strings in a
 * loaded config are owned by it and released by config_free().  Failure:
 * config_init() and config_parse_flags() name the flag or variable and what is
 * wrong with it.
 */
#ifndef NF_RUNTIME_CONFIG_H
#define NF_RUNTIME_CONFIG_H

#include "util/err.h"

#include <stdbool.h>
#include <stdio.h>

struct config {
	char *database_url;
	char *listen;
	char *log_level;
	char *log_format;
	char *roles;
	long http_threads;
	long max_body_bytes;
	long idle_timeout_seconds;
	long request_timeout_seconds;
	long max_header_bytes;
	long max_headers;
	long max_json_depth;
	long max_connections;
	long max_connections_per_client;
	long max_parked;
	long max_parked_per_client;
	long http_queue;
	long db_pool_size;
	long db_queue;
	long db_acquire_timeout_ms;
	long partitions_interval_seconds;
	long executions_months_ahead;
	long events_months_ahead;
	long timers_hours_ahead;
	long executions_retention_months;
	long events_retention_months;
	long timers_retention_hours;
	long decider_threads;
	long decider_batch;
	long decider_interval_ms;
	long start_decides;
	long start_writers;
	long start_burst_size;
	long results_decide;
	long retry_budget_per_minute;
	long sweeper_interval_ms;
	long timers_interval_ms;
	long system_task_threads;
	long system_tasks_interval_ms;
	long http_max_in_flight;
	long script_timeout_ms;
	long outbox_interval_ms;
	long outbox_max_in_flight;
	long outbox_max_attempts;
	long outbox_backoff_ms;
	long outbox_backoff_max_ms;
	long outbox_timeout_ms;
	long outbox_retention_hours;
	long outbox_dead_letter_retention_hours;
	long semaphore_default_permits;
	char *conductor_namespace; /* the namespace of /api/... */
	char *server;              /* the client commands' node-flow URL */
	char *namespace_name;      /* the client commands' namespace */
	long sse_heartbeat_seconds;
	long sse_buffer_bytes;
	long sse_max_streams;
	long sse_max_streams_per_client;
	long payload_offload_bytes;
	long payload_max_bytes;
	char *payload_store; /* "postgres" or "dir:/path" */
	long payload_gc_interval_ms;
	long payload_gc_grace_seconds;
	long cache_prune_interval_seconds;
	long task_log_max_bytes;
	long task_logs_max_per_task;
	long task_logs_months_ahead;
	long task_logs_retention_months;
};

/* Fills c from the defaults and the NODEFLOW_* environment. */
bool config_init(struct config *c, struct err *e);
/*
 * Applies --flags from argv[*argi…] until the first positional argument
 * or "--help" (left at argv[*argi]), or after "--".  False with e set on an
 * unknown flag or a bad value.
 */
bool config_parse_flags(struct config *c, int argc, char **argv, int *argi,
			struct err *e);
/*
 * Applies the one --flag at argv[*argi] (and its value), advancing *argi
 * past both.  Sets *known false and consumes nothing when the table has no
 * such flag, so a caller with options of its own can try them too.  False
 * with e set on a missing or bad value.
 */
bool config_parse_flag(struct config *c, int argc, char **argv, int *argi,
		       bool *known, struct err *e);
void config_free(struct config *c);
/* Writes one paragraph per setting: flag, variable, default, meaning. */
void config_help(FILE *out);

#endif
