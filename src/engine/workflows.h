/*
 * workflows — starting a workflow: find its definition, fill its input
 * from the definition's inputTemplate, write the execution (store's
 * exec_start: one transaction with its idempotency key, first evaluation
 * and first event; under concurrency written together with other starts,
 * engine/start_group.h), and wake this process's decider.
 *
 * Idempotency: with a key, a second start of the same key in the namespace
 * writes nothing; IDEMPOTENCY_RETURN_EXISTING answers with the existing
 * execution's id, IDEMPOTENCY_FAIL with ERR_CONFLICT naming it.
 *
 * Threads: any (the caller's connection).  Ownership: the request is
 * borrowed.  Failure: false with e set (ERR_NOT_FOUND for an unknown
 * definition or version, ERR_CONFLICT as above).
 */
#ifndef NF_ENGINE_WORKFLOWS_H
#define NF_ENGINE_WORKFLOWS_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>

struct db;

enum idempotency_strategy {
	IDEMPOTENCY_FAIL,
	IDEMPOTENCY_RETURN_EXISTING,
};

struct start_request {
	const char *name;
	int version;         /* 0: the latest */
	const json_t *input; /* object */
	const char *correlation_id;
	const char *idempotency_key;
	enum idempotency_strategy strategy;
	int priority; /* 0..99 */
};

bool workflow_start(struct db *db, const char *ns_id,
		    const struct start_request *r, char id_out[37],
		    bool *created, struct err *e);

#endif
