/*
 * Unit tests of src/runtime: the configuration table (defaults, NODEFLOW_*
 * environment, --flags and their precedence, error messages), the metrics
 * registry and its Prometheus rendering, the loop skeleton (busy ticks run
 * back to back, idle sleeps, loop_wake, error back-off, loop_stop and the
 * finish callback) and the log format (level and format parsing, one JSON
 * object per line).  No database; each Criterion test is its own process,
 * so environment changes and registered metrics do not leak between tests.
 */
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "util/strbuf.h"
#include "util/timeutil.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ------------------------------------------------------------- helpers */

/* Polls pred every few milliseconds until it holds or timeout_ms passes. */
static bool
wait_until(int timeout_ms, bool (*pred)(void *), void *arg)
{
	int64_t until = mono_ms() + timeout_ms;
	for (;;) {
		if (pred(arg))
			return true;
		if (mono_ms() >= until)
			return false;
		struct timespec nap = {0, 2 * 1000000};
		nanosleep(&nap, NULL);
	}
}

/* Whether pred stays false for the whole of ms. */
static bool
stays_false(int ms, bool (*pred)(void *), void *arg)
{
	return !wait_until(ms, pred, arg);
}

/* Unsets every NODEFLOW_* variable (tests/run.sh exports some). */
static void
clear_nodeflow_env(void)
{
	for (;;) {
		char name[256] = "";
		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "NODEFLOW_", 9) == 0) {
				const char *eq = strchr(*e, '=');
				size_t len =
					eq ? (size_t)(eq - *e) : strlen(*e);
				if (len < sizeof(name)) {
					memcpy(name, *e, len);
					name[len] = '\0';
				}
				break;
			}
		}
		if (!name[0])
			return;
		unsetenv(name);
	}
}

static void
init_clean(struct config *c)
{
	struct err e = ERR_INIT;
	clear_nodeflow_env();
	cr_assert(config_init(c, &e), "config_init: %s", e.msg);
}

/* Parses argv (NULL-terminated, argv[0] and argv[1] being the program and
 * the verb) from index 2; returns the result and leaves *argi. */
static bool
parse_args(struct config *c, const char *const *args, int *argi, struct err *e)
{
	int argc = 0;
	while (args[argc])
		argc++;
	*argi = 2;
	return config_parse_flags(c, argc, (char **)args, argi, e);
}

/* -------------------------------------------------------------- config */

Test(config, defaults)
{
	struct config c;
	init_clean(&c);
	cr_assert_str_eq(c.database_url,
			 "postgresql://postgres@127.0.0.1:55432/nodeflow");
	cr_assert_str_eq(c.listen, "127.0.0.1:8080");
	cr_assert_str_eq(c.log_level, "info");
	cr_assert_str_eq(c.log_format, "text");
	cr_assert_str_eq(c.roles, "api,engine");
	cr_assert_eq(c.http_threads, 8);
	cr_assert_eq(c.max_body_bytes, 1048576);
	cr_assert_eq(c.idle_timeout_seconds, 30);
	cr_assert_eq(c.db_pool_size, 8);
	cr_assert_eq(c.partitions_interval_seconds, 300);
	cr_assert_eq(c.executions_months_ahead, 3);
	cr_assert_eq(c.events_months_ahead, 3);
	cr_assert_eq(c.timers_hours_ahead, 24);
	cr_assert_eq(c.executions_retention_months, 12);
	cr_assert_eq(c.events_retention_months, 12);
	cr_assert_eq(c.timers_retention_hours, 48);
	config_free(&c);
	cr_assert_null(c.listen);
	config_free(&c); /* twice is harmless */
}

