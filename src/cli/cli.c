#include "cli/cli.h"

#include "client/client.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,
	EXIT_USAGE = 2,
	MAX_OPTS = 8,
	EVENTS_PAGE = 1000, /* events asked for per request */
	MAX_JSON_DEPTH = 64,
	SHOWN_BODY = 200, /* bytes of an answer that is no node-flow error */
};

struct call;

struct opt_spec {
	const char *name; /* without the leading "--" */
	const char *arg;  /* the value's name in the synopsis; NULL: a switch */
	const char *doc;
};

struct verb {
	const char *name;
	const char *args;       /* the arguments' synopsis */
	int min_args, max_args; /* max_args -1: any number */
	int (*run)(struct call *c);
	const struct opt_spec *opts; /* NULL-terminated; NULL: none */
	const char *doc;
};

/* One command being run. */
struct call {
	const struct verb *verb;
	struct client *client;
	char *ns; /* escaped for a path */
	char **args;
	int nargs;
	const char *values[MAX_OPTS]; /* by opts index; NULL: not given, "":
					 a switch given */
};

static int cmd_define(struct call *c);
static int cmd_start(struct call *c);
static int cmd_get(struct call *c);
static int cmd_list(struct call *c);
static int cmd_events(struct call *c);
static int cmd_action(struct call *c);
static int cmd_defs(struct call *c);
static int cmd_tasks(struct call *c);

static const struct opt_spec define_opts[] = {
	{"overwrite", NULL,
	 "replace a workflow definition whose version is registered"},
	{NULL, NULL, NULL},
};
static const struct opt_spec start_opts[] = {
	{"version", "N", "the definition's version (default: the latest)"},
	{"input", "JSON|@FILE", "the workflow's input, a JSON object"},
	{"correlation-id", "ID", "an id of yours to find the workflow by"},
	{"idempotency-key", "KEY",
	 "a second start with this key fails, naming the first workflow"},
	{NULL, NULL, NULL},
};
static const struct opt_spec list_opts[] = {
	{"status", "S[,S...]",
	 "RUNNING, PAUSED, COMPLETED, FAILED, TIMED_OUT, TERMINATED"},
	{"name", "NAME", "workflows of this definition only"},
	{"limit", "N", "rows per page, 1 to 500 (default 50)"},
	{"cursor", "CURSOR", "the page after the one that printed it"},
	{NULL, NULL, NULL},
};
static const struct opt_spec terminate_opts[] = {
	{"reason", "TEXT", "recorded as the workflow's reason"},
	{NULL, NULL, NULL},
};
static const struct opt_spec defs_opts[] = {
	{"all", NULL, "every version, not only the latest of each name"},
	{NULL, NULL, NULL},
};

static const struct verb verbs[] = {
	{"define", "FILE...", 1, -1, cmd_define, define_opts,
	 "register definitions: each file holds a task definition (an object "
	 "without \"tasks\"), a workflow definition (with \"tasks\"), or an "
	 "array of them; \"-\" reads standard input.  Task definitions are "
	 "registered first."},
	{"start", "NAME", 1, 1, cmd_start, start_opts,
	 "start a workflow; prints its id"},
	{"get", "ID", 1, 1, cmd_get, NULL,
	 "print a workflow with its tasks, as JSON"},
	{"list", "", 0, 0, cmd_list, list_opts,
	 "list workflows, newest first; prints the cursor of the next page"},
	{"events", "ID", 1, 1, cmd_events, NULL, "print a workflow's history"},
	{"terminate", "ID", 1, 1, cmd_action, terminate_opts,
	 "terminate a running or paused workflow"},
	{"pause", "ID", 1, 1, cmd_action, NULL,
	 "pause a running workflow: nothing new is scheduled"},
	{"resume", "ID", 1, 1, cmd_action, NULL, "resume a paused workflow"},
	{"retry", "ID", 1, 1, cmd_action, NULL,
	 "retry a failed or timed-out workflow from its failed task"},
	{"defs", "", 0, 0, cmd_defs, defs_opts, "list workflow definitions"},
	{"tasks", "", 0, 0, cmd_tasks, NULL, "list task definitions"},
};

