// agents_check.mjs — reads the exchange log of tests/js/agent_proxy.mjs and checks one agent run:
//   roundtrip API LOG : every generation request got 200 and a well-formed answer; at least one answer
//                       carried a tool call, and a later request sent that call's result back (by id)
//                       and was answered too
//   overflow  API LOG : the server refused with the API's own context-overflow error (400)
//   answered  API LOG : every generation request got 200 and a well-formed, finished answer
// API is anthropic | chat | responses. Exit 0 when the check holds; prints what it found.
import fs from 'node:fs';

const [, , mode, api, logFile] = process.argv;
const lines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean) : [];
const ex = lines.map((l) => JSON.parse(l));
const genPath = { anthropic: '/v1/messages', chat: '/v1/chat/completions', responses: '/v1/responses' }[api];
let gens = ex.filter((e) => e.method === 'POST' && e.path.split('?')[0] === genPath);
const fail = (m) => {
    console.log(`agents_check ${mode} ${api}: FAIL: ${m}`);
    process.exit(1);
};

// SSE "data:" payloads of a streamed answer, or the JSON body of a plain one
function payloads(text) {
    const t = text.trim();
    if (t.startsWith('{')) return [JSON.parse(t)];
    const out = [];
    for (const l of text.split('\n')) {
        if (!l.startsWith('data: ') || l.startsWith('data: [DONE]')) continue;
        try {
            out.push(JSON.parse(l.slice(6)));
        } catch {
            fail(`an SSE data line is not JSON: ${l.slice(0, 200)}`);
        }
    }
    return out;
}

// ids of the tool calls in one answer
function callIds(e) {
    const ids = [];
    for (const p of payloads(e.response)) {
        if (api === 'anthropic') {
            if (p.content_block?.type === 'tool_use') ids.push(p.content_block.id);
            for (const b of p.content || []) if (b.type === 'tool_use') ids.push(b.id);
        } else if (api === 'chat') {
            for (const c of p.choices || []) for (const tc of (c.delta || c.message || {}).tool_calls || []) if (tc.id) ids.push(tc.id);
        } else {
            if (p.type === 'response.output_item.done' && p.item?.type === 'function_call') ids.push(p.item.call_id);
            for (const it of p.output || []) if (it.type === 'function_call') ids.push(it.call_id);
        }
    }
    return ids;
}

// ids of the tool results a request sends back
function resultIds(e) {
    const b = JSON.parse(e.request);
    const ids = [];
    if (api === 'anthropic') {
        for (const m of b.messages || []) if (Array.isArray(m.content)) for (const c of m.content) if (c.type === 'tool_result') ids.push(c.tool_use_id);
    } else if (api === 'chat') {
        for (const m of b.messages || []) if (m.role === 'tool') ids.push(m.tool_call_id);
    } else {
        for (const it of Array.isArray(b.input) ? b.input : []) if (it.type === 'function_call_output') ids.push(it.call_id);
    }
    return ids;
}

// a finished answer: the API's terminal event (stream) or a complete body
function complete(e) {
    const ps = payloads(e.response);
    if (api === 'anthropic') return ps.some((p) => p.type === 'message_stop' || (p.type === 'message' && p.stop_reason));
    if (api === 'chat') return ps.some((p) => (p.choices || []).some((c) => c.finish_reason));
    return ps.some((p) => ['response.completed', 'response.incomplete'].includes(p.type) || p.object === 'response');
}

if (!gens.length) fail(`no request reached ${genPath} (${ex.length} exchanges logged)`);
if (mode === 'overflow') {
    const bad = gens.find((e) => e.status === 400);
    if (!bad) fail(`no 400 among ${gens.length} requests`);
    const body = JSON.parse(bad.response);
    const msg = body.error?.message || '';
    const ok = api === 'anthropic' ? /^prompt is too long: \d+ tokens > \d+ maximum$/.test(msg) && body.error.type === 'invalid_request_error'
        : body.error?.code === 'context_length_exceeded' && (api === 'chat' ? body.error.param === 'messages' : body.error.param === 'input');
    if (!ok) fail(`the overflow error is not in the API's wording: ${bad.response}`);
    console.log(`agents_check overflow ${api}: ok (${gens.length} requests, 400: ${msg})`);
    process.exit(0);
}
// a run may end on the context filling up (the API's overflow error); everything before is answered
const overflowed = (e) => e.status === 400 && /context_length_exceeded|prompt is too long/.test(e.response);
while (gens.length && overflowed(gens[gens.length - 1])) gens.pop();
for (const e of gens) {
    if (e.status !== 200) fail(`${e.path} answered ${e.status}: ${e.response.slice(0, 300)}`);
    if (!complete(e)) fail(`an answer did not finish: ${e.response.slice(-300)}`);
}
if (mode === 'answered') {
    console.log(`agents_check answered ${api}: ok (${gens.length} requests, all answered)`);
    process.exit(0);
}
let trip = null;
gens.forEach((e, i) => {
    for (const id of callIds(e)) {
        const back = gens.slice(i + 1).find((l) => resultIds(l).includes(id));
        if (back && !trip) trip = { id, request: gens.indexOf(back) };
    }
});
const calls = gens.reduce((n, e) => n + callIds(e).length, 0);
if (!trip) fail(`${gens.length} requests, ${calls} tool calls, but no tool result came back for any of them`);
console.log(`agents_check roundtrip ${api}: ok (${gens.length} requests, ${calls} tool calls; the result of ${trip.id} came back in request ${trip.request + 1})`);
