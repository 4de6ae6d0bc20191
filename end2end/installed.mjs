// Checks that a server binary built the plain Cargo way works on its own, as an installed
// binary would: copied out of the repository and started from an unrelated directory, it must
// start, answer /healthz, render the routes page, and serve the UI that page loads.
//
// Usage: node end2end/installed.mjs   (after `cargo build --release --bin recourse`)
// Env: RECOURSE_BIN (default target/release/recourse).

import { copyFileSync, mkdtempSync, mkdirSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './lib/server.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const built = resolve(root, process.env.RECOURSE_BIN ?? 'target/release/recourse');

const place = mkdtempSync(join(tmpdir(), 'recourse-installed-'));
const bin = join(place, 'bin', 'recourse');
const elsewhere = mkdtempSync(join(tmpdir(), 'recourse-cwd-'));
const results = [];
let server = null;

async function check(name, fn) {
  try {
    await fn();
    results.push([name, null]);
    console.log(`  ok  ${name}`);
  } catch (err) {
    results.push([name, err]);
    console.log(`  FAIL ${name}: ${err.message}`);
  }
}

function expect(cond, message) {
  if (!cond) throw new Error(message);
}

try {
  mkdirSync(dirname(bin), { recursive: true });
  copyFileSync(built, bin);
  chmodSync(bin, 0o755);
  console.log(`installed check: ${built} copied to ${bin}, started from ${elsewhere}`);

  await check('recourse serve starts and /healthz answers', async () => {
    server = await startServer({ bin, cwd: elsewhere, logPath: join(place, 'server.log') });
    const res = await fetch(`${server.url}/healthz`);
    expect(res.status === 200, `/healthz answered ${res.status}`);
    const body = await res.json();
    expect(body.status === 'ok' && body.database === 'ok', `/healthz said ${JSON.stringify(body)}`);
  });

  let stem = null;
  await check('the routes page renders on the server, with its hydration script', async () => {
    expect(server, 'no server');
    const res = await fetch(`${server.url}/`, { headers: { 'accept-encoding': 'br, gzip', authorization: `Bearer ${server.token}` } });
    expect(res.status === 200, `/ answered ${res.status}`);
    expect((res.headers.get('content-type') ?? '').startsWith('text/html'), `content-type ${res.headers.get('content-type')}`);
    const html = await res.text();
    expect(/<h1[^>]*>Routes(<!>)?<\/h1>/.test(html), 'no "Routes" heading in the page');
    const script = html.match(/<script type="module" nonce="([^"]+)"/);
    expect(script, 'no hydration script with a nonce');
    expect((res.headers.get('content-security-policy') ?? '').includes(`'nonce-${script[1]}'`), 'the CSP does not carry the script nonce');
    // The build's folder (a hash of the whole build) and the script's name in it.
    stem = html.match(/\/pkg\/([0-9a-f]{16}\/recourse\.[A-Za-z0-9_-]+)\.js/)?.[1];
    expect(stem, 'the page does not load its script from a content-hashed /pkg/<build>/recourse.<hash>.js');
  });

  for (const [ext, type] of [['js', 'text/javascript'], ['wasm', 'application/wasm'], ['css', 'text/css']]) {
    await check(`the page's .${ext} is served from the binary, compressed and cached for a year`, async () => {
      expect(stem, 'no asset name from the page');
      const res = await fetch(`${server.url}/pkg/${stem}.${ext}`, { headers: { 'accept-encoding': 'br, gzip' } });
      expect(res.status === 200, `answered ${res.status}`);
      expect(res.headers.get('content-type') === type, `content-type ${res.headers.get('content-type')}`);
      expect(res.headers.get('content-encoding') === 'br', `content-encoding ${res.headers.get('content-encoding')}`);
      expect(res.headers.get('cache-control') === 'public, max-age=31536000, immutable', `cache-control ${res.headers.get('cache-control')}`);
      const bytes = new Uint8Array(await res.arrayBuffer());
      expect(bytes.length > 0, 'empty body');
      if (ext === 'wasm') expect(bytes[0] === 0 && bytes[1] === 0x61 && bytes[2] === 0x73 && bytes[3] === 0x6d, 'not a WASM module');
    });
  }

  await check('SIGTERM stops it cleanly', async () => {
    expect(server, 'no server');
    const code = await server.close();
    server = null;
    expect(code === 0, `exit ${code}`);
  });
} finally {
  await server?.close();
  rmSync(elsewhere, { recursive: true, force: true });
  const failed = results.filter(([, err]) => err);
  if (failed.length) console.log(`installed check: server log kept at ${join(place, 'server.log')}`);
  else rmSync(place, { recursive: true, force: true });
  console.log(`installed check: ${results.length - failed.length} passed, ${failed.length} failed`);
  process.exitCode = failed.length ? 1 : 0;
}
