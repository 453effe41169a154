/*
 * conductor_metadata — Conductor's metadata API: task definitions
 * (POST a list, PUT one, GET, list, DELETE) and workflow definitions
 * (POST one with ?overwrite, PUT a list, GET by name and ?version, list,
 * DELETE a version, validate).  Definitions are parsed and stored exactly as
 * the native /v1 definitions are (engine/dsl.h, store/definitions_repo.h).
 *
 * Threads: MHD's.  Failure: Conductor's error body (http/conductor.h); a
 * definition that does not validate is 400 with every problem in
 * validationErrors, nothing of a list stored.
 */
#ifndef NF_HTTP_CONDUCTOR_METADATA_H
#define NF_HTTP_CONDUCTOR_METADATA_H

#include "http/http.h"

http_handler cond_meta_taskdefs_post;
http_handler cond_meta_taskdef_put;
http_handler cond_meta_taskdefs_list;
http_handler cond_meta_taskdef_get;
http_handler cond_meta_taskdef_delete;
http_handler cond_meta_workflow_post;
http_handler cond_meta_workflow_put;
http_handler cond_meta_workflow_validate;
http_handler cond_meta_workflow_list;
http_handler cond_meta_workflow_get;
http_handler cond_meta_workflow_delete;
http_handler cond_token;

#endif
