#include "engine/decider.h"

#include "engine/expr.h"
#include "engine/operators.h"
#include "store/timers_repo.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inline reactions one evaluation runs at most (an endless loop of
 * operators); what is left is written unseen and reacted to next time. */

/* A task this evaluation wrote (a new row, or a new state of an existing
 * one): the view the evaluation reasons over is the loaded tasks followed
 * by these, the later entry of an identity winning. */
struct added {
	struct loaded_task t;
	json_t *row; /* its row in d->tasks */
};

/* A dynamic fork's task, with the one-task list that ties it to its fork. */
struct synth {
	struct wf_task_list list;
	struct wf_task task;
};

/* What one evaluation is building. */
struct eval {
	const struct decider_input *in;
	struct decision *d;
	json_t *ctx;  /* expression context, built on first use */
	json_t *vars; /* the variables, once changed */
	bool ended;   /* the workflow reached a terminal status */
	struct added **added;
	size_t n_added, cap_added;
	const struct loaded_task **todo; /* to react to, in order */
	size_t n_todo, cap_todo, n_loaded_todo;
	size_t steps;
	struct synth **synth;
	size_t n_synth, cap_synth;
};

static bool
is_status(const char *s, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(s, *set) == 0)
			return true;
	return false;
}

static const char *const succeeded[] = {"COMPLETED", "COMPLETED_WITH_ERRORS",
					"SKIPPED", NULL};
static const char *const retriable[] = {"FAILED", "TIMED_OUT", NULL};
static const char *const terminal[] = {
	"COMPLETED", "COMPLETED_WITH_ERRORS",
	"FAILED",    "FAILED_WITH_TERMINAL_ERROR",
	"TIMED_OUT", "CANCELED",
	"SKIPPED",   NULL};

bool
decider_succeeded(const struct loaded_task *t)
{
	return t->terminal && is_status(t->status, succeeded);
}

static void
event(struct eval *ev, const char *type, const char *task_id, json_t *data)
{
	json_t *e = json_pack("{s:s,s:o}", "type", type, "data",
			      data ? data : json_object());
	json_object_set_new(e, "taskId",
			    task_id ? json_string(task_id) : json_null());
	json_array_append_new(ev->d->events, e);
	ev->d->changed = true;
}

static bool
is_loaded(const struct eval *ev, const struct loaded_task *t)
{
	const struct loaded_execution *x = ev->in->x;
	return x->n_tasks && t >= x->tasks && t < x->tasks + x->n_tasks;
}

static struct added *
added_of(const struct loaded_task *t)
{
	return (struct added *)((char *)t - offsetof(struct added, t));
}

/* Whether b comes after a in the order of attempts (iteration, attempt;
 * an entry written later by this evaluation wins a tie). */
static bool
newer(const struct loaded_task *a, const struct loaded_task *b)
{
	if (!a)
		return true;
	if (b->iteration != a->iteration)
		return b->iteration > a->iteration;
	return b->attempt >= a->attempt;
}

static const struct loaded_task *
latest(const struct eval *ev, const char *ref)
{
	const struct loaded_task *best = NULL;
	const struct loaded_execution *x = ev->in->x;
	for (size_t i = 0; i < x->n_tasks; i++)
		if (strcmp(x->tasks[i].ref, ref) == 0 &&
		    newer(best, &x->tasks[i]))
			best = &x->tasks[i];
	for (size_t i = 0; i < ev->n_added; i++)
		if (strcmp(ev->added[i]->t.ref, ref) == 0 &&
		    newer(best, &ev->added[i]->t))
			best = &ev->added[i]->t;
	return best;
}

/* Whether a later entry of the view stands for the same task. */
static bool
superseded(const struct eval *ev, const struct loaded_task *t)
{
	size_t from = 0;
	if (!is_loaded(ev, t)) {
		while (from < ev->n_added && &ev->added[from]->t != t)
			from++;
		from++;
	}
	for (size_t i = from; i < ev->n_added; i++)
		if (strcmp(ev->added[i]->t.id, t->id) == 0)
			return true;
	return false;
}

static json_t *
task_json(const struct loaded_task *t)
{
	json_t *tj = json_object();
	json_object_set_new(tj, "input",
			    t->input ? json_incref(t->input) : json_object());
	json_object_set_new(tj, "output",
			    t->output ? json_incref(t->output) : json_object());
	json_object_set_new(tj, "status", json_string(t->status));
	json_object_set_new(tj, "taskId", json_string(t->id));
	json_object_set_new(tj, "taskType", json_string(t->task_type));
	json_object_set_new(tj, "retryCount", json_integer(t->attempt));
	json_object_set_new(tj, "iteration", json_integer(t->iteration));
	json_object_set_new(tj, "reasonForIncompletion",
			    t->reason ? json_string(t->reason) : json_null());
	return tj;
}

static json_t *
context(struct eval *ev)
{
	if (ev->ctx)
		return ev->ctx;
	const struct loaded_execution *x = ev->in->x;
	json_t *wf = json_object();
	json_object_set(wf, "input", x->input ? x->input : json_object());
	json_object_set(wf, "variables",
			ev->vars       ? ev->vars
			: x->variables ? x->variables
				       : json_object());
	json_object_set_new(wf, "workflowId", json_string(x->id));
	json_object_set_new(wf, "workflowType", json_string(x->def_name));
	json_object_set_new(wf, "version", json_integer(x->def_version));
	json_object_set_new(wf, "status", json_string(x->status));
	json_object_set_new(wf, "correlationId",
			    x->correlation_id ? json_string(x->correlation_id)
					      : json_null());
	ev->ctx = json_pack("{s:o}", "workflow", wf);
	for (size_t i = 0; i < x->n_tasks; i++) {
		const struct loaded_task *t = latest(ev, x->tasks[i].ref);
		if (t == &x->tasks[i])
			json_object_set_new(ev->ctx, t->ref, task_json(t));
	}
	for (size_t i = 0; i < ev->n_added; i++) {
		const struct loaded_task *t = latest(ev, ev->added[i]->t.ref);
		if (t == &ev->added[i]->t)
			json_object_set_new(ev->ctx, t->ref, task_json(t));
	}
	return ev->ctx;
}

