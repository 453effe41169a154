/*
 * integration_schema — the migrated schema checked against the data-model
 * specification by reading the catalog of a cloned database: partitioning
 * (strategy, key, hash remainders, DEFAULT and seeded range partitions),
 * every index of the engine tables as pg_get_indexdef() prints it (which
 * pins columns, order, method, opclass, predicate and uniqueness at once),
 * primary keys, the queue tables' storage parameters, the WorkflowEvents
 * notify trigger, and the columns the specification calls out.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct th_db tdb;
static PGconn *conn;

static void
setup(void)
{
	th_db_clone(&tdb);
	conn = th_connect(tdb.url);
	/* Bounds and literals below are rendered in UTC, ISO style. */
	th_exec(conn,
		"SET \"TimeZone\" = 'UTC'; SET \"DateStyle\" = 'ISO, YMD'");
}

static void
teardown(void)
{
	if (conn)
		PQfinish(conn);
	conn = NULL;
	th_db_drop(&tdb);
}

TestSuite(schema, .init = setup, .fini = teardown);

/* ---------------------------------------------------------- partitioning */

struct hash_spec {
	const char *table;
	const char *key; /* pg_get_partkeydef() */
	int modulus;
};

static const struct hash_spec hashed[] = {
	{"TaskExecutions", "HASH (\"workflowId\")", 16},
	{"TaskQueues", "HASH (\"queueName\")", 8},
};

Test(schema, hash_partitions)
{
	for (size_t t = 0; t < sizeof(hashed) / sizeof(hashed[0]); t++) {
		const struct hash_spec *h = &hashed[t];
		const char *params[] = {h->table};
		char *key = th_value(conn,
				     "SELECT pg_get_partkeydef(to_regclass("
				     "format('%I', $1::text)))",
				     1, params);
		cr_assert_str_eq(key, h->key, "%s is partitioned by %s",
				 h->table, key);
		free(key);

		/* Exactly remainders 0..modulus-1, each of this modulus. */
		char expected[2048] = "";
		size_t used = 0;
		for (int r = 0; r < h->modulus; r++)
			used += (size_t)snprintf(
				expected + used, sizeof(expected) - used,
				"%sFOR VALUES WITH (modulus %d, remainder %d)",
				r ? ";" : "", h->modulus, r);
		char *bounds = th_value(
			conn,
			"SELECT string_agg(\"b\", ';' ORDER BY substring(\"b\""
			"        FROM 'remainder ([0-9]+)')::int, \"b\")"
			"  FROM (SELECT pg_get_expr(c.\"relpartbound\", c.\"oid\")"
			"               AS \"b\""
			"          FROM pg_inherits i"
			"          JOIN pg_class c ON c.\"oid\" = i.\"inhrelid\""
			"         WHERE i.\"inhparent\" ="
			"               to_regclass(format('%I', $1::text))) \"s\"",
			1, params);
		cr_assert_str_eq(bounds, expected, "%s partitions: %s",
				 h->table, bounds);
		free(bounds);
	}
}

struct range_spec {
	const char *table;
	const char *key;
	const char *period; /* date_trunc() field and nf_partition_name() */
};

static const struct range_spec ranged[] = {
	{"WorkflowExecutions", "RANGE (\"startedAt\")", "month"},
	{"WorkflowEvents", "RANGE (at)", "month"},
	{"Timers", "RANGE (\"fireAt\")", "hour"},
};

Test(schema, range_partitions_have_default_and_seeded_period)
{
	for (size_t t = 0; t < sizeof(ranged) / sizeof(ranged[0]); t++) {
		const struct range_spec *s = &ranged[t];
		const char *params[] = {s->table, s->period};
		char *key = th_value(conn,
				     "SELECT pg_get_partkeydef(to_regclass("
				     "format('%I', $1::text)))",
				     1, params);
		cr_assert_str_eq(key, s->key, "%s is partitioned by %s",
				 s->table, key);
		free(key);

		char *def = th_value(
			conn,
			"SELECT c.\"relname\" || ' ' ||"
			"       pg_get_expr(c.\"relpartbound\", c.\"oid\")"
			"  FROM pg_partitioned_table pt"
			"  JOIN pg_class c ON c.\"oid\" = pt.\"partdefid\""
			" WHERE pt.\"partrelid\" = to_regclass(format('%I', $1::text))"
			" UNION ALL SELECT '(none)'",
			1, params);
		char want[256];
		snprintf(want, sizeof(want), "%s_default DEFAULT", s->table);
		cr_assert_str_eq(def, want, "%s: DEFAULT partition %s",
				 s->table, def);
		free(def);

		/*
		 * The migration seeds the period current when it ran (its
		 * "appliedAt" is the now() it used), so a fresh database never
		 * writes to DEFAULT.  Name, parent and bounds must all agree.
		 */
		long long found = th_int(
			conn,
			"WITH \"p\" AS ("
			"  SELECT date_trunc($2, m.\"appliedAt\", 'UTC') AS \"lo\""
			"    FROM \"SchemaMigrations\" m"
			"   WHERE m.\"name\" = '0002_engine')"
			" SELECT count(*) FROM \"p\", pg_inherits i"
			"  JOIN pg_class c ON c.\"oid\" = i.\"inhrelid\""
			" WHERE i.\"inhparent\" = to_regclass(format('%I', $1::text))"
			"   AND c.\"relname\" = \"nf_partition_name\"($1, \"p\".\"lo\", $2)"
			"   AND pg_get_expr(c.\"relpartbound\", c.\"oid\") ="
			"       format('FOR VALUES FROM (%L) TO (%L)', \"p\".\"lo\","
			"              \"p\".\"lo\" + ('1 ' || $2)::interval)",
			2, params);
		cr_assert_eq(
			found, 1,
			"%s has no partition for the %s it was migrated in",
			s->table, s->period);
	}
}

