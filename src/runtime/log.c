#include "runtime/log.h"

#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int current_level = LOG_INFO;
static atomic_int current_format = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
log_configure(enum log_level level, enum log_format format)
{
	atomic_store(&current_level, (int)level);
	atomic_store(&current_format, (int)format);
}

bool
log_enabled(enum log_level level)
{
	return (int)level >=
	       atomic_load_explicit(&current_level, memory_order_relaxed);
}

bool
log_level_parse(const char *s, enum log_level *out)
{
	for (int i = LOG_DEBUG; i <= LOG_ERROR; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return true;
		}
	}
	return false;
}

bool
log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0)
		*out = LOG_FORMAT_TEXT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_FORMAT_JSON;
	else
		return false;
	return true;
}

/* Escapes s as the inside of a JSON string.  Bytes that are not UTF-8 (a
 * request path can hold anything) become U+FFFD, so that every line stays
 * valid JSON. */
static void
json_escape(struct strbuf *sb, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x80) {
			size_t n = utf8_len((const unsigned char *)s);
			if (n) {
				sb_append(sb, s, n);
				s += n - 1;
			} else {
				sb_puts(sb, "\\ufffd");
			}
			continue;
		}
		switch (c) {
		case '"': sb_puts(sb, "\\\""); break;
		case '\\': sb_puts(sb, "\\\\"); break;
		case '\n': sb_puts(sb, "\\n"); break;
		case '\r': sb_puts(sb, "\\r"); break;
		case '\t': sb_puts(sb, "\\t"); break;
		default:
			if (c < 0x20)
				sb_printf(sb, "\\u%04x", c);
			else
				sb_putc(sb, (char)c);
		}
	}
}

void
log_write(enum log_level level, const char *component, const char *fmt, ...)
{
	char msg[2048];
	char ts[40];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	int64_t us = wall_us();
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03dZ", (int)(us / 1000 % 1000));

	struct strbuf sb = STRBUF_INIT;
	if (atomic_load(&current_format) == LOG_FORMAT_JSON) {
		sb_printf(&sb,
			  "{\"ts\":\"%s\",\"level\":\"%s\",\"component\":\"",
			  ts, level_names[level]);
		json_escape(&sb, component);
		sb_puts(&sb, "\",\"msg\":\"");
		json_escape(&sb, msg);
		sb_puts(&sb, "\"}\n");
	} else {
		sb_printf(&sb, "%s %-5s %s: %s\n", ts, level_names[level],
			  component, msg);
	}
	ssize_t rc = write(STDERR_FILENO, sb.ptr, sb.len);
	(void)rc;
	sb_free(&sb);
}
