#include "store/definitions_repo.h"

#include "store/sql.h"

#include "util/json.h"
#include "util/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ task_def */

void
task_def_init(struct task_def *d)
{
	memset(d, 0, sizeof(*d));
	d->retry_count = 3;
	d->retry_logic = RETRY_FIXED;
	d->retry_delay_seconds = 60;
	d->backoff_scale_factor = 1;
	d->max_retry_delay_seconds = 0;
	d->backoff_jitter_ms = 0;
	d->timeout_seconds = 0;
	d->timeout_policy = TIMEOUT_TIME_OUT_WF;
	d->response_timeout_seconds = 3600;
	d->poll_timeout_seconds = -1;
	d->total_timeout_seconds = 0;
	d->concurrent_exec_limit = -1;
	d->rate_limit_per_frequency = -1;
	d->rate_limit_frequency_seconds = -1;
	d->input_keys = json_array();
	d->output_keys = json_array();
	d->input_template = json_object();
	d->secret_output_fields = json_array();
	d->enforce_schema = false;
}

void
task_def_free(struct task_def *d)
{
	free(d->name);
	free(d->description);
	free(d->owner_email);
	free(d->isolation_group_id);
	free(d->execution_name_space);
	free(d->semaphore);
	free(d->created_at);
	free(d->updated_at);
	json_decref(d->input_keys);
	json_decref(d->output_keys);
	json_decref(d->input_template);
	json_decref(d->secret_output_fields);
	json_decref(d->cache_config);
	json_decref(d->input_schema);
	json_decref(d->output_schema);
	memset(d, 0, sizeof(*d));
}

static const char *const retry_logic_names[] = {
	[RETRY_FIXED] = "FIXED",
	[RETRY_EXPONENTIAL_BACKOFF] = "EXPONENTIAL_BACKOFF",
	[RETRY_LINEAR_BACKOFF] = "LINEAR_BACKOFF",
};

static const char *const timeout_policy_names[] = {
	[TIMEOUT_RETRY] = "RETRY",
	[TIMEOUT_TIME_OUT_WF] = "TIME_OUT_WF",
	[TIMEOUT_ALERT_ONLY] = "ALERT_ONLY",
};

const char *
retry_logic_name(enum retry_logic l)
{
	return (unsigned)l < ARRAY_LEN(retry_logic_names) ? retry_logic_names[l]
							  : "FIXED";
}

bool
retry_logic_parse(const char *s, enum retry_logic *out)
{
	for (size_t i = 0; i < ARRAY_LEN(retry_logic_names); i++) {
		if (strcmp(retry_logic_names[i], s) == 0) {
			*out = (enum retry_logic)i;
			return true;
		}
	}
	return false;
}

const char *
timeout_policy_name(enum timeout_policy p)
{
	return (unsigned)p < ARRAY_LEN(timeout_policy_names)
		       ? timeout_policy_names[p]
		       : "TIME_OUT_WF";
}

bool
timeout_policy_parse(const char *s, enum timeout_policy *out)
{
	for (size_t i = 0; i < ARRAY_LEN(timeout_policy_names); i++) {
		if (strcmp(timeout_policy_names[i], s) == 0) {
			*out = (enum timeout_policy)i;
			return true;
		}
	}
	return false;
}

/* ------------------------------------------------------------- helpers */

/* Timestamps leave the database as ISO 8601 UTC text, whatever the
 * session's TimeZone and DateStyle. */
#define ISO_UTC(col)                          \
	"to_char(" col " AT TIME ZONE 'UTC'," \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

static char *
opt_text(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL
					  : xstrdup(PQgetvalue(res, row, col));
}

static int
opt_int(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col)
		       ? -1
		       : (int)strtol(PQgetvalue(res, row, col), NULL, 10);
}

/* A jsonb (or to_jsonb) column; NULL when SQL NULL.  The database wrote
 * the text, so it parses. */
static json_t *
opt_json(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return NULL;
	const char *text = PQgetvalue(res, row, col);
	json_t *v = json_loadb(text, strlen(text), JSON_DECODE_ANY, NULL);
	return v ? v : json_null();
}

static void
set_json(json_t **slot, json_t *v, json_t *(*fallback)(void))
{
	json_decref(*slot);
	*slot = v ? v : fallback();
}