/* TaskLogs (migration 0009) follows the same rule: a DEFAULT partition,
 * and the month the migration ran in seeded, so no line lands in DEFAULT. */
Test(schema, task_logs_partitioned_with_seeded_month)
{
	char *key = th_value(
		conn, "SELECT pg_get_partkeydef('\"TaskLogs\"'::regclass)", 0,
		NULL);
	cr_assert_str_eq(key, "RANGE (\"createdAt\")");
	free(key);
	long long found = th_int(
		conn,
		"WITH \"p\" AS ("
		"  SELECT date_trunc('month', m.\"appliedAt\", 'UTC') AS \"lo\""
		"    FROM \"SchemaMigrations\" m"
		"   WHERE m.\"name\" = '0009_task_logs')"
		" SELECT count(*) FROM \"p\", pg_inherits i"
		"  JOIN pg_class c ON c.\"oid\" = i.\"inhrelid\""
		" WHERE i.\"inhparent\" = '\"TaskLogs\"'::regclass"
		"   AND c.\"relname\" = \"nf_partition_name\"('TaskLogs',"
		"       \"p\".\"lo\", 'month')"
		"   AND pg_get_expr(c.\"relpartbound\", c.\"oid\") ="
		"       format('FOR VALUES FROM (%L) TO (%L)', \"p\".\"lo\","
		"              \"p\".\"lo\" + interval '1 month')",
		0, NULL);
	cr_assert_eq(found, 1, "TaskLogs has no partition for its month");
	long long def =
		th_int(conn,
		       "SELECT count(*) FROM pg_partitioned_table pt"
		       " JOIN pg_class c ON c.\"oid\" = pt.\"partdefid\""
		       " WHERE pt.\"partrelid\" = '\"TaskLogs\"'::regclass"
		       " AND c.\"relname\" = 'TaskLogs_default'",
		       0, NULL);
	cr_assert_eq(def, 1);
}

/* --------------------------------------------------------------- indexes */

/*
 * Every index of these tables, as pg_get_indexdef() prints it.  A table
 * listed here may have no other index; add new ones to this list.
 */
struct index_spec {
	const char *table;
	const char *def;
};

#define IDX(t, rest)              \
	{                         \
		t, "CREATE " rest \
	}
