#include "engine/operators.h"

#include "engine/expr.h"
#include "engine/js.h"
#include "util/mem.h"
#include "util/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- helpers */

static const char *
raw_string(const struct wf_task *wt, const char *key)
{
	return json_string_value(json_object_get(wt->raw, key));
}

static void
add_read(struct wf_task *t, const char *ref)
{
	for (size_t i = 0; i < t->n_reads; i++)
		if (strcmp(t->reads[i], ref) == 0)
			return;
	t->reads = xrealloc(t->reads, (t->n_reads + 1) * sizeof(*t->reads));
	t->reads[t->n_reads++] = xstrdup(ref);
}

static void
error_at(struct dsl_errors *errs, const struct wf_task *t, const char *key,
	 const char *message)
{
	struct strbuf sb = STRBUF_INIT;
	sb_printf(&sb, "%s.%s", t->path, key);
	dsl_errors_add(errs, sb_str(&sb), "%s", message);
	sb_free(&sb);
}

/* A member that is present and not null. */
static const json_t *
field(const struct wf_task *t, const char *key)
{
	const json_t *v = json_object_get(t->raw, key);
	return json_is_null(v) ? NULL : v;
}

static bool
has_kind(const struct wf_task *t, const char *type)
{
	return t && t->kind && strcmp(t->kind->type, type) == 0;
}

static const struct wf_task *
next_in_list(const struct wf_task *t)
{
	if (!t->list || t->index + 1 >= t->list->n)
		return NULL;
	return &t->list->items[t->index + 1];
}

static const struct wf_task *
prev_in_list(const struct wf_task *t)
{
	if (!t->list || t->index == 0)
		return NULL;
	return &t->list->items[t->index - 1];
}

/* A JSON array of task references, each in the definition: into reads. */
static void
ref_list(struct wf_task *t, const struct wf_def *def, const char *key,
	 bool required, struct dsl_errors *errs)
{
	const json_t *v = field(t, key);
	if (!v) {
		if (required)
			error_at(errs, t, key, "is required");
		return;
	}
	if (!json_is_array(v)) {
		error_at(errs, t, key, "must be an array of task references");
		return;
	}
	size_t i;
	const json_t *r;
	json_array_foreach (v, i, r) {
		struct strbuf sb = STRBUF_INIT;
		sb_printf(&sb, "%s.%s[%zu]", t->path, key, i);
		if (!json_is_string(r))
			dsl_errors_add(errs, sb_str(&sb), "must be a string");
		else if (!dsl_find_task(def, json_string_value(r)))
			dsl_errors_add(errs, sb_str(&sb),
				       "refers to task %.200s, which is not in "
				       "this workflow",
				       json_string_value(r));
		else
			add_read(t, json_string_value(r));
		sb_free(&sb);
	}
}

static void
require_string(const struct wf_task *t, const char *key,
	       struct dsl_errors *errs)
{
	const json_t *v = field(t, key);
	if (!v)
		error_at(errs, t, key, "is required");
	else if (!json_is_string(v) || json_string_length(v) == 0)
		error_at(errs, t, key, "must be a non-empty string");
}

