// prefix_disk.mjs — the prefix cache's disk tier through the server (docs/prefix-cache.md). Usage:
//   node prefix_disk.mjs turn N HOT COLD STATE   run turn N (1, 2, ...) of four chats (depth 0 and 3,
//                                                 greedy and seeded) on both servers; replies must be
//                                                 equal; from turn 2 on the hot server must report
//                                                 >= 60% of the prompt cached. STATE (a JSON file)
//                                                 carries the conversations from turn to turn, so a
//                                                 turn can run against a restarted server.
//   node prefix_disk.mjs same HOT COLD            one request with a long prompt on both: same reply
//                                                 (the check after a fault), prints the hot server's
//                                                 cached tokens.
//   node prefix_disk.mjs metric URL NAME          prints the value of /metrics line NAME.
import assert from 'node:assert/strict';
import fs from 'node:fs';

const SYSTEM = 'You are a careful coding assistant working in a large repository. ' +
  'Answer briefly, show code when asked, and explain each change in one sentence. '.repeat(10);
const USERS = ['Write a Python function that reverses a list.', 'Now make it work for strings too.',
               'Add a docstring.', 'Add type hints.'];
const CONFIGS = [[0, 0, 1], [3, 0, 2], [3, 0.8, 3], [0, 0.8, 4]]; // depth, temperature, seed

async function post(base, body) {
  const r = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                                       body: JSON.stringify(body) });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j;
}

async function metric(base, name) {
  const m = await (await fetch(`${base}/metrics`)).text();
  const hit = m.match(new RegExp(`^${name.replace(/[{}"]/g, (c) => '\\' + c)} (\\S+)$`, 'm'));
  return hit ? Number(hit[1]) : NaN;
}

const [mode, ...args] = process.argv.slice(2);
let fail = 0;
const check = (f) => { try { f(); } catch (e) { console.log(`FAIL ${e.message}`); fail = 1; } };

if (mode === 'turn') {
  const [n, hot, cold, stateFile] = [Number(args[0]), args[1], args[2], args[3]];
  const state = n === 1 ? CONFIGS.map(() => [{ role: 'system', content: SYSTEM }]) : JSON.parse(fs.readFileSync(stateFile));
  for (let k = 0; k < CONFIGS.length; k++) {
    const [depth, temperature, seed] = CONFIGS[k];
    const messages = state[k];
    messages.push({ role: 'user', content: USERS[n - 1] });
    const body = { model: 'm', messages, max_tokens: 16, temperature, seed, mtplx: { depth } };
    const a = await post(hot, body), b = await post(cold, body);
    const tag = `turn ${n} depth ${depth} T ${temperature}`;
    const u = a.usage;
    check(() => assert.equal(a.choices[0].message.content, b.choices[0].message.content, `${tag}: hot reply differs from cold`));
    if (n > 1)
      check(() => assert.ok(u.prompt_tokens_details.cached_tokens >= 0.6 * u.prompt_tokens,
                            `${tag}: only ${u.prompt_tokens_details.cached_tokens} of ${u.prompt_tokens} prompt tokens cached`));
    console.log(`${tag}: ${u.prompt_tokens_details.cached_tokens} of ${u.prompt_tokens} prompt tokens cached`);
    messages.push({ role: 'assistant', content: a.choices[0].message.content });
  }
  fs.writeFileSync(stateFile, JSON.stringify(state));
} else if (mode === 'same') {
  const [hot, cold] = args;
  const body = { model: 'm', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USERS[0] }],
                 max_tokens: 16, temperature: 0.8, seed: 9, mtplx: { depth: 3 } };
  const a = await post(hot, body), b = await post(cold, body);
  check(() => assert.equal(a.choices[0].message.content, b.choices[0].message.content, 'after the fault: hot reply differs from cold'));
  console.log(`cached ${a.usage.prompt_tokens_details.cached_tokens}`);
} else if (mode === 'metric') {
  console.log(String(await metric(args[0], args[1])));
} else {
  console.log('usage: prefix_disk.mjs turn N HOT COLD STATE | same HOT COLD | metric URL NAME');
  process.exit(2);
}
process.exit(fail);
