/*
 * fuzz — what the libFuzzer targets in fuzz/ share: the entry point each
 * defines, and a NUL-terminated copy of the input for parsers of C strings.
 *
 * Each target feeds one parser of outside input with arbitrary bytes and
 * aborts when a property the parser promises does not hold; the sanitizers
 * catch memory errors and undefined behaviour.  Threads: one.  Ownership:
 * fuzz_cstr's result is the caller's to free().
 */
#ifndef NF_FUZZ_FUZZ_H
#define NF_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a C string (it ends at its first NUL byte, as the
 * string would that a server received). */
static inline char *
fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Stops the run with a message when a promised property fails. */
#define FUZZ_CHECK(cond, ...)                                 \
	do {                                                  \
		if (!(cond)) {                                \
			fprintf(stderr, "fuzz check failed: " \
					__VA_ARGS__);         \
			fputc('\n', stderr);                  \
			abort();                              \
		}                                             \
	} while (0)

#endif