/* The text a case value is matched by (Conductor's String.valueOf). */
static char *
case_text(const json_t *v)
{
	if (!v || json_is_null(v))
		return xstrdup("null");
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (json_is_true(v))
		return xstrdup("true");
	if (json_is_false(v))
		return xstrdup("false");
	if (json_is_integer(v)) {
		char b[32];
		snprintf(b, sizeof(b), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(v));
		return xstrdup(b);
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		char b[64];
		if (d == (double)(long long)d && d > -1e15 && d < 1e15)
			snprintf(b, sizeof(b), "%lld.0", (long long)d);
		else
			snprintf(b, sizeof(b), "%.17g", d);
		return xstrdup(b);
	}
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* ----------------------------------------------------------- JavaScript */

/* Evaluates script with $ bound to input: false with reason set when it
 * cannot (a syntax error, a throw, the time or memory limit). */
static bool
run_js(const char *script, const json_t *input, json_t **out, char *reason,
       size_t len)
{
	struct err e = ERR_INIT;
	*out = NULL;
	if (js_eval(script, input, JS_DEFAULT_TIMEOUT_MS, out, &e))
		return true;
	snprintf(reason, len, "%s", e.msg);
	return false;
}

static bool
js_truthy(const json_t *v)
{
	if (!v || json_is_null(v) || json_is_false(v))
		return false;
	if (json_is_integer(v))
		return json_integer_value(v) != 0;
	if (json_is_real(v))
		return json_real_value(v) != 0;
	if (json_is_string(v))
		return json_string_length(v) > 0;
	return true;
}

static bool
is_js_evaluator(const char *type)
{
	return type && (strcmp(type, "javascript") == 0 ||
			strcmp(type, "graaljs") == 0);
}

/* ----------------------------------------------------------------- NOOP */

void
op_noop_start(struct eval *ev, const struct wf_task *wt, struct op_run *run)
{
	(void)ev;
	(void)wt;
	run->status = "COMPLETED";
}

/* --------------------------------------------------------- SET_VARIABLE */

/* Its input is merged into the workflow's variables. */
void
op_set_variable_start(struct eval *ev, const struct wf_task *wt,
		      struct op_run *run)
{
	(void)wt;
	decider_set_variables(ev, run->input);
	run->status = "COMPLETED";
}

/* ------------------------------------------------------ SWITCH/DECISION */

void
op_switch_validate(struct wf_task *t, const struct wf_def *def,
		   struct dsl_errors *errs)
{
	(void)def;
	if (has_kind(t, "DECISION")) {
		if (!field(t, "caseValueParam") && !field(t, "caseExpression"))
			error_at(errs, t, "caseValueParam",
				 "a DECISION needs caseValueParam or "
				 "caseExpression");
		return;
	}
	const json_t *et = field(t, "evaluatorType");
	const char *type = et ? json_string_value(et) : "value-param";
	if (!type ||
	    (strcmp(type, "value-param") != 0 && !is_js_evaluator(type)))
		error_at(errs, t, "evaluatorType",
			 "must be one of value-param, javascript, graaljs");
	require_string(t, "expression", errs);
}

void
op_switch_start(struct eval *ev, const struct wf_task *wt, struct op_run *run)
{
	(void)ev;
	json_t *value = NULL;
	const char *param = NULL, *script = NULL;
	if (has_kind(wt, "DECISION")) {
		param = raw_string(wt, "caseValueParam");
		if (!param)
			script = raw_string(wt, "caseExpression");
	} else {
		const char *type = raw_string(wt, "evaluatorType");
		if (is_js_evaluator(type))
			script = raw_string(wt, "expression");
		else
			param = raw_string(wt, "expression");
	}
	if (script) {
		if (!run_js(script, run->input, &value, run->reason,
			    sizeof(run->reason))) {
			run->status = "FAILED";
			return;
		}
	} else {
		value = json_incref(json_object_get(run->input, param));
	}
	char *text = case_text(value);
	json_decref(value);
	run->output = json_pack("{s:[s],s:s}", "evaluationResult", text,
				"selectedCase", text);
	free(text);
	run->status = "COMPLETED";
}

/* The branch the case selects: its case's, else defaultCase (the last
 * list, key NULL). */
void
op_switch_done(struct eval *ev, const struct wf_task *wt,
	       const struct loaded_task *t)
{
	const char *selected =
		json_string_value(json_object_get(t->output, "selectedCase"));
	const struct wf_task_list *branch = NULL;
	for (size_t i = 0; i < wt->n_branches && selected; i++)
		if (wt->branches[i].key &&
		    strcmp(wt->branches[i].key, selected) == 0)
			branch = &wt->branches[i];
	if (!branch && wt->n_branches)
		branch = &wt->branches[wt->n_branches - 1];
	if (!branch || branch->n == 0) {
		/* No case and no default: the switch is done, what follows
		 * it runs (Conductor's behaviour). */
		decider_advance(ev, wt, t);
		return;
	}
	decider_schedule(ev, &branch->items[0], t->iteration, NULL);
}

void
op_switch_child_end(struct eval *ev, const struct wf_task *wt,
		    const struct loaded_task *last)
{
	decider_advance(ev, wt, last);
}

/* ----------------------------------------------------- FORK_JOIN + JOIN */

void
op_fork_validate(struct wf_task *t, const struct wf_def *def,
		 struct dsl_errors *errs)
{
	(void)def;
	if (!has_kind(next_in_list(t), "JOIN"))
		dsl_errors_add(errs, t->path, "a %s must be followed by a JOIN",
			       t->kind->type);
}

/* Opens the JOIN after fork (in iteration) and checks it at once: a fork
 * whose branches are empty (or finished inline) joins now. */
static void
open_join(struct eval *ev, const struct wf_task *fork, int iteration)
{
	const struct wf_task *join = next_in_list(fork);
	if (!join)
		return;
	const struct loaded_task *have = decider_latest(ev, join->ref);
	if (have && have->iteration >= iteration)
		return;
	decider_schedule(ev, join, iteration, NULL);
}

void
op_fork_done(struct eval *ev, const struct wf_task *wt,
	     const struct loaded_task *t)
{
	for (size_t i = 0; i < wt->n_branches; i++)
		if (wt->branches[i].n)
			decider_schedule(ev, &wt->branches[i].items[0],
					 t->iteration, NULL);
	open_join(ev, wt, t->iteration);
}

/* A static JOIN: done once every joinOn task of this iteration succeeded.
 * A branch task that failed is not done: its retry, scheduled when the
 * decider reacts to the failure (perhaps later in this same evaluation,
 * the unprocessed being reacted to in the order they ended), is waited
 * for; a failure for good fails the JOIN with the workflow. */
static void
static_join_check(struct eval *ev, const struct wf_task *join, int iteration)
{
	const struct loaded_task *j = decider_latest(ev, join->ref);
	if (!j || j->terminal || j->iteration != iteration)
		return;
	json_t *output = json_object();
	for (size_t i = 0; i < join->n_reads; i++) {
		if (strcmp(join->reads[i], join->ref) == 0)
			continue;
		const struct loaded_task *b =
			decider_latest(ev, join->reads[i]);
		if (!b || b->iteration < iteration || !decider_succeeded(b)) {
			json_decref(output);
			return;
		}
		json_object_set(output, b->ref,
				b->output ? b->output : json_object());
	}
	decider_finish(ev, j, "COMPLETED", NULL, output, NULL, NULL);
}

/* The JOIN of fork failed in this iteration (a branch failed, and was
 * then retried through the API): a new attempt of it waits again. */
static bool
reopen_failed_join(struct eval *ev, const struct wf_task *join, int iteration)
{
	const struct loaded_task *j = decider_latest(ev, join->ref);
	if (!j || j->iteration != iteration || !j->terminal ||
	    strcmp(j->status, "COMPLETED") == 0)
		return false;
	decider_reopen(ev, join, j);
	return true;
}

void
op_fork_child_end(struct eval *ev, const struct wf_task *wt,
		  const struct loaded_task *last)
{
	const struct wf_task *join = next_in_list(wt);
	if (!join)
		return;
	if (reopen_failed_join(ev, join, last->iteration))
		return; /* the new attempt checks itself as it opens */
	static_join_check(ev, join, last->iteration);
}

void
op_join_validate(struct wf_task *t, const struct wf_def *def,
		 struct dsl_errors *errs)
{
	const struct wf_task *prev = prev_in_list(t);
	if (!has_kind(prev, "FORK_JOIN") &&
	    !has_kind(prev, "FORK_JOIN_DYNAMIC"))
		dsl_errors_add(errs, t->path,
			       "a JOIN must follow a FORK_JOIN or "
			       "FORK_JOIN_DYNAMIC");
	ref_list(t, def, "joinOn", false, errs);
	/* Itself: a JOIN that failed is loaded, to be reopened. */
	add_read(t, t->ref);
}

static json_t *dynamic_refs(const struct wf_task *wt,
			    const struct loaded_task *f);

void
op_join_start(struct eval *ev, const struct wf_task *wt, struct op_run *run)
{
	const struct wf_task *fork = prev_in_list(wt);
	json_t *on = json_array();
	const struct loaded_task *old = decider_latest(ev, wt->ref);
	const json_t *old_on =
		old && old->iteration == run->iteration && old->terminal
			? json_object_get(old->input, "joinOn")
			: NULL;
	if (json_is_array(old_on)) {
		/* A new attempt waits for what the failed one waited for. */
		json_decref(on);
		on = json_deep_copy(old_on);
		if (has_kind(fork, "FORK_JOIN_DYNAMIC"))
			run->output = json_pack("{s:i}", "finished", 0);
	} else if (has_kind(fork, "FORK_JOIN_DYNAMIC")) {
		const struct loaded_task *f = decider_latest(ev, fork->ref);
		json_decref(on);
		on = f ? dynamic_refs(fork, f) : json_array();
		run->output = json_pack("{s:i}", "finished", 0);
	} else {
		for (size_t i = 0; i < wt->n_reads; i++)
			if (strcmp(wt->reads[i], wt->ref) != 0)
				json_array_append_new(
					on, json_string(wt->reads[i]));
	}
	json_object_set_new(run->input, "joinOn", on);
	run->status = "IN_PROGRESS";
}

void
op_join_opened(struct eval *ev, const struct wf_task *wt,
	       const struct loaded_task *t)
{
	const struct wf_task *fork = prev_in_list(wt);
	if (!has_kind(fork, "FORK_JOIN_DYNAMIC")) {
		static_join_check(ev, wt, t->iteration);
		return;
	}
	if (json_array_size(json_object_get(t->input, "joinOn")) == 0)
		decider_finish(ev, t, "COMPLETED", NULL, json_object(), NULL,
			       NULL);
}

/* ---------------------------------------------------- FORK_JOIN_DYNAMIC */

void
op_dynamic_fork_validate(struct wf_task *t, const struct wf_def *def,
			 struct dsl_errors *errs)
{
	op_fork_validate(t, def, errs);
	const json_t *in = t->input_parameters;
	bool simple = json_object_get(in, "forkTaskName") != NULL;
	if (simple)
		return;
	require_string(t, "dynamicForkTasksParam", errs);
	require_string(t, "dynamicForkTasksInputParamName", errs);
	const char *p = raw_string(t, "dynamicForkTasksParam");
	if (p && !json_object_get(in, p))
		error_at(errs, t, "dynamicForkTasksParam",
			 "names no key of inputParameters");
}

/* One branch of a dynamic fork. */
struct branch {
	const char *name, *ref, *type;
	const json_t *input;
};

/*
 * The branches of a dynamic fork from its resolved input: the tasks in
 * input[dynamicForkTasksParam] with their inputs in
 * input[dynamicForkTasksInputParamName][ref], or forkTaskName with one
 * branch per forkTaskInputs element (refs "<forkRef>_<i>", as names
 * are made here, in a buffer the caller frees).  False with reason when
 * they are malformed.
 */
static bool
dynamic_branches(const struct wf_task *wt, const json_t *input,
		 struct branch **out, size_t *n, char **names, char *reason,
		 size_t len)
{
	*out = NULL;
	*n = 0;
	*names = NULL;
	const json_t *task_name = json_object_get(input, "forkTaskName");
	if (task_name) {
		const json_t *inputs = json_object_get(input, "forkTaskInputs");
		const char *type = json_string_value(
			json_object_get(input, "forkTaskType"));
		if (!json_is_string(task_name) ||
		    (inputs && !json_is_array(inputs))) {
			snprintf(reason, len,
				 "forkTaskName must be a string and "
				 "forkTaskInputs an array");
			return false;
		}
		size_t k = json_array_size(inputs);
		*out = xcalloc(k + 1, sizeof(**out));
		size_t width = strlen(wt->ref) + 24;
		*names = xcalloc(k + 1, width);
		for (size_t i = 0; i < k; i++) {
			char *ref = *names + i * width;
			snprintf(ref, width, "%s_%zu", wt->ref, i);
			(*out)[i] =
				(struct branch){json_string_value(task_name),
						ref, type ? type : "SIMPLE",
						json_array_get(inputs, i)};
		}
		*n = k;
		return true;
	}
	const char *tp = raw_string(wt, "dynamicForkTasksParam");
	const char *ip = raw_string(wt, "dynamicForkTasksInputParamName");
	const json_t *tasks = tp ? json_object_get(input, tp) : NULL;
	const json_t *inputs = ip ? json_object_get(input, ip) : NULL;
	if (!json_is_array(tasks)) {
		snprintf(reason, len, "input %s must be an array of tasks",
			 tp ? tp : "(dynamicForkTasksParam)");
		return false;
	}
	size_t k = json_array_size(tasks);
	*out = xcalloc(k + 1, sizeof(**out));
	for (size_t i = 0; i < k; i++) {
		const json_t *t = json_array_get(tasks, i);
		const char *ref = json_string_value(
			json_object_get(t, "taskReferenceName"));
		const char *name =
			json_string_value(json_object_get(t, "name"));
		const char *type =
			json_string_value(json_object_get(t, "type"));
		if (!ref || !name || !*ref || !*name) {
			snprintf(reason, len,
				 "dynamic task %zu needs a name and a "
				 "taskReferenceName",
				 i);
			free(*out);
			*out = NULL;
			return false;
		}
		(*out)[i] = (struct branch){
			name, ref, type ? type : "SIMPLE",
			json_is_object(inputs) ? json_object_get(inputs, ref)
					       : NULL};
	}
	*n = k;
	return true;
}

/* Checks what a dynamic fork would start: false with reason. */
static bool
dynamic_check(struct eval *ev, const struct branch *b, size_t n, char *reason,
	      size_t len)
{
	const struct wf_def *def = decider_def(ev);
	json_t *seen = json_object();
	bool ok = true;
	for (size_t i = 0; i < n && ok; i++) {
		const struct task_kind *k = task_kind_find(b[i].type);
		if (!k || k->nest != NEST_NONE || k->exec == TASK_EXEC_SYSTEM ||
		    strcmp(k->type, "DYNAMIC") == 0 ||
		    strcmp(k->type, "TERMINATE") == 0 ||
		    strcmp(k->type, "JOIN") == 0 ||
		    strcmp(k->type, "EXCLUSIVE_JOIN") == 0) {
			snprintf(reason, len,
				 "dynamic task %s: type %.100s cannot run in a "
				 "dynamic fork",
				 b[i].ref, b[i].type);
			ok = false;
		} else if (dsl_find_task(def, b[i].ref) ||
			   json_object_get(seen, b[i].ref)) {
			snprintf(reason, len,
				 "dynamic task reference %.200s is used twice",
				 b[i].ref);
			ok = false;
		}
		json_object_set_new(seen, b[i].ref, json_true());
	}
	json_decref(seen);
	return ok;
}

void
op_dynamic_fork_start(struct eval *ev, const struct wf_task *wt,
		      struct op_run *run)
{
	struct branch *b;
	size_t n;
	char *names;
	if (!dynamic_branches(wt, run->input, &b, &n, &names, run->reason,
			      sizeof(run->reason)) ||
	    !dynamic_check(ev, b, n, run->reason, sizeof(run->reason))) {
		run->status = "FAILED";
	} else {
		run->status = "COMPLETED";
		run->output = json_pack("{s:i}", "forked", (int)n);
	}
	free(b);
	free(names);
}

/* The references of the branches the fork f (of wt) started. */
static json_t *
dynamic_refs(const struct wf_task *wt, const struct loaded_task *f)
{
	json_t *refs = json_array();
	struct branch *b;
	size_t n;
	char *names;
	char reason[256];
	if (dynamic_branches(wt, f->input, &b, &n, &names, reason,
			     sizeof(reason)))
		for (size_t i = 0; i < n; i++)
			json_array_append_new(refs, json_string(b[i].ref));
	free(b);
	free(names);
	return refs;
}

void
op_dynamic_fork_done(struct eval *ev, const struct wf_task *wt,
		     const struct loaded_task *t)
{
	struct branch *b;
	size_t n;
	char *names;
	char reason[256];
	if (dynamic_branches(wt, t->input, &b, &n, &names, reason,
			     sizeof(reason))) {
		for (size_t i = 0; i < n; i++) {
			const struct wf_task *bt = decider_dynamic_task(
				ev, wt, b[i].name, b[i].ref, b[i].type,
				b[i].input);
			if (bt)
				decider_schedule(ev, bt, t->iteration, wt->ref);
		}
	}
	free(b);
	free(names);
	open_join(ev, wt, t->iteration);
}

/* A branch ended: one more finished; the last one completes the JOIN,
 * whose output (every branch's) the store builds. */
void
op_dynamic_fork_child_end(struct eval *ev, const struct wf_task *wt,
			  const struct loaded_task *last)
{
	const struct wf_task *join = next_in_list(wt);
	if (!join)
		return;
	const struct loaded_task *j = decider_latest(ev, join->ref);
	if (j && j->terminal && j->iteration == last->iteration &&
	    strcmp(j->status, "COMPLETED") != 0) {
		/* Failed, and a branch was retried: a new attempt counts the
		 * branches still open. */
		decider_reopen(ev, join, j);
		const struct loaded_task *n = decider_latest(ev, join->ref);
		size_t total =
			json_array_size(json_object_get(n->input, "joinOn"));
		size_t open =
			decider_open_in_fork(ev, wt->ref, last->iteration);
		if (open == 0)
			decider_finish(ev, n, "COMPLETED", NULL, NULL, NULL,
				       wt->ref);
		else
			decider_finish(ev, n, "IN_PROGRESS", NULL,
				       json_pack("{s:I}", "finished",
						 (json_int_t)(total - open)),
				       NULL, NULL);
		return;
	}
	if (!j || j->terminal || j->iteration != last->iteration)
		return;
	json_int_t finished =
		json_integer_value(json_object_get(j->output, "finished")) + 1;
	size_t total = json_array_size(json_object_get(j->input, "joinOn"));
	if ((size_t)finished >= total)
		decider_finish(ev, j, "COMPLETED", NULL, NULL, NULL, wt->ref);
	else
		decider_finish(ev, j, "IN_PROGRESS", NULL,
			       json_pack("{s:I}", "finished", finished), NULL,
			       NULL);
}

/* ------------------------------------------------------- EXCLUSIVE_JOIN */

void
op_exclusive_join_validate(struct wf_task *t, const struct wf_def *def,
			   struct dsl_errors *errs)
{
	ref_list(t, def, "joinOn", true, errs);
	ref_list(t, def, "defaultExclusiveJoinTask", false, errs);
}

/* The first task of key's list that ended in this iteration, or NULL. */
static const struct loaded_task *
first_ended(struct eval *ev, const struct wf_task *wt, const char *key,
	    int iteration)
{
	size_t i;
	const json_t *r;
	json_array_foreach (json_object_get(wt->raw, key), i, r) {
		const struct loaded_task *t =
			decider_latest(ev, json_string_value(r));
		if (t && t->terminal && t->iteration >= iteration)
			return t;
	}
	return NULL;
}

/* Completes with the output of the first joinOn task that ran (the
 * branch a SWITCH took), else of defaultExclusiveJoinTask's, else {}. */
void
op_exclusive_join_start(struct eval *ev, const struct wf_task *wt,
			struct op_run *run)
{
	const struct loaded_task *t =
		first_ended(ev, wt, "joinOn", run->iteration);
	if (!t)
		t = first_ended(ev, wt, "defaultExclusiveJoinTask",
				run->iteration);
	run->status = "COMPLETED";
	if (!t)
		return;
	run->output = t->output ? json_incref(t->output) : json_object();
	if (strcmp(t->status, "COMPLETED") != 0 &&
	    strcmp(t->status, "COMPLETED_WITH_ERRORS") != 0 &&
	    strcmp(t->status, "SKIPPED") != 0) {
		run->status = "FAILED";
		snprintf(run->reason, sizeof(run->reason), "task %s ended %s",
			 t->ref, t->status);
	}
}

/* ------------------------------------------------------------- DO_WHILE */

static void
collect_body(struct wf_task *loop, const struct wf_task_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		add_read(loop, l->items[i].ref);
		for (size_t b = 0; b < l->items[i].n_branches; b++)
			collect_body(loop, &l->items[i].branches[b]);
	}
}

