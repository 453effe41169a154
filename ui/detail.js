// Execution detail: status and timings, the graph coloured by task status,
// a timeline of tasks and attempts, the attempts of a chosen task (each
// with its log lines, GET tasks/{id}/logs), the history streaming live, the sub-workflow tree, the JSON of input,
// output and variables, and the actions (each confirmed, the server's
// refusal shown).  The history kept in the page is bounded (MAX_EVENTS);
// leaving the page closes the stream.

import { h, clear, keepFocus, badge, fmtTime, fmtDuration, duration, toast, confirmDialog, errorBox, errorText, notAvailable } from './dom.js';
import { get, post, nsPath, stream, poller, query } from './api.js';
import { href } from './app.js';
import { jsonView } from './json.js';
import { drawGraph, legend } from './graph.js';

const MAX_EVENTS = 500;
const MAX_LOG_LINES = 200;   // shown per attempt
const MAX_ATTEMPTS = 20;     // the latest attempts of a task drawn, each with its logs (a loop's task has one per iteration)
const OPEN = new Set(['SCHEDULED', 'IN_PROGRESS']);

export async function detailPage(view, { parts, params }) {
  const id = parts[1];
  let wf = await get(`workflows/${encodeURIComponent(id)}`);
  let def = null;
  try { def = await get(`workflow-definitions/${encodeURIComponent(wf.name)}/versions/${wf.version}`); }
  catch { def = null; }
  let selected = params.get('task') || null;
  // Log lines by task id, with the attempt's status when read: an open
  // attempt's are read again on each refresh (its worker may still be
  // logging), a finished one's once more after it finished, then kept.
  const logCache = new Map();
  let lastSeq = 0;

  const title = h('h1');
  const actions = h('div', { class: 'actions', role: 'toolbar', 'aria-label': 'Actions' });
  const actionErr = h('div', { id: 'action-error' });
  const summary = h('dl', { class: 'kv', id: 'summary' });
  const graphBox = h('div', { class: 'graph', id: 'graph' });
  const timeline = h('div', { class: 'timeline', id: 'timeline' });
  const taskBox = h('div', { id: 'task-panel' }, h('p', { class: 'muted' }, 'Choose a task in the graph or the timeline.'));
  const historyList = h('ul', { id: 'history-list' });
  const historyInfo = h('span', { class: 'muted', id: 'history-info' });
  const treeBox = h('div', { class: 'tree', id: 'tree' });
  const jsonBox = h('div');
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  let tab = 'input';
  for (const t of ['input', 'output', 'variables']) {
    const b = h('button', { type: 'button', role: 'tab', 'aria-selected': String(t === tab), text: t });
    b.addEventListener('click', () => { tab = t; for (const x of tabs.children) x.setAttribute('aria-selected', String(x === b)); renderJson(); });
    tabs.append(b);
  }

  view.append(title, h('div', { class: 'row' }, actions), actionErr,
    h('div', { class: 'grid-detail' },
      h('div', {},
        h('section', { class: 'panel', 'aria-label': 'Graph' }, h('h2', {}, 'Graph'), graphBox, legend()),
        h('section', { class: 'panel', 'aria-label': 'Timeline' }, h('h2', {}, 'Timeline'), timeline),
        h('section', { class: 'panel', 'aria-label': 'History' }, h('h2', {}, 'History ', historyInfo), h('div', { class: 'history' }, historyList))),
      h('div', {},
        h('section', { class: 'panel', 'aria-label': 'Summary' }, summary),
        h('section', { class: 'panel', 'aria-label': 'Task' }, h('h2', {}, 'Task'), taskBox),
        h('section', { class: 'panel', 'aria-label': 'Data' }, tabs, jsonBox),
        h('section', { class: 'panel', 'aria-label': 'Sub-workflows' }, h('h2', {}, 'Sub-workflow tree'), treeBox))));

  function renderJson() {
    clear(jsonBox).append(jsonView(wf[tab] || {}, { label: tab }));
  }

  function graphDef() {
    if (def) return def;
    // No stored definition (an inline sub-workflow): the tasks that ran, in order.
    const seen = new Set(), tasks = [];
    for (const t of wf.tasks || []) if (!seen.has(t.refName)) { seen.add(t.refName); tasks.push({ name: t.taskDefName, taskReferenceName: t.refName, type: t.taskType }); }
    return { tasks };
  }

  function renderTitle() {
    clear(title).append(`${wf.name} `, h('span', { class: 'muted' }, `v${wf.version}`), ' ', badge(wf.status),
      h('span', { class: 'mono muted', style: 'font-size:12px' }, wf.id));
    if (wf.parentWorkflowId) title.append(h('a', { href: href('/executions/' + wf.parentWorkflowId), id: 'parent-link', style: 'font-size:13px' }, '↑ parent workflow'));
  }

  function renderSummary() {
    const rows = [
      ['Status', badge(wf.status)],
      ['Started', fmtTime(wf.startedAt)],
      ['Ended', fmtTime(wf.endedAt)],
      ['Duration', fmtDuration(duration(wf.startedAt, wf.endedAt)) + (wf.endedAt ? '' : ' so far')],
      ['Updated', fmtTime(wf.updatedAt)],
      ['Correlation id', wf.correlationId || '—'],
      ['Priority', String(wf.priority ?? 0)],
      ['Reason', wf.reason || '—'],
      ['Parent', wf.parentWorkflowId ? h('a', { href: href('/executions/' + wf.parentWorkflowId), class: 'mono' }, wf.parentWorkflowId) : '—'],
      ['Failure workflow', wf.failureWorkflowId ? h('a', { href: href('/executions/' + wf.failureWorkflowId), class: 'mono' }, wf.failureWorkflowId) : '—'],
    ];
    clear(summary);
    for (const [k, v] of rows) summary.append(h('dt', {}, k), h('dd', {}, v));
  }

  async function act(label, path, body, text, extraField) {
    clear(actionErr);
    let extra = null, input = null;
    if (extraField) {
      input = h('input', { id: 'confirm-input', placeholder: extraField, style: 'width:100%' });
      extra = h('label', {}, extraField, input);
    }
    if (!await confirmDialog(`${label} ${wf.name}?`, text, extra)) return;
    try {
      const b = typeof body === 'function' ? body(input && input.value) : body;
      await post(`workflows/${encodeURIComponent(wf.id)}/${path}`, b);
      toast(`${label}: done`);
      await refresh();
    } catch (e) {
      actionErr.append(errorBox(e));
      toast(`${label} refused: ${errorText(e)}`, 'error');
    }
  }

  function renderActions() { keepFocus(actions, drawActions, 'action'); }

  function drawActions() {
    clear(actions);
    const s = wf.status;
    const btn = (label, enabled, fn, cls = '') => {
      const b = h('button', { type: 'button', class: cls, disabled: !enabled, 'data-action': label.toLowerCase() }, label);
      b.addEventListener('click', fn);
      actions.append(b);
    };
    btn('Pause', s === 'RUNNING', () => act('Pause', 'pause', {}, 'Tasks in flight finish; nothing new is scheduled.'));
    btn('Resume', s === 'PAUSED', () => act('Resume', 'resume', {}, 'The workflow goes on.'));
    btn('Retry', s === 'FAILED' || s === 'TIMED_OUT', () => act('Retry', 'retry', {}, 'A new attempt of the failed task, and of what its failure cancelled.'));
    btn('Restart', !['RUNNING', 'PAUSED'].includes(s), () => act('Restart', 'restart', {}, 'The workflow runs again from its first task, under the same id.'));
    btn('Terminate', s === 'RUNNING' || s === 'PAUSED', () => act('Terminate', 'terminate', r => (r ? { reason: r } : {}), 'Open tasks are cancelled, running sub-workflows terminated.', 'Reason (optional)'), 'danger');
    actions.append(h('a', { href: href('/executions', { name: wf.name, status: 'ALL' }), style: 'margin-left:8px' }, `all runs of ${wf.name}`));
  }

  function renderGraph() {
    keepFocus(graphBox, () => drawGraph(graphBox, graphDef(), { tasks: wf.tasks || [], selected, onSelect: selectTask }));
  }

  function renderTimeline() { keepFocus(timeline, drawTimeline); }

  function drawTimeline() {
    const tasks = (wf.tasks || []).slice(0, 300);
    const t0 = Date.parse(wf.startedAt);
    const t1 = Math.max(wf.endedAt ? Date.parse(wf.endedAt) : Date.now(), ...tasks.map(t => Date.parse(t.endedAt || t.startedAt || t.scheduledAt) || 0), t0 + 1);
    const span = t1 - t0;
    clear(timeline);
    for (const t of tasks) {
      const a = Date.parse(t.scheduledAt) || t0, s = Date.parse(t.startedAt) || a;
      const e = t.endedAt ? Date.parse(t.endedAt) : (OPEN.has(t.status) ? t1 : s);
      const bar = h('div', { class: `tl-bar s-${t.status}` });
      bar.style.left = `${((a - t0) / span) * 100}%`;
      bar.style.width = `${Math.max(0.3, ((e - a) / span) * 100)}%`;
      bar.title = `${t.refName} #${t.attempt} ${t.status}: ${fmtDuration(e - a)}`;
      const row = h('div', { class: 'tl-row', tabindex: '0', role: 'button', 'data-ref': t.refName },
        h('span', { class: 'name' }, `${t.refName}${t.iteration ? ` [${t.iteration}]` : ''}${t.attempt ? ` #${t.attempt}` : ''}`),
        h('div', { class: 'tl-track' }, bar));
      row.addEventListener('click', () => selectTask(t.refName));
      row.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') selectTask(t.refName); });
      timeline.append(row);
    }
    if (!tasks.length) timeline.append(h('p', { class: 'muted' }, 'No tasks yet.'));
    if ((wf.tasks || []).length > 300) timeline.append(h('p', { class: 'muted' }, `first 300 of ${wf.tasks.length} tasks`));
  }

  function selectTask(ref) {
    selected = ref;
    history.replaceState(null, '', href('/executions/' + wf.id, { task: ref }));
    renderGraph();
    renderTask();
  }

  function renderTask() { keepFocus(taskBox, drawTask, 'action'); }

  function drawTask() {
    clear(taskBox);
    if (!selected) { taskBox.append(h('p', { class: 'muted' }, 'Choose a task in the graph or the timeline.')); return; }
    const attempts = (wf.tasks || []).filter(t => t.refName === selected || String(t.refName).replace(/__\d+$/, '') === selected);
    taskBox.append(h('h3', { style: 'margin:0 0 6px' }, selected, ' ', h('span', { class: 'muted' }, `${attempts.length} attempt${attempts.length === 1 ? '' : 's'}`)));
    const ended = !['RUNNING', 'PAUSED'].includes(wf.status);
    const bar = h('div', { class: 'actions', style: 'margin-bottom:8px' });
    const last = attempts[attempts.length - 1];
    if (last && OPEN.has(last.status) && !ended) {
      const b = h('button', { type: 'button', 'data-action': 'skip' }, 'Skip');
      b.addEventListener('click', () => act('Skip', 'skip', { taskRefName: selected }, `The open attempt of ${selected} becomes SKIPPED and the workflow goes on.`));
      bar.append(b);
    }
    if (ended && attempts.length) {
      const b = h('button', { type: 'button', 'data-action': 'rerun' }, 'Rerun from here');
      b.addEventListener('click', () => act('Rerun', 'rerun', { taskRefName: selected }, `The workflow runs again from ${selected}; it and the tasks after it are replaced.`));
      bar.append(b);
    }
    taskBox.append(bar);
    if (!attempts.length) taskBox.append(h('p', { class: 'muted' }, 'Not reached yet.'));
    if (attempts.length > MAX_ATTEMPTS) taskBox.append(h('p', { class: 'muted', id: 'attempts-info' }, `the latest ${MAX_ATTEMPTS} of ${attempts.length} attempts`));
    for (const t of attempts.slice(-MAX_ATTEMPTS).reverse()) {
      taskBox.append(h('div', { class: 'attempt' },
        h('div', { class: 'row' }, badge(t.status), h('b', {}, `attempt ${t.attempt}`), t.iteration ? `iteration ${t.iteration}` : '',
          h('span', { class: 'muted' }, t.taskType), t.workerId ? h('span', { class: 'muted' }, `worker ${t.workerId}`) : ''),
        h('dl', { class: 'kv', style: 'margin:6px 0' },
          h('dt', {}, 'Scheduled'), h('dd', {}, fmtTime(t.scheduledAt)),
          h('dt', {}, 'Started'), h('dd', {}, fmtTime(t.startedAt)),
          h('dt', {}, 'Ended'), h('dd', {}, fmtTime(t.endedAt)),
          h('dt', {}, 'Ran for'), h('dd', {}, t.startedAt ? fmtDuration(duration(t.startedAt, t.endedAt)) : '—'),
          h('dt', {}, 'Reason'), h('dd', {}, t.reason || '—'),
          t.subWorkflowId ? [h('dt', {}, 'Sub-workflow'), h('dd', {}, h('a', { href: href('/executions/' + t.subWorkflowId), class: 'mono sub-link' }, t.subWorkflowId))] : null),
        t.id ? logsBox(t) : null,
        h('details', {}, h('summary', {}, 'Input'), jsonView(t.input || {}, { label: 'task input' })),
        h('details', { open: !!t.output && Object.keys(t.output).length > 0 }, h('summary', {}, 'Output'), jsonView(t.output || {}, { label: 'task output' }))));
    }
  }

  // The attempt's log lines, filled in when read.
  function logsBox(t) {
    const box = h('div', { class: 'task-logs', 'data-task': t.id });
    const fill = (r) => {
      clear(box);
      if (r.error) { box.append(r.error.noRoute ? notAvailable('Task logs') : errorBox(r.error)); return; }
      const items = r.items || [];
      if (!items.length) { box.append(h('p', { class: 'muted' }, 'No log lines.')); return; }
      const list = h('ol', { class: 'log-lines' });
      for (const l of items) {
        list.append(h('li', {}, h('span', { class: 'muted' }, fmtTime(l.createdAt)), ' ', h('span', { class: 'mono' }, l.log)));
      }
      box.append(h('details', { open: true }, h('summary', {}, `Logs (${items.length}${r.nextAfter ? '+' : ''})`), list));
      if (r.nextAfter) box.append(h('p', { class: 'muted' }, `the first ${MAX_LOG_LINES} lines; GET …/tasks/${t.id}/logs?after=${r.nextAfter} for more`));
    };
    const cached = logCache.get(t.id);
    if (cached) fill(cached.r);
    else box.append(h('p', { class: 'muted' }, 'Reading logs…'));
    if (!cached || OPEN.has(t.status) || cached.status !== t.status) {
      const status = t.status;
      get(`tasks/${encodeURIComponent(t.id)}/logs${query({ limit: MAX_LOG_LINES })}`)
        .then(r => r, e => ({ error: e }))
        .then(r => {
          if (!r.error || r.error.noRoute) logCache.set(t.id, { r, status });
          fill(r);
        });
    }
    return box;
  }

  // New events go on top, the oldest beyond MAX_EVENTS leave at the bottom:
  // an event's line is drawn once, however long the page stays open.
  function renderHistory(added) {
    for (const ev of added) {
      historyList.prepend(h('li', {},
        h('span', { class: 'muted' }, `#${ev.seq}`),
        h('span', {}, fmtTime(ev.at)),
        h('span', {}, h('b', {}, ev.type), ev.taskId ? taskRefSpan(ev.taskId) : '',
          ev.data && Object.keys(ev.data).length ? h('span', { class: 'muted mono' }, ' ' + JSON.stringify(ev.data).slice(0, 160)) : '')));
    }
    while (historyList.children.length > MAX_EVENTS) historyList.lastElementChild.remove();
    historyInfo.textContent = historyList.children.length >= MAX_EVENTS ? `(latest ${MAX_EVENTS}, live)` : '(live)';
  }
  // A task's reference name; a task the page has not read yet (its event
  // came before the refresh) shows the start of its id until renamed by
  // nameTasks() after the next refresh.
  function taskRefSpan(taskId) {
    const t = (wf.tasks || []).find(x => x.id === taskId);
    return h('span', { class: 'muted', 'data-task-id': t ? null : taskId }, ` ${t ? t.refName : taskId.slice(0, 8)}`);
  }
  function nameTasks() {
    for (const el of historyList.querySelectorAll('span[data-task-id]')) {
      const t = (wf.tasks || []).find(x => x.id === el.dataset.taskId);
      if (t) { el.textContent = ` ${t.refName}`; el.removeAttribute('data-task-id'); }
    }
  }
  // The events after the last one seen (the latest MAX_EVENTS of them).
  function addEvents(list) {
    const added = [];
    for (const ev of list) {
      if (ev.seq <= lastSeq) continue;
      lastSeq = ev.seq;
      added.push(ev);
    }
    return added.slice(-MAX_EVENTS);
  }

  async function renderTree() {
    // Up to the root (a few hops), then the tree under it with this one marked.
    let rootId = wf.id, hops = 0, pid = wf.parentWorkflowId;
    try {
      while (pid && hops < 8) {
        rootId = pid; hops++;
        const p = await get(`workflows/${encodeURIComponent(pid)}?includeTasks=false`);
        pid = p.parentWorkflowId;
      }
      const r = await get(`workflows/${encodeURIComponent(rootId)}/tree${query({ maxDepth: 10, limit: 200 })}`);
      clear(treeBox);
      const walk = (n) => h('li', {},
        n.id === wf.id ? h('span', { class: 'here' }, `${n.name} `) : h('a', { href: href('/executions/' + n.id), 'data-id': n.id, class: 'tree-link' }, `${n.name} `),
        badge(n.status), n.parentTaskRefName ? h('span', { class: 'muted' }, ` via ${n.parentTaskRefName}`) : '',
        n.children && n.children.length ? h('ul', {}, n.children.map(walk)) : null);
      treeBox.append(h('ul', {}, walk(r.tree)));
      if (r.truncated) treeBox.append(h('p', { class: 'muted' }, 'More exist than are shown.'));
      if (!r.tree.children?.length && rootId === wf.id) treeBox.append(h('p', { class: 'muted' }, 'No sub-workflows.'));
    } catch (e) {
      clear(treeBox).append(e.noRoute ? notAvailable('The sub-workflow tree') : errorBox(e));
    }
  }

  let refreshing = null, again = false, lastTreeKey = '';
  async function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async () => {
      try {
        wf = await get(`workflows/${encodeURIComponent(id)}`);
        renderAll();
      } catch (e) { if (e.name !== 'AbortError') toast(errorText(e), 'error'); }
    })();
    await refreshing;
    refreshing = null;
    if (again) { again = false; return refresh(); }
  }
  let debounce = null;
  // At most one refresh per 250 ms however fast the events come.
  function soon() { if (!debounce) debounce = setTimeout(() => { debounce = null; refresh(); }, 250); }

  function renderAll() {
    renderTitle(); renderSummary(); renderActions(); renderGraph(); renderTimeline(); renderTask(); renderJson(); nameTasks();
    const treeKey = (wf.tasks || []).map(t => t.subWorkflowId || '').join() + wf.status;
    if (treeKey !== lastTreeKey) { lastTreeKey = treeKey; renderTree(); }
  }
  renderAll();

  // The backlog, then the live history.
  try {
    let backlog = [];
    for (let i = 0; i < 10; i++) {
      const r = await get(`workflows/${encodeURIComponent(id)}/events${query({ after: lastSeq, limit: 1000 })}`);
      backlog = backlog.concat(addEvents(r.events || [])).slice(-MAX_EVENTS);
      if (!r.events || r.events.length < 1000) break;
    }
    renderHistory(backlog);
    // The execution was read before its history: what the history has
    // beyond it (the workflow may even have ended meanwhile, and then no
    // live event will come to say so) needs another read.
    if (backlog.length) soon();
  } catch (e) { historyList.append(h('li', {}, errorBox(e))); }

  let live = stream(nsPath(`workflows/${encodeURIComponent(id)}/events`), {
    key: 'history-stream',
    lastId: lastSeq,
    onEvent(ev) {
      let data;
      try { data = JSON.parse(ev.data); } catch { return; }
      if (typeof data.seq !== 'number') data.seq = Number(ev.id);
      if (!data.type) data.type = ev.event;
      renderHistory(addEvents([data]));
      soon();
    },
    fallback() {
      live = poller(async () => {
        const r = await get(`workflows/${encodeURIComponent(id)}/events${query({ after: lastSeq, limit: 1000 })}`);
        if (r.events && r.events.length) { renderHistory(addEvents(r.events)); await refresh(); }
      }, 2000, 'history-poll');
    },
  });
  // The durations of what still runs.
  const ticker = setInterval(() => { if (!wf.endedAt) renderSummary(); }, 1000);
  return () => { live.close(); clearInterval(ticker); clearTimeout(debounce); };
}
