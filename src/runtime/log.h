/*
 * log — one line per event on stderr, as text or JSON lines.
 *
 * The level is checked before the message's arguments are evaluated, so a
 * debug line costs a comparison when debug logging is off.  Each line names
 * the component ("http", "decider", "partitions", …) it comes from.
 *
 * Threads: any; a line is written with a single write(2) so lines from
 * different threads never interleave.  Failure: a line that cannot be
 * written is dropped.
 */
#ifndef NF_RUNTIME_LOG_H
#define NF_RUNTIME_LOG_H

#include <stdbool.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

void log_configure(enum log_level level, enum log_format format);
bool log_enabled(enum log_level level);
/* Parses "debug", "info", "warn", "error"; false when unknown. */
bool log_level_parse(const char *s, enum log_level *out);
bool log_format_parse(const char *s, enum log_format *out);
void log_write(enum log_level level, const char *component, const char *fmt,
	       ...) __attribute__((format(printf, 3, 4)));

#define LOG_AT_(lvl, comp, ...)                            \
	do {                                               \
		if (log_enabled(lvl))                      \
			log_write(lvl, comp, __VA_ARGS__); \
	} while (0)
#define log_debug(comp, ...) LOG_AT_(LOG_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...)  LOG_AT_(LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...)  LOG_AT_(LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) LOG_AT_(LOG_ERROR, comp, __VA_ARGS__)

#endif