struct item_sources {
	struct wf_task *loop;
	const struct wf_def *def;
};

static void
on_item_source(const char *source, size_t len, void *arg)
{
	struct item_sources *s = arg;
	char *name = xstrndup(source, len);
	if (dsl_find_task(s->def, name))
		add_read(s->loop, name);
	free(name);
}

void
op_loop_validate(struct wf_task *t, const struct wf_def *def,
		 struct dsl_errors *errs)
{
	const json_t *cond = field(t, "loopCondition");
	const json_t *items = field(t, "items");
	if (!cond && !items)
		error_at(errs, t, "loopCondition",
			 "a DO_WHILE needs loopCondition or items");
	if (cond && !json_is_string(cond))
		error_at(errs, t, "loopCondition", "must be a string");
	if (items) {
		struct err e = ERR_INIT;
		struct strbuf sb = STRBUF_INIT;
		sb_printf(&sb, "%s.items", t->path);
		if (!expr_check(items, sb_str(&sb), &e)) {
			dsl_errors_add(errs, sb_str(&sb), "%s", e.msg);
		} else {
			struct item_sources s = {t, def};
			expr_sources(items, on_item_source, &s);
		}
		sb_free(&sb);
	}
	for (const struct wf_task *w = t; w->list && w->list->owner;
	     w = w->list->owner)
		if (has_kind(w->list->owner, "DO_WHILE")) {
			dsl_errors_add(errs, t->path,
				       "a DO_WHILE inside a DO_WHILE is not "
				       "supported");
			break;
		}
	for (size_t b = 0; b < t->n_branches; b++)
		collect_body(t, &t->branches[b]);
}

