#include "engine/expr.h"

#include "util/mem.h"
#include "util/strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	MAX_NEST = 64,         /* `${` inside `${` */
	MAX_DEPTH = 64,        /* objects and arrays inside the template */
	MAX_MATCHES = 1 << 22, /* values one wildcard path may select */
	SNIPPET = 48,          /* bytes of an expression quoted in errors */
};

/* Larger indexes are kept as this: no array is that long, and ten times it
 * plus a digit still fits a long long. */
static const long long MAX_INDEX = 100000000000000000LL;

/*
 * Paths
 */

enum seg_kind { SEG_NAME, SEG_INDEX, SEG_WILD };

struct seg {
	enum seg_kind kind;
	const char *name; /* SEG_NAME: unescaped, NUL-terminated at len */
	size_t len;
	long long index; /* SEG_INDEX, negative counts from the end */
	size_t end;      /* offset just past the segment in the path text */
};

struct path {
	struct seg *segs;
	size_t n, cap;
	char *names; /* storage of every name */
	bool wild;   /* some segment is a wildcard: the result is an array */
};

/* Why a path did not parse and where (an offset into its text). */
struct perr {
	const char *why;
	size_t at;
};

static void
path_free(struct path *p)
{
	free(p->segs);
	free(p->names);
	memset(p, 0, sizeof(*p));
}

static struct seg *
push_seg(struct path *p, enum seg_kind kind)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 8;
		p->segs = xrealloc(p->segs, p->cap * sizeof(*p->segs));
	}
	struct seg *sg = &p->segs[p->n++];
	memset(sg, 0, sizeof(*sg));
	sg->kind = kind;
	if (kind == SEG_WILD)
		p->wild = true;
	return sg;
}

static bool
perr_at(struct perr *pe, size_t at, const char *why)
{
	pe->why = why;
	pe->at = at;
	return false;
}

static bool
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A name in dot form runs to the next '.' or '[' ("*" alone is the
 * wildcard). */
static bool
parse_dot_name(struct path *p, const char *s, size_t n, size_t *i, size_t *nl,
	       struct perr *pe)
{
	size_t b = *i;
	while (*i < n && s[*i] != '.' && s[*i] != '[')
		(*i)++;
	if (*i == b) {
		if (*i < n && s[*i] == '.')
			return perr_at(pe, b,
				       "\"..\" (deep scan) is not supported");
		return perr_at(pe, b, "expected a name after \".\"");
	}
	if (*i - b == 1 && s[b] == '*') {
		push_seg(p, SEG_WILD)->end = *i;
		return true;
	}
	struct seg *sg = push_seg(p, SEG_NAME);
	sg->name = p->names + *nl;
	sg->len = *i - b;
	memcpy(p->names + *nl, s + b, sg->len);
	*nl += sg->len;
	p->names[(*nl)++] = '\0';
	sg->end = *i;
	return true;
}

/* `[*]`, `[n]`, `[-n]`, `['name']` or `["name"]`; *i is on the '['. */
static bool
parse_bracket(struct path *p, const char *s, size_t n, size_t *i, size_t *nl,
	      struct perr *pe)
{
	size_t open = *i;
	size_t j = *i + 1;
	while (j < n && is_blank(s[j]))
		j++;
	if (j >= n)
		return perr_at(pe, open, "unterminated \"[\"");
	char c = s[j];
	if (c == '*') {
		push_seg(p, SEG_WILD);
		j++;
	} else if (c == '\'' || c == '"') {
		struct seg *sg = push_seg(p, SEG_NAME);
		sg->name = p->names + *nl;
		for (j++; j < n && s[j] != c; j++) {
			if (s[j] == '\\' && ++j >= n)
				break;
			p->names[(*nl)++] = s[j];
		}
		if (j >= n)
			return perr_at(pe, open, "unterminated quoted name");
		sg->len = (size_t)(p->names + *nl - sg->name);
		p->names[(*nl)++] = '\0';
		j++;
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		bool neg = c == '-';
		if (neg)
			j++;
		if (j >= n || s[j] < '0' || s[j] > '9')
			return perr_at(pe, open, "expected digits after \"-\"");
		long long v = 0;
		for (; j < n && s[j] >= '0' && s[j] <= '9'; j++) {
			v = v * 10 + (s[j] - '0');
			if (v > MAX_INDEX)
				v = MAX_INDEX; /* selects nothing either way */
		}
		push_seg(p, SEG_INDEX)->index = neg ? -v : v;
	} else {
		return perr_at(pe, open,
			       "expected a quoted name, an index or \"*\" "
			       "inside \"[]\"");
	}
	while (j < n && is_blank(s[j]))
		j++;
	if (j >= n || s[j] != ']')
		return perr_at(pe, j < n ? j : open, "expected \"]\"");
	*i = j + 1;
	p->segs[p->n - 1].end = *i;
	return true;
}

