/*
 * uuid — version 7 UUIDs generated in-process, for rows whose id the engine
 * must know before it writes them (a scheduled task is named by the events
 * written in the same transaction).
 *
 * Layout per RFC 9562: 48 bits of Unix milliseconds, then 12 bits that
 * count up within a millisecond (so ids of one process sort in creation
 * order), then 62 random bits.  Time-ordered like PostgreSQL's uuidv7(), so
 * index inserts stay at the right edge.
 *
 * Threads: any (the counter is under a lock).  Failure: none; randomness
 * comes from getrandom(2), which does not fail once the system has booted.
 */
#ifndef NF_UTIL_UUID_H
#define NF_UTIL_UUID_H

#include <stdbool.h>

/* Writes the canonical 36-character text and a NUL into out. */
void uuid_v7(char out[37]);
/* Whether s is a canonical UUID text (any version, either case). */
bool uuid_valid(const char *s);

#endif
