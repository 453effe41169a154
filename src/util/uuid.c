#include "util/uuid.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t last_ms;
static uint16_t counter;

void
uuid_v7(char out[37])
{
	unsigned char b[16];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms =
		(uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;

	pthread_mutex_lock(&lock);
	if (ms <= last_ms) {
		/* Same millisecond (or the clock stepped back): count on. */
		ms = last_ms;
		if (++counter > 0x0fff) {
			ms = ++last_ms;
			counter = 0;
		}
	} else {
		last_ms = ms;
		counter = 0;
	}
	uint16_t seq = counter;
	pthread_mutex_unlock(&lock);

	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n > 0)
			got += (size_t)n;
	}
	for (int i = 0; i < 6; i++)
		b[i] = (unsigned char)(ms >> (40 - 8 * i));
	b[6] = (unsigned char)(0x70 | ((seq >> 8) & 0x0f));
	b[7] = (unsigned char)(seq & 0xff);
	b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));

	static const char hex[] = "0123456789abcdef";
	char *p = out;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[b[i] >> 4];
		*p++ = hex[b[i] & 15];
	}
	*p = '\0';
}

bool
uuid_valid(const char *s)
{
	if (!s || strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
			return false;
	}
	return true;
}
