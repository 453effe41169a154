#include "engine/partitions.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/partition_repo.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { DDL_LOCK_TIMEOUT_MS = 5000 };

void
partitions_tables(const struct config *cfg,
		  struct partition_table out[PARTITION_TABLES])
{
	out[0] =
		(struct partition_table){"WorkflowExecutions", PERIOD_MONTH,
					 (int)cfg->executions_months_ahead,
					 (int)cfg->executions_retention_months};
	out[1] = (struct partition_table){"WorkflowEvents", PERIOD_MONTH,
					  (int)cfg->events_months_ahead,
					  (int)cfg->events_retention_months};
	out[2] = (struct partition_table){"Timers", PERIOD_HOUR,
					  (int)cfg->timers_hours_ahead,
					  (int)cfg->timers_retention_hours};
	out[3] = (struct partition_table){"TaskLogs", PERIOD_MONTH,
					  (int)cfg->task_logs_months_ahead,
					  (int)cfg->task_logs_retention_months};
}

int64_t
partition_period_start(enum partition_period p, int64_t t)
{
	if (p == PERIOD_HOUR)
		return t - ((t % 3600) + 3600) % 3600;
	time_t secs = (time_t)t;
	struct tm tm;
	gmtime_r(&secs, &tm);
	tm.tm_mday = 1;
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	return (int64_t)timegm(&tm);
}

int64_t
partition_period_add(enum partition_period p, int64_t start, int k)
{
	if (p == PERIOD_HOUR)
		return start + (int64_t)k * 3600;
	time_t secs = (time_t)start;
	struct tm tm;
	gmtime_r(&secs, &tm);
	tm.tm_mon += k; /* timegm normalises the month and year */
	return (int64_t)timegm(&tm);
}

static const char *
period_name(enum partition_period p)
{
	return p == PERIOD_HOUR ? "hour" : "month";
}

static bool
lost_race(const struct err *e)
{
	return strcmp(e->sqlstate, "42P07") == 0 ||
	       strcmp(e->sqlstate, "42P17") == 0 ||
	       strcmp(e->sqlstate, "23505") == 0;
}

static void
push(char ***list, size_t *n, char *name)
{
	*list = xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = name;
}

static bool
covered(const struct partition_list *have, int64_t lo, int64_t hi)
{
	for (size_t i = 0; i < have->n; i++)
		if (have->items[i].lower < hi && lo < have->items[i].upper)
			return true;
	return false;
}

/*
 * Creates one partition in its own transaction.  Returns false only on an
 * error that is not a lost race; *name is set when this call created it.
 */
static bool
create_one(struct db *db, const struct partition_table *t, int64_t lo,
	   int64_t hi, struct partition_report *r, struct err *e)
{
	char *name = NULL;
	int64_t moved = 0;

	if (!db_begin(db, e))
		return false;
	bool ok = partition_repo_lock_timeout(db, DDL_LOCK_TIMEOUT_MS, e) &&
		  partition_repo_create(db, t->parent, period_name(t->period),
					lo, hi, &name, e) &&
		  db_commit(db, e);
	if (!ok) {
		db_rollback(db);
		if (lost_race(e))
			return true;
		if (strcmp(e->sqlstate, "23514") != 0)
			return false;
		/* DEFAULT holds rows of this period: move them. */
		err_clear(e);
		if (!db_begin(db, e))
			return false;
		ok = partition_repo_lock_timeout(db, DDL_LOCK_TIMEOUT_MS, e) &&
		     partition_repo_recover(db, t->parent,
					    period_name(t->period), lo, hi,
					    &name, &moved, e) &&
		     db_commit(db, e);
		if (!ok) {
			db_rollback(db);
			free(name);
			return lost_race(e);
		}
		log_warn("partitions",
			 "moved %lld rows of %s out of the DEFAULT partition",
			 (long long)moved, name);
		r->rows_moved += moved;
	}
	push(&r->created, &r->n_created, name);
	return true;
}

