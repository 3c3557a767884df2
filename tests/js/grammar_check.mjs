// grammar_check.mjs — structured output (docs/structured-output.md) checked with an independent
// JSON Schema validator (ajv, draft 2020-12) on the embedded model at temperature 1.0:
//   1. `mtplx run --json-schema F` / `--grammar json` over many schemas, MTP depths 0..5, with a
//      bounded think block (--chat) and without (a raw prompt): every output that ended must validate;
//   2. the official SDKs' structured-output helpers against `mtplx serve` at BASE_URL:
//      openai chat.completions.parse and responses.parse with a JSON schema, tool_choice required and
//      named (arguments validated against the tool's parameters), Anthropic forced tool use
//      (tool_choice tool / any, input validated against input_schema), thinking on (with a budget)
//      and off, and a 400 that names an unsupported keyword.
// Usage: node grammar_check.mjs MTPLX_BINARY BASE_URL. Exits non-zero on the first failure.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { step } from './lib.mjs';

const [bin, base] = process.argv.slice(2);
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv); // date, time, date-time, email, uuid, ipv4, ipv6, uri, hostname checked by ajv-formats' own rules

const SCHEMAS = [
  { name: 'flat', schema: { type: 'object', properties: {
      name: { type: 'string', minLength: 1, maxLength: 24 }, lines: { type: 'integer', minimum: 0, maximum: 500 },
      kind: { enum: ['function', 'class', 'module'] } }, required: ['name', 'lines', 'kind'], additionalProperties: false } },
  { name: 'nested5', schema: { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'object',
      properties: { c: { type: 'object', properties: { d: { type: 'object', properties: { e: { type: 'integer' } },
      required: ['e'] } }, required: ['d'] } }, required: ['c'] } }, required: ['b'] } }, required: ['a'] } },
  { name: 'anyof', schema: { anyOf: [
      { type: 'object', properties: { tool: { const: 'read' }, path: { type: 'string', maxLength: 40 } }, required: ['tool', 'path'] },
      { type: 'object', properties: { tool: { const: 'list' }, depth: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['tool', 'depth'] }] } },
  { name: 'nullable', schema: { type: 'object', properties: { note: { type: ['string', 'null'], maxLength: 10 },
      ok: { type: 'boolean' }, score: { type: 'number', exclusiveMinimum: -1, exclusiveMaximum: 1 } },
      required: ['note', 'ok', 'score'] } },
  { name: 'array', schema: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'object',
      properties: { id: { type: 'integer', minimum: 1 }, tags: { type: 'array', items: { enum: ['x', 'y', 'z'] }, maxItems: 2 } },
      required: ['id', 'tags'] } } },
  { name: 'recursive', schema: { $defs: { node: { type: 'object', properties: { v: { type: 'integer', minimum: 0, maximum: 9 },
      next: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] } }, required: ['v', 'next'] } }, $ref: '#/$defs/node' } },
  { name: 'enum-const', schema: { type: 'object', properties: { level: { enum: [1, 2, 'three', null, true] },
      version: { const: 'v1' }, ratio: { type: 'number', minimum: 0.5, maximum: 2.25 } }, required: ['level', 'version', 'ratio'] } },
  { name: 'scalar', schema: { type: 'integer', minimum: -50, maximum: 50 } },
  { name: 'free-extra', schema: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'],
      additionalProperties: { type: 'string', maxLength: 8 } } },
  { name: 'pattern-format', schema: { type: 'object', properties: {
      id: { type: 'string', pattern: '^[a-z]{2,4}-\\d{2,5}$' }, code: { type: 'string', pattern: '[A-Z]\\w*', maxLength: 12 },
      day: { type: 'string', format: 'date' }, at: { type: 'string', format: 'date-time' },
      mail: { type: 'string', format: 'email' }, uuid: { type: 'string', format: 'uuid' },
      ip: { type: 'string', format: 'ipv4' }, ip6: { type: 'string', format: 'ipv6' },
      host: { type: 'string', format: 'hostname' }, url: { type: 'string', format: 'uri' }, t: { type: 'string', format: 'time' } },
      required: ['id', 'code', 'day', 'mail', 'ip'], additionalProperties: false } },
  { name: 'keywords', schema: { type: 'object', properties: {
      pair: { type: 'array', prefixItems: [{ type: 'integer', multipleOf: 3 }, { enum: ['x', 'y'] }], items: false, minItems: 2 },
      set: { type: 'array', items: { enum: ['red', 'green', 'blue', 1, 12] }, uniqueItems: true, minItems: 2 },
      n: { type: 'integer', multipleOf: 7, minimum: -100, maximum: 100 },
      extra: { type: 'object', additionalProperties: { type: 'integer' }, minProperties: 1, maxProperties: 2 } },
      minProperties: 2, maxProperties: 3, required: ['pair'], additionalProperties: false } },
  { name: 'json_object', schema: null },
];