/* ---------------------------------------------------------------- helpers */

/* The value of option name, NULL when it was not given. */
static const char *
opt(const struct call *c, const char *name)
{
	for (int i = 0; c->verb->opts && c->verb->opts[i].name; i++)
		if (strcmp(c->verb->opts[i].name, name) == 0)
			return c->values[i];
	return NULL;
}

/* "/v1/ns/NS" followed by fmt; the caller frees it. */
__attribute__((format(printf, 2, 3))) static char *
path_of(const struct call *c, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	sb_printf(&sb, "/v1/ns/%s", c->ns);
	va_list ap;
	va_start(ap, fmt);
	sb_vprintf(&sb, fmt, ap);
	va_end(ap);
	return sb_steal(&sb);
}

/* How a file is named in messages. */
static const char *
label(const char *path)
{
	return strcmp(path, "-") == 0 ? "standard input" : path;
}

/* The contents of path ("-": standard input); NULL after saying why. */
static char *
read_all(const char *path, size_t *len)
{
	bool in = strcmp(path, "-") == 0;
	FILE *f = in ? stdin : fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "nodeflow: could not open %s: %s\n", path,
			strerror(errno));
		return NULL;
	}
	struct strbuf sb = STRBUF_INIT;
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		sb_append(&sb, buf, n);
	int failed = ferror(f) ? errno : 0;
	if (!in)
		fclose(f);
	if (failed) {
		fprintf(stderr, "nodeflow: could not read %s: %s\n",
			label(path), strerror(failed));
		sb_free(&sb);
		return NULL;
	}
	*len = sb.len;
	return sb_steal(&sb);
}

/* The JSON document in file path; NULL after saying why. */
static json_t *
load_json(const char *path)
{
	size_t len;
	char *text = read_all(path, &len);
	if (!text)
		return NULL;
	struct err e = ERR_INIT;
	json_t *v = json_parse(text, len, MAX_JSON_DEPTH, &e);
	free(text);
	if (!v)
		fprintf(stderr, "nodeflow: %s: %s\n", label(path), e.msg);
	return v;
}

/* Says why an answer is a failure: the server's message and each detail,
 * or the status and the start of the body of an answer that is not a
 * node-flow error.  what (may be NULL) names what was sent. */
static void
print_failure(const char *what, const struct client_response *r,
	      const char *base)
{
	json_t *v = json_loadb(r->body, r->body_len, 0, NULL);
	json_t *err = json_object_get(v, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));
	fprintf(stderr, "nodeflow: %s%s", what ? what : "", what ? ": " : "");
	if (msg) {
		fprintf(stderr, "%s\n", msg);
		size_t i;
		json_t *d;
		json_array_foreach (json_object_get(err, "details"), i, d) {
			const char *p =
				json_string_value(json_object_get(d, "path"));
			const char *m = json_string_value(
				json_object_get(d, "message"));
			fprintf(stderr, "  %s: %s\n", p ? p : "$",
				m ? m : "(no message)");
		}
	} else {
		fprintf(stderr, "%s answered HTTP %ld: %.*s\n", base, r->status,
			(int)(r->body_len > SHOWN_BODY ? SHOWN_BODY
						       : r->body_len),
			r->body);
	}
	json_decref(v);
}

/*
 * Sends a request (body may be NULL); returns the JSON of a 2xx answer (a
 * new reference, JSON null for an empty body), or NULL after saying why.
 * *status (may be NULL) is the answer's status, 0 when none came.
 */
static json_t *
request(struct call *c, const char *what, const char *method, const char *path,
	const json_t *body, long *status)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct client_response r;
	struct err e = ERR_INIT;
	bool answered = client_request(c->client, method, path, text, &r, &e);
	free(text);
	if (status)
		*status = answered ? r.status : 0;
	if (!answered) {
		fprintf(stderr, "nodeflow: %s\n", e.msg);
		return NULL;
	}
	json_t *v = NULL;
	if (r.status < 200 || r.status > 299)
		print_failure(what, &r, client_base_url(c->client));
	else if (r.body_len == 0)
		v = json_null();
	else if (!(v = json_loadb(r.body, r.body_len, 0, NULL)))
		fprintf(stderr,
			"nodeflow: the answer to %s %s is not JSON: %.*s\n",
			method, path,
			(int)(r.body_len > SHOWN_BODY ? SHOWN_BODY
						      : r.body_len),
			r.body);
	client_response_free(&r);
	return v;
}

