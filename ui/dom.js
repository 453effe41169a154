// Small DOM helpers shared by every page: an element builder, formatting,
// toasts, the confirmation dialog and the connection banner.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

// Redraws what is inside box and puts the keyboard's focus back where it
// was: on the element with the same data-<key> (the nth of that value, for
// lists that repeat one). A live refresh or a selection redraws the graph,
// the timeline and the action buttons; without this, focus fell to the
// page and the next key pressed went nowhere.
export function keepFocus(box, redraw, key = 'ref') {
  const sel = `[data-${key}]`;
  const like = (v) => [...box.querySelectorAll(sel)].filter(e => e.dataset[key] === v);
  const at = document.activeElement;
  const was = at && box.contains(at) ? at.closest(sel) : null;
  const nth = was ? like(was.dataset[key]).indexOf(was) : -1;
  redraw();
  if (!was) return;
  const same = like(was.dataset[key]);
  const to = same[Math.min(nth, same.length - 1)];
  if (to) to.focus({ preventScroll: true });
}

export function badge(status) {
  return h('span', { class: 'badge s-' + (status || 'none'), text: status || '—' });
}

export function fmtTime(t) {
  if (!t) return '—';
  const d = new Date(t);
  if (isNaN(d)) return String(t);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return '—';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
  const m = Math.floor(s / 60), r = Math.round(s % 60);
  if (m < 60) return `${m} min ${r} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function duration(from, to) {
  if (!from) return null;
  const a = Date.parse(from), b = to ? Date.parse(to) : Date.now();
  return b - a;
}

export function toast(message, kind = 'ok') {
  const t = h('div', { class: 'toast' + (kind === 'error' ? ' error' : '') }, message);
  document.getElementById('toasts').append(t);
  setTimeout(() => t.remove(), kind === 'error' ? 9000 : 4000);
}

// A modal confirmation; resolves true on confirm.  extra: an element put
// in the dialog (a reason field), read by the caller after confirming.
export function confirmDialog(title, text, extra) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  const slot = clear(document.getElementById('confirm-extra'));
  if (extra) slot.append(extra);
  return new Promise(resolve => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
    dlg.returnValue = 'cancel';
    dlg.showModal();
    (extra && extra.querySelector && extra.querySelector('input,textarea')
      || document.getElementById('confirm-ok')).focus();
  });
}

// The banner that says a live connection is lost and being retried.  Each
// stream holds a key while it is down; the banner shows while any is.
const down = new Set();
export function connection(key, ok) {
  if (ok) down.delete(key); else down.add(key);
  const b = document.getElementById('banner');
  b.hidden = down.size === 0;
  b.textContent = down.size ? 'Connection lost — reconnecting…' : '';
}

export function errorBox(err) {
  return h('div', { class: 'error-box', role: 'alert' }, errorText(err));
}

export function errorText(err) {
  if (!err) return 'unknown error';
  let s = err.status ? `${err.status} ${err.code || ''}: ${err.message}` : String(err.message || err);
  if (err.details && err.details.length)
    s += ' — ' + err.details.map(d => `${d.path}: ${d.message}`).join('; ');
  return s;
}

export function notAvailable(what) {
  return h('div', { class: 'notice' }, `${what}: not available on this server.`);
}

export function link(href, text, attrs = {}) {
  return h('a', { href, ...attrs }, text);
}
