// The workflow drawn as a graph, laid out from the structure of the DSL
// itself: a list of tasks is a column; a fork, a switch and a decision
// put their lists side by side and meet again below; a loop frames its
// body and draws the way back.  Every node is coloured by the status of
// its task's latest attempt and is a focusable button (onSelect(ref)).

const NW = 176, NH = 42, VG = 26, HG = 22, PAD = 14, M = 16;

function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function cut(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + '…' : s; }

function edge(out, x1, y1, x2, y2, arrow = true) {
  let d;
  if (x1 === x2) d = `M${x1} ${y1}V${y2}`;
  else { const my = y1 + Math.min(VG / 2, (y2 - y1) / 2); d = `M${x1} ${y1}V${my}H${x2}V${y2}`; }
  out.push(`<path class="edge" d="${d}"${arrow ? ' marker-end="url(#arr)"' : ''}/>`);
}

function nodeBlock(t, ctx, shape = 'rect') {
  const ref = t.taskReferenceName || t.name || '?';
  const st = ctx.status(ref);
  let sub = t.type || 'SIMPLE';
  if (t.type === 'SUB_WORKFLOW' && t.subWorkflowParam) sub += ' · ' + (t.subWorkflowParam.name || 'inline');
  if (st) sub += ' · ' + st;
  return {
    w: NW, h: NH,
    draw(x, y, out) {
      const l = x - NW / 2;
      const sel = ctx.selected === ref ? ' selected' : '';
      out.push(`<g class="node st-${esc(st || 'NONE')}${sel}" data-ref="${esc(ref)}" tabindex="0" role="button" aria-label="${esc(`${ref}, ${t.type || 'SIMPLE'}${st ? ', ' + st : ''}`)}">`);
      if (shape === 'hex') {
        const k = 12;
        out.push(`<polygon points="${l + k},${y} ${l + NW - k},${y} ${l + NW},${y + NH / 2} ${l + NW - k},${y + NH} ${l + k},${y + NH} ${l},${y + NH / 2}"/>`);
      } else {
        out.push(`<rect x="${l}" y="${y}" width="${NW}" height="${NH}" rx="${shape === 'round' ? 20 : 6}"/>`);
      }
      out.push(`<text x="${x}" y="${y + 17}" text-anchor="middle">${esc(cut(ref, 24))}</text>`);
      out.push(`<text class="type" x="${x}" y="${y + 32}" text-anchor="middle">${esc(cut(sub, 30))}</text>`);
      out.push('</g>');
    },
  };
}

function column(tasks, ctx) {
  const blocks = (tasks || []).map(t => block(t, ctx));
  if (!blocks.length) return { w: NW / 2, h: 0, empty: true, draw() {} };
  const w = Math.max(...blocks.map(b => b.w));
  const h = blocks.reduce((a, b) => a + b.h, 0) + VG * (blocks.length - 1);
  return {
    w, h,
    draw(x, y, out) {
      let cy = y;
      blocks.forEach((b, i) => {
        if (i) edge(out, x, cy - VG, x, cy);
        b.draw(x, cy, out);
        cy += b.h + VG;
      });
    },
  };
}

// A head node, then lists side by side (labelled), meeting below.
function branches(t, ctx, lists, shape) {
  const head = nodeBlock(t, ctx, shape);
  const cols = lists.map(([label, tasks]) => ({ label, col: column(tasks, ctx) }));
  const inner = cols.reduce((a, c) => a + c.col.w, 0) + HG * Math.max(0, cols.length - 1);
  const w = Math.max(NW, inner);
  const bodyH = Math.max(0, ...cols.map(c => c.col.h));
  const labelled = cols.some(c => c.label);
  const top = NH + VG + (labelled ? 14 : 0);
  const h = top + bodyH + VG;
  return {
    w, h,
    draw(x, y, out) {
      head.draw(x, y, out);
      let cx = x - inner / 2;
      const bottom = y + h;
      for (const c of cols) {
        const bx = cx + c.col.w / 2;
        const by = y + top;
        if (c.label) out.push(`<text class="lbl" x="${bx + 5}" y="${by - 4}">${esc(cut(c.label, 22))}</text>`);
        edge(out, x, y + NH, bx, c.col.empty ? bottom - 4 : by - (c.label ? 12 : 0), !c.col.empty);
        if (!c.col.empty) {
          if (c.label) out.push(`<path class="edge" d="M${bx} ${by - 12}V${by}"/>`);
          c.col.draw(bx, by, out);
          out.push(`<path class="edge" d="M${bx} ${by + c.col.h}V${bottom - 4}H${x}"/>`);
        } else {
          out.push(`<path class="edge" d="M${bx} ${bottom - 4}H${x}"/>`);
        }
        cx += c.col.w + HG;
      }
      out.push(`<path class="edge" d="M${x} ${bottom - 4}V${bottom}"/>`);
    },
  };
}