static const struct index_spec indexes[] = {
	/* WorkflowExecutions: partitioned, so "ON ONLY"; every ordered index
	 * is "startedAt" DESC. */
	IDX("WorkflowExecutions",
	    "UNIQUE INDEX \"WorkflowExecutions_pkey\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (id, \"startedAt\")"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_status_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"namespaceId\","
	    " status, \"startedAt\" DESC)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_def_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"namespaceId\","
	    " \"defName\", \"startedAt\" DESC)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_recent_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"namespaceId\","
	    " \"startedAt\" DESC, id DESC)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_correlation_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"namespaceId\","
	    " \"correlationId\") WHERE (\"correlationId\" IS NOT NULL)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_idempotency_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"namespaceId\","
	    " \"idempotencyKey\") WHERE (\"idempotencyKey\" IS NOT NULL)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_parent_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"parentWorkflowId\")"
	    " WHERE (\"parentWorkflowId\" IS NOT NULL)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_input_gin_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING gin (input jsonb_path_ops)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_output_gin_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING gin (output jsonb_path_ops)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_input_ref_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"inputRef\")"
	    " WHERE (\"inputRef\" IS NOT NULL)"),
	/* Migration 0009: the overview's executions ended per minute. */
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_ended_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"namespaceId\","
	    " \"endedAt\") WHERE (\"endedAt\" IS NOT NULL)"),
	IDX("WorkflowExecutions",
	    "INDEX \"WorkflowExecutions_output_ref_idx\" ON ONLY"
	    " public.\"WorkflowExecutions\" USING btree (\"outputRef\")"
	    " WHERE (\"outputRef\" IS NOT NULL)"),

	IDX("IdempotencyKeys",
	    "UNIQUE INDEX \"IdempotencyKeys_pkey\" ON public.\"IdempotencyKeys\""
	    " USING btree (\"namespaceId\", key)"),
	IDX("IdempotencyKeys",
	    "INDEX \"IdempotencyKeys_expires_idx\" ON public.\"IdempotencyKeys\""
	    " USING btree (\"expiresAt\") WHERE (\"expiresAt\" IS NOT NULL)"),

	/* TaskExecutions: the spec's four, plus the primary key and the
	 * by-id lookup the migration documents. */
	IDX("TaskExecutions",
	    "UNIQUE INDEX \"TaskExecutions_pkey\" ON ONLY"
	    " public.\"TaskExecutions\" USING btree (\"workflowId\", id)"),
	IDX("TaskExecutions",
	    "UNIQUE INDEX \"TaskExecutions_identity_idx\" ON ONLY"
	    " public.\"TaskExecutions\" USING btree (\"workflowId\","
	    " \"refName\", iteration, attempt)"),
	IDX("TaskExecutions",
	    "INDEX \"TaskExecutions_frontier_idx\" ON ONLY"
	    " public.\"TaskExecutions\" USING btree (\"workflowId\")"
	    " WHERE (status <> ALL (ARRAY['COMPLETED'::text,"
	    " 'COMPLETED_WITH_ERRORS'::text, 'FAILED'::text,"
	    " 'FAILED_WITH_TERMINAL_ERROR'::text, 'TIMED_OUT'::text,"
	    " 'CANCELED'::text, 'SKIPPED'::text]))"),
	IDX("TaskExecutions",
	    "INDEX \"TaskExecutions_unprocessed_idx\" ON ONLY"
	    " public.\"TaskExecutions\" USING btree (\"workflowId\")"
	    " WHERE ((\"endedAt\" IS NOT NULL) AND (\"deciderSeenAt\" IS NULL))"),
	IDX("TaskExecutions",
	    "INDEX \"TaskExecutions_recent_by_def_idx\" ON ONLY"
	    " public.\"TaskExecutions\" USING btree (\"namespaceId\","
	    " \"taskDefName\", \"scheduledAt\" DESC)"),
	/* Orphaned-payload collection, the task side (migration 0006). */
	IDX("TaskExecutions",
	    "INDEX \"TaskExecutions_input_ref_idx\" ON ONLY"
	    " public.\"TaskExecutions\" USING btree (\"inputRef\")"
	    " WHERE (\"inputRef\" IS NOT NULL)"),
	IDX("TaskExecutions",
	    "INDEX \"TaskExecutions_output_ref_idx\" ON ONLY"
	    " public.\"TaskExecutions\" USING btree (\"outputRef\")"
	    " WHERE (\"outputRef\" IS NOT NULL)"),
	IDX("Payloads", "UNIQUE INDEX \"Payloads_pkey\" ON public.\"Payloads\""
			" USING btree (id)"),
	IDX("Payloads", "INDEX \"Payloads_created_idx\" ON public.\"Payloads\""
			" USING btree (\"createdAt\")"),

	IDX("TaskQueues",
	    "UNIQUE INDEX \"TaskQueues_pkey\" ON ONLY public.\"TaskQueues\""
	    " USING btree (\"queueName\", id)"),
	IDX("TaskQueues",
	    "INDEX \"TaskQueues_dequeue_idx\" ON ONLY public.\"TaskQueues\""
	    " USING btree (\"queueName\", priority DESC, id)"
	    " WHERE (\"leaseExpiresAt\" IS NULL)"),
	IDX("TaskQueues",
	    "INDEX \"TaskQueues_lease_idx\" ON ONLY public.\"TaskQueues\""
	    " USING btree (\"leaseExpiresAt\")"
	    " WHERE (\"leaseExpiresAt\" IS NOT NULL)"),
	IDX("TaskQueues",
	    "UNIQUE INDEX \"TaskQueues_task_idx\" ON ONLY public.\"TaskQueues\""
	    " USING btree (\"queueName\", \"taskId\")"),
	/* The system-task runner's dequeue path (migration 0004). */
	IDX("TaskQueues",
	    "INDEX \"TaskQueues_system_idx\" ON ONLY public.\"TaskQueues\""
	    " USING btree (\"taskType\", priority DESC, id)"
	    " WHERE ((\"leaseExpiresAt\" IS NULL) AND"
	    " (\"taskType\" <> 'SIMPLE'::text))"),

	IDX("DecideQueues",
	    "UNIQUE INDEX \"DecideQueues_pkey\" ON public.\"DecideQueues\""
	    " USING btree (\"workflowId\")"),
	/* The claim, oldest first (migration 0014). */
	IDX("DecideQueues",
	    "INDEX \"DecideQueues_due_idx\" ON public.\"DecideQueues\""
	    " USING btree (\"enqueuedAt\")"),

	IDX("Timers", "UNIQUE INDEX \"Timers_pkey\" ON ONLY public.\"Timers\""
		      " USING btree (id, \"fireAt\")"),
	IDX("Timers",
	    "INDEX \"Timers_due_idx\" ON ONLY public.\"Timers\""
	    " USING btree (\"fireAt\") WHERE (\"claimedAt\" IS NULL)"),
	IDX("Timers", "INDEX \"Timers_owner_idx\" ON ONLY public.\"Timers\""
		      " USING btree (\"workflowId\", \"taskId\")"),

	IDX("OutboxEvents",
	    "UNIQUE INDEX \"OutboxEvents_pkey\" ON public.\"OutboxEvents\""
	    " USING btree (id)"),
	IDX("OutboxEvents",
	    "INDEX \"OutboxEvents_deliverable_idx\" ON public.\"OutboxEvents\""
	    " USING btree (\"nextAttemptAt\", id) WHERE ((\"publishedAt\" IS"
	    " NULL) AND (\"deadLetteredAt\" IS NULL))"),
	IDX("OutboxEvents",
	    "INDEX \"OutboxEvents_deadletter_idx\" ON public.\"OutboxEvents\""
	    " USING btree (\"deadLetteredAt\")"
	    " WHERE (\"deadLetteredAt\" IS NOT NULL)"),
	/* Migration 0007: the dead-letter API's pages, and pruning. */
	IDX("OutboxEvents",
	    "INDEX \"OutboxEvents_deadletter_ns_idx\" ON public.\"OutboxEvents\""
	    " USING btree (\"namespaceId\", id)"
	    " WHERE (\"deadLetteredAt\" IS NOT NULL)"),
	IDX("OutboxEvents",
	    "INDEX \"OutboxEvents_published_idx\" ON public.\"OutboxEvents\""
	    " USING btree (\"publishedAt\") WHERE (\"publishedAt\" IS NOT NULL)"),

	/* The primary key's btree is the ("workflowId","seq") index behind
	 * the history view and the SSE resume. */
	IDX("WorkflowEvents",
	    "UNIQUE INDEX \"WorkflowEvents_pkey\" ON ONLY"
	    " public.\"WorkflowEvents\" USING btree (\"workflowId\", seq, at)"),
	/* Migration 0010: the namespace stream's positions. */
	IDX("WorkflowEvents",
	    "INDEX \"WorkflowEvents_ns_status_idx\" ON ONLY"
	    " public.\"WorkflowEvents\" USING btree (\"namespaceId\", xid,"
	    " \"workflowId\", seq) WHERE (type ~~ 'WORKFLOW\\_%'::text)"),

	/* Migration 0009: a task's lines in order, and its last "seq". */
	IDX("TaskLogs", "UNIQUE INDEX \"TaskLogs_pkey\" ON ONLY"
			" public.\"TaskLogs\" USING btree (\"taskId\", seq,"
			" \"createdAt\")"),

	IDX("Semaphores", "UNIQUE INDEX \"Semaphores_pkey\" ON"
			  " public.\"Semaphores\" USING btree (\"namespaceId\","
			  " name)"),
	IDX("SemaphoreHolders",
	    "UNIQUE INDEX \"SemaphoreHolders_pkey\" ON"
	    " public.\"SemaphoreHolders\" USING btree (\"namespaceId\", name,"
	    " \"taskId\")"),
	IDX("SemaphoreHolders",
	    "INDEX \"SemaphoreHolders_count_idx\" ON public.\"SemaphoreHolders\""
	    " USING btree (\"namespaceId\", name, \"leaseExpiresAt\")"),
	IDX("SemaphoreHolders",
	    "INDEX \"SemaphoreHolders_expires_idx\" ON"
	    " public.\"SemaphoreHolders\" USING btree (\"leaseExpiresAt\")"),
	IDX("RateLimitBuckets",
	    "UNIQUE INDEX \"RateLimitBuckets_pkey\" ON"
	    " public.\"RateLimitBuckets\" USING btree (\"namespaceId\","
	    " \"queueName\", \"windowStart\")"),
	IDX("RateLimitBuckets",
	    "INDEX \"RateLimitBuckets_window_idx\" ON"
	    " public.\"RateLimitBuckets\" USING btree (\"windowStart\")"),
	IDX("TaskOutputCache",
	    "UNIQUE INDEX \"TaskOutputCache_pkey\" ON public.\"TaskOutputCache\""
	    " USING btree (\"namespaceId\", \"taskDefName\", key)"),
	IDX("TaskOutputCache",
	    "INDEX \"TaskOutputCache_expires_idx\" ON"
	    " public.\"TaskOutputCache\" USING btree (\"expiresAt\")"),
};
#undef IDX

