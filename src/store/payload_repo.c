#include "store/payload_repo.h"

#include "store/sql.h"
#include "store/sqlfrag.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/strbuf.h"
#include "util/uuid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long offload_bytes = PAYLOAD_OFFLOAD_DEFAULT;
static long max_bytes = PAYLOAD_MAX_DEFAULT;
static char *dir; /* NULL: the "Payloads" table */

/* Limits on what a stored reference may look like. */
enum { REF_PREFIX_MAX = 4, UUID_LEN = 36 };

bool
payload_configure(const char *spec, long offload, long max, struct err *e)
{
	if (max < offload) {
		err_set(e, ERR_INVALID,
			"--payload-max-bytes (%ld) must be at least "
			"--payload-offload-bytes (%ld)",
			max, offload);
		return false;
	}
	free(dir);
	dir = NULL;
	if (strcmp(spec, "postgres") != 0) {
		if (strncmp(spec, "dir:", 4) != 0 || spec[4] == '\0') {
			err_set(e, ERR_INVALID,
				"--payload-store: \"%.200s\" is neither "
				"\"postgres\" nor \"dir:/path\"",
				spec);
			return false;
		}
		const char *path = spec + 4;
		if (mkdir(path, 0700) != 0 && errno != EEXIST) {
			err_set(e, ERR_INVALID,
				"--payload-store: cannot create %.200s: %s",
				path, strerror(errno));
			return false;
		}
		if (access(path, W_OK | X_OK) != 0) {
			err_set(e, ERR_INVALID,
				"--payload-store: %.200s is not a writable "
				"directory: %s",
				path, strerror(errno));
			return false;
		}
		dir = xstrdup(path);
	}
	offload_bytes = offload;
	max_bytes = max;
	return true;
}

long
payload_offload_bytes(void)
{
	return offload_bytes;
}

long
payload_max_bytes(void)
{
	return max_bytes;
}

/* ------------------------------------------------------------ the store */

DB_STMT(payload_put_stmt, "INSERT INTO \"Payloads\" (\"id\", \"namespaceId\","
			  " \"data\", \"size\") VALUES ($1::uuid, $2::uuid,"
			  " $3, $4::bigint)");

DB_STMT(payload_get_stmt,
	"SELECT \"data\" FROM \"Payloads\" WHERE \"id\" = $1::uuid");

static void
file_path(struct strbuf *sb, const char *id, const char *suffix)
{
	sb_printf(sb, "%s/%s%s", dir, id, suffix);
}

