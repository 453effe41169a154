/*
 * relay — the outbox relay engine loop, and the checks of what the API
 * registers for it (sinks, status listeners).
 *
 * The relay claims deliverable "OutboxEvents" rows (store/outbox_repo.h: a
 * lease, FOR UPDATE SKIP LOCKED, safe on every replica), delivers each
 * through its sink's kind (engine/sink_kind.h) with libcurl's multi
 * interface, up to max_in_flight at once, and records the outcome: a 2xx
 * answer publishes the row; anything else is a failed attempt (lastError:
 * the status and the start of the body, or the transfer error), retried
 * after an exponential backoff with jitter, dead-lettered after
 * max_attempts.  A row naming no sink of its namespace, or a sink of
 * another kind than its "PROVIDER:" prefix when that names a kind, is
 * dead-lettered at once, its lastError saying why (a replay after the sink
 * is created delivers it).  Published rows are deleted after
 * retention_hours, dead-lettered ones after dead_letter_retention_hours.  It is
 * woken by "node_flow_outbox" notifications (engine/channel.h) and otherwise
 * looks every interval_ms.
 *
 * Delivery is at least once: a relay that dies after sending and before
 * recording leaves its claim to run out, and the event is sent again;
 * receivers deduplicate on X-NodeFlow-Event-Id.
 *
 * Threads: relay_start/relay_stop from the main thread; the check
 * functions from any.  Failure: the loop skeleton's log-and-backoff.
 */
#ifndef NF_ENGINE_RELAY_H
#define NF_ENGINE_RELAY_H

#include "engine/dsl.h"

#include <jansson.h>
#include <stdbool.h>

struct relay_opts {
	const char *database_url;
	int interval_ms;
	int max_in_flight; /* 0: no relay in this process */
	int max_attempts;
	long backoff_ms;
	long backoff_max_ms;
	long timeout_ms;
	long retention_hours;
	long dead_letter_retention_hours; /* 0: kept */
};

void relay_start(const struct relay_opts *o);
void relay_stop(void);

/* The delay before the next attempt after a failed one (attempts: the
 * failures before it), base × 2^attempts capped at max, with jitter: a
 * uniform value in [half of it, all of it]. */
long relay_backoff_ms(int attempts, long base_ms, long max_ms, unsigned *seed);

/* Checks a sink body ({"kind", …the kind's members}); on success *kind is
 * the body's (borrowed), *config a new object, *secret NULL or a string to
 * free().  False with errs filled otherwise. */
bool relay_sink_body(const json_t *body, const char **kind, json_t **config,
		     char **secret, struct dsl_errors *errs);

/* Checks a status-listener body ({"sink", "workflowTransitions"?,
 * "taskTransitions"?}: transitions are the status names, at least one in
 * all); on success fills three new arrays: the transitions as given and the
 * "WorkflowEvents" types they match. */
bool relay_listener_body(const json_t *body, json_t **workflow_transitions,
			 json_t **task_transitions, json_t **event_types,
			 struct dsl_errors *errs);

#endif