enum { N_INDEXES = sizeof(indexes) / sizeof(indexes[0]) };

Test(schema, indexes_match_the_specification)
{
	for (size_t i = 0; i < N_INDEXES; i++) {
		const char *table = indexes[i].table;
		/* Each table once: its whole index set, sorted. */
		bool first = true;
		for (size_t j = 0; j < i; j++)
			if (strcmp(indexes[j].table, table) == 0)
				first = false;
		if (!first)
			continue;

		const char *params[] = {table};
		PGresult *r = th_query(
			conn,
			"SELECT pg_get_indexdef(x.\"indexrelid\")"
			"  FROM pg_index x"
			" WHERE x.\"indrelid\" = to_regclass(format('%I', $1::text))"
			" ORDER BY 1",
			1, params);
		size_t want = 0;
		for (size_t j = i; j < N_INDEXES; j++) {
			if (strcmp(indexes[j].table, table) != 0)
				continue;
			want++;
			bool present = false;
			for (int row = 0; row < PQntuples(r); row++)
				if (strcmp(PQgetvalue(r, row, 0),
					   indexes[j].def) == 0)
					present = true;
			cr_expect(present, "%s: missing or different:\n  %s",
				  table, indexes[j].def);
		}
		for (int row = 0; row < PQntuples(r); row++) {
			bool listed = false;
			for (size_t j = i; j < N_INDEXES; j++)
				if (strcmp(indexes[j].table, table) == 0 &&
				    strcmp(PQgetvalue(r, row, 0),
					   indexes[j].def) == 0)
					listed = true;
			cr_expect(listed,
				  "%s: index not in the specification:\n  %s",
				  table, PQgetvalue(r, row, 0));
		}
		cr_assert_eq((size_t)PQntuples(r), want,
			     "%s has %d indexes, not %zu", table, PQntuples(r),
			     want);
		PQclear(r);
	}
}