/*
 * Parses s[0, n) (already trimmed): an optional `$` root, a first name in
 * dot form or a bracket, then `.name`, `.*` and brackets.
 */
static bool
path_parse(struct path *p, const char *s, size_t n, struct perr *pe)
{
	size_t i = 0, nl = 0;
	memset(p, 0, sizeof(*p));
	if (n == 0)
		return perr_at(pe, 0, "empty path");
	p->names = xmalloc(2 * n + 2); /* each name plus its NUL */
	if (s[0] == '$' && (n == 1 || s[1] == '.' || s[1] == '[')) {
		i = 1;
	} else if (s[0] == '.') {
		return perr_at(pe, 0, "unexpected \".\" at the start");
	} else if (s[0] != '[') {
		if (!parse_dot_name(p, s, n, &i, &nl, pe))
			return false;
	}
	while (i < n) {
		if (s[i] == '.') {
			i++;
			if (!parse_dot_name(p, s, n, &i, &nl, pe))
				return false;
		} else if (s[i] == '[') {
			if (!parse_bracket(p, s, n, &i, &nl, pe))
				return false;
		} else {
			return perr_at(pe, i, "expected \".\" or \"[\"");
		}
	}
	return true;
}

/* A name or an index applied to one value; NULL when nothing matches. */
static const json_t *
step(const json_t *v, const struct seg *sg)
{
	if (sg->kind == SEG_NAME)
		return json_is_object(v)
			       ? json_object_getn(v, sg->name, sg->len)
			       : NULL;
	if (!json_is_array(v))
		return NULL;
	size_t size = json_array_size(v);
	long long k = sg->index;
	if (k < 0) {
		if ((unsigned long long)-k > size)
			return NULL;
		return json_array_get(v, size - (size_t)-k);
	}
	if ((unsigned long long)k >= size)
		return NULL;
	return json_array_get(v, (size_t)k);
}

/* An independent copy (json_deep_copy sets up loop detection even for a
 * scalar, which costs a lot across a million wildcard matches). */
static json_t *
copy_of(const json_t *v)
{
	json_t *c = json_is_object(v) || json_is_array(v)
			    ? json_deep_copy(v)
			    : json_copy((json_t *)v);
	return c ? c : json_null(); /* only on allocation failure */
}

struct vec {
	const json_t **v;
	size_t n, cap;
};

static bool
vec_push(struct vec *vec, const json_t *v)
{
	if (vec->n >= MAX_MATCHES)
		return false;
	if (vec->n == vec->cap) {
		vec->cap = vec->cap ? 2 * vec->cap : 16;
		vec->v = xrealloc(vec->v, vec->cap * sizeof(*vec->v));
	}
	vec->v[vec->n++] = v;
	return true;
}

/*
 * Evaluates p inside doc: a copy of the value found (null when none) or,
 * for a wildcard path, an array of copies of every match.  Fails only when
 * a wildcard path selects more than MAX_MATCHES values.  Each step goes one
 * level deeper, so the work is bounded by the size of doc.
 */
static bool
path_eval(const struct path *p, const json_t *doc, json_t **out)
{
	if (!p->wild) {
		const json_t *cur = doc;
		for (size_t k = 0; cur && k < p->n; k++)
			cur = step(cur, &p->segs[k]);
		*out = cur ? copy_of(cur) : json_null();
		return true;
	}
	struct vec a = {NULL, 0, 0}, b = {NULL, 0, 0};
	bool ok = true;
	if (doc)
		vec_push(&a, doc);
	for (size_t k = 0; ok && k < p->n && a.n; k++) {
		const struct seg *sg = &p->segs[k];
		b.n = 0;
		for (size_t m = 0; ok && m < a.n; m++) {
			const json_t *v = a.v[m];
			if (sg->kind != SEG_WILD) {
				const json_t *r = step(v, sg);
				if (r)
					ok = vec_push(&b, r);
			} else if (json_is_array(v)) {
				size_t size = json_array_size(v);
				for (size_t x = 0; ok && x < size; x++)
					ok = vec_push(&b, json_array_get(v, x));
			} else if (json_is_object(v)) {
				void *it = json_object_iter((json_t *)v);
				for (; ok && it; it = json_object_iter_next(
							 (json_t *)v, it))
					ok = vec_push(
						&b, json_object_iter_value(it));
			}
		}
		struct vec t = a;
		a = b;
		b = t;
	}
	if (ok) {
		*out = json_array();
		for (size_t m = 0; m < a.n; m++)
			json_array_append_new(*out, copy_of(a.v[m]));
	}
	free(a.v);
	free(b.v);
	return ok;
}