static void
set_item(json_t *output, const json_t *items, int index)
{
	if (!items)
		return;
	json_object_set(output, "loopItem",
			json_array_get(items, (size_t)index));
	json_object_set_new(output, "loopIndex", json_integer(index));
}

void
op_loop_start(struct eval *ev, const struct wf_task *wt, struct op_run *run)
{
	const json_t *tmpl = field(wt, "items");
	json_t *items = NULL;
	if (tmpl) {
		struct err e = ERR_INIT;
		char where[256];
		snprintf(where, sizeof(where), "%s.items", wt->path);
		items = expr_resolve(tmpl, decider_context(ev), where, &e);
		if (!items || !json_is_array(items)) {
			snprintf(run->reason, sizeof(run->reason),
				 "items must be a list: %s",
				 items ? "it is not" : e.msg);
			json_decref(items);
			run->status = "FAILED";
			return;
		}
		json_object_set(run->input, "items", items);
	}
	if (items && json_array_size(items) == 0) {
		run->status = "COMPLETED";
		run->output = json_pack("{s:i}", "iteration", 0);
	} else {
		run->status = "IN_PROGRESS";
		run->output = json_pack("{s:i}", "iteration", 1);
		set_item(run->output, items, 0);
	}
	json_decref(items);
}

void
op_loop_opened(struct eval *ev, const struct wf_task *wt,
	       const struct loaded_task *t)
{
	if (wt->n_branches && wt->branches[0].n)
		decider_schedule(ev, &wt->branches[0].items[0], 1, NULL);
	(void)t;
}

