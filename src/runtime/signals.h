/*
 * signals — SIGINT and SIGTERM request a graceful shutdown.
 *
 * The handlers only set a flag and write one byte to a pipe; all work
 * happens on the thread that waits.  SIGPIPE is ignored (a peer that goes
 * away is an I/O error, not a reason to die).
 *
 * Threads: install once on the main thread before starting others; the
 * query functions may be called from any thread.  Failure: installation
 * aborts the process if the kernel refuses (it does not in practice).
 */
#ifndef NF_RUNTIME_SIGNALS_H
#define NF_RUNTIME_SIGNALS_H

#include <stdbool.h>

void signals_install(void);
bool signals_shutdown_requested(void);
/* Waits up to timeout_ms (-1: forever) for a shutdown request; returns
 * whether one has arrived. */
bool signals_wait(int timeout_ms);
/* Requests shutdown from inside the program, as a signal would. */
void signals_request_shutdown(void);

#endif
