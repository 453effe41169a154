/*
 * dsl — the definition language: Conductor's TaskDef and WorkflowDef JSON
 * parsed into the structures the engine runs, with validation errors that
 * name the JSON path of every offending field.
 *
 * Unknown fields are ignored (definitions written for Conductor carry many).
 * Validation collects every problem it finds rather than stopping at the
 * first, so a user fixes a definition in one round trip.  What validation
 * checks, beyond types and ranges:
 *   - every task has `name` and `taskReferenceName`; reference names are
 *     unique across the whole definition (nested branches included);
 *   - `type` is a known task kind (task_kind.h), default SIMPLE;
 *   - every `${ref...}` expression in a task's inputParameters, and in the
 *     workflow's outputParameters, names `workflow` or a task reference
 *     that exists in the definition (expr.h for the syntax);
 *   - `schemaVersion`, when present, is 2;
 *   - worker tasks need a registered task definition unless they carry an
 *     inline `taskDefinition`: the parser cannot see the database, so it
 *     lists the names to check in wf_def.required_task_defs and the caller
 *     reports each missing one with dsl_error_missing_task_def().
 *
 * Threads: any.  Ownership: a wf_def owns everything it points to
 * (wf_def_free); `raw` keeps a reference to the JSON it was parsed from.
 * Failure: parse functions return false and append to errs (dsl_errors_free).
 */
#ifndef NF_ENGINE_DSL_H
#define NF_ENGINE_DSL_H

#include "engine/task_kind.h"
#include "store/definitions_repo.h"
#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct dsl_error {
	char *path;    /* "$.tasks[2].taskReferenceName" */
	char *message; /* "is required" */
};

struct dsl_errors {
	struct dsl_error *items;
	size_t n;
};

void dsl_errors_add(struct dsl_errors *errs, const char *path, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4)));
void dsl_errors_free(struct dsl_errors *errs);
/* [{"path":…,"message":…}, …] */
json_t *dsl_errors_json(const struct dsl_errors *errs);

struct wf_task;

struct wf_task_list {
	struct wf_task *items;
	size_t n;
	/* The operator whose nested list this is (NULL: the top level), and
	 * the case it is for (decisionCases' key; NULL for defaultCase and
	 * the lists of other operators). */
	const struct wf_task *owner;
	char *key;
};

struct wf_task {
	char *name;
	char *ref;  /* taskReferenceName */
	char *type; /* as written, default "SIMPLE" */
	const struct task_kind *kind;
	char *path; /* JSON path of this task in the definition, for errors */
	json_t *input_parameters; /* object; {} when absent */
	bool optional;
	/* asyncComplete: a system task that has done its work stays
	 * IN_PROGRESS until completed or failed through the API. */
	bool async_complete;
	int start_delay_seconds;
	int retry_count;             /* -1: the task definition's */
	char *semaphore;             /* overrides the definition's; NULL */
	struct task_def *inline_def; /* from `taskDefinition`, or NULL */
	/* Task references its input expressions read (not "workflow"). */
	char **refs_used;
	size_t n_refs_used;
	/* Operators' nested lists (task_kind.h, nest): decisionCases in
	 * order then defaultCase (key NULL), forkTasks, or loopOver. */
	struct wf_task_list *branches;
	size_t n_branches;
	/* References whose latest attempt the kind reads when it runs
	 * (joinOn, a loop's body…), set by its validate function. */
	char **reads;
	size_t n_reads;
	/* inputParameters are data, not templates (a dynamic fork's task). */
	bool literal_input;
	size_t index;                    /* position in its list */
	const struct wf_task_list *list; /* the list it belongs to */
	json_t *raw; /* the WorkflowTask object as written */
	/* cacheConfig: the output cache key (a string template resolved like
	 * inputParameters) and its time to live; NULL when not cached. */
	char *cache_key;
	int cache_ttl_seconds;
};

struct wf_def {
	char *name;
	int version;
	char *description;
	struct wf_task_list tasks;
	json_t *input_parameters;  /* documentation: array of names */
	json_t *output_parameters; /* object; NULL = the last task's output */
	json_t *input_template;    /* object; {} when absent */
	json_t *variables;         /* initial variables; {} when absent */
	char *failure_workflow;
	int failure_workflow_version;       /* 0 = latest */
	int64_t timeout_seconds;            /* 0 = none */
	enum timeout_policy timeout_policy; /* TIME_OUT_WF or ALERT_ONLY */
	bool restartable;
	char *owner_email;
	/* Task reference names, sorted, for dsl_find_task(). */
	struct wf_task **by_ref;
	size_t n_tasks;
	/* Names of worker tasks that need a registered definition. */
	char **required_task_defs;
	size_t n_required_task_defs;
	/* Whether a task may start a child workflow: a SUB_WORKFLOW, or a
	 * DYNAMIC or FORK_JOIN_DYNAMIC task that may turn out to be one. */
	bool starts_children;
	/* Task references the workflow's outputParameters read. */
	char **refs_used;
	size_t n_refs_used;
	json_t *raw; /* the whole definition as registered */
};

/* Parses and validates a TaskDef document into d (which it initialises). */
bool dsl_task_def_parse(const json_t *doc, struct task_def *d,
			struct dsl_errors *errs);
/* The TaskDef as Conductor-shaped JSON (camelCase, its field names). */
json_t *dsl_task_def_json(const struct task_def *d);
/* A registered WorkflowDef as Conductor-shaped JSON: the stored definition
 * with its name, version, createTime and updateTime (epoch ms). */
json_t *dsl_workflow_def_json(const struct workflow_def_row *r);

/* Parses and validates a WorkflowDef; *out is NULL on failure. */
bool dsl_workflow_parse(const json_t *doc, struct wf_def **out,
			struct dsl_errors *errs);
/* Like dsl_workflow_parse, but *out is set (wf_def_free) even when the
 * definition is invalid, holding what did parse: a caller can then add the
 * problems only it can find (dsl_error_missing_task_def) to the same
 * answer.  Returns whether the definition is valid. */
bool dsl_workflow_parse_partial(const json_t *doc, struct wf_def **out,
				struct dsl_errors *errs);
void wf_def_free(struct wf_def *def);
/* The task with that reference name, or NULL (binary search). */
const struct wf_task *dsl_find_task(const struct wf_def *def, const char *ref);
/* Adds, for each worker task whose definition name is in missing (a JSON
 * array of names), the error "task definition X is not registered" at that
 * task's path. */
void dsl_error_missing_task_def(const struct wf_def *def, const json_t *missing,
				struct dsl_errors *errs);
/* Tasks the server runs itself (every kind but the worker ones) take a
 * registered task definition of their name, but are never leased through
 * the flow-control gate, so that definition must not have a semaphore, a
 * concurrentExecLimit or a rate limit.  The names of def's such tasks
 * without an inline taskDefinition: a new JSON array, each name once. */
json_t *dsl_self_run_task_names(const struct wf_def *def);
/* Adds, for each such task whose name is a member of controls (a JSON
 * object: task definition name to its settings, as
 * defs_task_flow_controls answers), an error at the task's path + ".name". */
void dsl_error_self_run_flow_control(const struct wf_def *def,
				     const json_t *controls,
				     struct dsl_errors *errs);
/* Names the first flow-control setting of controls (as above) into out:
 * "semaphore s", "concurrentExecLimit 2" or "rateLimitPerFrequency 5". */
void dsl_flow_control_describe(const json_t *controls, char *out, size_t size);
/* The first such task of def named name (document order), or NULL. */
const struct wf_task *dsl_find_self_run(const struct wf_def *def,
					const char *name);

#endif
