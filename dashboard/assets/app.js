// The ztask dashboard: one page, fed by server-sent events from taskdash
// (a snapshot, then deltas a few times a second). What it keeps is bounded:
// at most MAX_STREAM finished tasks and MAX_SERIES points.
'use strict';

const MAX_STREAM = 20000;
const MAX_SERIES = 600;
const HEAT_ROWS = 60;  // beyond this many engines the stream is a heat map

const state = {
  counts: {},
  series: [],
  stream: [],
  streamSkipped: 0,  // finished tasks taskdash left out of the sample sent here
  engines: [],
  labels: [],
  receivedAt: performance.now(),
  tab: 'overview',
};

const $ = (id) => document.getElementById(id);

function fmt(n) {
  if (n === null || n === undefined) return '–';
  if (typeof n !== 'number') return String(n);
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + 'M';
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function seconds(s) {
  if (!(s >= 0)) return '';
  if (s < 0.001) return (s * 1e6).toFixed(0) + ' µs';
  if (s < 1) return (s * 1e3).toFixed(1) + ' ms';
  if (s < 120) return s.toFixed(2) + ' s';
  return (s / 60).toFixed(1) + ' min';
}

function when(t) {
  return t > 0 ? new Date(t * 1000).toLocaleTimeString() : '';
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function taskLink(id) {
  return el('a', { class: 'task-link', 'data-id': id, onclick: () => showTask(id) }, id.slice(0, 12) + '…');
}

// The hub's clock now, from its time at the last delta.
function hubNow() {
  return (state.counts.now || Date.now() / 1000) + (performance.now() - state.receivedAt) / 1000;
}

function prefixOf(label) {
  const cut = label.search(/[/:]/);
  const p = cut < 0 ? label : label.slice(0, cut);
  return p || '(none)';
}

function colourOf(prefix) {
  let h = 0;
  for (let i = 0; i < prefix.length; i++) h = (h * 31 + prefix.charCodeAt(i)) >>> 0;
  // Away from red, which marks failures.
  return `hsl(${40 + (h % 260)}, 60%, 55%)`;
}

async function getJson(url) {
  const r = await fetch(url, { credentials: 'same-origin' });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// ---- live updates -----------------------------------------------------------

function connect() {
  const source = new EventSource('/events');
  source.onmessage = (m) => apply(JSON.parse(m.data));
  source.onerror = () => {
    $('status').textContent = 'reconnecting to taskdash…';
    $('status').className = 'status bad';
  };
}

function apply(d) {
  if (d.reset) {
    state.series = [];
    state.stream = [];
    state.streamSkipped = 0;
  }
  state.counts = d.counts || {};
  state.receivedAt = performance.now();
  for (const p of d.series || []) state.series.push(p);
  if (state.series.length > MAX_SERIES) state.series.splice(0, state.series.length - MAX_SERIES);
  for (const t of d.stream || []) state.stream.push(t);
  state.streamSkipped += d.stream_skipped || 0;
  if (state.stream.length > MAX_STREAM) state.stream.splice(0, state.stream.length - MAX_STREAM);
  if (d.engines) state.engines = d.engines;
  if (d.labels) state.labels = d.labels;
  const c = state.counts;
  if (c.error) {
    $('status').textContent = 'hub: ' + c.error;
    $('status').className = 'status bad';
  } else {
    $('status').textContent = 'live · ' + when(c.now);
    $('status').className = 'status';
  }
  render();
}

// ---- pages ------------------------------------------------------------------

function render() {
  if (state.tab === 'overview') renderOverview();
  if (state.tab === 'stream') renderStream();
  if (state.tab === 'progress') renderProgress();
  if (state.tab === 'engines') renderEngines();
}

function renderOverview() {
  const c = state.counts;
  for (const k of ['waiting', 'ready', 'running', 'ok', 'failed']) $('count-' + k).textContent = fmt(c[k]);
  $('count-rate').textContent = fmt(c.rate);
  const byState = {};
  for (const e of state.engines) byState[e.state] = (byState[e.state] || 0) + 1;
  $('engine-states').replaceChildren(...(Object.keys(byState).length
    ? Object.entries(byState).map(([s, n]) => el('div', {}, el('b', {}, fmt(n)), ' ' + s))
    : [el('div', { class: 'hint' }, 'no engine registered')]));
  const info = [];
  if (c.scheme) {
    info.push(el('div', {}, 'scheme ', el('b', {}, c.scheme), ' · HWM ', el('b', {}, c.hwm === 0 ? 'unlimited' : c.hwm === -1 ? 'auto' : c.hwm)));
    info.push(el('div', {}, 'clients ', el('b', {}, fmt(c.clients))));
  } else {
    info.push(el('div', { class: 'hint' }, 'no word from the scheduler yet'));
  }
  info.push(el('div', {}, 'submitted ', el('b', {}, fmt(c.submitted_total)), ' · finished ',
    el('b', {}, fmt(c.finished_total)), ' · retried ', el('b', {}, fmt(c.retries_total)), ' since the hub started'));
  $('scheduler-info').replaceChildren(...info);
  drawSeries();
}

function sizeCanvas(canvas, height) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.parentElement.clientWidth - 28;
  canvas.style.height = height + 'px';
  // Set only when they change: setting them makes a new bitmap each time.
  const cw = Math.round(Math.max(100, width) * ratio), ch = Math.round(height * ratio);
  if (canvas.width !== cw) canvas.width = cw;
  if (canvas.height !== ch) canvas.height = ch;
  const g = canvas.getContext('2d');
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  return { g, w: Math.max(100, width), h: height };
}

function drawSeries() {
  const { g, w, h } = sizeCanvas($('series'), 220);
  const pts = state.series;
  const left = 50, right = 50, top = 10, bottom = 20;
  g.clearRect(0, 0, w, h);
  g.font = '11px system-ui';
  g.fillStyle = '#6c757d';
  if (pts.length < 2) {
    g.fillText('collecting: a point a second', left, h / 2);
    return;
  }
  const t0 = pts[0][0], t1 = pts[pts.length - 1][0];
  const rateMax = Math.max(1, ...pts.map((p) => Math.max(p[1], p[2])));
  const queueMax = Math.max(1, ...pts.map((p) => p[3]));
  const x = (t) => left + (w - left - right) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1);
  const line = (i, max, colour) => {
    g.strokeStyle = colour;
    g.lineWidth = 1.5;
    g.beginPath();
    pts.forEach((p, k) => {
      const y = top + (h - top - bottom) * (1 - p[i] / max);
      if (k) g.lineTo(x(p[0]), y); else g.moveTo(x(p[0]), y);
    });
    g.stroke();
  };
  g.strokeStyle = '#e9ecef';
  g.beginPath();
  g.moveTo(left, h - bottom);
  g.lineTo(w - right, h - bottom);
  g.stroke();
  line(2, rateMax, '#adb5bd');
  line(1, rateMax, '#1c7ed6');
  line(3, queueMax, '#f08c00');
  g.fillStyle = '#1c7ed6';
  g.fillText(fmt(rateMax) + '/s', 2, top + 10);
  g.fillStyle = '#f08c00';
  g.fillText(fmt(queueMax), w - right + 4, top + 10);
  g.fillStyle = '#6c757d';
  g.fillText(when(t0), left, h - 4);
  g.fillText(when(t1), w - right - 50, h - 4);
}

function renderStream() {
  const windowS = Number($('stream-window').value);
  const now = hubNow();
  const from = now - windowS;
  const engines = [...new Set([...state.engines.map((e) => e.id), ...state.stream.map((t) => t.engine).filter((e) => e !== null)])].sort((a, b) => a - b);
  const heat = engines.length > HEAT_ROWS;
  const rows = heat ? HEAT_ROWS : Math.max(1, engines.length);
  const rowH = heat ? 6 : Math.max(8, Math.min(28, Math.floor(360 / rows)));
  const { g, w, h } = sizeCanvas($('stream-canvas'), Math.max(120, rows * rowH + 30));
  const left = 60, right = 10, top = 4;
  const x = (t) => left + (w - left - right) * ((t - from) / windowS);
  const rowOf = new Map(engines.map((e, i) => [e, heat ? Math.floor(i * HEAT_ROWS / engines.length) : i]));
  g.clearRect(0, 0, w, h);
  g.font = '11px system-ui';
  g.fillStyle = '#6c757d';
  if (!heat) {
    engines.forEach((e, i) => g.fillText('engine ' + e, 2, top + i * rowH + rowH * 0.7));
  } else {
    g.fillText(engines.length + ' engines', 2, top + 10);
  }
  const prefixes = new Map();
  if (heat) {
    // Occupancy per (engine group, time column): busy time over capacity.
    const cols = 200, colW = windowS / cols;
    const busy = new Float64Array(HEAT_ROWS * cols);
    const perRow = new Array(HEAT_ROWS).fill(0);
    for (const e of engines) perRow[rowOf.get(e)]++;
    for (const t of state.stream) {
      if (t.completed < from || t.engine === null || !(t.started > 0)) continue;
      const r = rowOf.get(t.engine);
      const a = Math.max(t.started, from), b = Math.min(t.completed, now);
      for (let c = Math.max(0, Math.floor((a - from) / colW)); c < cols && from + c * colW < b; c++) {
        const lo = Math.max(a, from + c * colW), hi = Math.min(b, from + (c + 1) * colW);
        if (hi > lo) busy[r * cols + c] += hi - lo;
      }
    }
    for (let r = 0; r < HEAT_ROWS; r++) {
      for (let c = 0; c < cols; c++) {
        const occ = Math.min(1, busy[r * cols + c] / (colW * Math.max(1, perRow[r])));
        if (occ <= 0) continue;
        g.fillStyle = `rgba(28, 126, 214, ${0.15 + 0.85 * occ})`;
        g.fillRect(x(from + c * colW), top + r * rowH, (w - left - right) / cols + 0.5, rowH - 1);
      }
    }
  } else {
    const shown = state.stream.filter((t) => t.completed >= from && t.engine !== null);
    // What each task waited first, under the bars.
    g.strokeStyle = '#ced4da';
    g.beginPath();
    for (const t of shown) {
      const start = t.started > 0 ? t.started : t.completed;
      if (!(t.submitted > 0 && t.submitted < start)) continue;
      const y = top + rowOf.get(t.engine) * rowH + rowH / 2;
      g.moveTo(Math.max(left, x(t.submitted)), y);
      g.lineTo(Math.max(left, x(start)), y);
    }
    g.stroke();
    for (const t of shown) {
      const r = rowOf.get(t.engine);
      const y = top + r * rowH;
      const start = t.started > 0 ? t.started : t.completed;
      const prefix = prefixOf(t.label);
      prefixes.set(prefix, colourOf(prefix));
      const x0 = Math.max(left, x(start)), x1 = Math.max(x0 + 1, x(t.completed));
      g.fillStyle = t.ok ? colourOf(prefix) : '#fa5252';
      g.fillRect(x0, y + 1, x1 - x0, rowH - 3);
      if (!t.ok) {
        g.strokeStyle = '#a61e1e';
        g.strokeRect(x0, y + 1, Math.max(2, x1 - x0), rowH - 3);
      }
    }
  }
  g.fillStyle = '#6c757d';
  g.fillText(when(from), left, h - 4);
  g.fillText('now', w - right - 24, h - 4);
  $('stream-legend').replaceChildren(...[...prefixes].slice(0, 30).map(([p, c]) => {
    const b = el('b');
    b.style.background = c;
    return el('span', {}, b, p);
  }), ...(state.counts.missed ? [el('span', { class: 'hint' }, fmt(state.counts.missed) + ' finished tasks not kept by taskdash (past 2,000 a second it keeps a sample, every failure first)')] : []),
  ...(state.streamSkipped ? [el('span', { class: 'hint' }, 'a sample is drawn, failures first: ' + fmt(state.streamSkipped) + ' other finished tasks left out')] : []));
}

function renderProgress() {
  const bars = state.labels.map((l) => {
    const total = Math.max(l.submitted, l.ok + l.failed, 1);
    const ok = el('div', { class: 'ok' });
    ok.style.width = (100 * l.ok / total) + '%';
    const failed = el('div', { class: 'failed' });
    failed.style.width = (100 * l.failed / total) + '%';
    return el('div', { class: 'progress', 'data-prefix': l.prefix },
      el('div', { class: 'bar-label' }, el('b', {}, l.prefix),
        el('span', {}, `${fmt(l.ok)} ok · ${fmt(l.failed)} failed · ${fmt(l.submitted)} submitted`)),
      el('div', { class: 'bar' }, ok, failed));
  });
  $('progress-bars').replaceChildren(...(bars.length ? bars : [el('div', { class: 'hint' }, 'no task yet')]));
}

function renderEngines() {
  const rows = state.engines.map((e) => el('tr', { 'data-engine': e.id, onclick: () => filterEngine(e.id) },
    el('td', {}, e.id), el('td', {}, e.name), el('td', {}, e.host), el('td', {}, e.pid),
    el('td', { class: 'st-' + e.state }, e.state), el('td', {}, e.restarts), el('td', {}, fmt(e.done)),
    el('td', {}, e.running), el('td', {}, e.queued), el('td', {}, e.hwm ?? ''),
    el('td', {}, e.current ? taskLink(e.current) : '')));
  $('engine-table').tBodies[0].replaceChildren(...rows);
}

function filterEngine(id) {
  const form = $('task-filter');
  form.elements.engine.value = id;
  location.hash = '#tasks';
}

async function loadTasks() {
  const form = $('task-filter');
  const params = new URLSearchParams();
  for (const name of ['state', 'label', 'engine', 'q']) {
    const v = form.elements[name].value.trim();
    if (v) params.set(name, v);
  }
  const q = form.elements.q.value.trim();
  try {
    const tasks = await getJson('/api/tasks?' + params);
    $('task-table').tBodies[0].replaceChildren(...tasks.map((t) => el('tr', { class: 'task-row', 'data-id': t.id, onclick: () => showTask(t.id) },
      el('td', { class: 'mono' }, t.id), el('td', {}, t.label || ''), el('td', { class: 'st-' + t.state }, t.state),
      el('td', {}, t.engine ?? ''), el('td', {}, t.error_type || ''),
      el('td', {}, t.started > 0 && t.submitted > 0 ? seconds(t.started - t.submitted) : ''),
      el('td', {}, t.started > 0 && t.completed > 0 ? seconds(t.completed - t.started) : ''),
      el('td', {}, t.completed ? when(t.completed) : ''))));
    $('task-note').textContent = tasks.length
      ? 'The latest finished tasks taskdash holds (and failures, longer); any task by its whole id.'
      : 'No task here.';
    if (!tasks.length && /^[0-9a-fA-F]{32}$/.test(q)) showTask(q.toLowerCase());
  } catch (e) {
    $('task-note').textContent = 'cannot list tasks: ' + e.message;
  }
}

async function showTask(id) {
  const pane = $('detail');
  pane.hidden = false;
  $('detail-id').textContent = id;
  $('detail-body').replaceChildren(el('p', { class: 'hint' }, 'loading…'));
  let t;
  try {
    t = await getJson('/api/task?id=' + encodeURIComponent(id));
  } catch (e) {
    $('detail-body').replaceChildren(el('p', { id: 'detail-error', class: 'st-error' }, e.message));
    return;
  }
  const fields = el('dl', {});
  const add = (k, v) => fields.append(el('dt', {}, k), el('dd', {}, v));
  add('status', el('span', { id: 'detail-status', class: 'st-' + t.status }, t.status));
  if (t.error) add('error', el('span', { id: 'detail-error', class: 'st-error' }, `${t.error.type}: ${t.error.message}`));
  add('label', t.label || '');
  add('engine', t.engine_id ?? '');
  add('attempts', `${t.attempts} (retries allowed: ${t.retries})`);
  add('submitted', when(t.submitted));
  add('started', when(t.started));
  add('completed', when(t.completed));
  if (t.started && t.submitted) add('waited', seconds(t.started - t.submitted));
  if (t.started && t.completed) add('ran', seconds(t.completed - t.started));
  if (t.exit_code !== null) add('exit code', t.exit_code);
  for (const kind of ['after', 'follow']) {
    const d = t[kind];
    if (!d.ids.length) continue;
    const links = el('span', {});
    d.ids.forEach((id, i) => { if (i) links.append(' '); links.append(taskLink(id)); });
    add(`${kind} (${d.mode}, ${d.outcome})`, links);
  }
  const body = [fields, el('p', {}, el('a', { class: 'task-link', href: '#graph', onclick: () => drawGraph(id) }, 'draw its graph'))];
  const tail = (name, text, cut) => {
    if (!text) return;
    body.push(el('h4', {}, name + (cut ? ' (the end of it)' : '')), el('pre', { id: 'detail-' + name }, text));
  };
  tail('stdout', t.stdout, t.stdout_truncated);
  tail('stderr', t.stderr, t.stderr_truncated);
  if (t.result !== null && t.result !== undefined && t.result !== '') {
    body.push(el('h4', {}, 'result'), el('pre', {}, JSON.stringify(t.result, null, 1).slice(0, 4000)));
  }
  $('detail-body').replaceChildren(...body);
}

// ---- the graph --------------------------------------------------------------

let graph = null;

async function drawGraph(id) {
  $('graph-form').elements.id.value = id;
  $('graph-note').textContent = 'loading…';
  try {
    graph = await getJson('/api/graph?id=' + encodeURIComponent(id));
  } catch (e) {
    $('graph-note').textContent = e.message;
    return;
  }
  layoutGraph(graph);
  paintGraph();
  const failed = graph.nodes.filter((n) => n.status === 'error').length;
  $('graph-note').textContent = `${graph.nodes.length} tasks, ${graph.edges.length} dependencies, ${failed} failed` +
    (graph.truncated ? ' (cut at 3,000 tasks)' : '');
}

// Columns by depth (longest path from a task with no dependency drawn).
function layoutGraph(gr) {
  const byId = new Map(gr.nodes.map((n) => [n.id, n]));
  const parents = new Map(gr.nodes.map((n) => [n.id, []]));
  for (const e of gr.edges) if (byId.has(e.from) && parents.has(e.to)) parents.get(e.to).push(e.from);
  const depth = new Map();
  const depthOf = (id) => {
    const stack = [[id, false]];
    while (stack.length) {
      const [n, done] = stack.pop();
      if (depth.has(n)) continue;
      const ps = parents.get(n) || [];
      if (done) {
        depth.set(n, ps.length ? 1 + Math.max(...ps.map((p) => depth.get(p) ?? 0)) : 0);
        continue;
      }
      stack.push([n, true]);
      for (const p of ps) if (!depth.has(p)) stack.push([p, false]);
    }
    return depth.get(id);
  };
  const columns = [];
  for (const n of gr.nodes) {
    const d = depthOf(n.id);
    (columns[d] = columns[d] || []).push(n);
  }
  const tallest = Math.max(...columns.map((c) => (c ? c.length : 0)));
  const nodeH = Math.max(4, Math.min(22, Math.floor(2400 / Math.max(1, tallest))));
  gr.colW = Math.max(40, Math.min(160, Math.floor(3000 / Math.max(1, columns.length))));
  gr.nodeH = nodeH;
  gr.width = 20 + columns.length * gr.colW;
  gr.height = 20 + tallest * (nodeH + 2);
  columns.forEach((col, c) => (col || []).forEach((n, r) => {
    n.x = 10 + c * gr.colW;
    n.y = 10 + r * (nodeH + 2);
  }));
  gr.byId = byId;
}

function paintGraph() {
  if (!graph) return;
  const canvas = $('graph-canvas');
  const ratio = window.devicePixelRatio || 1;
  canvas.width = graph.width * ratio;
  canvas.height = graph.height * ratio;
  canvas.style.width = graph.width + 'px';
  canvas.style.height = graph.height + 'px';
  const g = canvas.getContext('2d');
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  const boxW = graph.colW * 0.7, h = graph.nodeH;
  g.strokeStyle = '#ced4da';
  g.lineWidth = 1;
  g.beginPath();
  for (const e of graph.edges) {
    const a = graph.byId.get(e.from), b = graph.byId.get(e.to);
    if (!a || !b) continue;
    g.moveTo(a.x + boxW, a.y + h / 2);
    g.lineTo(b.x, b.y + h / 2);
  }
  g.stroke();
  const colours = { ok: '#40c057', error: '#fa5252', running: '#1c7ed6', waiting: '#adb5bd' };
  g.font = '10px system-ui';
  for (const n of graph.nodes) {
    g.fillStyle = colours[n.status] || '#adb5bd';
    g.fillRect(n.x, n.y, boxW, h);
    if (h >= 12) {
      g.fillStyle = '#fff';
      g.fillText((n.label || n.id).slice(0, Math.floor(boxW / 6)), n.x + 2, n.y + h - 3);
    }
  }
}

function graphClick(ev) {
  if (!graph) return;
  const r = ev.target.getBoundingClientRect();
  const px = ev.clientX - r.left, py = ev.clientY - r.top;
  const boxW = graph.colW * 0.7;
  const hit = graph.nodes.find((n) => px >= n.x && px <= n.x + boxW && py >= n.y && py <= n.y + graph.nodeH);
  if (hit) showTask(hit.id);
}

// ---- tabs -------------------------------------------------------------------

function selectTab() {
  const tab = (location.hash || '#overview').slice(1).split('?')[0] || 'overview';
  state.tab = document.getElementById('tab-' + tab) ? tab : 'overview';
  for (const s of document.querySelectorAll('.tab')) s.classList.toggle('active', s.id === 'tab-' + state.tab);
  for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('active', a.dataset.tab === state.tab);
  if (state.tab === 'tasks') loadTasks();
  if (state.tab === 'graph' && !graph) {
    const latest = [...state.stream].reverse().find((t) => t.deps > 0);
    if (latest) drawGraph(latest.id);
    else $('graph-note').textContent = 'no finished task with dependencies yet: give an id';
  }
  render();
}

window.addEventListener('hashchange', selectTab);
window.addEventListener('resize', render);
$('task-filter').addEventListener('submit', (e) => { e.preventDefault(); loadTasks(); });
$('graph-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const id = e.target.elements.id.value.trim();
  if (id) drawGraph(id);
});
$('graph-canvas').addEventListener('click', graphClick);
$('detail-close').addEventListener('click', () => { $('detail').hidden = true; });
$('stream-window').addEventListener('change', render);
selectTab();
connect();
