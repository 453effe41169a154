/*
 * main — the composition root: the one place that knows every layer.  It
 * parses the command line, and owns the order of start-up and shutdown.
 *
 *   nodeflow serve                 HTTP API and engine loops
 *   nodeflow migrate               apply pending migrations
 *   nodeflow migrate status        list applied, pending and unknown ones
 *   nodeflow migrate down [N]      revert the N latest (default 1)
 *   nodeflow partitions ensure     create partitions ahead, drop expired
 *   nodeflow define|start|get|list|events|terminate|pause|resume|retry|
 *            defs|tasks            the client commands (src/cli), which talk
 *                                  to a server over HTTP
 *   nodeflow version | help
 *
 * Exit codes: 0 success; 1 failure (database unreachable or unsupported, a
 * migration failed); 2 usage; and for `migrate status`: 3 migrations are
 * pending, 4 the database has migrations this binary does not know.  The
 * client commands: 0 success, 1 a request failed, 2 usage.
 */
#include "cli/cli.h"
#include "engine/decide_loop.h"
#include "engine/decide_signal.h"
#include "engine/partitions.h"
#include "engine/payloads.h"
#include "engine/queue_signal.h"
#include "engine/relay.h"
#include "engine/start_group.h"
#include "engine/sweeper.h"
#include "engine/systasks.h"
#include "engine/timers.h"
#include "engine/worker_polls.h"
#include "engine/workers.h"
#include "http/app.h"
#include "http/http.h"
#include "http/routes.h"
#include "http/sse.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/loop.h"
#include "runtime/signals.h"
#include "store/db.h"
#include "store/decide_repo.h"
#include "store/executions_repo.h"
#include "store/migrate.h"
#include "store/payload_repo.h"
#include "store/pool.h"
#include "store/queue_repo.h"
#include "util/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
	EXIT_USAGE = 2,
	EXIT_PENDING = 3,
	EXIT_AHEAD = 4,
	MAX_ARGS = 8,
};

struct command_line {
	struct config cfg;
	const char *args[MAX_ARGS]; /* positional arguments after the verb */
	int nargs;
	bool help; /* --help or -h in an option's place */
};

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: nodeflow COMMAND [options]\n"
		"\n"
		"commands:\n"
		"  serve                  run the HTTP API and the engine loops\n"
		"  migrate                apply pending schema migrations\n"
		"  migrate status         list pending and unknown migrations\n"
		"                         (exit 3: pending, 4: database is ahead)\n"
		"  migrate down [N]       revert the N latest migrations (default 1)\n"
		"  partitions ensure      create partitions ahead, drop expired ones\n"
		"  version                print the version\n"
		"\n"
		"client commands (talk to --server; COMMAND --help for options):\n"
		"  define FILE...         register task and workflow definitions\n"
		"  start NAME             start a workflow; prints its id\n"
		"  get ID                 a workflow and its tasks, as JSON\n"
		"  list                   workflows, newest first\n"
		"  events ID              a workflow's history\n"
		"  terminate ID           terminate a workflow (--reason R)\n"
		"  pause ID, resume ID    pause or resume a workflow\n"
		"  retry ID               retry a failed workflow\n"
		"  defs, tasks            list workflow and task definitions\n"
		"\n"
		"options (each also read from its environment variable):\n");
	config_help(out);
}

