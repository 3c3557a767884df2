// chat.js — the chat page served at `/` by `mtplx serve`: conversations kept in localStorage,
// streamed answers from POST /v1/chat/completions (SSE), thinking, tool-call cards, per-message
// stats from the stream's final `mtplx` object, settings, API key, clear error messages.
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const md = window.mtplxMarkdown;
  const KEYS = { convs: 'mtplx.conversations', current: 'mtplx.current', settings: 'mtplx.settings', key: 'mtplx.apiKey' };
  const EXAMPLE_TOOLS = [
    { type: 'function', function: { name: 'read_file', description: 'Read a file from the workspace.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
    { type: 'function', function: { name: 'list_dir', description: 'List the entries of a directory.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  ];
  const SETTING_FIELDS = ['system', 'temperature', 'top_p', 'top_k', 'max_tokens', 'depth', 'seed', 'tools'];

  const load = (k, d) => { try { const v = localStorage.getItem(k); return v === null ? d : JSON.parse(v); } catch { return d; } };
  const save = (k, v) => { try { localStorage.setItem(k, JSON.stringify(v)); } catch { /* storage full or off */ } };

  let convs = load(KEYS.convs, []);
  let currentId = load(KEYS.current, null);
  let settings = Object.assign({ thinking: true }, load(KEYS.settings, {}));
  let apiKey = load(KEYS.key, '');
  let server = null;        // /health
  let running = null;       // {controller, conv, msg} while a stream runs

  const uid = () => Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
  const current = () => convs.find((c) => c.id === currentId);
  const persist = () => { save(KEYS.convs, convs); save(KEYS.current, currentId); };

  function newConversation() {
    const c = { id: uid(), title: 'New chat', created: Date.now(), messages: [] };
    convs.unshift(c);
    currentId = c.id;
    persist();
    return c;
  }

  function headers() {
    const h = { 'Content-Type': 'application/json' };
    if (apiKey) h.Authorization = `Bearer ${apiKey}`;
    return h;
  }

  function banner(text) {
    const b = $('banner');
    b.textContent = text || '';
    b.hidden = !text;
  }

  // ---- server info and API key ----
  async function connect() {
    let r;
    try {
      r = await fetch('/health', { headers: headers() });
    } catch {
      $('model-line').textContent = 'server unreachable';
      banner('Cannot reach the server: is `mtplx serve` still running?');
      return;
    }
    if (r.status === 401) { askKey(); return; }
    if (!r.ok) { banner(`The server answered ${r.status} to /health.`); return; }
    server = await r.json();
    banner('');
    $('model-line').textContent = `${server.model} · ${server.tier} · ctx ${server.context} · depth ${server.depth}`;
    const rows = [['name', server.model], ['family', server.family || 'unknown'], ['tier', server.tier],
      ['context', `${server.context} tokens`],
      ['MTP depth', `${server.depth} (max ${server.max_depth})`], ['API key', server.api_key_required ? 'required' : 'not required']];
    const info = $('model-info');
    info.textContent = '';
    for (const [k, v] of rows) {
      const d = document.createElement('div');
      const a = document.createElement('span'); a.textContent = k;
      const b = document.createElement('span'); b.textContent = v;
      d.append(a, b);
      info.append(d);
    }
    $('s-depth').max = server.max_depth;
  }

  function askKey() {
    $('model-line').textContent = 'API key needed';
    const d = $('key-dialog');
    $('key-input').value = apiKey || '';
    if (!d.open) d.showModal();
  }

  // ---- settings ----
  function loadSettingsForm() {
    for (const f of SETTING_FIELDS) $(`s-${f}`).value = settings[f] ?? '';
    $('s-thinking').checked = settings.thinking !== false;
    $('s-apikey').value = apiKey;
  }
  function readSettingsForm() {
    for (const f of SETTING_FIELDS) settings[f] = $(`s-${f}`).value;
    settings.thinking = $('s-thinking').checked;
    save(KEYS.settings, settings);
  }

  // The request body for conversation c from the settings (blank fields are left to the server).
  function buildRequest(c) {
    const msgs = [];
    if (settings.system && settings.system.trim()) msgs.push({ role: 'system', content: settings.system });
    for (const m of c.messages) {
      if (m.role === 'user') msgs.push({ role: 'user', content: m.content });
      else if (m.role === 'tool') msgs.push({ role: 'tool', tool_call_id: m.tool_call_id, content: m.content });
      else if (m.role === 'assistant') {
        if (m.cancelled && !m.content && !(m.tool_calls || []).length) continue;
        const a = { role: 'assistant', content: m.content || '' };
        if (m.tool_calls && m.tool_calls.length)
          a.tool_calls = m.tool_calls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
        msgs.push(a);
      }
    }
    const body = { model: server ? server.model : 'mtplx', messages: msgs, stream: true, stream_options: { include_usage: true } };
    const num = (k, int) => {
      const v = settings[k];
      if (v === undefined || v === null || String(v).trim() === '') return;
      const n = int ? parseInt(v, 10) : parseFloat(v);
      if (!Number.isNaN(n)) body[k] = n;
    };
    num('temperature'); num('top_p'); num('top_k', true); num('max_tokens', true); num('seed', true);
    const depth = String(settings.depth ?? '').trim();
    if (depth !== '') body.mtplx = { depth: parseInt(depth, 10) };
    body.chat_template_kwargs = { enable_thinking: settings.thinking !== false };
    const tools = String(settings.tools || '').trim();
    if (tools) {
      try { body.tools = JSON.parse(tools); } catch (e) { throw new Error(`The tools setting is not valid JSON: ${e.message}`); }
    }
    return body;
  }

  // ---- rendering ----
  function renderSidebar() {
    const ul = $('conversations');
    ul.textContent = '';
    for (const c of convs) {
      const li = document.createElement('li');
      if (c.id === currentId) li.className = 'current';
      const open = document.createElement('button');
      open.type = 'button'; open.className = 'open'; open.textContent = c.title; open.title = c.title;
      open.onclick = () => { if (running) return; currentId = c.id; persist(); renderAll(); document.body.classList.remove('show-sidebar'); };
      const del = document.createElement('button');
      del.type = 'button'; del.className = 'del'; del.textContent = '×'; del.setAttribute('aria-label', `Delete ${c.title}`);
      del.onclick = () => {
        if (running && running.conv === c) return;
        convs = convs.filter((x) => x !== c);
        if (currentId === c.id) currentId = convs.length ? convs[0].id : null;
        persist(); renderAll();
      };
      li.append(open, del);
      ul.append(li);
    }
  }

  function fmtStats(s) {
    if (!s) return '';
    const parts = [];
    if (s.completion_tokens !== undefined) parts.push(`${s.completion_tokens} tokens`);
    if (s.ttft_ms !== undefined) parts.push(`TTFT ${Math.round(s.ttft_ms)} ms`);
    if (s.decode_tok_s) parts.push(`${s.decode_tok_s.toFixed(1)} tok/s`);
    if (s.depth > 0) {
      parts.push(`depth ${s.depth}`);
      parts.push(`acceptance ${(100 * (s.acceptance_rate || 0)).toFixed(0)}%`);
      parts.push(`${(s.tokens_per_verify || 0).toFixed(2)} tok/verify`);
    }
    if (s.finish) parts.push(s.finish);
    return parts.join(' · ');
  }

  function copyText(text, btn) {
    const done = () => { const t = btn.textContent; btn.textContent = 'Copied'; setTimeout(() => { btn.textContent = t; }, 1200); };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, () => {});
    else {
      const ta = document.createElement('textarea');
      ta.value = text; document.body.append(ta); ta.select();
      try { document.execCommand('copy'); done(); } catch { /* nothing */ }
      ta.remove();
    }
  }

  function toolButton(label, fn, cls) {
    const b = document.createElement('button');
    b.type = 'button'; b.textContent = label; b.onclick = fn;
    if (cls) b.className = cls;
    return b;
  }

  function renderToolCard(c, m, t) {
    const card = document.createElement('div');
    card.className = 'tool-card';
    card.dataset.name = t.name;
    const head = document.createElement('div');
    head.className = 'head';
    head.innerHTML = `Tool call <b>${md.escape(t.name)}</b>`;
    const args = document.createElement('pre');
    args.className = 'args';
    try { args.textContent = JSON.stringify(JSON.parse(t.arguments), null, 2); } catch { args.textContent = t.arguments; }
    card.append(head, args);
    const res = c.messages.find((x) => x.role === 'tool' && x.tool_call_id === t.id);
    const row = document.createElement('div');
    row.className = 'result';
    if (res) {
      const pre = document.createElement('pre');
      pre.className = 'result-text';
      pre.textContent = res.content;
      row.append(document.createTextNode('Result:'), pre);
    } else {
      const ta = document.createElement('textarea');
      ta.placeholder = `Result of ${t.name} (you run the tool)`;
      ta.setAttribute('aria-label', `Result of ${t.name}`);
      row.append(ta, toolButton('Send result', () => {
        if (running) return;
        c.messages.push({ role: 'tool', tool_call_id: t.id, content: ta.value });
        persist();
        const pending = (m.tool_calls || []).some((x) => !c.messages.find((y) => y.role === 'tool' && y.tool_call_id === x.id));
        if (pending) renderAll(); else generate(c);
      }));
    }
    card.append(row);
    return card;
  }

  // One message's DOM node (re-created when the message changes).
  function renderMessage(c, m, idx) {
    const div = document.createElement('div');
    div.className = `msg ${m.role}`;
    div.dataset.index = idx;
    if (m.role === 'tool') { div.hidden = true; return div; }
    const who = document.createElement('div');
    who.className = 'who';
    who.textContent = m.role === 'user' ? 'You' : 'Assistant';
    div.append(who);
    if (m.reasoning) {
      const d = document.createElement('details');
      d.className = 'thinking';
      d.open = !!m.streaming && !m.content;
      const s = document.createElement('summary');
      s.textContent = m.streaming && !m.content ? 'Thinking…' : 'Thinking';
      const t = document.createElement('div');
      t.className = 'text';
      t.textContent = m.reasoning;
      d.append(s, t);
      div.append(d);
    }
    const body = document.createElement('div');
    body.className = 'body';
    if (m.role === 'user') body.textContent = m.content;
    else body.innerHTML = md.render(m.content || '');
    div.append(body);
    for (const t of m.tool_calls || []) div.append(renderToolCard(c, m, t));
    if (m.error) {
      const e = document.createElement('div');
      e.className = 'error'; e.setAttribute('role', 'alert'); e.textContent = m.error;
      div.append(e);
    }
    if (m.cancelled) {
      const e = document.createElement('div');
      e.className = 'cancelled'; e.textContent = 'Stopped.';
      div.append(e);
    }
    if (m.stats) {
      const s = document.createElement('div');
      s.className = 'stats'; s.textContent = fmtStats(m.stats);
      div.append(s);
    }
    if (!m.streaming) {
      const tools = document.createElement('div');
      tools.className = 'tools';
      tools.append(toolButton('Copy', (ev) => copyText(m.content || '', ev.target), 'copy-msg'));
      if (m.role === 'user') tools.append(toolButton('Edit', () => editMessage(c, idx), 'edit'));
      if (m.role === 'assistant' && idx === c.messages.length - 1) tools.append(toolButton('Regenerate', () => regenerate(c), 'regenerate'));
      div.append(tools);
    }
    div.querySelectorAll('button.copy-code').forEach((b) => {
      b.onclick = () => copyText(b.closest('.code').querySelector('code').textContent, b);
    });
    return div;
  }

  function renderMessages() {
    const box = $('messages');
    box.textContent = '';
    const c = current();
    if (!c || !c.messages.length) {
      const e = document.createElement('div');
      e.className = 'empty';
      e.textContent = 'Ask the model something. Conversations stay in this browser.';
      box.append(e);
      return;
    }
    c.messages.forEach((m, i) => box.append(renderMessage(c, m, i)));
    box.scrollTop = box.scrollHeight;
  }

  function renderAll() { renderSidebar(); renderMessages(); setRunning(!!running); }

  let pendingFrame = 0;
  function updateStreaming() {
    if (pendingFrame) return;
    pendingFrame = requestAnimationFrame(() => {
      pendingFrame = 0;
      if (!running || running.conv !== current()) return;
      const box = $('messages');
      const idx = running.conv.messages.indexOf(running.msg);
      const old = box.querySelector(`.msg[data-index="${idx}"]`);
      const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
      const node = renderMessage(running.conv, running.msg, idx);
      if (old) old.replaceWith(node); else box.append(node);
      if (stick) box.scrollTop = box.scrollHeight;
    });
  }

  function setRunning(on) {
    $('send').hidden = on;
    $('stop').hidden = !on;
  }

  // ---- errors ----
  function errorText(status, body) {
    const e = body && body.error ? body.error : {};
    const msg = e.message || (typeof body === 'string' ? body : '');
    if (status === 401) return 'The server needs an API key (Settings → API key).';
    if (status === 429) return 'The server is busy: its request queue is full. Try again in a moment.';
    if (e.code === 'context_length_exceeded')
      return `The conversation no longer fits the model's context: ${msg} Start a new chat or edit an earlier message.`;
    if (status === 503) return `The server is overloaded or stopping: ${msg}`;
    return `Error ${status}: ${msg || 'no details'}`;
  }

  // ---- generation ----
  // Parse an SSE body into `data:` payloads.
  async function* sseData(resp) {
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = ev.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
        if (data) yield data;
      }
    }
  }

  async function generate(c) {
    if (running) return;
    readSettingsForm();
    let body;
    const m = { role: 'assistant', content: '', reasoning: '', tool_calls: [], streaming: true };
    try { body = buildRequest(c); } catch (e) { banner(e.message); return; }
    banner('');
    c.messages.push(m);
    const controller = new AbortController();
    running = { controller, conv: c, msg: m };
    setRunning(true);
    renderMessages();
    const t0 = performance.now();
    let ttft;
    const calls = new Map();
    try {
      const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(), body: JSON.stringify(body), signal: controller.signal });
      if (!r.ok) {
        let eb = null;
        try { eb = await r.json(); } catch { /* not JSON */ }
        m.error = errorText(r.status, eb);
        if (r.status === 401) askKey();
      } else {
        for await (const data of sseData(r)) {
          if (data === '[DONE]') break;
          let ch;
          try { ch = JSON.parse(data); } catch { continue; }
          if (ch.usage) { m.stats = Object.assign(m.stats || {}, { completion_tokens: ch.usage.completion_tokens, prompt_tokens: ch.usage.prompt_tokens }); }
          if (ch.error) m.error = `The generation failed: ${ch.error.message}`;
          const choice = ch.choices && ch.choices[0];
          if (!choice) continue;
          const d = choice.delta || {};
          if ((d.content || d.reasoning_content || d.tool_calls) && ttft === undefined) ttft = performance.now() - t0;
          if (d.reasoning_content) m.reasoning += d.reasoning_content;
          if (d.content) m.content += d.content;
          for (const tc of d.tool_calls || []) {
            let t = calls.get(tc.index);
            if (!t) { t = { id: tc.id, name: '', arguments: '' }; calls.set(tc.index, t); m.tool_calls.push(t); }
            if (tc.id) t.id = tc.id;
            if (tc.function && tc.function.name) t.name += tc.function.name;
            if (tc.function && tc.function.arguments) t.arguments += tc.function.arguments;
          }
          if (choice.finish_reason) {
            m.stats = Object.assign(m.stats || {}, ch.mtplx || {}, { finish: choice.finish_reason });
          }
          updateStreaming();
        }
      }
    } catch (e) {
      if (controller.signal.aborted) m.cancelled = true;
      else m.error = `Cannot reach the server (${e.message}): is \`mtplx serve\` still running?`;
    }
    if (ttft !== undefined) m.stats = Object.assign(m.stats || {}, { ttft_ms: ttft });
    if (m.stats && m.stats.finish === 'error' && !m.error) m.error = 'The generation failed on the server.';
    delete m.streaming;
    if (!m.tool_calls.length) delete m.tool_calls;
    if (!m.reasoning) delete m.reasoning;
    if (m.error && !m.content && !m.reasoning && !m.tool_calls) m.content = '';
    running = null;
    persist();
    renderAll();
    if (current() === c) $('input').focus();
  }

  function stop() { if (running) running.controller.abort(); }

  function send(text) {
    if (running || !text.trim()) return;
    let c = current();
    if (!c) c = newConversation();
    c.messages.push({ role: 'user', content: text });
    if (c.title === 'New chat') c.title = text.trim().split('\n')[0].slice(0, 60);
    persist();
    renderSidebar();
    generate(c);
  }

  function regenerate(c) {
    if (running) return;
    while (c.messages.length && c.messages[c.messages.length - 1].role !== 'user' && c.messages[c.messages.length - 1].role !== 'tool')
      c.messages.pop();
    persist();
    generate(c);
  }

  function editMessage(c, idx) {
    if (running) return;
    const text = c.messages[idx].content;
    c.messages.splice(idx);
    persist();
    renderAll();
    $('input').value = text;
    $('input').focus();
  }

  // ---- wiring ----
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); const t = $('input').value; if (!running && t.trim()) { $('input').value = ''; send(t); } });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); $('composer').requestSubmit(); }
  });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && running) { e.preventDefault(); stop(); } });
  $('stop').onclick = stop;
  $('new-chat').onclick = () => { if (running) return; newConversation(); renderAll(); $('input').focus(); };
  $('toggle-sidebar').onclick = () => document.body.classList.toggle('show-sidebar');
  $('toggle-settings').onclick = () => {
    const s = $('settings');
    s.hidden = !s.hidden;
    $('toggle-settings').setAttribute('aria-expanded', String(!s.hidden));
  };
  for (const f of SETTING_FIELDS) $(`s-${f}`).addEventListener('change', readSettingsForm);
  $('s-thinking').addEventListener('change', readSettingsForm);
  $('example-tools').onclick = () => { $('s-tools').value = JSON.stringify(EXAMPLE_TOOLS, null, 1); readSettingsForm(); };
  $('s-apikey').addEventListener('change', () => { apiKey = $('s-apikey').value.trim(); save(KEYS.key, apiKey); connect(); });
  $('key-form').addEventListener('submit', () => {
    apiKey = $('key-input').value.trim();
    save(KEYS.key, apiKey);
    $('s-apikey').value = apiKey;
    setTimeout(connect, 0);
  });
  window.addEventListener('beforeunload', persist);

  loadSettingsForm();
  for (const c of convs) for (const m of c.messages) if (m.streaming) { delete m.streaming; m.cancelled = true; } // page left mid-answer
  if (!current()) currentId = convs.length ? convs[0].id : null;
  renderAll();
  connect();
  window.mtplxChat = { stop, send, get running() { return !!running; } };
})();
