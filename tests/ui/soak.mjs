// The dashboard left open: does a tab on the live streams keep its memory?
//
// A real server (started here, so that it can be restarted), a steady load
// (short workflows started and their task completed by a worker in this
// process), and two tabs of a headless Chromium: the executions list (every
// status, its rows live from the namespace stream) and the detail page of a
// running execution (a loop whose task the worker completes about once a
// second, so its history streams; the looped task chosen, so its attempts
// and their log lines are drawn).  The detail tab moves to a new running
// execution every 10 minutes (the old one is terminated), as a person
// following the work would.  Once, half-way, the server is stopped and
// started again: both streams reconnect with Last-Event-ID.
//
// Each sample (every minute) forces a garbage collection through the
// Chrome DevTools Protocol (HeapProfiler.collectGarbage) and records, per
// tab, the JS heap used (Runtime.getHeapUsage), the DOM nodes and JS event
// listeners (Performance.getMetrics), and the open streams (responses of
// type text/event-stream not yet ended, from the Network domain).  At the
// end it prints the series and fails when, per tab,
//   - the mean heap of the last window is over 1.2 × that of the first
//     window (the windows are 10 minutes, after 3 minutes of warm-up; for
//     a shorter run, proportionally less),
//   - the most DOM nodes or listeners of the last window are over 1.2 × the
//     most of the first window,
//   - a sample finds more than one stream open,
//   - (when the server was restarted) no stream came back with
//     Last-Event-ID, or none is open at the end.
//
//   NODEFLOW_BIN=build-rel/nodeflow NODEFLOW_DATABASE_URL=postgresql://… \
//     node tests/ui/soak.mjs [--minutes 60] [--sample-seconds 60]
//       [--rate 2] [--listen 127.0.0.1:18400] [--no-restart] [--json FILE]
//
// SOAK_SERVER_LOG=FILE keeps the server's log (appended across the restart).
// The database must be migrated (nodeflow migrate); the run adds its
// definitions (soak_*) and executions to the default namespace.  With
// NODEFLOW_URL instead of NODEFLOW_BIN it uses a server already running,
// which it cannot restart (as --no-restart).  Taking the tabs offline is no
// substitute: Chromium's offline emulation leaves an open response
// streaming.
// Exit status 0 when every bound held.

import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { openSync, writeFileSync } from 'node:fs';

const argv = process.argv.slice(2);
function opt(name, dflt) {
  const i = argv.indexOf('--' + name);
  return i >= 0 ? argv[i + 1] : dflt;
}
const MINUTES = Number(opt('minutes', '60'));
const SAMPLE_S = Number(opt('sample-seconds', '60'));
const RATE = Number(opt('rate', '2'));           // short workflows started per second
const STEP_MS = Number(opt('step-ms', '1000'));   // the loop's pace on the detail page
const ROTATE_MIN = Number(opt('rotate-minutes', '10'));
const LISTEN = opt('listen', '127.0.0.1:18400');
const JSON_OUT = opt('json', '');
const BIN = process.env.NODEFLOW_BIN || '';
const BASE = BIN ? `http://${LISTEN}` : process.env.NODEFLOW_URL;
const RESTART = BIN && !argv.includes('--no-restart');
if (!BASE) { console.error('set NODEFLOW_BIN (and NODEFLOW_DATABASE_URL) or NODEFLOW_URL'); process.exit(2); }
const NS = `${BASE}/v1/ns/default`;
const sleep = (ms) => new Promise(r => setTimeout(r, ms));
const T0 = Date.now();
const log = (s) => console.log(`[${((Date.now() - T0) / 60000).toFixed(1)} min] ${s}`);