Test(config, environment_overrides_defaults)
{
	clear_nodeflow_env();
	setenv("NODEFLOW_LISTEN", "0.0.0.0:9999", 1);
	setenv("NODEFLOW_HTTP_THREADS", "7", 1);
	setenv("NODEFLOW_LOG_FORMAT", "json", 1);
	setenv("NODEFLOW_DATABASE_URL", "dbname=elsewhere", 1);
	setenv("NODEFLOW_DB_POOL_SIZE", "", 1); /* empty: the default */
	struct config c;
	struct err e = ERR_INIT;
	cr_assert(config_init(&c, &e), "%s", e.msg);
	cr_assert_str_eq(c.listen, "0.0.0.0:9999");
	cr_assert_eq(c.http_threads, 7);
	cr_assert_str_eq(c.log_format, "json");
	cr_assert_str_eq(c.database_url, "dbname=elsewhere");
	cr_assert_eq(c.db_pool_size, 8);
	cr_assert_str_eq(c.log_level, "info");
	config_free(&c);
}

Test(config, bad_environment_value_names_the_variable)
{
	clear_nodeflow_env();
	setenv("NODEFLOW_HTTP_THREADS", "lots", 1);
	struct config c;
	struct err e = ERR_INIT;
	cr_assert_not(config_init(&c, &e));
	cr_assert(strstr(e.msg, "NODEFLOW_HTTP_THREADS"), "%s", e.msg);
	cr_assert(strstr(e.msg, "lots"), "%s", e.msg);
	config_free(&c);

	setenv("NODEFLOW_HTTP_THREADS", "1000", 1);
	e = (struct err)ERR_INIT;
	cr_assert_not(config_init(&c, &e));
	cr_assert(strstr(e.msg, "NODEFLOW_HTTP_THREADS"), "%s", e.msg);
	cr_assert(strstr(e.msg, "1 to 256"), "%s", e.msg);
	config_free(&c);
}

Test(config, flag_overrides_environment)
{
	clear_nodeflow_env();
	setenv("NODEFLOW_LISTEN", "0.0.0.0:9999", 1);
	setenv("NODEFLOW_HTTP_THREADS", "7", 1);
	struct config c;
	struct err e = ERR_INIT;
	cr_assert(config_init(&c, &e), "%s", e.msg);
	const char *args[] = {"nodeflow", "serve", "--listen", "127.0.0.1:1",
			      NULL};
	int argi;
	cr_assert(parse_args(&c, args, &argi, &e), "%s", e.msg);
	cr_assert_eq(argi, 4);
	cr_assert_str_eq(c.listen, "127.0.0.1:1");
	cr_assert_eq(c.http_threads, 7); /* untouched by flags */
	config_free(&c);
}

Test(config, flag_with_equals_and_with_separate_value)
{
	struct config c;
	init_clean(&c);
	struct err e = ERR_INIT;
	const char *args[] = {"nodeflow",
			      "serve",
			      "--http-threads=5",
			      "--max-body-bytes",
			      "2048",
			      "--database-url=host=x dbname=y",
			      "--roles",
			      "api",
			      "--log-level=debug",
			      NULL};
	int argi;
	cr_assert(parse_args(&c, args, &argi, &e), "%s", e.msg);
	cr_assert_eq(argi, 9);
	cr_assert_eq(c.http_threads, 5);
	cr_assert_eq(c.max_body_bytes, 2048);
	cr_assert_str_eq(c.database_url, "host=x dbname=y");
	cr_assert_str_eq(c.roles, "api");
	cr_assert_str_eq(c.log_level, "debug");
	/* The value after '=' may itself hold '=' or be empty. */
	const char *more[] = {"nodeflow", "serve", "--listen=", NULL};
	cr_assert(parse_args(&c, more, &argi, &e), "%s", e.msg);
	cr_assert_str_eq(c.listen, "");
	/* The last occurrence wins. */
	const char *twice[] = {"nodeflow",         "serve",
			       "--http-threads",   "3",
			       "--http-threads=4", NULL};
	cr_assert(parse_args(&c, twice, &argi, &e), "%s", e.msg);
	cr_assert_eq(c.http_threads, 4);
	config_free(&c);
}

