#include "http/routes.h"

#include "http/conductor_metadata.h"
#include "http/conductor_tasks.h"
#include "http/conductor_workflows.h"
#include "http/definitions.h"
#include "http/ops.h"
#include "http/queues.h"
#include "http/semaphores.h"
#include "http/sinks.h"
#include "http/sse.h"
#include "http/summary.h"
#include "http/task_logs.h"
#include "http/ui.h"
#include "http/workflows.h"

const struct http_route http_routes[] = {
	/* operations */
	{"GET", "/healthz", ops_healthz},
	{"GET", "/readyz", ops_readyz},
	{"GET", "/metrics", ops_metrics},

	/* namespaces and definitions (http/definitions.c) */
	{"PUT", "/v1/namespaces/{ns}", definitions_namespace_put},
	{"GET", "/v1/namespaces", summary_namespaces},
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

	/* live status changes (http/sse.c) */
	{"GET", "/v1/ns/{ns}/events", sse_namespace_events},

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

	/* summaries for the dashboard (http/summary.c) */
	{"GET", "/v1/ns/{ns}/queues", summary_queues},
	{"GET", "/v1/ns/{ns}/stats", summary_stats},
	{"POST", "/v1/ns/{ns}/tasks/{taskId}/logs", task_logs_post},
	{"GET", "/v1/ns/{ns}/tasks/{taskId}/logs", task_logs_get},

	/* the dashboard's embedded files (http/ui.c) */
	{"GET", "/", ui_index},
	{"GET", "/ui/{file}", ui_file},

	/* the outbox: sinks, status listeners, dead letter (http/sinks.c) */
	{"GET", "/v1/ns/{ns}/sinks", sinks_list},
	{"PUT", "/v1/ns/{ns}/sinks/{name}", sinks_put},
	{"GET", "/v1/ns/{ns}/sinks/{name}", sinks_get},
	{"DELETE", "/v1/ns/{ns}/sinks/{name}", sinks_delete},
	{"GET", "/v1/ns/{ns}/status-listeners", sinks_listener_list},
	{"PUT", "/v1/ns/{ns}/status-listeners/{workflowName}",
	 sinks_listener_put},
	{"GET", "/v1/ns/{ns}/status-listeners/{workflowName}",
	 sinks_listener_get},
	{"DELETE", "/v1/ns/{ns}/status-listeners/{workflowName}",
	 sinks_listener_delete},
	{"GET", "/v1/ns/{ns}/outbox/dead-letter", sinks_dead_list},
	{"POST", "/v1/ns/{ns}/outbox/dead-letter/replay", sinks_dead_replay},
	/* flow control (http/semaphores.c) */
	{"GET", "/v1/ns/{ns}/semaphores", semaphores_list_handler},
	{"PUT", "/v1/ns/{ns}/semaphores/{name}", semaphores_put_handler},
	{"GET", "/v1/ns/{ns}/semaphores/{name}", semaphores_get_handler},
	{"DELETE", "/v1/ns/{ns}/semaphores/{name}", semaphores_delete_handler},

	/* the Conductor-compatible API (http/conductor_*.c); the first
	 * matching route wins, so literal segments come first */
	{"POST", "/api/token", cond_token},
	{"GET", "/api/tasks/poll/batch/{taskType}", cond_tasks_poll_batch},
	{"GET", "/api/tasks/poll/{taskType}", cond_tasks_poll},
	{"GET", "/api/tasks/queue/size", cond_tasks_queue_size},
	{"GET", "/api/tasks/queue/sizes", cond_tasks_queue_sizes},
	{"POST", "/api/tasks", cond_tasks_update},
	{"POST", "/api/tasks/update-v2", cond_tasks_update_v2},
	{"POST", "/api/tasks/{taskId}/log", cond_tasks_log_add},
	{"GET", "/api/tasks/{taskId}/log", cond_tasks_logs},
	{"GET", "/api/tasks/{taskId}", cond_tasks_get},
	{"POST", "/api/tasks/{workflowId}/{taskRefName}/{status}",
	 cond_tasks_update_by_ref},
	{"POST", "/api/workflow", cond_workflow_start},
	{"GET", "/api/workflow/search", cond_workflow_search},
	{"GET", "/api/workflow/running/{name}", cond_workflow_running},
	{"PUT", "/api/workflow/bulk/{action}", cond_workflow_bulk},
	{"POST", "/api/workflow/bulk/{action}", cond_workflow_bulk},
	{"POST", "/api/workflow/{name}", cond_workflow_start_named},
	{"GET", "/api/workflow/{id}", cond_workflow_get},
	{"DELETE", "/api/workflow/{id}", cond_workflow_terminate},
	{"GET", "/api/workflow/{id}/status", cond_workflow_status},
	{"PUT", "/api/workflow/{id}/{action}", cond_workflow_put_action},
	{"POST", "/api/workflow/{id}/{action}", cond_workflow_post_action},
	{"GET", "/api/workflow/{name}/correlated/{correlationId}",
	 cond_workflow_correlated},
	{"PUT", "/api/workflow/{id}/skiptask/{ref}", cond_workflow_skip},
	{"POST", "/api/metadata/taskdefs", cond_meta_taskdefs_post},
	{"PUT", "/api/metadata/taskdefs", cond_meta_taskdef_put},
	{"GET", "/api/metadata/taskdefs", cond_meta_taskdefs_list},
	{"GET", "/api/metadata/taskdefs/{name}", cond_meta_taskdef_get},
	{"DELETE", "/api/metadata/taskdefs/{name}", cond_meta_taskdef_delete},
	{"POST", "/api/metadata/workflow/validate",
	 cond_meta_workflow_validate},
	{"POST", "/api/metadata/workflow", cond_meta_workflow_post},
	{"PUT", "/api/metadata/workflow", cond_meta_workflow_put},
	{"GET", "/api/metadata/workflow", cond_meta_workflow_list},
	{"GET", "/api/metadata/workflow/{name}", cond_meta_workflow_get},
	{"DELETE", "/api/metadata/workflow/{name}/{version}",
	 cond_meta_workflow_delete},
};

const size_t http_routes_count = sizeof(http_routes) / sizeof(http_routes[0]);
