// Starting and stopping a real `recourse serve` for the browser tests and the checks in `./dev`:
// a free port, a temporary database, and a stop that waits for the process to exit.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

export async function waitHealthy(url, child, deadlineMs) {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`recourse serve exited early (${child.exitCode ?? child.signalCode})`);
    }
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

/** Stops the child with SIGTERM (SIGKILL after `graceMs`); resolves with its exit code or signal. */
export function stop(child, graceMs) {
  return new Promise((ok) => {
    if (child.exitCode !== null || child.signalCode !== null) return ok(child.exitCode ?? child.signalCode);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      ok(code ?? signal);
    });
    child.kill('SIGTERM');
  });
}

/**
 * Starts `bin serve` on a free loopback port with a database in a new temporary folder, from
 * `cwd`, logging to `logPath`. Resolves once `/healthz` answers; `close()` stops the server and
 * removes the folder.
 */
export async function startServer({ bin, cwd, logPath, extraArgs = [], env = {} }) {
  const dir = mkdtempSync(join(tmpdir(), 'recourse-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = openSync(logPath, 'w');
  const child = spawn(bin, ['serve', '--addr', `127.0.0.1:${port}`, '--database', join(dir, 'recourse.db'), ...extraArgs], {
    cwd,
    stdio: ['ignore', log, log],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info', RECOURSE_LOG_FORMAT: 'json', ...env },
  });
  let exit = null;
  const close = async () => {
    exit ??= stop(child, 5000);
    const code = await exit;
    rmSync(dir, { recursive: true, force: true });
    return code;
  };
  try {
    await waitHealthy(url, child, 30000);
  } catch (err) {
    await close();
    throw err;
  }
  return { url, child, close };
}