Test(config, unknown_flag_is_named)
{
	struct config c;
	init_clean(&c);
	struct err e = ERR_INIT;
	const char *args[] = {"nodeflow",       "serve", "--listen", "x:1",
			      "--no-such-flag", "1",     NULL};
	int argi;
	cr_assert_not(parse_args(&c, args, &argi, &e));
	cr_assert_str_eq(e.msg,
			 "unknown option \"--no-such-flag\" (see --help)");
	cr_assert_eq(e.code, ERR_INVALID);

	/* A known flag's prefix is not the flag. */
	const char *prefix[] = {"nodeflow", "serve", "--list=x:1", NULL};
	e = (struct err)ERR_INIT;
	cr_assert_not(parse_args(&c, prefix, &argi, &e));
	cr_assert(strstr(e.msg, "--list=x:1"), "%s", e.msg);
	config_free(&c);
}

Test(config, integer_out_of_range)
{
	struct config c;
	init_clean(&c);
	struct err e = ERR_INIT;
	const char *zero[] = {"nodeflow", "serve", "--http-threads", "0", NULL};
	int argi;
	cr_assert_not(parse_args(&c, zero, &argi, &e));
	cr_assert_str_eq(e.msg, "--http-threads: 0 is out of range (1 to 256)");
	cr_assert_eq(c.http_threads, 8); /* unchanged */

	const char *big[] = {"nodeflow", "serve", "--max-body-bytes=1023",
			     NULL};
	e = (struct err)ERR_INIT;
	cr_assert_not(parse_args(&c, big, &argi, &e));
	cr_assert(strstr(e.msg, "--max-body-bytes"), "%s", e.msg);
	cr_assert(strstr(e.msg, "1024 to 1073741824"), "%s", e.msg);

	const char *edge[] = {"nodeflow",
			      "serve",
			      "--http-threads",
			      "256",
			      "--max-body-bytes",
			      "1024",
			      NULL};
	e = (struct err)ERR_INIT;
	cr_assert(parse_args(&c, edge, &argi, &e), "%s", e.msg);
	cr_assert_eq(c.http_threads, 256);
	cr_assert_eq(c.max_body_bytes, 1024);

	const char *overflow[] = {"nodeflow", "serve", "--http-threads",
				  "99999999999999999999999", NULL};
	e = (struct err)ERR_INIT;
	cr_assert_not(parse_args(&c, overflow, &argi, &e));
	cr_assert(strstr(e.msg, "--http-threads"), "%s", e.msg);
	config_free(&c);
}

Test(config, integer_that_is_not_a_number)
{
	struct config c;
	init_clean(&c);
	const char *const bad[] = {"abc", "12abc", "", "1.5", " ", "0x10"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct err e = ERR_INIT;
		const char *args[] = {"nodeflow", "serve", "--db-pool-size",
				      bad[i], NULL};
		int argi;
		cr_assert_not(parse_args(&c, args, &argi, &e),
			      "accepted \"%s\"", bad[i]);
		char want[128];
		snprintf(want, sizeof(want),
			 "--db-pool-size: \"%s\" is not a whole number",
			 bad[i]);
		cr_assert_str_eq(e.msg, want);
	}
	cr_assert_eq(c.db_pool_size, 8);
	config_free(&c);
}

Test(config, flag_without_value)
{
	struct config c;
	init_clean(&c);
	struct err e = ERR_INIT;
	const char *args[] = {"nodeflow", "serve", "--listen", NULL};
	int argi;
	cr_assert_not(parse_args(&c, args, &argi, &e));
	cr_assert_str_eq(e.msg, "option --listen needs a value");
	config_free(&c);
}