static bool
parse(int argc, char **argv, struct command_line *cl)
{
	struct err e = ERR_INIT;
	if (!config_init(&cl->cfg, &e)) {
		fprintf(stderr, "nodeflow: %s\n", e.msg);
		return false;
	}
	int argi = 2;
	bool options_ended = false; /* after "--", everything is positional */
	while (argi < argc) {
		if (!options_ended) {
			if (!config_parse_flags(&cl->cfg, argc, argv, &argi,
						&e)) {
				fprintf(stderr, "nodeflow: %s\n", e.msg);
				return false;
			}
			options_ended =
				argi > 2 && strcmp(argv[argi - 1], "--") == 0;
		}
		if (argi < argc && !options_ended &&
		    (strcmp(argv[argi], "--help") == 0 ||
		     strcmp(argv[argi], "-h") == 0)) {
			/* In an option's place only: `--listen --help` is a bad
			 * listen address, not a request for help. */
			cl->help = true;
			return true;
		}
		if (argi < argc) {
			if (cl->nargs == MAX_ARGS) {
				fprintf(stderr,
					"nodeflow: too many arguments\n");
				return false;
			}
			cl->args[cl->nargs++] = argv[argi++];
		}
	}
	enum log_level level;
	enum log_format format;
	if (!log_level_parse(cl->cfg.log_level, &level)) {
		fprintf(stderr,
			"nodeflow: --log-level: \"%s\" is not one of debug, "
			"info, warn, error\n",
			cl->cfg.log_level);
		return false;
	}
	if (!log_format_parse(cl->cfg.log_format, &format)) {
		fprintf(stderr,
			"nodeflow: --log-format: \"%s\" is not text or json\n",
			cl->cfg.log_format);
		return false;
	}
	log_configure(level, format);
	return true;
}

static struct db *
connect_or_die(const struct config *cfg)
{
	struct db *db;
	struct err e = ERR_INIT;
	if (!db_open(&db, cfg->database_url, DB_PLAIN, &e)) {
		fprintf(stderr, "nodeflow: %s\n", e.msg);
		return NULL;
	}
	return db;
}

static void
print_list(const char *label, char **items, size_t n)
{
	printf("%s:", label);
	if (!n)
		printf(" none");
	for (size_t i = 0; i < n; i++)
		printf("%s %s", i ? "," : "", items[i]);
	printf("\n");
}

static int
cmd_migrate_status(struct db *db)
{
	struct migrate_status st;
	struct err e = ERR_INIT;
	if (!migrate_status(db, &st, &e)) {
		fprintf(stderr, "nodeflow: %s\n", e.msg);
		return EXIT_FAILURE;
	}
	printf("applied: %zu of %zu known migrations\n", st.n_applied,
	       migrations_embedded_count);
	print_list("pending", st.pending, st.n_pending);
	print_list("unknown", st.unknown, st.n_unknown);
	int rc = st.n_unknown   ? EXIT_AHEAD
		 : st.n_pending ? EXIT_PENDING
				: EXIT_SUCCESS;
	migrate_status_free(&st);
	return rc;
}

static void
on_progress(const char *name, const char *direction, void *arg)
{
	(void)arg;
	printf("%s %s\n", strcmp(direction, "up") == 0 ? "applied" : "reverted",
	       name);
	fflush(stdout);
}

static bool
ensure_partitions(struct db *db, const struct config *cfg)
{
	struct partition_table tables[PARTITION_TABLES];
	struct partition_report r;
	struct err e = ERR_INIT;
	partitions_tables(cfg, tables);
	bool ok = partitions_ensure(db, tables, PARTITION_TABLES, 0, &r, &e);
	for (size_t i = 0; i < r.n_created; i++)
		printf("created partition %s\n", r.created[i]);
	for (size_t i = 0; i < r.n_dropped; i++)
		printf("dropped partition %s\n", r.dropped[i]);
	if (r.rows_moved)
		printf("moved %lld rows out of DEFAULT partitions\n",
		       (long long)r.rows_moved);
	partition_report_free(&r);
	if (!ok)
		fprintf(stderr, "nodeflow: partitions: %s\n", e.msg);
	return ok;
}

