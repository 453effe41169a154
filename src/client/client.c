#include "client/client.h"

#include "util/mem.h"
#include "util/strbuf.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TIMEOUT_MS = 60000, CONNECT_TIMEOUT_MS = 10000 };

struct client {
	char *base;
	CURL *h;
};

struct client *
client_open(const char *base_url)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct client *c = xcalloc(1, sizeof(*c));
	size_t n = strlen(base_url);
	while (n && base_url[n - 1] == '/')
		n--;
	c->base = xstrndup(base_url, n);
	c->h = curl_easy_init();
	if (!c->h) {
		fprintf(stderr, "nodeflow: could not initialise libcurl\n");
		abort();
	}
	return c;
}

void
client_close(struct client *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->h);
	free(c->base);
	free(c);
	curl_global_cleanup();
}

const char *
client_base_url(const struct client *c)
{
	return c->base;
}

static size_t
collect(char *data, size_t size, size_t nmemb, void *arg)
{
	sb_append(arg, data, size * nmemb);
	return size * nmemb;
}

bool
client_request(struct client *c, const char *method, const char *path,
	       const char *json_body, struct client_response *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	struct strbuf url = STRBUF_INIT, body = STRBUF_INIT;
	sb_printf(&url, "%s%s", c->base, path);
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *headers = NULL;
	headers = curl_slist_append(headers, "Accept: application/json");
	if (json_body)
		headers = curl_slist_append(headers,
					    "Content-Type: application/json");

	CURL *h = c->h;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, sb_str(&url));
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "nodeflow/" NODEFLOW_VERSION);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (json_body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)strlen(json_body));
	}
	CURLcode rc = curl_easy_perform(h);
	bool ok = rc == CURLE_OK;
	if (ok) {
		char *ct = NULL;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
		curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
		r->content_type = xstrdup(ct ? ct : "");
		r->body_len = body.len;
		r->body = sb_steal(&body);
	} else {
		const char *why = *errbuf ? errbuf : curl_easy_strerror(rc);
		if (rc == CURLE_URL_MALFORMAT ||
		    rc == CURLE_UNSUPPORTED_PROTOCOL)
			err_set(e, ERR_INVALID,
				"\"%s\" is not a node-flow server URL: %s",
				c->base, why);
		else
			err_set(e, ERR_UNAVAILABLE,
				"could not reach node-flow at %s: %s", c->base,
				why);
	}
	curl_slist_free_all(headers);
	sb_free(&url);
	sb_free(&body);
	return ok;
}

void
client_response_free(struct client_response *r)
{
	free(r->body);
	free(r->content_type);
	memset(r, 0, sizeof(*r));
}

char *
client_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	struct strbuf sb = STRBUF_INIT;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
			sb_putc(&sb, (char)*p);
		} else {
			sb_putc(&sb, '%');
			sb_putc(&sb, hex[*p >> 4]);
			sb_putc(&sb, hex[*p & 15]);
		}
	}
	return sb_steal(&sb);
}
