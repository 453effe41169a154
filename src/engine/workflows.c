#include "engine/workflows.h"

#include "engine/decide_loop.h"
#include "engine/defcache.h"
#include "engine/start_group.h"
#include "store/executions_repo.h"
#include "util/json.h"

#include <stdlib.h>
#include <string.h>

bool
workflow_start(struct db *db, const char *ns_id, const struct start_request *r,
	       char id_out[37], bool *created, struct err *e)
{
	struct def_ref def;
	if (!defcache_workflow(db, ns_id, r->name, r->version, &def, e)) {
		if (e->code == ERR_NOT_FOUND) {
			if (r->version)
				err_set(e, ERR_NOT_FOUND,
					"workflow definition %.200s version %d not found",
					r->name, r->version);
			else
				err_set(e, ERR_NOT_FOUND,
					"workflow definition %.200s not found",
					r->name);
		}
		return false;
	}
	const struct wf_def *wf = def.wf;

	/* inputTemplate fills what the input leaves absent or null. */
	json_t *input = json_deep_copy(r->input);
	const char *key;
	json_t *v;
	json_object_foreach (wf->input_template, key, v) {
		json_t *have = json_object_get(input, key);
		if (!have || json_is_null(have))
			json_object_set(input, key, v);
	}
	char *input_text = json_db_text(input);
	char *vars_text = json_db_text(wf->variables);

	struct exec_start s = {
		.ns_id = ns_id,
		.def_name = wf->name,
		.def_version = wf->version,
		.input = input_text,
		.variables = vars_text,
		.correlation_id = r->correlation_id,
		.idempotency_key = r->idempotency_key,
		.priority = r->priority,
		.timeout_seconds = wf->timeout_seconds,
		/* A workflow's policy is TIME_OUT_WF unless it says ALERT_ONLY
		 * (Conductor's default; RETRY is a task policy). */
		.timeout_policy = wf->timeout_policy == TIMEOUT_ALERT_ONLY
					  ? "ALERT_ONLY"
					  : "TIME_OUT_WF",
	};
	struct start_first first = {wf, input, wf->variables};
	bool decided;
	bool ok =
		start_group_write(db, &s, &first, id_out, created, &decided, e);
	json_decref(input);
	free(input_text);
	free(vars_text);
	defcache_release(&def);
	if (!ok)
		return false;
	if (!*created && r->strategy == IDEMPOTENCY_FAIL) {
		err_set(e, ERR_CONFLICT,
			"a workflow with idempotency key \"%.100s\" exists: %s",
			r->idempotency_key, id_out);
		return false;
	}
	if (*created && !decided)
		decide_loop_wake();
	return true;
}
