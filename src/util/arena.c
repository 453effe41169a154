#include "util/arena.h"

#include "util/mem.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct arena_chunk {
	struct arena_chunk *next;
	size_t size;
	size_t used;
	alignas(max_align_t) unsigned char data[];
};

enum { DEFAULT_CHUNK = 8192 };

static size_t
align_up(size_t n)
{
	size_t a = alignof(max_align_t);
	return (n + a - 1) & ~(a - 1);
}

void *
arena_alloc(struct arena *a, size_t n)
{
	n = align_up(n ? n : 1);
	struct arena_chunk *c = a->head;
	if (!c || c->size - c->used < n) {
		size_t size = a->chunk_size ? a->chunk_size : DEFAULT_CHUNK;
		if (size < n)
			size = n;
		c = xmalloc(sizeof(*c) + size);
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	return p;
}

void *
arena_zalloc(struct arena *a, size_t n)
{
	void *p = arena_alloc(a, n);
	memset(p, 0, n);
	return p;
}

char *
arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *
arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *
arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap, copy;
	va_start(ap, fmt);
	va_copy(copy, ap);
	int n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n < 0)
		n = 0;
	char *p = arena_alloc(a, (size_t)n + 1);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void
arena_reset(struct arena *a)
{
	struct arena_chunk *c = a->head;
	if (!c)
		return;
	/* Keep the oldest chunk: it is the one sized for the common case. */
	while (c->next) {
		struct arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	c->used = 0;
	a->head = c;
}

void
arena_free(struct arena *a)
{
	struct arena_chunk *c = a->head;
	while (c) {
		struct arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
}
