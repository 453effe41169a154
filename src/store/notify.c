#include "store/notify.h"

#include "store/sql.h"
#include "util/mem.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct notify_conn {
	struct db *db;
};

DB_STMT(notify_listen_events, "LISTEN \"node_flow_workflow_events\"");
DB_STMT(notify_listen_queues, "LISTEN \"node_flow_task_queues\"");
DB_STMT(notify_listen_outbox, "LISTEN \"node_flow_outbox\"");
DB_STMT(notify_send_queues,
	"SELECT pg_notify('node_flow_task_queues', $1)::text");
DB_STMT(notify_listen_decide, "LISTEN \"node_flow_decide\"");
DB_STMT(notify_send_decide, "SELECT pg_notify('node_flow_decide', '')::text");

/* The trigger on "WorkflowEvents" notifies only while a row here is
 * alive (migration 0008). */
DB_STMT(notify_live_hold_stmt,
	"INSERT INTO \"LiveStreamHolders\" (\"processId\", \"streams\","
	" \"expiresAt\") VALUES ($1::uuid, $2::int,"
	" now() + make_interval(secs => $3::float8))"
	" ON CONFLICT (\"processId\") DO UPDATE SET"
	" \"streams\" = EXCLUDED.\"streams\","
	" \"expiresAt\" = EXCLUDED.\"expiresAt\"");
/* Expired rows of processes that died go with any release. */
DB_STMT(notify_live_release_stmt,
	"DELETE FROM \"LiveStreamHolders\" WHERE \"processId\" = $1::uuid"
	" OR \"expiresAt\" < now() - interval '1 hour'");

struct db_stmt *const notify_stmts[] = {
	&notify_listen_events,     &notify_listen_queues,
	&notify_send_queues,       &notify_listen_decide,
	&notify_send_decide,       &notify_live_hold_stmt,
	&notify_live_release_stmt, NULL};
/* The outbox relays' channel (its own array: one line in the registry). */
struct db_stmt *const notify_outbox_stmts[] = {&notify_listen_outbox, NULL};

bool
notify_queues(struct db *db, const char *payload, struct err *e)
{
	const char *params[] = {payload};
	return db_run(db, &notify_send_queues, 1, params, e);
}

bool
notify_decide(struct db *db, struct err *e)
{
	return db_run(db, &notify_send_decide, 0, NULL, e);
}

bool
notify_live_hold(struct db *db, const char *process_id, unsigned streams,
		 int ttl_seconds, struct err *e)
{
	char n[16], ttl[16];
	snprintf(n, sizeof(n), "%u", streams);
	snprintf(ttl, sizeof(ttl), "%d", ttl_seconds);
	const char *params[] = {process_id, n, ttl};
	return db_run(db, &notify_live_hold_stmt, 3, params, e);
}

bool
notify_live_release(struct db *db, const char *process_id, struct err *e)
{
	const char *params[] = {process_id};
	return db_run(db, &notify_live_release_stmt, 1, params, e);
}

struct notify_conn *
notify_open(const char *url, const char *channel, struct err *e)
{
	/* LISTEN takes no parameters, so each channel is a fixed statement. */
	struct db_stmt *listen;
	if (strcmp(channel, "node_flow_workflow_events") == 0)
		listen = &notify_listen_events;
	else if (strcmp(channel, "node_flow_task_queues") == 0)
		listen = &notify_listen_queues;
	else if (strcmp(channel, "node_flow_outbox") == 0)
		listen = &notify_listen_outbox;
	else if (strcmp(channel, "node_flow_decide") == 0)
		listen = &notify_listen_decide;
	else {
		err_set(e, ERR_INVALID, "unknown notification channel \"%s\"",
			channel);
		return NULL;
	}
	struct db *db;
	if (!db_open(&db, url, DB_PLAIN, e))
		return NULL;
	if (!db_run(db, listen, 0, NULL, e)) {
		db_close(db);
		return NULL;
	}
	struct notify_conn *n = xcalloc(1, sizeof(*n));
	n->db = db;
	return n;
}

void
notify_close(struct notify_conn *n)
{
	if (!n)
		return;
	db_close(n->db);
	free(n);
}

static bool
drain(struct notify_conn *n, notify_fn *fn, void *arg, struct err *e)
{
	PGconn *conn = n->db->conn;
	if (!PQconsumeInput(conn)) {
		err_set(e, ERR_UNAVAILABLE, "listen connection lost: %s",
			PQerrorMessage(conn));
		return false;
	}
	PGnotify *note;
	while ((note = PQnotifies(conn)) != NULL) {
		fn(note->extra ? note->extra : "", arg);
		PQfreemem(note);
	}
	return true;
}

bool
notify_wait(struct notify_conn *n, int timeout_ms, notify_fn *fn, void *arg,
	    struct err *e)
{
	PGconn *conn = n->db->conn;
	if (PQstatus(conn) != CONNECTION_OK) {
		err_set(e, ERR_UNAVAILABLE, "listen connection lost");
		return false;
	}
	/* Some may already be buffered from an earlier read. */
	if (!drain(n, fn, arg, e))
		return false;
	struct pollfd pfd = {.fd = PQsocket(conn), .events = POLLIN};
	int rc = poll(&pfd, 1, timeout_ms);
	if (rc < 0 && errno != EINTR) {
		err_set(e, ERR_UNAVAILABLE, "poll on listen connection: %s",
			strerror(errno));
		return false;
	}
	if (rc > 0)
		return drain(n, fn, arg, e);
	return true;
}
