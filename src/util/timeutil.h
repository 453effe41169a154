/*
 * timeutil — monotonic and wall clocks in the units the server uses.
 *
 * Threads: any.  Failure: none.
 */
#ifndef NF_UTIL_TIMEUTIL_H
#define NF_UTIL_TIMEUTIL_H

#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds since an arbitrary point; for deadlines. */
int64_t mono_ms(void);
/* Wall-clock microseconds since the epoch; for logs only (database times
 * come from PostgreSQL). */
int64_t wall_us(void);
/* A timespec for CLOCK_MONOTONIC that lies ms milliseconds from now. */
struct timespec mono_deadline(int64_t ms);

#endif
