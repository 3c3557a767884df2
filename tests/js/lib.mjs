// lib.mjs — helpers shared by the integration clients (grammar_check, server_abuse, server_sdk, webui,
// batch_load, conv_load).

// Run one named check: prints "ok   NAME (seconds)" when fn resolves; on a throw prints
// "FAIL NAME: stack" and exits the process with status 1 (the calling script's verdict).
export async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  }
}

// The JSON events of a server-sent-event body (a fetch Response's body), in order; "[DONE]" and empty
// events are skipped. A generation that fails after the 200 ends its stream with an error event
// (finish_reason "error"): that throws with the server's message, so a failed stream never reads as a
// completed (empty) answer.
export async function* sseEvents(body) {
  let buf = '';
  const dec = new TextDecoder();
  for await (const b of body) {
    buf += dec.decode(b, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('');
      if (!data || data === '[DONE]') continue;
      const j = JSON.parse(data);
      if (j.error) throw new Error(`stream error event: ${JSON.stringify(j.error)}`);
      yield j;
    }
  }
}