Test(config, positional_argument_stops_parsing)
{
	struct config c;
	init_clean(&c);
	struct err e = ERR_INIT;
	const char *args[] = {"nodeflow", "migrate", "--http-threads",
			      "3",        "status",  "--http-threads",
			      "9",        NULL};
	int argi;
	cr_assert(parse_args(&c, args, &argi, &e), "%s", e.msg);
	cr_assert_eq(argi, 4);
	cr_assert_str_eq(args[argi], "status");
	cr_assert_eq(c.http_threads, 3);

	/* Called again past the positional, it goes on. */
	argi++;
	cr_assert(config_parse_flags(&c, 7, (char **)args, &argi, &e), "%s",
		  e.msg);
	cr_assert_eq(argi, 7);
	cr_assert_eq(c.http_threads, 9);

	/* A single dash is positional too. */
	const char *dash[] = {"nodeflow", "migrate", "-", NULL};
	cr_assert(parse_args(&c, dash, &argi, &e), "%s", e.msg);
	cr_assert_eq(argi, 2);
	config_free(&c);
}

Test(config, double_dash_ends_the_flags)
{
	struct config c;
	init_clean(&c);
	struct err e = ERR_INIT;
	const char *args[] = {"nodeflow", "migrate", "--http-threads",
			      "3",        "--",      "--http-threads",
			      "9",        NULL};
	int argi;
	cr_assert(parse_args(&c, args, &argi, &e), "%s", e.msg);
	cr_assert_eq(argi, 5); /* just past "--" */
	cr_assert_str_eq(args[argi], "--http-threads");
	cr_assert_eq(c.http_threads, 3);

	const char *last[] = {"nodeflow", "migrate", "--", NULL};
	cr_assert(parse_args(&c, last, &argi, &e), "%s", e.msg);
	cr_assert_eq(argi, 3);
	config_free(&c);
}

Test(config, help_documents_every_variable)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	config_help(f);
	fclose(f);
	const char *const vars[] = {"NODEFLOW_DATABASE_URL",
				    "NODEFLOW_LISTEN",
				    "NODEFLOW_LOG_LEVEL",
				    "NODEFLOW_LOG_FORMAT",
				    "NODEFLOW_ROLES",
				    "NODEFLOW_HTTP_THREADS",
				    "NODEFLOW_MAX_BODY_BYTES",
				    "NODEFLOW_IDLE_TIMEOUT_SECONDS",
				    "NODEFLOW_DB_POOL_SIZE",
				    "NODEFLOW_PARTITIONS_INTERVAL_SECONDS",
				    "NODEFLOW_EXECUTIONS_MONTHS_AHEAD",
				    "NODEFLOW_EVENTS_MONTHS_AHEAD",
				    "NODEFLOW_TIMERS_HOURS_AHEAD",
				    "NODEFLOW_EXECUTIONS_RETENTION_MONTHS",
				    "NODEFLOW_EVENTS_RETENTION_MONTHS",
				    "NODEFLOW_TIMERS_RETENTION_HOURS"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		cr_assert(strstr(text, vars[i]), "help lacks %s:\n%s", vars[i],
			  text);
	cr_assert(strstr(text, "--max-body-bytes"), "%s", text);
	cr_assert(strstr(text, "default 1048576"), "%s", text);
	free(text);
}

/* ------------------------------------------------------------- metrics */

Test(metrics, register_twice_returns_the_same_metric)
{
	struct metric *a = metric_register(METRIC_COUNTER, "t_requests_total",
					   "code=\"200\"", "Requests");
	struct metric *b = metric_register(METRIC_COUNTER, "t_requests_total",
					   "code=\"200\"", "Requests");
	struct metric *c = metric_register(METRIC_COUNTER, "t_requests_total",
					   "code=\"500\"", "Requests");
	struct metric *d = metric_register(METRIC_COUNTER, "t_requests_total",
					   "", "Requests");
	cr_assert_eq(a, b);
	cr_assert_neq(a, c);
	cr_assert_neq(a, d);
	cr_assert_neq(c, d);
	metric_add(a, 2);
	metric_add(b, 3);
	cr_assert_eq(metric_get(a), 5);
	cr_assert_eq(metric_get(c), 0);
	struct metric *g =
		metric_register(METRIC_GAUGE, "t_depth", "", "Depth");
	metric_set(g, 42);
	metric_add(g, -2);
	cr_assert_eq(metric_get(g), 40);
	metric_set(g, -7);
	cr_assert_eq(metric_get(g), -7);
}

