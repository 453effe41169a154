// Executions: the list, newest first, which defaults to what is running.
// Every filter is in the URL; pages are keyset ("Load more" passes
// nextCursor back).  Rows update in place from the namespace stream (or,
// on a server without it, from a refresh of the first page every 5 s);
// executions started since the list was loaded are counted in a bar of
// fixed height above it, shown on request, so nothing moves under the
// pointer.

import { h, clear, badge, fmtTime, fmtDuration, duration, errorBox } from './dom.js';
import { get, query, nsPath, stream, poller } from './api.js';
import { href, go } from './app.js';

const STATUSES = ['RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED'];
const PAGE = 50;

function toLocalInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return '';
  const p = n => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}
function fromLocalInput(v) { return v ? new Date(v).toISOString() : ''; }

export async function executionsPage(view, { params }) {
  const f = {
    status: params.get('status') || 'RUNNING',
    name: params.get('name') || '',
    correlationId: params.get('correlationId') || '',
    startedAfter: params.get('startedAfter') || '',
    startedBefore: params.get('startedBefore') || '',
    q: params.get('q') || '',
  };
  const statusSel = h('select', { name: 'status', id: 'f-status' },
    h('option', { value: 'ALL', selected: f.status === 'ALL' }, 'any status'),
    STATUSES.map(s => h('option', { value: s, selected: f.status === s }, s)),
    h('option', { value: 'FAILED,TIMED_OUT,TERMINATED', selected: f.status === 'FAILED,TIMED_OUT,TERMINATED' }, 'failed, timed out or terminated'));
  const nameIn = h('input', { name: 'name', id: 'f-name', value: f.name, list: 'def-names', placeholder: 'any', size: 18 });
  const names = h('datalist', { id: 'def-names' });
  const corrIn = h('input', { name: 'correlationId', id: 'f-corr', value: f.correlationId, placeholder: 'any', size: 16 });
  const afterIn = h('input', { type: 'datetime-local', id: 'f-after', value: toLocalInput(f.startedAfter) });
  const beforeIn = h('input', { type: 'datetime-local', id: 'f-before', value: toLocalInput(f.startedBefore) });
  const qIn = h('input', { type: 'search', name: 'q', id: 'f-q', value: f.q, placeholder: 'input.customer:42 output.ok:true' });
  const form = h('form', { class: 'filters panel', role: 'search', 'aria-label': 'Filter executions' },
    h('label', { for: 'f-status' }, 'Status', statusSel),
    h('label', { for: 'f-name' }, 'Definition', nameIn), names,
    h('label', { for: 'f-corr' }, 'Correlation id', corrIn),
    h('label', { for: 'f-after' }, 'Started after', afterIn),
    h('label', { for: 'f-before' }, 'Started before', beforeIn),
    h('label', { for: 'f-q' }, 'Search input/output', qIn),
    h('button', { type: 'submit', class: 'primary' }, 'Apply'),
    h('a', { href: href('/executions'), class: 'muted' }, 'Reset'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    go('/executions', {
      status: statusSel.value === 'RUNNING' ? '' : statusSel.value,
      name: nameIn.value.trim(), correlationId: corrIn.value.trim(),
      startedAfter: fromLocalInput(afterIn.value), startedBefore: fromLocalInput(beforeIn.value),
      q: qIn.value.trim(),
    });
  });
  statusSel.addEventListener('change', () => form.requestSubmit());

  const tbody = h('tbody');
  const table = h('table', { id: 'executions', 'aria-label': 'Executions' },
    h('colgroup', {}, h('col', { style: 'width:120px' }), h('col', { style: 'width:18%' }), h('col', { style: 'width:24%' }),
      h('col', { style: 'width:13%' }), h('col', { style: 'width:200px' }), h('col', { style: 'width:100px' }), h('col')),
    h('thead', {}, h('tr', {}, ['Status', 'Workflow', 'Id', 'Correlation id', 'Started', 'Duration', 'Reason'].map(t => h('th', { scope: 'col' }, t)))),
    tbody);
  const more = h('button', { type: 'button', id: 'load-more', hidden: true }, 'Load more');
  const info = h('span', { class: 'muted', id: 'list-info' });
  const pendingBtn = h('button', { type: 'button', id: 'show-new' }, '');
  const pendingBar = h('div', { class: 'pending-bar' }, pendingBtn);
  const errSlot = h('div');
  view.append(h('h1', {}, 'Executions'), form, errSlot, pendingBar,
    h('div', { class: 'panel' }, table, h('div', { class: 'row', style: 'margin-top:8px' }, more, info)));

  get('workflow-definitions').then(r => { for (const d of r.items || []) names.append(h('option', { value: d.name })); }).catch(() => {});

  const rows = new Map(); // id -> {tr, wf}
  let cursor = null, pending = new Set(), newest = null;
  const statusSet = f.status === 'ALL' ? null : new Set(f.status.split(','));

  function cells(tr, wf) {
    const [st, name, id, corr, started, dur, reason] = tr.children;
    clear(st).append(badge(wf.status));
    clear(name).append(`${wf.name} `, h('span', { class: 'muted' }, `v${wf.version}`));
    name.title = wf.name;
    // The link is made once: a row updated live keeps it, and the keyboard's
    // focus with it.
    if (!id.firstChild) id.append(h('a', { href: href('/executions/' + wf.id), class: 'mono' }, wf.id));
    corr.textContent = wf.correlationId || '—'; corr.title = wf.correlationId || '';
    started.textContent = fmtTime(wf.startedAt);
    dur.textContent = wf.endedAt ? fmtDuration(duration(wf.startedAt, wf.endedAt)) : 'running';
    reason.textContent = wf.reason || ''; reason.title = wf.reason || '';
  }
  function addRow(wf) {
    const tr = h('tr', { 'data-id': wf.id }, Array.from({ length: 7 }, () => h('td')));
    cells(tr, wf);
    tbody.append(tr);
    rows.set(wf.id, { tr, wf });
  }
  function update(wf) {
    const r = rows.get(wf.id);
    if (!r) return false;
    const merged = { ...r.wf, ...wf };
    if (merged.status !== r.wf.status || merged.updatedAt !== r.wf.updatedAt) {
      r.wf = merged;
      cells(r.tr, merged);
      r.tr.classList.remove('flash'); void r.tr.offsetWidth; r.tr.classList.add('flash');
    }
    return true;
  }
  // At most MAX_PENDING ids are kept, however long the tab stays open.
  const MAX_PENDING = 1000;
  function note(id) { if (pending.size < MAX_PENDING) pending.add(id); }
  function showPending() {
    const n = pending.size >= MAX_PENDING ? `${MAX_PENDING}+` : String(pending.size);
    pendingBar.classList.toggle('has', pending.size > 0);
    pendingBtn.textContent = pending.size ? `${n} new execution${pending.size > 1 ? 's' : ''} — show` : '';
  }
  pendingBtn.addEventListener('click', () => { pending.clear(); showPending(); load(true); });

  function args(extra) {
    return query({
      status: f.status === 'ALL' ? '' : f.status, name: f.name, correlationId: f.correlationId,
      startedAfter: f.startedAfter, startedBefore: f.startedBefore, q: f.q, limit: PAGE, ...extra,
    });
  }
  async function load(first) {
    clear(errSlot);
    try {
      const t0 = performance.now();
      const r = await get('workflows' + args(first ? {} : { cursor }));
      if (first) { clear(tbody); rows.clear(); }
      for (const wf of r.items) addRow(wf);
      if (first && r.items.length) newest = r.items[0].startedAt;
      cursor = r.nextCursor;
      more.hidden = !cursor;
      info.textContent = rows.size ? `${rows.size} shown${cursor ? '' : ' (all)'} · ${Math.round(performance.now() - t0)} ms`
        : 'No executions match.';
    } catch (e) {
      errSlot.append(errorBox(e));
    }
  }
  more.addEventListener('click', () => load(false));

  function matches(wf) {
    if (statusSet && !statusSet.has(wf.status)) return false;
    if (f.name && wf.name !== f.name) return false;
    if (f.correlationId && wf.correlationId !== f.correlationId) return false;
    if (f.startedBefore || f.q) return false; // a fixed window or a search: no live arrivals
    return !newest || wf.startedAt > newest || (wf.startedAt === newest && !rows.has(wf.id));
  }
  function arrived(wf) {
    if (!update(wf) && matches(wf)) { note(wf.id); showPending(); }
  }
  // The stream opens first and the list is read once the server has chosen
  // where the stream starts: a workflow started in between is then in the
  // list or in the stream (the stream's changes that came before the list
  // wait for it), never in neither.  A stream that cannot open holds the
  // list back at most 3 s.
  let listed = false, opened;
  const early = [], open = new Promise((r) => { opened = r; });
  let live = stream(nsPath('events'), {
    key: 'ns-stream',
    onOpen() { opened(); },
    onEvent(ev) {
      if (ev.event !== 'workflow') return;
      const wf = JSON.parse(ev.data);
      if (listed) arrived(wf); else early.push(wf);
    },
    fallback() {
      opened();
      live = poller(async () => {
        const r = await get('workflows' + args({}));
        for (const wf of r.items) {
          if (!update(wf) && matches(wf)) note(wf.id);
        }
        showPending();
      }, 5000, 'ns-poll');
    },
  });
  await Promise.race([open, new Promise((r) => setTimeout(r, 3000))]);
  await load(true);
  listed = true;
  for (const wf of early.splice(0)) arrived(wf);
  return () => live.close();
}