/* A member of an answer that should be there; NULL after saying so. */
static json_t *
member(json_t *v, const char *key, const char *what)
{
	json_t *m = json_object_get(v, key);
	if (!m)
		fprintf(stderr,
			"nodeflow: the server's answer (%s) has no "
			"\"%s\"\n",
			what, key);
	return m;
}

/* A table cell for a JSON value: text as is, null or absent as "-". */
static char *
cell(const json_t *v)
{
	struct strbuf sb = STRBUF_INIT;
	if (json_is_string(v)) {
		sb_puts(&sb, json_string_value(v));
	} else if (json_is_integer(v)) {
		sb_printf(&sb, "%lld", (long long)json_integer_value(v));
	} else if (!v || json_is_null(v)) {
		sb_puts(&sb, "-");
	} else {
		char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		sb_puts(&sb, text ? text : "?");
		free(text);
	}
	return sb_steal(&sb);
}

/* Rows of text cells, printed in aligned columns. */
struct table {
	size_t ncols;
	char **cells; /* row-major, owned */
	size_t n, cap;
};

static void
table_add(struct table *t, char *owned)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->cells = xrealloc(t->cells, t->cap * sizeof(*t->cells));
	}
	t->cells[t->n++] = owned;
}

static void
table_print(const struct table *t, const char *const *header, const char *empty)
{
	size_t rows = t->n / t->ncols;
	if (!rows) {
		printf("%s\n", empty);
	} else {
		size_t *w = xcalloc(t->ncols, sizeof(*w));
		for (size_t c = 0; c < t->ncols; c++) {
			w[c] = strlen(header[c]);
			for (size_t r = 0; r < rows; r++) {
				size_t n = strlen(t->cells[r * t->ncols + c]);
				w[c] = n > w[c] ? n : w[c];
			}
		}
		for (size_t r = 0; r <= rows; r++) {
			for (size_t c = 0; c < t->ncols; c++) {
				const char *s =
					r ? t->cells[(r - 1) * t->ncols + c]
					  : header[c];
				if (c + 1 < t->ncols)
					printf("%-*s  ", (int)w[c], s);
				else
					printf("%s\n", s);
			}
		}
		free(w);
	}
}

static void
table_free(struct table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->n = t->cap = 0;
}

/* ----------------------------------------------------------------- define */

struct definition {
	const char *file;
	json_t *doc; /* borrowed from the file's document */
};

static bool
is_workflow(const struct definition *d)
{
	return json_object_get(d->doc, "tasks") != NULL;
}

static const char *
name_of(const struct definition *d)
{
	const char *name = json_string_value(json_object_get(d->doc, "name"));
	return name ? name : "(no name)";
}

static bool
define_task(struct call *c, const struct definition *d)
{
	const char *name = json_string_value(json_object_get(d->doc, "name"));
	if (!name || !*name) {
		fprintf(stderr,
			"nodeflow: %s: a task definition needs a \"name\"\n",
			d->file);
		return false;
	}
	char *esc = client_escape(name);
	char *path = path_of(c, "/task-definitions/%s", esc);
	struct strbuf what = STRBUF_INIT;
	sb_printf(&what, "%s: task definition %s", d->file, name);
	long status;
	json_t *v = request(c, sb_str(&what), "PUT", path, d->doc, &status);
	if (v)
		printf("%s task definition %s\n",
		       status == 201 ? "registered" : "updated", name);
	json_decref(v);
	sb_free(&what);
	free(path);
	free(esc);
	return v != NULL;
}

