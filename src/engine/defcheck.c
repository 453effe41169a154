#include "engine/defcheck.h"

#include "store/definitions_repo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
defcheck_workflow(struct db *db, const char *ns_id, const struct wf_def *def,
		  struct dsl_errors *errs, struct err *e)
{
	json_t *names = dsl_self_run_task_names(def);
	bool ok = true;
	if (json_array_size(names)) {
		json_t *controls = NULL;
		ok = defs_task_flow_controls(db, ns_id, names, &controls, e);
		if (ok)
			dsl_error_self_run_flow_control(def, controls, errs);
		json_decref(controls);
	}
	json_decref(names);
	return ok;
}

/* d's flow-control settings, as defs_task_flow_controls answers them: a new
 * object, empty when d has none. */
static json_t *
controls_of(const struct task_def *d)
{
	json_t *c = json_object();
	if (d->semaphore)
		json_object_set_new(c, "semaphore", json_string(d->semaphore));
	if (d->concurrent_exec_limit > 0)
		json_object_set_new(c, "concurrentExecLimit",
				    json_integer(d->concurrent_exec_limit));
	if (d->rate_limit_per_frequency > 0)
		json_object_set_new(c, "rateLimitPerFrequency",
				    json_integer(d->rate_limit_per_frequency));
	return c;
}

bool
defcheck_task_def(struct db *db, const char *ns_id, const struct task_def *d,
		  const char *base, struct dsl_errors *errs, struct err *e)
{
	json_t *controls = d->name ? controls_of(d) : NULL;
	if (!json_object_size(controls)) {
		json_decref(controls);
		return true;
	}
	json_t *defs = NULL;
	if (!defs_workflows_naming_task(db, ns_id, d->name, &defs, e)) {
		json_decref(controls);
		return false;
	}
	size_t i;
	json_t *doc;
	json_array_foreach (defs, i, doc) {
		struct wf_def *wf = NULL;
		struct dsl_errors ignored = {0};
		dsl_workflow_parse_partial(doc, &wf, &ignored);
		dsl_errors_free(&ignored);
		const struct wf_task *t =
			wf ? dsl_find_self_run(wf, d->name) : NULL;
		if (t) {
			/* One error per setting, each at its own field. */
			const char *field;
			json_t *v;
			json_object_foreach (controls, field, v) {
				json_t *one = json_object();
				json_object_set(one, field, v);
				char what[256], path[256];
				dsl_flow_control_describe(one, what,
							  sizeof(what));
				json_decref(one);
				snprintf(path, sizeof(path), "%s.%s", base,
					 field);
				dsl_errors_add(
					errs, path,
					"workflow %.200s version %d runs a "
					"task named %.200s itself, as a %.60s "
					"task at %.200s, which %s cannot hold "
					"back: a semaphore, concurrentExecLimit "
					"and rate limit apply to worker "
					"(SIMPLE) tasks only",
					wf->name ? wf->name : "?", wf->version,
					d->name, t->type ? t->type : "system",
					t->path, what);
			}
			wf_def_free(wf);
			break;
		}
		wf_def_free(wf);
	}
	json_decref(defs);
	json_decref(controls);
	return true;
}
