#include "engine/defcache.h"

#include "util/mem.h"
#include "util/timeutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
	VERSION_TTL_MS = 30000,
	LATEST_TTL_MS = 1000,
	TASK_TTL_MS = 5000,
	MAX_ENTRIES = 4096,
};

enum entry_kind { ENTRY_WORKFLOW, ENTRY_LATEST, ENTRY_TASK };

struct defcache_entry {
	struct defcache_entry *next;
	enum entry_kind kind;
	char ns_id[37];
	char *name;
	int version; /* ENTRY_WORKFLOW: its version; ENTRY_LATEST: the latest */
	int64_t loaded_ms;
	int refs; /* the list's own reference counts as one */
	struct wf_def *wf;
	struct task_def *task;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct defcache_entry *head;
static size_t count;

static void
unref(struct defcache_entry *en)
{
	if (--en->refs > 0)
		return;
	wf_def_free(en->wf);
	if (en->task) {
		task_def_free(en->task);
		free(en->task);
	}
	free(en->name);
	free(en);
}

/* Removes *p from the list; the caller holds the lock. */
static void
drop(struct defcache_entry **p)
{
	struct defcache_entry *en = *p;
	*p = en->next;
	count--;
	unref(en);
}

static struct defcache_entry *
find(enum entry_kind kind, const char *ns_id, const char *name, int version,
     int ttl_ms)
{
	int64_t now = mono_ms();
	for (struct defcache_entry **p = &head; *p; p = &(*p)->next) {
		struct defcache_entry *en = *p;
		if (en->kind != kind || strcmp(en->ns_id, ns_id) != 0 ||
		    strcmp(en->name, name) != 0 ||
		    (kind == ENTRY_WORKFLOW && en->version != version))
			continue;
		if (now - en->loaded_ms > ttl_ms) {
			drop(p);
			return NULL;
		}
		return en;
	}
	return NULL;
}

static struct defcache_entry *
insert(enum entry_kind kind, const char *ns_id, const char *name, int version)
{
	if (count >= MAX_ENTRIES) {
		/* Keep the newer half; entries lent out live on through their
		 * references. */
		size_t i = 0;
		for (struct defcache_entry **p = &head; *p;) {
			if (i++ >= MAX_ENTRIES / 2)
				drop(p);
			else
				p = &(*p)->next;
		}
	}
	struct defcache_entry *en = xcalloc(1, sizeof(*en));
	en->kind = kind;
	memcpy(en->ns_id, ns_id, 37);
	en->name = xstrdup(name);
	en->version = version;
	en->loaded_ms = mono_ms();
	en->refs = 1;
	en->next = head;
	head = en;
	count++;
	return en;
}

static int
latest_version(struct db *db, const char *ns_id, const char *name,
	       struct err *e)
{
	pthread_mutex_lock(&lock);
	struct defcache_entry *en =
		find(ENTRY_LATEST, ns_id, name, 0, LATEST_TTL_MS);
	int v = en ? en->version : 0;
	pthread_mutex_unlock(&lock);
	if (v)
		return v;
	struct workflow_def_row row;
	if (!defs_workflow_get(db, ns_id, name, 0, &row, e))
		return 0;
	v = row.version;
	workflow_def_row_free(&row);
	pthread_mutex_lock(&lock);
	if (!find(ENTRY_LATEST, ns_id, name, 0, LATEST_TTL_MS))
		insert(ENTRY_LATEST, ns_id, name, v);
	pthread_mutex_unlock(&lock);
	return v;
}

static void
lend(struct defcache_entry *en, struct def_ref *out)
{
	en->refs++;
	out->entry = en;
	out->wf = en->wf;
	out->task = en->task;
}

bool
defcache_workflow(struct db *db, const char *ns_id, const char *name,
		  int version, struct def_ref *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	if (version == 0 && (version = latest_version(db, ns_id, name, e)) == 0)
		return false;
	pthread_mutex_lock(&lock);
	struct defcache_entry *en =
		find(ENTRY_WORKFLOW, ns_id, name, version, VERSION_TTL_MS);
	if (en) {
		lend(en, out);
		pthread_mutex_unlock(&lock);
		return true;
	}
	pthread_mutex_unlock(&lock);

	struct workflow_def_row row;
	if (!defs_workflow_get(db, ns_id, name, version, &row, e))
		return false;
	struct wf_def *def = NULL;
	struct dsl_errors errs = {0};
	bool ok = dsl_workflow_parse(row.definition, &def, &errs);
	workflow_def_row_free(&row);
	if (!ok) {
		/* Registered definitions were validated; one that no longer
		 * parses was stored by a newer binary. */
		err_set(e, ERR_INTERNAL,
			"stored definition %s version %d does not parse: %s %s",
			name, version, errs.n ? errs.items[0].path : "",
			errs.n ? errs.items[0].message : "");
		dsl_errors_free(&errs);
		return false;
	}
	pthread_mutex_lock(&lock);
	en = find(ENTRY_WORKFLOW, ns_id, name, version, VERSION_TTL_MS);
	if (en) { /* another thread loaded it meanwhile */
		wf_def_free(def);
	} else {
		en = insert(ENTRY_WORKFLOW, ns_id, name, version);
		en->wf = def;
	}
	lend(en, out);
	pthread_mutex_unlock(&lock);
	return true;
}

bool
defcache_snapshot(const json_t *doc, struct def_ref *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	struct wf_def *def = NULL;
	struct dsl_errors errs = {0};
	if (!dsl_workflow_parse(doc, &def, &errs)) {
		err_set(e, ERR_INTERNAL,
			"the execution's own definition does not parse: %s %s",
			errs.n ? errs.items[0].path : "",
			errs.n ? errs.items[0].message : "");
		dsl_errors_free(&errs);
		return false;
	}
	/* Outside the list: the one reference is the borrower's. */
	struct defcache_entry *en = xcalloc(1, sizeof(*en));
	en->kind = ENTRY_WORKFLOW;
	en->name = xstrdup(def->name);
	en->version = def->version;
	en->wf = def;
	pthread_mutex_lock(&lock);
	lend(en, out);
	pthread_mutex_unlock(&lock);
	return true;
}

bool
defcache_task(struct db *db, const char *ns_id, const char *name,
	      struct def_ref *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&lock);
	struct defcache_entry *en =
		find(ENTRY_TASK, ns_id, name, 0, TASK_TTL_MS);
	if (en) {
		lend(en, out);
		pthread_mutex_unlock(&lock);
		return true;
	}
	pthread_mutex_unlock(&lock);

