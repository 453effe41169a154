#include "platform/namespaces.h"

#include "store/definitions_repo.h"
#include "util/mem.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { CACHE_SLOTS = 64 };

struct slot {
	char *name;
	char id[37];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot cache[CACHE_SLOTS];
static unsigned next_victim;

static bool
cached(const char *name, char id_out[37])
{
	bool hit = false;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < CACHE_SLOTS && cache[i].name; i++) {
		if (strcmp(cache[i].name, name) == 0) {
			memcpy(id_out, cache[i].id, 37);
			hit = true;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return hit;
}

static void
remember(const char *name, const char id[37])
{
	pthread_mutex_lock(&lock);
	int i = 0;
	while (i < CACHE_SLOTS && cache[i].name && strcmp(cache[i].name, name))
		i++;
	if (i == CACHE_SLOTS)
		i = (int)(next_victim++ % CACHE_SLOTS);
	if (!cache[i].name || strcmp(cache[i].name, name) != 0) {
		free(cache[i].name);
		cache[i].name = xstrdup(name);
		memcpy(cache[i].id, id, 37);
	}
	pthread_mutex_unlock(&lock);
}

bool
namespaces_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isalnum(c) && c != '_' && c != '-' && c != '.')
			return false;
	}
	return true;
}

bool
namespaces_id(struct db *db, const char *name, char id_out[37], struct err *e)
{
	if (cached(name, id_out))
		return true;
	if (!namespaces_name_valid(name)) {
		err_set(e, ERR_NOT_FOUND, "namespace \"%.80s\" does not exist",
			name);
		return false;
	}
	if (!defs_namespace_id(db, name, id_out, e))
		return false;
	remember(name, id_out);
	return true;
}

bool
namespaces_ensure(struct db *db, const char *name, bool *created,
		  char id_out[37], struct err *e)
{
	if (!namespaces_name_valid(name)) {
		err_set(e, ERR_INVALID,
			"namespace name \"%.80s\" must be 1 to 63 letters, digits, "
			"'_', '-' or '.'",
			name);
		return false;
	}
	if (!defs_namespace_ensure(db, name, created, id_out, e))
		return false;
	remember(name, id_out);
	return true;
}
