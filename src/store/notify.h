/*
 * notify — a connection that LISTENs on a channel and hands over the
 * payloads of the notifications it receives.
 *
 * Threads: a notify connection is used by one thread.  Ownership: payloads
 * passed to the callback are valid only during the call.  Failure: false
 * with e set when the connection is lost; the caller closes it and opens a
 * new one (notifications sent meanwhile are lost, which is why subscribers
 * read from their own cursors and treat a notification as a hint).
 */
#ifndef NF_STORE_NOTIFY_H
#define NF_STORE_NOTIFY_H

#include "util/err.h"

#include <stdbool.h>

struct db;
struct notify_conn;

typedef void notify_fn(const char *payload, void *arg);

/* Channels: "node_flow_workflow_events" (payload "workflowId:seq", raised
 * by the trigger on "WorkflowEvents") and "node_flow_task_queues"
 * (payload: queue names, one per line, or "*" for all), raised by
 * notify_queues after work was enqueued, so that long-polls parked on
 * other replicas look again; "node_flow_outbox" (empty payload), raised by
 * the trigger on "OutboxEvents" and by a dead-letter replay, so that the
 * relays look for deliverable rows; "node_flow_decide" (empty payload),
 * raised by a replica that runs no decider after it enqueued decisions,
 * so that the engine replicas' deciders look at once. */

/* Sends a "node_flow_task_queues" notification (at the commit of the
 * connection's transaction, or at once outside one). */
bool notify_queues(struct db *db, const char *payload, struct err *e);

/* Sends a "node_flow_decide" notification (engine/decide_signal.h). */
bool notify_decide(struct db *db, struct err *e);

/* "node_flow_workflow_events" is raised only while some process holds
 * live streams: notify_live_hold registers (or refreshes) process_id as
 * holding `streams` open streams for ttl_seconds; notify_live_release
 * removes it (and rows long expired).  process_id is a UUID. */
bool notify_live_hold(struct db *db, const char *process_id, unsigned streams,
		      int ttl_seconds, struct err *e);
bool notify_live_release(struct db *db, const char *process_id, struct err *e);

/* Connects (checking the server like db_open) and LISTENs on channel. */
struct notify_conn *notify_open(const char *url, const char *channel,
				struct err *e);
void notify_close(struct notify_conn *n);
/* Waits up to timeout_ms for notifications and calls fn for each one that
 * arrived (payload "" when it had none).  Returns false when the connection
 * broke. */
bool notify_wait(struct notify_conn *n, int timeout_ms, notify_fn *fn,
		 void *arg, struct err *e);

#endif
