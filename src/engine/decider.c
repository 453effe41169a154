#include "engine/decider.h"

#include "engine/expr.h"
#include "store/timers_repo.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one evaluation is building. */
struct eval {
	const struct decider_input *in;
	struct decision *d;
	json_t *ctx;        /* expression context, built on first use */
	bool ended;         /* the workflow reached a terminal status */
	size_t n_scheduled; /* tasks scheduled by this evaluation */
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

/* The latest attempt of ref among the loaded tasks, or NULL. */
static const struct loaded_task *
latest(const struct loaded_execution *x, const char *ref)
{
	const struct loaded_task *best = NULL;
	for (size_t i = 0; i < x->n_tasks; i++) {
		const struct loaded_task *t = &x->tasks[i];
		if (strcmp(t->ref, ref) != 0)
			continue;
		if (!best || t->iteration > best->iteration ||
		    (t->iteration == best->iteration &&
		     t->attempt > best->attempt))
			best = t;
	}
	return best;
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
			x->variables ? x->variables : json_object());
	json_object_set_new(wf, "workflowId", json_string(x->id));
	json_object_set_new(wf, "workflowType", json_string(x->def_name));
	json_object_set_new(wf, "version", json_integer(x->def_version));
	json_object_set_new(wf, "status", json_string(x->status));
	json_object_set_new(wf, "correlationId",
			    x->correlation_id ? json_string(x->correlation_id)
					      : json_null());
	ev->ctx = json_pack("{s:o}", "workflow", wf);
	for (size_t i = 0; i < x->n_tasks; i++) {
		const struct loaded_task *t = latest(x, x->tasks[i].ref);
		if (t != &x->tasks[i])
			continue;
		json_t *tj = json_object();
		json_object_set(tj, "input",
				t->input ? t->input : json_object());
		json_object_set(tj, "output",
				t->output ? t->output : json_object());
		json_object_set_new(tj, "status", json_string(t->status));
		json_object_set_new(tj, "taskId", json_string(t->id));
		json_object_set_new(tj, "taskType", json_string(t->task_type));
		json_object_set_new(tj, "retryCount", json_integer(t->attempt));
		json_object_set_new(tj, "iteration",
				    json_integer(t->iteration));
		json_object_set_new(tj, "reasonForIncompletion",
				    t->reason ? json_string(t->reason)
					      : json_null());
		json_object_set_new(ev->ctx, t->ref, tj);
	}
	return ev->ctx;
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
	ev->ended = true;
	ev->d->update =
		json_pack("{s:s,s:s}", "status", status, "reason", reason);
	if (failed_ref)
		json_object_set_new(ev->d->update, "failedRef",
				    json_string(failed_ref));
	/* Tasks this evaluation scheduled are dropped instead of written,
	 * with their events; what is still open is cancelled. */
	json_array_clear(ev->d->tasks);
	json_array_clear(ev->d->retries);
	json_array_clear(ev->d->timers);
	ev->n_scheduled = 0;
	json_t *kept = json_array();
	size_t i;
	json_t *old;
	json_array_foreach (ev->d->events, i, old) {
		const char *type =
			json_string_value(json_object_get(old, "type"));
		if (strcmp(type, "TASK_SCHEDULED") != 0)
			json_array_append(kept, old);
	}
	json_decref(ev->d->events);
	ev->d->events = kept;
	const struct loaded_execution *x = ev->in->x;
	for (i = 0; i < x->n_tasks; i++) {
		if (x->tasks[i].terminal)
			continue;
		json_array_append_new(ev->d->cancel,
				      json_string(x->tasks[i].id));
		event(ev, "TASK_CANCELED", x->tasks[i].id,
		      json_pack("{s:s}", "refName", x->tasks[i].ref));
	}
	json_t *data = json_pack("{s:s}", "reason", reason);
	if (failed_ref)
		json_object_set_new(data, "failedRef", json_string(failed_ref));
	event(ev,
	      strcmp(status, "TIMED_OUT") == 0 ? "WORKFLOW_TIMED_OUT"
					       : "WORKFLOW_FAILED",
	      NULL, data);
}

static const struct task_def *
task_def_of(struct eval *ev, const struct wf_task *wt)
{
	if (wt->inline_def)
		return wt->inline_def;
	return ev->in->task_def ? ev->in->task_def(ev->in->arg, wt->name)
				: NULL;
}

/* Whether tasks of wt get deadlines (a worker task whose definition has
 * pollTimeoutSeconds or timeoutSeconds). */
