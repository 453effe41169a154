/*
 * definitions — the native API for namespaces, task definitions and
 * workflow definitions:
 *
 *   PUT    /v1/namespaces/{ns}                  201 new, 200 existed
 *   PUT    /v1/ns/{ns}/task-definitions/{name}  201 new, 200 replaced
 *   GET    /v1/ns/{ns}/task-definitions         {"items":[…]}
 *   GET    /v1/ns/{ns}/task-definitions/{name}
 *   DELETE /v1/ns/{ns}/task-definitions/{name}  204
 *   POST   /v1/ns/{ns}/workflow-definitions[?overwrite=true]
 *          201 new, 200 replaced (overwrite), 409 exists
 *   GET    /v1/ns/{ns}/workflow-definitions[?allVersions=true]
 *          {"items":[…]}, the latest version of each name by default
 *   GET    …/workflow-definitions/{name}        the latest version
 *   GET    …/workflow-definitions/{name}/versions/{version}
 *   DELETE …/workflow-definitions/{name}        every version, 204
 *   DELETE …/workflow-definitions/{name}/versions/{version}  204
 *
 * Bodies are Conductor's TaskDef and WorkflowDef (engine/dsl.h); what is
 * answered is the definition as stored, in the same shape.  A definition is
 * validated whole before anything is written, so a rejected request changes
 * nothing: 400 with one detail per problem ({path, message}), 404 for an
 * unknown namespace, name or version, 409 for a workflow version that
 * exists when overwrite was not asked for.
 *
 * Threads: MHD's, several at once; each handler takes its own pooled
 * connection.  Failure: every error is a JSON error body (http.h, api.h).
 */
#ifndef NF_HTTP_DEFINITIONS_H
#define NF_HTTP_DEFINITIONS_H

#include "http/http.h"

void definitions_namespace_put(struct http_request *req,
			       struct http_response *res);

void definitions_task_put(struct http_request *req, struct http_response *res);
void definitions_task_get(struct http_request *req, struct http_response *res);
void definitions_task_list(struct http_request *req, struct http_response *res);
void definitions_task_delete(struct http_request *req,
			     struct http_response *res);

void definitions_workflow_post(struct http_request *req,
			       struct http_response *res);
void definitions_workflow_list(struct http_request *req,
			       struct http_response *res);
/* The latest version. */
void definitions_workflow_get(struct http_request *req,
			      struct http_response *res);
void definitions_workflow_get_version(struct http_request *req,
				      struct http_response *res);
/* Every version. */
void definitions_workflow_delete(struct http_request *req,
				 struct http_response *res);
void definitions_workflow_delete_version(struct http_request *req,
					 struct http_response *res);

#endif