Test(schema, no_unique_index_on_idempotency_key_of_executions)
{
	/* Such an index would have to include "startedAt" (DEFAULT now()) and
	 * so could never conflict; "IdempotencyKeys" is the guarantee.  Any
	 * relation of the partition tree counts. */
	PGresult *r = th_query(
		conn,
		"SELECT pg_get_indexdef(x.\"indexrelid\")"
		"  FROM pg_partition_tree('\"WorkflowExecutions\"') t"
		"  JOIN pg_index x ON x.\"indrelid\" = t.\"relid\""
		"  JOIN pg_attribute a ON a.\"attrelid\" = x.\"indrelid\""
		"   AND a.\"attnum\" = ANY (x.\"indkey\")"
		" WHERE x.\"indisunique\" AND a.\"attname\" = 'idempotencyKey'",
		0, NULL);
	cr_assert_eq(PQntuples(r), 0, "a unique index that never conflicts: %s",
		     PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);

	/* The primary key that does constrain. */
	cr_assert_eq(
		th_int(conn,
		       "SELECT count(*) FROM pg_constraint"
		       " WHERE \"conrelid\" = '\"IdempotencyKeys\"'::regclass"
		       "   AND \"contype\" = 'p'"
		       "   AND pg_get_constraintdef(\"oid\") ="
		       "       'PRIMARY KEY (\"namespaceId\", key)'",
		       0, NULL),
		1);
	char *kind =
		th_value(conn,
			 "SELECT \"relkind\"::text FROM pg_class"
			 " WHERE \"oid\" = '\"IdempotencyKeys\"'::regclass",
			 0, NULL);
	cr_assert_str_eq(kind, "r", "IdempotencyKeys must not be partitioned");
	free(kind);
}

/* ----------------------------------------------------------- primary keys */

static const struct {
	const char *table;
	const char *def; /* pg_get_constraintdef() */
} primary_keys[] = {
	{"WorkflowExecutions", "PRIMARY KEY (id, \"startedAt\")"},
	{"IdempotencyKeys", "PRIMARY KEY (\"namespaceId\", key)"},
	{"TaskExecutions", "PRIMARY KEY (\"workflowId\", id)"},
	{"TaskQueues", "PRIMARY KEY (\"queueName\", id)"},
	{"DecideQueues", "PRIMARY KEY (\"workflowId\")"},
	{"Timers", "PRIMARY KEY (id, \"fireAt\")"},
	{"OutboxEvents", "PRIMARY KEY (id)"},
	{"WorkflowEvents", "PRIMARY KEY (\"workflowId\", seq, at)"},
	{"TaskLogs", "PRIMARY KEY (\"taskId\", seq, \"createdAt\")"},
	{"Semaphores", "PRIMARY KEY (\"namespaceId\", name)"},
	{"SemaphoreHolders", "PRIMARY KEY (\"namespaceId\", name, \"taskId\")"},
	{"RateLimitBuckets",
	 "PRIMARY KEY (\"namespaceId\", \"queueName\", \"windowStart\")"},
	{"TaskOutputCache",
	 "PRIMARY KEY (\"namespaceId\", \"taskDefName\", key)"},
	{"WorkflowDefinitions", "PRIMARY KEY (\"namespaceId\", name, version)"},
	{"Namespaces", "PRIMARY KEY (id)"},
	{"TaskDefinitions", "PRIMARY KEY (id)"},
};