/* Adds {ref: output} of every body task that ran in iteration to o. */
static void
body_outputs(struct eval *ev, const struct wf_task *wt, int iteration,
	     json_t *o)
{
	for (size_t i = 0; i < wt->n_reads; i++) {
		const struct loaded_task *b = decider_latest(ev, wt->reads[i]);
		if (b && b->iteration == iteration && b->terminal)
			json_object_set(o, b->ref,
					b->output ? b->output : json_object());
	}
}

/* The body ran to its end in iteration it: record its outputs under
 * "<it>", then go round again or finish. */
void
op_loop_child_end(struct eval *ev, const struct wf_task *wt,
		  const struct loaded_task *last)
{
	const struct loaded_task *l = decider_latest(ev, wt->ref);
	int it = last->iteration;
	if (!l || l->terminal)
		return;
	/* Only members of the top level change: the rounds before this one
	 * are shared with the loop's earlier states, not copied (a deep copy
	 * made each round cost the square of the rounds). */
	json_t *output = l->output && json_is_object(l->output)
				 ? json_copy(l->output)
				 : json_object();
	json_t *round = json_object();
	body_outputs(ev, wt, it, round);
	char key[24];
	snprintf(key, sizeof(key), "%d", it);
	json_object_set_new(output, key, round);
	json_object_set_new(output, "iteration", json_integer(it));
	json_int_t keep =
		json_integer_value(json_object_get(l->input, "keepLastN"));
	if (keep > 0 && it - keep >= 1) {
		snprintf(key, sizeof(key), "%d", (int)(it - keep));
		json_object_del(output, key);
	}

	const json_t *items = json_object_get(l->input, "items");
	bool more = !items || (size_t)it < json_array_size(items);
	const char *cond = raw_string(wt, "loopCondition");
	if (more && cond) {
		json_t *in = l->input && json_is_object(l->input)
				     ? json_deep_copy(l->input)
				     : json_object();
		json_object_set(in, wt->ref, output);
		body_outputs(ev, wt, it, in);
		json_t *v = NULL;
		char reason[512];
		bool ok = run_js(cond, in, &v, reason, sizeof(reason));
		json_decref(in);
		if (!ok) {
			char why[600];
			snprintf(why, sizeof(why), "loopCondition: %s", reason);
			decider_finish(ev, l, "FAILED", NULL, output, why,
				       NULL);
			return;
		}
		more = js_truthy(v);
		json_decref(v);
	}
	if (!more) {
		decider_finish(ev, l, "COMPLETED", NULL, output, NULL, NULL);
		return;
	}
	json_object_set_new(output, "iteration", json_integer(it + 1));
	set_item(output, items, it);
	decider_finish(ev, l, "IN_PROGRESS", NULL, output, NULL, NULL);
	if (wt->n_branches && wt->branches[0].n)
		decider_schedule(ev, &wt->branches[0].items[0], it + 1, NULL);
}

