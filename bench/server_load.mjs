// server_load.mjs — load figures for `mtplx serve`: HTTP overhead (GET /health round trips),
// time to first streamed token, and N concurrent streaming completions through the one worker.
// Usage: node bench/server_load.mjs BASE_URL [N]   (run from the repo root; needs tests/js deps)
import OpenAI from '../tests/js/node_modules/openai/index.mjs';

const base = process.argv[2];
const N = Number(process.argv[3] || 50);
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'x', maxRetries: 0 });
const ms = (t) => Number(t) / 1e6;
const pct = (a, p) => a.slice().sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];

// 1. HTTP round trips
const hs = [];
for (let i = 0; i < 200; i++) {
  const t0 = process.hrtime.bigint();
  await (await fetch(`${base}/health`)).json();
  hs.push(ms(process.hrtime.bigint() - t0));
}

// 2. time to first token and decode rate of one streamed chat completion
const req = { model: 'm', temperature: 0, max_tokens: 64, stream: true, chat_template_kwargs: { enable_thinking: false },
              messages: [{ role: 'user', content: 'Continue this Python code:\n```python\nimport os\n```' }] };
const ttft = [], total = [];
for (let k = 0; k < 5; k++) {
  const t0 = process.hrtime.bigint();
  let first = 0;
  for await (const c of await openai.chat.completions.create(req)) if (!first && c.choices[0]?.delta?.content) first = ms(process.hrtime.bigint() - t0);
  ttft.push(first);
  total.push(ms(process.hrtime.bigint() - t0));
}

// 3. N concurrent streams of 16 tokens each
const t0 = process.hrtime.bigint();
const ends = await Promise.all(Array.from({ length: N }, async () => {
  let toks = 0;
  for await (const c of await openai.completions.create({ model: 'm', prompt: 'def', max_tokens: 16, temperature: 0, stream: true })) toks += c.choices[0]?.text ? 1 : 0;
  return ms(process.hrtime.bigint() - t0);
}));
const wall = ms(process.hrtime.bigint() - t0);
console.log(JSON.stringify({
  health_roundtrip_ms: { p50: pct(hs, 0.5), p99: pct(hs, 0.99) },
  chat_stream_64tok: { ttft_ms_p50: pct(ttft, 0.5), total_ms_p50: pct(total, 0.5) },
  concurrent: { clients: N, tokens_each: 16, wall_s: wall / 1000, completion_tok_s: (N * 16) / (wall / 1000),
                first_done_s: Math.min(...ends) / 1000, last_done_s: Math.max(...ends) / 1000 },
}, (k, v) => (typeof v === 'number' ? Math.round(v * 100) / 100 : v), 1));