static int
cmd_migrate(struct command_line *cl)
{
	const char *sub = cl->nargs ? cl->args[0] : NULL;
	struct db *db = connect_or_die(&cl->cfg);
	if (!db)
		return EXIT_FAILURE;
	int rc = EXIT_SUCCESS;
	struct err e = ERR_INIT;
	if (sub && strcmp(sub, "status") == 0) {
		rc = cmd_migrate_status(db);
	} else if (sub && strcmp(sub, "down") == 0) {
		char *end = NULL;
		long steps = cl->nargs > 1 ? strtol(cl->args[1], &end, 10) : 1;
		if (cl->nargs > 1 && (*cl->args[1] == '\0' || *end != '\0'))
			steps = 0;
		if (steps < 1 || steps > 1000) {
			fprintf(stderr,
				"nodeflow: migrate down: N must be 1 or more\n");
			rc = EXIT_USAGE;
		} else if (!migrate_down(db, (int)steps, on_progress, NULL,
					 &e)) {
			fprintf(stderr, "nodeflow: %s\n", e.msg);
			rc = EXIT_FAILURE;
		}
	} else if (!sub || strcmp(sub, "up") == 0) {
		if (!migrate_up(db, on_progress, NULL, &e)) {
			fprintf(stderr, "nodeflow: %s\n", e.msg);
			rc = e.code == ERR_CONFLICT ? EXIT_AHEAD : EXIT_FAILURE;
		} else {
			/* A migrated database gets its partitions ahead at
			 * once, not at the server's first partition tick. */
			rc = ensure_partitions(db, &cl->cfg) ? EXIT_SUCCESS
							     : EXIT_FAILURE;
			if (rc == EXIT_SUCCESS)
				printf("database is up to date\n");
		}
	} else {
		fprintf(stderr, "nodeflow: unknown migrate command \"%s\"\n",
			sub);
		rc = EXIT_USAGE;
	}
	db_close(db);
	return rc;
}

static int
cmd_partitions(struct command_line *cl)
{
	if (cl->nargs != 1 || strcmp(cl->args[0], "ensure") != 0) {
		fprintf(stderr, "usage: nodeflow partitions ensure\n");
		return EXIT_USAGE;
	}
	struct db *db = connect_or_die(&cl->cfg);
	if (!db)
		return EXIT_FAILURE;
	bool ok = ensure_partitions(db, &cl->cfg);
	db_close(db);
	return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

static bool
has_role(const char *roles, const char *role)
{
	size_t n = strlen(role);
	for (const char *p = roles; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == n && strncmp(p, role, n) == 0)
			return true;
		p += len + (comma ? 1 : 0);
	}
	return false;
}

static bool
roles_valid(const char *roles)
{
	for (const char *p = roles; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (!((len == 3 && strncmp(p, "api", 3) == 0) ||
		      (len == 6 && strncmp(p, "engine", 6) == 0)))
			return false;
		p += len + (comma ? 1 : 0);
	}
	return *roles != '\0';
}

/* The client commands' global options: the configuration table's. */
static bool
cli_option(void *arg, int argc, char **argv, int *argi, bool *known,
	   struct err *e)
{
	return config_parse_flag(arg, argc, argv, argi, known, e);
}

static int
cmd_cli(int argc, char **argv)
{
	struct config cfg;
	struct err e = ERR_INIT;
	int rc = EXIT_USAGE;
	if (!config_init(&cfg, &e)) {
		fprintf(stderr, "nodeflow: %s\n", e.msg);
	} else {
		struct cli_globals g = {cli_option, &cfg, &cfg.server,
					&cfg.namespace_name};
		rc = cli_main(argc, argv, &g);
	}
	config_free(&cfg);
	return rc;
}

/*
 * Checks the database before serving.  A database of the wrong version, or
 * one whose schema a statement of this binary does not prepare against, is
 * fatal; an unreachable one or one with migrations pending is not (readyz
 * reports it until it is fixed).  *ready: reachable, migrated, and every
 * statement prepared.
 */