function loop(t, ctx) {
  const head = nodeBlock(t, ctx, 'round');
  const body = column(t.loopOver, ctx);
  const w = Math.max(NW, body.w) + 2 * PAD + 20;
  const h = NH + VG + body.h + PAD * 2;
  return {
    w, h,
    draw(x, y, out) {
      out.push(`<g class="loop"><rect class="box" x="${x - w / 2}" y="${y - 4}" width="${w}" height="${h + 4}" rx="10"/></g>`);
      head.draw(x, y, out);
      if (!body.empty) {
        edge(out, x, y + NH, x, y + NH + VG);
        body.draw(x, y + NH + VG, out);
        const by = y + NH + VG + body.h;
        const rx = x + Math.max(NW, body.w) / 2 + 12;
        out.push(`<path class="edge" d="M${x} ${by}V${by + PAD / 2}H${rx}V${y + NH / 2}H${x + NW / 2}" marker-end="url(#arr)"/>`);
        out.push(`<text class="lbl" x="${rx - 4}" y="${by + PAD / 2 + 12}" text-anchor="end">repeat</text>`);
      }
      out.push(`<path class="edge" d="M${x} ${y + h - PAD}V${y + h}"/>`);
    },
  };
}

function block(t, ctx) {
  switch (t.type) {
  case 'FORK_JOIN':
    return branches(t, ctx, (t.forkTasks || []).map(b => ['', b]), 'rect');
  case 'SWITCH':
  case 'DECISION': {
    const lists = Object.entries(t.decisionCases || {}).map(([k, v]) => [k, v]);
    lists.push(['default', t.defaultCase || []]);
    return branches(t, ctx, lists, 'hex');
  }
  case 'DO_WHILE':
    return loop(t, ctx);
  case 'JOIN':
  case 'TERMINATE':
    return nodeBlock(t, ctx, 'round');
  default:
    return nodeBlock(t, ctx);
  }
}

/*
 * Draws def (a workflow definition) into container.  tasks: the
 * execution's tasks (or none), for the colours.  Returns {svg}.
 */
export function drawGraph(container, def, { tasks = [], selected = null, onSelect = null } = {}) {
  const latest = new Map();
  for (const t of tasks) {
    const ref = String(t.refName).replace(/__\d+$/, '');
    const p = latest.get(ref);
    if (!p || t.iteration > p.iteration || (t.iteration === p.iteration && t.attempt >= p.attempt)) latest.set(ref, t);
  }
  const ctx = { status: ref => latest.get(ref)?.status || null, selected };
  const startNode = { w: NW, h: 30 };
  const body = column((def && def.tasks) || [], ctx);
  const w = Math.max(body.w, NW) + 2 * M;
  const hgt = 30 + VG + body.h + (body.empty ? 0 : VG) + 30 + 2 * M;
  const out = [];
  const x = w / 2;
  let y = M;
  out.push(`<g class="node"><rect x="${x - 40}" y="${y}" width="80" height="${startNode.h}" rx="15"/><text x="${x}" y="${y + 19}" text-anchor="middle">start</text></g>`);
  y += 30;
  if (!body.empty) {
    edge(out, x, y, x, y + VG);
    body.draw(x, y + VG, out);
    y += VG + body.h;
  }
  edge(out, x, y, x, y + VG);
  y += VG;
  out.push(`<g class="node"><rect x="${x - 40}" y="${y}" width="80" height="30" rx="15"/><text x="${x}" y="${y + 19}" text-anchor="middle">end</text></g>`);
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${hgt}" viewBox="0 0 ${w} ${hgt}" role="img" aria-label="Workflow graph">` +
    `<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="currentColor" class="arrowhead"/></marker></defs>` +
    out.join('') + '</svg>';
  container.innerHTML = svg;
  const el = container.querySelector('svg');
  el.style.color = 'var(--idle)';
  if (onSelect) {
    const pick = (e) => {
      const g = e.target.closest('g.node[data-ref]');
      if (g) onSelect(g.dataset.ref);
    };
    el.addEventListener('click', pick);
    el.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pick(e); } });
  }
  return { svg: el };
}

export function legend() {
  const d = document.createElement('div');
  d.className = 'legend';
  d.innerHTML = [['var(--run)', 'running / scheduled'], ['var(--ok)', 'completed'], ['var(--fail)', 'failed / timed out'],
    ['var(--warn)', 'canceled / skipped'], ['var(--border)', 'not reached']]
    .map(([c, t]) => `<span><i style="background:${c}"></i>${t}</span>`).join('');
  return d;
}
