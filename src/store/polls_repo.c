#include "store/polls_repo.h"

#include "store/sql.h"
#include "util/json.h"

#include <stdlib.h>

DB_STMT(polls_upsert,
	"INSERT INTO \"WorkerPolls\" (\"namespaceId\", \"queueName\","
	" \"workerId\", \"lastPollAt\", \"pollCount\")"
	" SELECT r.\"ns\", r.\"queue\", r.\"worker\", now(), r.\"count\""
	" FROM jsonb_to_recordset($1::jsonb)"
	" AS r(\"ns\" uuid, \"queue\" text, \"worker\" text, \"count\" bigint)"
	" ON CONFLICT (\"namespaceId\", \"queueName\", \"workerId\") DO UPDATE"
	" SET \"lastPollAt\" = EXCLUDED.\"lastPollAt\","
	" \"pollCount\" = \"WorkerPolls\".\"pollCount\" + EXCLUDED.\"pollCount\"");

bool
polls_record(struct db *db, const json_t *rows, struct err *e)
{
	char *text = json_db_text(rows);
	const char *params[] = {text};
	bool ok = db_run(db, &polls_upsert, 1, params, e);
	free(text);
	return ok;
}

struct db_stmt *const polls_repo_stmts[] = {&polls_upsert, NULL};