static json_t *
update_of(struct eval *ev)
{
	if (!ev->d->update)
		ev->d->update = json_object();
	ev->d->changed = true;
	return ev->d->update;
}

static bool
row_kept(const json_t *row)
{
	const char *st = json_string_value(json_object_get(row, "status"));
	return st && is_status(st, terminal);
}

static bool
open_in_view(const struct eval *ev, const struct loaded_task *t)
{
	return !t->terminal && !superseded(ev, t);
}

/* The workflow ends: what this evaluation opened is not written, what was
 * open before is cancelled; what finished inline stays (it happened). */
static void
end_workflow(struct eval *ev, const char *status, json_t *output,
	     const char *reason, const char *failed_ref)
{
	if (ev->ended) {
		json_decref(output);
		return;
	}
	ev->ended = true;
	json_t *u = update_of(ev);
	json_object_set_new(u, "status", json_string(status));
	if (output)
		json_object_set_new(u, "output", output);
	if (reason)
		json_object_set_new(u, "reason", json_string(reason));
	if (failed_ref)
		json_object_set_new(u, "failedRef", json_string(failed_ref));

	json_t *kept = json_array();
	size_t i;
	json_t *row;
	json_array_foreach (ev->d->tasks, i, row) {
		if (row_kept(row))
			json_array_append(kept, row);
	}
	json_decref(ev->d->tasks);
	ev->d->tasks = kept;
	json_array_clear(ev->d->retries);
	json_array_clear(ev->d->timers);
	json_t *events = json_array();
	json_t *old;
	json_array_foreach (ev->d->events, i, old) {
		const char *type =
			json_string_value(json_object_get(old, "type"));
		const char *tid =
			json_string_value(json_object_get(old, "taskId"));
		bool drop = false;
		if (tid && (strcmp(type, "TASK_SCHEDULED") == 0 ||
			    strcmp(type, "TASK_IN_PROGRESS") == 0)) {
			drop = true;
			size_t k;
			json_array_foreach (kept, k, row) {
				if (strcmp(json_string_value(
						   json_object_get(row, "id")),
					   tid) == 0)
					drop = false;
			}
		}
		if (!drop)
			json_array_append(events, old);
	}
	json_decref(ev->d->events);
	ev->d->events = events;
	const struct loaded_execution *x = ev->in->x;
	for (i = 0; i < x->n_tasks; i++) {
		const struct loaded_task *t = &x->tasks[i];
		if (t->terminal)
			continue;
		/* Finished by this evaluation (an operator that waited): kept
		 * as it ended, not cancelled. */
		bool finished = false;
		for (size_t k = ev->n_added; k-- > 0 && !finished;) {
			if (strcmp(ev->added[k]->t.id, t->id) == 0) {
				finished = ev->added[k]->t.terminal;
				break;
			}
		}
		if (finished)
			continue;
		json_array_append_new(ev->d->cancel, json_string(t->id));
		event(ev, "TASK_CANCELED", t->id,
		      json_pack("{s:s}", "refName", t->ref));
	}
	json_t *data = json_object();
	if (reason)
		json_object_set_new(data, "reason", json_string(reason));
	if (failed_ref)
		json_object_set_new(data, "failedRef", json_string(failed_ref));
	const char *type =
		strcmp(status, "COMPLETED") == 0    ? "WORKFLOW_COMPLETED"
		: strcmp(status, "TIMED_OUT") == 0  ? "WORKFLOW_TIMED_OUT"
		: strcmp(status, "TERMINATED") == 0 ? "WORKFLOW_TERMINATED"
						    : "WORKFLOW_FAILED";
	event(ev, type, NULL, data);
}

static void fail_workflow(struct eval *ev, const char *status,
			  const char *failed_ref, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
fail_workflow(struct eval *ev, const char *status, const char *failed_ref,
	      const char *fmt, ...)
{
	if (ev->ended)
		return;
	char reason[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	end_workflow(ev, status, NULL, reason, failed_ref);
}

static const struct task_def *
task_def_of(struct eval *ev, const struct wf_task *wt, const char *name)
{
	if (wt->inline_def)
		return wt->inline_def;
	return ev->in->task_def
		       ? ev->in->task_def(ev->in->arg, name ? name : wt->name)
		       : NULL;
}

/* Whether tasks of wt get deadlines (a worker task whose definition has
 * pollTimeoutSeconds or timeoutSeconds). */
static const struct task_def *
deadlines_of(struct eval *ev, const struct wf_task *wt, const char *name)
{
	if (!wt || wt->kind->exec != TASK_EXEC_WORKER)
		return NULL;
	const struct task_def *td = task_def_of(ev, wt, name);
	return td && (td->poll_timeout_seconds > 0 || td->timeout_seconds > 0)
		       ? td
		       : NULL;
}

static void
arm(struct eval *ev, const char *task_id, const char *kind, int64_t seconds,
    const char *policy)
{
	json_t *t = json_pack("{s:s,s:s,s:I}", "taskId", task_id, "kind", kind,
			      "seconds", (json_int_t)seconds);
	if (policy)
		json_object_set_new(t, "policy", json_string(policy));
	json_array_append_new(ev->d->timers, t);
}

/* Fills the keys of input that are absent or null from the template. */
static void
apply_template(json_t *input, const json_t *tmpl)
{
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)tmpl, key, v) {
		json_t *have = json_object_get(input, key);
		if (!have || json_is_null(have))
			json_object_set(input, key, v);
	}
}

