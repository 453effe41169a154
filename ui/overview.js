// Overview: executions started, completed and failed per minute over the
// last hour, and the slowest and most-failing definitions.  Refreshed
// every 15 s while open.

import { h, clear, errorBox, notAvailable, fmtDuration } from './dom.js';
import { get, poller } from './api.js';
import { href } from './app.js';
import { lineChart } from './chart.js';

export async function overviewPage(view) {
  const chart = h('div', { class: 'chart', id: 'chart' });
  const totals = h('div', { class: 'row', id: 'totals' });
  const slow = h('tbody'), failing = h('tbody');
  const note = h('p', { class: 'muted' });
  view.append(h('h1', {}, 'Overview ', h('span', { class: 'muted', style: 'font-size:13px' }, 'last 60 minutes')),
    h('section', { class: 'panel', 'aria-label': 'Per minute' }, h('h2', {}, 'Executions per minute'), totals, chart,
      h('div', { class: 'legend' }, h('span', {}, h('i', { style: 'background:var(--run)' }), 'started'),
        h('span', {}, h('i', { style: 'background:var(--ok)' }), 'completed'), h('span', {}, h('i', { style: 'background:var(--fail)' }), 'failed, timed out, terminated')), note),
    h('div', { class: 'grid2' },
      h('section', { class: 'panel', 'aria-label': 'Slowest' }, h('h2', {}, 'Slowest definitions'),
        h('table', {}, h('thead', {}, h('tr', {}, ['Definition', 'Ended', 'Average', 'Longest'].map(t => h('th', {}, t)))), slow)),
      h('section', { class: 'panel', 'aria-label': 'Most failing' }, h('h2', {}, 'Most-failing definitions'),
        h('table', {}, h('thead', {}, h('tr', {}, ['Definition', 'Failed', 'Of', 'Rate'].map(t => h('th', {}, t)))), failing))));

  async function load() {
    let s;
    try { s = await get('stats?minutes=60'); }
    catch (e) { clear(chart).append(e.noRoute ? notAvailable('Statistics') : errorBox(e)); return; }
    chart.innerHTML = lineChart(s.buckets || [], ['started', 'completed', 'failed']);
    const sum = k => (s.buckets || []).reduce((a, b) => a + (b[k] || 0), 0);
    clear(totals).append(h('span', {}, h('b', {}, String(sum('started'))), ' started'),
      h('span', {}, h('b', {}, String(sum('completed'))), ' completed'), h('span', {}, h('b', {}, String(sum('failed'))), ' failed'));
    note.textContent = 'Over the executions started in the window' + (s.sampled ? ' (the most recent ones only: the window holds more than the server reads).' : '.');
    clear(slow);
    for (const d of s.slowest) slow.append(h('tr', {}, h('td', {}, h('a', { href: href('/executions', { name: d.name, status: 'ALL' }) }, d.name)),
      h('td', {}, String(d.count)), h('td', {}, fmtDuration(d.avgSeconds * 1000)), h('td', {}, fmtDuration(d.maxSeconds * 1000))));
    if (!s.slowest.length) slow.append(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'Nothing ended in the window.')));
    clear(failing);
    for (const d of s.mostFailing) failing.append(h('tr', {}, h('td', {}, h('a', { href: href('/executions', { name: d.name, status: 'FAILED,TIMED_OUT,TERMINATED' }) }, d.name)),
      h('td', {}, String(d.failed)), h('td', {}, String(d.total)), h('td', {}, `${Math.round((100 * d.failed) / d.total)} %`)));
    if (!s.mostFailing.length) failing.append(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No failures in the window.')));
  }
  await load();
  const p = poller(load, 15000, 'overview-poll');
  return () => p.close();
}