Test(metrics, render_groups_help_and_type_once_per_name)
{
	struct metric *ok =
		metric_register(METRIC_COUNTER, "t_requests_total",
				"code=\"200\"", "Requests answered");
	struct metric *depth = metric_register(METRIC_GAUGE, "t_queue_depth",
					       "", "Items waiting");
	/* Registered after another name: still rendered in its name's block. */
	struct metric *fail =
		metric_register(METRIC_COUNTER, "t_requests_total",
				"code=\"500\"", "Requests answered");
	struct metric *loop = metric_register(METRIC_COUNTER, "t_ticks_total",
					      "loop=\"a\",kind=\"b\"", "Ticks");
	metric_add(ok, 3);
	metric_add(fail, 1);
	metric_set(depth, 9);
	metric_add(loop, 12);

	struct strbuf out = STRBUF_INIT;
	metrics_render(&out);
	cr_assert_str_eq(sb_str(&out),
			 "# HELP t_requests_total Requests answered\n"
			 "# TYPE t_requests_total counter\n"
			 "t_requests_total{code=\"200\"} 3\n"
			 "t_requests_total{code=\"500\"} 1\n"
			 "# HELP t_queue_depth Items waiting\n"
			 "# TYPE t_queue_depth gauge\n"
			 "t_queue_depth 9\n"
			 "# HELP t_ticks_total Ticks\n"
			 "# TYPE t_ticks_total counter\n"
			 "t_ticks_total{loop=\"a\",kind=\"b\"} 12\n");
	sb_free(&out);
}

Test(metrics, render_of_an_empty_registry_is_empty)
{
	struct strbuf out = STRBUF_INIT;
	metrics_render(&out);
	cr_assert_str_eq(sb_str(&out), "");
	sb_free(&out);
}

/* ---------------------------------------------------------------- loop */

struct tick_ctx {
	atomic_int ticks;
	atomic_int finished;
	int busy_first;   /* ticks answering LOOP_BUSY before going idle */
	int errors_first; /* ticks answering LOOP_ERROR before going idle */
	bool always_error;
	_Atomic int64_t at_ms[16]; /* when each tick ran */
};

static enum loop_result
counting_tick(void *arg, struct arena *scratch, struct err *e)
{
	struct tick_ctx *c = arg;
	/* The scratch arena is usable, and reset between ticks. */
	cr_assert_not_null(arena_strdup(scratch, "scratch"));
	int n = atomic_fetch_add(&c->ticks, 1);
	if (n < 16)
		atomic_store(&c->at_ms[n], mono_ms());
	if (c->always_error || n < c->errors_first) {
		err_set(e, ERR_DB, "tick %d failed on purpose", n + 1);
		return LOOP_ERROR;
	}
	return n < c->busy_first ? LOOP_BUSY : LOOP_IDLE;
}

static void
count_finish(void *arg)
{
	struct tick_ctx *c = arg;
	atomic_fetch_add(&c->finished, 1);
}

struct at_least {
	struct tick_ctx *c;
	int n;
};

static bool
ticked(void *arg)
{
	struct at_least *a = arg;
	return atomic_load(&a->c->ticks) >= a->n;
}

