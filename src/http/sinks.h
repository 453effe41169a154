/*
 * sinks (http) — the outbox's API under /v1/ns/{ns}: sinks (PUT, GET one
 * or all, DELETE; a secret is accepted, never answered), status listeners
 * per workflow definition name (PUT, GET one or all, DELETE), and the dead
 * letter: a keyset-paginated list (?cursor=&limit=) and a replay of chosen
 * events ({"ids":[…]} or {"all":true}, answering {"replayed":N}).
 *
 * Threads: MHD's.  Failure: every error is a JSON body (http/api.h).
 */
#ifndef NF_HTTP_SINKS_H
#define NF_HTTP_SINKS_H

#include "http/http.h"

http_handler sinks_put;
http_handler sinks_get;
http_handler sinks_list;
http_handler sinks_delete;
http_handler sinks_listener_put;
http_handler sinks_listener_get;
http_handler sinks_listener_list;
http_handler sinks_listener_delete;
http_handler sinks_dead_list;
http_handler sinks_dead_replay;

#endif