/*
 * Rendering values as text
 */

static int
dump_cb(const char *buf, size_t size, void *data)
{
	sb_append(data, buf, size);
	return 0;
}

/* The shortest text that reads back as d, in JSON number syntax. */
static void
put_real(struct strbuf *sb, double d)
{
	char buf[64];
	int prec;
	if (!isfinite(d)) { /* jansson never holds these */
		sb_puts(sb, "null");
		return;
	}
	for (prec = 1; prec < 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	snprintf(buf, sizeof(buf), "%.*g", prec, d);
	char *exp = strchr(buf, 'e');
	if (exp) {
		/* %g switches to an exponent sooner than people do: 1e+02. */
		int x = atoi(exp + 1);
		if (x >= 0 && x < 17)
			snprintf(buf, sizeof(buf), "%.0f", d);
	}
	sb_puts(sb, buf);
	if (!strpbrk(buf, ".e"))
		sb_puts(sb, ".0");
}

/* How a value reads inside text: strings as they are, null as nothing,
 * anything else as compact JSON. */
static void
render(struct strbuf *sb, const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		sb_append(sb, json_string_value(v), json_string_length(v));
		break;
	case JSON_NULL: break;
	case JSON_INTEGER:
		sb_printf(sb, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL: put_real(sb, json_real_value(v)); break;
	case JSON_TRUE: sb_puts(sb, "true"); break;
	case JSON_FALSE: sb_puts(sb, "false"); break;
	default:
		json_dump_callback(v, dump_cb, sb,
				   JSON_COMPACT | JSON_ENCODE_ANY);
		break;
	}
}

/* Appends s[0, n) to sb with a backslash before each quote and
 * backslash, so that it reads back as itself inside a quoted name. */
static void
put_quoted(struct strbuf *sb, const char *s, size_t n, char quote)
{
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != quote && s[i] != '\\')
			continue;
		sb_append(sb, s + run, i - run);
		sb_putc(sb, '\\');
		run = i;
	}
	sb_append(sb, s + run, n - run);
}

/*
 * Walking a template
 */

struct walk {
	const json_t *ctx;
	bool resolve;    /* build the result; else only check */
	bool keep_going; /* expr_sources: skip bad strings */
	struct err *e;
	struct strbuf where; /* JSON path of the value being walked */
	expr_source_fn *fn;  /* expr_sources */
	void *arg;
	json_t *seen;  /* sources already reported, as keys */
	const char *s; /* the string being scanned */
	size_t n;
};

/* Cuts n bytes down to at most max without splitting a UTF-8 sequence. */
static size_t
utf8_cut(const char *s, size_t n, size_t max)
{
	if (n <= max)
		return n;
	while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
		max--;
	return max;
}

/* Appends a short, printable excerpt of s[0, n). */
static void
put_snippet(struct strbuf *sb, const char *s, size_t n)
{
	size_t cut = utf8_cut(s, n, SNIPPET);
	for (size_t i = 0; i < cut; i++)
		sb_putc(sb, (unsigned char)s[i] < 0x20 ? '?' : s[i]);
	if (cut < n)
		sb_puts(sb, "...");
}

static void
set_err(struct err *e, struct strbuf *msg)
{
	size_t n = utf8_cut(msg->ptr, msg->len, sizeof(e->msg) - 1);
	err_set(e, ERR_INVALID, "%.*s", (int)n, msg->ptr);
	sb_free(msg);
}

/* Fails with "<where>: <message> in "<excerpt of w->s[start, end)>"" (no
 * excerpt when end == start). */
