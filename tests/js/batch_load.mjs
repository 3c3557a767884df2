// batch_load.mjs — continuous batching under load: CLIENTS concurrent clients for SECONDS send a mix
// of streaming and non-streaming completions and chat requests (greedy and seeded sampling, MTP
// depths 0..4), cancel some mid-stream and hang up on others, so requests join and leave the
// running batch all the time. Then every request kind that completed is run again alone, and every
// completed answer must equal its solo answer byte for byte; at the end no sequence runs, none
// waits and every KV page is free (/metrics).
//
// Usage: node tests/js/batch_load.mjs BASE_URL [SECONDS=20] [CLIENTS=32]
// Exit status 0 when every check holds; prints a summary either way.
import { sseEvents } from './lib.mjs';

const base = process.argv[2];
const seconds = Number(process.argv[3] || 20);
const clients = Number(process.argv[4] || 32);
const headers = { 'content-type': 'application/json' };
let rng = 20261201;
const rand = () => ((rng = (rng * 1103515245 + 12345) >>> 0) / 2 ** 32);

const snippets = ['def fib(n):\n    ', 'int main(void) {\n    ', 'class Stack:\n    def __init__(self):\n',
                  'for (int i = 0; i < n; i++)', 'import os\nimport sys\n\n', '#include <stdio.h>\n\nstatic int',
                  'SELECT name FROM users WHERE', 'function add(a, b) {\n  return'];
// request kinds: prompt, API, sampling, depth, length
const kinds = [];
for (let k = 0; k < 12; k++)
  kinds.push({ k, text: snippets[k % snippets.length], chat: k % 3 === 2, temperature: k % 2 ? 0.7 : 0,
               seed: 100 + k, depth: k % 5, max_tokens: 12 + ((k * 7) % 30) });

function body(kind, stream) {
  const b = { model: 'm', max_tokens: kind.max_tokens, temperature: kind.temperature, seed: kind.seed,
              mtplx: { depth: kind.depth }, stream };
  if (kind.chat) {
    b.messages = [{ role: 'user', content: kind.text }];
    b.chat_template_kwargs = { enable_thinking: false };
  } else b.prompt = kind.text;
  return b;
}
const url = (kind) => `${base}/v1/${kind.chat ? 'chat/completions' : 'completions'}`;
const piece = (kind, c) => (kind.chat ? (c.delta?.content ?? c.message?.content ?? '') : (c.text ?? ''));

// One request. mode: 'full' | 'cancel' (abort after a few chunks) | 'hangup' (abort at once).
// Returns the text when it completed, else null.
async function one(kind, mode, stream) {
  const ac = new AbortController();
  try {
    const r = await fetch(url(kind), { method: 'POST', headers, body: JSON.stringify(body(kind, stream)), signal: ac.signal });
    if (mode === 'hangup') { ac.abort(); return null; }
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
    if (!stream) return piece(kind, (await r.json()).choices[0]);
    let text = '', chunks = 0;
    for await (const j of sseEvents(r.body)) {
      if (j.choices?.[0]) text += piece(kind, j.choices[0]);
      if (mode === 'cancel' && ++chunks >= 2) { ac.abort(); return null; }
    }
    return text;
  } catch (e) {
    if (e.name === 'AbortError' || ac.signal.aborted) return null;
    throw e;
  }
}

const got = new Map(); // kind -> [texts]
const counts = { full: 0, cancel: 0, hangup: 0, errors: 0 };
const deadline = Date.now() + seconds * 1000;
async function client() {
  while (Date.now() < deadline) {
    const kind = kinds[Math.floor(rand() * kinds.length)];
    const x = rand(), mode = x < 0.7 ? 'full' : x < 0.85 ? 'cancel' : 'hangup', stream = mode !== 'full' || rand() < 0.7;
    try {
      const t = await one(kind, mode, stream);
      counts[mode]++;
      if (t !== null) {
        if (!got.has(kind.k)) got.set(kind.k, []);
        got.get(kind.k).push(t);
      }
    } catch (e) {
      counts.errors++;
      console.error(`client error (${mode}): ${e.message}`);
    }
  }
}
await Promise.all(Array.from({ length: clients }, client));

let bad = counts.errors > 0;
let compared = 0, differ = 0;
for (const [k, texts] of got) { // each kind alone, then every completed answer against it
  const solo = await one(kinds[k], 'full', false);
  for (const t of texts) {
    compared++;
    if (t !== solo) {
      bad = true;
      differ++;
      console.error(`kind ${k} (depth ${kinds[k].depth}, T ${kinds[k].temperature}): a batched answer differs from solo:\n` +
                    `  batched: ${JSON.stringify(t)}\n  solo:    ${JSON.stringify(solo)}`);
    }
  }
}
let m = '';
for (let i = 0; i < 100; i++) { // cancelled generations end at their next cycle
  m = await (await fetch(`${base}/metrics`)).text();
  const v = (n) => Number((m.match(new RegExp(`^${n} (\\S+)`, 'm')) || [])[1]);
  // idle: the only pages held are the prefix cache's checkpoints (docs/prefix-cache.md)
  if (v('mtplx_sequences_running') === 0 && v('mtplx_kv_pages_used') === (v('mtplx_prefix_cache_kv_pages_held') || 0) &&
      v('mtplx_sequences_waiting') === 0 &&
      v('mtplx_queue_running') === 0) break;
  await new Promise((r) => setTimeout(r, 100));
}
const v = (n) => Number((m.match(new RegExp(`^${n} (\\S+)`, 'm')) || [])[1]);
const idle = v('mtplx_sequences_running') === 0 && v('mtplx_queue_running') === 0 &&
             v('mtplx_kv_pages_used') === (v('mtplx_prefix_cache_kv_pages_held') || 0);
if (!idle) { bad = true; console.error('after the load the server is not idle:\n' + m.split('\n').filter((l) => /^mtplx_(seq|kv|queue|prefix_cache_kv)/.test(l)).join('\n')); }
console.log(`batch load: ${clients} clients ${seconds}s: ${counts.full} completed, ${counts.cancel} cancelled mid-stream, ` +
            `${counts.hangup} hung up, ${counts.errors} errors; ${compared} answers of ${got.size} kinds equal solo: ${!differ}; ` +
            `rows per forward ${v('mtplx_rows_per_forward')}, KV pages used ${v('mtplx_kv_pages_used')} of ` +
            `${v('mtplx_kv_pages_used') + v('mtplx_kv_pages_free')}`);
process.exit(bad ? 1 : 0);