static bool
put_file(const char *id, const char *text, size_t len, struct err *e)
{
	struct strbuf tmp = STRBUF_INIT, final = STRBUF_INIT;
	file_path(&tmp, id, ".tmp");
	file_path(&final, id, "");
	bool ok = false;
	int fd = open(sb_str(&tmp), O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		size_t off = 0;
		while (off < len) {
			ssize_t n = write(fd, text + off, len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		ok = off == len && fsync(fd) == 0;
		ok = close(fd) == 0 && ok;
		ok = ok && rename(sb_str(&tmp), sb_str(&final)) == 0;
		if (!ok)
			unlink(sb_str(&tmp));
	}
	if (!ok)
		err_set(e, ERR_INTERNAL, "cannot write payload %s: %s",
			sb_str(&final), strerror(errno));
	sb_free(&tmp);
	sb_free(&final);
	return ok;
}

static char *
get_file(const char *id, struct err *e)
{
	if (!dir) {
		err_set(e, ERR_INTERNAL,
			"payload dir:%s is in a directory store, and "
			"--payload-store names none",
			id);
		return NULL;
	}
	struct strbuf path = STRBUF_INIT, data = STRBUF_INIT;
	file_path(&path, id, "");
	FILE *f = fopen(sb_str(&path), "rb");
	if (!f) {
		err_set(e, ERR_INTERNAL, "cannot read payload %s: %s",
			sb_str(&path), strerror(errno));
		sb_free(&path);
		return NULL;
	}
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		sb_append(&data, buf, n);
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		err_set(e, ERR_INTERNAL, "cannot read payload %s",
			sb_str(&path));
		sb_free(&path);
		sb_free(&data);
		return NULL;
	}
	sb_free(&path);
	sb_str(&data);
	return sb_steal(&data);
}

bool
payload_offload(struct db *db, const char *ns_id, const char *what,
		const char *text, size_t len, char **stored, char ref[48],
		struct err *e)
{
	*stored = NULL;
	ref[0] = '\0';
	if (len <= (size_t)offload_bytes)
		return true;
	if (len > (size_t)max_bytes) {
		err_set(e, ERR_TOO_LARGE,
			"%s of %zu bytes exceeds the payload maximum of %ld "
			"bytes",
			what, len, max_bytes);
		return false;
	}
	char id[37];
	uuid_v7(id);
	if (dir) {
		if (!put_file(id, text, len, e))
			return false;
		snprintf(ref, 48, "dir:%s", id);
	} else {
		char size[24];
		snprintf(size, sizeof(size), "%zu", len);
		const char *params[] = {id, ns_id, text, size};
		if (!db_run(db, &payload_put_stmt, 4, params, e))
			return false;
		snprintf(ref, 48, "pg:%s", id);
	}
	struct strbuf sb = STRBUF_INIT;
	sb_printf(&sb, "{\"" PAYLOAD_KEY "\":{\"ref\":\"%s\",\"size\":%zu}}",
		  ref, len);
	*stored = sb_steal(&sb);
	return true;
}

bool
payload_offload_json(struct db *db, const char *ns_id, const char *what,
		     json_t **v, char ref[48], struct err *e)
{
	ref[0] = '\0';
	if (!*v)
		return true;
	char *text = json_db_text(*v);
	size_t len = strlen(text);
	char *stored = NULL;
	bool ok = payload_offload(db, ns_id, what, text, len, &stored, ref, e);
	free(text);
	if (ok && stored) {
		json_decref(*v);
		*v = json_loads(stored, 0, NULL);
	}
	free(stored);
	return ok;
}

/* The payload behind ref ("pg:<uuid>" or "dir:<uuid>"): its JSON text. */
static char *
fetch_text(struct db *db, const char *ref, struct err *e)
{
	const char *colon = strchr(ref, ':');
	const char *id = colon ? colon + 1 : "";
	if (!colon || (size_t)(colon - ref) > REF_PREFIX_MAX ||
	    strlen(id) != UUID_LEN ||
	    strspn(id, "0123456789abcdef-") != UUID_LEN) {
		err_set(e, ERR_INTERNAL, "malformed payload reference %.60s",
			ref);
		return NULL;
	}
	char *text = NULL;
	if (strncmp(ref, "dir:", 4) == 0) {
		text = get_file(id, e);
	} else if (strncmp(ref, "pg:", 3) == 0) {
		const char *params[] = {id};
		PGresult *res = db_exec(db, &payload_get_stmt, 1, params, e);
		if (!res)
			return NULL;
		if (PQntuples(res) == 1)
			text = xstrdup(PQgetvalue(res, 0, 0));
		else
			err_set(e, ERR_INTERNAL, "payload %s is missing", ref);
		PQclear(res);
	} else {
		err_set(e, ERR_INTERNAL, "unknown payload store in %.60s", ref);
	}
	return text;
}

/* The payload behind ref, parsed. */
static json_t *
fetch(struct db *db, const char *ref, struct err *e)
{
	char *text = fetch_text(db, ref, e);
	if (!text)
		return NULL;
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	free(text);
	if (!v)
		err_set(e, ERR_INTERNAL, "payload %s is not JSON", ref);
	return v;
}

/* The reference of a placeholder, or NULL when v is none. */
static const char *
placeholder_ref(const json_t *v)
{
	if (!json_is_object(v) || json_object_size(v) != 1)
		return NULL;
	const json_t *p = json_object_get(v, PAYLOAD_KEY);
	return json_string_value(json_object_get(p, "ref"));
}

static bool
resolve(struct db *db, json_t **v, int depth, struct err *e)
{
	const char *ref = placeholder_ref(*v);
	if (ref) {
		json_t *got = fetch(db, ref, e);
		if (!got)
			return false;
		json_decref(*v);
		*v = got;
		return true;
	}
	if (depth > 128)
		return true;
	if (json_is_object(*v)) {
		const char *key;
		json_t *child;
		void *tmp;
		json_object_foreach_safe(*v, tmp, key, child)
		{
			if (!json_is_object(child) && !json_is_array(child))
				continue;
			json_t *c = json_incref(child);
			if (!resolve(db, &c, depth + 1, e)) {
				json_decref(c);
				return false;
			}
			json_object_set_new(*v, key, c);
		}
	} else if (json_is_array(*v)) {
		for (size_t i = 0; i < json_array_size(*v); i++) {
			json_t *child = json_array_get(*v, i);
			if (!json_is_object(child) && !json_is_array(child))
				continue;
			json_t *c = json_incref(child);
			if (!resolve(db, &c, depth + 1, e)) {
				json_decref(c);
				return false;
			}
			json_array_set_new(*v, i, c);
		}
	}
	return true;
}

bool
payload_resolve_json(struct db *db, json_t **v, struct err *e)
{
	if (!*v)
		return true;
	/* A column offloaded on its own is a placeholder at the top; a
	 * document assembled from columns (a join's output) holds them one
	 * level down.  Deeper ones are left to the readers of texts. */
	if (placeholder_ref(*v))
		return resolve(db, v, 0, e);
	const char *key;
	json_t *child;
	void *tmp;
	if (json_is_object(*v)) {
		json_object_foreach_safe(*v, tmp, key, child)
		{
			if (!placeholder_ref(child))
				continue;
			json_t *got = fetch(db, placeholder_ref(child), e);
			if (!got)
				return false;
			json_object_set_new(*v, key, got);
		}
	} else if (json_is_array(*v)) {
		for (size_t i = 0; i < json_array_size(*v); i++) {
			child = json_array_get(*v, i);
			if (!placeholder_ref(child))
				continue;
			json_t *got = fetch(db, placeholder_ref(child), e);
			if (!got)
				return false;
			json_array_set_new(*v, i, got);
		}
	}
	return true;
}

static const char *
skip_blanks(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

/*
 * Whether the key at key (the opening quote of "$nodeflowPayload") is a
 * placeholder's: `{ "$nodeflowPayload" : { "ref" : "REF" , "size" : N } }`
 * (blanks as PostgreSQL or jansson print them).  Fills [*start, *end) with
 * the placeholder's text and ref with its reference.  A string value that
 * happens to hold the key is escaped (\"), so never matches.
 */
static bool
placeholder_at(const char *text, const char *key, const char **start,
	       const char **end, char ref[48])
{
	const char *b = key;
	while (b > text && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\t' ||
			    b[-1] == '\r'))
		b--;
	if (b == text || b[-1] != '{')
		return false;
	*start = b - 1;
	const char *p = skip_blanks(key + strlen("\"" PAYLOAD_KEY "\""));
	if (*p != ':')
		return false;
	p = skip_blanks(p + 1);
	if (*p != '{')
		return false;
	p = skip_blanks(p + 1);
	if (strncmp(p, "\"ref\"", 5) != 0)
		return false;
	p = skip_blanks(p + 5);
	if (*p != ':')
		return false;
	p = skip_blanks(p + 1);
	if (*p != '"')
		return false;
	const char *r = ++p;
	while (*p && *p != '"' && *p != '\\' && p - r < 47)
		p++;
	if (*p != '"')
		return false;
	snprintf(ref, 48, "%.*s", (int)(p - r), r);
	/* The rest of the inner object ("size"): no braces inside. */
	while (*p && *p != '}' && *p != '{')
		p++;
	if (*p != '}')
		return false;
	p = skip_blanks(p + 1);
	if (*p != '}')
		return false;
	*end = p + 1;
	return true;
}

/* Splices each placeholder's payload text in place of it: no parse of the
 * payload, which the payload store holds as the JSON text it was given. */
bool
payload_resolve_text(struct db *db, char **text, struct err *e)
{
	if (!*text)
		return true;
	const char *key = strstr(*text, "\"" PAYLOAD_KEY "\"");
	if (!key)
		return true;
	struct strbuf out = STRBUF_INIT;
	const char *from = *text;
	for (; key; key = strstr(key + 1, "\"" PAYLOAD_KEY "\"")) {
		const char *start, *end;
		char ref[48];
		if (!placeholder_at(*text, key, &start, &end, ref) ||
		    start < from)
			continue;
		char *payload = fetch_text(db, ref, e);
		if (!payload) {
			sb_free(&out);
			return false;
		}
		sb_append(&out, from, (size_t)(start - from));
		sb_puts(&out, payload);
		free(payload);
		from = end;
		key = end - 1;
	}
	if (from == *text) {
		sb_free(&out);
		return true;
	}
	sb_puts(&out, from);
	free(*text);
	*text = sb_steal(&out);
	return true;
}

/* ------------------------------------------------------------ collection */

/* Referenced by some execution, or by a task row whose execution still
 * exists (a dropped partition takes executions, not their tasks).  Each
 * test is an index probe on one of the partial ref indexes. */
#define REFERENCED(ref)                                                  \
	"(EXISTS (SELECT 1 FROM \"WorkflowExecutions\" e"                \
	" WHERE e.\"inputRef\" = " ref ") OR EXISTS (SELECT 1 FROM"      \
	" \"WorkflowExecutions\" e WHERE e.\"outputRef\" = " ref ")"     \
	" OR EXISTS (SELECT 1 FROM \"TaskExecutions\" t"                 \
	" WHERE (t.\"inputRef\" = " ref " OR t.\"outputRef\" = " ref ")" \
	" AND EXISTS (SELECT 1 FROM \"WorkflowExecutions\" e"            \
	" WHERE e.\"id\" = t.\"workflowId\" AND " SQL_EXEC_WINDOW(       \
		"e", "t.\"workflowId\"") ")))"

DB_STMT(payload_collect_stmt,
	"WITH c AS (SELECT p.\"id\" FROM \"Payloads\" p"
	"   WHERE p.\"createdAt\" < now() - make_interval(secs => $1::bigint)"
	"   AND NOT " REFERENCED(
		"'pg:' || p.\"id\"::text") "   ORDER BY p.\"createdAt\" LIMIT $2::int FOR UPDATE SKIP LOCKED),"
					   " d AS (DELETE FROM \"Payloads\" p USING c WHERE p.\"id\" = c.\"id\""
					   "   RETURNING 1)"
					   " SELECT count(*) FROM d");

/* Of the directory store's candidates, those no row references. */
DB_STMT(payload_unreferenced_stmt,
	"SELECT x FROM unnest($1::text[]) x WHERE NOT " REFERENCED("x"));

static bool
collect_dir(struct db *db, long grace_seconds, int limit, long *n,
	    struct err *e)
{
	DIR *d = opendir(dir);
	if (!d) {
		err_set(e, ERR_INTERNAL, "cannot list %s: %s", dir,
			strerror(errno));
		return false;
	}
	struct strbuf refs = STRBUF_INIT;
	int found = 0;
	time_t cutoff = time(NULL) - grace_seconds;
	struct dirent *de;
	sb_putc(&refs, '{');
	while (found < limit && (de = readdir(d))) {
		const char *name = de->d_name;
		size_t len = strlen(name);
		struct strbuf path = STRBUF_INIT;
		sb_printf(&path, "%s/%s", dir, name);
		struct stat st;
		bool old = stat(sb_str(&path), &st) == 0 &&
			   S_ISREG(st.st_mode) && st.st_mtime < cutoff;
		/* A write that died before its rename leaves a .tmp. */
		if (old && len == UUID_LEN + 4 &&
		    strcmp(name + UUID_LEN, ".tmp") == 0)
			unlink(sb_str(&path));
		sb_free(&path);
		if (!old || len != UUID_LEN ||
		    strspn(name, "0123456789abcdef-") != UUID_LEN)
			continue;
		sb_printf(&refs, "%s\"dir:%s\"", found ? "," : "", name);
		found++;
	}
	closedir(d);
	sb_putc(&refs, '}');
	*n = 0;
	if (!found) {
		sb_free(&refs);
		return true;
	}
	const char *params[] = {sb_str(&refs)};
	PGresult *res = db_exec(db, &payload_unreferenced_stmt, 1, params, e);
	sb_free(&refs);
	if (!res)
		return false;
	for (int i = 0; i < PQntuples(res); i++) {
		struct strbuf path = STRBUF_INIT;
		file_path(&path, PQgetvalue(res, i, 0) + 4, "");
		if (unlink(sb_str(&path)) == 0)
			(*n)++;
		sb_free(&path);
	}
	PQclear(res);
	return true;
}

bool
payload_collect(struct db *db, long grace_seconds, int limit, long *n,
		struct err *e)
{
	char grace[24], lim[16];
	snprintf(grace, sizeof(grace), "%ld", grace_seconds);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[] = {grace, lim};
	PGresult *res = db_exec(db, &payload_collect_stmt, 2, params, e);
	if (!res)
		return false;
	*n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (!dir)
		return true;
	long more = 0;
	if (!collect_dir(db, grace_seconds, limit, &more, e))
		return false;
	*n += more;
	return true;
}

struct db_stmt *const payload_repo_stmts[] = {
	&payload_put_stmt,
	&payload_get_stmt,
	&payload_collect_stmt,
	&payload_unreferenced_stmt,
	NULL,
};
