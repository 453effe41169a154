/*
 * utf8 — the one UTF-8 check the server needs: how long the well-formed
 * sequence at a position is.  Used wherever outside bytes are echoed into
 * JSON or logs (a request path, a name in an error message), which must stay
 * valid UTF-8.
 *
 * Threads: any.  Failure: none.
 */
#ifndef NF_UTIL_UTF8_H
#define NF_UTIL_UTF8_H

#include <stddef.h>

/* The length (1 to 4) of the well-formed UTF-8 sequence at s, or 0: a stray
 * byte, a sequence cut short (s must be NUL-terminated), an overlong form,
 * a surrogate, or beyond U+10FFFF. */
size_t utf8_len(const unsigned char *s);

#endif
