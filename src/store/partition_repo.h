/*
 * partition_repo — catalog reads and partition DDL for range-partitioned
 * tables.
 *
 * DDL is built in one place only, the PL/pgSQL functions of migration
 * 0001_partitioning ("nf_create_range_partition", …), which quote
 * identifiers with format('%I') and values with format('%L'); this module
 * calls them with $n parameters like any other statement.  Bounds travel as
 * epoch seconds, so no clock of this process is ever involved.
 *
 * Threads: callers bring their own connection.  Ownership: lists are the
 * caller's (partition_list_free).  Failure: false with e set; e->sqlstate
 * tells a lost race (42P07, 42P17, 23505) or rows in DEFAULT (23514).
 */
#ifndef NF_STORE_PARTITION_REPO_H
#define NF_STORE_PARTITION_REPO_H

#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

struct db;

#include <stdint.h>

struct partition_range {
	char *name;
	int64_t lower; /* epoch seconds, inclusive */
	int64_t upper; /* epoch seconds, exclusive */
};

struct partition_list {
	struct partition_range *items;
	size_t n;
};

/* The database's clock, in epoch seconds. */
bool partition_repo_now(struct db *db, int64_t *out, struct err *e);
/* Range partitions of parent (DEFAULT excluded), ordered by lower bound. */
bool partition_repo_list(struct db *db, const char *parent,
			 struct partition_list *out, struct err *e);
void partition_list_free(struct partition_list *l);
/* Creates parent's partition [lower, upper) named by the schema's naming
 * rule for `period` ("month" or "hour"); *name_out gets the name (free()).
 * Runs inside the caller's transaction. */
bool partition_repo_create(struct db *db, const char *parent,
			   const char *period, int64_t lower, int64_t upper,
			   char **name_out, struct err *e);
/* As create, for a parent whose DEFAULT holds rows of the range: detaches
 * DEFAULT, creates the partition, moves the in-range rows, re-attaches.
 * Must run in a transaction of the caller's.  *moved gets the row count. */
bool partition_repo_recover(struct db *db, const char *parent,
			    const char *period, int64_t lower, int64_t upper,
			    char **name_out, int64_t *moved, struct err *e);
bool partition_repo_drop(struct db *db, const char *name, struct err *e);
/* SET LOCAL lock_timeout for the current transaction. */
bool partition_repo_lock_timeout(struct db *db, int ms, struct err *e);

#endif
