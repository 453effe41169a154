// The dashboard in a real headless Chromium (Debian's chromium, driven by
// playwright-core) against a running server: NODEFLOW_URL is its base URL
// (tests/e2e/test_ui.c starts one on a fresh database).
//
//   node dashboard.test.mjs [scenario...]     all scenarios by default
//
// Scenarios: list (open, filter, back button, search), live (a running
// workflow's graph and history change without a reload when its task is
// completed through the API; its attempt's log lines shown), between (a
// workflow started while the list opens is listed), retry (a failed workflow retried from the
// page), subflow (links from a parent to its child and back), definitions
// (the server's validation errors shown at their JSON path), sse (the
// live streams as server-sent events, reconnecting), reconnect (a lost
// connection shows the banner, then resumes with Last-Event-ID), ended (a
// workflow that ends while its page loads is shown ended), bounded
// (a long loop watched live: the history and attempts drawn stay capped), pages (every
// page renders; with NODEFLOW_UI_SCREENSHOTS=DIR each is saved there as a
// PNG, the pictures of docs/ui.md), big (the first page of a list of
// 100,000 executions, which test_ui.c inserts first).
// Exit status 0 when every scenario passed; each failure is printed.

import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BASE = process.env.NODEFLOW_URL;
if (!BASE) { console.error('NODEFLOW_URL is not set'); process.exit(2); }
const SHOTS = process.env.NODEFLOW_UI_SCREENSHOTS || '';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const NS = `${BASE}/v1/ns/default`;
const WAIT = 15000;

async function api(method, path, body, want) {
  const r = await fetch(path.startsWith('http') ? path : NS + path, {
    method, headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (want && r.status !== want) throw new Error(`${method} ${path}: ${r.status}, wanted ${want}: ${text}`);
  return text ? JSON.parse(text) : null;
}
const start = async (name, input = {}, extra = {}) => (await api('POST', '/workflows', { name, input, ...extra }, 201)).id;
async function until(what, fn, ms = WAIT) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise(r => setTimeout(r, 50));
  }
}

// Data every scenario can use.
async function seed() {
  for (const f of ['approval', 'audit', 'order_failed', 'order', 'reminder']) {
    const def = JSON.parse(readFileSync(join(ROOT, 'examples/subflows', `${f}.workflow.json`), 'utf8'));
    await api('POST', '/workflow-definitions?overwrite=true', def);
  }
  const fork = JSON.parse(readFileSync(join(ROOT, 'examples/operators/fork_join.workflow.json'), 'utf8'));
  await api('POST', '/workflow-definitions?overwrite=true', fork);
  await api('PUT', '/task-definitions/ui_work', { name: 'ui_work', retryCount: 0, responseTimeoutSeconds: 60 });
  await api('POST', '/workflow-definitions?overwrite=true', {
    name: 'ui_gate', version: 1, description: 'A WAIT, then a switch and a fork',
    tasks: [
      { name: 'gate', taskReferenceName: 'gate', type: 'WAIT' },
      { name: 'route', taskReferenceName: 'route', type: 'SWITCH', evaluatorType: 'value-param', expression: 'kind',
        inputParameters: { kind: '${workflow.input.kind}' },
        decisionCases: { fast: [{ name: 'fast', taskReferenceName: 'fast', type: 'NOOP' }] },
        defaultCase: [{ name: 'slow', taskReferenceName: 'slow', type: 'NOOP' }] },
      { name: 'both', taskReferenceName: 'both', type: 'FORK_JOIN', forkTasks: [
        [{ name: 'left', taskReferenceName: 'left', type: 'NOOP' }],
        [{ name: 'right', taskReferenceName: 'right', type: 'SET_VARIABLE', inputParameters: { side: 'right' } }]] },
      { name: 'meet', taskReferenceName: 'meet', type: 'JOIN', joinOn: ['left', 'right'] },
    ],
  });
  await api('POST', '/workflow-definitions?overwrite=true', {
    name: 'ui_job', version: 1, tasks: [{ name: 'ui_work', taskReferenceName: 'work', type: 'SIMPLE' }],
  });
  const s = {};
  s.gate = await start('ui_gate', { customer: { id: 42 }, kind: 'fast' }, { correlationId: 'cust-42' });
  s.other = await start('ui_gate', { customer: { id: 7 }, kind: 'slow' });
  s.failed = await start('ui_job', { n: 1 });
  const polled = await until('a ui_work task', async () => {
    const r = await api('POST', '/queues/ui_work/poll', { workerId: 'ui-worker', count: 1 }, 200);
    return r.tasks[0];
  });
  await api('POST', `/queues/ui_work/tasks/${polled.id}/fail`, { workerId: 'ui-worker', reason: 'the printer is on fire', logs: ['warming up the printer', 'smoke seen'] }, 200);
  await until('the job to fail', async () => (await api('GET', `/workflows/${s.failed}`)).status === 'FAILED');
  s.order = await start('order', { orderId: 'o-ui', amount: 10 }, { correlationId: 'o-ui' });
  s.child = await until('the order\'s child', async () => (await api('GET', `/workflows/${s.order}/tree`)).tree.children[0]?.id);
  return s;
}

