// lib.mjs — helpers shared by the integration clients (grammar_check, server_abuse, server_sdk, webui).

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
