// Draws the plan (/plan.json: a board's panels, placed and with their queries
// substituted by boardshot) with uPlot. Every value comes from Prometheus
// through boardshot's proxy; a panel whose queries return nothing says so.
'use strict';

// Grafana's classic palette (palette-classic) and named colours (light theme).
const PALETTE = ['#7EB26D', '#EAB839', '#6ED0E0', '#EF843C', '#E24D42', '#1F78C1', '#BA43A9', '#705DA0',
  '#508642', '#CCA300', '#447EBC', '#C15C17', '#890F02', '#0A437C', '#6D1F62', '#584477'];
const NAMED = { green: '#56A64B', red: '#E02F44', orange: '#FF780A', yellow: '#F2CC0C', blue: '#3274D9',
  purple: '#A352CC', 'dark-red': '#AD0317', 'dark-green': '#19730E', transparent: 'rgba(0,0,0,0)' };
const CALC_NAMES = { lastNotNull: 'Last *', last: 'Last', max: 'Max', min: 'Min', mean: 'Mean' };

function color(c) { return NAMED[c] || c; }

// num prints a number with about three significant digits.
function num(v) {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1000) return v.toFixed(0);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return String(+v.toFixed(1));
  if (a >= 1) return String(+v.toFixed(2));
  return String(+v.toPrecision(2));
}

function scaled(v, steps) {
  for (const [limit, div, suffix] of steps) {
    if (Math.abs(v) < limit) return num(v / div) + suffix;
  }
  const [, div, suffix] = steps[steps.length - 1];
  return num(v / div) + suffix;
}

const SI = [[1e3, 1, ''], [1e6, 1e3, ' K'], [1e9, 1e6, ' M'], [Infinity, 1e9, ' B']];

// fmt formats a value in a Grafana unit (the ones the shipped boards use,
// and a few more); an unknown unit is printed after the number.
function fmt(v, unit) {
  if (v == null || Number.isNaN(v)) return '–';
  if (unit === 'percentunit') return num(v * 100) + '%';
  if (unit === 'percent') return num(v) + '%';
  if (unit === 's' || unit === 'ms') {
    const s = unit === 'ms' ? v / 1000 : v;
    if (s === 0) return '0 s';
    return scaled(s, [[1e-6, 1e-9, ' ns'], [1e-3, 1e-6, ' µs'], [1, 1e-3, ' ms'], [60, 1, ' s'], [3600, 60, ' min'], [Infinity, 3600, ' h']]);
  }
  if (unit === 'ops') return scaled(v, SI) + ' ops/s';
  if (unit === 'reqps') return scaled(v, SI) + ' req/s';
  if (unit === 'Bps') return scaled(v, [[1e3, 1, ' B/s'], [1e6, 1e3, ' kB/s'], [1e9, 1e6, ' MB/s'], [Infinity, 1e9, ' GB/s']]);
  if (unit === 'bytes') return scaled(v, [[1024, 1, ' B'], [1 << 20, 1024, ' KiB'], [1 << 30, 1 << 20, ' MiB'], [Infinity, 1 << 30, ' GiB']]);
  if (unit && unit.startsWith('suffix:')) return num(v) + unit.slice(7);
  if (unit && unit.startsWith('prefix:')) return unit.slice(7) + num(v);
  if (!unit || unit === 'none' || unit === 'short') return scaled(v, SI).replace(' ', '');
  return num(v) + ' ' + unit;
}

// legendName fills a legendFormat ({{label}}) from a series' labels.
function legendName(format, metric) {
  if (!format) {
    const { __name__: name = '', ...rest } = metric;
    return name + '{' + Object.entries(rest).map(([k, v]) => k + '="' + v + '"').join(', ') + '}';
  }
  return format.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_, l) => metric[l] ?? '');
}

async function runQuery(q) {
  const p = new URLSearchParams({ query: q.expr });
  if (q.instant) {
    p.set('time', q.end);
  } else {
    p.set('start', q.start); p.set('end', q.end); p.set('step', q.step);
  }
  const resp = await fetch((q.instant ? '/api/v1/query?' : '/api/v1/query_range?') + p);
  const body = await resp.json().catch(() => ({ error: 'HTTP ' + resp.status }));
  if (body.status !== 'success') throw new Error(body.error || 'HTTP ' + resp.status);
  return body.data.result.map(r => ({
    name: legendName(q.legend, r.metric),
    points: (r.values || [r.value]).map(([t, v]) => [t, parseFloat(v)]),
  }));
}