static bool fail(struct walk *w, size_t start, size_t end, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static bool
fail(struct walk *w, size_t start, size_t end, const char *fmt, ...)
{
	struct strbuf msg = STRBUF_INIT;
	va_list ap;
	sb_append(&msg, w->where.ptr, w->where.len);
	sb_puts(&msg, ": ");
	va_start(ap, fmt);
	sb_vprintf(&msg, fmt, ap);
	va_end(ap);
	if (end > start) {
		sb_puts(&msg, " in \"");
		put_snippet(&msg, w->s + start, end - start);
		sb_putc(&msg, '"');
	}
	set_err(w->e, &msg);
	return false;
}

/* "<why> near "<rest of the path>"" for a path text s[0, n). */
static void
put_reason(struct strbuf *sb, const struct perr *pe, const char *s, size_t n)
{
	sb_puts(sb, pe->why);
	if (pe->at < n) {
		sb_puts(sb, " near \"");
		put_snippet(sb, s + pe->at, n - pe->at);
		sb_putc(sb, '"');
	}
}

static void
trim(const struct strbuf *sb, size_t *a, size_t *b)
{
	*a = 0;
	*b = sb->len;
	while (*a < *b && is_blank(sb->ptr[*a]))
		(*a)++;
	while (*b > *a && is_blank(sb->ptr[*b - 1]))
		(*b)--;
}

static void
report_source(struct walk *w, const struct seg *sg)
{
	if (json_object_getn(w->seen, sg->name, sg->len))
		return;
	json_object_setn_new_nocheck(w->seen, sg->name, sg->len, json_true());
	w->fn(sg->name, sg->len, w->arg);
}

/*
 * The path text of an expression is built twice: `real` with the values of
 * the inner expressions, `shape` with "0" in their place.  The shape decides
 * whether the expression is well formed, so errors depend on the template
 * only; a real path that does not parse (the data made it so) resolves to
 * null, as a path that matches nothing does.
 */
static bool
finish_expr(struct walk *w, size_t start, size_t end, struct strbuf *real,
	    struct strbuf *shape, size_t first_dyn, json_t **out)
{
	struct path p;
	struct perr pe;
	size_t a, b;
	bool ok;

	trim(shape, &a, &b);
	if (a == b) { /* `${}`, `${ }` */
		*out = w->resolve ? json_string("") : NULL;
		return true;
	}
	if (!path_parse(&p, shape->ptr + a, b - a, &pe)) {
		struct strbuf why = STRBUF_INIT;
		put_reason(&why, &pe, shape->ptr + a, b - a);
		ok = fail(w, start, end, "%s", sb_str(&why));
		sb_free(&why);
		path_free(&p);
		return ok;
	}
	if (p.n == 0 || p.segs[0].kind != SEG_NAME) {
		path_free(&p);
		return fail(w, start, end,
			    "an expression must start with a source name "
			    "(\"workflow\" or a task reference name)");
	}
	if (w->fn && (first_dyn == SIZE_MAX || a + p.segs[0].end <= first_dyn))
		report_source(w, &p.segs[0]);
	if (!w->resolve) {
		path_free(&p);
		*out = NULL;
		return true;
	}
	if (first_dyn != SIZE_MAX) {
		path_free(&p);
		trim(real, &a, &b);
		if (a == b) {
			*out = json_string("");
			return true;
		}
		if (!path_parse(&p, real->ptr + a, b - a, &pe) || p.n == 0 ||
		    p.segs[0].kind != SEG_NAME) {
			path_free(&p);
			*out = json_null();
			return true;
		}
	}
	ok = path_eval(&p, w->ctx, out);
	path_free(&p);
	if (!ok)
		return fail(w, start, end,
			    "the path selects more than %d values",
			    MAX_MATCHES);
	return true;
}

static void
put2(struct walk *w, struct strbuf *real, struct strbuf *shape, const char *s,
     size_t n)
{
	if (w->resolve)
		sb_append(real, s, n);
	sb_append(shape, s, n);
}

/*
 * Scans the expression whose `${` is at *pos, resolving inner expressions
 * first, and leaves *pos just past its `}`.  Inside brackets, quoted names
 * may hold `}`, `]` and escaped quotes; an inner expression there is
 * inserted escaped, so its value is taken literally as a name.
 */
static bool
scan_expr(struct walk *w, size_t *pos, int depth, json_t **out)
{
	const char *s = w->s;
	size_t n = w->n, start = *pos, i = start + 2;
	size_t first_dyn = SIZE_MAX;
	struct strbuf real = STRBUF_INIT, shape = STRBUF_INIT;
	bool bracket = false, ok = false;
	char quote = 0;

	*out = NULL;
	if (depth >= MAX_NEST)
		return fail(w, start, n,
			    "expressions nested deeper than %d levels",
			    MAX_NEST);
	for (;;) {
		if (i >= n) {
			fail(w, start, n, "unterminated \"${\"");
			goto done;
		}
		char c = s[i];
		if (c == '$' && i + 2 < n && s[i + 1] == '$' &&
		    s[i + 2] == '{') {
			put2(w, &real, &shape, "${", 2);
			i += 3;
			continue;
		}
		if (c == '$' && i + 1 < n && s[i + 1] == '{') {
			json_t *v;
			if (!scan_expr(w, &i, depth + 1, &v))
				goto done;
			if (first_dyn == SIZE_MAX)
				first_dyn = shape.len;
			sb_putc(&shape, '0');
			if (v && quote) {
				struct strbuf tmp = STRBUF_INIT;
				render(&tmp, v);
				put_quoted(&real, sb_str(&tmp), tmp.len, quote);
				sb_free(&tmp);
			} else if (v) {
				render(&real, v);
			}
			json_decref(v);
			continue;
		}
		if (quote) {
			if (c == '\\' && i + 1 < n) {
				put2(w, &real, &shape, s + i, 2);
				i += 2;
				continue;
			}
			if (c == quote)
				quote = 0;
		} else if (c == '}') {
			i++;
			break;
		} else if (c == '[') {
			bracket = true;
		} else if (c == ']') {
			bracket = false;
		} else if (bracket && (c == '\'' || c == '"')) {
			quote = c;
		}
		put2(w, &real, &shape, s + i, 1);
		i++;
	}
	*pos = i;
	ok = finish_expr(w, start, i, &real, &shape, first_dyn, out);
done:
	sb_free(&real);
	sb_free(&shape);
	return ok;
}

/* Resolves (or checks) one string of the template. */
static bool
walk_string(struct walk *w, const json_t *str, json_t **out)
{
	const char *s = json_string_value(str);
	size_t n = json_string_length(str);
	struct strbuf text = STRBUF_INIT;
	size_t i = 0, run = 0;

	*out = NULL;
	w->s = s;
	w->n = n;
	for (;;) {
		const char *d = memchr(s + i, '$', n - i);
		if (!d)
			break;
		i = (size_t)(d - s);
		if (i + 2 < n && s[i + 1] == '$' && s[i + 2] == '{') {
			if (w->resolve) {
				sb_append(&text, s + run, i - run);
				sb_puts(&text, "${");
			}
			i += 3;
			run = i;
			continue;
		}
		if (i + 1 >= n || s[i + 1] != '{') {
			i++;
			continue;
		}
		size_t at = i;
		json_t *v;
		if (!scan_expr(w, &i, 0, &v)) {
			sb_free(&text);
			return false;
		}
		if (at == 0 && i == n) { /* exactly one expression */
			*out = v;
			return true;
		}
		if (w->resolve) {
			sb_append(&text, s + run, at - run);
			render(&text, v);
			json_decref(v);
		}
		run = i;
	}
	if (w->resolve) {
		sb_append(&text, s + run, n - run);
		*out = json_stringn(sb_str(&text), text.len);
	}
	sb_free(&text);
	if (w->resolve && !*out) /* the pieces are whole UTF-8 sequences */
		return fail(w, 0, 0, "interpolation produced invalid UTF-8");
	return true;
}

static bool
is_ident(const char *k, size_t n)
{
	if (n == 0 || (k[0] >= '0' && k[0] <= '9') || k[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = k[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Appends ".key" or "['key']" to the JSON path in w->where. */
static void
put_key(struct strbuf *sb, const char *k, size_t n)
{
	if (is_ident(k, n)) {
		sb_putc(sb, '.');
		sb_append(sb, k, n);
		return;
	}
	sb_puts(sb, "['");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)k[i];
		if (c == '\'' || c == '\\')
			sb_putc(sb, '\\');
		if (c < 0x20)
			sb_printf(sb, "\\u%04x", c);
		else
			sb_putc(sb, (char)c);
	}
	sb_puts(sb, "']");
}

static void
where_cut(struct strbuf *sb, size_t len)
{
	sb->len = len;
	sb->ptr[len] = '\0';
}

static bool
walk_value(struct walk *w, const json_t *v, int depth, json_t **out)
{
	*out = NULL;
	if (json_is_string(v))
		return walk_string(w, v, out);
	if (!json_is_object(v) && !json_is_array(v)) {
		if (w->resolve)
			*out = json_copy((json_t *)v);
		return true;
	}
	if (depth >= MAX_DEPTH)
		return fail(w, 0, 0, "template nested deeper than %d levels",
			    MAX_DEPTH);
	size_t mark = w->where.len;
	json_t *res = NULL;
	if (json_is_object(v)) {
		if (w->resolve)
			res = json_object();
		void *it = json_object_iter((json_t *)v);
		for (; it; it = json_object_iter_next((json_t *)v, it)) {
			const char *key = json_object_iter_key(it);
			size_t klen = json_object_iter_key_len(it);
			json_t *r;
			put_key(&w->where, key, klen);
			bool ok = walk_value(w, json_object_iter_value(it),
					     depth + 1, &r);
			where_cut(&w->where, mark);
			if (!ok && !w->keep_going) {
				json_decref(res);
				return false;
			}
			if (r)
				json_object_setn_new_nocheck(res, key, klen, r);
		}
	} else {
		if (w->resolve)
			res = json_array();
		size_t size = json_array_size(v);
		for (size_t k = 0; k < size; k++) {
			json_t *r;
			sb_printf(&w->where, "[%zu]", k);
			bool ok = walk_value(w, json_array_get(v, k), depth + 1,
					     &r);
			where_cut(&w->where, mark);
			if (!ok && !w->keep_going) {
				json_decref(res);
				return false;
			}
			if (r)
				json_array_append_new(res, r);
		}
	}
	*out = res;
	return true;
}

static void
walk_init(struct walk *w, const char *where, struct err *e)
{
	memset(w, 0, sizeof(*w));
	w->e = e;
	sb_puts(&w->where, where && *where ? where : "$");
}

json_t *
expr_resolve(const json_t *tmpl, const json_t *ctx, const char *where,
	     struct err *e)
{
	struct walk w;
	json_t *out;
	if (!tmpl)
		return json_null();
	walk_init(&w, where, e);
	w.ctx = ctx;
	w.resolve = true;
	bool ok = walk_value(&w, tmpl, 0, &out);
	sb_free(&w.where);
	if (!ok) {
		json_decref(out);
		return NULL;
	}
	return out;
}

bool
expr_check(const json_t *tmpl, const char *where, struct err *e)
{
	struct walk w;
	json_t *out;
	if (!tmpl)
		return true;
	walk_init(&w, where, e);
	bool ok = walk_value(&w, tmpl, 0, &out);
	sb_free(&w.where);
	return ok;
}

void
expr_sources(const json_t *tmpl, expr_source_fn *fn, void *arg)
{
	struct walk w;
	struct err scratch = ERR_INIT;
	json_t *out;
	if (!tmpl || !fn)
		return;
	walk_init(&w, NULL, &scratch);
	w.keep_going = true;
	w.fn = fn;
	w.arg = arg;
	w.seen = json_object();
	walk_value(&w, tmpl, 0, &out);
	json_decref(w.seen);
	sb_free(&w.where);
}

json_t *
expr_path(const json_t *doc, const char *path, struct err *e)
{
	struct strbuf text = STRBUF_INIT;
	struct path p;
	struct perr pe;
	json_t *out = NULL;
	size_t a, b;

	sb_puts(&text, path ? path : "");
	trim(&text, &a, &b);
	if (!path_parse(&p, sb_str(&text) + a, b - a, &pe)) {
		struct strbuf msg = STRBUF_INIT;
		sb_puts(&msg, "invalid path \"");
		put_snippet(&msg, sb_str(&text), text.len);
		sb_puts(&msg, "\": ");
		put_reason(&msg, &pe, sb_str(&text) + a, b - a);
		set_err(e, &msg);
	} else if (!path_eval(&p, doc, &out)) {
		err_set(e, ERR_INVALID, "the path selects more than %d values",
			MAX_MATCHES);
	}
	path_free(&p);
	sb_free(&text);
	return out;
}