Test(loop, busy_ticks_run_back_to_back_then_idle_sleeps)
{
	struct tick_ctx c = {.busy_first = 5};
	struct loop_def def = {.name = "t_busy",
			       .tick = counting_tick,
			       .finish = count_finish,
			       .interval_ms = 60000,
			       .max_backoff_ms = 30000};
	int64_t t0 = mono_ms();
	struct loop *l = loop_start(&def, &c);
	struct at_least six = {&c, 6}, seven = {&c, 7};
	cr_assert(wait_until(2000, ticked, &six), "only %d ticks",
		  atomic_load(&c.ticks));
	cr_assert_lt(atomic_load(&c.at_ms[5]) - t0, 1000,
		     "busy ticks were not run at once");
	/* The sixth answered idle: no seventh for a while. */
	cr_assert(stays_false(300, ticked, &seven), "ticked %d times",
		  atomic_load(&c.ticks));
	cr_assert_eq(atomic_load(&c.ticks), 6);

	/* Each tick is counted in the loop's metric. */
	struct metric *m =
		metric_register(METRIC_COUNTER, "nodeflow_loop_ticks_total",
				"loop=\"t_busy\"", "");
	cr_assert_eq(metric_get(m), 6);
	loop_stop(l);
	cr_assert_eq(atomic_load(&c.finished), 1);
}

Test(loop, wake_cuts_an_idle_sleep_short)
{
	struct tick_ctx c = {0};
	struct loop_def def = {.name = "t_wake",
			       .tick = counting_tick,
			       .interval_ms = 60000,
			       .max_backoff_ms = 30000};
	struct loop *l = loop_start(&def, &c);
	struct at_least one = {&c, 1}, two = {&c, 2}, three = {&c, 3};
	cr_assert(wait_until(2000, ticked, &one));
	cr_assert(stays_false(100, ticked, &two));
	int64_t woke = mono_ms();
	loop_wake(l);
	cr_assert(wait_until(1000, ticked, &two), "the wake was not seen");
	cr_assert_lt(atomic_load(&c.at_ms[1]) - woke, 1000);
	/* One wake, one extra tick: the loop is asleep again. */
	cr_assert(stays_false(200, ticked, &three));
	loop_wake(l);
	cr_assert(wait_until(1000, ticked, &three));
	loop_stop(l);
}

Test(loop, error_backs_off)
{
	struct tick_ctx c = {.errors_first = 1};
	struct loop_def def = {.name = "t_error",
			       .tick = counting_tick,
			       .interval_ms = 60000,
			       .max_backoff_ms = 30000};
	struct loop *l = loop_start(&def, &c);
	struct at_least one = {&c, 1}, two = {&c, 2};
	cr_assert(wait_until(2000, ticked, &one));
	int64_t failed_at = atomic_load(&c.at_ms[0]);
	/* Not hammering: nothing for (at least) 500 ms after the failure… */
	int64_t left = 500 - (mono_ms() - failed_at);
	if (left > 0)
		cr_assert(stays_false((int)left, ticked, &two),
			  "retried after %lld ms",
			  (long long)(atomic_load(&c.at_ms[1]) - failed_at));
	/* …but it does retry, well within 3 s. */
	cr_assert(wait_until(3000, ticked, &two), "no retry within 3 s");
	int64_t gap = atomic_load(&c.at_ms[1]) - failed_at;
	cr_assert_geq(gap, 500, "retried after %lld ms", (long long)gap);
	cr_assert_lt(gap, 3000, "retried after %lld ms", (long long)gap);

	struct metric *errors =
		metric_register(METRIC_COUNTER, "nodeflow_loop_errors_total",
				"loop=\"t_error\"", "");
	cr_assert_eq(metric_get(errors), 1);
	loop_stop(l);
}

