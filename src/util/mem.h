/*
 * mem — allocation wrappers that never return NULL.
 *
 * Threads: any.  Ownership: the caller owns what is returned and frees it
 * with free().  Failure: out of memory aborts the process after one line on
 * stderr; callers therefore never test for NULL (an untested branch is worse
 * than a clean abort).
 */
#ifndef NF_UTIL_MEM_H
#define NF_UTIL_MEM_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
