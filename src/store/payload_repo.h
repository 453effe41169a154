/*
 * payload_repo — the payload store: inputs and outputs too large to keep in
 * their row.
 *
 * A value whose JSON text is longer than the offload threshold is written
 * to the store (the "Payloads" table, or one file per payload in a
 * directory shared by every replica) and its column holds a placeholder,
 * {"$nodeflowPayload": {"ref": REF, "size": N}}, while the row's
 * "inputRef"/"outputRef" holds REF ("pg:<uuid>" or "dir:<uuid>": a
 * reference names its store, so changing --payload-store leaves older
 * payloads readable as long as the directory stays).  A value longer than
 * the maximum is refused (ERR_TOO_LARGE) and never stored.
 *
 * Readers pass what they read through payload_resolve_text (or
 * payload_resolve_json): any placeholder inside it, at any depth, is
 * replaced by the payload it names, so a document assembled in SQL from
 * several rows (a workflow with its tasks, a search page) reads back whole.
 * A text without the placeholder's key is returned untouched at the cost of
 * one substring search.
 *
 * Payloads are written before the row that references them commits, so a
 * failed write leaves an orphan; so do dropped partitions and rows replaced
 * by restart or rerun.  payload_collect deletes payloads that no execution
 * or task row references and that are older than a grace period (which
 * covers a payload whose row has not committed yet).
 *
 * Threads: payload_configure once at start-up before any other thread
 * uses the store; afterwards any thread, each with its own connection.
 * Ownership: returned strings and JSON are the caller's.  Failure: false
 * (or NULL) with e set.
 */
#ifndef NF_STORE_PAYLOAD_REPO_H
#define NF_STORE_PAYLOAD_REPO_H

#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct db;

/* The placeholder's key (it never occurs in a stored value otherwise). */
#define PAYLOAD_KEY "$nodeflowPayload"

/* Defaults until payload_configure is called (tests, tools). */
enum {
	PAYLOAD_OFFLOAD_DEFAULT = 256 * 1024,
	PAYLOAD_MAX_DEFAULT = 16 * 1024 * 1024,
};

/* spec: "postgres" or "dir:/path" (the directory is created if missing
 * and must be writable). */
bool payload_configure(const char *spec, long offload_bytes, long max_bytes,
		       struct err *e);
long payload_offload_bytes(void);
long payload_max_bytes(void);

/*
 * text (len bytes of JSON) as it should be bound to its jsonb parameter:
 * at or below the threshold *stored is NULL and ref is "" (bind text
 * itself); above it the payload is written and *stored is the placeholder
 * (free), ref its reference.  Above the maximum: false, ERR_TOO_LARGE, with
 * a message "<what> of N bytes exceeds the payload maximum of M bytes".
 */
bool payload_offload(struct db *db, const char *ns_id, const char *what,
		     const char *text, size_t len, char **stored, char ref[48],
		     struct err *e);

/* Like payload_offload for a JSON value: *v is replaced by the
 * placeholder when it was offloaded. */
bool payload_offload_json(struct db *db, const char *ns_id, const char *what,
			  json_t **v, char ref[48], struct err *e);

/* *text (a malloc'd JSON text) with every placeholder replaced, in place:
 * a text holding none is left as it is. */
bool payload_resolve_text(struct db *db, char **text, struct err *e);

/* Replaces the placeholder *v is, or those among its members (one level
 * down, as in a join's output): the decider's cheap read. */
bool payload_resolve_json(struct db *db, json_t **v, struct err *e);

/* Deletes up to limit unreferenced payloads older than grace_seconds;
 * *n: how many. */
bool payload_collect(struct db *db, long grace_seconds, int limit, long *n,
		     struct err *e);

#endif
