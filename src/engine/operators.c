#include "engine/operators.h"

#include "engine/expr.h"
#include "util/mem.h"
#include "util/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- NOOP */

void
op_noop_start(struct eval *ev, const struct wf_task *wt, struct op_run *run)
{
	(void)ev;
	(void)wt;
	run->status = "COMPLETED";
}

/* --------------------------------------------------------- SET_VARIABLE */

/* Its input is merged into the workflow's variables. */
void
op_set_variable_start(struct eval *ev, const struct wf_task *wt,
		      struct op_run *run)
{
	(void)wt;
	decider_set_variables(ev, run->input);
	run->status = "COMPLETED";
}
