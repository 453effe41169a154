/*
 * cli — the client commands of `nodeflow`, each a thin call of the HTTP API
 * (through src/client) whose answer is printed for a person:
 *
 *   define FILE...      register task and workflow definitions
 *   start NAME          start a workflow; prints its id
 *   get ID, events ID   one workflow (pretty JSON), its history
 *   list                workflows, newest first, a page at a time
 *   terminate, pause, resume, retry ID
 *   defs, tasks         the workflow and task definitions
 *
 * A command's own options are parsed here (--opt VALUE or --opt=VALUE,
 * before or after its arguments; "--" ends them).  Any other --option is
 * handed to the caller's hook, which applies the configuration table's
 * (--server and --namespace among them); the server and namespace are read
 * once every option is applied.
 *
 * Exit codes: 0 success; 1 a request failed, or a file could not be read
 * (the reason on stderr: the server's message, then each of its details as
 * "path: message"); 2 usage.
 *
 * Threads: the main thread, one command per process (see client.h).
 * Ownership: cli_main() keeps nothing.  Failure: reported on stderr and in
 * the exit code.
 */
#ifndef NF_CLI_CLI_H
#define NF_CLI_CLI_H

#include "util/err.h"

#include <stdbool.h>

struct cli_globals {
	/*
	 * Applies the global option at argv[*argi] (with its value), advancing
	 * *argi past both.  Sets *known false and consumes nothing when it is
	 * no global option; false with e set when its value is missing or bad.
	 */
	bool (*option)(void *arg, int argc, char **argv, int *argi, bool *known,
		       struct err *e);
	void *arg;
	/* The server's base URL and the namespace, read after the options. */
	char *const *server;
	char *const *ns;
};

/* Whether verb (argv[1]) is one of the client commands. */
bool cli_is_verb(const char *verb);
/* Runs `nodeflow VERB …` (argv[1] a verb cli_is_verb() accepts); returns
 * the exit code. */
int cli_main(int argc, char **argv, const struct cli_globals *g);

#endif
