/*
 * definitions_repo — task and workflow definitions in "TaskDefinitions" and
 * "WorkflowDefinitions".
 *
 * struct task_def is the row: each Conductor TaskDef field that matters is a
 * column, and the writes name every column explicitly, so a field that has
 * no column cannot be accepted and silently dropped.  Workflow definitions
 * are stored whole (jsonb) under (namespace, name, version).
 *
 * Threads: callers bring their own connection.  Ownership: a task_def owns
 * its strings and JSON (task_def_free); lists likewise.  Failure: false with
 * e set; ERR_NOT_FOUND for a missing name or version; ERR_CONFLICT when a
 * workflow version exists and overwrite was not asked for.
 */
#ifndef NF_STORE_DEFINITIONS_REPO_H
#define NF_STORE_DEFINITIONS_REPO_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct db;

enum retry_logic {
	RETRY_FIXED,
	RETRY_EXPONENTIAL_BACKOFF,
	RETRY_LINEAR_BACKOFF
};
enum timeout_policy { TIMEOUT_RETRY, TIMEOUT_TIME_OUT_WF, TIMEOUT_ALERT_ONLY };

struct task_def {
	char *name;
	char *description; /* NULL when absent */
	int retry_count;
	enum retry_logic retry_logic;
	int retry_delay_seconds;
	int backoff_scale_factor;
	int max_retry_delay_seconds; /* 0 = no cap */
	int backoff_jitter_ms;
	int64_t timeout_seconds; /* 0 = none */
	enum timeout_policy timeout_policy;
	int64_t response_timeout_seconds;
	int poll_timeout_seconds;         /* -1 = none */
	int64_t total_timeout_seconds;    /* 0 = none */
	int concurrent_exec_limit;        /* -1 = unlimited */
	int rate_limit_per_frequency;     /* -1 = none */
	int rate_limit_frequency_seconds; /* -1 = none */
	json_t *input_keys;               /* array of strings */
	json_t *output_keys;              /* array of strings */
	json_t *input_template;           /* object */
	char *owner_email;
	json_t *secret_output_fields; /* array of strings */
	char *isolation_group_id;
	char *execution_name_space;
	char *semaphore;
	json_t *cache_config; /* NULL when absent */
	json_t *input_schema;
	json_t *output_schema;
	bool enforce_schema;
	/* Set when read back: ISO 8601 in UTC with milliseconds, as
	 * PostgreSQL renders it ("2026-01-02T03:04:05.678Z"). */
	char *created_at;
	char *updated_at;
};

/* The defaults of Conductor's TaskDef (retryCount 3, FIXED, 60 s, …). */
void task_def_init(struct task_def *d);
void task_def_free(struct task_def *d);

/* The enums' Conductor spellings ("FIXED", "TIME_OUT_WF", …), and back;
 * the parsers return false for an unknown spelling. */
const char *retry_logic_name(enum retry_logic l);
bool retry_logic_parse(const char *s, enum retry_logic *out);
const char *timeout_policy_name(enum timeout_policy p);
bool timeout_policy_parse(const char *s, enum timeout_policy *out);

/* Namespace id by name; ERR_NOT_FOUND when it does not exist. */
bool defs_namespace_id(struct db *db, const char *ns, char id_out[37],
		       struct err *e);
/* Creates a namespace if missing; *created tells whether it was new. */
bool defs_namespace_ensure(struct db *db, const char *ns, bool *created,
			   char id_out[37], struct err *e);

/* Inserts or replaces (by name); *created tells which. */
bool defs_task_put(struct db *db, const char *ns_id, const struct task_def *d,
		   bool *created, struct err *e);
bool defs_task_get(struct db *db, const char *ns_id, const char *name,
		   struct task_def *out, struct err *e);
/* All, ordered by name; *out is an array of n defs (free each, then it). */
bool defs_task_list(struct db *db, const char *ns_id, struct task_def **out,
		    size_t *n, struct err *e);
bool defs_task_delete(struct db *db, const char *ns_id, const char *name,
		      struct err *e);
/* Which of names (a JSON array of strings) have no definition: returns a new
 * array of the missing ones. */
bool defs_task_missing(struct db *db, const char *ns_id, const json_t *names,
		       json_t **missing, struct err *e);
/* Of names (a JSON array of strings), those registered with flow control:
 * a new object, name to an object of the settings it has among "semaphore"
 * (a string), "concurrentExecLimit" and "rateLimitPerFrequency" (integers
 * above 0). */
bool defs_task_flow_controls(struct db *db, const char *ns_id,
			     const json_t *names, json_t **controls,
			     struct err *e);
/* The registered workflow definitions (every version) that may have a task
 * named name (an object with that "name" and a "taskReferenceName"
 * anywhere in it): a new array of their stored documents, each with its
 * "name" and "version". */
bool defs_workflows_naming_task(struct db *db, const char *ns_id,
				const char *name, json_t **defs, struct err *e);

struct workflow_def_row {
	char *name;
	int version;
	json_t *definition; /* the WorkflowDef as registered */
	char *created_at;   /* as in task_def */
	char *updated_at;
};

void workflow_def_row_free(struct workflow_def_row *r);

/* Stores a version.  With overwrite false an existing (name, version) is
 * ERR_CONFLICT. */
bool defs_workflow_put(struct db *db, const char *ns_id, const char *name,
		       int version, const json_t *definition, bool overwrite,
		       bool *created, struct err *e);
/* version 0 means the latest. */
bool defs_workflow_get(struct db *db, const char *ns_id, const char *name,
		       int version, struct workflow_def_row *out,
		       struct err *e);
/* The latest version of every name (all versions when all_versions). */
bool defs_workflow_list(struct db *db, const char *ns_id, bool all_versions,
			struct workflow_def_row **out, size_t *n,
			struct err *e);
/* version 0 deletes every version of the name. */
bool defs_workflow_delete(struct db *db, const char *ns_id, const char *name,
			  int version, struct err *e);

#endif