Test(schema, primary_keys)
{
	for (size_t i = 0; i < sizeof(primary_keys) / sizeof(primary_keys[0]);
	     i++) {
		const char *params[] = {primary_keys[i].table};
		char *def = th_value(
			conn,
			"SELECT coalesce(string_agg(pg_get_constraintdef(\"oid\"),"
			"                           '; '), '(none)')"
			"  FROM pg_constraint"
			" WHERE \"conrelid\" = to_regclass(format('%I', $1::text))"
			"   AND \"contype\" = 'p'",
			1, params);
		cr_expect_str_eq(def, primary_keys[i].def, "%s: %s",
				 primary_keys[i].table, def);
		free(def);
	}
}

/* --------------------------------------------------------------- columns */

static const struct {
	const char *table;
	const char *column;
	const char *type;     /* format_type() */
	const char *default_; /* pg_get_expr() of the default, NULL = none */
} columns[] = {
	{"WorkflowExecutions", "id", "uuid", "uuidv7()"},
	{"WorkflowExecutions", "startedAt", "timestamp with time zone",
	 "now()"},
	{"WorkflowExecutions", "version", "bigint", "0"},
	{"WorkflowExecutions", "idempotencyKey", "text", NULL},
	{"TaskExecutions", "id", "uuid", "uuidv7()"},
	{"TaskExecutions", "attempt", "integer", "0"},
	{"TaskExecutions", "deciderSeenAt", "timestamp with time zone", NULL},
	{"TaskQueues", "id", "bigint",
	 "nextval('\"TaskQueues_id_seq\"'::regclass)"},
	{"TaskQueues", "taskType", "text", NULL},
	{"DecideQueues", "reason", "text", NULL},
	{"WorkflowEvents", "seq", "bigint", NULL},
	{"WorkflowEvents", "xid", "xid8", "pg_current_xact_id()"},
	{"OutboxEvents", "id", "bigint",
	 "nextval('\"OutboxEvents_id_seq\"'::regclass)"},
	{"OutboxEvents", "attempts", "integer", "0"},
	{"OutboxEvents", "nextAttemptAt", "timestamp with time zone", "now()"},
	{"OutboxEvents", "lastError", "text", NULL},
	{"OutboxEvents", "deadLetteredAt", "timestamp with time zone", NULL},
	/* The fields the ORM once dropped on write. */
	{"TaskDefinitions", "inputKeys", "text[]", "'{}'::text[]"},
	{"TaskDefinitions", "outputKeys", "text[]", "'{}'::text[]"},
	{"TaskDefinitions", "ownerEmail", "text", NULL},
	{"TaskDefinitions", "secretOutputFields", "text[]", "'{}'::text[]"},
};

Test(schema, columns_called_out_by_the_specification)
{
	for (size_t i = 0; i < sizeof(columns) / sizeof(columns[0]); i++) {
		const char *params[] = {columns[i].table, columns[i].column};
		char *got = th_value(
			conn,
			"SELECT coalesce(max(format_type(a.\"atttypid\","
			"                                a.\"atttypmod\") || '|' ||"
			"       coalesce(pg_get_expr(d.\"adbin\", d.\"adrelid\"),"
			"                '(none)')), '(missing)')"
			"  FROM pg_attribute a"
			"  LEFT JOIN pg_attrdef d ON d.\"adrelid\" = a.\"attrelid\""
			"   AND d.\"adnum\" = a.\"attnum\""
			" WHERE a.\"attrelid\" = to_regclass(format('%I', $1::text))"
			"   AND a.\"attname\" = $2 AND NOT a.\"attisdropped\"",
			2, params);
		char want[256];
		snprintf(want, sizeof(want), "%s|%s", columns[i].type,
			 columns[i].default_ ? columns[i].default_ : "(none)");
		cr_expect_str_eq(got, want, "%s.%s: %s", columns[i].table,
				 columns[i].column, got);
		free(got);
	}
}