static void
queue_reaction(struct eval *ev, const struct loaded_task *t)
{
	if (ev->n_todo == ev->cap_todo) {
		ev->cap_todo = ev->cap_todo ? 2 * ev->cap_todo : 16;
		ev->todo = xrealloc(ev->todo, ev->cap_todo * sizeof(*ev->todo));
	}
	ev->todo[ev->n_todo++] = t;
}

static char *
dup_opt(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* Adds row (a new reference is kept) to the view. */
static struct added *
add_to_view(struct eval *ev, json_t *row)
{
	struct added *a = xcalloc(1, sizeof(*a));
	a->row = json_incref(row);
	struct loaded_task *t = &a->t;
	snprintf(t->id, sizeof(t->id), "%s",
		 json_string_value(json_object_get(row, "id")));
	snprintf(t->workflow_id, sizeof(t->workflow_id), "%s", ev->in->x->id);
	t->ref = xstrdup(json_string_value(json_object_get(row, "refName")));
	t->task_def_name =
		xstrdup(json_string_value(json_object_get(row, "taskDefName")));
	t->task_type =
		xstrdup(json_string_value(json_object_get(row, "taskType")));
	t->iteration =
		(int)json_integer_value(json_object_get(row, "iteration"));
	t->attempt = (int)json_integer_value(json_object_get(row, "attempt"));
	const char *st = json_string_value(json_object_get(row, "status"));
	t->status = xstrdup(st ? st : "SCHEDULED");
	t->terminal = is_status(t->status, terminal);
	t->input = json_incref(json_object_get(row, "input"));
	t->output = json_incref(json_object_get(row, "output"));
	t->reason = dup_opt(json_string_value(json_object_get(row, "reason")));
	t->fork_ref =
		dup_opt(json_string_value(json_object_get(row, "forkRef")));
	t->scheduled_at = xstrdup("");
	if (ev->n_added == ev->cap_added) {
		ev->cap_added = ev->cap_added ? 2 * ev->cap_added : 16;
		ev->added =
			xrealloc(ev->added, ev->cap_added * sizeof(*ev->added));
	}
	ev->added[ev->n_added++] = a;
	if (ev->ctx)
		json_object_set_new(ev->ctx, t->ref, task_json(t));
	ev->d->changed = true;
	return a;
}

static void
free_added(struct added *a)
{
	struct loaded_task *t = &a->t;
	free(t->ref);
	free(t->task_def_name);
	free(t->task_type);
	free(t->status);
	json_decref(t->input);
	json_decref(t->output);
	free(t->reason);
	free(t->scheduled_at);
	free(t->fork_ref);
	json_decref(a->row);
	free(a);
}

static void
status_event(struct eval *ev, const struct loaded_task *t)
{
	char type[64];
	snprintf(type, sizeof(type), "TASK_%s", t->status);
	json_t *data = json_pack("{s:s}", "refName", t->ref);
	if (t->reason)
		json_object_set_new(data, "reason", json_string(t->reason));
	event(ev, type, t->id, data);
}

/* The cache key of a task of wt: its template resolved like its input;
 * a string as it is, any other value as its compact JSON text.  NULL (not
 * cached) when it does not resolve or resolves to null or "". */
static char *
cache_key_of(struct eval *ev, const struct wf_task *wt, const char *key_tmpl)
{
	struct err e = ERR_INIT;
	char where[256];
	snprintf(where, sizeof(where), "%s.cacheConfig.key", wt->path);
	json_t *tmpl = json_string(key_tmpl);
	json_t *v = expr_resolve(tmpl, context(ev), where, &e);
	json_decref(tmpl);
	char *key = NULL;
	if (json_is_string(v) && json_string_length(v) > 0 &&
	    strlen(json_string_value(v)) == json_string_length(v))
		key = xstrdup(json_string_value(v));
	else if (v && !json_is_null(v) && !json_is_string(v))
		key = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY |
					    JSON_SORT_KEYS);
	json_decref(v);
	return key;
}

