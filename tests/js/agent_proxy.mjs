// agent_proxy.mjs — a loopback HTTP proxy in front of `mtplx serve` for tests/integration/agents.sh:
// forwards every request unchanged and appends {path, status, request, response} per exchange to a
// JSON-lines log, so the test can check what a real agent client sent and got back (tool-call
// round trips, error shapes) without trusting the client's own output.
//   node agent_proxy.mjs TARGET_URL LOG_FILE   -> prints "proxy listening on PORT" when ready
import http from 'node:http';
import fs from 'node:fs';

const [, , target, logFile] = process.argv;
const up = new URL(target);
const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
        const body = Buffer.concat(chunks);
        const headers = { ...req.headers, host: up.host };
        const fwd = http.request({ host: up.hostname, port: up.port, path: req.url, method: req.method, headers }, (r) => {
            res.writeHead(r.statusCode, r.headers);
            const out = [];
            r.on('data', (c) => {
                out.push(c);
                res.write(c);
            });
            r.on('end', () => {
                res.end();
                fs.appendFileSync(logFile, JSON.stringify({
                    method: req.method, path: req.url, status: r.statusCode,
                    request: body.toString('utf8'), response: Buffer.concat(out).toString('utf8'),
                }) + '\n');
            });
        });
        fwd.on('error', (e) => {
            res.writeHead(502);
            res.end(String(e));
        });
        fwd.end(body);
    });
});
server.listen(0, '127.0.0.1', () => console.log(`proxy listening on ${server.address().port}`));
