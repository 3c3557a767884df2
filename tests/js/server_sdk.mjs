// server_sdk.mjs — drives `mtplx serve` (embedded model) with the official openai and
// @anthropic-ai/sdk clients. Usage: node server_sdk.mjs BASE_URL
// Exits non-zero on the first failed check, naming it.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import { step } from './lib.mjs';

const base = process.argv[2];
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0, timeout: 120000 });

// The tools and request the embedded model was trained on (shared/tools/refmodels.py TOOLS).
const TOOLS = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file from the workspace.',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'list_dir', description: 'List the entries of a directory.',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
];
const PATH = 'json/decoder.py';
const ASK = `Show me the first lines of ${PATH}`;


async function collectChatStream(stream) {
  let content = '', reasoning = '', finish = null, usage = null, role = null;
  const calls = [];
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const ch = chunk.choices[0];
    if (!ch) continue;
    const d = ch.delta || {};
    if (d.role) role = d.role;
    if (d.content) content += d.content;
    if (d.reasoning_content) reasoning += d.reasoning_content;
    for (const tc of d.tool_calls || []) {
      calls[tc.index] ??= { id: '', name: '', arguments: '' };
      if (tc.id) calls[tc.index].id = tc.id;
      if (tc.function?.name) calls[tc.index].name += tc.function.name;
      if (tc.function?.arguments) calls[tc.index].arguments += tc.function.arguments;
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  return { content, reasoning, finish, usage, role, calls };
}

await step('GET /v1/models lists the served model', async () => {
  const page = await openai.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, 'qwen35-tiny-code');
  assert.equal(page.data[0].object, 'model');
});

const codeReq = {
  model: 'qwen35-tiny-code', temperature: 0, seed: 7, max_tokens: 24,
  messages: [{ role: 'user', content: 'Continue this Python code:\n```python\nimport os\n```' }],
  chat_template_kwargs: { enable_thinking: false },
};

await step('chat: streamed text == non-streamed text (temperature 0, same seed), usage reported', async () => {
  const full = await openai.chat.completions.create(codeReq);
  const msg = full.choices[0].message;
  assert.equal(full.object, 'chat.completion');
  assert.ok(msg.content.length > 0, 'non-empty content');
  assert.equal(full.usage.completion_tokens, 24);
  assert.equal(full.choices[0].finish_reason, 'length');
  const s = await collectChatStream(await openai.chat.completions.create({
    ...codeReq, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.role, 'assistant');
  assert.equal(s.content, msg.content);
  assert.equal(s.finish, full.choices[0].finish_reason);
  assert.equal(s.usage.prompt_tokens, full.usage.prompt_tokens);
  assert.equal(s.usage.completion_tokens, full.usage.completion_tokens);
  // the same prompt again: the prefix cache restores all of it but the last token (docs/prefix-cache.md)
  assert.equal(s.usage.prompt_tokens_details.cached_tokens, s.usage.prompt_tokens - 1);
});

await step('responses API: non-streamed and streamed output agree', async () => {
  const req = { model: 'm', input: 'Continue this Python code:\n```python\nimport os\n```', max_output_tokens: 12,
                temperature: 0, reasoning: { effort: 'none' } };
  const r = await openai.responses.create(req);
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.ok(r.output_text.length > 0);
  assert.equal(r.usage.output_tokens, 12);
  let text = '';
  const types = [];
  for await (const ev of await openai.responses.create({ ...req, stream: true })) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  assert.equal(text, r.output_text);
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.incomplete');
});

let firstCall = null, firstReasoning = null;
await step('tool call produced by the model, parsed into tool_calls with JSON arguments; reasoning split', async () => {
  const r = await openai.chat.completions.create({
    model: 'm', temperature: 0, max_tokens: 80, tools: TOOLS, messages: [{ role: 'user', content: ASK }] });
  const ch = r.choices[0];
  assert.equal(ch.finish_reason, 'tool_calls');
  assert.equal(ch.message.tool_calls.length, 1);
  const tc = ch.message.tool_calls[0];
  assert.equal(tc.type, 'function');
  assert.equal(tc.function.name, 'read_file');
  assert.deepEqual(JSON.parse(tc.function.arguments), { path: PATH });
  assert.match(tc.id, /^call_/);
  assert.ok(ch.message.reasoning_content && ch.message.reasoning_content.includes(PATH),
            `reasoning_content holds the think block: ${ch.message.reasoning_content}`);
  assert.ok(!(ch.message.content || '').includes('<think>') && !(ch.message.content || '').includes('<tool_call>'));
  firstCall = tc;
  firstReasoning = ch.message.reasoning_content;
});

await step('tool call streamed as delta.tool_calls, same call and reasoning as non-streamed', async () => {
  const s = await collectChatStream(await openai.chat.completions.create({
    model: 'm', temperature: 0, max_tokens: 80, tools: TOOLS, stream: true, messages: [{ role: 'user', content: ASK }] }));
  assert.equal(s.finish, 'tool_calls');
  assert.equal(s.calls.length, 1);
  assert.equal(s.calls[0].name, 'read_file');
  assert.equal(s.calls[0].arguments, firstCall.function.arguments);
  assert.equal(s.reasoning, firstReasoning);
  assert.equal(s.content, '');
});

await step('anthropic: streaming event order with thinking and tool_use blocks', async () => {
  const events = [];
  const stream = anthropic.messages.stream({
    model: 'm', max_tokens: 80, temperature: 0,
    tools: TOOLS.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters })),
    messages: [{ role: 'user', content: ASK }],
  });
  stream.on('streamEvent', (e) => events.push(e.type));
  const msg = await stream.finalMessage();
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.equal(events.at(-2), 'message_delta');
  // every block is started, then gets deltas, then stops, before the next one starts
  let open = false;
  for (const e of events.slice(1, -2)) {
    if (e === 'content_block_start') { assert.equal(open, false); open = true; }
    else if (e === 'content_block_delta') assert.equal(open, true);
    else if (e === 'content_block_stop') { assert.equal(open, true); open = false; }
    else assert.ok(e === 'ping', `unexpected event ${e}`);
  }
  assert.equal(open, false);
  assert.equal(msg.stop_reason, 'tool_use');
  const types = msg.content.map((b) => b.type);
  assert.deepEqual(types, ['thinking', 'tool_use']);
  assert.ok(msg.content[0].thinking.includes(PATH));
  assert.equal(msg.content[1].name, 'read_file');
  assert.deepEqual(msg.content[1].input, { path: PATH });
  assert.ok(msg.usage.input_tokens + msg.usage.cache_read_input_tokens > 100 && msg.usage.output_tokens > 10);
});

