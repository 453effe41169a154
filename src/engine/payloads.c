#include "engine/payloads.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "store/cache_repo.h"
#include "store/db.h"
#include "store/payload_repo.h"
#include "util/mem.h"

#include <stdlib.h>
#include <time.h>

enum { COLLECT_BATCH = 500, PRUNE_BATCH = 5000 };

struct payloads_loop {
	struct loop_def def;
	char *url;
	struct db *db;
	long grace_seconds;
	long prune_interval_seconds;
	time_t next_prune;
	struct metric *collected;
	struct metric *pruned;
};

static enum loop_result
tick(void *arg, struct arena *scratch, struct err *e)
{
	struct payloads_loop *pl = arg;
	(void)scratch;
	if (pl->db && !db_healthy(pl->db)) {
		db_close(pl->db);
		pl->db = NULL;
	}
	if (!pl->db && !db_open(&pl->db, pl->url, DB_PLAIN, e))
		return LOOP_ERROR;
	bool busy = false;
	time_t now = time(NULL);
	if (now >= pl->next_prune) {
		long n = 0;
		if (!cache_prune(pl->db, PRUNE_BATCH, &n, e))
			return LOOP_ERROR;
		metric_add(pl->pruned, n);
		if (n == PRUNE_BATCH)
			busy = true;
		else
			pl->next_prune = now + pl->prune_interval_seconds;
	}
	long n = 0;
	if (!payload_collect(pl->db, pl->grace_seconds, COLLECT_BATCH, &n, e))
		return LOOP_ERROR;
	if (n > 0)
		log_info("payloads", "collected %ld unreferenced payloads", n);
	metric_add(pl->collected, n);
	return busy || n >= COLLECT_BATCH ? LOOP_BUSY : LOOP_IDLE;
}

static void
finish(void *arg)
{
	struct payloads_loop *pl = arg;
	db_close(pl->db);
	free(pl->url);
	free(pl);
}

struct loop *
payloads_loop_start(const struct config *cfg)
{
	struct payloads_loop *pl = xcalloc(1, sizeof(*pl));
	pl->def = (struct loop_def){
		.name = "payloads",
		.tick = tick,
		.finish = finish,
		.interval_ms = (int)cfg->payload_gc_interval_ms,
		.max_backoff_ms = 60000,
	};
	pl->url = xstrdup(cfg->database_url);
	pl->grace_seconds = cfg->payload_gc_grace_seconds;
	pl->prune_interval_seconds = cfg->cache_prune_interval_seconds;
	pl->collected = metric_register(
		METRIC_COUNTER, "nodeflow_payloads_collected_total", "",
		"Unreferenced offloaded payloads this process deleted");
	pl->pruned = metric_register(
		METRIC_COUNTER, "nodeflow_cache_pruned_total", "",
		"Expired task output cache entries this process deleted");
	return loop_start(&pl->def, pl);
}