static bool
preflight(const struct config *cfg, bool *ready)
{
	struct db *db;
	struct err e = ERR_INIT;
	*ready = false;
	if (!db_open(&db, cfg->database_url, DB_PLAIN, &e)) {
		if (e.code == ERR_VERSION) {
			log_error("server", "%s", e.msg);
			return false;
		}
		log_error("server", "%s; serving anyway, /readyz reports it",
			  e.msg);
		return true;
	}
	struct migrate_status st;
	if (!migrate_status(db, &st, &e)) {
		log_error("server", "could not read migrations: %s", e.msg);
		db_close(db);
		return true;
	}
	if (st.n_pending || st.n_unknown) {
		log_warn(
			"server",
			"%zu migrations pending and %zu unknown: run `nodeflow "
			"migrate`; /readyz answers 503 until then",
			st.n_pending, st.n_unknown);
	} else if (!db_prepare_all(db, &e)) {
		if (e.code != ERR_UNAVAILABLE) {
			/* The schema and this binary's SQL disagree: refuse to
			 * serve. */
			log_error("server", "%s", e.msg);
			migrate_status_free(&st);
			db_close(db);
			return false;
		}
		/* The database went away while the statements were being
		 * prepared (a restart, a terminated backend): unreachable, not
		 * in disagreement with this binary. */
		log_error("server", "%s; serving anyway, /readyz reports it",
			  e.msg);
	} else {
		*ready = true;
	}
	migrate_status_free(&st);
	db_close(db);
	return true;
}

/*
 * A pooled connection, before the server listens: the statements of
 * starts, polls and results run once on nothing.  A new backend reads
 * the catalog of every partition they touch when it first plans them (a
 * lease, about 30 ms); that was the first requests' wait after a start.
 */
static void
warm_connection(struct db *db)
{
	struct err e = ERR_INIT;
	/* decide_warm: a start decides its first step on this connection */
	if (!exec_warm(db, &e) || !decide_warm(db, &e) || !queue_warm(db, &e))
		log_warn("server", "could not warm a pooled connection: %s",
			 e.msg);
}

static void
wake_all(void *arg)
{
	http_server_wake(arg, NULL);
	systasks_wake();
}

/* Tasks were enqueued on queue: this process's parked long-polls that can
 * take them look again (when it serves the API), and its system-task
 * runners for system tasks and for a signal that may have been lost
 * (queue NULL). */
static void
wake_queue(const char *queue, unsigned long tasks, void *arg)
{
	bool system = queue && strcmp(queue, QUEUE_SIGNAL_SYSTEM) == 0;
	if (!queue || system)
		systasks_wake();
	if (arg && !system)
		http_server_wake_n(arg, queue, tasks);
}

