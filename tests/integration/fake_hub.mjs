// fake_hub.mjs — a local stand-in for a Hugging Face hub, for tests/integration/pull.sh.
//
// usage: node fake_hub.mjs MODEL_DIR LOG_FILE   (prints the port it listens on, then serves)
//
// It serves MODEL_DIR (every file except *.xz) as the repositories below, with the hub's API shapes:
//   GET /api/models/ORG/NAME/revision/REV     {"id", "sha": COMMIT, "siblings": [{"rfilename"}]}
//   GET /api/models/ORG/NAME/tree/REV?recursive=true
//        [{"type": "file", "path", "size", "oid" (git blob id), "lfs": {"oid": sha256, "size",
//        "pointerSize"}}], 4 entries a page with a `Link: <...>; rel="next"` header
//   GET /ORG/NAME/resolve/REV/PATH    LFS files (*.safetensors): 302 to /cdn/ORG/NAME/SHA256 with
//        X-Linked-Etag, X-Linked-Size, X-Repo-Commit; other files: 200 with ETag = git blob id
//   GET /cdn/ORG/NAME/SHA256          the bytes, with Range support (206 / 416)
// Errors carry X-Error-Code like the hub (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo).
// Repositories:
//   test/tiny      the model
//   test/gated     the same, 401 without a token, 403 with a token other than "Bearer hf_secret"
//   test/corrupt   the same, but the CDN serves model-00004-of-00004.safetensors with one byte flipped
//   test/huge      the same, but the file list says model-00001-of-00004.safetensors has 10^15 bytes
//   test/flaky     the same, but the first request for model-00001-of-00004.safetensors that carries no
//                  Range header gets half the file, then the connection is destroyed
// Every request is appended to LOG_FILE as a JSON line {method, url, range, auth, status}.
import { createHash } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const [dir, logFile] = process.argv.slice(2);
const COMMIT = createHash("sha1").update("fake-hub-commit-1").digest("hex");
const REPOS = new Set(["test/tiny", "test/gated", "test/corrupt", "test/flaky", "test/huge"]);
const TOKEN = "Bearer hf_secret";
const PAGE = 4;

const files = fs
    .readdirSync(dir)
    .filter((f) => !f.endsWith(".xz") && fs.statSync(path.join(dir, f)).isFile())
    .sort()
    .map((f) => {
        const data = fs.readFileSync(path.join(dir, f));
        const gitOid = createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex");
        const lfs = f.endsWith(".safetensors");
        return { path: f, data, gitOid, lfs, sha256: createHash("sha256").update(data).digest("hex") };
    });
let flakyCut = false;

function log(req, status) {
    fs.appendFileSync(
        logFile,
        JSON.stringify({ method: req.method, url: req.url, range: req.headers.range || null,
                         auth: req.headers.authorization || null, status }) + "\n",
    );
}

function fail(req, res, status, code, msg) {
    log(req, status);
    res.writeHead(status, { "Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": msg });
    res.end(JSON.stringify({ error: msg }));
}

// Access check of a repository; returns true when the request may go on.
function allowed(req, res, repo) {
    if (!REPOS.has(repo)) return fail(req, res, 404, "RepoNotFound", `Repository not found: ${repo}`), false;
    if (repo === "test/gated") {
        const auth = req.headers.authorization;
        if (!auth) return fail(req, res, 401, "GatedRepo", "Access to this gated repo is restricted."), false;
        if (auth !== TOKEN) return fail(req, res, 403, "GatedRepo", "Access to this gated repo is not granted."), false;
    }
    return true;
}

function sendJson(req, res, obj, headers = {}) {
    log(req, 200);
    res.writeHead(200, { "Content-Type": "application/json", ...headers });
    res.end(JSON.stringify(obj));
}

