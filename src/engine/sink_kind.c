#include "engine/sink_kind.h"

#include "util/mem.h"
#include "util/strbuf.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void
sink_signature(const char *secret, int64_t t, const char *body,
	       char hex_out[65])
{
	struct strbuf msg = STRBUF_INIT;
	sb_printf(&msg, "%lld.", (long long)t);
	sb_puts(&msg, body);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	HMAC(EVP_sha256(), secret, (int)strlen(secret),
	     (const unsigned char *)sb_str(&msg), msg.len, mac, &len);
	sb_free(&msg);
	for (unsigned i = 0; i < len && i < 32; i++)
		snprintf(hex_out + 2 * i, 3, "%02x", mac[i]);
	hex_out[64] = '\0';
}

void
sink_request_free(struct sink_request *r)
{
	free(r->url);
	curl_slist_free_all(r->headers);
	r->url = NULL;
	r->headers = NULL;
}

/* ------------------------------------------------------------- webhook */

/* A header name: an HTTP token. */
static bool
header_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!strchr("!#$%&'*+-.^_`|~", *s) &&
		    !((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= 'A' && *s <= 'Z')))
			return false;
	return true;
}

static bool
header_value_ok(const char *s)
{
	for (; *s; s++)
		if (*s == '\r' || *s == '\n')
			return false;
	return true;
}

static const char *const reserved[] = {"Content-Type", "Content-Length", "Host",
				       NULL};

static void
webhook_check(const json_t *body, json_t *config, char **secret,
	      struct dsl_errors *errs)
{
	*secret = NULL;
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)body, key, v) {
		if (strcmp(key, "kind") && strcmp(key, "name") &&
		    strcmp(key, "url") && strcmp(key, "secret") &&
		    strcmp(key, "headers"))
			dsl_errors_add(errs, "$", "unknown member \"%.100s\"",
				       key);
	}
	const json_t *url = json_object_get(body, "url");
	const char *u = json_string_value(url);
	if (!u)
		dsl_errors_add(errs, "$.url", "required: a string");
	else if (strncasecmp(u, "http://", 7) && strncasecmp(u, "https://", 8))
		dsl_errors_add(errs, "$.url",
			       "must be an http:// or https:// URL");
	else if (!header_value_ok(u) || strchr(u, ' '))
		dsl_errors_add(errs, "$.url",
			       "must not contain spaces or "
			       "line breaks");
	else
		json_object_set(config, "url", (json_t *)url);
	const json_t *s = json_object_get(body, "secret");
	if (s && !json_is_null(s)) {
		if (!json_is_string(s) || json_string_length(s) == 0 ||
		    strlen(json_string_value(s)) != json_string_length(s))
			dsl_errors_add(errs, "$.secret",
				       "must be a non-empty string");
		else
			*secret = xstrdup(json_string_value(s));
	}
	const json_t *h = json_object_get(body, "headers");
	if (h && !json_is_null(h)) {
		if (!json_is_object(h)) {
			dsl_errors_add(errs, "$.headers",
				       "must be an object of strings");
		} else {
			json_t *out = json_object();
			json_object_foreach ((json_t *)h, key, v) {
				bool bad_name = !header_name_ok(key) ||
						strncasecmp(key, "X-NodeFlow-",
							    11) == 0;
				for (int i = 0; reserved[i] && !bad_name; i++)
					bad_name = strcasecmp(key,
							      reserved[i]) == 0;
				if (bad_name)
					dsl_errors_add(
						errs, "$.headers",
						"\"%.100s\" is not a header "
						"a sink may set",
						key);
				else if (!json_is_string(v) ||
					 !header_value_ok(json_string_value(v)))
					dsl_errors_add(
						errs, "$.headers",
						"\"%.100s\": must be a string "
						"without line breaks",
						key);
				else
					json_object_set(out, key, v);
			}
			json_object_set_new(config, "headers", out);
		}
	}
	if (errs->n) {
		free(*secret);
		*secret = NULL;
	}
}

static bool
webhook_prepare(const struct sink_delivery *d, struct sink_request *out,
		struct err *e)
{
	json_error_t je;
	json_t *cfg = json_loads(d->config ? d->config : "{}", 0, &je);
	const char *url = json_string_value(json_object_get(cfg, "url"));
	if (!url) {
		json_decref(cfg);
		err_set(e, ERR_INVALID, "the webhook sink has no url");
		return false;
	}
	out->url = xstrdup(url);
	struct strbuf sb = STRBUF_INIT;
	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "Expect:");
	sb_printf(&sb, "X-NodeFlow-Event-Id: %lld", d->event_id);
	h = curl_slist_append(h, sb_str(&sb));
	sb_reset(&sb);
	sb_printf(&sb, "X-NodeFlow-Event-Type: %s", d->event_type);
	h = curl_slist_append(h, sb_str(&sb));
	if (d->secret) {
		char hex[65];
		sink_signature(d->secret, d->now_s, d->body, hex);
		sb_reset(&sb);
		sb_printf(&sb, "X-NodeFlow-Signature: t=%lld,v1=%s",
			  (long long)d->now_s, hex);
		h = curl_slist_append(h, sb_str(&sb));
	}
	const char *key;
	json_t *v;
	json_object_foreach (json_object_get(cfg, "headers"), key, v) {
		if (!json_is_string(v))
			continue;
		sb_reset(&sb);
		sb_printf(&sb, "%s: %s", key, json_string_value(v));
		h = curl_slist_append(h, sb_str(&sb));
	}
	sb_free(&sb);
	json_decref(cfg);
	out->headers = h;
	return true;
}

/* ---------------------------------------------------------------- table */

static const struct sink_kind kinds[] = {
	{"webhook", webhook_check, webhook_prepare},
};

const struct sink_kind *
sink_kind_find(const char *kind)
{
	for (size_t i = 0; kind && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].kind, kind) == 0)
			return &kinds[i];
	return NULL;
}

const char *
sink_kind_names(void)
{
	return "webhook";
}