static int
cmd_serve(struct command_line *cl)
{
	const struct config *cfg = &cl->cfg;
	if (!roles_valid(cfg->roles)) {
		fprintf(stderr,
			"nodeflow: --roles: \"%s\" is not a comma-separated "
			"list of api and engine\n",
			cfg->roles);
		return EXIT_USAGE;
	}
	signals_install();
	bool ready;
	if (!preflight(cfg, &ready))
		return EXIT_FAILURE;
	struct err pe = ERR_INIT;
	if (!payload_configure(cfg->payload_store, cfg->payload_offload_bytes,
			       cfg->payload_max_bytes, &pe)) {
		fprintf(stderr, "nodeflow: %s\n", pe.msg);
		return EXIT_USAGE;
	}

	/* DB_KEYED: the pool plans a worker's lease and results on a drained
	 * queue (warm_connection, and after an analyse of one), and such a
	 * plan must still reach rows by key once the queue is large: they
	 * keep that generic plan (DB_STMT_GENERIC). */
	struct app app = {
		.cfg = cfg,
		.pool = db_pool_create(cfg->database_url,
				       (int)cfg->db_pool_size, DB_KEYED),
		.started_at = (int64_t)time(NULL),
	};
	db_pool_set_queue(app.pool, (int)cfg->db_queue);
	if (ready && has_role(cfg->roles, "api")) {
		/* The database is there and migrated: connect the HTTP
		 * threads' share of the pool now rather than on the first
		 * requests, which would each wait on a new backend.  Pooled
		 * connections prepare a statement when they first run it
		 * (preflight checked them all); the hot ones are run now
		 * (warm_connection). */
		int64_t t0 = mono_ms();
		int want = (int)(cfg->http_threads < cfg->db_pool_size
					 ? cfg->http_threads
					 : cfg->db_pool_size);
		int got = db_pool_fill(app.pool, want, warm_connection);
		log_debug("server",
			  "%d of %d pool connections opened in %lld ms", got,
			  want, (long long)(mono_ms() - t0));
	}
	struct http_server *http = NULL;
	workers_set_semaphore_default_permits(
		(int)cfg->semaphore_default_permits);
	if (has_role(cfg->roles, "api")) {
		start_group_init((enum start_decide)cfg->start_decides,
				 (int)cfg->start_writers,
				 (int)cfg->start_burst_size,
				 (int)cfg->retry_budget_per_minute);
		workers_set_results_decide(cfg->results_decide != 0,
					   (int)cfg->retry_budget_per_minute);
		struct http_server_opts o = {
			.listen = cfg->listen,
			.threads = (int)cfg->http_threads,
			.max_body_bytes = (size_t)cfg->max_body_bytes,
			.idle_timeout_seconds =
				(unsigned)cfg->idle_timeout_seconds,
			.max_header_bytes = (size_t)cfg->max_header_bytes,
			.max_headers = (unsigned)cfg->max_headers,
			.request_timeout_seconds =
				(unsigned)cfg->request_timeout_seconds,
			.max_connections = (unsigned)cfg->max_connections,
			.max_connections_per_client =
				(unsigned)cfg->max_connections_per_client,
			.max_parked = (unsigned)cfg->max_parked,
			.max_parked_per_client =
				(unsigned)cfg->max_parked_per_client,
			.max_queued = (unsigned)cfg->http_queue,
			.routes = http_routes,
			.nroutes = http_routes_count,
			.app = &app,
		};
		struct err e = ERR_INIT;
		http = http_server_start(&o, &e);
		if (!http) {
			log_error("server", "%s", e.msg);
			db_pool_destroy(app.pool);
			return EXIT_FAILURE;
		}
	}
	if (http) { /* the live history: one listener for the process */
		struct sse_opts so = {
			.database_url = cfg->database_url,
			.pool = app.pool,
			.heartbeat_seconds = (int)cfg->sse_heartbeat_seconds,
			.buffer_bytes = (size_t)cfg->sse_buffer_bytes,
			.max_streams = (unsigned)cfg->sse_max_streams,
			.max_streams_per_client =
				(unsigned)cfg->sse_max_streams_per_client,
		};
		app.sse = sse_start(&so);
	}
	struct loop *partitions = NULL, *sweeper = NULL, *signals = NULL;
	struct loop *timers = NULL;
	struct loop *polls = NULL;
	struct loop *decide_listen = NULL;
	struct loop *payloads = NULL;
	/* Work enqueued by any replica wakes this one's polls and system-task
	 * runners. */
	signals = queue_signal_start(cfg->database_url, wake_queue, http);
	if (http)
		polls = worker_polls_start(cfg->database_url);
	if (has_role(cfg->roles, "engine")) {
		partitions = partitions_loop_start(cfg);
		payloads = payloads_loop_start(cfg);
		struct decide_loop_opts d = {
			.database_url = cfg->database_url,
			.batch_size = (int)cfg->decider_batch,
			.interval_ms = (int)cfg->decider_interval_ms,
			.retry_budget_per_minute =
				(int)cfg->retry_budget_per_minute,
		};
		for (long i = 0; i < cfg->decider_threads; i++)
			decide_loop_start(&d);
		/* Decisions enqueued by api-only replicas. */
		decide_listen = decide_signal_listen(cfg->database_url);
		sweeper = sweeper_start(cfg->database_url,
					(int)cfg->sweeper_interval_ms, wake_all,
					http);
		timers = timers_start(cfg->database_url,
				      (int)cfg->timers_interval_ms);
		struct systasks_opts so = {
			.database_url = cfg->database_url,
			.threads = (int)cfg->system_task_threads,
			.http_max_in_flight = (int)cfg->http_max_in_flight,
			.interval_ms = (int)cfg->system_tasks_interval_ms,
			.script_timeout_ms = (int)cfg->script_timeout_ms,
		};
		systasks_start(&so);
		struct relay_opts ro = {
			.database_url = cfg->database_url,
			.interval_ms = (int)cfg->outbox_interval_ms,
			.max_in_flight = (int)cfg->outbox_max_in_flight,
			.max_attempts = (int)cfg->outbox_max_attempts,
			.backoff_ms = cfg->outbox_backoff_ms,
			.backoff_max_ms = cfg->outbox_backoff_max_ms,
			.timeout_ms = cfg->outbox_timeout_ms,
			.retention_hours = cfg->outbox_retention_hours,
			.dead_letter_retention_hours =
				cfg->outbox_dead_letter_retention_hours,
		};
		relay_start(&ro);
	} else if (http) {
		/* No decider here: the engine replicas' are told of the
		 * decisions this one enqueues. */
		decide_signal_send_start(cfg->database_url);
	}

	if (http) {
		const char *colon = strrchr(cfg->listen, ':');
		printf("node-flow %s listening on http://%.*s:%d\n",
		       NODEFLOW_VERSION, (int)(colon - cfg->listen),
		       cfg->listen, http_server_port(http));
	} else {
		printf("node-flow %s running the engine loops\n",
		       NODEFLOW_VERSION);
	}
	fflush(stdout);
	log_info("server", "started (roles %s)", cfg->roles);

	while (!signals_wait(-1))
		;
	log_info("server", "shutting down");
	/* Loops that call into the HTTP server stop first. */
	loop_stop(decide_listen);
	decide_loops_stop();
	decide_signal_send_stop();
	systasks_stop();
	relay_stop();
	loop_stop(sweeper);
	loop_stop(timers);
	loop_stop(signals);
	sse_stop(app.sse);
	http_server_stop(http); /* ends the event streams */
	sse_free(app.sse);
	loop_stop(polls);
	loop_stop(partitions);
	loop_stop(payloads);
	db_pool_destroy(app.pool);
	log_info("server", "stopped");
	return EXIT_SUCCESS;
}