static bool
define_workflow(struct call *c, const struct definition *d)
{
	bool overwrite = opt(c, "overwrite") != NULL;
	char *path = path_of(c, "/workflow-definitions%s",
			     overwrite ? "?overwrite=true" : "");
	struct strbuf what = STRBUF_INIT;
	sb_printf(&what, "%s: workflow definition %s", d->file, name_of(d));
	long status;
	json_t *v = request(c, sb_str(&what), "POST", path, d->doc, &status);
	if (v) {
		char *version = cell(json_object_get(v, "version"));
		printf("%s workflow definition %s version %s\n",
		       status == 201 ? "registered" : "replaced", name_of(d),
		       version);
		free(version);
	} else if (status == 409 && !overwrite) {
		fprintf(stderr, "nodeflow: (define --overwrite replaces it)\n");
	}
	json_decref(v);
	sb_free(&what);
	free(path);
	return v != NULL;
}

static int
cmd_define(struct call *c)
{
	json_t **docs = xcalloc((size_t)c->nargs, sizeof(*docs));
	struct definition *defs = NULL;
	size_t n = 0, cap = 0;
	int rc = EXIT_OK;
	for (int i = 0; i < c->nargs && rc == EXIT_OK; i++) {
		const char *file = label(c->args[i]);
		json_t *doc = docs[i] = load_json(c->args[i]);
		if (!doc) {
			rc = EXIT_FAIL;
			break;
		}
		size_t count = json_is_array(doc) ? json_array_size(doc) : 1;
		for (size_t k = 0; k < count; k++) {
			json_t *item = json_is_array(doc)
					       ? json_array_get(doc, k)
					       : doc;
			if (!json_is_object(item)) {
				if (json_is_array(doc))
					fprintf(stderr,
						"nodeflow: %s: item %zu is not "
						"a JSON object\n",
						file, k);
				else
					fprintf(stderr,
						"nodeflow: %s: not a definition "
						"(a JSON object) or an array of "
						"them\n",
						file);
				rc = EXIT_FAIL;
				break;
			}
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				defs = xrealloc(defs, cap * sizeof(*defs));
			}
			defs[n++] = (struct definition){file, item};
		}
	}
	/* Task definitions first: the workflow definitions may need them. */
	for (int pass = 0; pass < 2 && rc == EXIT_OK; pass++) {
		for (size_t i = 0; i < n && rc == EXIT_OK; i++) {
			if (is_workflow(&defs[i]) != (pass == 1))
				continue;
			bool ok = pass ? define_workflow(c, &defs[i])
				       : define_task(c, &defs[i]);
			if (!ok)
				rc = EXIT_FAIL;
		}
	}
	for (int i = 0; i < c->nargs; i++)
		json_decref(docs[i]);
	free(docs);
	free(defs);
	return rc;
}

/* ------------------------------------------------------------------ start */

/* Sets key to the text value; false after saying so when it is not UTF-8. */
static bool
set_text(json_t *o, const char *key, const char *value, const char *what)
{
	json_t *s = json_string(value);
	if (!s) {
		fprintf(stderr, "nodeflow: %s is not valid UTF-8\n", what);
		return false;
	}
	json_object_set_new(o, key, s);
	return true;
}

static int
cmd_start(struct call *c)
{
	json_t *body = json_object();
	int rc = EXIT_USAGE;
	const char *version = opt(c, "version");
	const char *input = opt(c, "input");
	if (!set_text(body, "name", c->args[0], "NAME") ||
	    !(!opt(c, "correlation-id") ||
	      set_text(body, "correlationId", opt(c, "correlation-id"),
		       "--correlation-id")) ||
	    !(!opt(c, "idempotency-key") ||
	      set_text(body, "idempotencyKey", opt(c, "idempotency-key"),
		       "--idempotency-key")))
		goto out;
	if (version) {
		char *end;
		errno = 0;
		long long v = strtoll(version, &end, 10);
		if (errno || end == version || *end) {
			fprintf(stderr,
				"nodeflow: --version: \"%s\" is not a whole "
				"number\n",
				version);
			goto out;
		}
		json_object_set_new(body, "version", json_integer(v));
	}
	if (input) {
		json_t *v;
		if (input[0] == '@') {
			if (!(v = load_json(input + 1))) {
				rc = EXIT_FAIL;
				goto out;
			}
		} else {
			struct err e = ERR_INIT;
			v = json_parse(input, strlen(input), MAX_JSON_DEPTH,
				       &e);
			if (!v) {
				fprintf(stderr, "nodeflow: --input: %s\n",
					e.msg);
				goto out;
			}
		}
		json_object_set_new(body, "input", v);
	}
	char *path = path_of(c, "/workflows");
	json_t *v = request(c, NULL, "POST", path, body, NULL);
	free(path);
	rc = EXIT_FAIL;
	json_t *id = v ? member(v, "id", "start") : NULL;
	if (id) {
		printf("%s\n", json_string_value(id));
		if (json_is_true(json_object_get(v, "existing")))
			fprintf(stderr,
				"nodeflow: a workflow with this idempotency key "
				"exists; that is its id\n");
		rc = EXIT_OK;
	}
	json_decref(v);
out:
	json_decref(body);
	return rc;
}