const dir = mkdtempSync(join(tmpdir(), 'mtplx-grammar-'));
let validated = 0, truncated = 0;

// The answer after a think block (the CLI's text keeps the reasoning and the closing tag).
function answer(text) {
  const k = text.lastIndexOf('</think>');
  return (k >= 0 ? text.slice(k + 8) : text).trim();
}

function check(name, schema, text, where) {
  let doc;
  try { doc = JSON.parse(text); } catch (e) { assert.fail(`${where}: not JSON: ${JSON.stringify(text)}`); }
  const validate = ajv.compile(schema ?? { type: 'object' });
  assert.ok(validate(doc), `${where}: ${JSON.stringify(text)} fails ${name}: ${ajv.errorsText(validate.errors)}`);
  validated++;
}


// ---- 1. the CLI ----
await step('mtplx run: every schema, depths 0..5, with and without thinking, validated by ajv', async () => {
  SCHEMAS.forEach((s, i) => {
    const file = join(dir, `${s.name}.json`);
    if (s.schema) writeFileSync(file, JSON.stringify(s.schema));
    for (const think of [false, true]) {
      for (const depth of [i % 6, (i + 3) % 6]) { // every depth 0..5 is used by several schemas
        const args = ['run', '--json', '--samples', '2', '--seed', String(100 * i + depth + (think ? 50 : 0)),
          '--temperature', '1', '--top-p', '1', '--top-k', '0', '--depth', String(depth), '--max-tokens', '160',
          ...(s.schema ? ['--json-schema', file] : ['--grammar', 'json'])];
        if (think) args.push('--chat', '--max-thinking-tokens', '12', '--prompt', `Describe the function ${s.name} as JSON.`);
        else args.push('--prompt', 'result = ');
        const r = spawnSync(bin, args, { encoding: 'utf8', timeout: 120000 });
        assert.equal(r.status, 0, `mtplx ${args.join(' ')}: ${r.stderr}`);
        for (const line of r.stdout.trim().split('\n')) {
          const o = JSON.parse(line);
          const where = `${s.name} depth ${depth}${think ? ' thinking' : ''} seed ${o.seed}`;
          if (o.finish_reason === 'length') { truncated++; continue; }
          assert.equal(o.finish_reason, 'stop', where);
          if (think) assert.ok(o.text.includes('</think>'), `${where}: the think block was not closed`);
          check(s.name, s.schema, answer(o.text), where);
        }
      }
    }
  });
  console.log(`     ${validated} outputs validated, ${truncated} cut by max_tokens`);
  assert.ok(truncated * 2 <= validated, `too many outputs hit max_tokens: ${truncated} vs ${validated}`);
  const bad = spawnSync(bin, ['run', '--prompt', 'x', '--json-schema', join(dir, 'bad.json')], { encoding: 'utf8' });
  writeFileSync(join(dir, 'bad.json'), JSON.stringify({ type: 'string', pattern: '^(?=a)a+$' }));
  const bad2 = spawnSync(bin, ['run', '--prompt', 'x', '--json-schema', join(dir, 'bad.json')], { encoding: 'utf8' });
  assert.notEqual(bad.status, 0);
  assert.equal(bad2.status, 2, bad2.stderr);
  assert.match(bad2.stderr, /'pattern'/);
});