static void
schedule_as(struct eval *ev, const struct wf_task *wt, int iteration,
	    int attempt, int delay_seconds, bool is_retry, const char *fork_ref)
{
	if (ev->ended)
		return;
	json_t *input;
	if (wt->literal_input) {
		input = json_deep_copy(wt->input_parameters);
	} else {
		struct err e = ERR_INIT;
		char where[256];
		snprintf(where, sizeof(where), "%s.inputParameters", wt->path);
		input = expr_resolve(wt->input_parameters, context(ev), where,
				     &e);
		if (!input) {
			fail_workflow(ev, "FAILED", wt->ref,
				      "could not compute the input of task "
				      "%s: %s",
				      wt->ref, e.msg);
			return;
		}
	}
	if (!json_is_object(input)) {
		json_decref(input);
		input = json_object();
	}
	const struct task_def *td = task_def_of(ev, wt, NULL);
	if (td && td->input_template)
		apply_template(input, td->input_template);
	if (delay_seconds == 0 && !is_retry)
		delay_seconds = wt->start_delay_seconds;

	struct op_run run = {.input = input,
			     .iteration = iteration,
			     .name = wt->name,
			     .type = wt->kind->type};
	if (wt->kind->start)
		wt->kind->start(ev, wt, &run);
	if (ev->ended) {
		json_decref(run.input);
		json_decref(run.output);
		json_decref(run.extra);
		return;
	}
	if (wt->kind->exec == TASK_EXEC_INLINE && !run.status)
		run.status = "COMPLETED";
	/* The workflow task's cacheConfig, else its task definition's. */
	char *cache_key = NULL;
	int cache_ttl = wt->cache_ttl_seconds;
	const char *key_tmpl = wt->cache_key;
	bool cached = false;
	if (!key_tmpl && wt->kind->exec != TASK_EXEC_INLINE) {
		const struct task_def *ctd = task_def_of(ev, wt, run.name);
		const json_t *cc = ctd ? ctd->cache_config : NULL;
		key_tmpl = json_string_value(json_object_get(cc, "key"));
		cache_ttl = (int)json_integer_value(
			json_object_get(cc, "ttlInSecond"));
	}
	if (!run.status && key_tmpl && cache_ttl > 0)
		cache_key = cache_key_of(ev, wt, key_tmpl);
	if (cache_key && ev->in->cache_lookup) {
		json_t *hit =
			ev->in->cache_lookup(ev->in->arg, run.name, cache_key);
		if (hit) {
			run.status = "COMPLETED";
			json_decref(run.output);
			run.output = hit;
			cached = true;
		}
	}

	char id[37];
	uuid_v7(id);
	json_t *row = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:o,s:i}", "id", id,
				"refName", wt->ref, "taskDefName", run.name,
				"taskType", run.type, "iteration", iteration,
				"attempt", attempt, "input", run.input,
				"delaySeconds", delay_seconds);
	if (fork_ref)
		json_object_set_new(row, "forkRef", json_string(fork_ref));
	if (run.extra) {
		json_object_update_missing(row, run.extra);
		json_decref(run.extra);
	}
	if (run.status) {
		json_object_set_new(row, "status", json_string(run.status));
		json_object_set_new(row, "output",
				    run.output ? run.output : json_object());
		run.output = NULL;
		if (run.reason[0])
			json_object_set_new(row, "reason",
					    json_string(run.reason));
	} else if (wt->kind->exec != TASK_EXEC_INLINE) {
		char queue[512];
		snprintf(queue, sizeof(queue), "%s/%s", ev->in->x->ns_name,
			 run.name);
		json_object_set_new(row, "queueName", json_string(queue));
		/* The workflow task's own semaphore (or its inline
		 * definition's) rides on the queue row; the registered
		 * definition's is applied when a worker polls. */
		const char *sem = wt->semaphore    ? wt->semaphore
				  : wt->inline_def ? wt->inline_def->semaphore
						   : NULL;
		if (sem)
			json_object_set_new(row, "semaphore", json_string(sem));
		if (cache_key) {
			json_object_set_new(row, "cacheKey",
					    json_string(cache_key));
			json_object_set_new(row, "cacheTtlSeconds",
					    json_integer(cache_ttl));
		}
	}
	free(cache_key);
	json_decref(run.output);
	if (is_retry)
		json_array_append_new(ev->d->retries,
				      json_integer((json_int_t)json_array_size(
					      ev->d->tasks)));
	json_array_append(ev->d->tasks, row);
	struct added *a = add_to_view(ev, row);
	json_decref(row);
	const struct task_def *dl = deadlines_of(ev, wt, run.name);
	if (!run.status && dl && dl->poll_timeout_seconds > 0)
		arm(ev, id, "scheduleToStart", dl->poll_timeout_seconds, NULL);
	if (!run.status && dl && dl->timeout_seconds > 0)
		arm(ev, id, "taskTimeout", dl->timeout_seconds,
		    timeout_policy_name(dl->timeout_policy));
	event(ev, "TASK_SCHEDULED", id,
	      json_pack("{s:s,s:s,s:i,s:i}", "refName", wt->ref, "taskDefName",
			run.name, "attempt", attempt, "delaySeconds",
			delay_seconds));
	if (!run.status)
		return;
	status_event(ev, &a->t);
	if (cached) {
		json_t *last = json_array_get(
			ev->d->events, json_array_size(ev->d->events) - 1);
		json_object_set_new(json_object_get(last, "data"), "cached",
				    json_true());
	}
	if (a->t.terminal)
		queue_reaction(ev, &a->t);
	else if (wt->kind->opened)
		wt->kind->opened(ev, wt, &a->t);
}

static struct added *rewrite(struct eval *ev, const struct loaded_task *t,
			     const char *status, json_t *input, json_t *output,
			     const char *reason, const char *join_fork);

/* An operator's attempt written SCHEDULED by someone else (a retry through
 * the API) runs now, as if this evaluation had scheduled it. */
static void
run_scheduled(struct eval *ev, const struct wf_task *wt,
	      const struct loaded_task *t)
{
	struct op_run run = {.input = t->input && json_is_object(t->input)
					      ? json_deep_copy(t->input)
					      : json_object(),
			     .iteration = t->iteration,
			     .name = t->task_def_name,
			     .type = t->task_type};
	if (wt->kind->start)
		wt->kind->start(ev, wt, &run);
	if (ev->ended) {
		json_decref(run.input);
		json_decref(run.output);
		json_decref(run.extra);
		return;
	}
	struct added *a =
		rewrite(ev, t, run.status ? run.status : "COMPLETED", run.input,
			run.output ? run.output : json_object(),
			run.reason[0] ? run.reason : NULL, NULL);
	if (run.extra) {
		json_object_update_missing(a->row, run.extra);
		json_decref(run.extra);
	}
	if (a->t.terminal)
		queue_reaction(ev, &a->t);
	else if (wt->kind->opened)
		wt->kind->opened(ev, wt, &a->t);
}