/* --------------------------------------------------------- get and events */

static int
cmd_get(struct call *c)
{
	char *id = client_escape(c->args[0]);
	char *path = path_of(c, "/workflows/%s", id);
	json_t *v = request(c, NULL, "GET", path, NULL, NULL);
	if (v) {
		char *text = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
		printf("%s\n", text);
		free(text);
	}
	json_decref(v);
	free(path);
	free(id);
	return v ? EXIT_OK : EXIT_FAIL;
}

static int
cmd_events(struct call *c)
{
	static const char *const header[] = {"SEQ", "AT", "TYPE", "TASK",
					     "DATA"};
	struct table t = {.ncols = 5};
	char *id = client_escape(c->args[0]);
	long long after = 0;
	int rc = EXIT_OK;
	for (;;) {
		char *path =
			path_of(c, "/workflows/%s/events?after=%lld&limit=%d",
				id, after, EVENTS_PAGE);
		json_t *v = request(c, NULL, "GET", path, NULL, NULL);
		free(path);
		json_t *events = v ? member(v, "events", "events") : NULL;
		if (!events) {
			json_decref(v);
			rc = EXIT_FAIL;
			break;
		}
		long long before = after;
		size_t i;
		json_t *ev;
		json_array_foreach (events, i, ev) {
			json_t *seq = json_object_get(ev, "seq");
			json_t *data = json_object_get(ev, "data");
			after = json_integer_value(seq);
			table_add(&t, cell(seq));
			table_add(&t, cell(json_object_get(ev, "at")));
			table_add(&t, cell(json_object_get(ev, "type")));
			table_add(&t, cell(json_object_get(ev, "taskId")));
			table_add(&t, (json_is_object(data) &&
				       json_object_size(data) == 0)
					      ? xstrdup("")
					      : cell(data));
		}
		size_t got = json_array_size(events);
		json_decref(v);
		if (got < EVENTS_PAGE || after <= before) /* no progress */
			break;
	}
	if (rc == EXIT_OK)
		table_print(&t, header, "no events");
	table_free(&t);
	free(id);
	return rc;
}

/* ------------------------------------------------------------------- list */

static void
add_query(struct strbuf *q, const char *name, const char *value)
{
	if (!value)
		return;
	char *esc = client_escape(value);
	sb_printf(q, "%c%s=%s", q->len ? '&' : '?', name, esc);
	free(esc);
}

static int
cmd_list(struct call *c)
{
	static const char *const header[] = {"ID", "NAME", "VERSION", "STATUS",
					     "STARTED"};
	struct strbuf q = STRBUF_INIT;
	char *status = opt(c, "status") ? xstrdup(opt(c, "status")) : NULL;
	for (char *p = status; p && *p; p++)
		*p = (char)toupper((unsigned char)*p);
	add_query(&q, "status", status);
	add_query(&q, "name", opt(c, "name"));
	add_query(&q, "limit", opt(c, "limit"));
	add_query(&q, "cursor", opt(c, "cursor"));
	char *path = path_of(c, "/workflows%s", sb_str(&q));
	json_t *v = request(c, NULL, "GET", path, NULL, NULL);
	json_t *items = v ? member(v, "items", "list") : NULL;
	if (items) {
		struct table t = {.ncols = 5};
		size_t i;
		json_t *w;
		json_array_foreach (items, i, w) {
			table_add(&t, cell(json_object_get(w, "id")));
			table_add(&t, cell(json_object_get(w, "name")));
			table_add(&t, cell(json_object_get(w, "version")));
			table_add(&t, cell(json_object_get(w, "status")));
			table_add(&t, cell(json_object_get(w, "startedAt")));
		}
		table_print(&t, header, "no workflows");
		table_free(&t);
		const char *next =
			json_string_value(json_object_get(v, "nextCursor"));
		if (next)
			printf("next cursor: %s\n", next);
	}
	json_decref(v);
	free(path);
	free(status);
	sb_free(&q);
	return items ? EXIT_OK : EXIT_FAIL;
}

