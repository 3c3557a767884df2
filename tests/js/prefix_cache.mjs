// prefix_cache.mjs — the prefix cache through the server (docs/prefix-cache.md). Usage:
//   node prefix_cache.mjs CACHED_URL COLD_URL
// A 3-turn chat (system prompt, user turns, the model's replies fed back as the next turn's history)
// at depth 0 and 3, greedy and seeded, on both servers: every reply of the cached server equals the
// cold server's (--cache-ram 0); from the second turn on, the cached server reports most of the
// prompt as cached (OpenAI usage.prompt_tokens_details.cached_tokens, Anthropic
// usage.cache_read_input_tokens) and the cold one none; /metrics counts the reuse.
import assert from 'node:assert/strict';

const [hot, cold] = process.argv.slice(2);
const SYSTEM = 'You are a careful coding assistant. ' + 'Answer briefly and show code when asked. '.repeat(12);
const USERS = ['Write a Python function that reverses a list.', 'Now make it work for strings too.',
               'Add a docstring.'];

async function post(base, path, body) {
  const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                             body: JSON.stringify(body) });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j;
}

// Each configuration's conversation is its own (the run tag in its first user turn): with 16-token
// replies the model often answers with reasoning only, so without the tag every configuration's turn
// 3 prompt was the same text, and the cold server's per-slot exact-prompt cache (identical prompts
// restore the slot's last prefill, backend_model.c) legitimately reused it whenever the same slot
// served both — a reuse this test reads as a cold server using a prefix cache.
async function chat(base, depth, temperature, seed) {
  const messages = [{ role: 'system', content: SYSTEM }];
  const out = [];
  for (const [i, u0] of USERS.entries()) {
    const u = i === 0 ? `${u0} (run ${depth}/${temperature}/${seed})` : u0;
    messages.push({ role: 'user', content: u });
    const r = await post(base, '/v1/chat/completions', { model: 'm', messages, max_tokens: 16, temperature, seed,
                                                          mtplx: { depth } });
    const m = r.choices[0].message;
    out.push({ text: m.content, reasoning: m.reasoning_content ?? '', usage: r.usage });
    messages.push({ role: 'assistant', content: m.content });
  }
  return out;
}

let fail = 0;
for (const [depth, temperature, seed] of [[0, 0, 1], [3, 0, 2], [3, 0.8, 3], [0, 0.8, 4]]) {
  const a = await chat(hot, depth, temperature, seed);
  const b = await chat(cold, depth, temperature, seed);
  for (let t = 0; t < a.length; t++) {
    const tag = `depth ${depth} T ${temperature} turn ${t + 1}`;
    try {
      assert.equal(a[t].text, b[t].text, `${tag}: cached reply differs from cold`);
      assert.equal(a[t].reasoning, b[t].reasoning, `${tag}: cached reasoning differs from cold`);
      assert.equal(b[t].usage.prompt_tokens_details.cached_tokens, 0, `${tag}: the cold server reused tokens`);
      const u = a[t].usage;
      if (t > 0) assert.ok(u.prompt_tokens_details.cached_tokens >= 0.6 * u.prompt_tokens,
                           `${tag}: only ${u.prompt_tokens_details.cached_tokens} of ${u.prompt_tokens} prompt tokens cached`);
      assert.ok(u.prompt_tokens_details.cached_tokens < u.prompt_tokens, `${tag}: the whole prompt reported cached`);
    } catch (e) { console.log(`FAIL ${e.message}`); fail = 1; }
  }
}

// Anthropic: the same system prompt again is read from the cache; input_tokens are the rest
const am = { model: 'm', max_tokens: 8, temperature: 0, system: SYSTEM, messages: [{ role: 'user', content: USERS[0] }] };
await post(hot, '/v1/messages', am);
const r2 = await post(hot, '/v1/messages', am);
try {
  assert.ok(r2.usage.cache_read_input_tokens > 50, `anthropic: cache_read_input_tokens ${r2.usage.cache_read_input_tokens}`);
  assert.ok(r2.usage.input_tokens >= 1, 'anthropic: input_tokens must count the uncached tail');
} catch (e) { console.log(`FAIL ${e.message}`); fail = 1; }

const m = await (await fetch(`${hot}/metrics`)).text();
const v = (k) => Number((m.match(new RegExp(`^${k} (\\S+)$`, 'm')) || [])[1]);
try {
  assert.ok(v('mtplx_prefix_cache_cached_tokens_total') > 0, 'metrics: no cached tokens counted');
  assert.ok(v('mtplx_prefix_cache_hit_rate') > 0.5, `metrics: hit rate ${v('mtplx_prefix_cache_hit_rate')}`);
  assert.ok(v('mtplx_prefix_cache_entries') > 0, 'metrics: no entries');
} catch (e) { console.log(`FAIL ${e.message}`); fail = 1; }
const mc = await (await fetch(`${cold}/metrics`)).text();
if (/mtplx_prefix_cache_/.test(mc)) { console.log('FAIL the cold server (--cache-ram 0) reports a prefix cache'); fail = 1; }
console.log(fail ? 'prefix cache: FAILED' : 'prefix cache: all passed');
process.exit(fail);