Test(schema, default_namespace_and_quoted_names)
{
	cr_assert_eq(th_int(conn,
			    "SELECT count(*) FROM \"Namespaces\""
			    " WHERE \"name\" = 'default'",
			    0, NULL),
		     1, "the \"default\" namespace is missing");

	/* An unquoted identifier folds to lower case: every relation of the
	 * schema is PascalCase, so an all-lower-case one is a quoting slip. */
	PGresult *r =
		th_query(conn,
			 "SELECT \"relname\" FROM pg_class"
			 " WHERE \"relnamespace\" = 'public'::regnamespace"
			 "   AND \"relname\" = lower(\"relname\")",
			 0, NULL);
	cr_assert_eq(PQntuples(r), 0, "unquoted relation name: %s",
		     PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
}

/* -------------------------------------------------------------- storage */

Test(schema, hot_tables_have_autovacuum_tuning)
{
	static const char *const want[] = {
		"autovacuum_vacuum_scale_factor=0.01",
		"autovacuum_vacuum_cost_limit=2000",
		"fillfactor=70",
	};
	PGresult *r = th_query(
		conn,
		"SELECT c.\"relname\", coalesce(array_to_string(c.\"reloptions\","
		"       ','), '')"
		"  FROM pg_class c"
		" WHERE c.\"oid\" IN (SELECT i.\"inhrelid\" FROM pg_inherits i"
		"                    WHERE i.\"inhparent\" = '\"TaskQueues\"'::regclass)"
		"    OR c.\"oid\" IN ('\"DecideQueues\"'::regclass,"
		"                   '\"RateLimitBuckets\"'::regclass)"
		" ORDER BY 1",
		0, NULL);
	cr_assert_eq(PQntuples(r), 8 + 2);
	for (int row = 0; row < PQntuples(r); row++) {
		const char *opts = PQgetvalue(r, row, 1);
		for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			char padded[512], needle[128];
			snprintf(padded, sizeof(padded), ",%s,", opts);
			snprintf(needle, sizeof(needle), ",%s,", want[k]);
			cr_expect(strstr(padded, needle),
				  "%s lacks %s (has %s)", PQgetvalue(r, row, 0),
				  want[k], opts);
		}
	}
	PQclear(r);
}

/* -------------------------------------------------------------- trigger */

/* pg_trigger.tgtype bits (src/include/catalog/pg_trigger.h). */
enum {
	TG_ROW = 1 << 0,
	TG_BEFORE = 1 << 1,
	TG_INSERT = 1 << 2,
	TG_DELETE = 1 << 3,
	TG_UPDATE = 1 << 4,
	TG_TRUNCATE = 1 << 5,
	TG_INSTEAD = 1 << 6,
};

static long long
partition_count(void)
{
	return th_int(conn,
		      "SELECT count(*) FROM pg_inherits"
		      " WHERE \"inhparent\" = '\"WorkflowEvents\"'::regclass",
		      0, NULL);
}

static long long
clone_count(const char *parent_trigger)
{
	const char *params[] = {parent_trigger};
	return th_int(conn,
		      "SELECT count(*) FROM pg_trigger g"
		      "  JOIN pg_inherits i ON i.\"inhrelid\" = g.\"tgrelid\""
		      " WHERE i.\"inhparent\" = '\"WorkflowEvents\"'::regclass"
		      "   AND g.\"tgparentid\" = $1::oid"
		      "   AND g.\"tgenabled\" = 'O'",
		      1, params);
}

Test(schema, workflow_events_trigger_is_row_level_on_the_parent)
{
	PGresult *r = th_query(
		conn,
		"SELECT g.\"oid\", g.\"tgtype\", g.\"tgenabled\"::text,"
		"       p.\"prosrc\""
		"  FROM pg_trigger g JOIN pg_proc p ON p.\"oid\" = g.\"tgfoid\""
		" WHERE g.\"tgrelid\" = '\"WorkflowEvents\"'::regclass"
		"   AND NOT g.\"tgisinternal\" AND g.\"tgparentid\" = 0"
		"   AND g.\"tgname\" = 'WorkflowEvents_notify'",
		0, NULL);
	cr_assert_eq(PQntuples(r), 1,
		     "%d notify triggers on the WorkflowEvents parent",
		     PQntuples(r));
	char *oid = strdup(PQgetvalue(r, 0, 0));
	int type = atoi(PQgetvalue(r, 0, 1));
	cr_assert(type & TG_ROW, "the trigger is statement-level: NEW is "
				 "unassigned and the payload empty");
	cr_assert(!(type & (TG_BEFORE | TG_INSTEAD)), "not an AFTER trigger");
	cr_assert_eq(type & (TG_INSERT | TG_DELETE | TG_UPDATE | TG_TRUNCATE),
		     TG_INSERT, "fires on other events than INSERT (%d)", type);
	cr_assert_str_eq(PQgetvalue(r, 0, 2), "O", "the trigger is disabled");
	cr_assert(strstr(PQgetvalue(r, 0, 3),
			 "pg_notify('node_flow_workflow_events'"),
		  "the trigger function does not notify the channel:\n%s",
		  PQgetvalue(r, 0, 3));
	PQclear(r);

	/* Cloned onto every partition, DEFAULT included ... */
	long long parts = partition_count();
	cr_assert_geq(parts, 2);
	cr_assert_eq(clone_count(oid), parts);

	/* ... and onto a partition created later, which a per-partition
	 * trigger would silently miss. */
	th_exec(conn,
		"SELECT \"nf_create_range_partition\"('WorkflowEvents',"
		" 'WorkflowEvents_p2999_01', '2999-01-01', '2999-02-01')");
	cr_assert_eq(partition_count(), parts + 1);
	cr_assert_eq(clone_count(oid), parts + 1);
	free(oid);

	/* It fires: a committed insert notifies "workflowId:seq" (while a
	 * process holds a live stream, migration 0008). */
	th_exec(conn, "INSERT INTO \"LiveStreamHolders\" (\"processId\","
		      " \"streams\", \"expiresAt\")"
		      " VALUES (uuidv7(), 1, now() + interval '1 hour')");
	th_exec(conn, "LISTEN \"node_flow_workflow_events\"");
	char *wf = th_value(conn, "SELECT uuidv7()::text", 0, NULL);
	const char *params[] = {wf};
	PQclear(th_query(conn,
			 "INSERT INTO \"WorkflowEvents\""
			 " (\"workflowId\", \"namespaceId\", \"seq\", \"type\","
			 "  \"at\")"
			 " VALUES ($1, uuidv7(), 7, 'test', '2999-01-15')",
			 1, params));
	cr_assert(PQconsumeInput(conn));
	PGnotify *n = PQnotifies(conn);
	cr_assert(n, "no notification after the insert committed");
	char want[128];
	snprintf(want, sizeof(want), "%s:7", wf);
	cr_assert_str_eq(n->relname, "node_flow_workflow_events");
	cr_assert_str_eq(n->extra, want);
	PQfreemem(n);
	free(wf);
}