const T0 = Date.now();
const stamp = (what) => process.env.NODEFLOW_UI_VERBOSE && console.log(`${Date.now() - T0} ms: ${what}`);

const scenarios = {
  async list(page, s) {
    await page.goto(`${BASE}/`);
    const rows = page.locator('#executions tbody tr');
    await rows.first().waitFor();
    // Defaults to what is running: the gate runs, the failed job does not show.
    await page.locator(`#executions tr[data-id="${s.gate}"]`).waitFor();
    assert.equal(await page.locator(`#executions tr[data-id="${s.failed}"]`).count(), 0, 'a failed execution in the default list');
    for (const t of await page.locator('#executions tbody tr td:first-child').allTextContents()) assert.equal(t, 'RUNNING');
    // Filter by status: the URL says so, and back returns to the running list.
    await page.selectOption('#f-status', 'FAILED');
    await page.waitForURL(/status=FAILED/);
    await page.locator(`#executions tr[data-id="${s.failed}"]`).waitFor();
    assert.equal(await page.locator(`#executions tr[data-id="${s.gate}"]`).count(), 0);
    assert.match(await page.locator(`#executions tr[data-id="${s.failed}"]`).innerText(), /the printer is on fire/);
    await page.goBack();
    await page.locator(`#executions tr[data-id="${s.gate}"]`).waitFor();
    assert.equal(await page.locator('#f-status').inputValue(), 'RUNNING');
    // Filter by definition and correlation id.
    await page.fill('#f-name', 'ui_gate');
    await page.fill('#f-corr', 'cust-42');
    await page.click('form[role=search] button[type=submit]');
    await page.waitForURL(/correlationId=cust-42/);
    await until('one row', async () => (await rows.count()) === 1 && (await page.locator(`tr[data-id="${s.gate}"]`).count()) === 1);
    // Search: input.customer.id:7 finds the other gate only.
    await page.goto(`${BASE}/#/executions?ns=default`);
    await page.fill('#f-q', 'input.customer.id:7');
    await page.press('#f-q', 'Enter');
    await page.waitForURL(/q=input.customer.id/);
    await until('the search result', async () => (await rows.count()) === 1 && (await page.locator(`tr[data-id="${s.other}"]`).count()) === 1);
    // A shared URL reproduces the view.
    await page.goto(`${BASE}/#/executions?ns=default&status=FAILED&name=ui_job`);
    await page.locator(`#executions tr[data-id="${s.failed}"]`).waitFor();
    // The keyboard reaches the rows' links from the top of the page.
    let reached = false;
    for (let i = 0; i < 80 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => !!document.activeElement?.closest('#executions tbody a'));
    }
    assert.ok(reached, 'Tab never reached a row');
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`executions/${s.failed}`));
    // Live arrivals do not move the rows: they are counted in the bar above
    // the list, and shown when asked.
    await page.goto(`${BASE}/#/executions?ns=default&status=ALL&name=ui_job`);
    const first = page.locator('#executions tbody tr').first();
    await first.waitFor();
    const before = { id: await first.getAttribute('data-id'), box: await first.boundingBox(), n: await rows.count() };
    const fresh = [await start('ui_job', { n: 10 }), await start('ui_job', { n: 11 })];
    await until('the arrivals counted', async () => /^2 new executions/.test(await page.locator('#show-new').innerText()));
    assert.equal(await first.getAttribute('data-id'), before.id, 'the first row changed');
    assert.deepEqual(await first.boundingBox(), before.box, 'the rows moved');
    assert.equal(await rows.count(), before.n);
    await page.click('#show-new');
    await until('the arrivals shown on top', async () => (await rows.count()) === before.n + 2 &&
      fresh.includes(await first.getAttribute('data-id')));
    assert.equal(await page.locator('#show-new').isVisible(), false, 'the bar still shows');
  },

  async live(page, s) {
    await page.goto(`${BASE}/#/executions?ns=default&name=ui_gate`);
    // A row updated live keeps the keyboard's focus on its link.
    const gateRow = page.locator(`#executions tr[data-id="${s.gate}"]`);
    await gateRow.locator('a').focus();
    await api('POST', `/workflows/${s.gate}/pause`, {}, 200);
    await until('the row paused', async () => /PAUSED/.test(await gateRow.innerText()));
    assert.equal(await page.evaluate(() => document.activeElement?.closest('tr')?.dataset.id), s.gate,
      'the focus left the row when it was updated');
    await api('POST', `/workflows/${s.gate}/resume`, {}, 200);
    await until('the row running again', async () => /RUNNING/.test(await gateRow.innerText()));
    await page.click(`#executions tr[data-id="${s.gate}"] a`);
    await page.waitForURL(new RegExp(s.gate));
    const gate = page.locator('#graph g.node[data-ref="gate"]');
    await gate.waitFor();
    await until('the gate in progress', async () => /st-IN_PROGRESS/.test(await gate.getAttribute('class')));
    assert.match(await page.locator('#graph g.node[data-ref="fast"]').getAttribute('class'), /st-NONE/);
    // The action buttons are drawn again on every change: the focused one
    // keeps the focus (Terminate stays enabled while paused).
    await page.focus('button[data-action=terminate]');
    await api('POST', `/workflows/${s.gate}/pause`, {}, 200);
    await until('PAUSED', async () => /PAUSED/.test(await page.locator('h1 .badge').innerText()));
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.action), 'terminate',
      'the focus left the actions when they were redrawn');
    await api('POST', `/workflows/${s.gate}/resume`, {}, 200);
    await until('RUNNING again', async () => /RUNNING/.test(await page.locator('h1 .badge').innerText()));
    await page.evaluate(() => { window.__noReload = true; });
    // The gate's attempt shows the lines logged for it, a new one as well.
    const gateTask = (await api('GET', `/workflows/${s.gate}`)).tasks.find(t => t.refName === 'gate');
    await api('POST', `/tasks/${gateTask.id}/logs`, { logs: ['asked the approver', { log: 'reminder sent', createdTime: Date.now() }] }, 201);
    await gate.click();
    const logs = page.locator(`#task-panel .task-logs[data-task="${gateTask.id}"]`);
    await until('the log lines', async () => /asked the approver[\s\S]*reminder sent/.test(await logs.innerText()));
    await api('POST', `/tasks/${gateTask.id}/logs`, { log: 'approved by ana' }, 201);
    // Complete the gate through the API: the page follows by itself.
    await api('POST', `/workflows/${s.gate}/tasks/gate/complete`, { output: { ok: true } }, 200);
    await until('the gate completed in the graph', async () => /st-COMPLETED/.test(await gate.getAttribute('class')));
    await until('the fast case completed', async () => /st-COMPLETED/.test(await page.locator('#graph g.node[data-ref="fast"]').getAttribute('class')));
    assert.match(await page.locator('#graph g.node[data-ref="slow"]').getAttribute('class'), /st-NONE/);
    await until('the join completed', async () => /st-COMPLETED/.test(await page.locator('#graph g.node[data-ref="meet"]').getAttribute('class')));
    await until('WORKFLOW_COMPLETED in the history', async () => /WORKFLOW_COMPLETED/.test(await page.locator('#history-list').innerText()));
    // Tasks scheduled while the page was open are named in the history.
    await until('the history naming every task', async () => (await page.locator('#history-list span[data-task-id]').count()) === 0 &&
      /TASK_COMPLETED meet/.test(await page.locator('#history-list').innerText()));
    await until('the status', async () => /COMPLETED/.test(await page.locator('h1 .badge').innerText()));
    await until('the line logged while open', async () => /approved by ana/.test(await logs.innerText()));
    assert.match(await logs.innerText(), /Logs \(3\)/);
    assert.equal(await page.evaluate(() => window.__noReload), true, 'the page reloaded');
    // A task's attempts.
    await gate.click();
    await page.locator('#task-panel .attempt').first().waitFor();
    assert.match(await page.locator('#task-panel').innerText(), /attempt 0/);
  },

  async retry(page, s) {
    await page.goto(`${BASE}/#/executions/${s.failed}?ns=default`);
    await until('FAILED', async () => /FAILED/.test(await page.locator('h1 .badge').innerText()));
    assert.match(await page.locator('#graph g.node[data-ref="work"]').getAttribute('class'), /st-FAILED/);
    // Pause is refused by the page (disabled); Retry asks first.
    assert.equal(await page.locator('button[data-action=pause]').isDisabled(), true);
    await page.click('button[data-action=retry]');
    await page.locator('#confirm[open]').waitFor();
    await page.click('#confirm-ok');
    await until('RUNNING', async () => /RUNNING/.test(await page.locator('h1 .badge').innerText()));
    assert.equal((await api('GET', `/workflows/${s.failed}`)).status, 'RUNNING');
    await until('a new attempt scheduled', async () => /st-SCHEDULED|st-IN_PROGRESS/.test(await page.locator('#graph g.node[data-ref="work"]').getAttribute('class')));
    // The server's refusal is shown: a retry of a running workflow (sent by
    // the page's own client, as a stale page would).
    await page.evaluate(async (id) => {
      const { post } = await import('/ui/api.js');
      try { await post(`workflows/${id}/retry`); } catch (e) { window.__refusal = e.status + ' ' + e.message; }
    }, s.failed);
    assert.match(await page.evaluate(() => window.__refusal), /^409/);
    // Terminate, confirmed with a reason; a second terminate is refused and shown.
    await page.click('button[data-action=terminate]');
    await page.fill('#confirm-input', 'enough');
    await page.click('#confirm-ok');
    await until('TERMINATED', async () => /TERMINATED/.test(await page.locator('h1 .badge').innerText()));
    assert.equal((await api('GET', `/workflows/${s.failed}`)).reason, 'enough');
  },

  async subflow(page, s) {
    await page.goto(`${BASE}/#/executions/${s.order}?ns=default`);
    const link = page.locator(`#tree a.tree-link[data-id="${s.child}"]`);
    await link.waitFor();
    await link.click();
    await page.waitForURL(new RegExp(s.child));
    await page.locator('#graph g.node[data-ref="approve"]').waitFor();
    await page.locator('#parent-link').click();
    await page.waitForURL(new RegExp(s.order));
    await page.locator('#graph g.node[data-ref="approval"]').waitFor();
    // From the SUB_WORKFLOW task's attempt too.
    await page.locator('#graph g.node[data-ref="approval"]').click();
    await page.locator('#task-panel a.sub-link').click();
    await page.waitForURL(new RegExp(s.child));
  },

  // A lost connection shows the banner, and the stream then resumes where
  // it stopped (Last-Event-ID): what happened meanwhile is shown, once.  The
  // first answer is the real history as a stream that then ends (as a
  // dropped connection does); the reconnections fail while "down" holds;
  // then they go to the server.
  async reconnect(page, s) {
    let down = true, first = true;
    const resumed = [];
    await page.route(new RegExp(`/v1/ns/default/workflows/${s.other}/events$`), async (route) => {
      const req = route.request();
      if (!(req.headers()['accept'] || '').includes('text/event-stream')) return route.continue();
      if (first) {
        first = false;
        const { events } = await api('GET', `/workflows/${s.other}/events`);
        const body = events.map(e => `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
        return route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body });
      }
      if (down) return route.abort('connectionreset');
      resumed.push(req.headers()['last-event-id'] || '');
      return route.continue();
    });
    await page.goto(`${BASE}/#/executions/${s.other}?ns=default`);
    await until('the history', async () => /WORKFLOW_STARTED/.test(await page.locator('#history-list').innerText()));
    const banner = page.locator('#banner');
    await until('the banner', () => banner.isVisible());
    assert.match(await banner.innerText(), /reconnecting/);
    const last = String(Math.max(...(await api('GET', `/workflows/${s.other}/events`)).events.map(e => e.seq)));
    await api('POST', `/workflows/${s.other}/tasks/gate/complete`, { output: { ok: true } }, 200);
    down = false;
    await until('the banner gone', async () => !(await banner.isVisible()), 30000);
    await until('WORKFLOW_COMPLETED in the history', async () => /WORKFLOW_COMPLETED/.test(await page.locator('#history-list').innerText()));
    assert.equal(resumed[0], last, 'the stream did not resume after the last event shown');
    const seqs = await page.locator('#history-list li > span:first-child').allInnerTexts();
    assert.equal(new Set(seqs).size, seqs.length, `an event shown twice: ${seqs}`);
    await until('the graph', async () => /st-COMPLETED/.test(await page.locator('#graph g.node[data-ref="meet"]').getAttribute('class')));
  },

  // A workflow that ends while the page loads: the page read it running,
  // then its history (held here until the workflow has ended) holds the
  // end, and the live stream has nothing more to tell.  The page still
  // shows how it ended.
  async ended(page) {
    const id = await start('ui_gate', { kind: 'fast' });
    let held = false;
    await page.route(new RegExp(`/v1/ns/default/workflows/${id}/events\\?`), async (route) => {
      if (!held) {
        held = true;
        await api('POST', `/workflows/${id}/tasks/gate/complete`, { output: { ok: true } }, 200);
        await until('the workflow to end', async () => (await api('GET', `/workflows/${id}`)).status === 'COMPLETED');
      }
      return route.continue();
    });
    await page.goto(`${BASE}/#/executions/${id}?ns=default`);
    await until('WORKFLOW_COMPLETED in the history', async () => /WORKFLOW_COMPLETED/.test(await page.locator('#history-list').innerText()));
    assert.ok(held, 'the history was not read');
    await until('the page to show it ended', async () => /COMPLETED/.test(await page.locator('h1 .badge').innerText()));
  },

  // What a page keeps stays bounded however much streams in: a loop of
  // 300 iterations (its history over the 500 events kept, its looped task
  // with 300 attempts) watched live, its task chosen.  The counts are of
  // elements drawn, after the loop ended; no timing.
  async bounded(page) {
    await api('POST', '/workflow-definitions?overwrite=true', {
      name: 'ui_loop', version: 1, tasks: [{
        name: 'loop', taskReferenceName: 'loop', type: 'DO_WHILE', loopCondition: "$.loop['iteration'] < 300",
        inputParameters: { keepLastN: 2 },
        loopOver: [{ name: 'tick', taskReferenceName: 'tick', type: 'SET_VARIABLE', inputParameters: { last: '${loop.output.iteration}' } }],
      }],
    });
    const id = await start('ui_loop');
    await page.goto(`${BASE}/#/executions/${id}?ns=default&task=tick`);
    try {
      await until('the loop to end in the page', async () => /COMPLETED/.test(await page.locator('h1 .badge').innerText()), 120000);
    } catch (e) {
      const w = await api('GET', `/workflows/${id}`);
      throw new Error(`${e.message}: the page shows ${await page.locator('h1 .badge').innerText()}, the API ${w.status} (${id}); toasts: ${await page.locator('#toasts').innerText()}; newest history line: ${await page.locator('#history-list li').first().innerText()}; events: ${(await api('GET', `/workflows/${id}/events?limit=1000`)).events.length}`);
    }
    await until('WORKFLOW_COMPLETED in the history', async () => /WORKFLOW_COMPLETED/.test(await page.locator('#history-list').innerText()), 60000);
    const { events } = await api('GET', `/workflows/${id}/events?limit=1000`);
    assert.ok(events.length > 500, `only ${events.length} events`);
    assert.equal(await page.locator('#history-list li').count(), 500);
    assert.match(await page.locator('#history-info').innerText(), /latest 500/);
    // The latest events, newest first, each once.
    const seqs = (await page.locator('#history-list li > span:first-child').allInnerTexts()).map(t => Number(t.slice(1)));
    assert.equal(seqs[0], events[events.length - 1].seq);
    assert.deepEqual(seqs, seqs.slice().sort((x, y) => y - x));
    assert.equal(new Set(seqs).size, seqs.length);
    await until('the attempts drawn', async () => (await page.locator('#task-panel .attempt').count()) === 20);
    assert.match(await page.locator('#attempts-info').innerText(), /latest 20 of 300 attempts/);
    assert.ok(await page.locator('#timeline .tl-row').count() <= 300);
  },

  // A workflow started while the list page opens, after the server chose
  // where the page's live stream starts (held here until it has started):
  // the page reads the list after that, so the workflow is in it.
  async between(page) {
    let started = null;
    await page.route(/\/v1\/ns\/default\/events$/, async (route) => {
      const req = route.request();
      if (!started && (req.headers()['accept'] || '').includes('text/event-stream'))
        started = await start('ui_job', { n: 20 });
      return route.continue();
    });
    await page.goto(`${BASE}/#/executions?ns=default&status=ALL&name=ui_job`);
    await until('the stream asked for', async () => started);
    await page.locator(`#executions tr[data-id="${started}"]`).waitFor();
  },

  async definitions(page) {
    await page.goto(`${BASE}/#/definitions?ns=default`);
    await page.locator('#wf-defs a', { hasText: 'ui_gate' }).click();
    await page.locator('#def-graph g.node[data-ref="route"]').waitFor();
    assert.equal(await page.locator('#def-graph g.node[data-ref="fast"]').count(), 1);
    await page.goto(`${BASE}/#/definitions/new?ns=default`);
    await page.fill('#def-editor', JSON.stringify({ name: 'ui_bad', version: 1, tasks: [{ name: 'x', type: 'WAIT' }] }));
    await page.click('#def-save');
    await page.locator('#def-errors .error-box').waitFor();
    const marked = page.locator('#def-errors li.bad');
    await marked.first().waitFor();
    assert.match(await page.locator('#def-errors').innerText(), /\$\.tasks\[0\]\.taskReferenceName/);
    // Start a run from a definition.
    await page.goto(`${BASE}/#/definitions/ui_gate?ns=default&start=1`);
    await page.fill('#start-input', '{"kind":"fast"}');
    await page.click('#start-run');
    await page.waitForURL(/#\/executions\/[0-9a-f-]{36}/);
    await page.locator('#graph g.node[data-ref="gate"]').waitFor();
  },

  // The live streams as server-sent events, whatever this server has: the
  // browser's requests for text/event-stream are answered here, as a server
  // with the streams would, and each answer then ends, as a dropped
  // connection does.  The page parses the named events, and reconnects
  // with the last id it saw.
  async sse(page, s) {
    const lastIds = [];
    await page.route(/\/v1\/ns\/default\/workflows\/[^/]+\/events$/, async (route) => {
      const req = route.request();
      if (!(req.headers()['accept'] || '').includes('text/event-stream')) return route.continue();
      lastIds.push(req.headers()['last-event-id'] || '');
      const ev = { seq: 900, type: 'TASK_UPDATED', taskId: null, data: { note: 'from the stream' }, at: new Date().toISOString() };
      await route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' },
        body: `: hello\n\nid: 900\nevent: TASK_UPDATED\ndata: ${JSON.stringify(ev)}\n\nretry: 300\n\n` });
    });
    await page.route(/\/v1\/ns\/default\/events$/, async (route) => {
      const wf = { id: s.other, name: 'ui_gate', version: 1, status: 'PAUSED', correlationId: null, reason: 'held by the stream',
        parentWorkflowId: null, startedAt: new Date(0).toISOString(), updatedAt: new Date().toISOString(), endedAt: null, eventType: 'WORKFLOW_PAUSED', seq: 5 };
      await route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' },
        body: `id: 5\nevent: workflow\ndata: ${JSON.stringify(wf)}\n\n` });
    });
    await page.goto(`${BASE}/#/executions/${s.other}?ns=default`);
    await until('the streamed event', async () => /#900[\s\S]*TASK_UPDATED[\s\S]*from the stream/.test(await page.locator('#history-list').innerText()));
    await until('a reconnect with Last-Event-ID', async () => lastIds.includes('900'));
    assert.notEqual(lastIds[0], '900', 'the first request already resumed');
    // The list: a row updated in place from the namespace stream.
    await page.goto(`${BASE}/#/executions?ns=default&name=ui_gate&status=ALL`);
    const row = page.locator(`#executions tr[data-id="${s.other}"]`);
    await until('the row updated', async () => /PAUSED[\s\S]*held by the stream/.test(await row.innerText()));
  },

  async pages(page, s) {
    const shots = [
      ['executions', `#/executions?ns=default&status=ALL`, '#executions tbody tr'],
      ['execution', `#/executions/${s.order}?ns=default&task=approval`, '#tree a'],
      ['execution-failed', `#/executions/${s.failedShot}?ns=default&task=work`, '#task-panel .attempt'],
      ['definitions', `#/definitions?ns=default`, '#wf-defs tbody tr'],
      ['definition', `#/definitions/ui_gate?ns=default`, '#def-graph svg'],
      ['queues', `#/queues?ns=default`, '#queues table'],
      ['overview', `#/overview?ns=default`, '#chart svg'],
    ];
    for (const [name, hash, sel] of shots) {
      await page.goto(`${BASE}/${hash}`);
      await page.locator(sel).first().waitFor();
      if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
    }
    await page.goto(`${BASE}/#/executions/${s.order}?ns=default`);
    await page.locator('#tree a').first().waitFor();
    if (await page.evaluate(() => document.documentElement.dataset.theme) !== 'dark') await page.click('#theme');
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    if (SHOTS) await page.screenshot({ path: join(SHOTS, 'execution-dark.png'), fullPage: true });
    await page.click('#theme');
    // Keyboard: the graph's nodes are reachable and open with Enter.
    const node = page.locator('#graph g.node[data-ref="approval"]');
    await node.focus();
    await page.keyboard.press('Enter');
    await page.locator('#task-panel .attempt').first().waitFor();
    // Choosing the node redrew the graph: the focus is on the node again,
    // not on the page (a live refresh redraws it the same way).
    assert.equal(await page.evaluate(() => document.activeElement?.closest('g.node')?.dataset.ref), 'approval',
      'the focus left the graph when it was redrawn');
  },

  async big(page) {
    // From the definitions page to the list: a cold load first (its
    // statements are prepared on the server's pooled connections, and the
    // browser loads its modules), then
    // NODEFLOW_UI_BIG_RUNS (1) warm ones, what a person sees after that:
    // timed in the page, from the navigation to the frame after the 50 rows
    // are drawn (bench/ui-list.sh prints the figures).
    const runs = Number(process.env.NODEFLOW_UI_BIG_RUNS || 1);
    const warm = [];
    // The page's own work in each (Performance.getMetrics: time in script,
    // style and layout), apart from the wait for the server.
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const work = async () => {
      const m = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map(x => [x.name, x.value]));
      return { script: m.ScriptDuration * 1000, style: m.RecalcStyleDuration * 1000, layout: m.LayoutDuration * 1000, layouts: m.LayoutCount, styles: m.RecalcStyleCount };
    };
    page.setDefaultTimeout(60000); // a loaded machine: the first load prepares its statements
    for (let i = 0; i <= runs; i++) {
      await page.goto(`${BASE}/#/definitions?ns=default`);
      await page.locator('#wf-defs').waitFor();
      const w0 = await work();
      const ms = await page.evaluate(() => new Promise((resolve) => {
        const t0 = performance.now();
        location.hash = '#/executions?ns=default&status=ALL';
        const check = () => {
          if (document.querySelectorAll('#executions tbody tr').length >= 50)
            requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - t0), 0));
          else requestAnimationFrame(check);
        };
        requestAnimationFrame(check);
      }));
      const w1 = await work();
      const info = await page.locator('#list-info').innerText();
      if (i) warm.push(ms);
      console.log(`big: the first page of the list (${i ? 'warm ' + i : 'cold'}) drawn in ${Math.round(ms)} ms (${info}; ` +
        `the page's work: script ${Math.round(w1.script - w0.script)} ms, style ${Math.round(w1.style - w0.style)} ms (${w1.styles - w0.styles}×), layout ${Math.round(w1.layout - w0.layout)} ms (${w1.layouts - w0.layouts}×))`);
    }
    const sorted = warm.slice().sort((a, b) => a - b);
    console.log(`big: ${runs} warm run(s): median ${Math.round(sorted[Math.floor((runs - 1) / 2)])} ms, most ${Math.round(sorted[runs - 1])} ms`);
    await page.click('#load-more');
    await until('100 rows', async () => (await page.locator('#executions tbody tr').count()) === 100);
  },
};

