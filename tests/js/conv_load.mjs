// conv_load.mjs — concurrent multi-turn conversations through the prefix cache under page pressure,
// the way coding agents load a server: every conversation starts with the same long system prompt,
// each turn's prompt is the previous turn's prompt + reply + a new user message, and many run at
// once, so requests restore cached prefixes (leases), store checkpoints and have the cache's pages
// reclaimed all the time. Some turns are cancelled mid-stream or hung up on (the conversation then
// ends there). Afterwards every completed conversation is replayed turn by turn on a cold server
// (--cache-ram 0, one request at a time) and every reply must equal the cold one byte for byte; the
// hot server must end idle with only the cache's pages held and report cached tokens.
//
// Usage: node tests/js/conv_load.mjs HOT_URL COLD_URL [SECONDS=20] [CLIENTS=12]
// Exit status 0 when every check holds; prints a summary either way.
import { sseEvents } from './lib.mjs';

const [hot, cold] = process.argv.slice(2, 4);
const seconds = Number(process.argv[4] || 20);
const clients = Number(process.argv[5] || 12);
const headers = { 'content-type': 'application/json' };
let rng = 20261206;
const rand = () => ((rng = (rng * 1103515245 + 12345) >>> 0) / 2 ** 32);

const SYSTEM = 'You are a coding agent working in a repository. Read files before you edit them, keep ' +
               'changes small, explain each step in one line and show code in fenced blocks. ' +
               'Tools: read(path), write(path, text), run(cmd). '.repeat(6);
const ASKS = ['Open src/main.c and tell me what it does.', 'Add a --verbose flag.', 'Now write a test for it.',
              'Run the tests.', 'Fix the failing assertion.', 'Summarise the change in one sentence.',
              'Rename the function parse_args to args_parse.', 'What does the Makefile build?'];

// One turn on base: returns { text } or null when cancelled / hung up (mode 'cancel' | 'hangup').
async function turn(base, conv, messages, mode) {
  const ac = new AbortController();
  const stream = mode !== 'full' || conv.stream;
  const body = { model: 'm', messages, max_tokens: conv.max_tokens, temperature: conv.temperature,
                 seed: conv.seed, mtplx: { depth: conv.depth }, stream,
                 chat_template_kwargs: { enable_thinking: false } };
  try {
    const r = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body),
                                                           signal: ac.signal });
    if (mode === 'hangup') { ac.abort(); return null; }
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
    if (!stream) {
      const j = await r.json();
      return { text: j.choices[0].message.content ?? '', cached: j.usage?.prompt_tokens_details?.cached_tokens ?? 0 };
    }
    let text = '', chunks = 0;
    for await (const j of sseEvents(r.body)) {
      text += j.choices?.[0]?.delta?.content ?? '';
      if (mode === 'cancel' && ++chunks >= 2) { ac.abort(); return null; }
    }
    return { text, cached: 0 };
  } catch (e) {
    if (e.name === 'AbortError' || ac.signal.aborted) return null;
    throw e;
  }
}

const done = []; // completed conversations: { conv, users: [..], replies: [..] }
const counts = { turns: 0, cancelled: 0, errors: 0, cached: 0 };
const deadline = Date.now() + seconds * 1000;
let next_id = 0;
async function client() {
  while (Date.now() < deadline) {
    const id = next_id++;
    const conv = { id, depth: id % 4, temperature: id % 3 ? 0 : 0.7, seed: 500 + id, stream: rand() < 0.6,
                   max_tokens: 8 + Math.floor(rand() * 24) };
    const messages = [{ role: 'system', content: SYSTEM }];
    const users = [], replies = [];
    const n = 2 + Math.floor(rand() * 3);
    for (let t = 0; t < n && Date.now() < deadline; t++) {
      const u = t ? ASKS[Math.floor(rand() * ASKS.length)] : `Task ${id}: ${ASKS[Math.floor(rand() * ASKS.length)]}`;
      messages.push({ role: 'user', content: u });
      const x = rand(), mode = x < 0.85 ? 'full' : x < 0.93 ? 'cancel' : 'hangup';
      let r;
      try {
        r = await turn(hot, conv, messages, mode);
      } catch (e) {
        counts.errors++;
        console.error(`conversation ${id} turn ${t + 1}: ${e.message}`);
        break;
      }
      if (!r) { counts.cancelled++; break; }
      counts.turns++;
      if (t > 0 && r.cached > 0) counts.cached++;
      users.push(u);
      replies.push(r.text);
      messages.push({ role: 'assistant', content: r.text });
    }
    if (replies.length) done.push({ conv, users, replies });
  }
}
await Promise.all(Array.from({ length: clients }, client));

// the cold replay: the same messages turn by turn, one request at a time
let bad = counts.errors > 0, differ = 0, compared = 0;
for (const { conv, users, replies } of done) {
  const messages = [{ role: 'system', content: SYSTEM }];
  for (let t = 0; t < users.length; t++) {
    messages.push({ role: 'user', content: users[t] });
    const r = await turn(cold, { ...conv, stream: false }, messages, 'full');
    compared++;
    if (r.text !== replies[t]) {
      bad = true;
      if (differ++ < 5)
        console.error(`conversation ${conv.id} (depth ${conv.depth}, T ${conv.temperature}) turn ${t + 1} differs from cold:\n` +
                      `  hot:  ${JSON.stringify(replies[t])}\n  cold: ${JSON.stringify(r.text)}`);
    }
    messages.push({ role: 'assistant', content: replies[t] });
  }
}

const metric = (m, n) => Number((m.match(new RegExp(`^${n} (\\S+)`, 'm')) || [])[1]);
let m = '';
for (let i = 0; i < 100; i++) { // cancelled generations end at their next cycle
  m = await (await fetch(`${hot}/metrics`)).text();
  if (metric(m, 'mtplx_sequences_running') === 0 && metric(m, 'mtplx_sequences_waiting') === 0 &&
      metric(m, 'mtplx_kv_pages_used') === (metric(m, 'mtplx_prefix_cache_kv_pages_held') || 0)) break;
  await new Promise((r) => setTimeout(r, 100));
}
const idle = metric(m, 'mtplx_sequences_running') === 0 &&
             metric(m, 'mtplx_kv_pages_used') === (metric(m, 'mtplx_prefix_cache_kv_pages_held') || 0);
if (!idle) { bad = true; console.error('after the load the hot server is not idle:\n' + m.split('\n').filter((l) => /^mtplx_(seq|kv|prefix_cache_kv)/.test(l)).join('\n')); }
const evicted = metric(m, 'mtplx_prefix_cache_evictions_total');
const reused = metric(m, 'mtplx_prefix_cache_cached_tokens_total'); // streamed turns too
if (!(reused > 0)) { bad = true; console.error('the hot server reused no cached tokens: the load did not exercise the cache'); }
console.log(`conversation load: ${clients} clients ${seconds}s: ${done.length} conversations, ${counts.turns} turns ` +
            `(${counts.cached} later non-streamed turns reported cached tokens; ${reused} tokens reused in all), ${counts.cancelled} cancelled or hung up, ` +
            `${counts.errors} errors; ${compared} replies equal cold: ${!differ}; cache evictions ${evicted}, ` +
            `KV pages used ${metric(m, 'mtplx_kv_pages_used')} of ${metric(m, 'mtplx_kv_pages_used') + metric(m, 'mtplx_kv_pages_free')}`);
process.exit(bad ? 1 : 0);
