/*
 * decide_signal — waking the deciders of other replicas when this process
 * runs none.
 *
 * A replica with the api role only (--roles api) writes starts, results
 * and operator actions like any other, but has no decide loop to wake:
 * without a signal, that work waited for an engine replica's idle look
 * (200 ms).  In such a process decide_loop_wake hands the wake here:
 * decide_signal_raise asks the sender loop for one "node_flow_decide"
 * notification.  Raises that come while one is being sent are folded into
 * the next, so a burst of requests costs a notification or two, not one
 * each.  The notification goes out after the work's commit, on the sender's
 * own connection: never inside the requests' transactions, where NOTIFY
 * would serialise their commits.  Each engine replica listens
 * (decide_signal_listen) and wakes one of its decide loops per
 * notification, and after each (re)connection, since notifications sent
 * meanwhile were lost.  A lost notification costs latency, never work:
 * the decide loops still look on their own every 200 ms.
 *
 * Threads: decide_signal_raise from any thread (nothing happens before
 * decide_signal_send_start or after the sender stops).  The sender and
 * the listener are loops with their own thread and connection.  Failure:
 * both log, back off and reconnect (the loop skeleton's).
 */
#ifndef NF_ENGINE_DECIDE_SIGNAL_H
#define NF_ENGINE_DECIDE_SIGNAL_H

#include "runtime/loop.h"

/* Starts the sender of this process's raises; once, before any raise. */
void decide_signal_send_start(const char *url);
/* Stops it (raises after this do nothing). */
void decide_signal_send_stop(void);
/* New work for the deciders: one notification soon. */
void decide_signal_raise(void);
/* Listens for other replicas' raises and wakes a local decide loop. */
struct loop *decide_signal_listen(const char *url);

#endif
