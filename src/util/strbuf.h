/*
 * strbuf — an owned, growable, always NUL-terminated byte buffer.
 *
 * Threads: a strbuf belongs to one thread at a time.  Ownership: the buffer
 * owns `ptr`; sb_free() releases it and sb_steal() hands it to the caller.
 * Pointers into `ptr` are invalidated by any append (it may reallocate).
 * Failure: appends cannot fail (allocation aborts, see mem.h).
 */
#ifndef NF_UTIL_STRBUF_H
#define NF_UTIL_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

struct strbuf {
	char *ptr; /* NUL-terminated; NULL only before the first append */
	size_t len;
	size_t cap;
};

#define STRBUF_INIT        \
	{                  \
		NULL, 0, 0 \
	}

void sb_reserve(struct strbuf *sb, size_t extra);
void sb_append(struct strbuf *sb, const void *data, size_t len);
void sb_puts(struct strbuf *sb, const char *s);
void sb_putc(struct strbuf *sb, char c);
void sb_printf(struct strbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void sb_vprintf(struct strbuf *sb, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* Empties the buffer but keeps its memory. */
void sb_reset(struct strbuf *sb);
/* The contents, "" when nothing was appended yet; owned by the buffer. */
const char *sb_str(const struct strbuf *sb);
/* Hands the heap string to the caller (free() it) and empties the buffer. */
char *sb_steal(struct strbuf *sb);
void sb_free(struct strbuf *sb);

#endif