await step('tool result round trip: the model answers from the tool output', async () => {
  const body = 'import re\n\nfrom json import scanner\n';
  const r = await openai.chat.completions.create({
    model: 'm', temperature: 0, max_tokens: 16, tools: TOOLS,
    // after a tool result the model was trained to answer with an empty think block
    chat_template_kwargs: { enable_thinking: false },
    messages: [
      { role: 'user', content: ASK },
      { role: 'assistant', content: null, tool_calls: [firstCall] },
      { role: 'tool', tool_call_id: firstCall.id, content: body },
    ] });
  const ch = r.choices[0];
  assert.ok(['stop', 'length'].includes(ch.finish_reason));
  assert.ok(!ch.message.tool_calls, 'no new tool call');
  assert.ok(ch.message.content && ch.message.content.length > 0, 'an answer');
  assert.ok(ch.message.content.startsWith('Here are the first lines of'), `answer: ${ch.message.content}`);
});

await step('completions endpoint (non-stream and stream agree)', async () => {
  const req = { model: 'm', prompt: 'def parse(', max_tokens: 12, temperature: 0 };
  const r = await openai.completions.create(req);
  assert.equal(r.object, 'text_completion');
  let text = '', finish = null;
  for await (const c of await openai.completions.create({ ...req, stream: true })) {
    text += c.choices[0]?.text ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, r.choices[0].finish_reason);
});

await step('anthropic: non-streaming with system prompt and stop_sequences', async () => {
  const msg = await anthropic.messages.create({
    model: 'm', max_tokens: 40, temperature: 0, system: 'You write Python.',
    thinking: { type: 'disabled' },
    stop_sequences: ['\n'],
    messages: [{ role: 'user', content: 'Continue this Python code:\n```python\nimport os\n```' }],
  });
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.content[0].type, 'text');
  assert.equal(msg.stop_reason, 'stop_sequence');
  assert.equal(msg.stop_sequence, '\n');
  assert.ok(!msg.content[0].text.includes('\n'));
});

await step('GET /health', async () => {
  const h = await (await fetch(`${base}/health`)).json();
  assert.equal(h.status, 'ok');
  assert.equal(h.model, 'qwen35-tiny-code');
  assert.equal(h.tier, 'mtp');
  assert.equal(typeof h.depth, 'number');
  assert.ok(h.uptime_s > 0);
  assert.deepEqual(Object.keys(h.queue).sort(), ['max', 'running', 'waiting']);
});

await step('GET /metrics parses as Prometheus text and counts what happened', async () => {
  const res = await fetch(`${base}/metrics`);
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const types = new Map(), samples = new Map();
  for (const line of text.split('\n')) {
    if (!line) continue;
    let m;
    if ((m = line.match(/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/))) { types.set(m[1], m[2]); continue; }
    if (line.startsWith('# HELP ')) continue;
    m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*)?\})? (-?[0-9.]+(e[+-]?[0-9]+)?|NaN|\+Inf|-Inf)$/);
    assert.ok(m, `not a Prometheus sample line: ${line}`);
    assert.ok(types.has(m[1]), `sample before its TYPE: ${m[1]}`);
    samples.set(m[1] + (m[2] || ''), Number(m[5]));
  }
  assert.ok(samples.get('mtplx_requests_total{endpoint="chat_completions"}') >= 5);
  assert.ok(samples.get('mtplx_requests_total{endpoint="messages"}') >= 2);
  assert.ok(samples.get('mtplx_completion_tokens_total') > 100);
  assert.ok(samples.get('mtplx_tool_calls_total') >= 3);
  assert.ok(samples.get('mtplx_generations_total') >= 9);
  assert.equal(samples.get('mtplx_queue_waiting'), 0);
  assert.ok(samples.get('mtplx_draft_tokens_total') > 0);
  assert.ok('mtplx_acceptance_rate{position="1"}' && samples.has('mtplx_acceptance_rate{position="1"}'));
});
console.log('all server SDK checks passed');
