// streams.mjs — aggregate decode speed and latency of N concurrent streams through `mtplx serve`
// (continuous batching, docs/architecture.md "The scheduler"), with the official OpenAI SDK.
//
// Usage (repo root, tests/js deps installed):
//   node bench/streams.mjs BASE_URL [--streams 1,2,4,8,16] [--max-tokens 256] [--depth N]
//                          [--rounds R] [--long-prompt TOKENS] [--closed-loop S [--closed-warmup S]] [--json]
// Each round starts N streaming /v1/completions at once (T 0.6, top_p 0.95, top_k 20, distinct code
// prompts, fixed seeds) and records, per stream, the time to the first token and the gaps between
// streamed chunks (one chunk per committed group of tokens: with MTP several tokens arrive together,
// so a "gap" is the wait between two deliveries). Aggregate tok/s = completion tokens of all streams
// / wall time of the round. With --long-prompt T, one extra request with a T-token prompt joins after
// the others have started, and the longest gap of the other streams while it is read is reported
// next to their median gap (chunked prefill keeps running streams flowing). --closed-loop S measures N
// concurrent streams in steady state instead (as bench/streams.py): N requests kept in flight, the next
// starting as one ends, and the completion tokens that arrive in an S-second window after
// --closed-warmup seconds (default 1) counted; a round's first-token wait and drain tail are not in it.
import OpenAI from '../tests/js/node_modules/openai/index.mjs';
import fs from 'node:fs';

const base = process.argv[2];
const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const counts = arg('--streams', '1,2,4,8,16').split(',').map(Number);
const maxTokens = Number(arg('--max-tokens', 256));
const depth = arg('--depth', null);
const rounds = Number(arg('--rounds', 1));
const longPrompt = Number(arg('--long-prompt', 0));
let longRounds = 0; // rounds that sent a long prompt (its first line)
const asJson = process.argv.includes('--json');
const closedLoop = Number(arg('--closed-loop', 0)), closedWarm = Number(arg('--closed-warmup', 1));
if (closedLoop && longPrompt) throw new Error('--long-prompt measures a round; it does not combine with --closed-loop');
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: process.env.MTPLX_API_KEY || 'x', maxRetries: 0, timeout: 3600e3 });
const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const pct = (a, p) => (a.length ? a.slice().sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))] : NaN);

// distinct code prompts: slices of this repository's C sources
const src = ['src/engine/sched.c', 'src/model/forward.c', 'src/engine/cycle.c', 'src/server/queue.c']
  .map((f) => fs.readFileSync(f, 'utf8')).join('\n');
const prompt = (i) => src.slice((i * 997) % (src.length - 2000), ((i * 997) % (src.length - 2000)) + 600);

async function stream(i, text, seed) {
  const body = { model: 'm', prompt: text, max_tokens: maxTokens, temperature: 0.6, top_p: 0.95, top_k: 20,
                 seed, stream: true, stream_options: { include_usage: true } };
  if (depth !== null) body.mtplx = { depth: Number(depth) };
  const t0 = now();
  let first = 0, last = 0, tokens = 0;
  const arrivals = [];
  for await (const c of await openai.completions.create(body)) {
    const t = now();
    if (c.choices?.[0]?.text) {
      if (!first) first = t;
      arrivals.push(t);
      last = t;
    }
    if (c.usage) tokens = c.usage.completion_tokens;
  }
  // an MTP cycle commits several tokens at once and the server sends one event per token: events
  // less than MERGE_MS apart are one delivery, and the gaps are between deliveries
  const deliveries = arrivals.filter((t, k) => k === 0 || t - arrivals[k - 1] >= MERGE_MS);
  const gaps = deliveries.slice(1).map((t, k) => t - deliveries[k]);
  return { i, t0, ttft: first - t0, end: last || now(), tokens, gaps, arrivals: deliveries, events: arrivals };
}

// One cycle's events leave the server 5-12 us apart (MTPLX_SSE_TRACE); whole cycles take 0.3 ms and
// more (the embedded model's AR step on an H200). The old 1 ms made a GPU stream whose cycles came
// every 0.95 ms look like 24-token bursts with 27 ms gaps (bench/batching.md "Session 20").
const MERGE_MS = 0.2;

