// The dashboard's shell: hash routing (#/page/...?args: the URL is the
// view, so it can be shared and the back button works), the namespace
// switcher (?ns=), the theme, and the life of a page: each page's render
// returns a cleanup that closes its streams and timers when it is left.

import { h, clear, errorBox } from './dom.js';
import { state, request } from './api.js';
import { executionsPage } from './executions.js';
import { detailPage } from './detail.js';
import { definitionsPage, definitionPage, taskDefPage } from './definitions.js';
import { queuesPage } from './queues.js';
import { overviewPage } from './overview.js';

const view = document.getElementById('view');
let cleanup = null;
let renderSeq = 0;

export function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/executions';
  const [path, qs] = raw.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(qs || '') };
}

// A hash for a page in the current namespace.
export function href(path, params = {}) {
  const q = new URLSearchParams();
  q.set('ns', state.ns);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  return '#' + path + '?' + q.toString();
}

export function go(path, params, replace = false) {
  const target = href(path, params);
  // The same view again (Apply with unchanged filters) is a refresh.
  if (replace || target === location.hash) { history.replaceState(null, '', target); route(); return; }
  location.hash = target;
}

const pages = [
  [p => p[0] === 'executions' && p.length === 1, () => executionsPage],
  [p => p[0] === 'executions' && p.length === 2, () => detailPage],
  [p => p[0] === 'definitions' && p.length === 1, () => definitionsPage],
  [p => p[0] === 'definitions' && p.length >= 2, () => definitionPage],
  [p => p[0] === 'task-definitions' && p.length >= 2, () => taskDefPage],
  [p => p[0] === 'queues', () => queuesPage],
  [p => p[0] === 'overview', () => overviewPage],
];

async function route() {
  const { parts, params } = parseHash();
  const ns = params.get('ns') || localStorage.getItem('nf.ns') || 'default';
  if (ns !== state.ns) { state.ns = ns; localStorage.setItem('nf.ns', ns); syncNs(); }
  if (cleanup) { try { cleanup(); } catch (e) { console.error(e); } cleanup = null; }
  const seq = ++renderSeq;
  for (const a of document.querySelectorAll('nav a'))
    a.classList.toggle('active', a.dataset.page === parts[0] || (a.dataset.page === 'definitions' && parts[0] === 'task-definitions'));
  for (const a of document.querySelectorAll('nav a, a.brand'))
    a.setAttribute('href', href('/' + (a.dataset.page || 'executions')));
  const match = pages.find(([test]) => test(parts));
  clear(view);
  if (!match) { view.append(h('h1', {}, 'Not found'), h('p', {}, 'No such page. ', h('a', { href: href('/executions') }, 'Executions'))); return; }
  try {
    const c = await match[1]()(view, { parts, params, isCurrent: () => seq === renderSeq });
    if (seq === renderSeq) cleanup = c || null;
    else if (c) c();
  } catch (e) {
    if (seq !== renderSeq) return;
    console.error(e);
    view.append(errorBox(e));
  }
}

async function syncNs() {
  const sel = document.getElementById('ns-select');
  let names = [state.ns];
  try {
    const r = await request('GET', '/v1/namespaces');
    names = r.items.map(n => n.name);
    if (!names.includes(state.ns)) names.push(state.ns);
  } catch { /* an older server: the current namespace only */ }
  clear(sel);
  for (const n of names) sel.append(h('option', { value: n, selected: n === state.ns }, n));
}

function theme(t) {
  document.documentElement.dataset.theme = t;
  localStorage.setItem('nf.theme', t);
  document.getElementById('theme').textContent = t === 'dark' ? 'Light theme' : 'Dark theme';
}

theme(localStorage.getItem('nf.theme') || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'));
document.getElementById('theme').addEventListener('click', () => theme(document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark'));
document.getElementById('ns-select').addEventListener('change', (e) => {
  state.ns = e.target.value;
  localStorage.setItem('nf.ns', state.ns);
  const { parts } = parseHash();
  location.hash = href('/' + (parts[0] === 'executions' || !parts[0] ? 'executions' : parts[0]));
});
window.addEventListener('hashchange', route);
window.addEventListener('unhandledrejection', (e) => console.error(e.reason));
state.ns = new URLSearchParams((location.hash.split('?')[1]) || '').get('ns') || localStorage.getItem('nf.ns') || 'default';
syncNs();
route();