static void
schedule(struct eval *ev, const struct wf_task *wt, int iteration, int attempt,
	 int delay_seconds, bool is_retry)
{
	schedule_as(ev, wt, iteration, attempt, delay_seconds, is_retry, NULL);
}

static bool
has_open_tasks(const struct eval *ev)
{
	const struct loaded_execution *x = ev->in->x;
	for (size_t i = 0; i < x->n_tasks; i++)
		if (open_in_view(ev, &x->tasks[i]))
			return true;
	for (size_t i = 0; i < ev->n_added; i++)
		if (open_in_view(ev, &ev->added[i]->t))
			return true;
	return false;
}

static void
complete_workflow(struct eval *ev, const struct loaded_task *last)
{
	if (ev->ended || has_open_tasks(ev))
		return;
	const struct wf_def *def = ev->in->def;
	json_t *output;
	if (def->output_parameters) {
		struct err e = ERR_INIT;
		output = expr_resolve(def->output_parameters, context(ev),
				      "$.outputParameters", &e);
		if (!output) {
			fail_workflow(
				ev, "FAILED", NULL,
				"could not compute the workflow output: %s",
				e.msg);
			return;
		}
	} else {
		output = last && last->output ? json_incref(last->output)
					      : json_object();
	}
	end_workflow(ev, "COMPLETED", output, NULL, NULL);
}

/* The task after wt in its list, or NULL at the end. */
static const struct wf_task *
next_of(const struct wf_task *wt)
{
	if (!wt->list || wt->index + 1 >= wt->list->n)
		return NULL;
	return &wt->list->items[wt->index + 1];
}

/* The list of wt ran to its end after last: its owner decides what
 * follows; the end of the top-level list completes the workflow. */
static void
list_end(struct eval *ev, const struct wf_task *wt,
	 const struct loaded_task *last)
{
	const struct wf_task *owner = wt->list ? wt->list->owner : NULL;
	if (!owner) {
		complete_workflow(ev, last);
		return;
	}
	if (owner->kind->child_end)
		owner->kind->child_end(ev, owner, last);
	else
		decider_advance(ev, owner, last);
}

void
decider_advance(struct eval *ev, const struct wf_task *wt,
		const struct loaded_task *last)
{
	if (ev->ended)
		return;
	const struct wf_task *next = next_of(wt);
	int iteration = last ? last->iteration : 0;
	if (!next) {
		list_end(ev, wt, last);
		return;
	}
	const struct loaded_task *have = latest(ev, next->ref);
	if (have && have->iteration >= iteration)
		return; /* already scheduled by an earlier evaluation */
	schedule(ev, next, iteration, 0, 0, false);
}

int
decider_retry_delay(const struct task_def *d, int retry)
{
	long delay;
	int base = d ? d->retry_delay_seconds : 60;
	switch (d ? d->retry_logic : RETRY_FIXED) {
	case RETRY_EXPONENTIAL_BACKOFF:
		delay = base;
		for (int i = 1; i < retry && delay < 86400; i++)
			delay *= 2;
		break;
	case RETRY_LINEAR_BACKOFF:
		delay = (long)base *
			(d->backoff_scale_factor > 0 ? d->backoff_scale_factor
						     : 1) *
			retry;
		break;
	default: delay = base;
	}
	if (delay > 86400)
		delay = 86400;
	if (d && d->max_retry_delay_seconds > 0 &&
	    delay > d->max_retry_delay_seconds)
		delay = d->max_retry_delay_seconds;
	return (int)delay;
}

/* Writes a new state of t (same identity); see decider_finish. */
static struct added *
rewrite(struct eval *ev, const struct loaded_task *t, const char *status,
	json_t *input, json_t *output, const char *reason,
	const char *join_fork)
{
	json_t *row =
		json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:s}", "id", t->id,
			  "refName", t->ref, "taskDefName", t->task_def_name,
			  "taskType", t->task_type, "iteration", t->iteration,
			  "attempt", t->attempt, "status", status);
	/* Absent: left as it is (decide_repo.h). */
	if (input)
		json_object_set_new(row, "input", input);
	if (output)
		json_object_set_new(row, "output", output);
	if (reason)
		json_object_set_new(row, "reason", json_string(reason));
	if (t->fork_ref)
		json_object_set_new(row, "forkRef", json_string(t->fork_ref));
	if (join_fork)
		json_object_set_new(row, "joinFork", json_string(join_fork));
	/* One row per identity in a write: a second new state replaces the
	 * first. */
	size_t i;
	json_t *old;
	bool replaced = false;
	json_array_foreach (ev->d->tasks, i, old) {
		if (strcmp(json_string_value(json_object_get(old, "id")),
			   t->id) == 0) {
			json_array_set(ev->d->tasks, i, row);
			replaced = true;
			break;
		}
	}
	if (!replaced)
		json_array_append(ev->d->tasks, row);
	struct added *a = add_to_view(ev, row);
	json_decref(row);
	if (!a->t.input && t->input)
		a->t.input = json_incref(t->input);
	if (!a->t.output && t->output && !join_fork)
		a->t.output = json_incref(t->output);
	if (ev->ctx)
		json_object_set_new(ev->ctx, a->t.ref, task_json(&a->t));
	if (strcmp(t->status, status) != 0)
		status_event(ev, &a->t);
	return a;
}

