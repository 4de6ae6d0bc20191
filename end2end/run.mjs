// Runs the browser tests against a real `recourse serve`: a free port, a temporary database,
// and the server stopped afterwards whatever happens (test failure, crash, Ctrl-C).
//
// Usage: node end2end/run.mjs   (expects `cargo leptos build --release` to have run)
// Env: RECOURSE_BIN (default target/release/recourse), RECOURSE_SITE_ROOT (default target/site).

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync, existsSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const bin = resolve(root, process.env.RECOURSE_BIN ?? 'target/release/recourse');
const siteRoot = resolve(root, process.env.RECOURSE_SITE_ROOT ?? 'target/site');
const artifacts = join(root, 'end2end', 'artifacts');

for (const [what, path] of [['server binary', bin], ['built UI (WASM)', join(siteRoot, 'pkg', 'recourse.wasm')]]) {
  if (!existsSync(path)) {
    console.error(`end2end: missing ${what} at ${path}; run \`cargo leptos build --release\` first`);
    process.exit(2);
  }
}

function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

async function waitHealthy(url, server, deadlineMs) {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (server.exitCode !== null) throw new Error(`recourse serve exited early with ${server.exitCode}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`recourse serve did not become healthy within ${deadlineMs} ms`);
}

function stop(child, graceMs) {
  return new Promise((ok) => {
    if (child.exitCode !== null || child.signalCode !== null) return ok();
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      ok();
    });
    child.kill('SIGTERM');
  });
}

const dir = mkdtempSync(join(tmpdir(), 'recourse-e2e-'));
mkdirSync(artifacts, { recursive: true });
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const log = openSync(join(artifacts, 'server.log'), 'w');
const server = spawn(bin, ['serve', '--addr', `127.0.0.1:${port}`, '--database', join(dir, 'e2e.db'), '--site-root', siteRoot], {
  cwd: root,
  stdio: ['ignore', log, log],
  env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info', RECOURSE_LOG_FORMAT: 'json' },
});

let tests = null;
const cleanup = async () => {
  if (tests && tests.exitCode === null) tests.kill('SIGTERM');
  await stop(server, 5000);
  rmSync(dir, { recursive: true, force: true });
};
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    await cleanup();
    process.exit(130);
  });
}

let code = 1;
try {
  await waitHealthy(url, server, 30000);
  console.log(`end2end: recourse serve is up at ${url} (log: end2end/artifacts/server.log)`);
  tests = spawn(process.execPath, ['--test', '--test-concurrency=1', join(root, 'end2end', 'tests')], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, RECOURSE_URL: url, RECOURSE_ARTIFACTS: artifacts },
  });
  code = await new Promise((ok) => tests.on('exit', (c, s) => ok(c ?? (s ? 1 : 0))));
} catch (err) {
  console.error(`end2end: ${err.message}`);
  code = 1;
} finally {
  await cleanup();
}
process.exit(code);