/* ---------------------------------------------------------------- actions */

/* terminate, pause, resume, retry: the verb is the action. */
static int
cmd_action(struct call *c)
{
	json_t *body = json_object();
	const char *reason = opt(c, "reason");
	if (reason && !set_text(body, "reason", reason, "--reason")) {
		json_decref(body);
		return EXIT_USAGE;
	}
	char *id = client_escape(c->args[0]);
	char *path = path_of(c, "/workflows/%s/%s", id, c->verb->name);
	json_t *v = request(c, NULL, "POST", path, body, NULL);
	json_t *status = v ? member(v, "status", c->verb->name) : NULL;
	if (status)
		printf("workflow %s is %s\n", c->args[0],
		       json_string_value(status));
	json_decref(v);
	json_decref(body);
	free(path);
	free(id);
	return status ? EXIT_OK : EXIT_FAIL;
}

/* ------------------------------------------------------------ definitions */

static int
cmd_defs(struct call *c)
{
	static const char *const header[] = {"NAME", "VERSION", "TASKS",
					     "DESCRIPTION"};
	char *path = path_of(c, "/workflow-definitions%s",
			     opt(c, "all") ? "?allVersions=true" : "");
	json_t *v = request(c, NULL, "GET", path, NULL, NULL);
	json_t *items = v ? member(v, "items", "defs") : NULL;
	if (items) {
		struct table t = {.ncols = 4};
		size_t i;
		json_t *d;
		json_array_foreach (items, i, d) {
			json_t *tasks = json_object_get(d, "tasks");
			json_t *desc = json_object_get(d, "description");
			table_add(&t, cell(json_object_get(d, "name")));
			table_add(&t, cell(json_object_get(d, "version")));
			struct strbuf n = STRBUF_INIT;
			sb_printf(&n, "%zu", json_array_size(tasks));
			table_add(&t, sb_steal(&n));
			table_add(&t, desc ? cell(desc) : xstrdup(""));
		}
		table_print(&t, header, "no workflow definitions");
		table_free(&t);
	}
	json_decref(v);
	free(path);
	return items ? EXIT_OK : EXIT_FAIL;
}

static int
cmd_tasks(struct call *c)
{
	static const char *const header[] = {"NAME", "RETRIES", "TIMEOUT",
					     "DESCRIPTION"};
	char *path = path_of(c, "/task-definitions");
	json_t *v = request(c, NULL, "GET", path, NULL, NULL);
	json_t *items = v ? member(v, "items", "tasks") : NULL;
	if (items) {
		struct table t = {.ncols = 4};
		size_t i;
		json_t *d;
		json_array_foreach (items, i, d) {
			json_t *desc = json_object_get(d, "description");
			table_add(&t, cell(json_object_get(d, "name")));
			table_add(&t, cell(json_object_get(d, "retryCount")));
			table_add(&t,
				  cell(json_object_get(d, "timeoutSeconds")));
			table_add(&t, desc ? cell(desc) : xstrdup(""));
		}
		table_print(&t, header, "no task definitions");
		table_free(&t);
	}
	json_decref(v);
	free(path);
	return items ? EXIT_OK : EXIT_FAIL;
}

/* ---------------------------------------------------------- command line */

static const struct verb *
find_verb(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_LEN(verbs); i++)
		if (strcmp(verbs[i].name, name) == 0)
			return &verbs[i];
	return NULL;
}

