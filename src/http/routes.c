#include "http/routes.h"

#include "http/definitions.h"
#include "http/ops.h"
#include "http/queues.h"
#include "http/workflows.h"

const struct http_route http_routes[] = {
	/* operations */
	{"GET", "/healthz", ops_healthz},
	{"GET", "/readyz", ops_readyz},
	{"GET", "/metrics", ops_metrics},

	/* namespaces and definitions (http/definitions.c) */
	{"PUT", "/v1/namespaces/{ns}", definitions_namespace_put},
	{"GET", "/v1/ns/{ns}/task-definitions", definitions_task_list},
	{"PUT", "/v1/ns/{ns}/task-definitions/{name}", definitions_task_put},
	{"GET", "/v1/ns/{ns}/task-definitions/{name}", definitions_task_get},
	{"DELETE", "/v1/ns/{ns}/task-definitions/{name}",
	 definitions_task_delete},
	{"POST", "/v1/ns/{ns}/workflow-definitions", definitions_workflow_post},
	{"GET", "/v1/ns/{ns}/workflow-definitions", definitions_workflow_list},
	{"GET", "/v1/ns/{ns}/workflow-definitions/{name}",
	 definitions_workflow_get},
	{"DELETE", "/v1/ns/{ns}/workflow-definitions/{name}",
	 definitions_workflow_delete},
	{"GET", "/v1/ns/{ns}/workflow-definitions/{name}/versions/{version}",
	 definitions_workflow_get_version},
	{"DELETE", "/v1/ns/{ns}/workflow-definitions/{name}/versions/{version}",
	 definitions_workflow_delete_version},

	/* executions (http/workflows.c) */
	{"POST", "/v1/ns/{ns}/workflows", workflows_start},
	{"GET", "/v1/ns/{ns}/workflows", workflows_list},
	{"GET", "/v1/ns/{ns}/workflows/{id}", workflows_get},
	{"GET", "/v1/ns/{ns}/workflows/{id}/events", workflows_events},
	{"GET", "/v1/ns/{ns}/workflows/{id}/tree", workflows_tree},
	{"POST", "/v1/ns/{ns}/workflows/{id}/{action}", workflows_action},
	{"POST", "/v1/ns/{ns}/workflows/{id}/tasks/{ref}/{verb}",
	 workflows_task_signal},

	/* workers (http/queues.c) */
	{"POST", "/v1/ns/{ns}/queues/{queue}/poll", queues_poll},
	{"POST", "/v1/ns/{ns}/queues/{queue}/results", queues_results},
	{"POST", "/v1/ns/{ns}/queues/{queue}/tasks/{taskId}/complete",
	 queues_complete},
	{"POST", "/v1/ns/{ns}/queues/{queue}/tasks/{taskId}/fail", queues_fail},
	{"POST", "/v1/ns/{ns}/queues/{queue}/tasks/{taskId}/heartbeat",
	 queues_heartbeat},
	{"POST", "/v1/ns/{ns}/queues/{queue}/tasks/{taskId}/release",
	 queues_release},
	{"POST", "/v1/ns/{ns}/queues/{queue}/tasks/{taskId}/defer",
	 queues_defer},
};

const size_t http_routes_count = sizeof(http_routes) / sizeof(http_routes[0]);
