// prefix_agent.mjs — replay of a multi-turn agent conversation against `mtplx serve` (bench/prefix.sh):
// a system prompt + 6 tool definitions, a task, then 10 turns in which the model's reply is fed back as
// the agent would (its text, or its tool calls re-serialised by the chat template) followed by a tool
// result of ~150-400 tokens. Prints, per turn, the prompt tokens and how many the server restored
// from its prefix cache (usage.prompt_tokens_details.cached_tokens), and the total share.
// Usage: node bench/prefix_agent.mjs BASE_URL [TURNS=10]   (SMALL=1: the older 1.4k-token system prompt)
const [base, turnsArg] = process.argv.slice(2);
const DUMP = process.env.DUMP === "1"; // print the system prompt and tools as one chat request and exit
const TURNS = Number(turnsArg || 10);
const tool = (name, desc, props) => ({ type: 'function', function: { name, description: desc,
  parameters: { type: 'object', properties: Object.fromEntries(props.map((p) => [p, { type: 'string', description: `The ${p}.` }])),
                required: props } } });
// Real agents send 8-25k tokens of system prompt + tool definitions (issue 13: Claude Code 15-25k,
// qwen-code 22k, Codex 8k, opencode 9k). SMALL=1 keeps the older 1.4k-token trace.
const SMALL = process.env.SMALL === '1';
const para = (topic, i) => `${topic} ${i + 1}. When you work on ${topic.toLowerCase()}, first read the code that is ` +
  `involved and the tests that cover it, state what you expect to change, then change the smallest part that ` +
  `does it. Keep the style of the surrounding code (naming, error handling, comments), do not reformat lines you ` +
  `do not change, and mention in your reply every file you touched and why. If something is unclear, say what ` +
  `you assumed instead of asking, unless the assumption could destroy work.`;
const TOPICS = ['Reading code', 'Editing files', 'Running tests', 'Debugging failures', 'Refactoring', 'Git usage',
                'Dependencies', 'Security', 'Performance', 'Documentation', 'Communication', 'Planning'];
const LONG_TOOL = (name, what, props) => tool(name, `${what} ` + Array.from({ length: 4 }, (_, i) =>
  `Usage note ${i + 1}: ${name} works on paths relative to the workspace root; absolute paths and paths that leave ` +
  `the workspace are refused. Results longer than 2000 lines are cut, with a note saying how many lines were left ` +
  `out. Call it again with a narrower argument rather than asking for everything at once.`).join(' '), props);
const TOOL_NAMES = [['read_file', 'Read a file and return its contents with line numbers.', ['path', 'offset', 'limit']],
  ['list_dir', 'List a directory, directories first.', ['path']], ['write_file', 'Write a file, replacing it.', ['path', 'content']],
  ['edit_file', 'Replace one exact string of a file by another.', ['path', 'old_string', 'new_string']],
  ['run_tests', 'Run the test suite and return the failures.', ['target']], ['grep', 'Search file contents by regex.', ['pattern', 'path', 'glob']],
  ['glob', 'Find files by name pattern.', ['pattern', 'path']], ['apply_patch', 'Apply a unified diff.', ['patch']],
  ['shell', 'Run a shell command in the workspace.', ['command', 'timeout']], ['web_fetch', 'Fetch a URL and return its text.', ['url', 'prompt']],
  ['todo_write', 'Replace the task list shown to the user.', ['todos']], ['ask_user', 'Ask the user one question.', ['question']],
  ['git_diff', 'Show the working tree diff.', ['path']], ['git_commit', 'Commit the staged changes.', ['message']],
  ['lint', 'Run the linter on files.', ['paths']], ['notebook_edit', 'Edit a notebook cell.', ['path', 'cell', 'source']]];
const TOOLS = SMALL ? [
  tool('read_file', 'Read a file from the workspace and return its contents with line numbers.', ['path']),
  tool('list_dir', 'List the entries of a directory of the workspace, one per line, directories first.', ['path']),
  tool('write_file', 'Write a file of the workspace, replacing its contents.', ['path', 'content']),
  tool('run_tests', 'Run the test suite of the workspace and return the failures.', ['target']),
  tool('grep', 'Search the workspace for a regular expression and return the matching lines.', ['pattern', 'path']),
  tool('apply_patch', 'Apply a unified diff to the workspace.', ['patch']),
] : TOOL_NAMES.map(([n, d, p]) => LONG_TOOL(n, d, p));
const RULES = [
  'You are a coding agent working in a Python repository. Use the tools to inspect files before changing them.',
  'Prefer small, reviewable changes; explain each change in one sentence.',
  'Never invent file contents: read them first. Run the tests after every change.',
  'When a test fails, read the failure, find the cause in the code, and fix the cause rather than the test.',
];
const SYSTEM = RULES.join('\n') + '\n' + (SMALL ? Array.from({ length: 20 }, (_, i) =>
  `Guideline ${i + 1}: keep functions short, name things for what they mean, handle errors where they occur, and document behaviour that is not obvious from the code.`).join('\n')
  : TOPICS.flatMap((t) => Array.from({ length: 3 }, (_, i) => para(t, i))).join('\n\n'));