/* Migration 0007: status changes reach "OutboxEvents" through one
 * statement-level trigger on the parent, its transition table holding the
 * rows of every partition, a partition created later included. */
Test(schema, workflow_events_outbox_trigger_is_statement_level_on_the_parent)
{
	PGresult *r = th_query(
		conn,
		"SELECT g.\"tgtype\", (g.\"tgnewtable\" IS NOT NULL)::text"
		"  FROM pg_trigger g"
		" WHERE g.\"tgrelid\" = '\"WorkflowEvents\"'::regclass"
		"   AND g.\"tgname\" = 'WorkflowEvents_outbox'",
		0, NULL);
	cr_assert_eq(PQntuples(r), 1, "no outbox trigger on the parent");
	int type = atoi(PQgetvalue(r, 0, 0));
	cr_assert(!(type & TG_ROW), "the outbox trigger is row-level");
	cr_assert(!(type & (TG_BEFORE | TG_INSTEAD)), "not an AFTER trigger");
	cr_assert_str_eq(PQgetvalue(r, 0, 1), "true", "no transition table");
	PQclear(r);

	th_exec(conn,
		"SELECT \"nf_create_range_partition\"('WorkflowEvents',"
		" 'WorkflowEvents_p2999_03', '2999-03-01', '2999-04-01')");
	char *wf = th_value(conn, "SELECT uuidv7()::text", 0, NULL);
	const char *params[] = {wf};
	PQclear(th_query(
		conn,
		"WITH n AS (SELECT \"id\" FROM \"Namespaces\""
		"   WHERE \"name\" = 'default'),"
		" x AS (INSERT INTO \"WorkflowExecutions\" (\"id\","
		"   \"namespaceId\", \"defName\", \"defVersion\")"
		"   SELECT $1::uuid, n.\"id\", 'heard', 1 FROM n)"
		" INSERT INTO \"StatusListeners\" (\"namespaceId\","
		" \"workflowName\", \"sink\", \"eventTypes\")"
		" SELECT n.\"id\", 'heard', 'hooks', '{WORKFLOW_COMPLETED}'"
		" FROM n",
		1, params));
	/* Unheard types write nothing; the heard one, one row per event. */
	PQclear(th_query(
		conn,
		"INSERT INTO \"WorkflowEvents\" (\"workflowId\","
		" \"namespaceId\", \"seq\", \"type\", \"at\")"
		" SELECT $1::uuid, \"id\", s, t, '2999-03-15'"
		" FROM \"Namespaces\", (VALUES (1, 'WORKFLOW_STARTED'),"
		" (2, 'WORKFLOW_COMPLETED')) v(s, t)"
		" WHERE \"name\" = 'default'",
		1, params));
	cr_assert_eq(th_int(conn,
			    "SELECT count(*) FROM \"OutboxEvents\""
			    " WHERE \"workflowId\" = $1::uuid"
			    " AND \"eventType\" = 'WORKFLOW_COMPLETED'"
			    " AND \"sink\" = 'hooks'"
			    " AND \"payload\"->>'workflowName' = 'heard'",
			    1, params),
		     1);
	cr_assert_eq(th_int(conn,
			    "SELECT count(*) FROM \"OutboxEvents\""
			    " WHERE \"workflowId\" = $1::uuid",
			    1, params),
		     1);
	free(wf);
}
