// logits_compare.js — helper for logits.sh: read safetensors files without dependencies.
//   node logits_compare.js ids GOLDEN            -> prints input_ids as "1,2,3"
//   node logits_compare.js prompt_len GOLDEN     -> prints prompt_len
//   node logits_compare.js compare OUT GOLDEN TOL -> compares logits, hidden, mtp_logits (when the
//       golden has them): max |d| <= TOL and identical argmax per row; exit 1 on any failure.
"use strict";
const fs = require("fs");

function load(path) {
  const buf = fs.readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const hdr = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
  const base = 8 + n, out = {};
  for (const [name, t] of Object.entries(hdr)) {
    if (name === "__metadata__") continue;
    const [a, b] = t.data_offsets;
    const bytes = buf.subarray(base + a, base + b);
    const copy = new ArrayBuffer(bytes.length);
    new Uint8Array(copy).set(bytes);
    const arr = t.dtype === "F32" ? new Float32Array(copy) : t.dtype === "I32" ? new Int32Array(copy) : null;
    out[name] = { shape: t.shape, data: arr };
  }
  return out;
}

function argmax(a, off, n) {
  let b = 0;
  for (let i = 1; i < n; i++) if (a[off + i] > a[off + b]) b = i;
  return b;
}

const [cmd, p1, p2, tolStr] = process.argv.slice(2);
if (cmd === "ids") {
  console.log(Array.from(load(p1).input_ids.data).join(","));
} else if (cmd === "prompt_len") {
  console.log(load(p1).prompt_len.data[0]);
} else if (cmd === "compare") {
  const out = load(p1), gold = load(p2), tol = Number(tolStr);
  let ok = true;
  for (const name of ["logits", "hidden", "mtp_logits"]) {
    if (!gold[name]) continue;
    if (!out[name]) { console.error(`${name}: missing in ${p1}`); ok = false; continue; }
    const a = out[name], g = gold[name];
    if (JSON.stringify(a.shape) !== JSON.stringify(g.shape)) {
      console.error(`${name}: shape ${JSON.stringify(a.shape)}, expected ${JSON.stringify(g.shape)}`);
      ok = false;
      continue;
    }
    // a NaN or infinity on either side fails outright (a later finite difference must not hide it)
    let mx = 0, nonfinite = 0;
    for (let i = 0; i < g.data.length; i++) {
      if (!Number.isFinite(a.data[i]) || !Number.isFinite(g.data[i])) { nonfinite++; continue; }
      const d = Math.abs(a.data[i] - g.data[i]);
      if (d > mx) mx = d;
    }
    if (nonfinite) mx = Infinity;
    const [rows, cols] = g.shape;
    let bad = 0;
    if (name !== "hidden")
      for (let t = 0; t < rows; t++) bad += argmax(a.data, t * cols, cols) !== argmax(g.data, t * cols, cols);
    console.log(`  ${name}: max|d| ${mx.toExponential(3)}, argmax mismatches ${bad}, non-finite ${nonfinite}`);
    if (!(mx <= tol) || bad) ok = false;
  }
  process.exit(ok ? 0 : 1);
} else {
  console.error("usage: logits_compare.js ids GOLDEN | compare OUT GOLDEN TOL");
  process.exit(2);
}
