/* Definitions: a TaskDef or WorkflowDef document through the parser and
 * validator, and back to JSON. */
#include "fuzz.h"

#include "engine/dsl.h"
#include "util/json.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err e = ERR_INIT;
	json_t *doc = json_parse((const char *)data, size, 64, &e);
	if (!doc)
		return 0;

	struct dsl_errors errs = {0};
	struct wf_def *def = NULL;
	bool ok = dsl_workflow_parse(doc, &def, &errs);
	FUZZ_CHECK(ok == (def != NULL), "valid %d but def %p", ok,
		   (void *)def);
	FUZZ_CHECK(ok == (errs.n == 0), "valid %d with %zu errors", ok,
		   errs.n);
	if (def) {
		for (size_t i = 0; i < def->n_tasks; i++)
			FUZZ_CHECK(dsl_find_task(def, def->by_ref[i]->ref) ==
					   def->by_ref[i],
				   "task %s not found by its ref",
				   def->by_ref[i]->ref);
		json_t *missing = json_array();
		for (size_t i = 0; i < def->n_required_task_defs; i++)
			json_array_append_new(
				missing,
				json_string(def->required_task_defs[i]));
		dsl_error_missing_task_def(def, missing, &errs);
		json_decref(missing);
		wf_def_free(def);
	}
	json_decref(dsl_errors_json(&errs));
	dsl_errors_free(&errs);

	/* The partial parse always hands back what it read. */
	def = NULL;
	dsl_workflow_parse_partial(doc, &def, &errs);
	wf_def_free(def);
	dsl_errors_free(&errs);

	struct task_def td;
	if (dsl_task_def_parse(doc, &td, &errs)) {
		FUZZ_CHECK(errs.n == 0, "valid task def with errors");
		json_t *back = dsl_task_def_json(&td);
		FUZZ_CHECK(back, "task def to JSON");
		/* What it prints parses again to the same definition. */
		struct task_def td2;
		struct dsl_errors errs2 = {0};
		FUZZ_CHECK(dsl_task_def_parse(back, &td2, &errs2),
			   "printed task def does not parse: %s %s",
			   errs2.n ? errs2.items[0].path : "",
			   errs2.n ? errs2.items[0].message : "");
		task_def_free(&td2);
		json_decref(back);
	}
	task_def_free(&td);
	dsl_errors_free(&errs);
	json_decref(doc);
	return 0;
}
