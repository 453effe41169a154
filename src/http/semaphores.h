/*
 * semaphores — the semaphores API, /v1/ns/{ns}/semaphores[/{name}]:
 * configure (PUT {"permits": N}: 201 created, 200 resized), list, read and
 * remove (204; 404 when not configured) the semaphores that gate worker
 * tasks, and see who holds their permits (store/semaphores_repo.h gives the
 * JSON).  A list is {"items": [...]}.
 *
 * Threads: MHD's.  Failure: answered on the response (400 naming the
 * field or the path, 404, 503).
 */
#ifndef NF_HTTP_SEMAPHORES_H
#define NF_HTTP_SEMAPHORES_H

#include "http/http.h"

void semaphores_put_handler(struct http_request *req,
			    struct http_response *res);
void semaphores_list_handler(struct http_request *req,
			     struct http_response *res);
void semaphores_get_handler(struct http_request *req,
			    struct http_response *res);
void semaphores_delete_handler(struct http_request *req,
			       struct http_response *res);

#endif