// ---- 2. the SDKs against mtplx serve ----
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const TOOLS = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file from the workspace.', strict: true,
    parameters: { type: 'object', properties: { path: { type: 'string' }, max_lines: { type: 'integer', minimum: 1, maximum: 200 } },
      required: ['path', 'max_lines'], additionalProperties: false } } },
  { type: 'function', function: { name: 'list_dir', description: 'List the entries of a directory.',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
];
const FLAT = SCHEMAS[0].schema;
const sample = { temperature: 1, top_p: 1 };

await step('openai chat.completions.parse with a json_schema (thinking off, then a thinking budget)', async () => {
  for (const [k, thinking] of [[0, false], [1, true], [2, false], [3, true]]) {
    const r = await openai.chat.completions.parse({ model: 'm', ...sample, seed: 10 + k, max_tokens: 200,
      messages: [{ role: 'user', content: 'Describe the function read_file as JSON.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'describe', schema: FLAT, strict: true } },
      chat_template_kwargs: { enable_thinking: thinking }, mtplx: { max_thinking_tokens: 10 } });
    const c = r.choices[0];
    if (c.finish_reason === 'length') continue;
    assert.equal(c.finish_reason, 'stop');
    assert.ok(c.message.parsed, 'parse() returned no parsed object');
    check('flat', FLAT, c.message.content, `chat.completions.parse seed ${10 + k}`);
    if (!thinking) assert.ok(!c.message.reasoning_content, 'thinking off produced reasoning');
  }
});

await step('openai responses.parse with text.format json_schema', async () => {
  const r = await openai.responses.parse({ model: 'm', ...sample, input: 'Describe the function list_dir as JSON.',
    max_output_tokens: 200, text: { format: { type: 'json_schema', name: 'describe', schema: FLAT, strict: true } },
    reasoning: { effort: 'low' }, mtplx: { max_thinking_tokens: 8 } });
  if (r.status === 'incomplete') return;
  assert.ok(r.output_parsed, 'responses.parse returned no output_parsed');
  check('flat', FLAT, JSON.stringify(r.output_parsed), 'responses.parse');
});

await step('openai json_object mode', async () => {
  const r = await openai.chat.completions.create({ model: 'm', ...sample, seed: 3, max_tokens: 150,
    messages: [{ role: 'user', content: 'Answer in JSON.' }], response_format: { type: 'json_object' },
    chat_template_kwargs: { enable_thinking: false } });
  if (r.choices[0].finish_reason !== 'length') check('json_object', null, r.choices[0].message.content, 'json_object');
});

await step('openai tool_choice required / named: a call with valid arguments, finish_reason tool_calls', async () => {
  for (const [k, choice] of [[0, 'required'], [1, { type: 'function', function: { name: 'read_file' } }], [2, 'required']]) {
    const r = await openai.chat.completions.create({ model: 'm', ...sample, seed: 20 + k, max_tokens: 200, tools: TOOLS,
      tool_choice: choice, parallel_tool_calls: false, messages: [{ role: 'user', content: 'Show me setup.py' }],
      chat_template_kwargs: { enable_thinking: false } });
    const c = r.choices[0];
    if (c.finish_reason === 'length') continue;
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0].function;
    if (typeof choice === 'object') assert.equal(call.name, 'read_file');
    const tool = TOOLS.find((t) => t.function.name === call.name);
    assert.ok(tool, `unknown tool ${call.name}`);
    check(call.name, tool.function.parameters, call.arguments, `tool_choice ${JSON.stringify(choice)}`);
  }
});

await step('anthropic forced tool use (tool_choice tool and any), stop_reason tool_use', async () => {
  const atools = TOOLS.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));
  for (const [k, choice] of [[0, { type: 'tool', name: 'read_file' }], [1, { type: 'any' }], [2, { type: 'tool', name: 'list_dir' }]]) {
    const m = await anthropic.messages.create({ model: 'm', max_tokens: 256, ...sample, tools: atools, tool_choice: choice,
      messages: [{ role: 'user', content: 'Open the main module' }],
      thinking: k === 1 ? { type: 'enabled', budget_tokens: 12 } : { type: 'disabled' } });
    if (m.stop_reason === 'max_tokens') continue;
    assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m.content));
    const use = m.content.find((b) => b.type === 'tool_use');
    assert.ok(use, 'no tool_use block');
    if (choice.name) assert.equal(use.name, choice.name);
    const tool = atools.find((t) => t.name === use.name);
    check(use.name, tool.input_schema, JSON.stringify(use.input), `anthropic tool_choice ${JSON.stringify(choice)}`);
  }
});

await step('an unsupported keyword is a 400 that names it', async () => {
  await assert.rejects(openai.chat.completions.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', format: 'idn-email' } } } }),
  (e) => e.status === 400 && /'format'/.test(e.message));
  await assert.rejects(openai.chat.completions.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', pattern: '(a)\\1' } } } }),
  (e) => e.status === 400 && /'pattern'/.test(e.message) && /backreference/.test(e.message));
});

await step('openai tool_choice auto with a strict tool: any call of it has valid arguments', async () => {
  let calls = 0;
  for (let k = 0; k < 6; k++) {
    const r = await openai.chat.completions.create({ model: 'm', ...sample, seed: 40 + k, max_tokens: 200, tools: TOOLS,
      messages: [{ role: 'user', content: 'Show me the first lines of setup.py' }], chat_template_kwargs: { enable_thinking: false } });
    const c = r.choices[0];
    if (c.finish_reason === 'length') continue;
    for (const tc of c.message.tool_calls ?? []) {
      if (tc.function.name !== 'read_file') continue;
      check('read_file', TOOLS[0].function.parameters, tc.function.arguments, `auto seed ${40 + k}`);
      calls++;
    }
  }
  console.log(`     ${calls} strict calls validated`);
});

console.log(`grammar: all passed (${validated} documents validated)`);
