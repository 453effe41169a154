#include "store/notify.h"

#include "store/sql.h"
#include "util/mem.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

struct notify_conn {
	struct db *db;
};

DB_STMT(notify_listen_events, "LISTEN \"node_flow_workflow_events\"");

struct db_stmt *const notify_stmts[] = {&notify_listen_events, NULL};

struct notify_conn *
notify_open(const char *url, const char *channel, struct err *e)
{
	/* LISTEN takes no parameters, so each channel is a fixed statement. */
	if (strcmp(channel, "node_flow_workflow_events") != 0) {
		err_set(e, ERR_INVALID, "unknown notification channel \"%s\"",
			channel);
		return NULL;
	}
	struct db *db;
	if (!db_open(&db, url, DB_PLAIN, e))
		return NULL;
	if (!db_run(db, &notify_listen_events, 0, NULL, e)) {
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