// series runs a panel's queries; the series keep query order, sorted by name within one.
async function panelSeries(panel) {
  const out = [];
  for (const q of panel.queries) {
    const rs = await runQuery(q);
    rs.sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
    out.push(...rs);
  }
  return out;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

function lastNotNull(points) {
  for (let i = points.length - 1; i >= 0; i--) if (!Number.isNaN(points[i][1])) return points[i][1];
  return null;
}

function calc(name, vals) {
  const xs = vals.filter(v => v != null && !Number.isNaN(v));
  if (xs.length === 0) return null;
  switch (name) {
    case 'max': return Math.max(...xs);
    case 'min': return Math.min(...xs);
    case 'mean': return xs.reduce((a, b) => a + b, 0) / xs.length;
    case 'last': return vals[vals.length - 1];
    default: return xs[xs.length - 1]; // lastNotNull
  }
}

// thresholdColor is the colour of the highest step at or below v.
function thresholdColor(steps, v) {
  let c = steps.length ? steps[0].color : 'green';
  for (const s of steps) if (s.value == null || v >= s.value) c = s.color;
  return color(c);
}

function drawStat(panel, body, series) {
  const box = el('div', 'stats');
  const wide = panel.box.width > panel.box.height * 1.3;
  box.style.flexDirection = wide ? 'row' : 'column';
  for (const s of series) {
    const v = lastNotNull(s.points);
    const cell = el('div', 'stat');
    cell.style.background = v == null ? '#8e8e8e' : thresholdColor(panel.steps || [], v);
    cell.append(el('div', 'name', s.name), el('div', 'value', fmt(v, panel.unit)));
    box.append(cell);
  }
  body.append(box);
}

// alignedData puts every series on the query's step grid (Prometheus aligns
// range results to start + k*step); a missing point is a gap.
function alignedData(q, series) {
  const xs = [];
  for (let t = q.start; t <= q.end; t += q.step) xs.push(t);
  const index = new Map(xs.map((t, i) => [t, i]));
  const ys = series.map(s => {
    const col = new Array(xs.length).fill(null);
    for (const [t, v] of s.points) if (index.has(t) && !Number.isNaN(v)) col[index.get(t)] = v;
    return col;
  });
  return [xs, ...ys];
}

function drawLegend(panel, series, data, maxHeight) {
  const leg = el('div', 'legend');
  const table = el('table');
  const head = el('tr');
  head.append(el('th', '', ''));
  for (const c of panel.calcs || []) head.append(el('th', '', CALC_NAMES[c] || c));
  table.append(head);
  const rowH = 15, fit = Math.max(1, Math.floor((maxHeight - 17) / rowH));
  const shown = series.length > fit ? fit - 1 : series.length;
  series.slice(0, shown).forEach((s, i) => {
    const tr = el('tr'), name = el('td');
    const sw = el('span', 'sw');
    sw.style.background = PALETTE[i % PALETTE.length];
    name.append(sw, s.name);
    name.title = s.name;
    tr.append(name);
    for (const c of panel.calcs || []) tr.append(el('td', '', fmt(calc(c, data[i + 1]), panel.unit)));
    table.append(tr);
  });
  leg.append(table);
  if (shown < series.length) leg.append(el('div', 'more', '+ ' + (series.length - shown) + ' more series (drawn, not listed)'));
  return leg;
}

// thresholdsHook draws the panel's thresholds under the series: areas
// between steps and/or lines at each step, as the panel's thresholdsStyle says.
function thresholdsHook(panel) {
  const mode = panel.thresholdsStyle || 'off';
  const steps = panel.steps || [];
  return u => {
    if (mode === 'off' || steps.length === 0) return;
    const ctx = u.ctx, { left, top, width, height } = u.bbox;
    const ypos = v => u.valToPos(v, 'y', true);
    ctx.save();
    ctx.beginPath(); ctx.rect(left, top, width, height); ctx.clip();
    steps.forEach((s, i) => {
      const lo = s.value == null ? top + height : ypos(s.value);
      const hi = i + 1 < steps.length ? ypos(steps[i + 1].value) : top;
      if (mode.includes('area')) {
        ctx.globalAlpha = 0.08; ctx.fillStyle = color(s.color);
        ctx.fillRect(left, Math.min(lo, hi), width, Math.abs(lo - hi));
      }
      if (mode.includes('line') && s.value != null) {
        ctx.globalAlpha = 0.9; ctx.strokeStyle = color(s.color); ctx.lineWidth = 1.5;
        ctx.setLineDash(mode.includes('dashed') ? [6, 4] : []);
        ctx.beginPath(); ctx.moveTo(left, lo); ctx.lineTo(left + width, lo); ctx.stroke();
      }
    });
    ctx.restore();
  };
}

function yRange(panel) {
  return (u, dmin, dmax) => {
    const lo = panel.min != null ? panel.min : Math.min(dmin, 0);
    let hi = panel.max != null ? panel.max : dmax;
    if (hi == null || hi <= lo) hi = lo + 1;
    else if (panel.max == null) hi = lo + (hi - lo) * 1.08;
    return [lo, hi];
  };
}

function drawTimeseries(panel, body, series) {
  const q = panel.queries.find(x => !x.instant) || panel.queries[0];
  const data = alignedData(q, series);
  const total = body.clientHeight;
  const legend = panel.showLegend === false ? null : drawLegend(panel, series, data, Math.floor(total * 0.42));
  const wrap = el('div');
  body.append(wrap);
  if (legend) body.append(legend);
  const chartH = Math.max(60, total - (legend ? legend.offsetHeight : 0));
  const opts = {
    width: body.clientWidth, height: chartH, legend: { show: false }, cursor: { show: false },
    tzDate: ts => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
    scales: { x: { time: true }, y: { range: yRange(panel) } },
    axes: [
      { stroke: '#464c54', grid: { stroke: '#eceef0' }, ticks: { stroke: '#dcdee1' }, font: '11px DejaVu Sans',
        space: 60, values: (u, vals) => vals.map(t => new Date(t * 1000).toISOString().slice(11, 16)) },
      { stroke: '#464c54', grid: { stroke: '#eceef0' }, ticks: { stroke: '#dcdee1' }, font: '11px DejaVu Sans',
        size: 74, values: (u, vals) => vals.map(v => fmt(v, panel.unit)) },
    ],
    series: [{}, ...series.map((s, i) => ({ label: s.name, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: false, points: { show: false } }))],
    hooks: { drawClear: [thresholdsHook(panel)] },
  };
  new uPlot(opts, data, wrap);
}

async function drawPanel(panel, grid) {
  const b = panel.box;
  if (panel.type === 'row') {
    const r = el('div', 'row', panel.title);
    Object.assign(r.style, { left: b.left + 'px', top: b.top + 'px', width: b.width + 'px', height: b.height + 'px' });
    grid.append(r);
    return null;
  }
  const div = el('div', 'panel');
  Object.assign(div.style, { left: b.left + 'px', top: b.top + 'px', width: b.width + 'px', height: b.height + 'px' });
  const body = el('div', 'body');
  div.append(el('h2', '', panel.title), body);
  grid.append(div);
  const report = { id: panel.id, title: panel.title, type: panel.type, series: 0, state: 'drawn' };
  if (panel.type !== 'timeseries' && panel.type !== 'stat') {
    body.append(el('div', 'nodata', 'panel type ' + panel.type + ': not drawn by boardshot'));
    report.state = 'not drawn: type ' + panel.type;
    return report;
  }
  try {
    const series = await panelSeries(panel);
    report.series = series.length;
    if (series.length === 0) {
      body.append(el('div', 'nodata', 'No data'));
      report.state = 'no data';
    } else if (panel.type === 'stat') {
      drawStat(panel, body, series);
    } else {
      drawTimeseries(panel, body, series);
    }
  } catch (e) {
    body.append(el('div', 'error', 'query failed: ' + e.message));
    report.state = 'error: ' + e.message;
  }
  return report;
}

function utc(t) { return new Date(t * 1000).toISOString().slice(0, 16).replace('T', ' '); }

(async function main() {
  const plan = await (await fetch('/plan.json')).json();
  document.title = plan.title;
  document.getElementById('title').textContent = plan.title + ' — ' + plan.board;
  document.getElementById('sub').textContent = 'Drawn from the board\'s JSON by test/tools/boardshot (uPlot) from a real Prometheus, ' +
    utc(plan.start) + ' – ' + utc(plan.end).slice(11) + ' UTC; not a Grafana screenshot.';
  document.getElementById('note').textContent = plan.note || '';
  const grid = document.getElementById('grid');
  grid.style.width = plan.width + 'px';
  grid.style.height = plan.height + 'px';
  const reports = (await Promise.all(plan.panels.map(p => drawPanel(p, grid)))).filter(Boolean);
  await fetch('/report', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(reports) });
})();