function cdn(req, res, repo, sha) {
    const f = files.find((x) => x.sha256 === sha);
    if (!f) return fail(req, res, 404, "EntryNotFound", "no such object");
    let data = f.data;
    if (repo === "test/corrupt" && f.path === "model-00004-of-00004.safetensors") {
        data = Buffer.from(data);
        data[data.length >> 1] ^= 0x40;
    }
    const m = /^bytes=(\d+)-$/.exec(req.headers.range || "");
    if (m) {
        const start = Number(m[1]);
        if (start >= data.length) {
            log(req, 416);
            res.writeHead(416, { "Content-Range": `bytes */${data.length}` });
            return res.end();
        }
        log(req, 206);
        res.writeHead(206, { "Content-Length": data.length - start,
                             "Content-Range": `bytes ${start}-${data.length - 1}/${data.length}`,
                             "Accept-Ranges": "bytes" });
        return res.end(data.subarray(start));
    }
    if (repo === "test/flaky" && f.path === "model-00001-of-00004.safetensors" && !flakyCut) {
        flakyCut = true;
        log(req, 200);
        res.writeHead(200, { "Content-Length": data.length, "Accept-Ranges": "bytes" });
        res.write(data.subarray(0, data.length >> 1), () => setTimeout(() => req.socket.destroy(), 50));
        return;
    }
    log(req, 200);
    res.writeHead(200, { "Content-Length": data.length, "Accept-Ranges": "bytes" });
    res.end(data);
}

const server = http.createServer((req, res) => {
    const u = new URL(req.url, "http://x");
    const p = u.pathname.split("/").map(decodeURIComponent);
    // /api/models/ORG/NAME/(revision|tree)/REV
    if (p[1] === "api" && p[2] === "models" && p.length >= 7) {
        const repo = `${p[3]}/${p[4]}`;
        if (!allowed(req, res, repo)) return;
        const rev = p.slice(6).join("/");
        if (rev !== "main" && rev !== COMMIT) return fail(req, res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
        if (p[5] === "revision")
            return sendJson(req, res, { id: repo, sha: COMMIT, siblings: files.map((f) => ({ rfilename: f.path })) });
        if (p[5] === "tree") {
            const cursor = Number(u.searchParams.get("cursor") || 0);
            const page = files.slice(cursor, cursor + PAGE).map((f) => {
                const e = { type: "file", oid: f.gitOid, size: f.data.length, path: f.path };
                if (f.lfs) e.lfs = { oid: f.sha256, size: f.data.length, pointerSize: 134 };
                if (repo === "test/huge" && f.path === "model-00001-of-00004.safetensors") e.size = e.lfs.size = 1e15;
                return e;
            });
            const headers = {};
            if (cursor + PAGE < files.length) {
                const next = `http://${req.headers.host}${u.pathname}?recursive=true&cursor=${cursor + PAGE}`;
                headers.Link = `<${next}>; rel="next"`;
            }
            return sendJson(req, res, page, headers);
        }
    }
    // /ORG/NAME/resolve/REV/PATH
    if (p.length >= 6 && p[3] === "resolve") {
        const repo = `${p[1]}/${p[2]}`;
        if (!allowed(req, res, repo)) return;
        if (p[4] !== "main" && p[4] !== COMMIT) return fail(req, res, 404, "RevisionNotFound", "Invalid rev id");
        const f = files.find((x) => x.path === p.slice(5).join("/"));
        if (!f) return fail(req, res, 404, "EntryNotFound", "Entry not found");
        if (f.lfs) {
            log(req, 302);
            res.writeHead(302, { Location: `/cdn/${repo}/${f.sha256}`, "X-Linked-Etag": `"${f.sha256}"`,
                                 "X-Linked-Size": f.data.length, "X-Repo-Commit": COMMIT, ETag: `"${f.gitOid}"` });
            return res.end();
        }
        log(req, 200);
        res.writeHead(200, { "Content-Length": f.data.length, ETag: `"${f.gitOid}"`, "X-Repo-Commit": COMMIT });
        return res.end(f.data);
    }
    if (p[1] === "cdn" && p.length === 5) return cdn(req, res, `${p[2]}/${p[3]}`, p[4]);
    fail(req, res, 404, "EntryNotFound", "no route");
});
server.listen(0, "127.0.0.1", () => {
    console.log(server.address().port);
});
