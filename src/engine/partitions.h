/*
 * partitions — the partition manager: keeps the range-partitioned tables'
 * partitions created ahead of time and drops those past retention.
 *
 * Every replica runs it (an engine loop) and `nodeflow partitions ensure`
 * runs it by hand, so concurrent runs are the normal case: a creation that
 * fails with 42P07 (duplicate table), 42P17 (overlapping partition) or 23505
 * (two CREATE TABLEs colliding on pg_class's unique index) means another run
 * got there first, and is not reported.  That is also why there is no
 * `IF NOT EXISTS`: it would let the loser report a partition it did not
 * create.
 *
 * A DEFAULT partition that already holds rows of a period blocks the plain
 * creation (23514); the manager then detaches DEFAULT, creates the
 * partition, moves the in-range rows and re-attaches DEFAULT, all in one
 * transaction, since a crash with DEFAULT detached would fail every
 * out-of-range insert.
 *
 * Periods are computed in UTC from the database's clock.  A table keeps the
 * current period plus `ahead` future ones; a partition whose upper bound is
 * at or before the start of the period `retention` periods before the
 * current one is dropped (DEFAULT never is).
 *
 * Threads: partitions_ensure uses the caller's connection on the caller's
 * thread; the loop runs on its own thread with its own connection.
 * Ownership: a report owns its lists (partition_report_free).  Failure:
 * false with e set; partitions created before the failure stay created and
 * are in the report.
 */
#ifndef NF_ENGINE_PARTITIONS_H
#define NF_ENGINE_PARTITIONS_H

#include "runtime/config.h"
#include "runtime/loop.h"
#include "store/db.h"

#include <stddef.h>
#include <stdint.h>

enum partition_period { PERIOD_MONTH, PERIOD_HOUR };

struct partition_table {
	const char *parent;
	enum partition_period period;
	int ahead;     /* periods kept ready after the current one */
	int retention; /* past periods kept before the current one */
};

enum { PARTITION_TABLES = 4 };

struct partition_report {
	char **created;
	size_t n_created;
	char **dropped;
	size_t n_dropped;
	int64_t rows_moved; /* rows moved out of DEFAULT partitions */
};

/* The schema's range-partitioned tables with the configured counts. */
void partitions_tables(const struct config *cfg,
		       struct partition_table out[PARTITION_TABLES]);

/* One pass over tables.  now_epoch 0 means the database's clock. */
bool partitions_ensure(struct db *db, const struct partition_table *tables,
		       size_t n, int64_t now_epoch, struct partition_report *r,
		       struct err *e);
void partition_report_free(struct partition_report *r);

/* Period arithmetic in UTC, exposed for tests. */
int64_t partition_period_start(enum partition_period p, int64_t t);
int64_t partition_period_add(enum partition_period p, int64_t start, int k);

/* The engine loop: a pass every cfg->partitions_interval_seconds. */
struct loop *partitions_loop_start(const struct config *cfg);

#endif
