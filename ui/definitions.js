// Definitions: workflow definitions (latest versions, each one's versions,
// its JSON and its graph before anything runs), task definitions, an
// editor that shows the server's validation errors at their JSON paths,
// and a form that starts a run.

import { h, clear, errorBox, toast, fmtTime, notAvailable } from './dom.js';
import { get, post, put } from './api.js';
import { href, go } from './app.js';
import { jsonView, markErrors } from './json.js';
import { drawGraph } from './graph.js';

const SAMPLE = {
  name: 'my_workflow', version: 1, schemaVersion: 2,
  tasks: [{ name: 'wait', taskReferenceName: 'wait_ref', type: 'WAIT' }],
};

export async function definitionsPage(view) {
  const wfBody = h('tbody'), tdBody = h('tbody');
  view.append(h('h1', {}, 'Definitions ', h('a', { href: href('/definitions/new'), class: 'muted', style: 'font-size:13px', id: 'new-def' }, '+ new workflow definition')),
    h('div', { class: 'grid2' },
      h('section', { class: 'panel', 'aria-label': 'Workflow definitions' }, h('h2', {}, 'Workflow definitions'),
        h('table', { id: 'wf-defs' }, h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', { style: 'width:80px' }, 'Latest'), h('th', {}, 'Description'), h('th', { style: 'width:90px' }, ''))), wfBody)),
      h('section', { class: 'panel', 'aria-label': 'Task definitions' }, h('h2', {}, 'Task definitions ', h('a', { href: href('/task-definitions/new'), class: 'muted', style: 'font-size:13px' }, '+ new')),
        h('table', { id: 'task-defs' }, h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', { style: 'width:80px' }, 'Retries'), h('th', {}, 'Timeouts (s)'))), tdBody))));
  const [wfs, tds] = await Promise.allSettled([get('workflow-definitions'), get('task-definitions')]);
  if (wfs.status === 'fulfilled') {
    for (const d of wfs.value.items || [])
      wfBody.append(h('tr', {}, h('td', {}, h('a', { href: href(`/definitions/${encodeURIComponent(d.name)}`) }, d.name)),
        h('td', {}, `v${d.version}`), h('td', { title: d.description || '' }, d.description || ''),
        h('td', {}, h('a', { href: href('/executions', { name: d.name, status: 'ALL' }) }, 'runs'))));
    if (!(wfs.value.items || []).length) wfBody.append(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'None yet.')));
  } else view.append(errorBox(wfs.reason));
  if (tds.status === 'fulfilled') {
    for (const d of tds.value.items || [])
      tdBody.append(h('tr', {}, h('td', {}, h('a', { href: href(`/task-definitions/${encodeURIComponent(d.name)}`) }, d.name)),
        h('td', {}, String(d.retryCount ?? '')), h('td', {}, `response ${d.responseTimeoutSeconds ?? '—'}, total ${d.timeoutSeconds ?? '—'}`)));
    if (!(tds.value.items || []).length) tdBody.append(h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'None yet.')));
  } else view.append(errorBox(tds.reason));
}

// An editor of JSON text that sends it and shows the server's errors on a
// tree of what was sent.
function editor(initial, save, label) {
  const ta = h('textarea', { rows: 22, id: 'def-editor', 'aria-label': label, spellcheck: 'false' }, JSON.stringify(initial, null, 2));
  const errs = h('div', { id: 'def-errors' });
  const btn = h('button', { type: 'button', class: 'primary', id: 'def-save' }, 'Save');
  btn.addEventListener('click', async () => {
    clear(errs);
    let v;
    try { v = JSON.parse(ta.value); } catch (e) { errs.append(h('div', { class: 'error-box' }, `Not JSON: ${e.message}`)); return; }
    try { await save(v); }
    catch (e) {
      errs.append(errorBox(e));
      if (e.details && e.details.length) {
        const tree = jsonView(v, { openDepth: 1, label: 'what was sent' });
        markErrors(tree, e.details);
        errs.append(h('p', { class: 'muted' }, 'Where the server found the problems:'), tree);
      }
    }
  });
  return h('div', {}, ta, h('div', { class: 'row', style: 'margin:8px 0' }, btn), errs);
}

export async function definitionPage(view, { parts, params }) {
  const name = parts[1];
  if (name === 'new') {
    view.append(h('h1', {}, 'New workflow definition'),
      h('section', { class: 'panel' }, editor(SAMPLE, async (v) => {
        const d = await post('workflow-definitions', v);
        toast(`Saved ${d.name} v${d.version}`);
        go(`/definitions/${encodeURIComponent(d.name)}`, { version: d.version });
      }, 'Workflow definition JSON')));
    return;
  }
  const all = await get('workflow-definitions?allVersions=true');
  const versions = (all.items || []).filter(d => d.name === name).map(d => d.version).sort((a, b) => b - a);
  const version = params.get('version') || versions[0];
  const def = await get(`workflow-definitions/${encodeURIComponent(name)}/versions/${version}`);
  const sel = h('select', { id: 'version', 'aria-label': 'Version' }, versions.map(v => h('option', { value: v, selected: String(v) === String(version) }, `v${v}`)));
  sel.addEventListener('change', () => go(`/definitions/${encodeURIComponent(name)}`, { version: sel.value }));
  const graph = h('div', { class: 'graph', id: 'def-graph' });
  const body = h('div');
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const modes = { JSON: () => jsonView(def, { openDepth: 3, label: 'definition' }),
    Edit: () => editor(def, async (v) => {
      const d = await post('workflow-definitions?overwrite=true', v);
      toast(`Saved ${d.name} v${d.version}`);
      go(`/definitions/${encodeURIComponent(d.name)}`, { version: d.version });
    }, 'Workflow definition JSON'),
    'Start a run': () => startForm(def) };
  for (const [k, fn] of Object.entries(modes)) {
    const b = h('button', { type: 'button', role: 'tab', 'aria-selected': String(k === 'JSON'), text: k });
    b.addEventListener('click', () => { for (const x of tabs.children) x.setAttribute('aria-selected', String(x === b)); clear(body).append(fn()); });
    tabs.append(b);
  }
  view.append(h('h1', {}, name, ' ', sel, h('a', { href: href('/executions', { name, status: 'ALL' }), style: 'font-size:13px' }, 'runs')),
    def.description ? h('p', { class: 'muted' }, def.description) : null,
    h('div', { class: 'grid-detail' },
      h('section', { class: 'panel', 'aria-label': 'Graph' }, h('h2', {}, 'Graph'), graph),
      h('section', { class: 'panel' }, tabs, body)));
  drawGraph(graph, def, {});
  body.append(modes.JSON());
  if (params.get('start')) tabs.children[2].click();
}

function startForm(def) {
  const input = {};
  for (const k of def.inputParameters || []) input[k] = '';
  const ta = h('textarea', { rows: 10, id: 'start-input', 'aria-label': 'Input JSON' }, JSON.stringify(input, null, 2));
  const corr = h('input', { id: 'start-corr', placeholder: 'optional' });
  const err = h('div');
  const btn = h('button', { type: 'button', class: 'primary', id: 'start-run' }, 'Start');
  btn.addEventListener('click', async () => {
    clear(err);
    let v;
    try { v = JSON.parse(ta.value || '{}'); } catch (e) { err.append(h('div', { class: 'error-box' }, `Input is not JSON: ${e.message}`)); return; }
    try {
      const r = await post('workflows', { name: def.name, version: def.version, input: v, correlationId: corr.value || undefined });
      toast('Started');
      go('/executions/' + r.id);
    } catch (e) { err.append(errorBox(e)); }
  });
  return h('div', {}, h('label', {}, 'Input (JSON)', ta),
    h('div', { class: 'row', style: 'margin:8px 0' }, h('label', {}, 'Correlation id ', corr), btn), err);
}

export async function taskDefPage(view, { parts }) {
  const name = parts[1];
  const isNew = name === 'new';
  let def = { name: 'my_task', retryCount: 3, retryDelaySeconds: 1, responseTimeoutSeconds: 60 };
  if (!isNew) {
    try { def = await get(`task-definitions/${encodeURIComponent(name)}`); }
    catch (e) { view.append(e.status === 404 ? notAvailable(`Task definition ${name}`) : errorBox(e)); return; }
  }
  view.append(h('h1', {}, isNew ? 'New task definition' : name),
    isNew ? null : h('p', { class: 'muted' }, `updated ${fmtTime(def.updatedAt)}`),
    h('div', { class: 'grid2' },
      h('section', { class: 'panel' }, h('h2', {}, 'Edit'), editor(def, async (v) => {
        const d = await put(`task-definitions/${encodeURIComponent(v.name || name)}`, v);
        toast(`Saved ${d.name}`);
        go(`/task-definitions/${encodeURIComponent(d.name)}`, {}, true);
      }, 'Task definition JSON')),
      h('section', { class: 'panel' }, h('h2', {}, 'JSON'), jsonView(def, { openDepth: 2, label: 'task definition' }))));
}
