// Drives a running node-flow with Conductor's JavaScript SDK, unchanged:
// registers definitions, starts workflows, runs TaskManager workers (two
// managers, several concurrent workers per task type, one worker that
// throws once and one that throws a NonRetryableException) and checks the
// outcome.  Run by tests/e2e/test_conductor_sdk.c:
//
//   node run.js http://127.0.0.1:PORT/api
//
// Prints "OK <summary>" and exits 0, or prints what went wrong and exits 1.
"use strict";

const {
  createConductorClient,
  MetadataClient,
  WorkflowExecutor,
  TaskClient,
  TaskManager,
  NonRetryableException,
} = require("@io-orkes/conductor-javascript");

const serverUrl = process.argv[2];
const RUNS = 12;
const DEADLINE_MS = 90000;

const quiet = {
  info() {},
  debug() {},
  error() {},
  warn() {},
};

function fail(msg) {
  console.log("FAIL " + msg);
  process.exit(1);
}

function check(cond, msg) {
  if (!cond) fail(msg);
}

async function waitFor(pred, what) {
  const until = Date.now() + DEADLINE_MS;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > until) fail("deadline passed waiting for " + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function taskDef(name, retryCount) {
  return {
    name,
    retryCount,
    retryLogic: "FIXED",
    retryDelaySeconds: 0,
    timeoutSeconds: 3600,
    responseTimeoutSeconds: 600,
    pollTimeoutSeconds: 3600,
    rateLimitFrequencyInSeconds: 1,
    concurrentExecLimit: 0,
    ownerApp: "sdk-test", // unknown to node-flow: ignored
    ownerEmail: "test@example.com",
  };
}

async function main() {
  const client = await createConductorClient({ serverUrl, logger: quiet });
  const metadata = new MetadataClient(client);
  const executor = new WorkflowExecutor(client);
  const tasks = new TaskClient(client);

  await metadata.registerTasks([
    taskDef("sdk_double", 0),
    taskDef("sdk_flaky", 2),
    taskDef("sdk_fatal", 3),
  ]);
  await executor.registerWorkflow(true, {
    name: "sdk_pipeline",
    version: 1,
    schemaVersion: 2,
    ownerEmail: "test@example.com",
    tasks: [
      {
        name: "sdk_double",
        taskReferenceName: "double_ref",
        type: "SIMPLE",
        inputParameters: { n: "${workflow.input.n}" },
      },
      {
        name: "sdk_flaky",
        taskReferenceName: "flaky_ref",
        type: "SIMPLE",
        inputParameters: { value: "${double_ref.output.doubled}" },
      },
    ],
    outputParameters: { result: "${flaky_ref.output.result}" },
  });
  await executor.registerWorkflow(true, {
    name: "sdk_fatal_flow",
    version: 1,
    schemaVersion: 2,
    tasks: [
      {
        name: "sdk_fatal",
        taskReferenceName: "fatal_ref",
        type: "SIMPLE",
        inputParameters: {},
      },
    ],
  });

  const ids = [];
  for (let n = 0; n < RUNS; n++) {
    ids.push(
      await executor.startWorkflow({
        name: "sdk_pipeline",
        version: 1,
        input: { n },
        correlationId: "sdk-" + n,
        idempotencyKey: "sdk-run-" + n,
        idempotencyStrategy: "RETURN_EXISTING",
      })
    );
  }
  const again = await executor.startWorkflow({
    name: "sdk_pipeline",
    input: { n: 0 },
    idempotencyKey: "sdk-run-0",
    idempotencyStrategy: "RETURN_EXISTING",
  });
  check(again === ids[0], "RETURN_EXISTING gave " + again + ", not " + ids[0]);
  const fatalId = await executor.startWorkflow({
    name: "sdk_fatal_flow",
    input: {},
  });

  const workers = [
    {
      taskDefName: "sdk_double",
      concurrency: 3,
      execute: async (task) => ({
        status: "COMPLETED",
        outputData: { doubled: task.inputData.n * 2 },
      }),
    },
    {
      taskDefName: "sdk_flaky",
      concurrency: 3,
      execute: async (task) => {
        if (task.retryCount === 0) throw new Error("flaky first attempt");
        return {
          status: "COMPLETED",
          outputData: { result: task.inputData.value + 1 },
        };
      },
    },
    {
      taskDefName: "sdk_fatal",
      concurrency: 1,
      execute: async () => {
        throw new NonRetryableException("cannot ever work");
      },
    },
  ];
  const managers = ["sdk-worker-a", "sdk-worker-b"].map(
    (workerID) =>
      new TaskManager(client, workers, {
        logger: quiet,
        options: { workerID, pollInterval: 50, concurrency: 3 },
      })
  );
  managers.forEach((m) => m.startPolling());

  await waitFor(async () => {
    for (const id of ids) {
      const w = await executor.getWorkflow(id, false);
      if (w.status !== "COMPLETED") return false;
    }
    const f = await executor.getWorkflow(fatalId, false);
    return f.status === "FAILED";
  }, "every workflow to finish");
  await Promise.all(managers.map((m) => m.stopPolling()));

  let failedAttempts = 0;
  for (let n = 0; n < RUNS; n++) {
    const w = await executor.getWorkflow(ids[n], true);
    check(
      w.output && w.output.result === 2 * n + 1,
      `workflow ${n} output ${JSON.stringify(w.output)}`
    );
    const flaky = w.tasks.filter((t) => t.referenceTaskName === "flaky_ref");
    check(flaky.length === 2, `workflow ${n}: ${flaky.length} flaky attempts`);
    check(
      flaky[0].status === "FAILED" && flaky[0].retryCount === 0,
      `workflow ${n}: first attempt ${flaky[0].status}/${flaky[0].retryCount}`
    );
    check(
      flaky[1].status === "COMPLETED" && flaky[1].retryCount === 1,
      `workflow ${n}: second attempt ${flaky[1].status}/${flaky[1].retryCount}`
    );
    check(
      flaky[0].reasonForIncompletion &&
        flaky[0].reasonForIncompletion.includes("flaky first attempt"),
      `workflow ${n}: reason ${flaky[0].reasonForIncompletion}`
    );
    const logs = await tasks.getTaskLogs(flaky[0].taskId);
    check(
      Array.isArray(logs) && logs.length >= 1,
      `workflow ${n}: logs of the failed attempt ${JSON.stringify(logs)}`
    );
    failedAttempts++;
  }
  const f = await executor.getWorkflow(fatalId, true);
  check(f.tasks.length === 1, `fatal workflow has ${f.tasks.length} tasks`);
  check(
    f.tasks[0].status === "FAILED_WITH_TERMINAL_ERROR",
    `fatal task status ${f.tasks[0].status}`
  );
  console.log(
    `OK ${RUNS} workflows completed, ${failedAttempts} failed attempts retried, terminal failure not retried`
  );
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
