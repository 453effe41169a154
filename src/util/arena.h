/*
 * arena — a bump allocator for one unit of work (an HTTP request, a loop
 * tick).  Everything allocated from it is released together by
 * arena_reset() or arena_free(); nothing is freed one by one.
 *
 * Threads: an arena belongs to one thread at a time.  Ownership: memory
 * returned by arena_* belongs to the arena.  Failure: allocation aborts on
 * out of memory (see mem.h); never returns NULL.
 */
#ifndef NF_UTIL_ARENA_H
#define NF_UTIL_ARENA_H

#include <stdarg.h>
#include <stddef.h>

struct arena_chunk;

struct arena {
	struct arena_chunk *head;
	size_t chunk_size;
};

#define ARENA_INIT      \
	{               \
		NULL, 0 \
	}

void *arena_alloc(struct arena *a, size_t n);
void *arena_zalloc(struct arena *a, size_t n);
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_printf(struct arena *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Releases everything but the first chunk, which is kept for reuse. */
void arena_reset(struct arena *a);
void arena_free(struct arena *a);

#endif