void
decider_finish(struct eval *ev, const struct loaded_task *t, const char *status,
	       json_t *input, json_t *output, const char *reason,
	       const char *join_fork)
{
	if (ev->ended) {
		json_decref(input);
		json_decref(output);
		return;
	}
	struct added *a =
		rewrite(ev, t, status, input, output, reason, join_fork);
	if (a->t.terminal && !join_fork)
		queue_reaction(ev, &a->t);
}

static void on_success(struct eval *ev, const struct wf_task *wt,
		       const struct loaded_task *t);

/* An open JOIN waiting on the fork that wt belongs to, if any. */
static const struct loaded_task *
open_join_of(struct eval *ev, const struct wf_task *wt, int iteration)
{
	for (const struct wf_task *w = wt; w && w->list; w = w->list->owner) {
		const struct wf_task *owner = w->list->owner;
		if (!owner || owner->kind->nest == NEST_LOOP)
			return NULL;
		if (owner->kind->nest != NEST_FORK &&
		    strcmp(owner->kind->type, "FORK_JOIN_DYNAMIC") != 0)
			continue;
		const struct wf_task *join = next_of(owner);
		if (!join)
			return NULL;
		const struct loaded_task *j = latest(ev, join->ref);
		return j && !j->terminal && j->iteration == iteration ? j
								      : NULL;
	}
	return NULL;
}

/* t failed for good: an optional task becomes COMPLETED_WITH_ERRORS and
 * the workflow goes on; otherwise the workflow fails (and the JOIN that
 * waited for it with it). */
static void
failed_for_good(struct eval *ev, const struct wf_task *wt,
		const struct loaded_task *t, const char *reason)
{
	if (wt->optional) {
		struct added *a = rewrite(ev, t, "COMPLETED_WITH_ERRORS", NULL,
					  NULL, t->reason, NULL);
		json_object_set_new(a->row, "seen", json_true());
		a->t.seen = true;
		on_success(ev, wt, &a->t);
		return;
	}
	const struct loaded_task *j = open_join_of(ev, wt, t->iteration);
	if (j) {
		char why[512];
		snprintf(why, sizeof(why), "branch task %s failed", t->ref);
		struct added *a =
			rewrite(ev, j, "FAILED", NULL, NULL, why, NULL);
		json_object_set_new(a->row, "seen", json_true());
		a->t.seen = true;
	}
	fail_workflow(ev, "FAILED", wt->ref, "%s", reason);
}

static void
retry_or_fail(struct eval *ev, const struct wf_task *wt,
	      const struct loaded_task *t)
{
	const struct task_def *td = task_def_of(ev, wt, t->task_def_name);
	/* Operators are not retried; without a task definition (system tasks
	 * need none) Conductor does not retry either. */
	int retries = wt->kind->exec == TASK_EXEC_INLINE ? 0
		      : wt->retry_count >= 0             ? wt->retry_count
		      : td                               ? td->retry_count
							 : 0;
	size_t prefix = strlen(TIMEOUT_WF_REASON_PREFIX);
	if (strcmp(t->status, "TIMED_OUT") == 0 && t->reason &&
	    strncmp(t->reason, TIMEOUT_WF_REASON_PREFIX, prefix) == 0) {
		fail_workflow(ev, "TIMED_OUT", wt->ref, "task %s timed out: %s",
			      wt->ref, t->reason + prefix);
		return;
	}
	if (t->attempt < retries) {
		schedule_as(ev, wt, t->iteration, t->attempt + 1,
			    decider_retry_delay(td, t->attempt + 1), true,
			    t->fork_ref);
		return;
	}
	char reason[512];
	if (wt->kind->exec == TASK_EXEC_INLINE)
		snprintf(reason, sizeof(reason), "task %s failed: %s", wt->ref,
			 t->reason ? t->reason : t->status);
	else
		snprintf(reason, sizeof(reason),
			 "task %s failed after %d attempts: %s", wt->ref,
			 t->attempt + 1, t->reason ? t->reason : t->status);
	failed_for_good(ev, wt, t, reason);
}

static void
on_success(struct eval *ev, const struct wf_task *wt,
	   const struct loaded_task *t)
{
	if (wt->kind->done)
		wt->kind->done(ev, wt, t);
	else
		decider_advance(ev, wt, t);
}

const struct wf_task *
decider_dynamic_task(struct eval *ev, const struct wf_task *fork,
		     const char *name, const char *ref, const char *type,
		     const json_t *input)
{
	const struct task_kind *kind = task_kind_find(type);
	if (!kind)
		return NULL;
	struct synth *s = xcalloc(1, sizeof(*s));
	s->list.items = &s->task;
	s->list.n = 1;
	s->list.owner = fork;
	struct wf_task *t = &s->task;
	t->name = xstrdup(name);
	t->ref = xstrdup(ref);
	t->type = xstrdup(type);
	t->kind = kind;
	struct strbuf sb = STRBUF_INIT;
	sb_printf(&sb, "%s.dynamicTasks['%s']", fork->path, ref);
	t->path = sb_steal(&sb);
	t->input_parameters =
		json_is_object(input) ? json_deep_copy(input) : json_object();
	t->literal_input = true;
	t->retry_count = -1;
	t->list = &s->list;
	if (ev->n_synth == ev->cap_synth) {
		ev->cap_synth = ev->cap_synth ? 2 * ev->cap_synth : 16;
		ev->synth =
			xrealloc(ev->synth, ev->cap_synth * sizeof(*ev->synth));
	}
	ev->synth[ev->n_synth++] = s;
	return t;
}