Test(loop, backoff_doubles_up_to_the_maximum)
{
	struct tick_ctx c = {.always_error = true};
	struct loop_def def = {.name = "t_backoff",
			       .tick = counting_tick,
			       .interval_ms = 10,
			       .max_backoff_ms = 1500};
	struct loop *l = loop_start(&def, &c);
	struct at_least four = {&c, 4};
	cr_assert(wait_until(8000, ticked, &four), "only %d ticks",
		  atomic_load(&c.ticks));
	int64_t g1 = atomic_load(&c.at_ms[1]) - atomic_load(&c.at_ms[0]);
	int64_t g2 = atomic_load(&c.at_ms[2]) - atomic_load(&c.at_ms[1]);
	int64_t g3 = atomic_load(&c.at_ms[3]) - atomic_load(&c.at_ms[2]);
	/* 1 s, then 2 s capped to 1.5 s, then 1.5 s again. */
	cr_assert(g1 >= 900 && g1 < 1400, "first back-off %lld ms",
		  (long long)g1);
	cr_assert(g2 >= 1400 && g2 < 1900, "second back-off %lld ms",
		  (long long)g2);
	cr_assert(g3 >= 1400 && g3 < 1900, "third back-off %lld ms",
		  (long long)g3);
	loop_stop(l);
}

Test(loop, stop_is_prompt_and_finish_runs_once)
{
	struct tick_ctx c = {0};
	struct loop_def def = {.name = "t_stop",
			       .tick = counting_tick,
			       .finish = count_finish,
			       .interval_ms = 60000,
			       .max_backoff_ms = 30000};
	struct loop *l = loop_start(&def, &c);
	struct at_least one = {&c, 1};
	cr_assert(wait_until(2000, ticked, &one));
	int64_t t0 = mono_ms();
	loop_stop(l);
	cr_assert_lt(mono_ms() - t0, 1000, "loop_stop took %lld ms",
		     (long long)(mono_ms() - t0));
	cr_assert_eq(atomic_load(&c.finished), 1);
	cr_assert_eq(atomic_load(&c.ticks), 1);
	loop_stop(NULL); /* a no-op */
}

Test(loop, stop_during_error_backoff_is_prompt)
{
	struct tick_ctx c = {.always_error = true};
	struct loop_def def = {.name = "t_stop_err",
			       .tick = counting_tick,
			       .finish = count_finish,
			       .interval_ms = 10,
			       .max_backoff_ms = 60000};
	struct loop *l = loop_start(&def, &c);
	struct at_least one = {&c, 1};
	cr_assert(wait_until(2000, ticked, &one));
	int64_t t0 = mono_ms();
	loop_stop(l);
	cr_assert_lt(mono_ms() - t0, 500);
	cr_assert_eq(atomic_load(&c.finished), 1);
}

/* ----------------------------------------------------------------- log */

Test(log, level_parse)
{
	enum log_level l = LOG_ERROR;
	cr_assert(log_level_parse("debug", &l));
	cr_assert_eq(l, LOG_DEBUG);
	cr_assert(log_level_parse("info", &l));
	cr_assert_eq(l, LOG_INFO);
	cr_assert(log_level_parse("warn", &l));
	cr_assert_eq(l, LOG_WARN);
	cr_assert(log_level_parse("error", &l));
	cr_assert_eq(l, LOG_ERROR);
	l = LOG_WARN;
	cr_assert_not(log_level_parse("verbose", &l));
	cr_assert_not(log_level_parse("", &l));
	cr_assert_not(log_level_parse("warning", &l));
	cr_assert_not(log_level_parse("info ", &l));
	cr_assert_eq(l, LOG_WARN, "a failed parse must not change the output");
}

Test(log, format_parse)
{
	enum log_format f = LOG_FORMAT_JSON;
	cr_assert(log_format_parse("text", &f));
	cr_assert_eq(f, LOG_FORMAT_TEXT);
	cr_assert(log_format_parse("json", &f));
	cr_assert_eq(f, LOG_FORMAT_JSON);
	f = LOG_FORMAT_TEXT;
	cr_assert_not(log_format_parse("yaml", &f));
	cr_assert_not(log_format_parse("", &f));
	cr_assert_not(log_format_parse("jsonl", &f));
	cr_assert_eq(f, LOG_FORMAT_TEXT);
}

