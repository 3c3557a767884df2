// dashboard.js — the live dashboard at /dashboard: polls the server's Prometheus text at /metrics
// once a second (every S seconds with /dashboard?every=S, 0.1-60) and charts it. A fixed set of
// charts reads the counters it knows (decode speed, MTP acceptance by position, tokens per verify,
// queue, prefill vs decode time, memory); below them every series /metrics exposes gets its own
// small chart, so counters added to the server later (sequences, rows per forward, KV pages,
// caches) appear without a change here. Charts are SVG drawn by hand (under 100 lines; a chart
// library would weigh 50-200 kB).
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const every = parseFloat(new URLSearchParams(location.search).get('every'));
  const POLL_MS = Number.isFinite(every) ? Math.min(60000, Math.max(100, every * 1000)) : 1000, KEEP = 180;
  const apiKey = (() => { try { return JSON.parse(localStorage.getItem('mtplx.apiKey') || '""'); } catch { return ''; } })();
  const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  const hist = new Map();   // series key -> [{t, v}]
  let prev = null;          // previous poll: {t, values: Map}
  let health = null;
  const SVGNS = 'http://www.w3.org/2000/svg';

  // Prometheus text -> {types: {name: type}, samples: [{key, name, labels, value}]}
  function parse(text) {
    const types = {}, samples = [];
    for (const line of text.split('\n')) {
      if (!line) continue;
      if (line.startsWith('#')) {
        const m = /^# TYPE (\S+) (\S+)/.exec(line);
        if (m) types[m[1]] = m[2];
        continue;
      }
      const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      if (m[2]) for (const l of m[2].slice(1, -1).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
      samples.push({ key: m[1] + (m[2] || ''), name: m[1], labels, value: parseFloat(m[3]) });
    }
    return { types, samples };
  }

  function push(key, t, v) {
    if (!hist.has(key)) hist.set(key, []);
    const a = hist.get(key);
    a.push({ t, v: Number.isFinite(v) ? v : 0 });
    if (a.length > KEEP) a.shift();
  }

  const fmt = (v) => (Math.abs(v) >= 1e9 ? `${(v / 1e9).toFixed(2)} G` : Math.abs(v) >= 1e6 ? `${(v / 1e6).toFixed(1)} M`
    : Math.abs(v) >= 1e4 ? `${(v / 1e3).toFixed(1)} k` : Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 3 : 1));

  // A card with a title, a value and an SVG; returns {card, svg, val}. Created once per id.
  function card(parent, id, title, legend, small) {
    let c = document.querySelector(`[data-chart="${CSS.escape(id)}"]`);
    if (c) return { card: c, svg: c.querySelector('svg'), val: c.querySelector('.val') };
    c = document.createElement('div');
    c.className = small ? 'card small' : 'card';
    c.dataset.chart = id;
    const h = document.createElement('h3');
    const t = document.createElement('span'); t.textContent = title; t.title = id;
    const v = document.createElement('span'); v.className = 'val';
    h.append(t, v);
    const svg = document.createElementNS(SVGNS, 'svg');
    svg.setAttribute('viewBox', `0 0 300 ${small ? 40 : 90}`);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', title);
    c.append(h, svg);
    if (legend) {
      const l = document.createElement('div');
      l.className = 'legend';
      legend.forEach((name, i) => { const s = document.createElement('i'); s.className = `l${i}`; l.append(s, name); });
      c.append(l);
    }
    parent.append(c);
    return { card: c, svg, val: v };
  }

  // Lines of the series keys in one chart, y from 0 to the largest value shown.
  function lines(parent, id, title, keys, legend, valueText, small) {
    const { card: c, svg, val } = card(parent, id, title, legend, small);
    const H = small ? 40 : 90;
    const data = keys.map((k) => hist.get(k) || []);
    const max = Math.max(1e-9, ...data.flat().map((p) => p.v));
    svg.textContent = '';
    const axis = document.createElementNS(SVGNS, 'line');
    axis.setAttribute('class', 'axis');
    axis.setAttribute('x1', 0); axis.setAttribute('x2', 300); axis.setAttribute('y1', H - 1); axis.setAttribute('y2', H - 1);
    svg.append(axis);
    data.forEach((pts, i) => {
      if (!pts.length) return;
      const pl = document.createElementNS(SVGNS, 'polyline');
      pl.setAttribute('class', `s${i}`);
      pl.setAttribute('vector-effect', 'non-scaling-stroke');
      const x0 = KEEP - pts.length;
      pl.setAttribute('points', pts.map((p, j) => `${((x0 + j) / (KEEP - 1)) * 300},${H - 2 - (p.v / max) * (H - 12)}`).join(' '));
      svg.append(pl);
    });
    if (!small) {
      const t = document.createElementNS(SVGNS, 'text');
      t.setAttribute('x', 2); t.setAttribute('y', 9); t.textContent = `max ${fmt(max)}`;
      svg.append(t);
    }
    const last = data[0] && data[0].length ? data[0][data[0].length - 1].v : 0;
    val.textContent = valueText !== undefined ? valueText : fmt(last);
    c.dataset.points = String(data[0] ? data[0].length : 0);
    c.dataset.last = String(last);
    c.dataset.max = String(Math.max(0, ...data.flat().map((p) => p.v)));
  }

  // Bars: one per (label, value in [0, 1]).
  function bars(parent, id, title, items) {
    const { card: c, svg, val } = card(parent, id, title);
    svg.textContent = '';
    const w = 300 / Math.max(1, items.length);
    items.forEach(([label, v], i) => {
      const r = document.createElementNS(SVGNS, 'rect');
      r.setAttribute('class', 'bar');
      r.setAttribute('x', i * w + 4); r.setAttribute('width', Math.max(2, w - 8));
      r.setAttribute('y', 78 - v * 68); r.setAttribute('height', Math.max(0.5, v * 68));
      const tt = document.createElementNS(SVGNS, 'title'); tt.textContent = `${label}: ${(100 * v).toFixed(1)}%`; r.append(tt);
      const t = document.createElementNS(SVGNS, 'text');
      t.setAttribute('x', i * w + 4); t.setAttribute('y', 89); t.textContent = `${label}: ${(100 * v).toFixed(0)}%`;
      svg.append(r, t);
    });
    val.textContent = items.length ? '' : 'no drafts yet';
    c.dataset.points = String(items.length);
  }

  function stat(parent, id, title, text) {
    const { card: c, svg, val } = card(parent, id, title, null, true);
    if (svg) svg.remove();
    val.textContent = text;
    c.dataset.last = text;
  }

  function update(text, t) {
    const { types, samples } = parse(text);
    const values = new Map(samples.map((s) => [s.key, s.value]));
    const get = (k) => values.get(k) || 0;
    const dt = prev ? (t - prev.t) / 1000 : 0;
    const d = (k) => (prev ? get(k) - (prev.values.get(k) || 0) : 0);
    // derived series
    const dDecode = d('mtplx_decode_seconds_total');
    push('derived:throughput', t, dt > 0 ? d('mtplx_completion_tokens_total') / dt : 0);
    push('derived:gen_tok_s', t, get('mtplx_decode_tokens_per_second'));
    const cycles = get('mtplx_verify_cycles_total');
    push('derived:tok_per_verify', t, cycles > 0 ? get('mtplx_completion_tokens_total') / cycles : 0);
    push('derived:prefill_share', t, dt > 0 ? d('mtplx_prefill_seconds_total') / dt : 0);
    push('derived:decode_share', t, dt > 0 ? dDecode / dt : 0);
    push('derived:rss_mib', t, get('process_resident_memory_bytes') / 1048576);
    for (const s of samples) {
      const counter = types[s.name] === 'counter';
      push(s.key, t, counter ? (dt > 0 ? (s.value - (prev.values.get(s.key) || 0)) / dt : 0) : s.value);
    }
    prev = { t, values };

    const g = $('charts');
    lines(g, 'decode', 'Decode tok/s', ['derived:gen_tok_s', 'derived:throughput'], ['last generation', 'server tokens/s now']);
    const acc = samples.filter((s) => s.name === 'mtplx_acceptance_rate').sort((a, b) => +a.labels.position - +b.labels.position);
    bars(g, 'acceptance', 'MTP acceptance by draft position', acc.map((s) => [`pos ${s.labels.position}`, s.value]));
    lines(g, 'tok_per_verify', 'Mean tokens per verify', ['derived:tok_per_verify']);
    lines(g, 'queue', 'Requests running / waiting', ['mtplx_queue_running', 'mtplx_queue_waiting'], ['running', 'waiting'],
      `${get('mtplx_queue_running')} / ${get('mtplx_queue_waiting')}`);
    // the scheduler's gauges (continuous batching), when the server has them
    if (values.has('mtplx_sequences_running'))
      lines(g, 'sequences', 'Sequences running / waiting', ['mtplx_sequences_running', 'mtplx_sequences_waiting'],
        ['running', 'waiting'], `${get('mtplx_sequences_running')} / ${get('mtplx_sequences_waiting')}`);
    if (values.has('mtplx_rows_per_forward')) lines(g, 'rows', 'Rows per forward', ['mtplx_rows_per_forward']);
    if (values.has('mtplx_kv_pages_used'))
      lines(g, 'kv', 'KV pages used / free', ['mtplx_kv_pages_used', 'mtplx_kv_pages_free'], ['used', 'free'],
        `${get('mtplx_kv_pages_used')} / ${get('mtplx_kv_pages_free')}`);
    lines(g, 'time', 'Prefill vs decode (busy fraction)', ['derived:prefill_share', 'derived:decode_share'], ['prefill', 'decode']);
    lines(g, 'memory', 'Server memory (RSS, MiB)', ['derived:rss_mib']);
    if (health) stat(g, 'depth', 'MTP depth in use (default / max)', `${health.depth} / ${health.max_depth}`);

    const all = $('all');
    for (const s of samples) {
      const counter = types[s.name] === 'counter';
      lines(all, `m:${s.key}`, s.key + (counter ? ' (/s)' : ''), [s.key], null, fmt(s.value), true);
      document.querySelector(`[data-chart="${CSS.escape(`m:${s.key}`)}"]`).dataset.value = String(s.value);
    }
    $('model-line').textContent = health ? `${health.model} · ${health.tier} · ctx ${health.context} · updated ${new Date().toLocaleTimeString()}`
      : `updated ${new Date().toLocaleTimeString()}`;
  }

  function banner(text) { const b = $('banner'); b.textContent = text || ''; b.hidden = !text; }

  async function poll() {
    let r = null, text = '';
    try {
      if (!health) {
        const h = await fetch('/health', { headers });
        if (h.ok) health = await h.json();
      }
      r = await fetch('/metrics', { headers });
      text = await r.text();
    } catch {
      banner('Cannot reach the server: is `mtplx serve` still running?');
    }
    if (r && r.status === 401) banner('This server needs an API key: enter it on the chat page (Settings), then reload.');
    else if (r && !r.ok) banner(`/metrics answered ${r.status}.`);
    else if (r) { banner(''); update(text, performance.now()); }
    setTimeout(poll, POLL_MS);
  }
  poll();
})();
