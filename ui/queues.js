// Queues and workers: depth and in-flight per queue with the last poll of
// each worker, the semaphores and their holders, and the outbox dead
// letter with replay.  Refreshed every 5 s while the page is open.

import { h, clear, errorBox, fmtTime, toast, confirmDialog, errorText, notAvailable } from './dom.js';
import { get, post, poller, query } from './api.js';
import { href } from './app.js';
import { jsonView } from './json.js';

function ago(t) {
  if (!t) return '—';
  const s = Math.round((Date.now() - Date.parse(t)) / 1000);
  return s < 60 ? `${s} s ago` : s < 3600 ? `${Math.floor(s / 60)} min ago` : fmtTime(t);
}

export async function queuesPage(view) {
  const qBox = h('div', { id: 'queues' }), semBox = h('div', { id: 'semaphores' }), dlBox = h('div', { id: 'dead-letter' });
  view.append(h('h1', {}, 'Queues & workers'),
    h('section', { class: 'panel', 'aria-label': 'Queues' }, h('h2', {}, 'Queues'), qBox),
    h('div', { class: 'grid2' },
      h('section', { class: 'panel', 'aria-label': 'Semaphores' }, h('h2', {}, 'Semaphores'), semBox),
      h('section', { class: 'panel', 'aria-label': 'Dead letter' }, h('h2', {}, 'Outbox dead letter'), dlBox)));

  async function queues() {
    try {
      const r = await get('queues');
      const body = h('tbody');
      for (const q of r.items) {
        const last = q.workers[0];
        body.append(h('tr', { 'data-queue': q.name },
          h('td', {}, h('a', { href: href(`/task-definitions/${encodeURIComponent(q.name)}`) }, q.name)),
          h('td', {}, q.depth + (q.capped && q.depth >= 10000 ? '+' : '')),
          h('td', {}, q.inFlight + (q.capped && q.inFlight >= 10000 ? '+' : '')),
          h('td', {}, String(q.workers.length)),
          h('td', { title: q.workers.map(w => `${w.workerId}: ${fmtTime(w.lastPollAt)} (${w.pollCount} polls)`).join('\n') },
            last ? `${last.workerId}, ${ago(last.lastPollAt)}` : 'never polled')));
      }
      if (!r.items.length) body.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No queues: no task definitions and no polls.')));
      clear(qBox).append(h('table', {}, h('thead', {}, h('tr', {}, ['Queue', 'Depth (ready)', 'In flight', 'Workers', 'Last poll'].map(t => h('th', {}, t)))), body));
    } catch (e) { clear(qBox).append(e.noRoute ? notAvailable('Queue depths') : errorBox(e)); }
  }

  async function semaphores() {
    try {
      const r = await get('semaphores');
      clear(semBox);
      if (!r.items.length) { semBox.append(h('p', { class: 'muted' }, 'No semaphores.')); return; }
      for (const s of r.items) {
        semBox.append(h('div', { class: 'attempt' }, h('b', {}, s.name), ` ${s.inUse} of ${s.permits} in use`,
          s.holders.length ? h('ul', {}, s.holders.map(x => h('li', {},
            h('a', { href: href('/executions/' + x.workflowId), class: 'mono' }, x.workflowId.slice(0, 13) + '…'),
            ` worker ${x.workerId || '—'}, since ${fmtTime(x.acquiredAt)}, lease to ${fmtTime(x.leaseExpiresAt)}`))) : null));
      }
    } catch (e) { clear(semBox).append(e.noRoute ? notAvailable('Semaphores') : errorBox(e)); }
  }

  let dlCursor = null;
  const chosen = new Set();
  async function deadLetter(more) {
    try {
      const r = await get('outbox/dead-letter' + query({ limit: 50, cursor: more ? dlCursor : '' }));
      if (!more) { clear(dlBox); chosen.clear(); }
      const replay = h('button', { type: 'button', id: 'replay', disabled: true }, 'Replay selected');
      const list = h('div');
      for (const d of r.items) {
        const cb = h('input', { type: 'checkbox', 'aria-label': `select ${d.id}` });
        cb.addEventListener('change', () => { if (cb.checked) chosen.add(d.id); else chosen.delete(d.id); replay.disabled = !chosen.size; });
        list.append(h('div', { class: 'attempt' }, h('label', { class: 'row' }, cb, h('b', {}, d.eventType), h('span', { class: 'muted' }, `→ ${d.sink}`),
          `${d.attempts} attempts`, h('span', { class: 'muted' }, fmtTime(d.deadLetteredAt))),
          h('div', { class: 'error-box' }, d.lastError || 'no error recorded'),
          d.workflowId ? h('a', { href: href('/executions/' + d.workflowId) }, 'workflow') : null,
          h('details', {}, h('summary', {}, 'Payload'), jsonView(d.payload, { label: 'payload' }))));
      }
      replay.addEventListener('click', async () => {
        if (!await confirmDialog('Replay?', `${chosen.size} event(s) go back to the outbox.`)) return;
        try { const x = await post('outbox/dead-letter/replay', { ids: [...chosen] }); toast(`Replayed ${x.replayed}`); deadLetter(false); }
        catch (e) { toast(errorText(e), 'error'); }
      });
      if (!more) dlBox.append(h('div', { class: 'row', style: 'margin-bottom:8px' }, replay));
      dlBox.append(list);
      if (!more && !r.items.length) dlBox.append(h('p', { class: 'muted' }, 'Nothing in the dead letter.'));
      dlCursor = r.nextCursor;
      if (dlCursor) {
        const b = h('button', { type: 'button' }, 'Load more');
        b.addEventListener('click', () => { b.remove(); deadLetter(true); });
        dlBox.append(b);
      }
    } catch (e) { clear(dlBox).append(e.noRoute ? notAvailable('The outbox dead letter') : errorBox(e)); }
  }

  await Promise.all([queues(), semaphores(), deadLetter(false)]);
  const p = poller(async () => { await Promise.all([queues(), semaphores()]); }, 5000, 'queues-poll');
  return () => p.close();
}
