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
		json_t *sems = NULL;
		ok = defs_task_semaphores(db, ns_id, names, &sems, e);
		if (ok)
			dsl_error_self_run_semaphore(def, sems, errs);
		json_decref(sems);
	}
	json_decref(names);
	return ok;
}

bool
defcheck_task_def(struct db *db, const char *ns_id, const struct task_def *d,
		  const char *base, struct dsl_errors *errs, struct err *e)
{
	if (!d->semaphore || !d->name)
		return true;
	json_t *defs = NULL;
	if (!defs_workflows_naming_task(db, ns_id, d->name, &defs, e))
		return false;
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
			char path[256];
			snprintf(path, sizeof(path), "%s.semaphore", base);
			dsl_errors_add(
				errs, path,
				"workflow %.200s version %d runs a task named "
				"%.200s itself, as a %.60s task at %.200s, "
				"which a semaphore cannot gate: a semaphore "
				"applies to worker (SIMPLE) tasks only",
				wf->name ? wf->name : "?", wf->version, d->name,
				t->type ? t->type : "system", t->path);
			wf_def_free(wf);
			break;
		}
		wf_def_free(wf);
	}
	json_decref(defs);
	return true;
}
