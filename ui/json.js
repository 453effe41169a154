// A JSON viewer: objects and arrays fold (deeper levels start folded),
// a Copy button copies the whole value, and every node carries its JSON
// path ($.tasks[1].name) so that errors can be marked where they are.

import { h } from './dom.js';

function keyPath(path, k) {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`;
}

function scalar(v) {
  if (typeof v === 'string') return h('span', { class: 'str', text: JSON.stringify(v) });
  if (typeof v === 'number') return h('span', { class: 'num', text: String(v) });
  return h('span', { class: 'lit', text: String(v) });
}

function node(v, path, depth, openDepth) {
  if (v === null || typeof v !== 'object') return scalar(v);
  const isArr = Array.isArray(v);
  const entries = isArr ? v.map((x, i) => [i, x]) : Object.entries(v);
  const [o, c] = isArr ? ['[', ']'] : ['{', '}'];
  if (!entries.length) return h('span', { class: 'lit', text: o + c });
  const ul = h('ul');
  entries.forEach(([k, x], i) => {
    const p = isArr ? `${path}[${k}]` : keyPath(path, k);
    const li = h('li', { 'data-path': p },
      isArr ? null : [h('span', { class: 'k', text: JSON.stringify(k) }), ': '],
      node(x, p, depth + 1, openDepth), i < entries.length - 1 ? ',' : '');
    ul.append(li);
  });
  const summary = h('span', { class: 'muted', text: ` ${entries.length} ${isArr ? 'items' : 'keys'} ` });
  const open = depth < openDepth;
  const tog = h('button', {
    type: 'button', class: 'tog', 'aria-expanded': String(open),
    'aria-label': open ? 'Collapse' : 'Expand', text: open ? '▾' : '▸',
  });
  const wrap = h('span', {}, tog, o, summary, ul, c);
  const set = (on) => {
    ul.hidden = !on; summary.hidden = on;
    tog.textContent = on ? '▾' : '▸';
    tog.setAttribute('aria-expanded', String(on));
    tog.setAttribute('aria-label', on ? 'Collapse' : 'Expand');
  };
  tog.addEventListener('click', () => set(ul.hidden));
  set(open);
  return wrap;
}

export function jsonView(value, { openDepth = 2, label = 'JSON' } = {}) {
  const copy = h('button', { type: 'button', class: 'copy', 'aria-label': `Copy ${label}`, text: 'Copy' });
  copy.addEventListener('click', async () => {
    const text = JSON.stringify(value, null, 2);
    try { await navigator.clipboard.writeText(text); }
    catch {
      const ta = h('textarea', {}, text); document.body.append(ta); ta.select();
      document.execCommand('copy'); ta.remove();
    }
    copy.textContent = 'Copied'; setTimeout(() => { copy.textContent = 'Copy'; }, 1200);
  });
  const root = h('ul', {}, h('li', { 'data-path': '$' }, node(value === undefined ? null : value, '$', 0, openDepth)));
  return h('div', { class: 'json', role: 'group', 'aria-label': label }, copy, root);
}

// Marks each {path, message} on a viewer: the deepest node the path
// reaches (a missing key marks its object), unfolded, with the message.
export function markErrors(view, details) {
  for (const d of details || []) {
    let path = d.path || '$';
    let el = null;
    while (path && !(el = view.querySelector(`li[data-path="${CSS.escape(path)}"]`))) {
      const m = path.match(/^(.*)(\.[A-Za-z_][A-Za-z0-9_]*|\[[^\]]*\])$/);
      if (!m) break;
      path = m[1];
    }
    if (!el) el = view.querySelector('li[data-path="$"]');
    if (!el) continue;
    el.classList.add('bad');
    el.append(h('span', { class: 'bad-msg', text: `← ${d.path}: ${d.message}` }));
    for (let p = el.parentElement; p && p !== view; p = p.parentElement) {
      if (p.tagName === 'UL') p.hidden = false;
    }
  }
}