/* Whether the command touched any row. */
static bool
touched(const PGresult *res)
{
	const char *n = PQcmdTuples((PGresult *)res);
	return n && *n && strcmp(n, "0") != 0;
}

/* ---------------------------------------------------------- namespaces */

DB_STMT(defs_namespace_select,
	"SELECT \"id\"::text FROM \"Namespaces\" WHERE \"name\" = $1");

bool
defs_namespace_id(struct db *db, const char *ns, char id_out[37], struct err *e)
{
	const char *params[] = {ns};
	PGresult *res = db_exec(db, &defs_namespace_select, 1, params, e);
	if (!res)
		return false;
	bool found = PQntuples(res) == 1;
	if (found)
		snprintf(id_out, 37, "%s", PQgetvalue(res, 0, 0));
	else
		err_set(e, ERR_NOT_FOUND, "namespace \"%.80s\" does not exist",
			ns);
	PQclear(res);
	return found;
}

DB_STMT(defs_namespace_insert,
	"INSERT INTO \"Namespaces\" (\"name\") VALUES ($1)"
	" ON CONFLICT (\"name\") DO NOTHING RETURNING \"id\"::text");

bool
defs_namespace_ensure(struct db *db, const char *ns, bool *created,
		      char id_out[37], struct err *e)
{
	const char *params[] = {ns};
	PGresult *res = db_exec(db, &defs_namespace_insert, 1, params, e);
	if (!res)
		return false;
	*created = PQntuples(res) == 1;
	if (*created)
		snprintf(id_out, 37, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	/* A namespace is never deleted, so one that conflicted is there to
	 * be read back. */
	return *created || defs_namespace_id(db, ns, id_out, e);
}

/* ----------------------------------------------------- task definitions */

/*
 * Every column a task definition writes, by name and in parameter order.
 * A column missing here is a field that would be accepted by the parser and
 * dropped on write; the tests round-trip every field.
 */
DB_STMT(defs_task_upsert,
	"INSERT INTO \"TaskDefinitions\" ("
	" \"namespaceId\", \"name\", \"description\", \"retryCount\","
	" \"retryLogic\", \"retryDelaySeconds\", \"backoffScaleFactor\","
	" \"maxRetryDelaySeconds\", \"backoffJitterMs\", \"timeoutSeconds\","
	" \"timeoutPolicy\", \"responseTimeoutSeconds\","
	" \"pollTimeoutSeconds\", \"totalTimeoutSeconds\","
	" \"concurrentExecLimit\", \"rateLimitPerFrequency\","
	" \"rateLimitFrequencyInSeconds\", \"inputKeys\", \"outputKeys\","
	" \"inputTemplate\", \"ownerEmail\", \"secretOutputFields\","
	" \"isolationGroupId\", \"executionNameSpace\", \"semaphore\","
	" \"cacheConfig\", \"inputSchema\", \"outputSchema\","
	" \"enforceSchema\")"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
	" $14, $15, $16, $17,"
	" ARRAY(SELECT jsonb_array_elements_text($18::jsonb)),"
	" ARRAY(SELECT jsonb_array_elements_text($19::jsonb)),"
	" $20::jsonb, $21,"
	" ARRAY(SELECT jsonb_array_elements_text($22::jsonb)),"
	" $23, $24, $25, $26::jsonb, $27::jsonb, $28::jsonb, $29)"
	" ON CONFLICT (\"namespaceId\", \"name\") DO UPDATE SET"
	" \"description\" = EXCLUDED.\"description\","
	" \"retryCount\" = EXCLUDED.\"retryCount\","
	" \"retryLogic\" = EXCLUDED.\"retryLogic\","
	" \"retryDelaySeconds\" = EXCLUDED.\"retryDelaySeconds\","
	" \"backoffScaleFactor\" = EXCLUDED.\"backoffScaleFactor\","
	" \"maxRetryDelaySeconds\" = EXCLUDED.\"maxRetryDelaySeconds\","
	" \"backoffJitterMs\" = EXCLUDED.\"backoffJitterMs\","
	" \"timeoutSeconds\" = EXCLUDED.\"timeoutSeconds\","
	" \"timeoutPolicy\" = EXCLUDED.\"timeoutPolicy\","
	" \"responseTimeoutSeconds\" = EXCLUDED.\"responseTimeoutSeconds\","
	" \"pollTimeoutSeconds\" = EXCLUDED.\"pollTimeoutSeconds\","
	" \"totalTimeoutSeconds\" = EXCLUDED.\"totalTimeoutSeconds\","
	" \"concurrentExecLimit\" = EXCLUDED.\"concurrentExecLimit\","
	" \"rateLimitPerFrequency\" = EXCLUDED.\"rateLimitPerFrequency\","
	" \"rateLimitFrequencyInSeconds\" ="
	" EXCLUDED.\"rateLimitFrequencyInSeconds\","
	" \"inputKeys\" = EXCLUDED.\"inputKeys\","
	" \"outputKeys\" = EXCLUDED.\"outputKeys\","
	" \"inputTemplate\" = EXCLUDED.\"inputTemplate\","
	" \"ownerEmail\" = EXCLUDED.\"ownerEmail\","
	" \"secretOutputFields\" = EXCLUDED.\"secretOutputFields\","
	" \"isolationGroupId\" = EXCLUDED.\"isolationGroupId\","
	" \"executionNameSpace\" = EXCLUDED.\"executionNameSpace\","
	" \"semaphore\" = EXCLUDED.\"semaphore\","
	" \"cacheConfig\" = EXCLUDED.\"cacheConfig\","
	" \"inputSchema\" = EXCLUDED.\"inputSchema\","
	" \"outputSchema\" = EXCLUDED.\"outputSchema\","
	" \"enforceSchema\" = EXCLUDED.\"enforceSchema\","
	" \"updatedAt\" = now()"
	" RETURNING old.\"id\" IS NULL");

enum { TASK_PARAMS = 29 };

/* Decimal text of an integer, into a slot of bufs; NULL for a negative
 * "absent" value when nullable. */
static const char *
int_param(char (*bufs)[24], int *used, int64_t v, bool nullable)
{
	if (nullable && v < 0)
		return NULL;
	char *b = bufs[(*used)++];
	snprintf(b, 24, "%" PRId64, v);
	return b;
}

bool
defs_task_put(struct db *db, const char *ns_id, const struct task_def *d,
	      bool *created, struct err *e)
{
	char bufs[16][24];
	int used = 0;
	char *input_keys = json_db_text(d->input_keys);
	char *output_keys = json_db_text(d->output_keys);
	char *input_template = json_db_text(d->input_template);
	char *secret_fields = json_db_text(d->secret_output_fields);
	char *cache = d->cache_config ? json_db_text(d->cache_config) : NULL;
	char *in_schema =
		d->input_schema ? json_db_text(d->input_schema) : NULL;
	char *out_schema =
		d->output_schema ? json_db_text(d->output_schema) : NULL;
	const char *params[TASK_PARAMS] = {
		ns_id,
		d->name,
		d->description,
		int_param(bufs, &used, d->retry_count, false),
		retry_logic_name(d->retry_logic),
		int_param(bufs, &used, d->retry_delay_seconds, false),
		int_param(bufs, &used, d->backoff_scale_factor, false),
		int_param(bufs, &used, d->max_retry_delay_seconds, false),
		int_param(bufs, &used, d->backoff_jitter_ms, false),
		int_param(bufs, &used, d->timeout_seconds, false),
		timeout_policy_name(d->timeout_policy),
		int_param(bufs, &used, d->response_timeout_seconds, false),
		int_param(bufs, &used, d->poll_timeout_seconds, true),
		int_param(bufs, &used, d->total_timeout_seconds, false),
		int_param(bufs, &used, d->concurrent_exec_limit, true),
		int_param(bufs, &used, d->rate_limit_per_frequency, true),
		int_param(bufs, &used, d->rate_limit_frequency_seconds, true),
		input_keys,
		output_keys,
		input_template,
		d->owner_email,
		secret_fields,
		d->isolation_group_id,
		d->execution_name_space,
		d->semaphore,
		cache,
		in_schema,
		out_schema,
		d->enforce_schema ? "true" : "false",
	};
	PGresult *res = db_exec(db, &defs_task_upsert, TASK_PARAMS, params, e);
	free(input_keys);
	free(output_keys);
	free(input_template);
	free(secret_fields);
	free(cache);
	free(in_schema);
	free(out_schema);
	if (!res)
		return false;
	*created = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return true;
}

#define TASK_COLUMNS                                                          \
	"\"name\", \"description\", \"retryCount\", \"retryLogic\","          \
	" \"retryDelaySeconds\", \"backoffScaleFactor\","                     \
	" \"maxRetryDelaySeconds\", \"backoffJitterMs\", \"timeoutSeconds\"," \
	" \"timeoutPolicy\", \"responseTimeoutSeconds\","                     \
	" \"pollTimeoutSeconds\", \"totalTimeoutSeconds\","                   \
	" \"concurrentExecLimit\", \"rateLimitPerFrequency\","                \
	" \"rateLimitFrequencyInSeconds\", to_jsonb(\"inputKeys\")::text,"    \
	" to_jsonb(\"outputKeys\")::text, \"inputTemplate\"::text,"           \
	" \"ownerEmail\", to_jsonb(\"secretOutputFields\")::text,"            \
	" \"isolationGroupId\", \"executionNameSpace\", \"semaphore\","       \
	" \"cacheConfig\"::text, \"inputSchema\"::text,"                      \
	" \"outputSchema\"::text, \"enforceSchema\", " ISO_UTC(               \
		"\"createdAt\"") ", " ISO_UTC("\"updatedAt\"")

/* Fills d (initialised here) from row of a TASK_COLUMNS result. */
static void
task_from_row(const PGresult *res, int row, struct task_def *d)
{
	task_def_init(d);
	int c = 0;
	d->name = xstrdup(PQgetvalue(res, row, c++));
	d->description = opt_text(res, row, c++);
	d->retry_count = opt_int(res, row, c++);
	retry_logic_parse(PQgetvalue(res, row, c++), &d->retry_logic);
	d->retry_delay_seconds = opt_int(res, row, c++);
	d->backoff_scale_factor = opt_int(res, row, c++);
	d->max_retry_delay_seconds = opt_int(res, row, c++);
	d->backoff_jitter_ms = opt_int(res, row, c++);
	d->timeout_seconds = strtoll(PQgetvalue(res, row, c++), NULL, 10);
	timeout_policy_parse(PQgetvalue(res, row, c++), &d->timeout_policy);
	d->response_timeout_seconds =
		strtoll(PQgetvalue(res, row, c++), NULL, 10);
	d->poll_timeout_seconds = opt_int(res, row, c++);
	d->total_timeout_seconds = strtoll(PQgetvalue(res, row, c++), NULL, 10);
	d->concurrent_exec_limit = opt_int(res, row, c++);
	d->rate_limit_per_frequency = opt_int(res, row, c++);
	d->rate_limit_frequency_seconds = opt_int(res, row, c++);
	set_json(&d->input_keys, opt_json(res, row, c++), json_array);
	set_json(&d->output_keys, opt_json(res, row, c++), json_array);
	set_json(&d->input_template, opt_json(res, row, c++), json_object);
	d->owner_email = opt_text(res, row, c++);
	set_json(&d->secret_output_fields, opt_json(res, row, c++), json_array);
	d->isolation_group_id = opt_text(res, row, c++);
	d->execution_name_space = opt_text(res, row, c++);
	d->semaphore = opt_text(res, row, c++);
	d->cache_config = opt_json(res, row, c++);
	d->input_schema = opt_json(res, row, c++);
	d->output_schema = opt_json(res, row, c++);
	d->enforce_schema = strcmp(PQgetvalue(res, row, c++), "t") == 0;
	d->created_at = opt_text(res, row, c++);
	d->updated_at = opt_text(res, row, c++);
}

DB_STMT(defs_task_select, "SELECT " TASK_COLUMNS " FROM \"TaskDefinitions\""
			  " WHERE \"namespaceId\" = $1 AND \"name\" = $2");

bool
defs_task_get(struct db *db, const char *ns_id, const char *name,
	      struct task_def *out, struct err *e)
{
	const char *params[] = {ns_id, name};
	PGresult *res = db_exec(db, &defs_task_select, 2, params, e);
	if (!res)
		return false;
	bool found = PQntuples(res) == 1;
	if (found)
		task_from_row(res, 0, out);
	else
		err_set(e, ERR_NOT_FOUND,
			"task definition \"%.200s\" does not exist", name);
	PQclear(res);
	return found;
}

DB_STMT(defs_task_select_all, "SELECT " TASK_COLUMNS " FROM \"TaskDefinitions\""
			      " WHERE \"namespaceId\" = $1 ORDER BY \"name\"");

bool
defs_task_list(struct db *db, const char *ns_id, struct task_def **out,
	       size_t *n, struct err *e)
{
	const char *params[] = {ns_id};
	*out = NULL;
	*n = 0;
	PGresult *res = db_exec(db, &defs_task_select_all, 1, params, e);
	if (!res)
		return false;
	int rows = PQntuples(res);
	*out = xcalloc((size_t)rows + 1, sizeof(**out));
	for (int i = 0; i < rows; i++)
		task_from_row(res, i, &(*out)[i]);
	*n = (size_t)rows;
	PQclear(res);
	return true;
}

DB_STMT(defs_task_remove, "DELETE FROM \"TaskDefinitions\""
			  " WHERE \"namespaceId\" = $1 AND \"name\" = $2");

bool
defs_task_delete(struct db *db, const char *ns_id, const char *name,
		 struct err *e)
{
	const char *params[] = {ns_id, name};
	PGresult *res = db_exec(db, &defs_task_remove, 2, params, e);
	if (!res)
		return false;
	bool found = touched(res);
	PQclear(res);
	if (!found)
		err_set(e, ERR_NOT_FOUND,
			"task definition \"%.200s\" does not exist", name);
	return found;
}

/* In the order given, each missing name once. */
DB_STMT(defs_task_absent,
	"SELECT \"n\".\"name\" FROM jsonb_array_elements_text($2::jsonb)"
	" WITH ORDINALITY AS \"n\"(\"name\", \"pos\")"
	" WHERE NOT EXISTS (SELECT 1 FROM \"TaskDefinitions\" \"t\""
	"   WHERE \"t\".\"namespaceId\" = $1 AND \"t\".\"name\" = \"n\".\"name\")"
	" GROUP BY \"n\".\"name\" ORDER BY min(\"n\".\"pos\")");

bool
defs_task_missing(struct db *db, const char *ns_id, const json_t *names,
		  json_t **missing, struct err *e)
{
	*missing = NULL;
	char *text = json_db_text(names);
	const char *params[] = {ns_id, text};
	PGresult *res = db_exec(db, &defs_task_absent, 2, params, e);
	free(text);
	if (!res)
		return false;
	*missing = json_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_array_append_new(*missing,
				      json_string(PQgetvalue(res, i, 0)));
	PQclear(res);
	return true;
}

DB_STMT(defs_task_flow_control_select,
	"SELECT \"t\".\"name\", \"t\".\"semaphore\", \"t\".\"concurrentExecLimit\","
	" \"t\".\"rateLimitPerFrequency\" FROM \"TaskDefinitions\" \"t\""
	" WHERE \"t\".\"namespaceId\" = $1"
	" AND (\"t\".\"semaphore\" IS NOT NULL"
	" OR coalesce(\"t\".\"concurrentExecLimit\", 0) > 0"
	" OR coalesce(\"t\".\"rateLimitPerFrequency\", 0) > 0)"
	" AND \"t\".\"name\" IN (SELECT jsonb_array_elements_text($2::jsonb))");

bool
defs_task_flow_controls(struct db *db, const char *ns_id, const json_t *names,
			json_t **controls, struct err *e)
{
	*controls = NULL;
	char *text = json_db_text(names);
	const char *params[] = {ns_id, text};
	PGresult *res =
		db_exec(db, &defs_task_flow_control_select, 2, params, e);
	free(text);
	if (!res)
		return false;
	*controls = json_object();
	for (int i = 0; i < PQntuples(res); i++) {
		json_t *c = json_object();
		if (!PQgetisnull(res, i, 1))
			json_object_set_new(c, "semaphore",
					    json_string(PQgetvalue(res, i, 1)));
		static const char *const limits[] = {"concurrentExecLimit",
						     "rateLimitPerFrequency"};
		for (int k = 0; k < 2; k++) {
			long v = PQgetisnull(res, i, 2 + k)
					 ? 0
					 : strtol(PQgetvalue(res, i, 2 + k),
						  NULL, 10);
			if (v > 0)
				json_object_set_new(c, limits[k],
						    json_integer(v));
		}
		json_object_set_new(*controls, PQgetvalue(res, i, 0), c);
	}
	PQclear(res);
	return true;
}

DB_STMT(defs_workflow_naming_select,
	"SELECT \"d\".\"definition\" || jsonb_build_object('name', \"d\".\"name\","
	" 'version', \"d\".\"version\")"
	" FROM \"WorkflowDefinitions\" \"d\" WHERE \"d\".\"namespaceId\" = $1"
	" AND jsonb_path_exists(\"d\".\"definition\","
	" '$.** ? (@.name == $n && exists(@.taskReferenceName))',"
	" jsonb_build_object('n', $2::text))"
	" ORDER BY \"d\".\"name\", \"d\".\"version\"");

bool
defs_workflows_naming_task(struct db *db, const char *ns_id, const char *name,
			   json_t **defs, struct err *e)
{
	*defs = NULL;
	const char *params[] = {ns_id, name};
	PGresult *res = db_exec(db, &defs_workflow_naming_select, 2, params, e);
	if (!res)
		return false;
	*defs = json_array();
	for (int i = 0; i < PQntuples(res); i++) {
		json_t *v = json_loads(PQgetvalue(res, i, 0), 0, NULL);
		if (v)
			json_array_append_new(*defs, v);
	}
	PQclear(res);
	return true;
}

/* ------------------------------------------------- workflow definitions */

void
workflow_def_row_free(struct workflow_def_row *r)
{
	free(r->name);
	json_decref(r->definition);
	free(r->created_at);
	free(r->updated_at);
	memset(r, 0, sizeof(*r));
}

DB_STMT(defs_workflow_insert,
	"INSERT INTO \"WorkflowDefinitions\" (\"namespaceId\", \"name\","
	" \"version\", \"description\", \"definition\", \"ownerEmail\")"
	" VALUES ($1, $2, $3, $4, $5::jsonb, $6)"
	" ON CONFLICT (\"namespaceId\", \"name\", \"version\") DO NOTHING"
	" RETURNING true");

DB_STMT(defs_workflow_upsert,
	"INSERT INTO \"WorkflowDefinitions\" (\"namespaceId\", \"name\","
	" \"version\", \"description\", \"definition\", \"ownerEmail\")"
	" VALUES ($1, $2, $3, $4, $5::jsonb, $6)"
	" ON CONFLICT (\"namespaceId\", \"name\", \"version\") DO UPDATE SET"
	" \"description\" = EXCLUDED.\"description\","
	" \"definition\" = EXCLUDED.\"definition\","
	" \"ownerEmail\" = EXCLUDED.\"ownerEmail\","
	" \"updatedAt\" = now()"
	" RETURNING old.\"name\" IS NULL");

/* A string member of the definition, or NULL. */
static const char *
member_text(const json_t *def, const char *key)
{
	return json_string_value(json_object_get(def, key));
}

bool
defs_workflow_put(struct db *db, const char *ns_id, const char *name,
		  int version, const json_t *definition, bool overwrite,
		  bool *created, struct err *e)
{
	char v[24];
	snprintf(v, sizeof(v), "%d", version);
	char *text = json_db_text(definition);
	const char *params[] = {ns_id, name,
				v,     member_text(definition, "description"),
				text,  member_text(definition, "ownerEmail")};
	PGresult *res = db_exec(
		db, overwrite ? &defs_workflow_upsert : &defs_workflow_insert,
		6, params, e);
	free(text);
	if (!res)
		return false;
	bool ok = true;
	if (overwrite) {
		*created = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	} else {
		*created = PQntuples(res) == 1;
		if (!*created) {
			err_set(e, ERR_CONFLICT,
				"workflow definition \"%.200s\" version %d "
				"already exists",
				name, version);
			ok = false;
		}
	}
	PQclear(res);
	return ok;
}

#define WORKFLOW_COLUMNS                                         \
	"\"name\", \"version\", \"definition\"::text, " ISO_UTC( \
		"\"createdAt\"") ", " ISO_UTC("\"updatedAt\"")

static void
workflow_from_row(const PGresult *res, int row, struct workflow_def_row *r)
{
	r->name = xstrdup(PQgetvalue(res, row, 0));
	r->version = (int)strtol(PQgetvalue(res, row, 1), NULL, 10);
	r->definition = opt_json(res, row, 2);
	r->created_at = opt_text(res, row, 3);
	r->updated_at = opt_text(res, row, 4);
}

DB_STMT(defs_workflow_select,
	"SELECT " WORKFLOW_COLUMNS " FROM \"WorkflowDefinitions\""
	" WHERE \"namespaceId\" = $1 AND \"name\" = $2 AND \"version\" = $3");

/* The primary key's btree, scanned backwards. */
DB_STMT(defs_workflow_select_latest,
	"SELECT " WORKFLOW_COLUMNS " FROM \"WorkflowDefinitions\""
	" WHERE \"namespaceId\" = $1 AND \"name\" = $2"
	" ORDER BY \"version\" DESC LIMIT 1");

bool
defs_workflow_get(struct db *db, const char *ns_id, const char *name,
		  int version, struct workflow_def_row *out, struct err *e)
{
	char v[24];
	snprintf(v, sizeof(v), "%d", version);
	const char *params[] = {ns_id, name, v};
	memset(out, 0, sizeof(*out));
	PGresult *res =
		version > 0 ? db_exec(db, &defs_workflow_select, 3, params, e)
			    : db_exec(db, &defs_workflow_select_latest, 2,
				      params, e);
	if (!res)
		return false;
	bool found = PQntuples(res) == 1;
	if (found)
		workflow_from_row(res, 0, out);
	else if (version > 0)
		err_set(e, ERR_NOT_FOUND,
			"workflow definition \"%.200s\" version %d does not "
			"exist",
			name, version);
	else
		err_set(e, ERR_NOT_FOUND,
			"workflow definition \"%.200s\" does not exist", name);
	PQclear(res);
	return found;
}

DB_STMT(defs_workflow_select_all,
	"SELECT " WORKFLOW_COLUMNS " FROM \"WorkflowDefinitions\""
	" WHERE \"namespaceId\" = $1 ORDER BY \"name\", \"version\"");

DB_STMT(defs_workflow_select_latest_all,
	"SELECT DISTINCT ON (\"name\") " WORKFLOW_COLUMNS
	" FROM \"WorkflowDefinitions\" WHERE \"namespaceId\" = $1"
	" ORDER BY \"name\", \"version\" DESC");

bool
defs_workflow_list(struct db *db, const char *ns_id, bool all_versions,
		   struct workflow_def_row **out, size_t *n, struct err *e)
{
	const char *params[] = {ns_id};
	*out = NULL;
	*n = 0;
	PGresult *res = db_exec(db,
				all_versions ? &defs_workflow_select_all
					     : &defs_workflow_select_latest_all,
				1, params, e);
	if (!res)
		return false;
	int rows = PQntuples(res);
	*out = xcalloc((size_t)rows + 1, sizeof(**out));
	for (int i = 0; i < rows; i++)
		workflow_from_row(res, i, &(*out)[i]);
	*n = (size_t)rows;
	PQclear(res);
	return true;
}

DB_STMT(defs_workflow_remove,
	"DELETE FROM \"WorkflowDefinitions\""
	" WHERE \"namespaceId\" = $1 AND \"name\" = $2 AND \"version\" = $3");

DB_STMT(defs_workflow_remove_all,
	"DELETE FROM \"WorkflowDefinitions\""
	" WHERE \"namespaceId\" = $1 AND \"name\" = $2");

bool
defs_workflow_delete(struct db *db, const char *ns_id, const char *name,
		     int version, struct err *e)
{
	char v[24];
	snprintf(v, sizeof(v), "%d", version);
	const char *params[] = {ns_id, name, v};
	PGresult *res =
		version > 0
			? db_exec(db, &defs_workflow_remove, 3, params, e)
			: db_exec(db, &defs_workflow_remove_all, 2, params, e);
	if (!res)
		return false;
	bool found = touched(res);
	PQclear(res);
	if (found)
		return true;
	if (version > 0)
		err_set(e, ERR_NOT_FOUND,
			"workflow definition \"%.200s\" version %d does not "
			"exist",
			name, version);
	else
		err_set(e, ERR_NOT_FOUND,
			"workflow definition \"%.200s\" does not exist", name);
	return false;
}

struct db_stmt *const definitions_repo_stmts[] = {
	&defs_namespace_select,
	&defs_namespace_insert,
	&defs_task_upsert,
	&defs_task_select,
	&defs_task_select_all,
	&defs_task_remove,
	&defs_task_absent,
	&defs_task_flow_control_select,
	&defs_workflow_naming_select,
	&defs_workflow_insert,
	&defs_workflow_upsert,
	&defs_workflow_select,
	&defs_workflow_select_latest,
	&defs_workflow_select_all,
	&defs_workflow_select_latest_all,
	&defs_workflow_remove,
	&defs_workflow_remove_all,
	NULL,
};
