/*
 * Unit tests of the outbox relay's pure parts: the webhook signature, the
 * backoff, and the checks of sink and status-listener bodies.
 */
#include "engine/relay.h"
#include "engine/sink_kind.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

Test(signature, is_hmac_sha256_of_timestamp_dot_body)
{
	char hex[65];
	/* printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac s3cret */
	sink_signature("s3cret", 1700000000, "{\"a\":1}", hex);
	cr_assert_str_eq(hex, "1698a50bc74d1ff1db85c4e0a5297c2ad9fdba245d57"
			      "37cdb789e4cc6e098940");
}

Test(backoff, doubles_with_jitter_and_caps)
{
	unsigned seed = 7;
	for (int i = 0; i < 200; i++) {
		long d0 = relay_backoff_ms(0, 1000, 60000, &seed);
		cr_assert(d0 >= 500 && d0 <= 1000, "%ld", d0);
		long d3 = relay_backoff_ms(3, 1000, 60000, &seed);
		cr_assert(d3 >= 4000 && d3 <= 8000, "%ld", d3);
		long big = relay_backoff_ms(40, 1000, 60000, &seed);
		cr_assert(big >= 30000 && big <= 60000, "%ld", big);
	}
}

Test(webhook, prepares_signed_request)
{
	struct sink_request rq = {0};
	struct sink_delivery d = {
		.event_id = 42,
		.event_type = "TASK_EVENT",
		.body = "{\"a\":1}",
		.config =
			"{\"url\":\"http://h/x\",\"headers\":{\"X-A\":\"b\"}}",
		.secret = "s3cret",
		.now_s = 1700000000,
	};
	struct err e = ERR_INIT;
	const struct sink_kind *k = sink_kind_find("webhook");
	cr_assert_not_null(k);
	cr_assert(k->prepare(&d, &rq, &e), "%s", e.msg);
	cr_assert_str_eq(rq.url, "http://h/x");
	bool sig = false, id = false, extra = false;
	for (struct curl_slist *h = rq.headers; h; h = h->next) {
		sig |= strcmp(h->data,
			      "X-NodeFlow-Signature: t=1700000000,v1=1698a50bc7"
			      "4d1ff1db85c4e0a5297c2ad9fdba245d5737cdb789e4cc6e"
			      "098940") == 0;
		id |= strcmp(h->data, "X-NodeFlow-Event-Id: 42") == 0;
		extra |= strcmp(h->data, "X-A: b") == 0;
	}
	cr_assert(sig && id && extra);
	sink_request_free(&rq);
}

Test(checks, sink_and_listener_bodies)
{
	struct dsl_errors errs = {0};
	const char *kind;
	json_t *config;
	char *secret;
	json_t *b = json_pack("{s:s,s:s,s:s}", "kind", "webhook", "url",
			      "https://x/y", "secret", "k");
	cr_assert(relay_sink_body(b, &kind, &config, &secret, &errs));
	cr_assert_str_eq(secret, "k");
	cr_assert_null(json_object_get(config, "secret"));
	free(secret);
	json_decref(config);
	json_decref(b);

	b = json_pack("{s:s,s:[s,s],s:[s]}", "sink", "hooks",
		      "workflowTransitions", "RUNNING", "COMPLETED",
		      "taskTransitions", "IN_PROGRESS");
	json_t *wt, *tt, *types;
	cr_assert(relay_listener_body(b, &wt, &tt, &types, &errs));
	char *s = json_dumps(types, JSON_COMPACT);
	cr_assert_str_eq(s, "[\"WORKFLOW_STARTED\",\"WORKFLOW_COMPLETED\","
			    "\"TASK_IN_PROGRESS\",\"TASK_STARTED\"]");
	free(s);
	json_decref(wt);
	json_decref(tt);
	json_decref(types);
	json_decref(b);

	b = json_pack("{s:s}", "sink", "hooks");
	cr_assert(!relay_listener_body(b, &wt, &tt, &types, &errs));
	cr_assert_eq(errs.n, 1);
	dsl_errors_free(&errs);
	json_decref(b);
}