	struct task_def *d = xcalloc(1, sizeof(*d));
	if (!defs_task_get(db, ns_id, name, d, e)) {
		free(d);
		return false;
	}
	pthread_mutex_lock(&lock);
	en = find(ENTRY_TASK, ns_id, name, 0, TASK_TTL_MS);
	if (en) {
		task_def_free(d);
		free(d);
	} else {
		en = insert(ENTRY_TASK, ns_id, name, 0);
		en->task = d;
	}
	lend(en, out);
	pthread_mutex_unlock(&lock);
	return true;
}

void
defcache_release(struct def_ref *ref)
{
	if (!ref->entry)
		return;
	pthread_mutex_lock(&lock);
	unref(ref->entry);
	pthread_mutex_unlock(&lock);
	memset(ref, 0, sizeof(*ref));
}

static void
invalidate(bool workflow, const char *ns_id, const char *name)
{
	pthread_mutex_lock(&lock);
	for (struct defcache_entry **p = &head; *p;) {
		struct defcache_entry *en = *p;
		bool kind_matches = workflow ? en->kind != ENTRY_TASK
					     : en->kind == ENTRY_TASK;
		if (kind_matches && strcmp(en->ns_id, ns_id) == 0 &&
		    strcmp(en->name, name) == 0)
			drop(p);
		else
			p = &(*p)->next;
	}
	pthread_mutex_unlock(&lock);
}

void
defcache_invalidate_workflow(const char *ns_id, const char *name)
{
	invalidate(true, ns_id, name);
}

void
defcache_invalidate_task(const char *ns_id, const char *name)
{
	invalidate(false, ns_id, name);
}