/* Runs fn with stderr redirected into a pipe; returns what it wrote. */
static char *
capture_stderr(void (*fn)(void))
{
	int fds[2];
	cr_assert(pipe(fds) == 0);
	int saved = dup(STDERR_FILENO);
	dup2(fds[1], STDERR_FILENO);
	close(fds[1]);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	struct strbuf sb = STRBUF_INIT;
	char buf[4096];
	ssize_t n;
	while ((n = read(fds[0], buf, sizeof(buf))) > 0)
		sb_append(&sb, buf, (size_t)n);
	close(fds[0]);
	sb_puts(&sb, ""); /* a NUL even when nothing was written */
	return sb_steal(&sb);
}

static void
write_json_lines(void)
{
	log_configure(LOG_INFO, LOG_FORMAT_JSON);
	log_debug("t", "filtered out");
	log_info("comp\"x", "say \"hi\"\n\tback\\slash \x01 end");
	log_error("db", "%s %d", "code", 7);
}

Test(log, json_lines_are_json_objects)
{
	char *out = capture_stderr(write_json_lines);
	char *save = NULL;
	int lines = 0;
	const char *want_msg[] = {"say \"hi\"\n\tback\\slash \x01 end",
				  "code 7"};
	const char *want_comp[] = {"comp\"x", "db"};
	const char *want_level[] = {"info", "error"};
	for (char *line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cr_assert_lt(lines, 2, "unexpected line: %s", line);
		json_error_t je;
		json_t *o = json_loads(line, 0, &je);
		cr_assert_not_null(o, "not JSON (%s): %s", je.text, line);
		cr_assert(json_is_object(o));
		const char *ts = json_string_value(json_object_get(o, "ts"));
		cr_assert_not_null(ts);
		/* 2025-01-02T03:04:05.678Z */
		cr_assert_eq(strlen(ts), 24, "%s", ts);
		cr_assert_eq(ts[10], 'T');
		cr_assert_eq(ts[23], 'Z');
		cr_assert_str_eq(json_string_value(json_object_get(o, "level")),
				 want_level[lines]);
		cr_assert_str_eq(
			json_string_value(json_object_get(o, "component")),
			want_comp[lines]);
		cr_assert_str_eq(json_string_value(json_object_get(o, "msg")),
				 want_msg[lines]);
		cr_assert_eq(json_object_size(o), 4);
		json_decref(o);
		lines++;
	}
	cr_assert_eq(lines, 2);
	free(out);
}

static void
write_invalid_utf8(void)
{
	log_configure(LOG_DEBUG, LOG_FORMAT_JSON);
	/* A stray byte, a truncated sequence, an overlong '/', a surrogate,
	 * then well-formed two-, three- and four-byte characters. */
	log_debug("http", "GET /\xff|\xc3|\xc0\xaf|\xed\xa0\x80|"
			  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

Test(log, json_lines_stay_json_when_the_message_is_not_utf8)
{
	char *out = capture_stderr(write_invalid_utf8);
	json_error_t je;
	json_t *o = json_loads(out, 0, &je);
	cr_assert_not_null(o, "not JSON (%s): %s", je.text, out);
	cr_assert_str_eq(json_string_value(json_object_get(o, "msg")),
			 "GET /\xef\xbf\xbd|\xef\xbf\xbd|"
			 "\xef\xbf\xbd\xef\xbf\xbd|"
			 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
			 "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	json_decref(o);
	free(out);
}

static void
write_text_lines(void)
{
	log_configure(LOG_WARN, LOG_FORMAT_TEXT);
	cr_assert_not(log_enabled(LOG_INFO));
	cr_assert(log_enabled(LOG_WARN));
	cr_assert(log_enabled(LOG_ERROR));
	log_info("t", "filtered out");
	log_warn("partitions", "created %d", 3);
}

Test(log, text_lines_and_level_filter)
{
	char *out = capture_stderr(write_text_lines);
	cr_assert_null(strstr(out, "filtered out"), "%s", out);
	cr_assert(strstr(out, " warn  partitions: created 3\n"), "%s", out);
	cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s",
		     out);
	free(out);
}