/* The definition's task for t, or a dynamic fork's task. */
static const struct wf_task *
task_of(struct eval *ev, const struct loaded_task *t)
{
	if (t->fork_ref) {
		const struct wf_task *fork =
			dsl_find_task(ev->in->def, t->fork_ref);
		if (!fork)
			return NULL;
		return decider_dynamic_task(ev, fork, t->task_def_name, t->ref,
					    t->task_type, t->input);
	}
	return dsl_find_task(ev->in->def, t->ref);
}

static void
mark_seen(struct eval *ev, const struct loaded_task *t)
{
	ev->d->changed = true;
	if (is_loaded(ev, t)) {
		json_array_append_new(ev->d->seen, json_string(t->id));
		return;
	}
	struct added *a = added_of(t);
	a->t.seen = true;
	json_object_set_new(a->row, "seen", json_true());
}

static void
react(struct eval *ev, const struct loaded_task *t)
{
	mark_seen(ev, t);
	const struct wf_task *wt = task_of(ev, t);
	if (is_loaded(ev, t) && deadlines_of(ev, wt, t->task_def_name)) {
		json_array_append_new(ev->d->disarm, json_string(t->id));
		json_array_append_new(ev->d->disarm_since,
				      json_string(t->scheduled_at));
	}
	if (ev->ended)
		return;
	if (latest(ev, t->ref) != t)
		return; /* a later attempt exists: this one is history */
	if (!wt) {
		fail_workflow(ev, "FAILED", t->ref,
			      "task %s is not in definition %s version %d",
			      t->ref, ev->in->def->name, ev->in->def->version);
		return;
	}
	if (is_status(t->status, succeeded))
		on_success(ev, wt, t);
	else if (is_status(t->status, retriable))
		retry_or_fail(ev, wt, t);
	else if (strcmp(t->status, "FAILED_WITH_TERMINAL_ERROR") == 0) {
		char reason[512];
		snprintf(reason, sizeof(reason), "task %s failed: %s", wt->ref,
			 t->reason ? t->reason : "terminal error");
		failed_for_good(ev, wt, t, reason);
	}
	/* CANCELED: nothing follows from it. */
}

/* The workflow ended: its own deadline and those of its tasks go, if it
 * can have any (every task with deadlines is loaded: open ones are in the
 * frontier, finished ones were reacted to). */
static void
disarm_all(struct eval *ev)
{
	bool any = ev->in->def->timeout_seconds > 0;
	const struct loaded_execution *x = ev->in->x;
	for (size_t i = 0; i < x->n_tasks && !any; i++) {
		const struct wf_task *wt =
			dsl_find_task(ev->in->def, x->tasks[i].ref);
		any = x->tasks[i].fork_ref
			      ? true
			      : deadlines_of(ev, wt,
					     x->tasks[i].task_def_name) != NULL;
	}
	if (!any)
		return;
	ev->d->disarm_all = true;
	json_array_clear(ev->d->disarm);
	json_array_clear(ev->d->disarm_since);
}

static int
by_end(const void *a, const void *b)
{
	const struct loaded_task *x = *(const struct loaded_task *const *)a;
	const struct loaded_task *y = *(const struct loaded_task *const *)b;
	int c = strcmp(x->ended_at ? x->ended_at : "",
		       y->ended_at ? y->ended_at : "");
	return c ? c : strcmp(x->id, y->id);
}

static bool
listed_id(const json_t *rows, const char *id)
{
	size_t i;
	json_t *row;
	json_array_foreach ((json_t *)rows, i, row) {
		if (strcmp(json_string_value(json_object_get(row, "id")), id) ==
		    0)
			return true;
	}
	return false;
}

/* A task rewritten by this evaluation carries its own deciderSeenAt and
 * status: it must not also be in seen or cancel (one statement must not
 * change a row twice). */
static void
drop_rewritten(struct eval *ev, json_t **ids)
{
	if (!json_array_size(*ids) || !ev->n_added)
		return;
	json_t *kept = json_array();
	size_t i;
	json_t *id;
	json_array_foreach (*ids, i, id) {
		if (!listed_id(ev->d->tasks, json_string_value(id)))
			json_array_append(kept, id);
	}
	json_decref(*ids);
	*ids = kept;
}

void
decide(const struct decider_input *in, struct decision *d)
{
	memset(d, 0, sizeof(*d));
	d->tasks = json_array();
	d->seen = json_array();
	d->cancel = json_array();
	d->events = json_array();
	d->retries = json_array();
	d->timers = json_array();
	d->disarm = json_array();
	d->disarm_since = json_array();
	struct eval ev = {.in = in, .d = d};
	const struct loaded_execution *x = in->x;

	bool running = strcmp(x->status, "RUNNING") == 0;
	if (strcmp(x->status, "PAUSED") == 0)
		return; /* resume enqueues a fresh evaluation */

	/* Unprocessed tasks, oldest result first. */
	const struct loaded_task **todo =
		xcalloc(x->n_tasks + 1, sizeof(*todo));
	size_t n = 0;
	for (size_t i = 0; i < x->n_tasks; i++)
		if (x->tasks[i].terminal && !x->tasks[i].seen)
			todo[n++] = &x->tasks[i];
	qsort(todo, n, sizeof(*todo), by_end);

	if (!running) {
		/* Ended (terminated, failed…): results still arriving are
		 * acknowledged so they leave the unprocessed index. */
		for (size_t i = 0; i < n; i++) {
			json_array_append_new(d->seen,
					      json_string(todo[i]->id));
			d->changed = true;
		}
		free(todo);
		return;
	}
	for (size_t i = 0; i < n; i++)
		queue_reaction(&ev, todo[i]);
	free(todo);
	ev.n_loaded_todo = ev.n_todo;
	for (size_t i = 0; i < x->n_tasks; i++) {
		const struct loaded_task *t = &x->tasks[i];
		const struct wf_task *wt =
			t->fork_ref ? NULL : dsl_find_task(in->def, t->ref);
		if (wt && !t->terminal && strcmp(t->status, "SCHEDULED") == 0 &&
		    wt->kind->exec == TASK_EXEC_INLINE &&
		    latest(&ev, t->ref) == t)
			run_scheduled(&ev, wt, t);
	}
	if (in->def->tasks.n > 0 && !latest(&ev, in->def->tasks.items[0].ref))
		schedule(&ev, &in->def->tasks.items[0], 0, 0, 0, false);
	for (size_t i = 0; i < ev.n_todo; i++) {
		if (i >= ev.n_loaded_todo &&
		    ++ev.steps > DECIDER_MAX_INLINE_STEPS)
			break; /* the rest stays unseen for the next one */
		react(&ev, ev.todo[i]);
	}
	if (ev.ended)
		disarm_all(&ev);
	drop_rewritten(&ev, &d->seen);
	drop_rewritten(&ev, &d->cancel);
	for (size_t i = 0; i < ev.n_added; i++)
		free_added(ev.added[i]);
	free(ev.added);
	free(ev.todo);
	for (size_t i = 0; i < ev.n_synth; i++) {
		struct wf_task *t = &ev.synth[i]->task;
		free(t->name);
		free(t->ref);
		free(t->type);
		free(t->path);
		json_decref(t->input_parameters);
		free(ev.synth[i]);
	}
	free(ev.synth);
	json_decref(ev.ctx);
	json_decref(ev.vars);
}