const wanted = process.argv.slice(2).length ? process.argv.slice(2) : ['list', 'live', 'retry', 'subflow', 'definitions', 'sse', 'reconnect', 'bounded', 'pages'];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
let failed = 0, passed = 0;
try {
  const s = wanted.includes('big') && wanted.length === 1 ? {} : await seed();
  if (wanted.includes('pages')) {
    // A failed job of its own for the pictures (retry changes the first).
    s.failedShot = await start('ui_job', { n: 2 });
    const t = await until('a task', async () => (await api('POST', '/queues/ui_work/poll', { workerId: 'ui-worker-2', count: 1 }, 200)).tasks[0]);
    await api('POST', `/queues/ui_work/tasks/${t.id}/fail`, { workerId: 'ui-worker-2', reason: 'out of paper', logs: ['printing page 1 of 3', 'tray 2 is empty'] }, 200);
    await until('it to fail', async () => (await api('GET', `/workflows/${s.failedShot}`)).status === 'FAILED');
  }
  for (const name of wanted) {
    const ctx = await browser.newContext({ viewport: { width: 1366, height: 900 } });
    const page = await ctx.newPage();
    page.setDefaultTimeout(WAIT);
    const errors = [];
    page.on('pageerror', e => errors.push(e.message));
    const pending = new Map();
    page.on('request', r => pending.set(r, Date.now()));
    page.on('requestfinished', r => pending.delete(r));
    page.on('requestfailed', r => pending.delete(r));
    const t0 = Date.now();
    try {
      await scenarios[name](page, s);
      assert.deepEqual(errors, [], 'errors in the page');
      passed++;
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e.stack || e}`);
      for (const [r, t] of pending) console.log(`  pending for ${Date.now() - t} ms: ${r.method()} ${r.url()}`);
      if (SHOTS) await page.screenshot({ path: join(SHOTS, `failed-${name}.png`) }).catch(() => {});
    }
    await ctx.close();
  }
} catch (e) {
  failed++;
  console.log(`FAIL setup: ${e.stack || e}`);
} finally {
  await browser.close();
}
console.log(`dashboard: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