static const struct task_def *
deadlines_of(struct eval *ev, const struct wf_task *wt)
{
	if (!wt || wt->kind->exec != TASK_EXEC_WORKER)
		return NULL;
	const struct task_def *td = task_def_of(ev, wt);
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
schedule(struct eval *ev, const struct wf_task *wt, int attempt,
	 int delay_seconds, bool is_retry)
{
	if (ev->ended)
		return;
	struct err e = ERR_INIT;
	char where[256];
	snprintf(where, sizeof(where), "%s.inputParameters", wt->path);
	json_t *input =
		expr_resolve(wt->input_parameters, context(ev), where, &e);
	if (!input) {
		fail_workflow(ev, "FAILED", wt->ref,
			      "could not compute the input of task %s: %s",
			      wt->ref, e.msg);
		return;
	}
	if (!json_is_object(input)) {
		json_decref(input);
		input = json_object();
	}
	const struct task_def *td = task_def_of(ev, wt);
	if (td && td->input_template)
		apply_template(input, td->input_template);
	if (delay_seconds == 0 && !is_retry)
		delay_seconds = wt->start_delay_seconds;

	char id[37];
	uuid_v7(id);
	json_t *row = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:o,s:i}", "id", id,
				"refName", wt->ref, "taskDefName", wt->name,
				"taskType", wt->kind->type, "iteration", 0,
				"attempt", attempt, "input", input,
				"delaySeconds", delay_seconds);
	if (wt->kind->exec != TASK_EXEC_INLINE) {
		char queue[512];
		snprintf(queue, sizeof(queue), "%s/%s", ev->in->x->ns_name,
			 wt->name);
		json_object_set_new(row, "queueName", json_string(queue));
	}
	if (is_retry)
		json_array_append_new(ev->d->retries,
				      json_integer((json_int_t)json_array_size(
					      ev->d->tasks)));
	json_array_append_new(ev->d->tasks, row);
	ev->n_scheduled++;
	const struct task_def *dl = deadlines_of(ev, wt);
	if (dl && dl->poll_timeout_seconds > 0)
		arm(ev, id, "scheduleToStart", dl->poll_timeout_seconds, NULL);
	if (dl && dl->timeout_seconds > 0)
		arm(ev, id, "taskTimeout", dl->timeout_seconds,
		    timeout_policy_name(dl->timeout_policy));
	event(ev, "TASK_SCHEDULED", id,
	      json_pack("{s:s,s:s,s:i,s:i}", "refName", wt->ref, "taskDefName",
			wt->name, "attempt", attempt, "delaySeconds",
			delay_seconds));
}

static bool
has_open_tasks(const struct eval *ev)
{
	const struct loaded_execution *x = ev->in->x;
	for (size_t i = 0; i < x->n_tasks; i++)
		if (!x->tasks[i].terminal)
			return true;
	return false;
}

static void
complete_workflow(struct eval *ev, const struct loaded_task *last)
{
	if (ev->ended || ev->n_scheduled || has_open_tasks(ev))
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
	ev->ended = true;
	ev->d->update =
		json_pack("{s:s,s:o}", "status", "COMPLETED", "output", output);
	event(ev, "WORKFLOW_COMPLETED", NULL, NULL);
}

/* The task after wt in its list, or NULL at the end. */
static const struct wf_task *
next_of(const struct wf_task *wt)
{
	if (!wt->list || wt->index + 1 >= wt->list->n)
		return NULL;
	return &wt->list->items[wt->index + 1];
}

static void
advance(struct eval *ev, const struct wf_task *wt, const struct loaded_task *t)
{
	const struct wf_task *next = next_of(wt);
	if (!next) {
		complete_workflow(ev, t);
		return;
	}
	if (latest(ev->in->x, next->ref))
		return; /* already scheduled by an earlier evaluation */
	schedule(ev, next, 0, 0, false);
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

static void
retry_or_fail(struct eval *ev, const struct wf_task *wt,
	      const struct loaded_task *t)
{
	const struct task_def *td = task_def_of(ev, wt);
	/* Without a task definition (system tasks need none) Conductor does
	 * not retry. */
	int retries = wt->retry_count >= 0 ? wt->retry_count
		      : td                 ? td->retry_count
					   : 0;
	size_t prefix = strlen(TIMEOUT_WF_REASON_PREFIX);
	if (strcmp(t->status, "TIMED_OUT") == 0 && t->reason &&
	    strncmp(t->reason, TIMEOUT_WF_REASON_PREFIX, prefix) == 0) {
		fail_workflow(ev, "TIMED_OUT", wt->ref, "task %s timed out: %s",
			      wt->ref, t->reason + prefix);
		return;
	}
	if (t->attempt < retries) {
		schedule(ev, wt, t->attempt + 1,
			 decider_retry_delay(td, t->attempt + 1), true);
		return;
	}
	fail_workflow(ev, "FAILED", wt->ref,
		      "task %s failed after %d attempts: %s", wt->ref,
		      t->attempt + 1, t->reason ? t->reason : t->status);
}

static void
react(struct eval *ev, const struct loaded_task *t)
{
	json_array_append_new(ev->d->seen, json_string(t->id));
	ev->d->changed = true;
	const struct wf_task *wt = dsl_find_task(ev->in->def, t->ref);
	if (deadlines_of(ev, wt)) {
		json_array_append_new(ev->d->disarm, json_string(t->id));
		json_array_append_new(ev->d->disarm_since,
				      json_string(t->scheduled_at));
	}
	if (ev->ended)
		return;
	if (latest(ev->in->x, t->ref) != t)
		return; /* a later attempt exists: this one is history */
	if (!wt) {
		fail_workflow(ev, "FAILED", t->ref,
			      "task %s is not in definition %s version %d",
			      t->ref, ev->in->def->name, ev->in->def->version);
		return;
	}
	if (is_status(t->status, succeeded))
		advance(ev, wt, t);
	else if (is_status(t->status, retriable))
		retry_or_fail(ev, wt, t);
	else if (strcmp(t->status, "FAILED_WITH_TERMINAL_ERROR") == 0)
		fail_workflow(ev, "FAILED", wt->ref, "task %s failed: %s",
			      wt->ref,
			      t->reason ? t->reason : "terminal error");
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
	for (size_t i = 0; i < x->n_tasks && !any; i++)
		any = deadlines_of(ev, dsl_find_task(ev->in->def,
						     x->tasks[i].ref)) != NULL;
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
	if (x->version == 0 && x->n_tasks == 0 && in->def->tasks.n > 0)
		schedule(&ev, &in->def->tasks.items[0], 0, 0, false);
	for (size_t i = 0; i < n; i++)
		react(&ev, todo[i]);
	free(todo);
	if (ev.ended)
		disarm_all(&ev);
	json_decref(ev.ctx);
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
	if (def->tasks.n)
		add_ref(set, def->tasks.items[def->tasks.n - 1].ref);
	return set;
}