int
main(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : NULL;
	if (!verb || strcmp(verb, "help") == 0 || strcmp(verb, "--help") == 0 ||
	    strcmp(verb, "-h") == 0) {
		usage(verb ? stdout : stderr);
		return verb ? EXIT_SUCCESS : EXIT_USAGE;
	}
	if (strcmp(verb, "version") == 0 || strcmp(verb, "--version") == 0) {
		printf("nodeflow %s\n", NODEFLOW_VERSION);
		return EXIT_SUCCESS;
	}
	if (cli_is_verb(verb)) /* options of their own: parsed in src/cli */
		return cmd_cli(argc, argv);
	struct command_line cl = {0};
	if (!parse(argc, argv, &cl)) {
		config_free(&cl.cfg);
		return EXIT_USAGE;
	}
	if (cl.help) {
		usage(stdout);
		config_free(&cl.cfg);
		return EXIT_SUCCESS;
	}
	int rc;
	if (strcmp(verb, "serve") == 0) {
		rc = cmd_serve(&cl);
	} else if (strcmp(verb, "migrate") == 0) {
		rc = cmd_migrate(&cl);
	} else if (strcmp(verb, "partitions") == 0) {
		rc = cmd_partitions(&cl);
	} else {
		fprintf(stderr,
			"nodeflow: unknown command \"%s\" (see nodeflow help)\n",
			verb);
		rc = EXIT_USAGE;
	}
	config_free(&cl.cfg);
	return rc;
}