/* -------------------------------------------------------------- DYNAMIC */

static const char *
dynamic_param(const struct wf_task *wt)
{
	const char *p = raw_string(wt, "dynamicTaskNameParam");
	return p ? p : "taskToExecute";
}

void
op_dynamic_validate(struct wf_task *t, const struct wf_def *def,
		    struct dsl_errors *errs)
{
	(void)def;
	const json_t *v = field(t, "dynamicTaskNameParam");
	if (v && !json_is_string(v))
		error_at(errs, t, "dynamicTaskNameParam", "must be a string");
	if (!json_object_get(t->input_parameters, dynamic_param(t)))
		error_at(errs, t, "dynamicTaskNameParam",
			 "names no key of inputParameters");
}

/* A worker task whose name is read from the input. */
void
op_dynamic_start(struct eval *ev, const struct wf_task *wt, struct op_run *run)
{
	const char *name = json_string_value(
		json_object_get(run->input, dynamic_param(wt)));
	if (!name || !*name || strchr(name, '/')) {
		char reason[300];
		snprintf(reason, sizeof(reason),
			 "task %s: input %s does not name a task", wt->ref,
			 dynamic_param(wt));
		decider_end_workflow(ev, "FAILED", NULL, reason, wt->ref);
		return;
	}
	run->name = name;
	run->type = "SIMPLE";
}