static bool
drop_one(struct db *db, const char *name, struct partition_report *r,
	 struct err *e)
{
	if (!db_begin(db, e))
		return false;
	bool ok = partition_repo_lock_timeout(db, DDL_LOCK_TIMEOUT_MS, e) &&
		  partition_repo_drop(db, name, e) && db_commit(db, e);
	if (!ok) {
		db_rollback(db);
		/* 42P01: another run dropped it first. */
		return strcmp(e->sqlstate, "42P01") == 0;
	}
	push(&r->dropped, &r->n_dropped, xstrdup(name));
	return true;
}

static bool
ensure_table(struct db *db, const struct partition_table *t, int64_t now,
	     struct partition_report *r, struct err *e)
{
	struct partition_list have;
	if (!partition_repo_list(db, t->parent, &have, e))
		return false;

	bool ok = true;
	int64_t current = partition_period_start(t->period, now);
	for (int k = 0; ok && k <= t->ahead; k++) {
		int64_t lo = partition_period_add(t->period, current, k);
		int64_t hi = partition_period_add(t->period, current, k + 1);
		if (!covered(&have, lo, hi))
			ok = create_one(db, t, lo, hi, r, e);
	}
	int64_t cutoff =
		partition_period_add(t->period, current, -t->retention);
	for (size_t i = 0; ok && i < have.n; i++)
		if (have.items[i].upper <= cutoff)
			ok = drop_one(db, have.items[i].name, r, e);
	partition_list_free(&have);
	if (!ok)
		err_prefix(e, "%s", t->parent);
	return ok;
}

bool
partitions_ensure(struct db *db, const struct partition_table *tables, size_t n,
		  int64_t now_epoch, struct partition_report *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	if (!now_epoch && !partition_repo_now(db, &now_epoch, e))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!ensure_table(db, &tables[i], now_epoch, r, e))
			return false;
	return true;
}

void
partition_report_free(struct partition_report *r)
{
	for (size_t i = 0; i < r->n_created; i++)
		free(r->created[i]);
	for (size_t i = 0; i < r->n_dropped; i++)
		free(r->dropped[i]);
	free(r->created);
	free(r->dropped);
	memset(r, 0, sizeof(*r));
}

/* The engine loop. */

struct partitions_loop {
	struct loop_def def;
	struct partition_table tables[PARTITION_TABLES];
	char *url;
	struct db *db;
	struct metric *created;
	struct metric *dropped;
};

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct partitions_loop *pl = arg;
	(void)scratch;
	if (pl->db && !db_healthy(pl->db)) {
		db_close(pl->db);
		pl->db = NULL;
	}
	if (!pl->db && !db_open(&pl->db, pl->url, DB_PLAIN, e))
		return LOOP_ERROR;

	struct partition_report r;
	bool ok = partitions_ensure(pl->db, pl->tables, PARTITION_TABLES, 0, &r,
				    e);
	for (size_t i = 0; i < r.n_created; i++)
		log_info("partitions", "created partition %s", r.created[i]);
	for (size_t i = 0; i < r.n_dropped; i++)
		log_info("partitions", "dropped expired partition %s",
			 r.dropped[i]);
	metric_add(pl->created, (long long)r.n_created);
	metric_add(pl->dropped, (long long)r.n_dropped);
	partition_report_free(&r);
	return ok ? LOOP_IDLE : LOOP_ERROR;
}

static void
finish(void *arg)
{
	struct partitions_loop *pl = arg;
	db_close(pl->db);
	free(pl->url);
	free(pl);
}

struct loop *
partitions_loop_start(const struct config *cfg)
{
	struct partitions_loop *pl = xcalloc(1, sizeof(*pl));
	pl->def = (struct loop_def){
		.name = "partitions",
		.tick = tick,
		.finish = finish,
		.interval_ms = (int)cfg->partitions_interval_seconds * 1000,
		.max_backoff_ms = 60000,
	};
	partitions_tables(cfg, pl->tables);
	pl->url = xstrdup(cfg->database_url);
	pl->created = metric_register(METRIC_COUNTER,
				      "nodeflow_partitions_created_total", "",
				      "Partitions this process created");
	pl->dropped = metric_register(
		METRIC_COUNTER, "nodeflow_partitions_dropped_total", "",
		"Expired partitions this process dropped");
	return loop_start(&pl->def, pl);
}
