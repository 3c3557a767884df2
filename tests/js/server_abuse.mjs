// server_abuse.mjs — hostile and heavy use of `mtplx serve` started with --api-key KEY and
// --max-body 1048576 (run against the ASan build). Usage: node server_abuse.mjs BASE_URL KEY
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import { step } from './lib.mjs';

const [base, key] = process.argv.slice(2);
const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 120000 });


async function post(path, body, headers = auth) {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers, body });
  return { status: res.status, headers: res.headers, json: await res.json() };
}

function openaiError(r, status, type) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.type, type);
  assert.equal(typeof r.json.error.message, 'string');
  assert.equal(typeof r.json.error.code, 'string');
}

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`, { headers: auth })).text();
  const m = text.match(new RegExp(`^${name.replace(/[{}"=]/g, (c) => '\\' + c)} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

const tiny = JSON.stringify({ model: 'm', prompt: 'def', max_tokens: 2, temperature: 0 });

await step('missing or wrong API key: 401 in each API shape, SDKs raise AuthenticationError', async () => {
  const r = await post('/v1/completions', tiny, { 'Content-Type': 'application/json' });
  openaiError(r, 401, 'authentication_error');
  assert.equal(r.headers.get('www-authenticate'), 'Bearer');
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: key + 'x', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const badA = new Anthropic({ baseURL: base, apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(badA.messages.create({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.status === 401 && e.error?.type === 'error');
  const ok = await fetch(`${base}/health`, { headers: { 'x-api-key': key } });
  assert.equal(ok.status, 200);
});

await step('malformed JSON, wrong types, bad values: 400 with the field named', async () => {
  openaiError(await post('/v1/chat/completions', '{"messages": [{"role": "user", "content": "x"}'), 400, 'invalid_request_error');
  openaiError(await post('/v1/chat/completions', '"just a string"'), 400, 'invalid_request_error');
  openaiError(await post('/v1/chat/completions', '\xff\xfe{}'), 400, 'invalid_request_error');
  for (const [body, field] of [
    [{ messages: 'hello' }, 'messages'],
    [{ messages: [{ role: 'user', content: 42 }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user', content: 'x' }], temperature: 'hot' }, 'temperature'],
    [{ messages: [{ role: 'user', content: 'x' }], temperature: -1 }, 'temperature'],
    [{ messages: [{ role: 'user', content: 'x' }], max_tokens: 0 }, 'max_tokens'],
    [{ messages: [{ role: 'user', content: 'x' }], max_tokens: 2.5 }, 'max_tokens'],
    [{ messages: [{ role: 'user', content: 'x' }], stop: [1, 2] }, 'stop'],
    [{ messages: [{ role: 'user', content: 'x' }], tools: {} }, 'tools'],
    [{ messages: [{ role: 'user', content: 'x' }], stream: 'yes' }, 'stream'],
    [{ messages: [{ role: 'user', content: 'x' }], mtplx: { depth: 99 } }, 'mtplx.depth'],
    [{ messages: [{ role: 'user', content: 'x' }], mtplx: { draft_min_conf: 'high' } }, 'mtplx.draft_min_conf'],
    [{ messages: [{ role: 'user', content: 'x' }], mtplx: { draft_min_conf: -0.1 } }, 'mtplx.draft_min_conf'],
  ]) {
    const r = await post('/v1/chat/completions', JSON.stringify(body));
    openaiError(r, 400, 'invalid_request_error');
    assert.ok(r.json.error.message.includes(field.split('[')[0]) || r.json.error.param === field,
              `${JSON.stringify(body)} -> ${r.json.error.message}`);
  }
  await assert.rejects(openai.chat.completions.create({ model: 'm', n: 2, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.BadRequestError && /'n' must be 1/.test(e.message));
  await assert.rejects(openai.chat.completions.create({ model: 'm', logprobs: true, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.BadRequestError && /logprobs/.test(e.message));
  const a = await post('/v1/messages', JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }));
  assert.equal(a.status, 400);
  assert.equal(a.json.type, 'error');
  assert.equal(a.json.error.type, 'invalid_request_error');
  assert.match(a.json.error.message, /max_tokens/);
});

await step('huge body: 413, and the server keeps serving', async () => {
  const big = JSON.stringify({ model: 'm', prompt: 'x'.repeat(2 << 20), max_tokens: 1 });
  const r = await post('/v1/completions', big);
  openaiError(r, 413, 'invalid_request_error');
  const r2 = await post('/v1/messages', big);
  assert.equal(r2.status, 413);
  assert.equal(r2.json.error.type, 'request_too_large');
  assert.equal((await post('/v1/completions', tiny)).status, 200);
});

await step('prompt longer than the context: 400 with the numbers', async () => {
  const r = await post('/v1/completions', JSON.stringify({ prompt: 'def f(x):\n    return x\n'.repeat(40), max_tokens: 1 }));
  openaiError(r, 400, 'invalid_request_error');
  // OpenAI's own wording and code, which its clients parse (issue 15)
  assert.match(r.json.error.message, /maximum context length is 128 tokens\. However, your prompt resulted in \d+ tokens/);
  assert.equal(r.json.error.code, 'context_length_exceeded');
  assert.equal(r.json.error.param, 'prompt');
});

await step('unknown fields are ignored; unknown route 404; wrong method 405', async () => {
  const r = await openai.completions.create({ model: 'm', prompt: 'def', max_tokens: 2, temperature: 0,
    some_future_field: { nested: [1, 2, 3] }, user: 'abc', metadata: { a: 'b' } });
  assert.equal(r.choices.length, 1);
  openaiError({ status: (await fetch(`${base}/v1/nope`, { headers: auth })).status,
                json: await (await fetch(`${base}/v1/nope`, { headers: auth })).json() }, 404, 'not_found_error');
  const m = await fetch(`${base}/v1/chat/completions`, { headers: auth });
  assert.equal(m.status, 405);
  assert.equal(m.headers.get('allow'), 'POST');
});

await step('client disconnect mid-stream cancels the generation; the next request works', async () => {
  const before = await metric('mtplx_generations_cancelled_total');
  const tokensBefore = await metric('mtplx_completion_tokens_total');
  // max_tokens 4000 is cut to the room the 128-token context leaves after the prompt: the most this
  // request could generate without the cancel (the probe's usage tells the prompt's length)
  const probe = (await openai.completions.create({ model: 'm', prompt: 'def', max_tokens: 1, temperature: 0 })).usage;
  const room = 128 - probe.prompt_tokens;
  const ctl = new AbortController();
  const res = await fetch(`${base}/v1/completions`, { method: 'POST', headers: auth, signal: ctl.signal,
    body: JSON.stringify({ prompt: 'def', max_tokens: 4000, temperature: 0, stream: true, mtplx: { depth: 0 } }) });
  const reader = res.body.getReader();
  let got = '';
  while (!got.includes('"text"')) got += new TextDecoder().decode((await reader.read()).value);
  ctl.abort();
  let after = before;
  for (let i = 0; i < 200 && after <= before; i++) {
    await new Promise((r) => setTimeout(r, 100));
    after = await metric('mtplx_generations_cancelled_total');
  }
  assert.equal(after, before + 1, 'cancel counted');
  // this request's own tokens: the counter's growth less the probe's (one worker runs the jobs in
  // order, so the probe was counted before the cancelled job, and nothing else runs meanwhile)
  const own = (await metric('mtplx_completion_tokens_total')) - tokensBefore - probe.completion_tokens;
  assert.ok(own >= 1 && own < room, `the cancelled request generated ${own} tokens, want 1..${room - 1} (stopped early)`);
  console.log(`     cancelled after ${own} of at most ${room} tokens`);
  const r = await openai.completions.create({ model: 'm', prompt: 'def', max_tokens: 2, temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'length');
});

await step('50 concurrent streaming clients: all complete with the same text, none starves', async () => {
  const N = 50;
  const one = async (i) => {
    // a one-token prompt and two tokens out: the ASan build of the forward is slow
    const stream = await openai.completions.create({ model: 'm', stream: true, max_tokens: 2, temperature: 0, prompt: 'def' });
    let text = '', finish = null, chunks = 0;
    for await (const c of stream) {
      chunks++;
      text += c.choices[0]?.text ?? '';
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.ok(chunks >= 2, `client ${i} got ${chunks} chunks`);
    return { i, text, finish, done: Date.now() };
  };
  const results = await Promise.all(Array.from({ length: N }, (_, i) => one(i)));
  assert.equal(results.length, N);
  for (const r of results) {
    assert.equal(r.finish, 'length', `client ${r.i} finish ${r.finish}`);
    assert.equal(r.text, results[0].text, `client ${r.i} text differs`);
  }
  // the worker marks a job done before it updates its counters: give it a moment to settle
  let running = 1;
  for (let i = 0; i < 50 && running !== 0; i++) {
    running = await metric('mtplx_queue_running');
    if (running) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(running, 0);
  assert.equal(await metric('mtplx_queue_waiting'), 0);
});
console.log('all server abuse checks passed');
