#include "util/strbuf.h"

#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
sb_reserve(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;
	if (need <= sb->cap)
		return;
	size_t cap = sb->cap ? sb->cap : 64;
	while (cap < need)
		cap *= 2;
	sb->ptr = xrealloc(sb->ptr, cap);
	sb->cap = cap;
}

void
sb_append(struct strbuf *sb, const void *data, size_t len)
{
	sb_reserve(sb, len);
	if (len)
		memcpy(sb->ptr + sb->len, data, len);
	sb->len += len;
	sb->ptr[sb->len] = '\0';
}

void
sb_puts(struct strbuf *sb, const char *s)
{
	sb_append(sb, s, strlen(s));
}

void
sb_putc(struct strbuf *sb, char c)
{
	sb_append(sb, &c, 1);
}

void
sb_vprintf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list copy;
	va_copy(copy, ap);
	int n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n <= 0)
		return;
	sb_reserve(sb, (size_t)n);
	vsnprintf(sb->ptr + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void
sb_printf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sb_vprintf(sb, fmt, ap);
	va_end(ap);
}

void
sb_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->ptr)
		sb->ptr[0] = '\0';
}

const char *
sb_str(const struct strbuf *sb)
{
	return sb->ptr ? sb->ptr : "";
}

char *
sb_steal(struct strbuf *sb)
{
	char *p = sb->ptr ? sb->ptr : xstrdup("");
	sb->ptr = NULL;
	sb->len = sb->cap = 0;
	return p;
}

void
sb_free(struct strbuf *sb)
{
	free(sb->ptr);
	sb->ptr = NULL;
	sb->len = sb->cap = 0;
}
