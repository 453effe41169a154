/*
 * listener — the event listener loop: LISTENs on node_flow_workflow_events
 * and hands each workflow event reference to a subscriber callback.
 *
 * The payload is "workflowId:seq" and nothing else (the trigger on
 * "WorkflowEvents" raises it at commit).  A payload that does not parse —
 * notably the empty one a statement-level trigger referencing NEW would
 * send — is counted and ignored, never a crash: a mistake like that must
 * present as a missed hint, not a dead process.  A notification is a hint:
 * subscribers read the history from their own cursor, so a notification lost
 * while reconnecting costs latency and nothing else.
 *
 * Threads: the loop runs on its own thread; the callback is called there
 * and must not block.  Ownership: the event passed to the callback is valid
 * during the call only.  Failure: a lost connection is one log line and a
 * reconnect with backoff (the loop skeleton's).
 */
#ifndef NF_ENGINE_LISTENER_H
#define NF_ENGINE_LISTENER_H

#include "runtime/loop.h"

#include <stdbool.h>
#include <stdint.h>

struct workflow_event_ref {
	char workflow_id[37]; /* canonical UUID text */
	int64_t seq;
};

typedef void listener_fn(const struct workflow_event_ref *ev, void *arg);

/* Parses "uuid:seq"; false for anything else, the empty payload included. */
bool listener_parse(const char *payload, struct workflow_event_ref *out);

struct loop *listener_start(const char *url, listener_fn *fn, void *arg);
/* Also calls on_connect(arg) (may be NULL) on the loop's thread after
 * every (re)connection: notifications sent meanwhile were lost, so a
 * subscriber re-reads from its cursors. */
struct loop *listener_start_ex(const char *url, listener_fn *fn,
			       void (*on_connect)(void *arg), void *arg);

#endif