async function round(n, r) {
  const t0 = now();
  const jobs = [];
  for (let i = 0; i < n; i++) jobs.push(stream(i, prompt(i + 31 * r), 1000 + i));
  let long = null;
  if (longPrompt) {
    await new Promise((res) => setTimeout(res, 300)); // the others are decoding by now
    // ~4 chars per token of C; a new first line each round, so a prefix cache does not hold the prompt
    const text = `# long prompt ${longRounds++}\n` + src.repeat(4).slice(0, longPrompt * 4);
    long = stream(n, text, 7);
  }
  const res = await Promise.all(jobs);
  const lr = long ? await long : null;
  const wall = Math.max(...res.map((x) => x.end)) - t0;
  const tokens = res.reduce((s, x) => s + x.tokens, 0);
  const firstTok = Math.min(...res.map((x) => x.t0 + x.ttft)), lastEnd = Math.max(...res.map((x) => x.end));
  const out = { streams: n, round: r, wall_s: wall / 1e3, tokens, agg_tok_s: tokens / (wall / 1e3),
                decode_tok_s: tokens / ((lastEnd - firstTok) / 1e3),
                ttft_p50: pct(res.map((x) => x.ttft), 0.5), ttft_p99: pct(res.map((x) => x.ttft), 0.99),
                gap_p50: pct(res.flatMap((x) => x.gaps), 0.5), gap_p99: pct(res.flatMap((x) => x.gaps), 0.99),
                tok_per_chunk: tokens / Math.max(1, res.reduce((s, x) => s + x.arrivals.length, 0)) };
  if (lr) { // the others' gaps that overlap the long prompt's prefill (from its start to its first token)
    const from = lr.t0, to = lr.t0 + lr.ttft;
    const during = [];
    for (const x of res) for (let k = 1; k < x.arrivals.length; k++)
      if (x.arrivals[k] > from && x.arrivals[k - 1] < to) during.push(x.arrivals[k] - x.arrivals[k - 1]);
    out.long_prompt = { ttft_ms: lr.ttft, max_gap_during_ms: during.length ? Math.max(...during) : NaN,
                        gaps_during: during.length, median_gap_ms: out.gap_p50,
                        ratio: (during.length ? Math.max(...during) : NaN) / out.gap_p50 };
  }
  return out;
}

// n streams kept in flight for closedWarm + closedLoop seconds; the window's tokens (each request's usage
// spread over its text events), TTFT of the requests started in it and its delivery gaps
async function closed(n, r) {
  const t0 = now(), lo = t0 + closedWarm * 1e3, hi = lo + closedLoop * 1e3;
  const res = [];
  let count = 0;
  const worker = async () => {
    while (now() < hi) {
      const i = count++;
      res.push(await stream(i, prompt(7919 * r + i), 2000 + i));
    }
  };
  await Promise.all(Array.from({ length: n }, worker));
  const tokens = res.reduce((s, x) => s + (x.events.length ?
    x.tokens / x.events.length * x.events.filter((t) => t >= lo && t < hi).length : 0), 0);
  const inside = res.filter((x) => x.t0 >= lo && x.t0 < hi).map((x) => x.ttft);
  const gaps = res.flatMap((x) => x.gaps.filter((g, k) => x.arrivals[k] >= lo && x.arrivals[k + 1] < hi));
  return { streams: n, round: r, wall_s: closedLoop, tokens: Math.round(tokens), agg_tok_s: tokens / closedLoop,
           decode_tok_s: tokens / closedLoop, ttft_p50: pct(inside, 0.5), ttft_p99: pct(inside, 0.99),
           gap_p50: pct(gaps, 0.5), gap_p99: pct(gaps, 0.99), requests: res.length,
           tok_per_chunk: res.reduce((s, x) => s + x.tokens, 0) / Math.max(1, res.reduce((s, x) => s + x.arrivals.length, 0)) };
}

const rows = [];
for (const n of counts) for (let r = 0; r < rounds; r++) rows.push(await (closedLoop ? closed(n, r) : round(n, r)));
if (asJson) console.log(JSON.stringify(rows));
else {
  console.log('| streams | tokens | wall s | aggregate tok/s | decode tok/s | TTFT p50 / p99 ms | delivery gap p50 / p99 ms | tok per delivery |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const x of rows)
    console.log(`| ${x.streams} | ${x.tokens} | ${x.wall_s.toFixed(2)} | ${x.agg_tok_s.toFixed(1)} | ${x.decode_tok_s.toFixed(1)} | ` +
                `${x.ttft_p50.toFixed(0)} / ${x.ttft_p99.toFixed(0)} | ${x.gap_p50.toFixed(1)} / ${x.gap_p99.toFixed(1)} | ` +
                `${x.tok_per_chunk.toFixed(2)} |` + (x.long_prompt ? ` long prompt: TTFT ${x.long_prompt.ttft_ms.toFixed(0)} ms, ` +
                `max gap during ${x.long_prompt.max_gap_during_ms.toFixed(1)} ms = ${x.long_prompt.ratio.toFixed(2)}x median` : ''));
}