// --- the server ------------------------------------------------------------
let server = null;
async function serverUp(ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { if ((await fetch(`${BASE}/readyz`)).ok) return; } catch { /* not yet */ }
    await sleep(200);
  }
  throw new Error('the server did not become ready');
}
async function startServer() {
  const out = openSync(process.env.SOAK_SERVER_LOG || '/dev/null', 'a');
  server = spawn(BIN, ['serve'], { env: { ...process.env, NODEFLOW_LISTEN: LISTEN }, stdio: ['ignore', out, out] });
  await serverUp();
}
async function stopServer() {
  if (!server) return;
  const p = server;
  server = null;
  const done = new Promise(r => p.once('exit', r));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 20000);
  await done;
  clearTimeout(t);
}

// --- the API and the load ---------------------------------------------------
async function api(method, path, body) {
  const r = await fetch(NS + path, {
    method, headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function define() {
  for (const q of ['soak_work', 'soak_step'])
    await api('PUT', `/task-definitions/${q}`, { name: q, retryCount: 0, responseTimeoutSeconds: 120 });
  await api('POST', '/workflow-definitions?overwrite=true', {
    name: 'soak_short', version: 1, description: 'the load: one worker task',
    tasks: [{ name: 'soak_work', taskReferenceName: 'work', type: 'SIMPLE', inputParameters: { n: '${workflow.input.n}' } }],
  });
  await api('POST', '/workflow-definitions?overwrite=true', {
    name: 'soak_long', version: 1, description: 'the watched execution: a loop until terminated',
    tasks: [{
      name: 'loop', taskReferenceName: 'loop', type: 'DO_WHILE', loopCondition: 'true',
      inputParameters: { keepLastN: 2 },
      loopOver: [{ name: 'soak_step', taskReferenceName: 'step', type: 'SIMPLE', inputParameters: { i: '${loop.output.iteration}' } }],
    }],
  });
}

const load = { started: 0, completed: 0, steps: 0, errors: 0, running: true };
let startCredit = 0;
async function starter() {
  let n = 0;
  while (load.running) {
    const t = Date.now();
    startCredit += RATE / 5;
    while (startCredit >= 1) {
      startCredit--;
      try { await api('POST', '/workflows', { name: 'soak_short', input: { n: n++, customer: { id: n % 100 } }, correlationId: `soak-${n}` }); load.started++; }
      catch { load.errors++; }
    }
    await sleep(Math.max(0, 200 - (Date.now() - t)));
  }
}
async function worker(queue, count, delayMs) {
  while (load.running) {
    try {
      const r = await api('POST', `/queues/${queue}/poll`, { workerId: `soak-${queue}`, count, waitMs: 1000 });
      if (delayMs && r.tasks.length) await sleep(delayMs);
      if (r.tasks.length) {
        await api('POST', `/queues/${queue}/results`, {
          results: r.tasks.map(t => ({ taskId: t.id, workerId: `soak-${queue}`, status: 'COMPLETED',
            output: { done: true, at: Date.now() }, logs: [`${queue} ${t.id.slice(0, 8)} done`] })),
        });
        if (queue === 'soak_step') load.steps += r.tasks.length; else load.completed += r.tasks.length;
      }
    } catch { load.errors++; await sleep(500); }
  }
}

// --- the browser -------------------------------------------------------------
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    // Two tabs in the background of one headless browser: no throttling of
    // their timers, as a tab on a screen would run.
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows'],
});

async function openTab(name) {
  const ctx = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  const page = await ctx.newPage();
  const cdp = await ctx.newCDPSession(page);
  const tab = { name, page, cdp, open: new Set(), streams: 0, resumed: 0, errors: [] };
  page.on('pageerror', e => tab.errors.push(e.message));
  await cdp.send('Performance.enable');
  await cdp.send('Network.enable');
  cdp.on('Network.requestWillBeSent', (e) => {
    const hd = e.request.headers || {};
    const accept = hd.Accept || hd.accept || '';
    if (!accept.includes('text/event-stream')) return;
    tab.streams++;
    if (hd['Last-Event-ID'] || hd['last-event-id']) tab.resumed++;
  });
  cdp.on('Network.responseReceived', (e) => { if (e.response.mimeType === 'text/event-stream') tab.open.add(e.requestId); });
  cdp.on('Network.loadingFinished', (e) => tab.open.delete(e.requestId));
  cdp.on('Network.loadingFailed', (e) => tab.open.delete(e.requestId));
  return tab;
}

async function measure(tab) {
  await tab.cdp.send('HeapProfiler.collectGarbage');
  const heap = await tab.cdp.send('Runtime.getHeapUsage');
  const { metrics } = await tab.cdp.send('Performance.getMetrics');
  const m = Object.fromEntries(metrics.map(x => [x.name, x.value]));
  const shown = await tab.page.evaluate(() => ({
    rows: document.querySelectorAll('#executions tbody tr').length,
    history: document.querySelectorAll('#history-list li').length,
    attempts: document.querySelectorAll('#task-panel .attempt').length,
    banner: !document.getElementById('banner').hidden,
  }));
  return {
    heapMB: heap.usedSize / 1048576, nodes: m.Nodes, listeners: m.JSEventListeners,
    documents: m.Documents, open: tab.open.size, ...shown,
  };
}

let long = null;
async function watchNewExecution(tab) {
  if (long) await api('POST', `/workflows/${long}/terminate`, { reason: 'the soak moves on' }).catch(() => {});
  long = (await api('POST', '/workflows', { name: 'soak_long', input: {} })).id;
  await tab.page.goto(`${BASE}/#/executions/${long}?ns=default&task=step`);
  await tab.page.locator('#history-list li').first().waitFor({ timeout: 60000 });
}

// --- the run -----------------------------------------------------------------
const samples = [];
let failed = [];
try {
  if (BIN) await startServer();
  await define();
  const loops = [starter(), worker('soak_work', 50, 0), worker('soak_step', 1, STEP_MS)];

  const list = await openTab('list');
  await list.page.goto(`${BASE}/#/executions?ns=default&status=ALL`);
  await list.page.locator('#executions tbody tr').first().waitFor({ timeout: 60000 });
  const detail = await openTab('detail');
  await watchNewExecution(detail);
  const tabs = [list, detail];

  const total = MINUTES * 60000, restartAt = total / 2 + SAMPLE_S * 500;
  let restarted = false, nextSample = 0, nextRotate = ROTATE_MIN * 60000, nextShow = 5 * 60000;
  log(`running ${MINUTES} min, a sample every ${SAMPLE_S} s, ${RATE} starts/s, server ${BIN ? 'started here' : BASE}`);
  const TS = Date.now();
  for (;;) {
    const now = Date.now() - TS;
    if (RESTART && !restarted && now >= restartAt) {
      restarted = true;
      log('stopping the server');
      await stopServer();
      await sleep(3000);
      await startServer();
      log('the server is back');
    }
    if (now >= nextRotate) { nextRotate += ROTATE_MIN * 60000; await watchNewExecution(detail); }
    if (now >= nextShow) {
      // The new executions counted above the list, shown as a person would.
      nextShow += 5 * 60000;
      const btn = list.page.locator('.pending-bar.has #show-new');
      if (await btn.count()) await btn.click().catch(() => {});
    }
    if (now >= nextSample) {
      const minute = now / 60000;
      for (const t of tabs) samples.push({ minute, tab: t.name, ...(await measure(t)) });
      const [a, b] = samples.slice(-2);
      log(`list ${a.heapMB.toFixed(2)} MB ${a.nodes} nodes ${a.listeners} listeners ${a.open} open · ` +
        `detail ${b.heapMB.toFixed(2)} MB ${b.nodes} nodes ${b.listeners} listeners ${b.open} open · ` +
        `load ${load.started} started ${load.completed} done ${load.steps} steps ${load.errors} errors`);
      if (now >= total) break;
      nextSample += SAMPLE_S * 1000;
    }
    await sleep(Math.min(1000, Math.max(0, nextSample - (Date.now() - TS))));
  }

  // --- the verdict -------------------------------------------------------------
  const warm = Math.min(3, MINUTES / 5), win = Math.min(10, (MINUTES - warm) / 2);
  console.log('\nminute  tab     heap MB  nodes  listeners  streams  rows  history  attempts');
  for (const s of samples)
    console.log(`${s.minute.toFixed(1).padStart(6)}  ${s.tab.padEnd(6)}  ${s.heapMB.toFixed(2).padStart(7)}  ${String(s.nodes).padStart(5)}  ` +
      `${String(s.listeners).padStart(9)}  ${String(s.open).padStart(7)}  ${String(s.rows).padStart(4)}  ${String(s.history).padStart(7)}  ${String(s.attempts).padStart(8)}`);
  console.log('');
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const max = (xs) => Math.max(...xs);
  const summary = {};
  for (const t of tabs) {
    const mine = samples.filter(s => s.tab === t.name);
    const end = mine[mine.length - 1].minute;
    let first = mine.filter(s => s.minute >= warm && s.minute < warm + win);
    if (!first.length) first = [mine.find(s => s.minute >= warm) || mine[0]];
    const last = mine.filter(s => s.minute >= end - win);
    const r = {
      heapFirst: mean(first.map(s => s.heapMB)), heapLast: mean(last.map(s => s.heapMB)),
      nodesFirst: max(first.map(s => s.nodes)), nodesLast: max(last.map(s => s.nodes)),
      listenersFirst: max(first.map(s => s.listeners)), listenersLast: max(last.map(s => s.listeners)),
      mostOpen: max(mine.map(s => s.open)), openAtEnd: mine[mine.length - 1].open,
      streams: t.streams, resumed: t.resumed, pageErrors: t.errors.length,
    };
    summary[t.name] = r;
    console.log(`${t.name}: heap ${r.heapFirst.toFixed(2)} → ${r.heapLast.toFixed(2)} MB (mean of minutes ${warm}–${(warm + win).toFixed(1)} → last ${win.toFixed(1)}), ` +
      `DOM nodes ${r.nodesFirst} → ${r.nodesLast}, listeners ${r.listenersFirst} → ${r.listenersLast} (most), ` +
      `streams opened ${r.streams} (${r.resumed} with Last-Event-ID), at most ${r.mostOpen} open, ${r.openAtEnd} at the end, ${r.pageErrors} page errors`);
    if (!(r.heapLast <= r.heapFirst * 1.2)) failed.push(`${t.name}: the heap grew from ${r.heapFirst.toFixed(2)} to ${r.heapLast.toFixed(2)} MB`);
    if (!(r.nodesLast <= r.nodesFirst * 1.2)) failed.push(`${t.name}: DOM nodes grew from ${r.nodesFirst} to ${r.nodesLast}`);
    if (!(r.listenersLast <= r.listenersFirst * 1.2)) failed.push(`${t.name}: listeners grew from ${r.listenersFirst} to ${r.listenersLast}`);
    if (r.mostOpen > 1) failed.push(`${t.name}: ${r.mostOpen} streams open at once`);
    if (RESTART && r.resumed < 1) failed.push(`${t.name}: no stream resumed with Last-Event-ID`);
    if (r.openAtEnd !== 1) failed.push(`${t.name}: ${r.openAtEnd} streams open at the end`);
    if (r.pageErrors) failed.push(`${t.name}: page errors: ${t.errors.slice(0, 3).join('; ')}`);
  }
  console.log(`load: ${load.started} started, ${load.completed} completed, ${load.steps} loop steps, ${load.errors} failed requests`);
  if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify({ minutes: MINUTES, rate: RATE, samples, summary, load }, null, 1));
  load.running = false;
  await Promise.race([Promise.all(loops), sleep(5000)]);
} catch (e) {
  failed.push(`run: ${e.stack || e}`);
} finally {
  load.running = false;
  await browser.close().catch(() => {});
  await stopServer();
}
for (const f of failed) console.log(`FAIL ${f}`);
console.log(failed.length ? `soak: ${failed.length} bound(s) broken` : 'soak: every bound held');
process.exit(failed.length ? 1 : 0);