/* ------------------------------------------------------------ TERMINATE */

static bool
termination_status(const char *s)
{
	return s && (strcmp(s, "COMPLETED") == 0 || strcmp(s, "FAILED") == 0 ||
		     strcmp(s, "TERMINATED") == 0);
}

void
op_terminate_validate(struct wf_task *t, const struct wf_def *def,
		      struct dsl_errors *errs)
{
	(void)def;
	const json_t *v =
		json_object_get(t->input_parameters, "terminationStatus");
	struct strbuf sb = STRBUF_INIT;
	sb_printf(&sb, "%s.inputParameters.terminationStatus", t->path);
	if (!v)
		dsl_errors_add(errs, sb_str(&sb), "is required");
	else if (!json_is_string(v))
		dsl_errors_add(errs, sb_str(&sb), "must be a string");
	else if (!strstr(json_string_value(v), "${") &&
		 !termination_status(json_string_value(v)))
		dsl_errors_add(errs, sb_str(&sb),
			       "must be COMPLETED, FAILED or TERMINATED");
	sb_free(&sb);
}

void
op_terminate_start(struct eval *ev, const struct wf_task *wt,
		   struct op_run *run)
{
	(void)ev;
	(void)wt;
	const char *st = json_string_value(
		json_object_get(run->input, "terminationStatus"));
	if (!termination_status(st)) {
		run->status = "FAILED";
		snprintf(run->reason, sizeof(run->reason),
			 "terminationStatus must be COMPLETED, FAILED or "
			 "TERMINATED");
		return;
	}
	const json_t *out = json_object_get(run->input, "workflowOutput");
	run->output = json_is_object(out) ? json_deep_copy(out) : json_object();
	run->status = "COMPLETED";
}

/* Ends the workflow as the task's input says. */
void
op_terminate_done(struct eval *ev, const struct wf_task *wt,
		  const struct loaded_task *t)
{
	const char *st = json_string_value(
		json_object_get(t->input, "terminationStatus"));
	const char *why = json_string_value(
		json_object_get(t->input, "terminationReason"));
	char reason[512];
	if (!why && strcmp(st, "COMPLETED") != 0) {
		snprintf(reason, sizeof(reason), "terminated by task %s",
			 wt->ref);
		why = reason;
	}
	decider_end_workflow(ev, st,
			     t->output ? json_incref(t->output) : json_object(),
			     why, strcmp(st, "FAILED") == 0 ? wt->ref : NULL);
}
