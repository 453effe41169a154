#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *wire;
	int status;
} codes[] = {
#define ERR_ROW_(name, wire, status) [ERR_##name] = {wire, status},
	ERR_CODES(ERR_ROW_)
#undef ERR_ROW_
};

void
err_set(struct err *e, enum err_code code, const char *fmt, ...)
{
	va_list ap;
	e->code = code;
	e->sqlstate[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

void
err_prefix(struct err *e, const char *fmt, ...)
{
	char joined[2 * sizeof(e->msg) + 2];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(joined, sizeof(e->msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(e->msg))
		n = (int)sizeof(e->msg) - 1;
	memcpy(joined + n, ": ", 2);
	memcpy(joined + n + 2, e->msg, sizeof(e->msg));
	joined[sizeof(joined) - 1] = '\0';
	/* Truncates a long result: an error message is a line, not a log. */
	memcpy(e->msg, joined, sizeof(e->msg) - 1);
	e->msg[sizeof(e->msg) - 1] = '\0';
}

void
err_clear(struct err *e)
{
	e->code = ERR_OK;
	e->sqlstate[0] = '\0';
	e->msg[0] = '\0';
}

const char *
err_code_name(enum err_code code)
{
	return (unsigned)code < ERR_CODE_COUNT ? codes[code].wire : "internal";
}

int
err_http_status(enum err_code code)
{
	return (unsigned)code < ERR_CODE_COUNT ? codes[code].status : 500;
}