const fileText = (k) => Array.from({ length: 12 + (k * 7) % 20 }, (_, i) =>
  `${i + 1}: def helper_${k}_${i}(x):\n    return x * ${i + k} + ${k}  # step ${i}`).join('\n');

if (DUMP) {
  console.log(JSON.stringify({ messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'hi' }], tools: TOOLS }));
  process.exit(0);
}

// node:http rather than fetch: a cold 11k-token prefill on a loaded machine outlasts fetch's 300 s
// headers timeout
import http from 'node:http';
function post(body) {
  const u = new URL(`${base}/v1/chat/completions`), data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
                               headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        try {
          const j = JSON.parse(text);
          if (res.statusCode !== 200) reject(new Error(text)); else resolve(j);
        } catch (e) { reject(e); }
      });
    });
    req.on('error', reject);
    req.end(data);
  });
}

// one agent session of TURNS turns on task; returns [prompt tokens, cached tokens]
async function session(task) {
  const messages = [{ role: 'system', content: SYSTEM }, { role: 'user', content: task }];
  let prompt = 0, cached = 0, seen = 0, prev = 0, prevOut = 0, convHits = 0;
  for (let t = 1; t <= TURNS; t++) {
    const r = await post({ model: 'm', messages, tools: TOOLS, max_tokens: 48, temperature: 0 });
    const u = r.usage, m = r.choices[0].message, c = u.prompt_tokens_details.cached_tokens;
    prompt += u.prompt_tokens;
    cached += c;
    seen += prev; // the previous prompt is a prefix of this one: the most a cache of this session could serve
    // where the cache resumed: the conversation checkpoint (previous prompt + reply, all but the reply's
    // last token, which was never forwarded), the previous prompt's n - 1 (the template re-rendered the
    // reply differently), or something else (tokens lost at the turn end)
    const kind = t === 1 ? (c ? 'an earlier session' : 'cold')
      : c === prev + prevOut - 1 ? 'conversation checkpoint' : c === prev - 1 ? "previous prompt's n - 1" : 'other';
    convHits += kind === 'conversation checkpoint';
    console.log(`turn ${String(t).padStart(2)}: ${u.prompt_tokens} prompt tokens, ${c} from the cache (${kind}; ` +
                `new ${u.prompt_tokens - c}, reply ${u.completion_tokens} tokens)`);
    prev = u.prompt_tokens;
    prevOut = u.completion_tokens;
    if (m.tool_calls && m.tool_calls.length) {
      messages.push({ role: 'assistant', content: m.content ?? '', tool_calls: m.tool_calls });
      for (const c of m.tool_calls) messages.push({ role: 'tool', tool_call_id: c.id, content: fileText(t) });
    } else {
      messages.push({ role: 'assistant', content: m.content ?? '' });
      messages.push({ role: 'user', content: `Tool result (read_file src/math_${t}.py):\n${fileText(t)}` });
    }
  }
  console.log(`session: ${cached} of ${prompt} prompt tokens from the cache (${(100 * cached / prompt).toFixed(1)}%); ` +
              `the earlier prompts of the session held ${seen}; ${convHits} of ${TURNS - 1} turns resumed at the ` +
              `conversation checkpoint`);
  return [prompt, cached];
}

// the first session starts cold; the second (another task, same system prompt and tools) is what an
// agent's next session looks like to a server that has seen one
const [p1, c1] = await session('The tests in tests/test_math.py fail after the last refactor. Find out why and fix it.');
const [p2, c2] = await session('Add type hints to src/math_1.py and make sure the tests still pass.');
console.log(`total: ${c1 + c2} of ${p1 + p2} prompt tokens from the cache (${(100 * (c1 + c2) / (p1 + p2)).toFixed(1)}%)`);