bool
cli_is_verb(const char *verb)
{
	return find_verb(verb) != NULL;
}

static void
synopsis(const struct verb *v, FILE *out)
{
	fprintf(out, "usage: nodeflow %s%s%s", v->name, *v->args ? " " : "",
		v->args);
	for (const struct opt_spec *o = v->opts; o && o->name; o++)
		fprintf(out, " [--%s%s%s]", o->name, o->arg ? " " : "",
			o->arg ? o->arg : "");
	fprintf(out, "\n");
}

static void
help(const struct verb *v)
{
	synopsis(v, stdout);
	printf("\n%s\n", v->doc);
	if (v->opts)
		printf("\noptions:\n");
	for (const struct opt_spec *o = v->opts; o && o->name; o++)
		printf("  --%s%s%s\n      %s\n", o->name, o->arg ? " " : "",
		       o->arg ? o->arg : "", o->doc);
	printf("\nglobal options (see nodeflow help):\n"
	       "  --server URL       (env NODEFLOW_SERVER)\n"
	       "  --namespace NAME   (env NODEFLOW_NAMESPACE)\n");
}

__attribute__((format(printf, 2, 3))) static int
usage_error(const struct verb *v, const char *fmt, ...)
{
	fprintf(stderr, "nodeflow %s: ", v->name);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	synopsis(v, stderr);
	return EXIT_USAGE;
}

enum { PARSED = -1, HELP = -2 };

/* Fills c from argv[2…]; PARSED, HELP, or EXIT_USAGE after saying why. */
static int
parse(struct call *c, int argc, char **argv, const struct cli_globals *g)
{
	const struct verb *v = c->verb;
	bool ended = false; /* after "--", everything is an argument */
	for (int i = 2; i < argc;) {
		const char *a = argv[i];
		if (ended || a[0] != '-' || strcmp(a, "-") == 0) {
			c->args[c->nargs++] = argv[i++];
			continue;
		}
		if (strcmp(a, "--") == 0) {
			ended = true;
			i++;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return HELP;
		const char *name = a + 2, *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		int k = 0;
		while (a[1] == '-' && v->opts && v->opts[k].name &&
		       !(strlen(v->opts[k].name) == len &&
			 strncmp(v->opts[k].name, name, len) == 0))
			k++;
		if (a[1] == '-' && v->opts && v->opts[k].name) {
			const struct opt_spec *o = &v->opts[k];
			if (!o->arg && eq)
				return usage_error(v, "--%s takes no value",
						   o->name);
			if (o->arg && !eq && i + 1 >= argc)
				return usage_error(v, "--%s needs a value",
						   o->name);
			c->values[k] = !o->arg ? "" : eq ? eq + 1 : argv[++i];
			i++;
			continue;
		}
		bool known = false;
		struct err e = ERR_INIT;
		if (a[1] == '-' &&
		    !g->option(g->arg, argc, argv, &i, &known, &e))
			return usage_error(v, "%s", e.msg);
		if (!known)
			return usage_error(v,
					   "unknown option \"%s\" (see "
					   "nodeflow %s --help)",
					   a, v->name);
	}
	if (c->nargs < v->min_args)
		return usage_error(v, "%s is missing", v->args);
	if (v->max_args >= 0 && c->nargs > v->max_args)
		return usage_error(v, "unexpected argument \"%s\"",
				   c->args[v->max_args]);
	return PARSED;
}

int
cli_main(int argc, char **argv, const struct cli_globals *g)
{
	struct call c = {.verb = find_verb(argc > 1 ? argv[1] : NULL)};
	if (!c.verb) {
		fprintf(stderr, "nodeflow: unknown command\n");
		return EXIT_USAGE;
	}
	c.args = xcalloc((size_t)argc, sizeof(*c.args));
	int rc = parse(&c, argc, argv, g);
	if (rc == HELP) {
		help(c.verb);
		rc = EXIT_OK;
	} else if (rc == PARSED) {
		c.client = client_open(*g->server);
		c.ns = client_escape(*g->ns);
		rc = c.verb->run(&c);
		client_close(c.client);
		free(c.ns);
	}
	free(c.args);
	return rc;
}
