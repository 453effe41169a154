// The dashboard's only way to the server: the public API (docs/api.md).
// Every path is relative to the current namespace; errors are thrown as
// ApiError with the server's status, code, message and details.

import { connection } from './dom.js';

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || '';
    this.details = e.details || [];
  }
  // The server has no such endpoint (an older or newer build): 404 with
  // "no route", or 405 for a path known under other methods.
  get noRoute() {
    return (this.status === 404 && /^no route/.test(this.message)) || this.status === 405;
  }
}

export const state = { ns: 'default' };

export function nsPath(path) {
  return `/v1/ns/${encodeURIComponent(state.ns)}/${path}`;
}

export async function request(method, url, body, opts = {}) {
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: body !== undefined ? { 'Content-Type': 'application/json', Accept: 'application/json' }
        : { Accept: 'application/json' },
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal: opts.signal,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    const err = new ApiError(0, { error: { code: 'network', message: 'the server cannot be reached' } });
    throw err;
  }
  const text = await res.text();
  let json = null;
  if (text) { try { json = JSON.parse(text); } catch { json = null; } }
  if (!res.ok) throw new ApiError(res.status, json);
  return json;
}

export const get = (path, opts) => request('GET', nsPath(path), undefined, opts);
export const post = (path, body) => request('POST', nsPath(path), body === undefined ? {} : body);
export const put = (path, body) => request('PUT', nsPath(path), body);
export const del = (path) => request('DELETE', nsPath(path));

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}

/*
 * A live stream of server-sent events at url, read with fetch so that the
 * answer's type can be checked: when the server answers text/event-stream,
 * each event goes to onEvent({id, event, data}) and a dropped connection
 * reconnects with Last-Event-ID (backing off to 10 s, the banner showing
 * meanwhile); when it answers anything else (the stream is not available
 * on this server), fallback() is called once and the stream stops.
 * onOpen() (optional) is called each time the server has answered with a
 * stream: it has then chosen where the stream starts.
 * Returns {close()}.
 */
export function stream(url, { onEvent, fallback, onOpen, lastId = null, key = url }) {
  let closed = false, controller = null, delay = 500, lastEventId = lastId, timer = null;
  async function connect() {
    if (closed) return;
    controller = new AbortController();
    try {
      const headers = { Accept: 'text/event-stream' };
      if (lastEventId !== null) headers['Last-Event-ID'] = String(lastEventId);
      const res = await fetch(url, { headers, signal: controller.signal, cache: 'no-store' });
      const type = res.headers.get('Content-Type') || '';
      if (!res.ok || !type.startsWith('text/event-stream')) {
        if (res.status >= 500 || res.status === 429) throw new Error('HTTP ' + res.status);
        connection(key, true);
        closed = true;
        fallback && fallback(res.status);
        return;
      }
      connection(key, true);
      delay = 500;
      if (onOpen) onOpen();
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i).replace(/^\r?\n\r?\n/, '');
          const ev = { id: null, event: 'message', data: '' };
          const data = [];
          for (const line of block.split(/\r?\n/)) {
            if (!line || line.startsWith(':')) continue;
            const c = line.indexOf(':');
            const f = c < 0 ? line : line.slice(0, c);
            let v = c < 0 ? '' : line.slice(c + 1);
            if (v.startsWith(' ')) v = v.slice(1);
            if (f === 'id') ev.id = v;
            else if (f === 'event') ev.event = v;
            else if (f === 'data') data.push(v);
            else if (f === 'retry' && +v > 0) delay = +v;
          }
          if (!data.length) continue;
          ev.data = data.join('\n');
          if (ev.id !== null) lastEventId = ev.id;
          try { onEvent(ev); } catch (e) { console.error(e); }
        }
      }
      throw new Error('stream ended');
    } catch (e) {
      if (closed) return;
      connection(key, false);
      timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    }
  }
  connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      controller && controller.abort();
      connection(key, true);
    },
  };
}

// Polls fn every ms until closed; failures show the banner and are retried.
export function poller(fn, ms, key) {
  let closed = false, timer = null;
  async function tick() {
    if (closed) return;
    try { await fn(); connection(key, true); }
    catch (e) { if (e.name !== 'AbortError') connection(key, false); }
    if (!closed) timer = setTimeout(tick, ms);
  }
  timer = setTimeout(tick, ms);
  return { close() { closed = true; clearTimeout(timer); connection(key, true); } };
}