void
decision_free(struct decision *d)
{
	json_decref(d->update);
	json_decref(d->tasks);
	json_decref(d->seen);
	json_decref(d->cancel);
	json_decref(d->events);
	json_decref(d->retries);
	json_decref(d->timers);
	json_decref(d->disarm);
	json_decref(d->disarm_since);
	memset(d, 0, sizeof(*d));
}

/* ----------------------------------------- services to the operators */

const struct wf_def *
decider_def(struct eval *ev)
{
	return ev->in->def;
}

const struct loaded_execution *
decider_execution(struct eval *ev)
{
	return ev->in->x;
}

json_t *
decider_context(struct eval *ev)
{
	return context(ev);
}

const struct loaded_task *
decider_latest(struct eval *ev, const char *ref)
{
	return latest(ev, ref);
}

void
decider_schedule(struct eval *ev, const struct wf_task *wt, int iteration,
		 const char *fork_ref)
{
	schedule_as(ev, wt, iteration, 0, 0, false, fork_ref);
}

void
decider_reopen(struct eval *ev, const struct wf_task *wt,
	       const struct loaded_task *old)
{
	schedule_as(ev, wt, old->iteration, old->attempt + 1, 0, false, NULL);
}

size_t
decider_open_in_fork(struct eval *ev, const char *fork_ref, int iteration)
{
	size_t n = 0;
	const struct loaded_execution *x = ev->in->x;
	for (size_t i = 0; i < x->n_tasks; i++) {
		const struct loaded_task *t = &x->tasks[i];
		if (t->fork_ref && strcmp(t->fork_ref, fork_ref) == 0 &&
		    t->iteration == iteration && open_in_view(ev, t))
			n++;
	}
	for (size_t i = 0; i < ev->n_added; i++) {
		const struct loaded_task *t = &ev->added[i]->t;
		if (t->fork_ref && strcmp(t->fork_ref, fork_ref) == 0 &&
		    t->iteration == iteration && open_in_view(ev, t))
			n++;
	}
	return n;
}

void
decider_end_workflow(struct eval *ev, const char *status, json_t *output,
		     const char *reason, const char *failed_ref)
{
	end_workflow(ev, status, output, reason, failed_ref);
}

void
decider_set_variables(struct eval *ev, const json_t *vars)
{
	if (!ev->vars)
		ev->vars = ev->in->x->variables
				   ? json_deep_copy(ev->in->x->variables)
				   : json_object();
	json_object_update(ev->vars, (json_t *)vars);
	json_object_set(update_of(ev), "variables", ev->vars);
	if (ev->ctx)
		json_object_set(json_object_get(ev->ctx, "workflow"),
				"variables", ev->vars);
}

/* ------------------------------------------------ what to load */

static void
add_ref(json_t *set, const char *ref)
{
	size_t i;
	json_t *v;
	json_array_foreach (set, i, v) {
		if (strcmp(json_string_value(v), ref) == 0)
			return;
	}
	json_array_append_new(set, json_string(ref));
}

static void
collect_list(json_t *set, const struct wf_task_list *list)
{
	for (size_t i = 0; i < list->n; i++) {
		const struct wf_task *t = &list->items[i];
		for (size_t k = 0; k < t->n_refs_used; k++)
			add_ref(set, t->refs_used[k]);
		for (size_t k = 0; k < t->n_reads; k++)
			add_ref(set, t->reads[k]);
		for (size_t b = 0; b < t->n_branches; b++)
			collect_list(set, &t->branches[b]);
	}
}

json_t *
decider_refs_to_load(const struct wf_def *def)
{
	json_t *set = json_array();
	collect_list(set, &def->tasks);
	for (size_t k = 0; k < def->n_refs_used; k++)
		add_ref(set, def->refs_used[k]);
	if (def->tasks.n) {
		/* The first task: whether it was ever scheduled is whether the
		 * workflow has started (a pause before the first evaluation
		 * must not make it look started). */
		add_ref(set, def->tasks.items[0].ref);
		add_ref(set, def->tasks.items[def->tasks.n - 1].ref);
	}
	return set;
}
